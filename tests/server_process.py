"""Real Jupyter servers as processes of their own (start, SIGKILL/SIGTERM, start again), and what they leave behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import requests

from clustermgr_lab.backends.local.standby import MARKER as STANDBY_MARKER
from clustermgr_lab.client import ClusterManagerClient
from clustermgr_lab.cluster.link_host import PROCESS_TITLE

from .helpers import eventually, subprocess_env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterServer:
    """``jupyter server`` on 127.0.0.1 in a session of its own, with the extension as ``pip install`` configures it.

    Parameters
    ----------
    home : Path
        Jupyter's config, data and runtime dirs go below it (nothing of the user's is read).
    store, workdir : Path
        ``ClusterManager.store_path`` and ``ClusterManager.workdir``: the same for every server
        of one test, so that a new server finds what the last one left.
    other : dict, optional
        The configuration of other classes, e.g. ``{"WarmLauncher": {"release_after": 1.0}}``.
    config : dict
        More ``ClusterManager`` options, e.g. ``{"on_shutdown": "stop"}``.
    """

    def __init__(self, home: Path, store: Path, workdir: Path, other: dict | None = None, **config):
        self.home, self.store, self.workdir, self.config, self.other = home, store, workdir, config, other or {}
        self.port = free_port()
        self.token = uuid.uuid4().hex
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = home / f"server-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self, wait: bool = True) -> JupyterServer:
        options = {"store_path": str(self.store), "workdir": str(self.workdir), "max_workers": 8, **self.config}
        config_file = self.home / f"server-{self.port}.json"
        config_file.write_text(json.dumps({**self.other, "ClusterManager": options}))
        command = [
            sys.executable, "-m", "jupyter_server",
            "--ip=127.0.0.1", f"--port={self.port}", "--port-retries=0", "--no-browser", "--allow-root",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.home}", f"--config={config_file}",
        ]  # fmt: skip
        env = subprocess_env(
            JUPYTER_CONFIG_DIR=str(self.home / "config"),
            JUPYTER_DATA_DIR=str(self.home / "data"),
            JUPYTER_RUNTIME_DIR=str(self.home / "runtime"),
        )
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True
            )
        if wait:
            eventually(self._answers, 90, f"the Jupyter server on port {self.port} (log: {self.log})", step=0.25)
        return self

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(
                f"the Jupyter server exited with {self.process.returncode}:\n{self.log_text()[-3000:]}"
            )
        try:  # Jupyter's own API: it answers whether or not our extension loaded
            return requests.get(f"{self.url}api/status", headers={"Authorization": f"token {self.token}"}, timeout=5).ok
        except requests.RequestException:
            return False

    def client(self) -> ClusterManagerClient:
        return ClusterManagerClient(self.url, self.token, timeout=30)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Send ``sig`` and wait for the server process to end; returns its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


def read_only(store: Path) -> contextlib.closing[sqlite3.Connection]:
    """A read-only connection to the store, closed at the end of its ``with`` block."""
    return contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True))


def stored_workers(store: Path, cluster_id: str) -> dict[str, dict]:
    """Worker name -> its stored process record (pid, create_time or job_id), read straight from the store."""
    with read_only(store) as db:
        rows = db.execute("SELECT name, process FROM workers WHERE cluster_id = ?", (cluster_id,)).fetchall()
        state = db.execute("SELECT backend_state FROM clusters WHERE id = ?", (cluster_id,)).fetchone()
    records = {name: json.loads(process) for name, process in rows}
    if state:
        records["scheduler"] = json.loads(state[0]).get("scheduler")
    return records


def stored_usage(store: Path, cluster_id: str) -> dict:
    """The cluster's stored usage record (``as_of``, ``rates``, ``groups``, ``days``), read straight from the store."""
    with read_only(store) as db:
        row = db.execute("SELECT usage FROM clusters WHERE id = ?", (cluster_id,)).fetchone()
    return json.loads(row[0]) if row and row[0] else {}


def stored_cluster_ids(store: Path) -> list[str]:
    with read_only(store) as db:
        return [row[0] for row in db.execute("SELECT id FROM clusters")]


def same_process(record: dict) -> bool:
    """True while the recorded process (PID and creation time) runs."""
    try:
        process = psutil.Process(record["pid"])
        return process.create_time() == record["create_time"] and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


DASK_TITLES = ("dask scheduler ", "dask worker ", "dask nanny ")


def dask_processes(*marks: str) -> list[psutil.Process]:
    """Running ``dask scheduler`` / ``dask worker`` processes whose command line or working folder names one of
    ``marks`` (a work folder, a scheduler address): the process-table check for orphans.

    A process forked by the warm launcher shows a title (``dask worker <cluster>/<worker> [<address>]``,
    see ``common/proctitle.py``) in place of its command line, and works in its cluster's folder. A standby
    scheduler (its folder holds the standby marker) belongs to the server, not to a cluster: not counted.
    """
    found = []
    for process in psutil.process_iter(["cmdline", "status", "cwd"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if "distributed.cli.dask_" not in cmdline and not cmdline.startswith(DASK_TITLES):
            continue
        cwd = process.info["cwd"] or ""
        if cwd and os.path.exists(os.path.join(cwd, STANDBY_MARKER)):
            continue  # a standby scheduler: the server's own, kept ready for its next cluster until let go
        if any(mark in cmdline or (mark.startswith("/") and cwd.startswith(mark)) for mark in marks):
            found.append(process)
    return found


def in_sessions(sessions: set[int]) -> list[int]:
    """PIDs of live processes in any of ``sessions`` (each local scheduler or worker leads its own
    session, so this also finds a nanny's worker process, whose command line names nothing of ours)."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getsid(process.pid) in sessions:
                found.append(process.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return found


def orphans(sessions: set[int], *marks: str) -> list[str]:
    """What still runs of the recorded sessions, or of dask processes naming ``marks``: described, for the assertion message."""
    pids = set(in_sessions(sessions)) | {p.pid for p in dask_processes(*marks)}
    described = []
    for pid in sorted(pids):
        try:
            described.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())[:200]}")
        except psutil.Error:
            continue
    return described


def kill_leftovers(sessions: set[int], *marks: str) -> None:
    """Last resort for a failed test: SIGKILL whatever of ours still runs (the assertions have been made)."""
    for pid in set(in_sessions(sessions)) | {p.pid for p in dask_processes(*marks)}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


#: Helpers JupyterLab itself runs for a moment at start (``npm prefix`` in its build check): not the extension's.
JUPYTERLAB_HELPERS = ("npm", "node", "yarn", "jlpm")


def descendants(server: JupyterServer) -> list[psutil.Process]:
    """The server's live descendants (the launcher is its child; schedulers and workers are the launcher's)."""
    try:
        children = psutil.Process(server.process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if not_zombie(p) and not _jupyterlab_helper(p)]


def _jupyterlab_helper(process: psutil.Process) -> bool:
    try:
        return process.name().split(" ")[0] in JUPYTERLAB_HELPERS
    except psutil.Error:
        return True


def not_zombie(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def link_hosts(server: JupyterServer) -> list[psutil.Process]:
    """The server's scheduler links' process (its child), while it runs."""
    return [p for p in descendants(server) if any(name in " ".join(_cmdline(p)) for name in LINK_HOST)]


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def mapped_libraries(pid: int) -> str:
    """The files a process has mapped (its shared libraries among them), from ``/proc/PID/maps``."""
    with open(f"/proc/{pid}/maps") as maps:
        return maps.read()


LINK_HOST = (PROCESS_TITLE, "clustermgr_lab.cluster.link_host")  # its title, or without setproctitle its module
