"""Given a private sshd on 127.0.0.1 (key auth, started here), workers of the SSH backend are started over SSH.

The sshd is Debian's ``/usr/sbin/sshd`` run by the test set-up (``ssh_server.start_sshd``) with keys,
a config and a known_hosts file of its own in a temporary folder, on a free port of 127.0.0.1; the
system sshd and ``~/.ssh`` are not used. Every process the backend starts over SSH is a descendant
of that sshd, which is how the tests find them in the process table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys

import dask.config
import psutil
import pytest

from clustermgr_lab.backends import BackendContext, SSHBackend
from clustermgr_lab.backends.local.backend import SCHEDULER
from clustermgr_lab.cluster.hosted_link import LinkHost
from clustermgr_lab.domain.errors import BackendError
from clustermgr_lab.domain.spec import parse_spec

from .helpers import (
    alive,
    assert_workers_closed_to_strangers,
    call,
    cluster_client,
    delete_and_wait,
    eventually,
    running_with,
    tree,
    until,
    wait_for,
)
from .server_process import JupyterServer, descendants, kill_leftovers, link_hosts, mapped_libraries
from .ssh_server import PrivateSshd, start_sshd, stop_sshd

MiB = 2**20
WORKERS = {"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}


def dask_spec_processes(scheduler_address: str) -> dict[str, psutil.Process]:
    """The ``dask_spec`` processes (one Nanny each) of this scheduler on this machine, by worker name.

    Found by command line, not by ancestry: a process whose SSH session ended is no longer below sshd.
    """
    found = {}
    for process in psutil.process_iter():
        try:
            command = process.cmdline()
            if (
                "distributed.cli.dask_spec" in command
                and scheduler_address in command
                and process.status() != psutil.STATUS_ZOMBIE
            ):
                (spec,) = json.loads(command[command.index("--spec") + 1]).values()
                found[spec["opts"]["name"]] = process
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A private sshd on 127.0.0.1 accepting one generated key (``ssh_server.start_sshd``); stopped afterwards."""
    started = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield started
    stop_sshd(started)


@pytest.fixture
def ssh_backend(sshd, monkeypatch):
    """The SSH backend pointed at the private sshd; workers listen on loopback only."""
    monkeypatch.setattr(SSHBackend, "hosts", ("127.0.0.1",))
    monkeypatch.setattr(SSHBackend, "connect_options", sshd.connect_options)
    monkeypatch.setattr(SSHBackend, "interface", "lo")
    return SSHBackend


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [
        {"name": "ssh", "description": "workers over SSH", "backend": "ssh", "spec": {"groups": [WORKERS]}}
    ]
    return jp_server_config


def backend_of(jp_serverapp, cluster_id) -> SSHBackend:
    return jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).backend


