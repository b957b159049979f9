"""The REST routes and the one route table: thin adapters from requests to :class:`ClusterManager` calls.

Every verb is authenticated and authorized through jupyter_server (resource ``clustermgr``);
domain errors become JSON ``{code, message, field?}`` with their status (see :mod:`.web_base`).
The push feed is :mod:`.feed`, the dashboard proxy :mod:`.dashboard_proxy` (and the kernels' way into it,
:mod:`.kernel_dashboard_link`).
"""

from __future__ import annotations

import hashlib

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from clustermgr_lab.cluster.logs import list_logs, parse_offset, parse_tail, read_log
from clustermgr_lab.web.base import AUTH_RESOURCE, BaseHandler
from clustermgr_lab.web.dashboard_proxy import dashboard_route
from clustermgr_lab.web.kernel_dashboard_link import dashboard_at_route
from clustermgr_lab.web.log_stream import LogFollowHandler
from clustermgr_lab.web.openapi import openapi_document
from clustermgr_lab.web.stream import StreamHandler

__all__ = ["AUTH_RESOURCE", "route_table"]


class ClustersHandler(BaseHandler):
    # (the last list text answered, its ETag): a list asked for again is not hashed again
    _kept_etag: tuple[str, str] = ("", "")
    _text = ""

    @web.authenticated
    @authorized
    def get(self) -> None:
        self._text = self.manager.list_json()  # the same object while no cluster changed
        self.reply_json_text(self._text)

    def compute_etag(self) -> str | None:
        """Tornado's ETag (a SHA-1 of the body), made once per list text rather than once per GET."""
        kept_text, etag = ClustersHandler._kept_etag
        if kept_text is not self._text:
            etag = f'"{hashlib.sha1(self._text.encode()).hexdigest()}"'
            ClustersHandler._kept_etag = (self._text, etag)
        return etag

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


class RestartHandler(BaseHandler):
    @web.authenticated
    @authorized
    def post(self, cluster_id: str) -> None:
        cluster = self.manager.restart(cluster_id)
        self.reply(self.manager.describe(cluster), status=202)


class EventsHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self, cluster_id: str) -> None:
        self.reply({"events": self.manager.events(cluster_id)})


class WorkersHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster_id: str) -> None:
        self.reply({"workers": await self.manager.workers(cluster_id)})


class LogsHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster_id: str) -> None:
        self.reply({"logs": await list_logs(self.manager.get(cluster_id))})


class LogHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster_id: str, name: str) -> None:
        lines = parse_tail(self.get_query_argument("tail", None, strip=False))
        offset = parse_offset(self.get_query_argument("offset", None, strip=False))
        self.reply(await read_log(self.manager.get(cluster_id), name, lines, offset))


class TimelineHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self, cluster_id: str) -> None:
        self.reply(self.manager.timeline(cluster_id))


class UsageHandler(BaseHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply(self.manager.usage_summary(self.get_query_argument("days", "7", strip=False)))


class TemplatesHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.manager.check_backends()
        self.reply({"templates": self.manager.list_templates(), "limits": await self.manager.limits()})


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


def route_table() -> list[tuple[str, type]]:
    """Every clustermgr route, as patterns relative to the server's base URL (ExtensionApp prefixes it)."""
    api = "clustermgr/api"
    cluster_id = r"(?P<cluster_id>[^/]+)"  # any id: an unknown one is a JSON 404 from the handler
    log_name = r"(?P<name>[^/]+)"  # any name: one the cluster has no log of (or a path) is a JSON 404
    return [
        (url_path_join(api, "clusters"), ClustersHandler),
        (url_path_join(api, "clusters", cluster_id), ClusterHandler),
        (url_path_join(api, "clusters", cluster_id, "events"), EventsHandler),
        (url_path_join(api, "clusters", cluster_id, "workers"), WorkersHandler),
        (url_path_join(api, "clusters", cluster_id, "logs"), LogsHandler),
        (url_path_join(api, "clusters", cluster_id, "logs", log_name), LogHandler),
        (url_path_join(api, "clusters", cluster_id, "logs", log_name, "follow"), LogFollowHandler),
        (url_path_join(api, "clusters", cluster_id, "timeline"), TimelineHandler),
        (url_path_join(api, "usage"), UsageHandler),
        (url_path_join(api, "clusters", cluster_id, "restart"), RestartHandler),
        (url_path_join(api, "templates"), TemplatesHandler),
        (url_path_join(api, "status"), StatusHandler),
        (url_path_join(api, "stream"), StreamHandler),
        (url_path_join(api, "openapi.json"), OpenAPIHandler),
        dashboard_route(),
        dashboard_at_route(),
    ]
