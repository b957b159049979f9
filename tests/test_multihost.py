"""Given the multi-host test bed (ci/testbed/): clusters over real addresses, across two compute nodes.

The bed is two network namespaces, ``node1`` (10.250.0.11) and ``node2`` (10.250.0.12), each with
its own hostname and a ``slurmd`` of a SLURM cluster of their own (``SLURM_CONF`` below), joined to
this machine ("login side", 10.250.0.1 on the bridge ``cm-br0``) by veth links; ``node2`` runs an
sshd. ``make test`` starts it (``ci/services.sh``). A process in a node sees only that node's
addresses, so a scheduler or worker listening on the wrong interface, or a link naming a host the
server cannot reach, fails here as it would on a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest
import requests
from tornado.httpclient import HTTPClientError

from .helpers import call, cluster_client, delete_and_wait, eventually, running_with, until, wait_for
from .server_process import JupyterServer, mapped_libraries, stored_workers

pytestmark = [pytest.mark.xdist_group("testbed")]

REPO = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("TESTBED_STATE", "/tmp/clustermgr-testbed"))
SLURM_CONF = str(STATE / "slurm.conf")
LOGIN, NODE1, NODE2 = "10.250.0.1", "10.250.0.11", "10.250.0.12"
NODE_ADDRESSES = {"node1": NODE1, "node2": NODE2}
WORKER = {"name": "default", "count": 0, "threads": 1, "memory": "400 MiB"}
BED_OPTIONS = {
    "slurm_conf": SLURM_CONF,
    "queue": "compute",
    "walltime": "00:30:00",
    "interface": "eth0",  # the compute nodes' interface on the /24: workers listen and advertise there
}
TEMPLATES = [
    {
        "name": "bed-local",
        "backend": "slurm",
        "options": {**BED_OPTIONS, "scheduler": "local", "scheduler_interface": "cm-br0"},
        "spec": {"groups": [WORKER]},
    },
    {
        "name": "bed-job",
        "backend": "slurm",
        "options": {**BED_OPTIONS, "scheduler": "job", "scheduler_memory": "600 MiB"},
        "spec": {"groups": [WORKER]},
    },
    {"name": "bed-ssh", "backend": "ssh", "spec": {"groups": [WORKER]}},
]


def bed_unusable() -> str | None:
    """Why the bed cannot be used here, or None when it can."""
    if shutil.which("sinfo") is None or not Path(SLURM_CONF).exists():
        return f"no test bed ({SLURM_CONF} missing): start it with: sudo bash ci/testbed/start-testbed.sh"
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N=%T"], capture_output=True, text=True, timeout=15, env=bed_env()
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo failed: {exc}"
    states = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
    if done.returncode != 0 or set(states) != {"node1", "node2"}:
        return f"the bed's SLURM does not list node1 and node2: {done.stdout or done.stderr}"
    return None


def bed_env() -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": SLURM_CONF}


# Outside CI a machine without the bed skips these; under CI (`make test` starts it) they run, and fail if it is missing.
_unusable = bed_unusable()
requires_testbed = pytest.mark.skipif(
    _unusable is not None and not os.environ.get("CI"), reason=f"test bed not usable: {_unusable}"
)


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = TEMPLATES
    jp_server_config["SSHBackend"] = {
        "hosts": [NODE2],
        "scheduler_interface": "cm-br0",
        "interface": "eth0",
        "connect_options": {
            "username": "root",
            "known_hosts": str(STATE / "ssh" / "known_hosts"),
            "client_keys": [str(STATE / "ssh" / "client_ed25519")],
            "agent_path": None,
            "config": None,
        },
    }
    return jp_server_config


def bed_jobs(cluster_id: str) -> dict[str, tuple[str, str]]:
    """Worker (or ``scheduler``) name -> (state, node) of this cluster's jobs on the bed's SLURM."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%j|%T|%N"], capture_output=True, text=True, check=True, timeout=60, env=bed_env()
    ).stdout
    prefix = f"clustermgr-{cluster_id}-"
    rows = (line.strip().split("|") for line in out.splitlines() if line.strip())
    return {name.removeprefix(prefix): (state, node) for name, state, node in rows if name.startswith(prefix)}


async def jobs_of(cluster_id: str) -> dict[str, tuple[str, str]]:
    return await asyncio.to_thread(bed_jobs, cluster_id)


def netns_processes(node: str, needle: str) -> list[str]:
    """Command lines of the processes in ``node``'s network namespace that contain ``needle``."""
    pids = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True, timeout=15).stdout.split()
    found = []
    for pid in pids:
        try:
            command = " ".join(psutil.Process(int(pid)).cmdline())
        except (psutil.NoSuchProcess, ValueError):
            continue
        if needle in command:
            found.append(command)
    return found


def hosts_of(addresses) -> set[str]:
    return {urlparse(a).hostname for a in addresses}


