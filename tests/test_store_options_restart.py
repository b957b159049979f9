"""Given real SLURM and real Jupyter server processes, a cluster's chosen user options outlive a server restart:
a worker started after the restart gets the walltime the user chose, not the template's."""

from __future__ import annotations

import signal
import subprocess

import pytest

from .server_process import (
    JupyterServer,
    eventually,
    kill_leftovers,
    orphans,
    stored_workers,
)
from .test_slurm import requires_slurm

WORKERS = {"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}
TEMPLATE = {
    "name": "slurm", "description": "test", "backend": "slurm",
    "options": {"walltime": "00:10:00"},
    "user_options": {"walltime": {"label": "Walltime", "choices": ["00:10:00", "00:17:00"]}},
    "spec": {"groups": [WORKERS]},
}  # fmt: skip


def time_limits(prefix: str) -> dict[str, str]:
    """job name -> SLURM time limit (squeue's ``%l``, e.g. ``17:00``) of the jobs whose name starts with ``prefix``."""
    out = subprocess.run(["squeue", "-h", "-o", "%j|%l"], capture_output=True, text=True, check=True, timeout=30).stdout
    rows = (line.strip().split("|") for line in out.splitlines() if line.strip())
    return {name: limit for name, limit in rows if name.startswith(prefix)}


@pytest.mark.slurm
@requires_slurm
def test_a_chosen_walltime_applies_to_a_worker_started_after_a_server_restart(tmp_path):
    store, workdir = tmp_path / "store" / "clusters.sqlite3", tmp_path / "work"
    servers: list[JupyterServer] = []

    def server() -> JupyterServer:
        servers.append(JupyterServer(tmp_path, store, workdir, templates=[TEMPLATE]).start())
        return servers[-1]

    # Given a SLURM cluster created with the user option walltime 00:17:00 (the template's is 00:10:00)
    client = server().client()
    cluster = client.create(template="slurm", name="chosen walltime", options={"walltime": "00:17:00"})
    prefix = f"clustermgr-{cluster['id']}-"
    sessions: set[int] = set()
    try:
        client.wait(cluster["id"], lambda c: c["status"] == "running" and c["workers"]["running"] == 1, timeout=120)
        assert time_limits(prefix) == {prefix + "default-1": "17:00"}
        sessions.add(stored_workers(store, cluster["id"])["scheduler"]["pid"])

        # When the server is killed with SIGKILL, and another starts on the same store
        servers[-1].stop(signal.SIGKILL)
        client = server().client()
        after = client.wait(
            cluster["id"], lambda c: c["status"] == "running" and c["workers"]["running"] == 1, timeout=90
        )
        # Then the cluster still reports the chosen option
        assert after["options"] == {"walltime": "00:17:00"}

        # When it is scaled up after the restart
        client.scale(cluster["id"], 2)
        # Then the new worker's job has the chosen walltime too
        eventually(lambda: len(time_limits(prefix)) == 2, 60, "the second job")
        assert time_limits(prefix) == {prefix + "default-1": "17:00", prefix + "default-2": "17:00"}

        client.delete(cluster["id"], wait=True, timeout=60)
        assert eventually(lambda: not time_limits(prefix), 30, "no job left")
        # (a job's worker names the work folder in its TLS arguments: it may outlive its job by a moment)
        eventually(lambda: orphans(sessions, str(workdir)) == [], 20, "no process left")
    finally:
        for running in servers:
            if running.process.poll() is None:
                running.stop(signal.SIGKILL)
        leftover = subprocess.run(["squeue", "-h", "-o", "%i|%j"], capture_output=True, text=True).stdout
        jobs = [line.split("|")[0] for line in leftover.split() if f"|{prefix}" in line]
        if jobs:
            subprocess.run(["scancel", *jobs], capture_output=True)
        kill_leftovers(sessions, str(workdir))
