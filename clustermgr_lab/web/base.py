"""The web layer's base: domain errors to JSON, and the authentication and authorization every route shares.

Every clustermgr route (REST, the push feed, the dashboard proxy) builds on this module and on
nothing else of the web layer, so there is no import between routes. A new domain error (a
subclass of :class:`~.errors.ClusterManagerError` with ``status`` and ``code``) is answered as JSON
with its status without any handler knowing it.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import APIHandler
from tornado import web

from clustermgr_lab.domain.errors import ClusterManagerError
from clustermgr_lab.web.json_body import decode_json_body

AUTH_RESOURCE = "clustermgr"
ERROR_CODES = {400: "invalid", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 409: "conflict"}
NOT_AUTHENTICATED = "not authenticated: send the Jupyter token as 'Authorization: token <token>', or log in"


class JSONErrorMixin:
    """Every error a clustermgr route answers is JSON ``{code, message, field?}``, never a page or a traceback.

    The message names the field it is about, so that it reads well on its own.
    """

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ClusterManagerError):
            body = exc.to_dict()
            if exc.field and exc.field not in exc.message:
                body["message"] = f"{exc.field}: {exc.message}"
        elif status_code < 500:
            message = None
            if isinstance(exc, web.HTTPError) and exc.log_message:
                message = exc.log_message % exc.args if exc.args else exc.log_message
            if not message and status_code == 403 and self._user() is None:
                message = NOT_AUTHENTICATED
            body = {"code": ERROR_CODES.get(status_code, "http_error"), "message": message or self._reason}
        else:
            body = {"code": "internal_error", "message": "internal error; see the server log"}
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    def _user(self) -> Any:
        try:
            return self.current_user
        except RuntimeError:  # the request failed before jupyter_server looked the user up
            return None

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, ClusterManagerError):
            if self._finished:
                return
            self.send_error(e.status, exc_info=(type(e), e, e.__traceback__))
            return
        super()._handle_request_exception(e)


class ReadAccessMixin:
    """The checks of a long-lived read (the push feed, the dashboard proxy) that jupyter_server's decorators leave out.

    Authorization for ``read`` on ``clustermgr``, and the origin check even for token-authenticated
    requests (jupyter_server skips it for those).
    """

    auth_resource = AUTH_RESOURCE

    def skip_check_origin(self) -> bool:
        """Never skip the origin check: jupyter_server would for token-authenticated requests."""
        return False

    async def authorize_read(self, origin: str | None) -> None:
        """Refuse (403) a user not authorized to read clusters, or a cross-origin ``origin``."""
        if not await ensure_async(self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE)):
            raise web.HTTPError(403, f"User is not authorized to read on resource: {AUTH_RESOURCE}.")
        if origin is not None and not self.check_origin(origin):
            raise web.HTTPError(403, f"cross-origin WebSocket connections are refused (Origin: {origin})")


class ManagerMixin:
    """Gives a handler the server's :class:`~.manager.ClusterManager`."""

    @property
    def manager(self):
        return self.settings["clustermgr_manager"]


class BaseHandler(JSONErrorMixin, ManagerMixin, APIHandler):
    """A REST handler: JSON in and out, domain errors as JSON, the manager at hand."""

    auth_resource = AUTH_RESOURCE

    async def prepare(self, *args: Any, **kwargs: Any) -> None:
        await super().prepare(*args, **kwargs)
        if self.current_user:  # an authenticated use of the API: work done for someone looking may run
            self.manager.attention.noticed()

    def json_body(self) -> Any:
        if not self.request.body:
            return {}
        return decode_json_body(self.request.body)

    def reply(self, data: Any, status: int = 200) -> None:
        self.reply_json_text(json.dumps(data), status)

    def reply_json_text(self, text: str, status: int = 200) -> None:
        """Answer with ``text``, JSON already encoded."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(text)
