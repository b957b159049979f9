"""Given a damaged store, clusters whose processes still run are found again from their manifests, and what
cannot be re-adopted is stopped and listed; start-up only ever deletes inside the work folder, and removes the
discovery folders that killed servers left behind."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from clustermgr_lab.manager.cluster_manager import ClusterManager
from clustermgr_lab.manager.store import ClusterStore

from .server_process import (
    JupyterServer,
    eventually,
    kill_leftovers,
    orphans,
    same_process,
    stored_workers,
)
from .test_orphans import stored_cluster

ONE = {"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}]}


def running_with(n: int):
    return lambda c: c["status"] == "running" and c["workers"]["running"] == n and c["workers"]["requested"] == n


def test_a_zero_byte_or_unreadable_store_loses_no_cluster(tmp_path):
    store, workdir = tmp_path / "store" / "clusters.sqlite3", tmp_path / "work"
    servers: list[JupyterServer] = []
    sessions: set[int] = set()

    def server() -> JupyterServer:
        servers.append(JupyterServer(tmp_path, store, workdir).start())
        return servers[-1]

    try:
        # Given a server with three clusters of one worker each
        client = server().client()
        ids = [client.create(name=name, spec=ONE)["id"] for name in ("first", "second", "gone")]
        for cluster_id in ids:
            client.wait(cluster_id, running_with(1), timeout=120)
        processes = {cluster_id: stored_workers(store, cluster_id) for cluster_id in ids}
        sessions.update(p["pid"] for records in processes.values() for p in records.values())
        first, second, gone = ids

        # When the server is killed, the scheduler of one cluster exits, and the store is cut to 0 bytes
        servers[-1].stop(signal.SIGKILL)
        psutil.Process(processes[gone]["scheduler"]["pid"]).kill()
        eventually(lambda: not same_process(processes[gone]["scheduler"]), 10, "the scheduler to exit")
        for suffix in ("-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
        store.write_bytes(b"")
        # And a server starts on it
        restarted = server()
        client = restarted.client()
        # Then the clusters whose processes run are found again from their manifests, with the same processes
        for cluster_id in (first, second):
            client.wait(cluster_id, running_with(1), timeout=90)
            assert all(same_process(p) for p in processes[cluster_id].values())
        # And the one whose scheduler is gone is listed as failed, and its worker stopped
        failed = client.wait(gone, lambda c: c["status"] == "failed", timeout=90)
        assert "is gone" in failed["error"]
        eventually(lambda: not same_process(processes[gone]["default-1"]), 30, "its worker to be stopped")
        # And the log says what happened, for the store and for each cluster
        log = restarted.log_text()
        assert "is empty (0 bytes)" in log
        assert all(f"cluster {cluster_id}" in log and "recovered from its manifest" in log for cluster_id in ids)
        client.delete(gone, wait=True, timeout=60)

        # When the server is killed again, and the store is overwritten with bytes that are not a database
        servers[-1].stop(signal.SIGKILL)
        for suffix in ("-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
        store.write_bytes(b"not a database\n" * 100)
        restarted = server()
        client = restarted.client()
        # Then it is moved aside with a log line, and the clusters are found again all the same
        for cluster_id in (first, second):
            client.wait(cluster_id, running_with(1), timeout=90)
        assert len(list(store.parent.glob("clusters.sqlite3.unreadable-*"))) == 1
        assert "could not be read" in restarted.log_text() and "recovered from its manifest" in restarted.log_text()

        # When a truncated copy of a real store (its second half cut off) takes its place
        servers[-1].stop(signal.SIGTERM)
        data = store.read_bytes()
        store.write_bytes(data[: len(data) // 2])
        client = server().client()
        # Then the clusters are found again too
        for cluster_id in (first, second):
            client.wait(cluster_id, running_with(1), timeout=90)
            client.delete(cluster_id, wait=True, timeout=60)
        assert eventually(lambda: not orphans(sessions, str(workdir)), 30, "no process left")
    finally:
        for running in servers:
            if running.process.poll() is None:
                running.stop(signal.SIGKILL)
        kill_leftovers(sessions, str(workdir))


async def test_a_stopping_cluster_never_makes_start_up_delete_outside_the_work_folder(tmp_path, caplog):
    # Given a store with two clusters that were being stopped: one whose work folder is inside the work folder,
    # and one whose row names a folder outside it, holding a user's file
    workdir = tmp_path / "work"
    inside, outside = workdir / "in1234", tmp_path / "home" / "out123"
    for folder in (inside, outside):
        folder.mkdir(parents=True)
        (folder / "precious.txt").write_text("keep me")
    store_path = tmp_path / "clusters.sqlite3"
    store = ClusterStore(store_path)
    for cluster_id, folder in (("in1234", inside), ("out123", outside)):
        store.save({**stored_cluster(cluster_id, folder, {}), "status": "stopping"}, [])
    store.close()
    # When a manager starts on that store and re-adopts
    with caplog.at_level(logging.ERROR):
        manager = ClusterManager(
            workdir=str(workdir), store_path=str(store_path), log=logging.getLogger("test-manager")
        )
        await manager.readopt_all()
    # Then both are forgotten; the folder inside the work folder is deleted, the one outside is not, with a log line
    assert manager.list() == []
    assert not inside.exists()
    assert (outside / "precious.txt").read_text() == "keep me"
    assert any(f"{outside} is not inside the work folder" in r.getMessage() for r in caplog.records)
    await manager.close_all()


@pytest.fixture
def stale_discovery(jp_server_config, tmp_path):
    """Discovery folders as servers leave them: one of a dead PID, one of a live process older than its folder,
    and one of a live process younger than its folder (a PID reused since)."""
    parent = Path(jp_server_config["ClusterManager"]["workdir"]) / "discovery"
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    older = subprocess.Popen(sleeper)
    time.sleep(0.05)
    folders = {"dead": parent / f"server-{dead.pid}", "live": parent / f"server-{older.pid}"}
    for folder in folders.values():
        folder.mkdir(parents=True)
        (folder / "abc.json").write_text("{}")
    younger = subprocess.Popen(sleeper)
    folders["reused"] = parent / f"server-{younger.pid}"
    folders["reused"].mkdir()
    past = psutil.Process(younger.pid).create_time() - 3600
    os.utime(folders["reused"], (past, past))
    yield folders
    for process in (older, younger):
        process.kill()
        process.wait()


async def test_start_up_removes_the_discovery_folders_of_servers_that_are_gone(stale_discovery, jp_serverapp):
    # Given discovery folders left by a killed server, a live one, and one whose PID was reused
    # When the server starts (jp_serverapp), then the folders of servers that are gone are removed, and only those
    deadline = time.monotonic() + 30
    while (stale_discovery["dead"].exists() or stale_discovery["reused"].exists()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not stale_discovery["dead"].exists() and not stale_discovery["reused"].exists()
    assert (stale_discovery["live"] / "abc.json").exists()


async def test_what_runs_of_a_cluster_that_cannot_be_restored_is_stopped(tmp_path, caplog):
    # Given a store with a cluster record this server cannot restore (its spec does not parse),
    # whose scheduler and worker processes still run
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    scheduler, worker = (subprocess.Popen(sleeper, start_new_session=True) for _ in range(2))
    records = {
        name: {"pid": p.pid, "create_time": psutil.Process(p.pid).create_time()}
        for name, p in (("scheduler", scheduler), ("default-1", worker))
    }
    record = stored_cluster(
        "bad123", tmp_path / "work" / "bad123", {"default-1": records["default-1"]}, scheduler=records["scheduler"]
    )
    record["spec"] = {"groups": "not a list"}
    store_path = tmp_path / "clusters.sqlite3"
    store = ClusterStore(store_path)
    store.save(record, [])
    store.close()
    try:
        # When a manager starts on it
        with caplog.at_level(logging.WARNING):
            manager = ClusterManager(
                workdir=str(tmp_path / "work"), store_path=str(store_path), log=logging.getLogger("test-manager")
            )
            await manager.readopt_all()
        # Then its processes are stopped, and the log says which
        for process in (scheduler, worker):
            deadline = time.monotonic() + 15
            while process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert process.poll() is not None
        assert any(
            "bad123: not restored; stopped what still ran of it: ['default-1', 'scheduler']" in r.getMessage()
            for r in caplog.records
        )
        await manager.close_all()
    finally:
        for process in (scheduler, worker):
            process.kill()
            process.wait()