async def compute_checked_graph(cluster: dict) -> set[str]:
    """Run a task graph over every worker, check its result; the hosts the workers advertise."""
    async with cluster_client(cluster, asynchronous=True) as client:
        workers = list((await client.scheduler.identity())["workers"])
        squares = [client.submit(pow, i, 2, workers=[workers[i % len(workers)]], pure=False) for i in range(40)]
        total = client.submit(sum, squares)
        assert await total == sum(i * i for i in range(40))
        return hosts_of(workers)


async def create_on(jp_fetch, template: str, workers: int, name: str) -> str:
    body = {"template": template, "name": name, "spec": {"groups": [{**WORKER, "count": workers}]}}
    _, cluster = await call(jp_fetch, "POST", "clusters", body=body, expect=202)
    return cluster["id"]


async def dashboard_through_proxy(jp_fetch, cluster: dict) -> None:
    """The card's dashboard and one individual plot load through this server's proxy (keyed URL, our host)."""
    url = urlparse(cluster["dashboard_url"])
    assert not re.search(r"10\.250\.", cluster["dashboard_url"]), "the link must be the proxied one"
    base = ("clustermgr", *url.path.removesuffix("/status").split("/clustermgr/", 1)[1].split("/"))
    for page in ("status", "individual-task-stream"):
        loaded = {}

        async def loads(page=page, loaded=loaded):
            # A scheduler job's first page render can take a while on a loaded machine (503 until then)
            try:
                loaded["body"] = (await jp_fetch(*base, page)).body
            except HTTPClientError as exc:
                loaded["error"] = exc
                return False
            return True

        await until(loads, 60, f"{page} through the proxy ({loaded.get('error')})", step=1)
        assert b"bokeh" in loaded["body"].lower(), page
    identity = await jp_fetch(*base, "json", "identity.json")
    assert f'"{cluster["scheduler_address"]}"'.encode() in identity.body


def dashboard_through_server(server: JupyterServer, cluster: dict) -> None:
    """As :func:`dashboard_through_proxy`, against a server process (its token, its URL)."""
    # the card's link is a path of this server (the proxy), never the scheduler's own host
    assert cluster["dashboard_url"].startswith("/clustermgr/dashboard/") and "10.250." not in cluster["dashboard_url"]
    base = server.url.rstrip("/") + cluster["dashboard_url"].removesuffix("/status")
    headers = {"Authorization": f"token {server.token}"}
    for page in ("status", "individual-task-stream"):
        loaded: list[requests.Response] = []

        def loads(page=page, loaded=loaded) -> bool:
            # A scheduler job's first page render can take a while on a loaded machine (503 until then)
            loaded.append(requests.get(f"{base}/{page}", headers=headers, timeout=30))
            return loaded[-1].ok

        eventually(loads, 60, page, step=1)
        assert b"bokeh" in loaded[-1].content.lower(), page
    identity = requests.get(f"{base}/json/identity.json", headers=headers, timeout=30).json()
    assert identity["address"] == cluster["scheduler_address"]


@requires_testbed
async def test_four_workers_over_both_nodes_survive_the_loss_of_one_node(jp_fetch):
    # Given a template whose scheduler runs here, on the bridge the nodes reach (cm-br0), workers on eth0
    cluster_id = await create_on(jp_fetch, "bed-local", 4, "bed-local")
    try:
        # When it has 4 workers
        cluster = await wait_for(jp_fetch, cluster_id, running_with(4), timeout=120, what="4 workers on the bed")
        # Then the scheduler listens on the login side's /24 address, and squeue shows workers on both nodes
        assert urlparse(cluster["scheduler_address"]).hostname == LOGIN
        jobs = await jobs_of(cluster_id)
        assert {node for state, node in jobs.values() if state == "RUNNING"} == {"node1", "node2"}, jobs
        # And the dashboard and a plot load through the proxy (the scheduler's dashboard is on this host); first,
        # as distributed's json/identity.json answers 500 once a task has run (tuple keys in its worker metrics)
        await dashboard_through_proxy(jp_fetch, cluster)
        # And a checked task graph runs on workers that advertise the nodes' addresses
        assert await compute_checked_graph(cluster) == {NODE1, NODE2}

        # When node2 dies: every process in it (slurmd, the jobs' steps and workers, sshd) is killed
        lost = {name for name, (state, node) in jobs.items() if node == "node2"}
        for pid in subprocess.run(["ip", "netns", "pids", "node2"], capture_output=True, text=True).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)

        # Then the lost workers are reported by name with the reason SLURM gives (NODE_FAIL)
        async def reported():
            _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
            messages = [e["message"] for e in events["events"]]
            return all(any(name in m and "NODE_FAIL" in m for m in messages) for name in lost)

        await until(reported, 120, f"NODE_FAIL reported for {sorted(lost)}", step=1)
        # And the cluster keeps running, its lost workers replaced on node1
        cluster = await wait_for(jp_fetch, cluster_id, running_with(4), timeout=120, what="4 workers again")
        jobs = await jobs_of(cluster_id)
        assert {node for state, node in jobs.values() if state == "RUNNING"} == {"node1"}, jobs
        assert await compute_checked_graph(cluster) == {NODE1}
    finally:
        await delete_and_wait(jp_fetch, cluster_id, timeout=120)
        await asyncio.to_thread(restore_node2)
    assert await jobs_of(cluster_id) == {}