async def test_workers_started_over_ssh_scale_up_and_down_and_leave_nothing(jp_fetch, jp_serverapp, sshd, ssh_backend):
    # Given a cluster from the SSH template, with no workers yet
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "ssh", "name": "over ssh"}, expect=202)
    cluster_id = cluster["id"]
    seen: set[int] = set()
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler")
        assert cluster["backend"] == "ssh"
        scheduler_pids = tree(backend_of(jp_serverapp, cluster_id).pids()["scheduler"])
        address = cluster["scheduler_address"]
        assert dask_spec_processes(address) == {}

        # When it is scaled to 2 workers through the API
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)

        # Then 2 workers connect, with the group's threads and memory
        cluster = await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers over SSH", timeout=120)
        assert cluster["resources"] == {"cores": 2, "memory": 1024 * MiB, "gpus": 0}
        # And they run under the private sshd: one dask_spec Nanny per worker, called by our names
        workers = dask_spec_processes(address)
        assert sorted(workers) == ["default-1", "default-2"]
        nannies = list(workers.values())
        assert all(n.pid in tree(sshd.process.pid) for n in nannies)
        assert backend_of(jp_serverapp, cluster_id).hosts_of_workers() == {
            "default-1": "127.0.0.1",
            "default-2": "127.0.0.1",
        }
        under_sshd = set(tree(sshd.process.pid))
        trees = {n.pid: tree(n.pid) for n in nannies}
        seen.update(p for pids in trees.values() for p in pids)

        async with cluster_client(cluster, asynchronous=True) as client:
            # And the scheduler, the workers started over SSH and the dashboard refuse peers without the
            # cluster's certificate (plain, another certificate, none), while this Client is served
            dashboard = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).endpoint.dashboard_address
            # And each worker's own HTTP routes (/health, /metrics) listen on loopback only, and refuse strangers too
            await assert_workers_closed_to_strangers(client, cluster, dashboard)
            # And each worker process is a child of one of those Nannies, listening on loopback
            parents = await client.run(lambda: os.getppid())
            assert set(parents.values()) <= {n.pid for n in nannies} and len(parents) == 2
            assert all(worker.startswith("tls://127.0.0.1:") for worker in parents)
            # And, their group having no GPUs, CUDA shows them no device of the host
            cuda = await client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
            assert list(cuda.values()) == ["", ""], cuda
            assert set(parents.values()) <= under_sshd
            # And they compute
            futures = client.map(lambda i: bytes(1000) * i, range(20), pure=False)
            assert [len(r) for r in await client.gather(futures)] == [1000 * i for i in range(20)]

            # When it is scaled down to 1
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
            await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker", timeout=60)

            # Then exactly one remote worker process is left, the other's processes are gone, and no result is lost
            (survivor,) = (
                await until(
                    lambda: len(dask_spec_processes(address)) == 1 and dask_spec_processes(address), 30, "1 Nanny"
                )
            ).values()
            stopped = [p for nanny, pids in trees.items() if nanny != survivor.pid for p in pids]
            assert len(stopped) >= 2  # the Nanny and its worker process
            assert await until(lambda: alive(stopped) == [], 30, "the retired worker's processes to end")
            assert [len(r) for r in await client.gather(futures)] == [1000 * i for i in range(20)]
            (name_before,) = backend_of(jp_serverapp, cluster_id).hosts_of_workers()

            # When the surviving worker's Nanny is killed on the remote host (as a node failure would)
            os.kill(survivor.pid, signal.SIGKILL)

            # Then the backend notices through its SSH channel, and a new worker replaces it
            async def replaced():
                _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
                return any(name_before in e["message"] and "replacing" in e["message"] for e in events["events"])

            await until(replaced, 30, "the killed worker to be noticed", step=0.2)
            await wait_for(jp_fetch, cluster_id, running_with(1), what="a replacement worker", timeout=120)
            assert list(backend_of(jp_serverapp, cluster_id).hosts_of_workers()) != [name_before]
            seen.update(p for n in dask_spec_processes(address).values() for p in tree(n.pid))
    finally:
        # When the cluster is deleted
        await delete_and_wait(jp_fetch, cluster_id)
    # Then no process it started is left once it is gone from the API: no worker, no Nanny, no scheduler
    assert alive(seen) == [] and dask_spec_processes(address) == {}
    assert alive(scheduler_pids) == []
    # And its SSH sessions close
    assert await until(lambda: tree(sshd.process.pid) == [sshd.process.pid], 30, "the SSH sessions to close")


async def test_a_worker_that_cannot_start_is_reported_and_not_retried(jp_fetch, sshd, ssh_backend, monkeypatch):
    # Given an SSH backend whose remote Python does not exist
    monkeypatch.setattr(SSHBackend, "remote_python", "/nonexistent/bin/python3")
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "ssh"}, expect=202)
    cluster_id = cluster["id"]
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler")
        address = cluster["scheduler_address"]
        # When a worker is asked for
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
        # Then the cluster's error says which worker did not start, where, and the remote shell's reason
        cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["error"], what="an error", timeout=60)
        assert "worker default-1 did not start on 127.0.0.1" in cluster["error"]
        assert "/nonexistent/bin/python3" in cluster["error"] and "No such file or directory" in cluster["error"]
        assert "remote exit status 127" in cluster["error"]
        # And nothing is left requested, running or pending, and nothing runs under the sshd
        await asyncio.sleep(1)
        _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id)
        assert (cluster["workers"]["requested"], cluster["workers"]["running"]) == (0, 0)
        assert dask_spec_processes(address) == {}
    finally:
        await delete_and_wait(jp_fetch, cluster_id)
    assert await until(lambda: tree(sshd.process.pid) == [sshd.process.pid], 30, "the SSH sessions to close")


