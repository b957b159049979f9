"""Given the running server, then every route the extension registers — REST, WebSocket, proxy, every verb —
refuses requests without a token, with a wrong token, without the XSRF token and (WebSockets) from another origin.

The routes are read from the server's tornado application, not from a list kept here: a route that is
registered but missing from ``MATRIX`` fails the test, so a new route cannot skip these checks.
"""

import re
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.routing import PathMatches
from tornado.web import RequestHandler
from tornado.websocket import WebSocketHandler, websocket_connect

from .test_api_errors import browser_cookies

HTTP_VERBS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# route pattern (relative to the base URL) -> the verbs it serves ("WS": a WebSocket upgrade).
# OPTIONS is Jupyter's CORS preflight: answered without authentication, with no data.
MATRIX = {
    r"clustermgr/api/clusters": {"GET", "POST", "OPTIONS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)": {"GET", "PATCH", "DELETE", "OPTIONS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)/events": {"GET", "OPTIONS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)/workers": {"GET", "OPTIONS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)/logs": {"GET", "OPTIONS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)/logs/(?P<name>[^/]+)": {"GET", "OPTIONS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)/logs/(?P<name>[^/]+)/follow": {"WS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)/timeline": {"GET", "OPTIONS"},
    r"clustermgr/api/usage": {"GET", "OPTIONS"},
    r"clustermgr/api/clusters/(?P<cluster_id>[^/]+)/restart": {"POST", "OPTIONS"},
    r"clustermgr/api/templates": {"GET", "OPTIONS"},
    r"clustermgr/api/status": {"GET", "OPTIONS"},
    r"clustermgr/api/openapi.json": {"GET", "OPTIONS"},
    r"clustermgr/api/stream": {"WS"},
    r"clustermgr/dashboard/(?P<cluster_id>[A-Za-z0-9_-]+)(?P<proxied_path>/.*)?": {"GET", "HEAD", "WS"},
    r"clustermgr/dashboard-at/(?P<host>[^/]+)/(?P<port>[0-9]{1,5})(?P<proxied_path>/.*)?": {"GET"},
}
# what each path parameter is filled with: an id no cluster has (authentication comes before the lookup)
SAMPLES = {"cluster_id": "nope", "proxied_path": "/status", "name": "scheduler", "host": "127.0.0.1", "port": "1"}
# bodies that get past authentication and are then refused (400), so that checking a route starts nothing
BODY = {"POST": b'{"name": ""}', "PUT": b'{"name": ""}', "PATCH": b'{"name": ""}'}


def registered_routes(web_app, base_url: str) -> dict[str, type]:
    """Every route of the running application whose handler belongs to clustermgr_lab: pattern -> handler class."""
    found: dict[str, type] = {}

    def walk(router) -> None:
        for rule in getattr(router, "rules", []):
            target = rule.target
            if isinstance(target, type) and issubclass(target, RequestHandler):
                # jupyter-server-proxy's generic routes keep its handlers, confined (tests/test_dashboard.py)
                ours = target.__module__.startswith("clustermgr_lab") and not hasattr(
                    target, "confines_jupyter_server_proxy"
                )
                if ours and isinstance(rule.matcher, PathMatches):
                    pattern = rule.matcher.regex.pattern.removesuffix("$")
                    found[pattern.removeprefix(base_url)] = target
            else:
                walk(target)

    walk(web_app.wildcard_router)
    walk(web_app.default_router)
    return found


def served_verbs(handler: type) -> set[str]:
    """The verbs a handler class implements itself (not tornado's 405 defaults); GET of a WebSocket is "WS"."""
    verbs = {
        v for v in handler.SUPPORTED_METHODS if getattr(handler, v.lower()) is not getattr(RequestHandler, v.lower())
    }
    if issubclass(handler, WebSocketHandler):
        verbs.add("WS")
        if not hasattr(handler, "http_get"):  # jupyter-server-proxy's handlers serve plain GETs too
            verbs.discard("GET")
    return verbs


def sample_path(pattern: str) -> str:
    """A path the pattern matches, its named groups filled from ``SAMPLES``."""
    path, i = "", 0
    while i < len(pattern):
        if pattern.startswith("(?P<", i):
            name = pattern[i + 4 : pattern.index(">", i)]
            assert name in SAMPLES, f"route {pattern}: add a sample value for {name!r} to SAMPLES"
            depth, j = 0, i
            while True:  # to the group's closing parenthesis
                depth += {"(": 1, ")": -1}.get(pattern[j], 0) if pattern[j - 1] != "\\" else 0
                if depth == 0:
                    break
                j += 1
            path += SAMPLES[name]
            i = j + 1 + (pattern[j + 1 : j + 2] == "?")
        else:
            path += pattern[i + 1] if pattern[i] == "\\" else pattern[i]
            i += 1 + (pattern[i] == "\\")
    assert re.fullmatch(pattern, path), (pattern, path)
    return path


async def fetch(url: str, method: str, headers: dict) -> tuple[int, bytes]:
    """``(status, body)``; a redirect to the login page (how Jupyter refuses a browser page) counts as 403."""
    body = BODY.get(method)
    response = await AsyncHTTPClient().fetch(
        url, method=method, headers=headers, body=body, raise_error=False, follow_redirects=False,
        allow_nonstandard_methods=True,
    )  # fmt: skip
    if response.code == 302 and "/login?next=" in response.headers.get("Location", ""):
        return 403, b"redirected to the login page"
    return response.code, response.body or b""


async def websocket_status(url: str, headers: dict) -> int:
    """101 if the upgrade is accepted, else the refusal's status."""
    try:
        connection = await websocket_connect(HTTPRequest(url.replace("http://", "ws://"), headers=headers))
    except HTTPClientError as exc:
        return exc.code
    connection.close()
    return 101


async def test_every_registered_route_is_in_the_matrix_and_refuses_the_unauthenticated(
    jp_serverapp, http_server_client, jp_http_port, jp_base_url, jp_auth_header
):
    routes = registered_routes(jp_serverapp.web_app, jp_base_url)
    # Every route the extension registers is in the matrix, with the verbs it serves, and nothing else is
    missing = sorted(set(routes) - set(MATRIX))
    assert not missing, f"routes not in the security matrix of {__name__}: {missing}"
    assert sorted(set(MATRIX) - set(routes)) == [], "the matrix lists routes the server does not register"
    for pattern, handler in routes.items():
        assert served_verbs(handler) == MATRIX[pattern], (pattern, handler, served_verbs(handler))

    server = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
    login, xsrf = await browser_cookies(server, jp_auth_header)
    no_token, wrong_token = {}, {"Authorization": "token wrong"}
    cookie_only = {"Cookie": login}
    checked = []
    for pattern, verbs in MATRIX.items():
        url = server + quote(sample_path(pattern))
        for verb in sorted(verbs):
            if verb == "WS":
                # A WebSocket upgrade: refused without a token, with a wrong one, and from another origin
                for headers in (no_token, wrong_token, {**jp_auth_header, "Origin": "http://evil.example"},
                                {"Cookie": login, "Origin": "http://evil.example"}):  # fmt: skip
                    status = await websocket_status(url, headers)
                    assert status == 403, (pattern, "WS", headers, status)
                # while the same upgrade with the token gets past authentication
                assert await websocket_status(url, jp_auth_header) != 403, (pattern, "WS with a token")
            elif verb == "OPTIONS":
                status, body = await fetch(url, verb, no_token)
                assert status in (200, 204) and body == b"", (pattern, verb, status, body)
            else:
                for headers in (no_token, wrong_token):
                    status, body = await fetch(url, verb, headers)
                    assert status == 403, (pattern, verb, headers, status, body[:200])
                if verb not in ("GET", "HEAD"):  # a browser session's change needs the XSRF token
                    status, body = await fetch(url, verb, cookie_only)
                    assert status == 403 and (verb == "HEAD" or b"_xsrf" in body), (pattern, verb, status, body[:200])
                    status, _ = await fetch(url, verb, {"Cookie": f"{login}; _xsrf={xsrf}", "X-XSRFToken": xsrf})
                    assert status != 403, (pattern, verb, "cookie with XSRF")
                status, _ = await fetch(url, verb, jp_auth_header)
                assert status != 403 and status < 500, (pattern, verb, "with a token", status)
            checked.append((pattern, verb))
        # Verbs a route does not serve are refused too, token or not (a plain GET of a WebSocket: 400)
        for verb in set(HTTP_VERBS) - verbs:
            for headers in (no_token, jp_auth_header):
                status, _ = await fetch(url, verb, headers)
                assert status in ((400, 403, 405) if verb == "GET" else (403, 405)), (pattern, verb, headers, status)
    assert len(checked) == sum(len(verbs) for verbs in MATRIX.values())
