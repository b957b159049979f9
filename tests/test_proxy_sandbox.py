"""Given dashboards proxied by this server, then each page is sandboxed (an opaque origin: it cannot script Jupyter's),
its parts are let in by the cluster's key in the URL (no cookie needed) and nothing else is, and the real Dask dashboard
and its individual plots still render in a real headless Chromium, their Bokeh WebSockets connected."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Self
from urllib.parse import urlparse

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from clustermgr_lab.web.dashboard_proxy import SANDBOX_POLICY

from .helpers import call, running_with, wait_for
from .test_external import ECHO_PRELOAD
from .test_proxy_confinement import HOSTILE_DASHBOARD, attached, foreign_scheduler
from .test_scaling import create

PROBE = Path(__file__).with_name("sandbox_probe_preload.py")
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def hostile_dashboard(tmp_path):
    """A scheduler (this server did not start it) whose dashboard has hostile and probing routes; yields its address."""
    with foreign_scheduler(tmp_path, HOSTILE_DASHBOARD, ECHO_PRELOAD, PROBE) as address:
        yield address


def keyed(cluster: dict, *page: str) -> str:
    """The path (from the server's root) of a page below the cluster's ``dashboard_url``, which carries its key."""
    return "/".join((cluster["dashboard_url"].removesuffix("/status"), *page))


def keyless(jp_base_url: str, cluster: dict, *page: str) -> str:
    return "/".join((f"{jp_base_url}clustermgr/dashboard/{cluster['id']}", *page))


def with_wrong_key(cluster: dict, *page: str) -> str:
    right = urlparse(cluster["dashboard_url"]).path.split("/")[-2]
    return keyed(cluster, *page).replace(right, "key-" + "A" * 22)


async def plain_get(port: int, path: str, **headers) -> tuple[int, dict, bytes]:
    """GET without any credentials (no token, no cookie), as the sandboxed page's own requests come."""
    request = HTTPRequest(f"http://127.0.0.1:{port}{path}", headers=headers, follow_redirects=False, request_timeout=30)
    try:
        response = await AsyncHTTPClient().fetch(request)
    except HTTPClientError as exc:
        response = exc.response
    return response.code, response.headers, response.body


async def websocket_code(port: int, path: str, **headers) -> int:
    """101 if a WebSocket opens at ``path`` (no credentials sent), else the HTTP status it was refused with."""
    try:
        connection = await websocket_connect(
            HTTPRequest(f"ws://127.0.0.1:{port}{path}", headers=headers, request_timeout=30)
        )
    except HTTPClientError as exc:
        return exc.code
    connection.close()
    return 101


def sandboxed(headers) -> bool:
    policies = [p.strip() for value in headers.get_list("Content-Security-Policy") for p in value.split(",")]
    return SANDBOX_POLICY in policies and not any("allow-same-origin" in p for p in policies)


async def test_a_hostile_dashboard_is_served_sandboxed_and_cannot_script_jupyter(
    jp_fetch, jp_http_port, jp_base_url, jp_serverapp, hostile_dashboard, tmp_path
):
    # Given an attached scheduler whose dashboard is hostile
    cluster = await attached(jp_fetch, hostile_dashboard)
    # When its pages come through the proxy, Then each carries the sandbox policy, without allow-same-origin
    code, headers, body = await plain_get(jp_http_port, keyed(cluster, "clustermgr-test", "cookie"))
    assert code == 200 and body == b"cookies set" and sandboxed(headers), (code, dict(headers))
    # And so do the proxy's own answers: an authenticated key-less URL's redirect, a wrong key's 404
    token = jp_serverapp.identity_provider.token
    code, headers, _ = await plain_get(
        jp_http_port, keyless(jp_base_url, cluster, "clustermgr-test", "cookie"), Authorization=f"token {token}"
    )
    assert code == 302 and sandboxed(headers), code
    code, headers, _ = await plain_get(jp_http_port, with_wrong_key(cluster, "clustermgr-test", "cookie"))
    assert code == 404 and sandboxed(headers), code
    # When a browser logged in to Jupyter opens the hostile page
    async with HeadlessChromium(tmp_path / "chromium") as browser:
        await browser.log_in(jp_http_port, jp_base_url, token)
        await browser.open(f"http://127.0.0.1:{jp_http_port}{keyed(cluster, 'clustermgr-test', 'cookie')}")
        # Then its scripts run in an opaque origin: no Jupyter cookie, no reading of Jupyter's API
        probe = await browser.evaluate(
            """(async () => {
                let cookie;
                try { cookie = 'readable: ' + document.cookie; } catch (e) { cookie = e.name; }
                let api;
                try { api = 'read ' + (await (await fetch('BASE_URLapi/contents', {credentials: 'include'})).text()).slice(0, 40); }
                catch (e) { api = 'refused: ' + e.name; }
                return {origin: self.origin, cookie, api, body: document.body.textContent};
            })()""".replace("BASE_URL", jp_base_url)
        )
    assert probe["body"] == "cookies set", probe  # the page did load and run
    assert probe["origin"] == "null" and probe["cookie"] == "SecurityError", probe
    assert probe["api"].startswith("refused"), probe


async def test_only_the_clusters_key_lets_a_request_in_without_credentials(
    jp_fetch, jp_http_port, jp_base_url, jp_serverapp, hostile_dashboard
):
    cluster = await attached(jp_fetch, hostile_dashboard)
    # Given requests without a cookie or a token (as the sandboxed page sends them)
    # When the key is missing, Then 403 JSON; when it is wrong (or another cluster's), 404 JSON; the dashboard never hears of them
    code, _, body = await plain_get(jp_http_port, keyless(jp_base_url, cluster, "clustermgr-test", "probe"))
    assert code == 403 and json.loads(body)["code"], body
    for path in (
        with_wrong_key(cluster, "clustermgr-test", "probe"),
        keyed(cluster, "clustermgr-test", "probe").replace(cluster["id"], "0" * 8),
    ):
        code, _, body = await plain_get(jp_http_port, path)
        assert code == 404 and json.loads(body)["code"] == "not_found", (path, body)
    for path in (keyless(jp_base_url, cluster, "status", "ws"), with_wrong_key(cluster, "status", "ws")):
        assert await websocket_code(jp_http_port, path, Origin="null") in (403, 404), path
    # When the key is the cluster's, Then the request reaches the dashboard (and only it counted)
    code, _, body = await plain_get(jp_http_port, keyed(cluster, "clustermgr-test", "probe"))
    assert code == 200 and json.loads(body) == {"probe": 1}, body
    # And a WebSocket from the sandboxed page (Origin: null) opens on the keyed URL; from another site it does not
    assert await websocket_code(jp_http_port, keyed(cluster, "status", "ws"), Origin="null") == 101
    assert await websocket_code(jp_http_port, keyed(cluster, "status", "ws"), Origin="http://evil.example") == 403
    # And an authenticated key-less URL is redirected to the keyed one, the token left behind
    token = jp_serverapp.identity_provider.token
    code, headers, _ = await plain_get(
        jp_http_port, keyless(jp_base_url, cluster, "clustermgr-test", "query") + f"?token={token}&x=1"
    )
    assert code == 302 and headers["Location"] == keyed(cluster, "clustermgr-test", "query") + "?x=1", dict(headers)
    code, _, body = await plain_get(jp_http_port, keyed(cluster, "clustermgr-test", "query") + f"?token={token}&x=1")
    assert code == 200 and json.loads(body) == {"query": "x=1"}, body  # nor does the dashboard see it
    # And the key stays the same after a restart (it is derived from a secret kept next to the store)
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    secret = manager.dashboard_keys.secret_path
    assert secret.stat().st_mode & 0o777 == 0o600 and secret.stat().st_size == 32
    assert type(manager.dashboard_keys)(secret).segment(cluster["id"]) in cluster["dashboard_url"]


async def test_the_real_dask_dashboard_and_a_plot_render_sandboxed_in_chromium(
    jp_fetch, jp_http_port, jp_base_url, jp_serverapp, tmp_path
):
    # Given a running cluster of this server, and a browser logged in to Jupyter
    assert CHROMIUM, "Chromium is needed (set CHROMIUM_PATH)"
    cluster = await wait_for(jp_fetch, await create(jp_fetch), running_with(1))
    token = jp_serverapp.identity_provider.token
    try:
        async with HeadlessChromium(tmp_path / "chromium") as browser:
            await browser.log_in(jp_http_port, jp_base_url, token)
            for page in ("status", "individual-task-stream"):
                # When the page is opened at the key-less URL (with the cookie, as the sidebar's frame does)
                await browser.open(f"http://127.0.0.1:{jp_http_port}{keyless(jp_base_url, cluster, page)}")
                # Then it lands on the keyed URL, sandboxed, and Bokeh draws the document its WebSocket brought
                state = await browser.wait_for(RENDERED, lambda s: s["roots"] > 0 and s["canvases"] > 0, timeout=90)
                assert state["origin"] == "null" and state["href"].endswith(keyed(cluster, page)), state
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster["id"], expect=202)


