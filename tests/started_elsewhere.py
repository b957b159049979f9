"""Dask processes this Jupyter server did not start, for the tests and the benchmarks: started, then killed.

A process runs in a session of its own (``start_process``), so that ``stop_process`` kills its whole group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from clustermgr_lab.backends.local.backend import worker_command
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.domain.spec import parse_group

from .helpers import subprocess_env


def start_process(command: list[str], log: Path) -> subprocess.Popen:
    """``command`` in a session of its own, its output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True, env=subprocess_env()
        )


def stop_process(process: subprocess.Popen) -> None:
    """Kill the process's group (SIGKILL) and reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def start_tls_scheduler_and_worker(folder: Path) -> tuple[ClusterCredentials, Path, list[subprocess.Popen]]:
    """A tls:// scheduler and one worker started elsewhere, with credentials of their own: the credentials, the
    scheduler file its address is written to, and the processes (for :func:`stop_process`)."""
    credentials = ClusterCredentials.create(folder / "elsewhere")
    scheduler_file = folder / "scheduler.json"
    command = [
        sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
        "--protocol", "tls", *credentials.cli_arguments(), "--scheduler-file", str(scheduler_file),
    ]  # fmt: skip
    worker_group = parse_group({"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}, "group")
    processes = [start_process(command, folder / "scheduler.log")]
    worker = worker_command(scheduler_file, worker_group, "outside-1", 60, credentials)
    processes.append(start_process(worker, folder / "w.log"))
    return credentials, scheduler_file, processes
