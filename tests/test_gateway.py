"""Given a real dask-gateway server, then a gateway template offers its options, and its clusters are created, found,
scaled, reached through its proxy over TLS, and stopped there; a gateway that does not answer makes the template unavailable."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
from dask_gateway import BasicAuth, Gateway
from distributed import Client

from clustermgr_lab.client.connect import cluster_security

from .gateway_server import PASSWORD, start_gateway, stop_gateway
from .helpers import call, eventually, subprocess_env, until, wait_for, wait_gone
from .server_process import JupyterServer, free_port, link_hosts, mapped_libraries

GROUP = {"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    server = start_gateway(tmp_path_factory.mktemp("gateway"))
    try:
        yield server
    finally:
        left = stop_gateway(server)
        assert not left, f"the gateway left processes running: {left}"


@pytest.fixture
def jp_server_config(jp_server_config, gateway):
    jp_server_config["ClusterManager"]["templates"] = [
        {"name": "gateway", "description": "The test gateway", "backend": "gateway", "options": gateway.options,
         "spec": {"groups": [GROUP]}},
        {"name": "gateway-down", "backend": "gateway", "spec": {"groups": [GROUP]},
         "options": {**gateway.options, "gateway_address": f"http://127.0.0.1:{free_port()}"}},
        {"name": "gateway-refused", "backend": "gateway", "spec": {"groups": [GROUP]},
         "options": {**gateway.options, "auth": {"type": "basic", "username": "alice", "password": "wrong"}}},
    ]  # fmt: skip
    jp_server_config["ClusterManager"]["include_builtin_templates"] = False
    jp_server_config["ClusterManager"]["default_template"] = "gateway"
    jp_server_config["FoundClusters"] = {"interval": 0.5}
    return jp_server_config


def user_gateway(gateway) -> Gateway:
    """dask-gateway's own client, as a notebook of user alice makes it."""
    return Gateway(gateway.address, auth=BasicAuth("alice", PASSWORD), asynchronous=True)


async def gateway_status(gateway, address: str) -> str:
    """The gateway's status of the cluster at ``address``, as its own client reports it."""
    async with user_gateway(gateway) as own:
        return (await own._cluster_report(address.rsplit("/", 1)[1])).status.name


async def templates(jp_fetch) -> dict[str, dict]:
    _, answer = await call(jp_fetch, "GET", "templates", expect=200)
    return {t["name"]: t for t in answer["templates"]}


async def test_the_template_offers_the_gateways_options_and_a_gateway_down_is_unavailable(jp_fetch, gateway):
    # When the templates are listed
    listed = await templates(jp_fetch)
    # Then the gateway's options are the template's user options: same fields, defaults, bounds and choices
    offered = {o["name"]: o for o in listed["gateway"]["user_options"]}
    assert listed["gateway"]["available"] is True
    assert (offered["worker_cores"]["type"], offered["worker_cores"]["default"]) == ("integer", 1)
    assert (offered["worker_cores"]["minimum"], offered["worker_cores"]["maximum"]) == (1, 2)
    assert (offered["worker_memory"]["type"], offered["worker_memory"]["maximum"]) == ("number", 2)
    assert offered["environment"]["choices"] == ["base", "ml"]
    assert offered["worker_cores"]["label"] == "Worker cores"
    # And a template whose gateway does not answer is unavailable, saying why (not a 500)
    assert listed["gateway-down"]["available"] is False
    assert "127.0.0.1" in listed["gateway-down"]["unavailable_reason"]
    # And one whose credentials the gateway refuses is unavailable with the gateway's answer
    assert listed["gateway-refused"]["available"] is False
    assert "401" in listed["gateway-refused"]["unavailable_reason"], listed["gateway-refused"]


async def test_a_value_outside_the_gateways_bounds_is_a_400_naming_the_field(jp_fetch, gateway):
    await templates(jp_fetch)  # the gateway's options, as the New Cluster form reads them first
    body = {"template": "gateway", "options": {"worker_cores": 5}}
    status, error = await call(jp_fetch, "POST", "clusters", body=body, expect=400)
    assert error["field"] == "options.worker_cores"
    assert "at most 2" in error["message"]
    body = {"template": "gateway", "options": {"environment": "gpu"}}
    status, error = await call(jp_fetch, "POST", "clusters", body=body, expect=400)
    assert error["field"] == "options.environment"
    # And a value only the gateway's options handler refuses is a 400 too, with the gateway's message
    body = {"template": "gateway", "options": {"environment": "ml", "worker_cores": 2}}
    status, error = await call(jp_fetch, "POST", "clusters", body=body, expect=400)
    assert error["field"] == "options.environment"
    assert "environment 'ml' has 1-core workers only" in error["message"]
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []


async def test_a_cluster_made_here_runs_on_the_gateway_scales_computes_and_stops_there(jp_fetch, gateway):
    await templates(jp_fetch)
    # Given a cluster created from the gateway template with 2 cores per worker
    body = {"template": "gateway", "name": "gw", "options": {"worker_cores": 2, "worker_memory": 0.5}}
    _, cluster = await call(jp_fetch, "POST", "clusters", body=body, expect=202)
    cluster = await wait_for(jp_fetch, cluster["id"], lambda c: c["status"] == "running", 120, "running")
    assert cluster["backend"] == "gateway"
    assert cluster["scheduler_address"].startswith(f"gateway://127.0.0.1:{gateway.address.rsplit(':', 1)[1]}/")
    name = cluster["scheduler_address"].rsplit("/", 1)[1]
    # Then the dashboard opens through the gateway's route
    assert cluster["dashboard_url"] == f"{gateway.address}/clusters/{name}/status"
    # And an idle timeout cannot be pushed to its scheduler: the link (in the links' process) says why, in the events
    await call(jp_fetch, "PATCH", "clusters", cluster["id"], body={"idle_timeout": 600}, expect=200)

    async def refused():
        _, answer = await call(jp_fetch, "GET", "clusters", cluster["id"], "events")
        return [e for e in answer["events"] if "the idle timeout of a gateway cluster is the gateway's" in e["message"]]

    await until(refused, 10, "the gateway link's reason")
    async with user_gateway(gateway) as own:
        report = await own._cluster_report(name)
        assert report.status.name == "RUNNING" and report.options["worker_cores"] == 2
        # And its workers have the size the gateway's options give
        assert (cluster["spec"]["groups"][0]["threads"], cluster["spec"]["groups"][0]["memory"]) == (2, 2**29)
        # When it is scaled to 4 cores through the product's scale path, then that is 2 workers
        _, answer = await call(jp_fetch, "PATCH", "clusters", cluster["id"], body={"scale": {"cores": 4}}, expect=200)
        assert answer["resolved"]["workers"] == 2
        # Then the card shows them pending while the gateway starts them
        _, starting = await call(jp_fetch, "GET", "clusters", cluster["id"], expect=200)
        assert starting["workers"]["requested"] == 2 and starting["workers"]["pending"] >= 1
        cluster = await wait_for(
            jp_fetch, cluster["id"], lambda c: c["workers"]["running"] == 2, 120, "2 workers running"
        )
        # Then they are the gateway's workers, of the size its options gave
        assert cluster["resources"]["cores"] == 4
        # And a client with the cluster's TLS credentials computes through the gateway's proxy
        async with Client(
            cluster["scheduler_address"], security=cluster_security(cluster), asynchronous=True
        ) as client:
            assert await client.submit(lambda x: x + 1, 41) == 42
            assert len(await client.run(os.getpid)) == 2
        # When it is scaled down to 1, then one worker is retired
        await call(jp_fetch, "PATCH", "clusters", cluster["id"], body={"scale": {"workers": 1}}, expect=200)
        await wait_for(jp_fetch, cluster["id"], lambda c: c["workers"]["running"] == 1, 60, "1 worker running")
        # When it is deleted, then the gateway stops it
        await call(jp_fetch, "DELETE", "clusters", cluster["id"], expect=202)
        assert await wait_gone(jp_fetch, cluster["id"], 60) == 404
        report = await own._cluster_report(name)
        assert report.status.name in ("STOPPING", "STOPPED")


async def test_a_notebooks_gateway_cluster_is_listed_by_itself_and_leaves_when_the_gateway_stops_it(jp_fetch, gateway):
    async with user_gateway(gateway) as own:
        # Given a cluster made with dask-gateway's own client (as in a notebook), with one worker
        name = await own._submit()
        await own._wait_for_start(name)
        await own._scale_cluster(name, 1)
        address = f"{own.proxy_address}/{name}"

        # Then it is listed within a few seconds, with its worker, cores and memory
        async def listed():
            _, answer = await call(jp_fetch, "GET", "clusters", expect=200)
            found = [c for c in answer["clusters"] if c["scheduler_address"] == address]
            return found[0] if found and found[0]["workers"]["running"] == 1 else None

        cluster = await until(listed, 30, "the notebook's gateway cluster listed with its worker")
        assert (cluster["template"], cluster["backend"], cluster["status"]) == ("gateway", "gateway", "running")
        assert cluster["resources"]["cores"] == 1 and cluster["resources"]["memory"] > 0
        # When the gateway stops it, then it leaves the list
        await own._stop_cluster(name)
        status = await wait_gone(jp_fetch, cluster["id"], 30)
        last = (await call(jp_fetch, "GET", "clusters", cluster["id"]))[1]
        assert status == 404, (last["status"], last["error"], last["workers"])
    # And it was listed once only
    _, answer = await call(jp_fetch, "GET", "clusters", expect=200)
    assert not [c for c in answer["clusters"] if c["scheduler_address"] == address]