#: What a page of the dashboard has rendered: Bokeh documents (server mode: they arrive over the WebSocket), canvases.
RENDERED = """(() => {
    const canvases = [];
    const walk = root => root.querySelectorAll('*').forEach(el => {
        if (el.tagName === 'CANVAS') canvases.push(el);
        if (el.shadowRoot) walk(el.shadowRoot);
    });
    walk(document);
    const docs = (window.Bokeh && Bokeh.documents) || [];
    return {origin: self.origin, href: location.href, docs: docs.length,
            roots: docs.reduce((n, d) => n + d.roots().length, 0), canvases: canvases.length};
})()"""


class HeadlessChromium:
    """A real headless Chromium driven over the DevTools protocol (one page)."""

    def __init__(self, profile: Path):
        self.profile = profile
        self.process: subprocess.Popen | None = None
        self.connection = None
        self.next_id = 0

    async def __aenter__(self) -> Self:
        self.profile.mkdir(parents=True, exist_ok=True)
        with open(self.profile / "chromium.log", "ab") as log:  # noqa: ASYNC230 (the browser keeps its own copy)
            self.process = subprocess.Popen(  # noqa: ASYNC220 (starting it does not wait for it)
                [
                    CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                    "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank",
                ],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            )  # fmt: skip
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            assert self.process.poll() is None and time.monotonic() < deadline, (
                self.profile / "chromium.log"
            ).read_text()
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.loads((await AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}/json/list")).body)
        page = next(t for t in targets if t["type"] == "page")
        self.connection = await websocket_connect(page["webSocketDebuggerUrl"], max_message_size=256 * 1024 * 1024)
        await self.command("Page.enable")
        return self

    async def __aexit__(self, *exc) -> None:
        if self.connection is not None:
            self.connection.close()
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    async def command(self, method: str, **params) -> dict:
        self.next_id += 1
        self.connection.write_message(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = await asyncio.wait_for(self.connection.read_message(), 60)
            assert message is not None, "Chromium closed the DevTools connection"
            reply = json.loads(message)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    async def open(self, url: str) -> None:
        """Navigate and wait until the page's document has loaded."""
        result = await self.command("Page.navigate", url=url)
        assert "errorText" not in result, result
        await self.wait_for("document.readyState", lambda state: state == "complete", timeout=60)

    async def log_in(self, port: int, base_url: str, token: str) -> None:
        """Get Jupyter's login cookie into the browser, as a logged-in JupyterLab has it."""
        await self.open(f"http://127.0.0.1:{port}{base_url}api/status?token={token}")
        cookies = (await self.command("Network.getAllCookies"))["cookies"]
        assert any(c["name"].startswith("username-") for c in cookies), cookies

    async def evaluate(self, expression: str):
        result = await self.command("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def wait_for(self, expression: str, predicate, timeout: float):
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if predicate(value):
                return value
            await asyncio.sleep(0.2)
        raise AssertionError(f"not reached in {timeout} s: {value}")


def test_a_secret_file_that_others_could_read_or_that_is_a_link_is_not_used(tmp_path, caplog):
    from clustermgr_lab.manager.dashboard_keys import DashboardKeys

    # Given a secret file made by the server, Then a second server on the same folder derives the same keys
    path = tmp_path / "store" / "dashboard-secret"
    first = DashboardKeys(path)
    assert DashboardKeys(path).key("abc") == first.key("abc") and first.is_valid("abc", first.key("abc"))
    assert not first.is_valid("abc", DashboardKeys(tmp_path / "other" / "dashboard-secret").key("abc"))
    # When others may read it, or it is a symbolic link to one, Then it is not used (a warning says so)
    path.chmod(0o644)
    assert DashboardKeys(path).key("abc") != first.key("abc")
    path.chmod(0o600)
    link = tmp_path / "link-secret"
    link.symlink_to(path)
    assert DashboardKeys(link).key("abc") != first.key("abc")
    assert sum("not using" in r.getMessage() for r in caplog.records) == 2, caplog.text
