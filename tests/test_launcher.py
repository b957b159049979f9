"""Given the warm launcher, local schedulers and workers are forked from it and behave like plain ones."""

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from clustermgr_lab.backends.base import BackendContext
from clustermgr_lab.backends.local.backend import LocalBackend
from clustermgr_lab.backends.local.launcher import WarmLauncher

from .helpers import alive, call, cluster_client, running_with, until, wait_for

MiB = 2**20


def manager_of(jp_serverapp):
    return jp_serverapp.web_app.settings["clustermgr_manager"]


async def create(jp_fetch, groups):
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"spec": {"groups": groups}}, expect=202)
    return cluster["id"]


async def test_scheduler_and_workers_are_forked_from_the_launcher_in_sessions_of_their_own(jp_fetch, jp_serverapp):
    # Given a server with the warm launcher on (the default)
    manager = manager_of(jp_serverapp)
    # When a cluster with a CPU worker and a GPU worker starts
    groups = [
        {"name": "cpu", "count": 1, "threads": 1, "memory": "300 MiB", "resources": {"FOO": 2}},
        {"name": "gpu", "count": 1, "threads": 1, "memory": "256 MiB", "gpus": 1},
    ]
    cluster_id = await create(jp_fetch, groups)
    cluster = await wait_for(jp_fetch, cluster_id, running_with(2))
    backend = manager.get(cluster_id).backend
    try:
        pids = backend.pids()
        launcher = psutil.Process(manager.launcher.pid)
        # Then every process is a child of the launcher, not of the server, each in a session of its own
        assert set(pids) == {"scheduler", "cpu-1", "gpu-2"}
        for name, pid in pids.items():
            assert psutil.Process(pid).ppid() == launcher.pid, name
            assert os.getsid(pid) == pid, name
        # And the launcher is in its own session too, so a signal to the server's group misses it
        assert os.getsid(launcher.pid) == launcher.pid != os.getsid(0)
        assert "clustermgr_lab.backends.local.forkserver" in " ".join(launcher.cmdline())
        # And each worker kept its nanny, memory limit, resources and CUDA_VISIBLE_DEVICES; logs go to files
        async with cluster_client(cluster, asynchronous=True) as client:
            workers = (await client.scheduler.identity(n_workers=-1))["workers"].values()
            by_name = {w["name"]: w for w in workers}
            assert by_name["cpu-1"]["memory_limit"] == 300 * MiB and by_name["cpu-1"]["nanny"]
            assert by_name["cpu-1"]["resources"] == {"FOO": 2}
            assert by_name["gpu-2"]["resources"] == {"GPU": 1}
            devices = await client.run(lambda dask_worker: (dask_worker.name, os.environ.get("CUDA_VISIBLE_DEVICES")))
            assert sorted(devices.values()) == [("cpu-1", ""), ("gpu-2", "0")]
        for name in pids:
            assert "distributed" in (backend.workdir / f"{name}.log").read_text(), name
        assert cluster["dashboard_url"]
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    # And a delete stops them all; the launcher stays for the next cluster
    await until(lambda: alive(list(pids.values())) == [], 30, "the processes to stop")
    assert launcher.is_running()


