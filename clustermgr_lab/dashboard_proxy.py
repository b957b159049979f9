"""Authenticated proxy to the Dask dashboards of the clusters this server manages, and nothing else."""

from __future__ import annotations

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server_proxy.handlers import ProxyHandler
from tornado import web

from .cluster import UNRESPONSIVE
from .errors import NotFound

AUTH_RESOURCE = "clustermgr"


class DashboardProxyHandler(ProxyHandler):
    """Proxies ``clustermgr/dashboard/{id}/{path}`` (HTTP and WebSocket) to that cluster's dashboard.

    The target is looked up from the cluster id, never taken from the URL, so this cannot be
    used to reach any other host or port.
    """

    auth_resource = AUTH_RESOURCE
    # The dashboard only needs to be read (its interactive parts are WebSocket, a GET upgrade);
    # jupyter-server-proxy leaves XSRF checks to the proxied app, so other verbs are not offered at all.
    SUPPORTED_METHODS = ("GET", "HEAD")
    #: Seconds to wait for a dashboard: a stopped scheduler accepts connections but never answers.
    connect_timeout = 5.0
    request_timeout = 20.0

    def __init__(self, *args, **kwargs):
        kwargs["host_allowlist"] = ["127.0.0.1"]
        super().__init__(*args, **kwargs)

    async def prepare(self, *args, **kwargs):
        # JupyterHandler's prepare (it identifies the user), not ProxyHandler's: that one redirects an anonymous
        # GET to the login page and then goes on proxying. Every request, WebSocket included, is refused instead.
        prepared = JupyterHandler.prepare(self, _redirect_to_login=False)
        if prepared is not None:
            await prepared
        if not self.current_user:
            raise web.HTTPError(403, "not authenticated: open the dashboard from a logged-in JupyterLab, or send the token")
        if not await ensure_async(self.authorizer.is_authorized(self, self.current_user, "read", AUTH_RESOURCE)):
            raise web.HTTPError(403, f"User is not authorized to read on resource: {AUTH_RESOURCE}.")
        origin = self.request.headers.get("Origin")
        if self.request.headers.get("Upgrade", "").lower() == "websocket" and origin and not self.check_origin(origin):
            raise web.HTTPError(403, f"cross-origin WebSocket connections are refused (Origin: {origin})")
        self._target(self.path_kwargs["cluster_id"])  # 404 / 503 before a WebSocket is upgraded

    def skip_check_origin(self) -> bool:
        """Never skip the origin check: jupyter_server would for token-authenticated requests."""
        return False

    def _target(self, cluster_id: str) -> tuple[str, int]:
        manager = self.settings["clustermgr_manager"]
        try:
            cluster = manager.get(cluster_id)
        except NotFound:
            raise web.HTTPError(404, f"no cluster with id {cluster_id!r}") from None
        if cluster.endpoint is None or not cluster.endpoint.dashboard_address:
            raise web.HTTPError(404, f"cluster {cluster_id!r} has no dashboard")
        if cluster.status == UNRESPONSIVE:
            raise web.HTTPError(503, f"the scheduler of cluster {cluster_id!r} is not answering: {cluster.error}")
        host, port = cluster.endpoint.dashboard_address.rsplit(":", 1)
        return host, int(port)

    def proxy_request_options(self):
        return {**super().proxy_request_options(), "connect_timeout": self.connect_timeout, "request_timeout": self.request_timeout}

    async def http_get(self, cluster_id: str, proxied_path: str = ""):
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, proxied_path or "/")

    async def head(self, cluster_id: str, proxied_path: str = ""):
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, proxied_path or "/")

    async def open(self, cluster_id: str, proxied_path: str = ""):
        host, port = self._target(cluster_id)
        return await self.proxy_open(host, port, proxied_path or "/")


def dashboard_route() -> tuple[str, type]:
    return (r"clustermgr/dashboard/(?P<cluster_id>[A-Za-z0-9_-]+)(?P<proxied_path>/.*)?", DashboardProxyHandler)