def test_a_gateway_cluster_stays_listed_across_a_server_restart_and_is_stopped_on_the_gateway_after(gateway, tmp_path):
    template = {"name": "gateway", "backend": "gateway", "options": gateway.options, "spec": {"groups": [GROUP]}}
    config = {"templates": [template], "default_template": "gateway", "include_builtin_templates": False}
    servers = []

    def server() -> JupyterServer:
        servers.append(JupyterServer(tmp_path, tmp_path / "store" / "clusters.sqlite3", tmp_path / "work", **config))
        return servers[-1].start()

    try:
        # Given a server with a gateway cluster of 1 worker
        first = server()
        client = first.client()
        eventually(lambda: client.templates()[0]["user_options"], 30, "the gateway's options")
        cluster = client.create(options={"worker_cores": 1})
        cluster = client.wait(cluster["id"], lambda c: c["status"] == "running", timeout=120)
        client.scale(cluster["id"], workers=1)
        client.wait(cluster["id"], lambda c: c["workers"]["running"] == 1, timeout=120)
        # And that server asked the gateway and linked to its scheduler from its scheduler links' process: it never
        # loaded distributed (NumPy comes with it) nor cryptography itself
        libraries = mapped_libraries(first.process.pid)
        assert [m for m in ("numpy", "cryptography") if f"/{m}/" in libraries] == []
        assert link_hosts(first)
        # When the server stops cleanly (keeping its clusters) and another starts on the same store
        assert first.stop() == 0
        client = server().client()
        # Then the cluster is listed again, attached to the same gateway cluster, its worker running
        again = client.wait(cluster["id"], lambda c: c["status"] == "running" and c["workers"]["running"] == 1, 60)
        assert again["scheduler_address"] == cluster["scheduler_address"]
        # And the inserted cell's code (the notebook's Cluster object), run in a fresh process as in a kernel,
        # computes through the gateway's proxy with the gateway's TLS credentials
        cell = (
            "import clustermgr_lab\n"
            "from distributed import Client\n"
            f"cluster = clustermgr_lab.get_cluster({cluster['id']!r}, url={servers[-1].url!r}, token={servers[-1].token!r})\n"
            "client = Client(cluster)\n"
            "print(client.submit(lambda x: x + 1, 41).result())\n"
            "print(cluster.dashboard_link)\n"
            "client.close()\n"
            "cluster.close()\n"
        )
        kernel = subprocess.run(
            [sys.executable, "-c", cell], capture_output=True, text=True, timeout=120, env=subprocess_env()
        )
        assert kernel.returncode == 0, kernel.stderr[-3000:]
        answer, dashboard = kernel.stdout.strip().splitlines()[-2:]
        assert answer == "42", kernel.stderr[-2000:]
        assert dashboard == again["dashboard_url"], (dashboard, again["dashboard_url"])
        # And deleting it stops it on the gateway
        client.delete(cluster["id"], wait=True, timeout=60)
        assert asyncio.run(gateway_status(gateway, cluster["scheduler_address"])) in ("STOPPING", "STOPPED")
        assert "/numpy/" not in mapped_libraries(servers[-1].process.pid)
    finally:
        for each in servers:
            if each.process is not None and each.process.poll() is None:
                each.stop(signal.SIGKILL)


async def test_adaptive_mode_grows_a_gateway_cluster_through_the_one_scale_path(jp_fetch, gateway):
    await templates(jp_fetch)
    # Given a gateway cluster, adaptive between 1 and 2 workers (the gateway's schedulers load the preload)
    body = {"template": "gateway", "adapt": {"minimum": 1, "maximum": 2}}
    _, cluster = await call(jp_fetch, "POST", "clusters", body=body, expect=202)
    cluster = await wait_for(jp_fetch, cluster["id"], lambda c: c["workers"]["running"] == 1, 120, "1 worker")
    assert cluster["adapt"]["groups"][0]["maximum"] == 2
    # When a client gives it more work than one worker does in the target time
    async with Client(cluster["scheduler_address"], security=cluster_security(cluster), asynchronous=True) as client:
        futures = client.map(lambda i: __import__("time").sleep(1) or i, range(40), pure=False)
        # Then the product's policy plans a second worker, and the gateway starts it
        grown = await wait_for(jp_fetch, cluster["id"], lambda c: c["workers"]["running"] == 2, 120, "2 workers")
        assert grown["last_decision"]["source"] == "adaptive"
        del futures
    await call(jp_fetch, "DELETE", "clusters", cluster["id"], expect=202)
    assert await wait_gone(jp_fetch, cluster["id"], 60) == 404