async def test_a_forked_worker_over_its_memory_limit_is_restarted_by_its_nanny(jp_fetch, jp_serverapp):
    # Given a forked worker with a 256 MiB memory limit
    cluster_id = await create(jp_fetch, [{"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}])
    cluster = await wait_for(jp_fetch, cluster_id, running_with(1))
    log_file = manager_of(jp_serverapp).get(cluster_id).backend.workdir / "default-1.log"
    try:
        # When a task holds 400 MiB
        async with cluster_client(cluster, asynchronous=True) as client:
            hog = client.submit(lambda: (bytearray(400 * MiB), time.sleep(30)), pure=False)
            # Then its nanny notices the limit is exceeded and restarts the worker
            await until(lambda: "exceeded 95% memory budget" in log_file.read_text(), 60, "the nanny's restart")
            del hog
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)


@pytest.fixture
def launcher_off(jp_server_config):
    jp_server_config["WarmLauncher"] = {"enabled": False}
    return jp_server_config


@pytest.fixture
def launcher_broken(jp_server_config):
    jp_server_config["WarmLauncher"] = {"preload": ["clustermgr_lab_no_such_module"]}
    return jp_server_config


async def assert_plain_processes(jp_fetch, jp_serverapp):
    cluster_id = await create(jp_fetch, [{"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}])
    await wait_for(jp_fetch, cluster_id, running_with(1))
    try:
        for name, pid in manager_of(jp_serverapp).get(cluster_id).pids().items():
            process = psutil.Process(pid)
            assert process.ppid() == os.getpid(), name
            assert os.getsid(pid) == pid, name
            # distributed sets the title "dask scheduler [address]" itself where setproctitle is installed
            command = " ".join(process.cmdline())
            assert "distributed.cli.dask_" in command or command.startswith("dask "), (name, command)
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)


async def test_with_the_launcher_turned_off_processes_are_plain_interpreters(launcher_off, jp_fetch, jp_serverapp):
    # Given c.WarmLauncher.enabled = False
    # When a cluster starts, Then its processes are `python -m distributed.cli.dask_*` children of the server
    await assert_plain_processes(jp_fetch, jp_serverapp)
    assert manager_of(jp_serverapp).launcher.pid is None


async def test_a_launcher_that_cannot_start_falls_back_to_plain_processes_with_a_log_line(
    launcher_broken, jp_fetch, jp_serverapp
):
    # Given a launcher that fails while it preloads its modules
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    manager = manager_of(jp_serverapp)
    manager.launcher.log.addHandler(handler)
    try:
        # When a cluster starts, Then it runs on plain processes
        await assert_plain_processes(jp_fetch, jp_serverapp)
    finally:
        manager.launcher.log.removeHandler(handler)
    # And the server log says why
    messages = [r.getMessage() for r in records]
    assert any("warm launcher unavailable" in m and "starting plain processes" in m for m in messages), messages
    assert "clustermgr_lab_no_such_module" in manager.launcher.log_path.read_text()


async def scheduler_from_a_launcher(tmp_path) -> tuple[WarmLauncher, LocalBackend, int]:
    """A local backend outside any server, whose scheduler the launcher of ``tmp_path`` forked."""
    launcher = WarmLauncher(tmp_path, idle_timeout=1.0)
    backend = LocalBackend("c1", BackendContext(tmp_path / "c1", launcher=launcher))
    await backend.start_scheduler()
    return launcher, backend, backend.pids()["scheduler"]


async def test_the_launcher_outlives_its_server_is_reused_and_exits_once_idle(tmp_path):
    # Given a launcher started by one "server" that forked a scheduler
    first, backend, scheduler = await scheduler_from_a_launcher(tmp_path)
    launcher_pid = first.pid
    try:
        # When that server goes away without stopping it
        await first.close()
        await asyncio.sleep(2)  # longer than the idle timeout: but it still has a child
        # Then the launcher and the scheduler keep running
        assert alive([launcher_pid, scheduler]) == [launcher_pid, scheduler]
        # When the next server connects, it re-uses the same launcher and can watch the scheduler
        second = WarmLauncher(tmp_path, idle_timeout=1.0)
        await second.ensure()
        assert second.pid == launcher_pid
        watched = second.watch(scheduler, psutil.Process(scheduler).create_time())
        os.killpg(scheduler, signal.SIGTERM)
        assert await asyncio.wait_for(watched.wait(), 30) is not None
        # And once no server is connected and nothing runs, the launcher exits by itself
        await second.close()
        await until(
            lambda: (
                not psutil.pid_exists(launcher_pid) or psutil.Process(launcher_pid).status() == psutil.STATUS_ZOMBIE
            ),
            15,
            "the idle launcher to exit",
        )
    finally:
        await backend.detach()
        for pid in alive([scheduler, launcher_pid]):
            os.kill(pid, signal.SIGKILL)


async def test_exits_are_still_noticed_after_the_launcher_is_gone(tmp_path):
    # Given a scheduler forked by a launcher
    launcher, backend, scheduler = await scheduler_from_a_launcher(tmp_path)
    try:
        # When the launcher is killed, and then the scheduler stops
        os.kill(launcher.pid, signal.SIGKILL)
        await until(lambda: not launcher.connected, 15, "the server to see the launcher gone")
        os.killpg(scheduler, signal.SIGTERM)
        # Then its exit is still noticed (by polling the process table): it is no longer tracked
        await until(lambda: "scheduler" not in backend.pids(), 15, "the scheduler to be forgotten")
    finally:
        await backend.detach()
        for pid in alive([scheduler]):
            os.kill(pid, signal.SIGKILL)


FORK_READS_NO_VERSIONS = """
import os, subprocess, importlib.metadata
import distributed.versions
from clustermgr_lab.backends.local.fork_warmup import warm_version_report

assert warm_version_report()
pid = os.fork()
if pid == 0:
    def refuse(*args, **kwargs):
        raise AssertionError("a fork read its versions again")
    # what a versions report reads the first time: package metadata and `uname -p` (platform.processor)
    subprocess.Popen = refuse
    distributed.versions.version = refuse
    importlib.metadata.version = refuse
    try:
        report = distributed.versions.get_versions()
        ok = report["packages"]["distributed"] == distributed.__version__ and report["host"]["processor"] is not None
    except AssertionError:
        ok = False
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
raise SystemExit(os.waitstatus_to_exitcode(status))
"""


def test_a_fork_of_the_launcher_reports_its_versions_without_reading_them_again():
    # Given the launcher's preparation in a fresh interpreter (the versions report gathered once)
    # When it forks a child that may neither read package metadata nor run `uname -p`
    done = subprocess.run([sys.executable, "-c", FORK_READS_NO_VERSIONS], capture_output=True, text=True, timeout=120)
    # Then the child's versions report is the launcher's, made without reading anything again
    assert done.returncode == 0, done.stderr[-2000:]
