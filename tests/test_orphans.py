"""Given a server that died without cleaning up, the next server stops what it left running."""

import json
import subprocess
import sys
import time

from clustermgr_lab.backends.local import PROCESSES_FILE, scheduler_command
from clustermgr_lab.manager import ClusterManager

from .helpers import alive


def test_processes_left_by_a_dead_server_are_stopped_at_start(tmp_path):
    # Given the work folder of a server process that no longer exists, with a scheduler it started
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cluster_dir = tmp_path / f"server-{int(dead.stdout)}" / "abc123"
    cluster_dir.mkdir(parents=True)
    scheduler = subprocess.Popen(
        scheduler_command(cluster_dir / "scheduler.json"),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    (cluster_dir / "cluster.json").write_text(json.dumps({"id": "abc123", "backend": "local"}))
    # And an unrelated process whose PID is recorded too (as if the PID had been reused)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    (cluster_dir / PROCESSES_FILE).write_text(json.dumps({"scheduler": scheduler.pid, "default-1": bystander.pid}))
    (tmp_path / "server-1").mkdir()  # PID 1 is alive: its folder belongs to a live server
    try:
        # When a new manager starts on that work folder
        ClusterManager(workdir=str(tmp_path))
        # Then the orphaned scheduler is stopped and the dead server's folder removed
        deadline = time.monotonic() + 10
        while scheduler.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive([scheduler.pid]) == []
        assert not cluster_dir.parent.exists()
        # And nothing else is touched
        assert bystander.poll() is None
        assert (tmp_path / "server-1").exists()
    finally:
        scheduler.kill()
        bystander.kill()
