"""Given schedulers this server did not start, then they can be attached, observed, proxied and detached, never scaled;
and the dashboard proxy forwards no credentials, keeps redirects below itself, and refuses dead clusters and other verbs."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from distributed.core import rpc
from tornado.httpclient import HTTPClientError

from clustermgr_lab.backends.local.backend import worker_command
from clustermgr_lab.domain.spec import parse_group

from .helpers import alive, call, create, running_with, wait_for, wait_gone
from .started_elsewhere import start_process, stop_process
from .test_client_cli import clustermgr, server  # noqa: F401 - fixtures
from .test_dashboard import dashboard_path, fetch_status

ECHO_PRELOAD = Path(__file__).with_name("echo_headers_preload.py")
WORKER = parse_group({"name": "default", "count": 1, "threads": 2, "memory": "1 GiB"}, "group")


@pytest.fixture
def external_scheduler(tmp_path):
    """A scheduler and one worker (2 threads, 1 GiB) that this server did not start; yields the scheduler's address."""
    scheduler_file = tmp_path / "scheduler.json"
    scheduler = start_process(
        [
            sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
            "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(scheduler_file), "--preload", str(ECHO_PRELOAD),
        ],
        tmp_path / "scheduler.log",
    )  # fmt: skip
    worker = start_process(worker_command(scheduler_file, WORKER, "outside-1"), tmp_path / "worker.log")
    try:
        deadline = time.monotonic() + 60
        while not (scheduler_file.exists() and scheduler_file.stat().st_size):
            assert scheduler.poll() is None and time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.1)
        while "Registered to:" not in (tmp_path / "worker.log").read_text():
            assert worker.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.1)
        yield json.loads(scheduler_file.read_text())["address"], scheduler
    finally:
        stop_process(worker)
        stop_process(scheduler)


async def attach(jp_fetch, address: str, **extra) -> dict:
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"attach": address, **extra}, expect=202)
    return cluster


async def test_an_attached_cluster_is_observed_proxied_never_scaled_and_detached_without_stopping(
    jp_fetch, external_scheduler
):
    address, scheduler = external_scheduler
    # Given a scheduler with one worker started elsewhere, when it is attached
    cluster = await attach(jp_fetch, address, name="outside")
    assert (cluster["backend"], cluster["template"], cluster["status"]) == ("external", "attached", "pending")
    # Then its live workers, cores and memory come from its scheduler
    cluster = await wait_for(
        jp_fetch, cluster["id"], lambda c: c["status"] == "running" and c["workers"]["running"] == 1, what="attached"
    )
    assert cluster["scheduler_address"] == address
    assert cluster["resources"] == {"cores": 2, "memory": 2**30, "gpus": 0}
    # And its dashboard (the list of individual plots too) is reachable through the proxy
    status, body = await fetch_status(jp_fetch, *dashboard_path(cluster, "individual-plots.json"))
    assert status == 200
    assert "/individual-task-stream" in json.loads(body).values()
    # When it is scaled, or its spec or adaptive mode changed: 409, saying why; nothing changes
    for change in ({"scale": {"workers": 3}}, {"spec": {"groups": [{"threads": 1, "memory": "1 GiB"}]}},
                   {"adapt": {"minimum": 0, "maximum": 2}}):  # fmt: skip
        status, error = await call(jp_fetch, "PATCH", "clusters", cluster["id"], body=change, expect=409)
        assert "started elsewhere" in error["message"] and error["field"] == next(iter(change))
    # And it cannot be attached twice
    _, error = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=409)
    assert "outside" in error["message"]
    # When it is deleted, it is detached: it leaves the list, and its scheduler and worker keep running
    _, detached = await call(jp_fetch, "DELETE", "clusters", cluster["id"], expect=202)
    assert detached["dashboard_url"] is None
    assert await wait_gone(jp_fetch, cluster["id"], 30) == 404
    scheduler_rpc = rpc(address)
    try:
        assert len((await scheduler_rpc.identity())["workers"]) == 1
    finally:
        await scheduler_rpc.close_rpc()
    assert alive([scheduler.pid]) == [scheduler.pid]


@pytest.mark.parametrize(
    "address, problem",
    [
        ("", "scheduler address"),
        (8786, "scheduler address"),
        ("ucx://127.0.0.1:8786", "tcp:// or tls://"),
        ("tcp://host", "scheduler address"),
    ],
)
async def test_attach_refuses_what_is_not_a_scheduler_address(jp_fetch, address, problem):
    _, error = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=400)
    assert error["field"] == "attach" and problem in error["message"]
    _, error = await call(jp_fetch, "POST", "clusters", body={"attach": "tcp://127.0.0.1:1", "spec": {}}, expect=400)
    assert error["field"] == "spec"
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []


