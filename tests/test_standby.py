"""Given standby schedulers, a local cluster takes one whole (id, folder, own TLS credentials), it is replaced, and none outlives its server."""

import asyncio
import os
import signal

import psutil
import pytest

from clustermgr_lab.backends.local.launcher import WarmLauncher
from clustermgr_lab.backends.local.standby import MARKER, StandbySchedulers

from .helpers import alive, call, cluster_client, running_with, until, wait_for


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["StandbySchedulers"] = {"count": 1, "refill_delay": 0.5}
    return jp_server_config


async def test_a_cluster_takes_the_standby_scheduler_which_is_then_replaced(jp_fetch, jp_serverapp):
    # Given a server that keeps one standby scheduler ready
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    manager.warm_up()  # what the first use does (a create, the sidebar's templates or stream)
    standby = (await until(manager.standby.ready, 60, "a standby scheduler"))[0]
    pid = standby.processes.get("scheduler").pid
    # When a cluster of the default (TLS) template is created, with an idle timeout
    body = {"spec": {"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}]}}
    _, created = await call(jp_fetch, "POST", "clusters", body={**body, "idle_timeout": 3600}, expect=202)
    cluster_id = created["id"]
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker running")
        # Then the cluster is the standby's: its id, its folder, its scheduler process, its address
        assert cluster_id == standby.cluster_id
        backend = manager.get(cluster_id).backend
        assert backend.workdir == standby.workdir and not (standby.workdir / MARKER).exists()
        assert backend.pids()["scheduler"] == pid
        assert cluster["scheduler_address"] == standby.endpoint.address
        # And it works over TLS with its credentials, and its scheduler took the cluster's idle timeout
        async with cluster_client(cluster, asynchronous=True) as client:
            assert await client.submit(sum, [1, 2]) == 3

            # (sent to the scheduler as the cluster is taken over, without waiting for its answer)
            async def idle_timeout_taken():
                return await client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.idle_timeout) == 3600

            await until(idle_timeout_taken, 30, "the scheduler's idle timeout")
        # And a replacement with a folder and credentials of its own is started
        replacement = (await until(manager.standby.ready, 60, "the replacement standby scheduler"))[0]
        assert replacement.cluster_id != cluster_id
        assert replacement.credentials.ca_file.read_bytes() != standby.credentials.ca_file.read_bytes()
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    # And deleting the cluster stops the scheduler that was the standby
    await until(lambda: alive([pid]) == [], 30, "the cluster's scheduler to stop")


async def test_standby_schedulers_never_outlive_their_server(tmp_path):
    # Given a "server" (a launcher connection) with one standby scheduler ready
    launcher = WarmLauncher(tmp_path, idle_timeout=1.0)
    pool = StandbySchedulers(tmp_path, launcher, count=1)
    pool.fill()
    first = (await until(pool.ready, 60, "a standby scheduler"))[0]
    first_pid = first.processes.get("scheduler").pid
    assert psutil.Process(first_pid).ppid() == launcher.pid
    # When a cluster takes it, and another is made
    taken = pool.take()
    pool.refill_delay = 0
    pool.fill()
    second = (await until(pool.ready, 60, "the second standby scheduler"))[0]
    second_pid = second.processes.get("scheduler").pid
    await asyncio.sleep(0.5)  # the untie request of the taken one goes out first (one connection, in order)
    try:
        # When the server goes away without stopping anything (as after a crash: its connection ends)
        await launcher.close()
        # Then the launcher stops the standby one and keeps the one a cluster took (it outlives servers)
        await until(lambda: alive([second_pid]) == [], 30, "the launcher to stop the standby scheduler")
        assert alive([first_pid]) == [first_pid]
        # And the next server's pool removes the folder the standby left; the taken one's stays
        assert (second.workdir / MARKER).exists()
        next_launcher = WarmLauncher(tmp_path, idle_timeout=1.0)
        next_pool = StandbySchedulers(tmp_path, next_launcher, count=1)
        next_pool.fill()
        third = (await until(next_pool.ready, 60, "the next server's standby scheduler"))[0]
        third_pid = third.processes.get("scheduler").pid
        assert not second.workdir.exists() and taken.workdir.exists()
        # And a clean stop stops its standby and removes its folder
        await next_pool.close()
        assert alive([third_pid]) == [] and not third.workdir.exists()
        await next_launcher.close()
    finally:
        for pid in alive([first_pid, second_pid]):
            os.killpg(pid, signal.SIGKILL)
