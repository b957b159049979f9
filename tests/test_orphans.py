"""Given a store recording a cluster whose scheduler is gone, a new manager stops what is left of it, and nothing else."""

import subprocess
import sys
import time
from pathlib import Path

import psutil

from clustermgr_lab.manager import ClusterManager
from clustermgr_lab.store import ClusterStore

from .helpers import alive
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
        deadline = time.monotonic() + 15
        while alive([worker.pid]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.poll() is not None
        assert bystander.poll() is None
        await manager.close_all()
    finally:
        worker.kill()
        bystander.kill()