@requires_testbed
async def test_ssh_workers_on_the_namespace_host_scale_0_2_0_and_leave_nothing(jp_fetch):
    # Given the SSH backend with node2 (another network namespace, its own sshd) as its host
    cluster_id = await create_on(jp_fetch, "bed-ssh", 0, "bed-ssh")
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(0), timeout=60, what="the SSH cluster")
        assert urlparse(cluster["scheduler_address"]).hostname == LOGIN
        # When it scales to 2 workers
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)
        cluster = await wait_for(jp_fetch, cluster_id, running_with(2), timeout=90, what="2 SSH workers")
        # Then they run on node2, advertise its address, and compute
        assert await compute_checked_graph(cluster) == {NODE2}
        assert len(netns_processes("node2", cluster["scheduler_address"])) >= 2
        # When it scales back to 0
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 0}}, expect=200)
        await wait_for(jp_fetch, cluster_id, running_with(0), timeout=60, what="0 SSH workers")
        # Then no process of it is left on node2
        await until(
            lambda: not netns_processes("node2", cluster["scheduler_address"]), 30, "node2 free of this cluster"
        )
    finally:
        await delete_and_wait(jp_fetch, cluster_id, timeout=60)


def restore_node2() -> None:
    """Bring node2 back (its slurmd and sshd), as the bed's start script does; waits until both nodes are idle."""
    subprocess.run(
        ["bash", str(REPO / "ci" / "testbed" / "start-testbed.sh")], check=True, timeout=120, capture_output=True
    )


@requires_testbed
@pytest.mark.timeout(600)
def test_the_scheduler_as_a_job_near_workers_on_both_nodes_outlives_the_server(tmp_path):
    # Given a server (a process of its own) and a template with `scheduler: "job"`
    store, workdir = tmp_path / "store" / "clusters.sqlite3", tmp_path / "work"
    servers: list[JupyterServer] = []

    def server():
        servers.append(JupyterServer(tmp_path, store, workdir, templates=TEMPLATES))
        return servers[-1].start().client()

    client = server()
    cluster = client.create(template="bed-job", name="scheduler-job", spec={"groups": [{**WORKER, "count": 4}]})
    try:
        # When it runs with 4 workers
        before = client.wait(cluster["id"], running_with(4), timeout=150)
        jobs = bed_jobs(cluster["id"])
        # Then the scheduler is a job of its own on a node, listening on that node's address
        state, node = jobs["scheduler"]
        assert state == "RUNNING" and urlparse(before["scheduler_address"]).hostname == NODE_ADDRESSES[node]
        # And the workers run on both nodes and compute a checked graph
        assert {n for name, (s, n) in jobs.items() if name != "scheduler" and s == "RUNNING"} == {"node1", "node2"}
        # And the dashboard of this scheduler on another host, and a plot, load through the server's proxy (before
        # any task: see test_four_workers_over_both_nodes_survive_the_loss_of_one_node)
        dashboard_through_server(servers[-1], before)
        assert asyncio.run(compute_checked_graph(before)) == {NODE1, NODE2}
        # And the stored record names its job and its SLURM, for the next server
        stored = stored_workers(store, cluster["id"])
        assert stored["scheduler"]["job_name"] == f"clustermgr-{cluster['id']}-scheduler"
        assert stored["scheduler"]["slurm_conf"] == SLURM_CONF

        # When the server is killed with SIGKILL, and another starts on the same store
        servers[-1].stop(signal.SIGKILL)
        client = server()
        # Then it re-adopts the cluster: the same scheduler job at the same address, the same worker jobs
        after = client.wait(cluster["id"], running_with(4), timeout=90)
        assert after["scheduler_address"] == before["scheduler_address"]
        assert stored_workers(store, cluster["id"])["scheduler"]["job_id"] == stored["scheduler"]["job_id"]
        assert bed_jobs(cluster["id"]) == jobs
        # When it is deleted, Then its jobs, the scheduler's included, are gone
        client.delete(cluster["id"], wait=True, timeout=90)
        assert bed_jobs(cluster["id"]) == {}
        # And the scheduler was asked to close by the links' process: the server itself never loaded distributed
        assert "did not close on request" not in servers[-1].log_text()
        assert "/numpy/" not in mapped_libraries(servers[-1].process.pid)
        # And no process of it is left on the nodes (the scheduler's included)
        address = before["scheduler_address"]
        eventually(lambda: not any(netns_processes(n, address) for n in NODE_ADDRESSES), 30, "nodes free of it")
    finally:
        for running in servers:
            if running.process is not None and running.process.poll() is None:
                running.stop(signal.SIGKILL)  # what it started is cancelled below
        # never leave a job on the bed, whatever failed above
        subprocess.run(
            ["scancel", "--name", f"clustermgr-{cluster['id']}-scheduler"], capture_output=True, env=bed_env()
        )
        for i in range(1, 5):
            subprocess.run(
                ["scancel", "--name", f"clustermgr-{cluster['id']}-default-{i}"], capture_output=True, env=bed_env()
            )