@pytest.fixture(params=["links-process", "in-process"])
def held_by(request) -> str:
    """Where the SSH connections are held: the scheduler links' process, as a server has it, or the backend's own."""
    return request.param


def ssh_connections(pid: int, sshd: PrivateSshd) -> int:
    """How many TCP connections process ``pid`` has to the private sshd."""
    return sum(1 for c in psutil.Process(pid).net_connections("tcp") if c.raddr and c.raddr.port == sshd.port)


async def test_stopped_lost_and_orphaned_workers_have_their_remote_process_group_killed(
    tmp_path, sshd, ssh_backend, held_by
):
    # Given an SSH backend with its scheduler and 3 workers started over SSH, the connections held by the
    # scheduler links' process (or, made without one, by the backend's own)
    exits = []
    helper = LinkHost(release_after=1.0) if held_by == "links-process" else None
    context = BackendContext(tmp_path / "server-1" / "abc123", helper=helper)
    backend = ssh_backend("abc123", context, on_worker_exit=lambda *exit: exits.append(exit))
    group = parse_spec({"groups": [WORKERS]}).groups[0]
    endpoint = await backend.start_scheduler()
    address = endpoint.address
    scheduler_pids = tree(backend.pids()["scheduler"])
    try:
        await backend.scale_up(group, ["default-1", "default-2", "default-3"])
        nannies = dask_spec_processes(address)
        assert sorted(nannies) == ["default-1", "default-2", "default-3"]
        processes = {name: tree(nanny.pid) for name, nanny in nannies.items()}
        assert all(len(pids) >= 2 for pids in processes.values())  # a Nanny and its worker process each
        # And each is recorded (for the store) with its host, remote process group and how to connect
        records = {name: r for name, r in backend.process_records().items() if name != SCHEDULER}
        assert {name: (r["host"], r["process_group"]) for name, r in records.items()} == {
            name: ("127.0.0.1", os.getpgid(nanny.pid)) for name, nanny in nannies.items()
        }
        assert all(r["connect_options"] == sshd.connect_options for r in records.values())
        if helper is not None:  # And the links' process holds their 3 connections, this process none
            assert ssh_connections(helper.pid, sshd) == 3 and ssh_connections(os.getpid(), sshd) == 0
        # (the scheduler keeps running throughout: no worker below can be ending because its scheduler went)

        # When one is scaled down
        await backend.scale_down(["default-1"])
        # Then its Nanny and worker process are gone when scale_down returns, and the others still run
        assert alive(processes["default-1"]) == []
        assert all(nannies[name].is_running() for name in ("default-2", "default-3"))
        assert sorted(backend.hosts_of_workers()) == ["default-2", "default-3"]

        # When the SSH connection of another is lost (its sshd process dies; the worker does not)
        session = nannies["default-2"].parent()
        assert session.name() == "sshd" and session.pid in tree(sshd.process.pid)
        session.kill()
        # Then its process group is killed over a new connection, and it is reported as ended
        assert await until(lambda: alive(processes["default-2"]) == [], 30, "the lost worker's processes to end")
        assert await until(lambda: exits == [("default-2", None)], 10, "the lost worker to be reported")
        assert nannies["default-3"].is_running()

        # When the server dies without closing the backend, and the next one adopts the stored records
        # with none of the connect options configured (they were the cluster's, not the class's)
        records = backend.process_records()
        unconfigured = type("Unconfigured", (SSHBackend,), {"connect_options": {}})
        successor = unconfigured("abc123", BackendContext(backend.workdir, helper=helper))
        adopted = await successor.adopt(endpoint, {name: r for name, r in records.items() if name != SCHEDULER})
        # Then the last worker is not adopted: its whole process group is killed over SSH, while the scheduler runs
        assert adopted == set()
        assert await until(lambda: alive(processes["default-3"]) == [], 10, "the left worker's processes to end")
        assert psutil.Process(backend.pids()["scheduler"]).is_running()
    finally:
        await backend.close()
        if helper is not None:
            await helper.close()
    assert alive(scheduler_pids) == [] and dask_spec_processes(address) == {}


