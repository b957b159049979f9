"""Given a store recording a cluster whose scheduler is gone, a new manager stops what is left of it, and nothing else;
an attached cluster (a scheduler started elsewhere) is attached again, and never stopped."""

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import psutil

from clustermgr_lab.cluster.scheduler_link import scheduler_identity
from clustermgr_lab.manager.cluster_manager import ClusterManager
from clustermgr_lab.manager.store import ClusterStore

from .helpers import alive, eventually
from .server_process import free_port


def stored_cluster(cluster_id: str, workdir: Path, workers: dict[str, dict], scheduler: dict | None = None) -> dict:
    """A cluster record as a server writes it, whose scheduler was at a port where nothing listens now."""
    return {
        "id": cluster_id, "name": "left behind", "template": "local", "backend": workers.pop("_backend", "local"),
        "status": "running", "error": None,
        "spec": {"groups": [{"name": "default", "count": len(workers), "threads": 1, "memory": 2**28, "gpus": 0, "resources": {}}]},
        "adapt": None, "idle_timeout": None,
        "scheduler_address": f"tcp://127.0.0.1:{free_port()}", "scheduler_id": "Scheduler-gone", "dashboard_address": None,
        "workdir": str(workdir), "created": "2026-12-01T00:00:00+00:00",
        "backend_state": {"scheduler": scheduler},
        "workers": [{"name": n, "group": "default", "shape": [1, 2**28, []], "process": p} for n, p in workers.items()],
    }  # fmt: skip


def record_of(process: subprocess.Popen) -> dict:
    return {"pid": process.pid, "create_time": psutil.Process(process.pid).create_time()}


async def test_processes_of_a_cluster_that_cannot_be_re_adopted_are_stopped(tmp_path):
    # Given a store with a cluster whose scheduler is gone, but one of whose workers still runs
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    worker = subprocess.Popen(sleeper, start_new_session=True)
    # And a recorded PID that now belongs to another process (its creation time differs: the PID was reused)
    bystander = subprocess.Popen(sleeper, start_new_session=True)
    reused = {**record_of(bystander), "create_time": record_of(bystander)["create_time"] - 100}
    store_path = tmp_path / "clusters.sqlite3"
    store = ClusterStore(store_path)
    store.save(stored_cluster("abc123", tmp_path / "abc123", {"default-1": record_of(worker), "default-2": reused}), [])
    store.close()
    try:
        # When a new manager starts on that store
        manager = ClusterManager(workdir=str(tmp_path), store_path=str(store_path))
        assert [c["status"] for c in manager.list()] == ["pending"]  # until re-adoption has run
        await manager.readopt_all()
        # Then the cluster is failed with the reason, and has no dashboard
        (cluster,) = manager.list()
        assert cluster["status"] == "failed" and "is gone" in cluster["error"] and cluster["dashboard_url"] is None
        # And its worker is stopped, and the other process is not touched
        eventually(lambda: not alive([worker.pid]), 15, "the orphaned worker to be stopped", step=0.05)
        assert worker.poll() is not None
        assert bystander.poll() is None
        await manager.close_all()
    finally:
        worker.kill()
        bystander.kill()


async def test_an_attached_cluster_is_re_attached_and_never_stopped(tmp_path):
    # Given a store with a cluster attached to a scheduler started elsewhere, which still runs
    port = free_port()
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        identity = await _identity_when_up(f"tcp://127.0.0.1:{port}")
        record = stored_cluster("ext123", tmp_path / "ext123", {"_backend": "external"})
        record.update(scheduler_address=f"tcp://127.0.0.1:{port}", scheduler_id=identity["id"])
        store = ClusterStore(tmp_path / "clusters.sqlite3")
        store.save(record, [])
        store.close()
        # When a new manager starts on that store
        manager = ClusterManager(workdir=str(tmp_path), store_path=str(tmp_path / "clusters.sqlite3"))
        await manager.readopt_all()
        # Then the cluster is attached again, as it was
        (cluster,) = manager.list()
        assert (cluster["backend"], cluster["status"], cluster["scheduler_address"]) == (
            "external",
            "running",
            record["scheduler_address"],
        )
        # And when that manager stops, the scheduler started elsewhere keeps running
        await manager.close_all()
        assert scheduler.poll() is None
    finally:
        scheduler.kill()
        scheduler.wait()


async def _identity_when_up(address: str) -> dict:
    deadline = time.monotonic() + 120  # a fresh interpreter's import of distributed takes ~30 s at load 12
    while True:
        try:
            return await scheduler_identity(address, timeout=2)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
