"""Authenticated proxy to the Dask dashboards of the clusters this server manages, and nothing else."""

from __future__ import annotations

from urllib.parse import urlparse

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from jupyter_server_proxy.handlers import ProxyHandler
from tornado import web
from tornado.httpclient import HTTPClientError

from .cluster import UNRESPONSIVE
from .errors import NotFound
from .web_base import JSONErrorMixin, ReadAccessMixin

#: Request headers that carry the user's Jupyter credentials: a scheduler never sees them.
CREDENTIAL_HEADERS = ("Authorization", "Cookie", "X-XSRFToken", "X-Xsrftoken", "X-CSRFToken")


class DashboardProxyHandler(JSONErrorMixin, ReadAccessMixin, ProxyHandler):
    """Proxies ``clustermgr/dashboard/{id}/{path}`` (GET, HEAD and WebSocket) to that cluster's dashboard.

    The target is looked up from the cluster id, never taken from the URL, so this cannot be
    used to reach any other host or port; a cluster that failed or stopped has none (404).
    The user's credentials are not forwarded, redirects stay below ``clustermgr/dashboard/{id}/``,
    and any other verb is answered with a JSON 405.
    """

    # The dashboard only needs to be read (its interactive parts are WebSocket, a GET upgrade);
    # jupyter-server-proxy leaves XSRF checks to the proxied app, so other verbs are not offered at all.
    SUPPORTED_METHODS = ("GET", "HEAD")
    #: Seconds to wait for a dashboard: a stopped scheduler accepts connections but never answers.
    connect_timeout = 5.0
    request_timeout = 20.0

    def __init__(self, *args, **kwargs):
        kwargs["host_allowlist"] = []  # set per request to the one host of that cluster's dashboard
        super().__init__(*args, **kwargs)
        # jupyter-server-proxy's WebSocket mixin puts JupyterHandler's flush on the instance: wrap that one.
        send_headers_and_body = self.flush

        def flush(*args, **kwargs):
            if not self._headers_written:
                self._confine_response_headers()
            return send_headers_and_body(*args, **kwargs)

        self.flush = flush

    async def prepare(self, *args, **kwargs):
        # JupyterHandler's prepare (it identifies the user), not ProxyHandler's: that one redirects an anonymous
        # GET to the login page and then goes on proxying. Every request, WebSocket included, is refused instead.
        prepared = JupyterHandler.prepare(self, _redirect_to_login=False)
        if prepared is not None:
            await prepared
        if not self.current_user:
            raise web.HTTPError(
                403, "not authenticated: open the dashboard from a logged-in JupyterLab, or send the token"
            )
        upgrade = self.request.headers.get("Upgrade", "").lower() == "websocket"
        await self.authorize_read((self.request.headers.get("Origin") or None) if upgrade else None)
        # 404 / 503 before a WebSocket is upgraded (Bokeh reconnecting to a cluster that is gone gets a plain 404)
        self._target(self.path_kwargs["cluster_id"])

    def _target(self, cluster_id: str) -> tuple[str, int]:
        manager = self.settings["clustermgr_manager"]
        try:
            cluster = manager.get(cluster_id)
        except NotFound:
            raise web.HTTPError(404, f"no cluster with id {cluster_id!r}") from None
        address = cluster.dashboard_address
        if not address:
            raise web.HTTPError(404, f"cluster {cluster_id!r} has no dashboard (it is {cluster.status})")
        if cluster.status == UNRESPONSIVE:
            raise web.HTTPError(503, f"the scheduler of cluster {cluster_id!r} is not answering: {cluster.error}")
        host, port = address.rsplit(":", 1)
        self._upstream = address
        host = host.strip("[]")
        self.host_allowlist = [host]
        self.proxy_base = url_path_join("clustermgr", "dashboard", cluster_id)  # redirects are rewritten below it
        return host, int(port)

    def _confine_response_headers(self) -> None:
        """Drop what a dashboard must not do to the browser on Jupyter's origin: set cookies, redirect off-site."""
        self.clear_header("Set-Cookie")
        location = self._headers.get("Location")
        if location is None:
            return
        parsed = urlparse(location.strip())
        prefix = url_path_join(self.base_url, "clustermgr", "dashboard", self.path_kwargs.get("cluster_id", ""))
        upstream = getattr(self, "_upstream", None)
        if parsed.netloc and upstream and parsed.netloc == upstream:  # the dashboard's own absolute URL: keep it here
            self.set_header(
                "Location", url_path_join(prefix, parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
            )
        elif parsed.scheme or parsed.netloc or location.strip().startswith(("//", "\\", "/\\")):
            self.log.info("dashboard proxy: dropped an off-site redirect to %r", location[:200])
            self.clear_header("Location")

    def proxy_request_headers(self):
        headers = super().proxy_request_headers()
        for name in CREDENTIAL_HEADERS:
            headers.pop(name, None)
        return headers

    def proxy_request_options(self):
        return {
            **super().proxy_request_options(),
            "connect_timeout": self.connect_timeout,
            "request_timeout": self.request_timeout,
        }

    @web.authenticated  # prepare() refuses the unauthenticated already; this marks the verb for jupyter_server too
    async def get(self, cluster_id: str, proxied_path: str = ""):
        return await super().get(cluster_id, proxied_path)

    async def http_get(self, cluster_id: str, proxied_path: str = ""):
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, proxied_path or "/")

    @web.authenticated
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


def dashboard_route() -> tuple[str, type]:
    return (r"clustermgr/dashboard/(?P<cluster_id>[A-Za-z0-9_-]+)(?P<proxied_path>/.*)?", DashboardProxyHandler)
