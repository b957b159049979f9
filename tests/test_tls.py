"""Given clusters the server starts, each speaks TLS with credentials of its own: strangers are refused, its owner is not."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from clustermgr_lab.security import PLAIN_WARNING

from .helpers import SMALL, assert_strangers_refused, call, cluster_client, create, delete_and_wait, running_with, wait_for
from .test_dashboard import dashboard_path, fetch_status


def inc(x):
    return x + 1


@pytest.fixture
def jp_server_config(jp_server_config):
    plain = {"name": "plain", "backend": "local", "tls": False, "spec": {"groups": [{**SMALL}]}}
    jp_server_config["ClusterManager"]["templates"] = [plain]
    return jp_server_config


async def test_local_cluster_refuses_strangers_and_serves_its_owner(jp_fetch, jp_serverapp, jp_ws_fetch):
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
        # And a plain Client, a Client with another certificate, and a bare TLS handshake are refused by the
        # scheduler; its dashboard answers neither plain HTTP nor HTTPS without the cluster's certificate
        await assert_strangers_refused(cluster, dashboard)
        # While the owner's Client (the cluster's Security from the API) computes
        async with cluster_client(cluster, asynchronous=True) as client:
            assert await client.submit(inc, 1) == 2
        # And the server's proxy still serves the dashboard, a single plot, and its Bokeh WebSocket
        status, body = await fetch_status(jp_fetch, *dashboard_path(cluster, "status"))
        assert status == 200 and b"Bokeh" in body
        status, _ = await fetch_status(jp_fetch, *dashboard_path(cluster, "individual-task-stream"))
        assert status == 200
        status, _ = await fetch_status(jp_fetch, *dashboard_path(cluster, "json", "identity.json"))
        assert status == 200
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
