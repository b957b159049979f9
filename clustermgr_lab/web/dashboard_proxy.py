"""Authenticated proxy to the Dask dashboards of the clusters this server manages, sandboxed, and nothing else."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlencode, urlparse

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from jupyter_server_proxy.handlers import ProxyHandler
from jupyter_server_proxy.websocket import pingable_ws_connect
from tornado import web
from tornado.httpclient import HTTPClientError, HTTPRequest

from clustermgr_lab.cluster.managed import UNRESPONSIVE
from clustermgr_lab.domain.errors import NotFound
from clustermgr_lab.manager.dashboard_keys import KEY_SEGMENT_PREFIX
from clustermgr_lab.web.base import JSONErrorMixin, ReadAccessMixin

#: Request headers that carry the user's Jupyter credentials: a scheduler never sees them.
CREDENTIAL_HEADERS = ("Authorization", "Cookie", "X-XSRFToken", "X-Xsrftoken", "X-CSRFToken")

#: Sent with every response of the proxy: the dashboard runs scripts, but in an opaque origin of its own
#: (no ``allow-same-origin``), so it can neither read Jupyter's cookies or pages nor call its API as the user.
SANDBOX_POLICY = "sandbox allow-scripts allow-forms allow-popups allow-downloads"


class DashboardProxyHandler(JSONErrorMixin, ReadAccessMixin, ProxyHandler):
    """Proxies ``clustermgr/dashboard/{id}/key-{key}/{path}`` (GET, HEAD and WebSocket) to that cluster's dashboard.

    The target is looked up from the cluster id, never taken from the URL, so this cannot be
    used to reach any other host or port; a cluster that failed or stopped has none (404).
    Every response carries ``Content-Security-Policy: sandbox`` without ``allow-same-origin``: the
    dashboard's page gets an opaque origin, and the browser sends no Jupyter cookie with its scripts,
    data and WebSockets. Those are let in by the key in their URL (see ``dashboard_keys.py``), a
    capability only the API hands out, with the dashboard's URL, to users allowed to read clusters.
    A request with a key that is not the cluster's is a 404, whoever sends it.
    Without a key (``clustermgr/dashboard/{id}/{path}``) a request needs jupyter_server's
    authentication and ``read`` on ``clustermgr``; pages are then redirected to the keyed URL, and
    WebSockets are proxied from the same origin only.
    The user's credentials are not forwarded, redirects stay below the keyed URL, and any other verb
    is answered with a JSON 405.
    The dashboard of a cluster with TLS is HTTPS and asks for the cluster's certificate: the proxy
    presents it (pages, plots and WebSockets alike) and trusts only the cluster's CA.
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
        # GET to the login page and then goes on proxying. Every request, WebSocket included, is refused instead,
        # unless its URL carries the cluster's key (get/head allow the unauthenticated to jupyter_server for that).
        prepared = JupyterHandler.prepare(self, _redirect_to_login=False)
        if prepared is not None:
            await prepared
        cluster_id = self.path_kwargs["cluster_id"]
        self._key, self._proxied_path = split_key(self.path_kwargs.get("proxied_path") or "")
        if has_dot_segment(self._proxied_path):  # a redirect would carry them into Location: another route here
            raise web.HTTPError(404, "no dashboard page at a path with '.' or '..' segments")
        if self._key is not None:
            if not self.settings["clustermgr_manager"].dashboard_keys.is_valid(cluster_id, self._key):
                raise web.HTTPError(404, f"no dashboard of cluster {cluster_id!r} at this address (wrong key)")
        else:
            if not self.current_user:
                raise web.HTTPError(
                    403, "not authenticated: open the dashboard from a logged-in JupyterLab, or send the token"
                )
            await self.authorize_read(None)
        # The token has done its work; the dashboard (its page can read its own URL) and the scheduler never see it.
        if "token" in self.request.query_arguments:
            query = parse_qsl(self.request.query, keep_blank_values=True)
            self.request.query = urlencode([(name, value) for name, value in query if name != "token"])
        origin = self.request.headers.get("Origin")
        if self.request.headers.get("Upgrade", "").lower() == "websocket" and origin and not self.check_origin(origin):
            raise web.HTTPError(403, f"cross-origin WebSocket connections are refused (Origin: {origin})")
        # 404 / 503 before a WebSocket is upgraded (Bokeh reconnecting to a cluster that is gone gets a plain 404)
        self._target(cluster_id)

    def check_origin(self, origin: str | None = None) -> bool:
        """Same origin only; on a keyed URL also ``null``, the origin of the sandboxed dashboard's own page."""
        if getattr(self, "_key", None) is not None and self.request.headers.get("Origin") == "null":
            return True
        return super().check_origin(origin)

    def _target(self, cluster_id: str) -> tuple[str, int]:
        manager = self.settings["clustermgr_manager"]
        try:
            cluster = manager.get(cluster_id)
        except NotFound:
            raise web.HTTPError(404, f"no cluster with id {cluster_id!r}") from None
        address = cluster.dashboard_address
        if not address:
            raise web.HTTPError(404, f"cluster {cluster_id!r} has no dashboard (it is {cluster.status})")
        if cluster.status == UNRESPONSIVE:  # a frozen scheduler would hold the request until it times out
            raise web.HTTPError(503, f"the scheduler of cluster {cluster_id!r} is not answering: {cluster.error}")
        host, port = address.rsplit(":", 1)
        self._upstream = address
        self._ssl_context = cluster.dashboard_ssl_context()
        host = host.strip("[]")
        self.host_allowlist = [host]
        # redirects are rewritten below it
        self.proxy_base = url_path_join("clustermgr", "dashboard", cluster_id, self._key_segment(cluster_id))
        return host, int(port)

    def _key_segment(self, cluster_id: str) -> str:
        return self.settings["clustermgr_manager"].dashboard_keys.segment(cluster_id)

    def _confine_response_headers(self) -> None:
        """Sandbox the page, and drop what a dashboard must not do to the browser: set cookies, redirect off-site."""
        self.add_header("Content-Security-Policy", SANDBOX_POLICY)
        self.clear_header("Set-Cookie")
        location = self._headers.get("Location")
        if location is None:
            return
        parsed = urlparse(location.strip())
        prefix = url_path_join(self.base_url, getattr(self, "proxy_base", "") or "clustermgr/dashboard")
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
        options = {
            **super().proxy_request_options(),
            "connect_timeout": self.connect_timeout,
            "request_timeout": self.request_timeout,
        }
        if getattr(self, "_ssl_context", None) is not None:
            options["ssl_options"] = self._ssl_context
        return options

    def get_client_uri(self, protocol, host, port, proxied_path):
        if getattr(self, "_ssl_context", None) is not None:
            protocol = {"http": "https", "ws": "wss"}.get(protocol, protocol)
        return super().get_client_uri(protocol, host, port, proxied_path)

    async def proxy_open(self, host, port, proxied_path=""):
        if self._ssl_context is None:
            return await super().proxy_open(host, port, proxied_path)
        # jupyter-server-proxy's own WebSocket request takes no TLS options: the same, with the cluster's certificate.
        if not proxied_path.startswith("/"):
            proxied_path = "/" + proxied_path

        def on_message(message):
            self._record_activity()
            if message is None:
                self.close()
            else:
                self.write_message(message, binary=isinstance(message, bytes))

        def on_ping(data):
            self._record_activity()
            self.ping(data)

        request = HTTPRequest(
            url=self.get_client_uri("ws", host, port, proxied_path),
            headers=self.proxy_request_headers(),
            ssl_options=self._ssl_context,
            connect_timeout=self.connect_timeout,
        )
        self._record_activity()
        self.ws = await pingable_ws_connect(
            request=request,
            on_message_callback=on_message,
            on_ping_callback=on_ping,
            subprotocols=self._requested_subprotocols,
        )

    @allow_unauthenticated  # prepare() lets in the authenticated and authorized, or a request with the cluster's key
    async def get(self, cluster_id: str, proxied_path: str = ""):
        return await super().get(cluster_id, proxied_path)

    async def http_get(self, cluster_id: str, proxied_path: str = ""):
        return await self._proxy_or_redirect(cluster_id)

    @allow_unauthenticated  # as get
    async def head(self, cluster_id: str, proxied_path: str = ""):
        return await self._proxy_or_redirect(cluster_id)

    async def _proxy_or_redirect(self, cluster_id: str):
        host, port = self._target(cluster_id)
        if self._key is None:  # an authenticated user's key-less URL: the page must load where its parts work
            query = f"?{self.request.query}" if self.request.query else ""
            return self.redirect(url_path_join(self.base_url, self.proxy_base, self._proxied_path) + query)
        return await self.proxy(host, port, self._proxied_path)

    async def open(self, cluster_id: str, proxied_path: str = ""):
        try:
            host, port = self._target(cluster_id)
            return await self.proxy_open(host, port, self._proxied_path)
        except (web.HTTPError, HTTPClientError, OSError) as exc:  # the cluster went away during the handshake
            self.log.info("dashboard WebSocket of cluster %s closed: %s", cluster_id, exc)
            self.close()


