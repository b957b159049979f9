"""HTTP and WebSocket routes: thin adapters from requests to :class:`ClusterManager` calls.

Every verb is authenticated and authorized through jupyter_server (resource ``clustermgr``);
domain errors become JSON ``{code, message, field?}`` with their status.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.utils import url_path_join
from tornado import web, websocket

from .errors import ClusterManagerError
from .json_body import decode_json_body
from .manager import ClusterManager
from .openapi import openapi_document
from .send_budget import SendBudget

AUTH_RESOURCE = "clustermgr"


ERROR_CODES = {400: "invalid", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 409: "conflict"}
SLOW_SUBSCRIBER = 1013  # WebSocket close code "try again later"
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


class BaseHandler(JSONErrorMixin, APIHandler):
    """Maps domain errors to JSON and gives handlers the manager."""

    auth_resource = AUTH_RESOURCE

    @property
    def manager(self) -> ClusterManager:
        return self.settings["clustermgr_manager"]

    def json_body(self) -> Any:
        if not self.request.body:
            return {}
        return decode_json_body(self.request.body)

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, ClusterManagerError):
            if self._finished:
                return
            self.send_error(e.status, exc_info=(type(e), e, e.__traceback__))
            return
        super()._handle_request_exception(e)


class ClustersHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply({"clusters": self.manager.list()})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        cluster = await self.manager.create_durably(self.json_body())  # a 503 before anything starts, if not recorded
        self.reply(self.manager.describe(cluster), status=202)


class ClusterHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self, cluster_id: str) -> None:
        self.reply(self.manager.describe(self.manager.get(cluster_id)))

    @web.authenticated
    @authorized
    async def patch(self, cluster_id: str) -> None:
        extra = await self.manager.update_durably(cluster_id, self.json_body())
        self.reply({**self.manager.describe(self.manager.get(cluster_id)), **extra})

    @web.authenticated
    @authorized
    def delete(self, cluster_id: str) -> None:
        cluster = self.manager.delete(cluster_id)
        self.reply(self.manager.describe(cluster), status=202)


class EventsHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self, cluster_id: str) -> None:
        self.reply({"events": self.manager.events(cluster_id)})


class TemplatesHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply({"templates": self.manager.list_templates(), "limits": self.manager.limits()})


class StatusHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply(self.manager.status())


class OpenAPIHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply(openapi_document(self.base_url))


class StreamHandler(JSONErrorMixin, WebSocketMixin, websocket.WebSocketHandler, JupyterHandler):
    """Pushes a snapshot of all clusters, then one message per change, each with a ``seq``.

    Only same-origin connections (or origins allowed by ``ServerApp.allow_origin`` /
    ``allow_origin_pat``) are accepted, token or not.
    """

    auth_resource = AUTH_RESOURCE

    @property
    def manager(self) -> ClusterManager:
        return self.settings["clustermgr_manager"]

    def skip_check_origin(self) -> bool:
        """Never skip the origin check: jupyter_server would for token-authenticated requests."""
        return False

    async def pre_get(self) -> None:
        user = self.current_user
        if not await ensure_async(self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE)):
            raise web.HTTPError(403, f"User is not authorized to read on resource: {AUTH_RESOURCE}.")
        origin = self.request.headers.get("Origin") or self.request.headers.get("Sec-Websocket-Origin")
        if origin is not None and not self.check_origin(origin):
            raise web.HTTPError(403, f"cross-origin WebSocket connections are refused (Origin: {origin})")

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        result = super().get(*args, **kwargs)
        if result is not None:
            await result

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open(*args, **kwargs)
        self._budget = SendBudget(self.manager.stream_buffer_limit)
        self._send(self.manager.subscribe(self._send))

    def _send(self, message: dict) -> None:
        try:
            if self._budget.send(self.write_message, json.dumps(message)):
                return
        except websocket.WebSocketClosedError:
            self.manager.unsubscribe(self._send)
            return
        # It does not read: let it go rather than hold every change for it (it gets a snapshot when it reconnects).
        self.manager.unsubscribe(self._send)
        self.log.warning("clustermgr stream: closing a subscriber that is %d bytes behind", self._budget.waiting)
        self.close(SLOW_SUBSCRIBER, "too slow to keep up; reconnect for a fresh snapshot")

    def on_message(self, message: str | bytes) -> None:
        """The stream is one-way; anything a client sends is ignored."""

    def on_close(self) -> None:
        self.manager.unsubscribe(self._send)


def route_table() -> list[tuple[str, type]]:
    """Patterns relative to the server's base URL (ExtensionApp prefixes it)."""
    from .dashboard_proxy import dashboard_route  # it builds on JSONErrorMixin, above

    api = "clustermgr/api"
    cluster_id = r"(?P<cluster_id>[^/]+)"  # any id: an unknown one is a JSON 404 from the handler
    return [
        (url_path_join(api, "clusters"), ClustersHandler),
        (url_path_join(api, "clusters", cluster_id), ClusterHandler),
        (url_path_join(api, "clusters", cluster_id, "events"), EventsHandler),
        (url_path_join(api, "templates"), TemplatesHandler),
        (url_path_join(api, "status"), StatusHandler),
        (url_path_join(api, "stream"), StreamHandler),
        (url_path_join(api, "openapi.json"), OpenAPIHandler),
        dashboard_route(),
    ]