async def test_a_worker_that_hangs_while_starting_is_killed_when_its_start_times_out(
    tmp_path, sshd, ssh_backend, monkeypatch
):
    # Given an SSH backend whose workers hang as they start (a Nanny preload that sleeps, after the
    # one that reports the process group), with a start timeout long enough to get that far
    monkeypatch.setattr(SSHBackend, "worker_start_timeout", 20.0)  # an interpreter start at load 10 takes ~10 s
    backend = ssh_backend("abc123", tmp_path / "abc123")
    address = (await backend.start_scheduler()).address
    try:
        # When a worker is started
        with (
            dask.config.set({"distributed.nanny.preload": ["import time; time.sleep(600)"]}),
            pytest.raises(BackendError) as failed,
        ):
            await backend.scale_up(parse_spec({"groups": [WORKERS]}).groups[0], ["default-1"])
        # Then the start fails naming the timeout, and the hanging remote process group is gone already
        assert "worker default-1 did not start on 127.0.0.1" in failed.value.message
        assert "no worker within 20 s" in failed.value.message
        assert dask_spec_processes(address) == {} and backend.hosts_of_workers() == {}
    finally:
        await backend.close()


def sessions_naming(scheduler_address: str) -> list[int]:
    """The processes (and their descendants) whose command line starts a ``dask_spec`` of this scheduler.

    Unlike :func:`dask_spec_processes`, also a shell that runs the command line (it is one argument there).
    """
    found = []
    for process in psutil.process_iter():
        try:
            command = " ".join(process.cmdline())
            if f"distributed.cli.dask_spec {scheduler_address} " in command:
                found += tree(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return alive(found)


async def test_a_worker_whose_start_times_out_before_it_reports_its_process_group_is_found_and_killed(
    tmp_path, sshd, ssh_backend, monkeypatch
):
    # Given an SSH backend whose remote command hangs before Python starts: no Nanny, so no process group reported
    monkeypatch.setattr(SSHBackend, "worker_start_timeout", 10.0)
    monkeypatch.setattr(SSHBackend, "remote_python", f"sleep 600; {sys.executable}")
    backend = ssh_backend("abc123", tmp_path / "abc123")
    address = (await backend.start_scheduler()).address
    try:
        # When a worker is started
        start = asyncio.ensure_future(backend.scale_up(parse_spec({"groups": [WORKERS]}).groups[0], ["default-1"]))
        remote = await until(
            lambda: len(found := sessions_naming(address)) >= 2 and found, 30, "the remote shell and its sleep"
        )
        # Then its start fails naming the timeout
        with pytest.raises(BackendError) as failed:
            await start
        assert "no worker within 10 s" in failed.value.message
        # And the remote shell and its sleep are gone: found by the worker's name on its command line, and killed
        assert alive(remote) == [] and sessions_naming(address) == []
    finally:
        await backend.close()


def test_a_server_holds_no_ssh_connection_and_its_workers_outlive_no_links_process(tmp_path, sshd):
    # Given a Jupyter server (a process of its own) with an SSH template pointed at the private sshd
    template = {"name": "ssh", "description": "workers over SSH", "backend": "ssh", "spec": {"groups": [WORKERS]}}
    ssh = {"hosts": ["127.0.0.1"], "connect_options": sshd.connect_options, "interface": "lo"}
    other = {"SSHBackend": ssh, "LinkHost": {"release_after": 1.0}, "WarmLauncher": {"release_after": 1.0}}
    server = JupyterServer(tmp_path, tmp_path / "clusters.sqlite3", tmp_path / "work", other, templates=[template])
    server.start()
    client = server.client()
    address = None
    try:
        # When an SSH cluster is made and scaled to 2 workers
        cluster = client.create(template="ssh", name="over ssh")
        client.wait(cluster["id"], running_with(0), timeout=120)
        client.scale(cluster["id"], workers=2)
        cluster = client.wait(cluster["id"], running_with(2), timeout=120)
        address = cluster["scheduler_address"]
        nannies = dask_spec_processes(address)
        assert sorted(nannies) == ["default-1", "default-2"]
        # Then the scheduler links' process holds their SSH connections, and the server none: it never
        # imported asyncssh's cryptography nor distributed's NumPy
        (host,) = eventually(lambda: link_hosts(server), 30, "the scheduler links' process")
        assert ssh_connections(host.pid, sshd) == 2 and ssh_connections(server.process.pid, sshd) == 0
        libraries = mapped_libraries(server.process.pid)
        assert "/cryptography/" not in libraries and "/numpy/" not in libraries

        # When that process is killed (out of memory, a mistaken kill), taking the connections with it
        workers = {p for nanny in nannies.values() for p in tree(nanny.pid)}
        host.kill()
        # Then the workers it held are killed on their host (their channels are gone: untracked, they must not
        # run on) and replaced through a new links' process, as for any lost connection
        assert eventually(lambda: alive(workers) == [], 60, "the orphaned workers to be killed")
        cluster = client.wait(cluster["id"], running_with(2), timeout=120)
        assert set(dask_spec_processes(address)).isdisjoint({n.pid for n in nannies.values()})
        (replacement,) = eventually(lambda: link_hosts(server), 30, "a new links' process")
        assert replacement.pid != host.pid and ssh_connections(replacement.pid, sshd) == 2
        replacing = [e["message"] for e in client.events(cluster["id"]) if "replacing" in e["message"]]
        assert all(any(name in m for m in replacing) for name in nannies), replacing

        # When the cluster is deleted
        client.delete(cluster["id"], wait=True, timeout=120)
        # Then no worker is left, the links' process is let go, and the server still has neither library
        assert dask_spec_processes(address) == {}
        eventually(lambda: not descendants(server), 60, "the links' process and the scheduler to exit")
        libraries = mapped_libraries(server.process.pid)
        assert "/cryptography/" not in libraries and "/numpy/" not in libraries
        assert eventually(lambda: tree(sshd.process.pid) == [sshd.process.pid], 30, "the SSH sessions to close")
    finally:
        if server.process.poll() is None:
            server.stop(signal.SIGTERM)
        for nanny in dask_spec_processes(address).values() if address else []:
            with contextlib.suppress(psutil.Error):
                os.killpg(nanny.pid, signal.SIGKILL)
        kill_leftovers(set(), str(tmp_path / "work"))


async def test_a_worker_stopped_while_it_starts_is_given_up_and_killed(
    tmp_path, sshd, ssh_backend, held_by, monkeypatch
):
    # Given an SSH backend whose remote command hangs before Python starts, connections held as a server holds them
    monkeypatch.setattr(SSHBackend, "remote_python", f"sleep 600; {sys.executable}")
    helper = LinkHost(release_after=1.0) if held_by == "links-process" else None
    backend = ssh_backend("abc123", BackendContext(tmp_path / "abc123", helper=helper))
    address = (await backend.start_scheduler()).address
    try:
        # When a worker is started, and stopped before it has started
        start = asyncio.ensure_future(backend.scale_up(parse_spec({"groups": [WORKERS]}).groups[0], ["default-1"]))
        remote = await until(
            lambda: len(found := sessions_naming(address)) >= 2 and found, 30, "the remote shell and its sleep"
        )
        await backend.scale_down(["default-1"])
        # Then its start fails saying so, and what it started on the host is gone
        with pytest.raises(BackendError) as failed:
            await start
        assert "worker default-1 was stopped while it started on 127.0.0.1" in failed.value.message
        assert await until(lambda: alive(remote) == [], 10, "the remote shell and its sleep to end")
        assert sessions_naming(address) == [] and backend.hosts_of_workers() == {}
    finally:
        await backend.close()
        if helper is not None:
            await helper.close()