def has_dot_segment(path: str) -> bool:
    """Whether ``path`` (decoded, as tornado hands it over, or still percent-encoded) has a ``.`` or ``..`` segment.

    >>> has_dot_segment("/../api"), has_dot_segment("/%2e%2E/api"), has_dot_segment("/x/.."), has_dot_segment("/a.b")
    (True, True, True, False)
    """
    segments = (segment for text in (path, unquote(path)) for segment in re.split(r"[/\\]", text))
    return any(segment in (".", "..") for segment in segments)


def split_key(proxied_path: str) -> tuple[str | None, str]:
    """The key segment's key (None without one) and the dashboard's own path, of a path below a cluster.

    >>> split_key("/key-abc/status"), split_key("/status"), split_key("/key-abc"), split_key("")
    (('abc', '/status'), (None, '/status'), ('abc', '/'), (None, '/'))
    """
    first, _, rest = proxied_path.lstrip("/").partition("/")
    if first.startswith(KEY_SEGMENT_PREFIX):
        return first[len(KEY_SEGMENT_PREFIX) :], "/" + rest
    return None, proxied_path or "/"


def dashboard_route() -> tuple[str, type]:
    return (r"clustermgr/dashboard/(?P<cluster_id>[A-Za-z0-9_-]+)(?P<proxied_path>/.*)?", DashboardProxyHandler)
