"""Given an attached scheduler whose dashboard sets cookies and redirects anywhere (a real scheduler with a test
preload), then the proxy passes no upstream cookie and no off-site redirect to the browser; and a cluster whose scheduler
is not confirmed yet (as after a restart, until re-adopted) has its dashboard refused, never proxied."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from tornado.httpclient import HTTPClientError

from clustermgr_lab.cluster.managed import PENDING, RUNNING

from .helpers import call, wait_for
from .started_elsewhere import start_process, stop_process
from .test_external import ECHO_PRELOAD

HOSTILE_DASHBOARD = Path(__file__).with_name("hostile_dashboard_preload.py")


@pytest.fixture
def hostile_dashboard(tmp_path):
    """A scheduler (this server did not start it) whose dashboard has the hostile routes; yields its address."""
    with foreign_scheduler(tmp_path, HOSTILE_DASHBOARD, ECHO_PRELOAD) as address:
        yield address


@contextlib.contextmanager
def foreign_scheduler(tmp_path: Path, *preloads: Path):
    """A scheduler started outside any server, with these preloads; yields its address, stops it after."""
    scheduler_file = tmp_path / "scheduler.json"
    preload_args = [arg for preload in preloads for arg in ("--preload", str(preload))]
    scheduler = start_process(
        [
            sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
            "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(scheduler_file), *preload_args,
        ],
        tmp_path / "scheduler.log",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (scheduler_file.exists() and scheduler_file.stat().st_size):
            assert scheduler.poll() is None and time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.1)
        yield json.loads(scheduler_file.read_text())["address"]
    finally:
        stop_process(scheduler)


async def raw(jp_fetch, *path, **kwargs):
    try:
        return await jp_fetch(*path, follow_redirects=False, **kwargs)
    except HTTPClientError as exc:
        return exc.response


async def attached(jp_fetch, address: str) -> dict:
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=202)
    return await wait_for(jp_fetch, cluster["id"], lambda c: c["status"] == "running", what="attached")


def keyed_path(cluster: dict) -> tuple[str, ...]:
    """The path segments of the cluster's dashboard (with its key), from its ``dashboard_url``."""
    return tuple(urlparse(cluster["dashboard_url"]).path.split("/clustermgr/", 1)[1].removesuffix("/status").split("/"))


async def test_upstream_cookies_and_off_site_redirects_never_reach_the_browser(
    jp_fetch, jp_base_url, hostile_dashboard
):
    cluster = await attached(jp_fetch, hostile_dashboard)
    dashboard = ("clustermgr", *keyed_path(cluster))
    # When the dashboard answers with Set-Cookie, Then the page comes through without the cookies
    response = await raw(jp_fetch, *dashboard, "clustermgr-test", "cookie")
    assert response.code == 200 and response.body == b"cookies set"
    cookies = response.headers.get_list("Set-Cookie")
    assert not any("stolen" in c or "attacker" in c for c in cookies), cookies
    # When it redirects off-site (absolute, scheme-relative, backslash), Then the Location is dropped
    for target in ("http://evil.example/x", "//evil.example/x", "/\\evil.example/x", "https://127.0.0.1:1/x"):
        response = await raw(jp_fetch, *dashboard, "clustermgr-test", "redirect", params={"to": target})
        assert response.code in (301, 302), (target, response.code)
        location = response.headers.get("Location", "")
        assert location == "" or location.startswith(f"{jp_base_url}{'/'.join(dashboard)}/"), (target, location)
    # And a redirect to the dashboard's own absolute URL stays below this server's proxy path
    own = await raw(jp_fetch, *dashboard, "clustermgr-test", "redirect", params={"to": "/status"})
    assert own.headers["Location"] == cluster["dashboard_url"]


async def test_a_cluster_not_confirmed_yet_has_no_dashboard_proxied(jp_fetch, jp_serverapp, hostile_dashboard):
    cluster = await attached(jp_fetch, hostile_dashboard)
    dashboard = ("clustermgr", *keyed_path(cluster))
    assert (await raw(jp_fetch, *dashboard, "clustermgr-test", "headers")).code == 200
    # Given the cluster back in the state a restored one has until its scheduler's id is checked
    managed = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster["id"])
    managed.lifecycle = PENDING
    try:
        # When its dashboard is asked for, Then a JSON 404, and the request never reached the dashboard
        response = await raw(jp_fetch, *dashboard, "clustermgr-test", "headers")
        assert response.code == 404, response.code
        body = json.loads(response.body)
        assert body["code"] and "dashboard" in body["message"], body
        _, listed = await call(jp_fetch, "GET", "clusters", cluster["id"], expect=200)
        assert listed["dashboard_url"] is None
    finally:
        managed.lifecycle = RUNNING
    assert (await raw(jp_fetch, *dashboard, "clustermgr-test", "headers")).code == 200