def test_a_server_nobody_uses_does_not_ask_its_gateway(gateway, tmp_path):
    # Given a server (a process of its own) with a gateway template, asking every 0.5 s while used, 3 s after a use
    template = {"name": "gateway", "backend": "gateway", "options": gateway.options, "spec": {"groups": [GROUP]}}
    rounds = {"FoundClusters": {"interval": 0.5, "watch_grace": 3.0}}
    server = JupyterServer(
        tmp_path, tmp_path / "store" / "clusters.sqlite3", tmp_path / "work", rounds,
        templates=[template], default_template="gateway", include_builtin_templates=False,
    )  # fmt: skip
    log = gateway.folder / "gateway.log"

    def asked() -> int:
        return log.read_text(errors="replace").count("GET /api/v1/clusters/?status=RUNNING")

    try:
        before = asked()
        server.start()
        # When nobody uses it for ten rounds' time
        time.sleep(5)
        # Then it has not asked the gateway for clusters, nor loaded dask-gateway's client (distributed, NumPy)
        assert asked() == before
        assert "/numpy/" not in mapped_libraries(server.process.pid)
        # When its API is used once
        server.client().list()
        # Then it asks the gateway for this user's clusters every round for a while
        eventually(lambda: asked() >= before + 2, 20, "rounds asking the gateway")
        # And once nobody has used it for longer than the grace, it stops asking
        time.sleep(3.0)
        counts = []

        def unchanged_for_two_seconds() -> bool:
            counts.append(asked())
            return len(counts) >= 2 and counts[-1] == counts[-2]

        eventually(unchanged_for_two_seconds, 30, "the rounds to stop", step=2.0)
        stopped = asked()
        time.sleep(3.0)
        assert asked() == stopped
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)


def test_a_used_server_reads_its_gateway_itself_and_lets_the_links_process_go_after_its_cluster(gateway, tmp_path):
    # Given a server (a process of its own) with a gateway template, asking every 0.5 s while used, and letting the
    # scheduler links' process go 1 s after it is last needed
    template = {"name": "gateway", "backend": "gateway", "options": gateway.options, "spec": {"groups": [GROUP]}}
    config = {
        "FoundClusters": {"interval": 0.5},
        "LinkHost": {"release_after": 1.0},
        "WarmLauncher": {"release_after": 1.0, "idle_timeout": 0.5},
    }
    server = JupyterServer(
        tmp_path, tmp_path / "store" / "clusters.sqlite3", tmp_path / "work", config,
        templates=[template], default_template="gateway", include_builtin_templates=False,
    )  # fmt: skip
    log = gateway.folder / "gateway.log"

    def asked(path: str) -> int:
        return log.read_text(errors="replace").count(f"GET {path}")

    def no_dask_gateway_here() -> bool:
        libraries = mapped_libraries(server.process.pid)
        return "/numpy/" not in libraries and "/cryptography/" not in libraries

    try:
        server.start()
        client = server.client()
        before = asked("/api/v1/clusters/?status=RUNNING")
        # When it is used (a list request each second; the sidebar's first look would also start the links' process
        # for a quick first create, for release_after s) for a few rounds
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            client.list()
            time.sleep(1)
        # Then it asked the gateway for its options and this user's clusters, from the server itself: no links'
        # process started, and dask-gateway's client (distributed, NumPy, cryptography) not loaded
        assert asked("/api/v1/clusters/?status=RUNNING") >= before + 2
        assert asked("/api/v1/options") >= 1
        assert link_hosts(server) == []
        assert no_dask_gateway_here()
        # When a cluster is made there, scaled to 1 worker and deleted, while the server is still used
        cluster = client.create(options={"worker_cores": 1})
        client.wait(cluster["id"], lambda c: c["status"] == "running", timeout=120)
        client.scale(cluster["id"], workers=1)
        client.wait(cluster["id"], lambda c: c["workers"]["running"] == 1, timeout=120)
        # Then the gateway was asked from the links' process, where the cluster's link runs
        assert link_hosts(server)
        client.delete(cluster["id"], wait=True, timeout=60)

        # And, used on, the server lets that process go once its cluster is gone, holding nothing of the gateway
        def links_process_gone() -> bool:
            client.list()
            return link_hosts(server) == []

        eventually(links_process_gone, 60, "the links' process to exit", step=1.0)
        assert no_dask_gateway_here()
        assert client.list() == []
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)
