"""Given clusters the server starts, each speaks TLS with credentials of its own: strangers are refused, its owner is not."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
from pathlib import Path

import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from clustermgr_lab.common.security import PLAIN_WARNING, UnsafePath
from clustermgr_lab.manager.cluster_manager import ClusterManager

from .helpers import (
    SMALL,
    assert_strangers_refused,
    call,
    cluster_client,
    create,
    delete_and_wait,
    running_with,
    until,
    wait_for,
)
from .started_elsewhere import start_tls_scheduler_and_worker, stop_process
from .test_dashboard import dashboard_path, fetch_status

log = logging.getLogger("test-tls")


def inc(x):
    return x + 1


@pytest.fixture
def jp_server_config(jp_server_config):
    plain = {"name": "plain", "backend": "local", "tls": False, "spec": {"groups": [{**SMALL}]}}
    jp_server_config["ClusterManager"]["templates"] = [plain]
    return jp_server_config


async def test_local_cluster_refuses_strangers_and_serves_its_owner(jp_fetch, jp_serverapp, jp_http_port):
    # Given a running local cluster (forked by the warm launcher)
    cluster = await wait_for(jp_fetch, await create(jp_fetch), running_with(1), what="1 running worker")
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    dashboard = manager.get(cluster["id"]).endpoint.dashboard_address
    try:
        # Then its credentials are files of this user only, in a folder of this user only
        folder = Path(cluster["tls"]["key"]).parent
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        for path in cluster["tls"].values():
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
        # And the owner's Client (the cluster's Security from the API) computes
        async with cluster_client(cluster, asynchronous=True) as client:
            assert await client.submit(inc, 1) == 2
            workers = tuple(client.scheduler_info()["workers"])
            # (each worker's own HTTP routes, /health and /metrics, listen on loopback only)
            http = await client.run(
                lambda dask_worker: [s.getsockname()[:2] for s in dask_worker.http_server._sockets.values()]
            )
        worker_http = tuple(f"{host}:{port}" for sockets in http.values() for host, port in sockets)
        assert worker_http and all(address.startswith("127.0.0.1:") for address in worker_http), worker_http
        # While a plain Client, a Client with another certificate, and a bare TLS handshake are refused by the
        # scheduler and the worker; the dashboard and the workers' HTTP routes answer neither plain HTTP nor
        # HTTPS without the certificate
        await assert_strangers_refused(cluster, dashboard, workers, worker_http=worker_http)

        # And the server's proxy still serves the dashboard, a single plot, and its Bokeh WebSocket (a scheduler
        # rendering a Bokeh page under heavy load may miss a heartbeat: the proxy answers 503 until it is back)
        async def served(page: str) -> bytes | None:
            status, body = await fetch_status(jp_fetch, *dashboard_path(cluster, *page.split("/")))
            assert status in (200, 503), (page, status, body[:300])
            return body if status == 200 else None

        for page in ("status", "json/counts.json", "individual-task-stream"):  # identity.json: 500 after a task
            body = await until(lambda page=page: served(page), 60, f"the dashboard's {page} through the proxy", 0.5)
        token = re.search(rb'"token":\s*"([^"]+)"', body).group(1).decode()
        url = (
            f"ws://127.0.0.1:{jp_http_port}{cluster['dashboard_url'].removesuffix('/status')}/individual-task-stream/ws"
        )
        connection = await websocket_connect(HTTPRequest(url, request_timeout=60), subprotocols=["bokeh", token])
        try:
            first = await asyncio.wait_for(connection.read_message(), 60)  # Bokeh's ACK, from the scheduler
            assert first is not None and "ACK" in str(first), first
        finally:
            connection.close()
    finally:
        await delete_and_wait(jp_fetch, cluster["id"])


async def test_template_without_tls_warns(jp_fetch):
    # Given a template of the site that turns TLS off
    cluster = await wait_for(
        jp_fetch, await create(jp_fetch, template="plain"), running_with(1), what="1 running worker"
    )
    try:
        # Then the cluster is plain TCP, says so in its events, and still works
        assert cluster["scheduler_address"].startswith("tcp://") and cluster["tls"] is None
        _, events = await call(jp_fetch, "GET", "clusters", cluster["id"], "events", expect=200)
        assert any(PLAIN_WARNING in e["message"] for e in events["events"])
        async with cluster_client(cluster, asynchronous=True) as client:
            assert await client.submit(inc, 1) == 2
    finally:
        await delete_and_wait(jp_fetch, cluster["id"])


@pytest.mark.parametrize("trouble", ["someone else's", "writable by others"])
def test_a_work_folder_of_another_user_or_open_to_others_is_refused_with_a_log_line(tmp_path, caplog, trouble):
    # Given a work folder that another user owns (uid 65534), or that every user can write in
    workdir = tmp_path / "work"
    workdir.mkdir()
    if trouble == "someone else's":
        os.chown(workdir, 65534, 65534)
    else:
        workdir.chmod(0o777)
    # When a manager starts on it
    with caplog.at_level(logging.ERROR), pytest.raises(UnsafePath) as refused:
        ClusterManager(workdir=str(workdir), store_path=str(tmp_path / "store" / "s.sqlite3"), log=log)
    # Then it refuses, saying why, in its log too
    reason = "belongs to uid 65534" if trouble == "someone else's" else "can be written by other users"
    assert reason in str(refused.value)
    assert any(reason in r.getMessage() and "not loaded" in r.getMessage() for r in caplog.records)


def test_a_work_folder_readable_by_others_is_narrowed_and_the_store_is_private(tmp_path):
    # Given a work folder of this user that others can list
    workdir = tmp_path / "work"
    workdir.mkdir(mode=0o755)
    workdir.chmod(0o755)
    # When a manager starts on it
    manager = ClusterManager(workdir=str(workdir), store_path=str(tmp_path / "store" / "s.sqlite3"), log=log)
    try:
        # Then the work folder is closed to others, and the store (and its folder) are this user's only
        assert stat.S_IMODE(os.stat(workdir).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(tmp_path / "store").st_mode) == 0o700
        assert stat.S_IMODE(os.stat(tmp_path / "store" / "s.sqlite3").st_mode) == 0o600
    finally:
        manager.store.close()


async def test_a_tls_scheduler_started_elsewhere_is_attached_with_its_certificate_files(jp_fetch, tmp_path):
    # Given a tls:// scheduler and worker started elsewhere, with credentials of their own
    credentials, scheduler_file, processes = start_tls_scheduler_and_worker(tmp_path)
    try:
        address = await until(
            lambda: scheduler_file.exists() and json.loads(scheduler_file.read_text() or "{}").get("address"),
            60,
            "the scheduler's address",
        )
        # When it is attached without its files, Then that is a 400 naming them
        _, error = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=400)
        assert error["field"] == "tls"
        # When it is attached with them
        body = {"attach": address, "tls": credentials.to_dict()}
        _, cluster = await call(jp_fetch, "POST", "clusters", body=body, expect=202)
        # Then it is observed with its worker, and a Client made from its API entry computes on it
        cluster = await wait_for(
            jp_fetch,
            cluster["id"],
            lambda c: c["status"] == "running" and c["workers"]["running"] == 1,
            what="the attached worker",
        )
        assert cluster["scheduler_address"] == address and cluster["tls"] == credentials.to_dict()
        async with cluster_client(cluster, asynchronous=True) as client:
            assert await client.submit(inc, 41) == 42
        await call(jp_fetch, "DELETE", "clusters", cluster["id"], expect=202)
    finally:
        for process in processes:
            stop_process(process)
