"""Authenticated proxy to the Dask dashboards of the clusters this server manages, and nothing else."""

from __future__ import annotations

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from jupyter_server_proxy.handlers import ProxyHandler
from tornado import web
from tornado.httpclient import HTTPClientError

from .errors import NotFound
from .handlers import JSONErrorMixin

AUTH_RESOURCE = "clustermgr"

#: Request headers that carry the user's Jupyter credentials: a scheduler never sees them.
CREDENTIAL_HEADERS = ("Authorization", "Cookie", "X-XSRFToken", "X-Xsrftoken", "X-CSRFToken")


class DashboardProxyHandler(JSONErrorMixin, ProxyHandler):
    """Proxies ``clustermgr/dashboard/{id}/{path}`` (GET, HEAD and WebSocket) to that cluster's dashboard.

    The target is looked up from the cluster id, never taken from the URL, so this cannot be
    used to reach any other host or port; a cluster that failed or stopped has none (404).
    The user's credentials are not forwarded, redirects stay below ``clustermgr/dashboard/{id}/``,
    and any other verb is answered with a JSON 405.
    """

    auth_resource = AUTH_RESOURCE

    def __init__(self, *args, **kwargs):
        kwargs["host_allowlist"] = []  # set per request to the one host of that cluster's dashboard
        super().__init__(*args, **kwargs)

    async def prepare(self, *args, **kwargs):
        await super().prepare(*args, **kwargs)  # authenticates every request, WebSocket included
        if not await ensure_async(self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE)):
            raise web.HTTPError(403)

    def _target(self, cluster_id: str) -> tuple[str, int]:
        manager = self.settings["clustermgr_manager"]
        try:
            cluster = manager.get(cluster_id)
        except NotFound:
            raise web.HTTPError(404, f"no cluster with id {cluster_id!r}") from None
        address = cluster.dashboard_address
        if not address:
            raise web.HTTPError(404, f"cluster {cluster_id!r} has no dashboard (it is {cluster.status})")
        host, port = address.rsplit(":", 1)
        host = host.strip("[]")
        self.host_allowlist = [host]
        self.proxy_base = url_path_join("clustermgr", "dashboard", cluster_id)  # redirects are rewritten below it
        return host, int(port)

    def proxy_request_headers(self):
        headers = super().proxy_request_headers()
        for name in CREDENTIAL_HEADERS:
            headers.pop(name, None)
        return headers

    @web.authenticated
    @authorized
    async def get(self, cluster_id: str, proxied_path: str = ""):
        if self.request.headers.get("Upgrade", "").lower() == "websocket":
            # Before the handshake: a WebSocket to a cluster that is gone (Bokeh reconnecting) gets a plain 404.
            self._target(cluster_id)
        return await super().get(cluster_id, proxied_path)

    async def http_get(self, cluster_id: str, proxied_path: str = ""):
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, proxied_path or "/")

    @web.authenticated
    @authorized
    async def head(self, cluster_id: str, proxied_path: str = ""):
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, proxied_path or "/")

    async def open(self, cluster_id: str, proxied_path: str = ""):
        try:
            host, port = self._target(cluster_id)
            return await self.proxy_open(host, port, proxied_path or "/")
        except (web.HTTPError, HTTPClientError, OSError) as exc:  # the cluster went away during the handshake
            self.log.info("dashboard WebSocket of cluster %s closed: %s", cluster_id, exc)
            self.close()

    @web.authenticated
    @authorized
    def _not_allowed(self, *args, **kwargs):
        raise web.HTTPError(405, f"the dashboard proxy answers GET and HEAD only, not {self.request.method}")

    post = put = delete = patch = options = _not_allowed


def dashboard_route() -> tuple[str, type]:
    return (r"clustermgr/dashboard/(?P<cluster_id>[A-Za-z0-9_-]+)(?P<proxied_path>/.*)?", DashboardProxyHandler)