async def test_an_unreachable_scheduler_fails_with_its_reason(jp_fetch):
    cluster = await attach(jp_fetch, "tcp://127.0.0.1:1")
    failed = await wait_for(jp_fetch, cluster["id"], lambda c: c["status"] == "failed", what="failed attach")
    assert "cannot reach the scheduler at tcp://127.0.0.1:1" in failed["error"]
    assert failed["dashboard_url"] is None


async def test_the_proxy_forwards_no_credentials_rewrites_redirects_and_refuses_other_verbs(
    jp_fetch, jp_base_url, external_scheduler
):
    address, _ = external_scheduler
    cluster = await attach(jp_fetch, address)
    cluster = await wait_for(jp_fetch, cluster["id"], lambda c: c["status"] == "running", what="attached")
    dashboard = dashboard_path(cluster)  # with the cluster's key: the page's own URL
    # Given a request with the token, cookies and an XSRF header, the scheduler sees none of them
    credentials = {"Cookie": "_xsrf=2|secret; username-127-0-0-1=secret", "X-XSRFToken": "2|secret", "X-Other": "kept"}
    status, body = await fetch_status(jp_fetch, *dashboard, "clustermgr-test", "headers", headers=credentials)
    assert status == 200
    seen = json.loads(body)
    assert seen["x-other"] == "kept"
    assert not {"authorization", "cookie", "x-xsrftoken"} & set(seen), seen
    # A redirect from the dashboard stays below this server's proxy path
    with pytest.raises(HTTPClientError) as redirect:
        await jp_fetch(*dashboard, "", follow_redirects=False)
    assert redirect.value.code in (301, 302)
    location = redirect.value.response.headers["Location"]
    assert location == cluster["dashboard_url"]
    # Other verbs: a JSON 405, not a 500
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        status, body = await fetch_status(
            jp_fetch, *dashboard, "status", method=method, body=None if method == "DELETE" else "{}"
        )
        assert status == 405, (method, body)
        assert json.loads(body)["code"] == "method_not_allowed"
    await call(jp_fetch, "DELETE", "clusters", cluster["id"], expect=202)


async def test_a_failed_cluster_has_no_dashboard_and_its_websocket_is_refused_without_an_exception(
    jp_fetch, jp_ws_fetch, jp_serverapp, caplog
):
    # Given a running managed cluster whose scheduler dies
    cluster_id = await create(jp_fetch)
    await wait_for(jp_fetch, cluster_id, running_with(1))
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    os.killpg(manager.get(cluster_id).pids()["scheduler"], signal.SIGKILL)
    cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "failed", what="failed")
    # Then it has no dashboard: the proxy answers 404 in JSON, for pages and for Bokeh's WebSocket
    assert cluster["dashboard_url"] is None
    caplog.clear()
    status, body = await fetch_status(jp_fetch, "clustermgr", "dashboard", cluster_id, "individual-task-stream")
    assert status == 404 and json.loads(body)["code"] == "not_found"
    with pytest.raises(HTTPClientError) as refused:
        await jp_ws_fetch("clustermgr", "dashboard", cluster_id, "individual-task-stream", "ws")
    assert refused.value.code == 404
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)


async def test_the_client_and_command_line_attach_and_detach(clustermgr, server, external_scheduler):  # noqa: F811
    url, token = server
    auth = ("--url", url, "--token", token)
    address, scheduler = external_scheduler
    # Given a scheduler started elsewhere, `clustermgr attach` lists it and waits until it is reached
    code, out, err = await clustermgr("attach", address, "--name", "outside-cli", "--wait", *auth)
    assert code == 0, err
    assert out.startswith("attached outside-cli (") and "running: 1 external workers, 2 cores, 1.00 GiB" in out
    # Scaling it is refused with the server's reason (exit code 1)
    code, _, err = await clustermgr("scale", "outside-cli", "--workers", "2", *auth)
    assert code == 1 and "started elsewhere" in err
    # Deleting it detaches it: the scheduler keeps running
    code, out, _ = await clustermgr("delete", "outside-cli", "--wait", *auth)
    assert code == 0 and out.strip().endswith(": detached")
    code, out, _ = await clustermgr("list", *auth)
    assert (code, out.strip()) == (0, "no clusters")
    assert alive([scheduler.pid]) == [scheduler.pid]
