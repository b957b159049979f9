"""A ``dask scheduler`` process on this machine, shared by every backend whose scheduler runs next to the server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Protocol

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, SchedulerEndpoint
from clustermgr_lab.backends.local.processes import LocalProcesses
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.domain.errors import BackendError

PRELOAD = "clustermgr_lab.preloads.scheduler"
IDLE_SHUTDOWN_LOG_LINE = "Scheduler closing after being idle"  # distributed's Scheduler.check_idle


def scheduler_command(
    scheduler_file: Path,
    host: str = "127.0.0.1",
    idle_timeout: float | None = None,
    interface: str | None = None,
    *,
    dashboard_host: str = "127.0.0.1",
    python: str = sys.executable,
    credentials: ClusterCredentials | None = None,
) -> list[str]:
    """The ``dask scheduler`` command line, on ``interface`` when given, else on ``host``: the one place it is built.

    Its dashboard listens on ``dashboard_host`` (loopback next to the server, which proxies it; ``""``: every
    interface of a compute node, where the scheduler runs as a batch job). With ``idle_timeout`` (seconds) it
    shuts itself down when idle. ``python`` runs it (a batch job's: the compute nodes' Python).
    With ``credentials`` it listens on ``tls://`` (and needs
    :meth:`~clustermgr_lab.common.security.ClusterCredentials.environment` too).
    """
    listen = ["--interface", interface] if interface else ["--host", host]
    command = [
        python, "-m", "distributed.cli.dask_scheduler",
        *listen,
        "--port", "0",
        "--dashboard-address", f"{dashboard_host}:0",
        "--scheduler-file", str(scheduler_file),
        "--preload", PRELOAD,
    ]  # fmt: skip
    if idle_timeout:
        command += ["--idle-timeout", f"{idle_timeout:g}s"]
    if credentials is not None:
        command += ["--protocol", "tls"]
        # With --tls-* files, distributed's CLI sets the host to "tls://", which it refuses next to an
        # --interface: the scheduler then reads the same files from the config (credentials.environment()).
        command += [] if interface else credentials.cli_arguments()
    return command


def read_scheduler_file(path: Path) -> dict:
    """What a scheduler wrote to its scheduler file (address, id, services), or {} while it is not complete."""
    try:  # the scheduler may not have finished writing the file yet
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) and "address" in info else {}


class SchedulerSettings(Protocol):
    """Where and how long a backend's scheduler starts and stops (the local, batch and SSH backends' traits)."""

    scheduler_host: str
    scheduler_interface: str | None
    idle_timeout: float | None
    scheduler_start_timeout: float
    stop_timeout: float


class LocalScheduler:
    """Starts, adopts and stops one scheduler process, tracked as ``"scheduler"`` in ``processes``.

    Parameters
    ----------
    processes : LocalProcesses
        The tracker the scheduler process joins (a local backend's workers share it).
    credentials : ClusterCredentials, optional
        The cluster's TLS files: the scheduler then listens on ``tls://`` only, its dashboard on HTTPS.
    """

    def __init__(
        self,
        processes: LocalProcesses,
        credentials: ClusterCredentials | None = None,
        environment: dict[str, str] | None = None,
    ):
        self.processes = processes
        self.credentials = credentials
        self.environment = dict(environment or {})  # on top of the credentials' (e.g. the process title's)
        #: Set once the scheduler process exists (started or adopted): workers may start against its file.
        self.spawned = asyncio.Event()
        self.address: str | None = None
        #: The endpoint of a standby scheduler taken over and not yet returned by :meth:`start`.
        self._taken_over: SchedulerEndpoint | None = None
        #: True when the scheduler is a standby one: it was started without the cluster's idle timeout.
        self.from_standby = False

    @property
    def scheduler_file(self) -> Path:
        return self.processes.workdir / "scheduler.json"

    def running(self) -> bool:
        return SCHEDULER_PROCESS in self.processes

    def take_over(self, processes: LocalProcesses, endpoint: SchedulerEndpoint) -> None:
        """Track the running scheduler of another tracker (a standby's, in this tracker's folder) as this one.

        :meth:`start` returns ``endpoint``, where it listens.
        """
        handed = processes.release(SCHEDULER_PROCESS)
        if handed is None:
            return
        self.processes.track(SCHEDULER_PROCESS, *handed, notify=False)  # its backend is being built
        self.address = endpoint.address
        self._taken_over = endpoint
        self.from_standby = True
        self.spawned.set()

    async def start_for(self, backend: SchedulerSettings) -> SchedulerEndpoint:
        """:meth:`start` where ``backend``'s traits say: ``scheduler_host``, ``scheduler_interface``, ``idle_timeout``,
        ``scheduler_start_timeout`` and ``stop_timeout``."""
        return await self.start(
            host=backend.scheduler_host,
            interface=backend.scheduler_interface,
            idle_timeout=backend.idle_timeout,
            timeout=backend.scheduler_start_timeout,
            stop_timeout=backend.stop_timeout,
        )

    async def start(
        self, *, host: str, interface: str | None, idle_timeout: float | None, timeout: float, stop_timeout: float
    ) -> SchedulerEndpoint:
        """Start the scheduler and wait (up to ``timeout`` s) until it has written its address.

        A standby scheduler taken over (:meth:`take_over`) that still runs is returned at once.
        """
        taken, self._taken_over = self._taken_over, None
        if taken is not None and self.running() and self.processes.get(SCHEDULER_PROCESS).running():
            return taken
        self.from_standby = False
        scheduler_file = self.scheduler_file
        scheduler_file.unlink(missing_ok=True)
        command = scheduler_command(scheduler_file, host, idle_timeout, interface, credentials=self.credentials)
        env = {**(self.credentials.environment() if self.credentials is not None else {}), **self.environment}
        process = await self.processes.spawn(SCHEDULER_PROCESS, command, env or None)
        self.spawned.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        info: dict = {}
        while "address" not in info:
            if not process.running():
                code = await self.processes.exit_code(process)
                raise BackendError(
                    f"the scheduler exited with code {code}: {self.processes.log_tail(SCHEDULER_PROCESS)}"
                )
            if loop.time() > deadline:
                await self.processes.stop(SCHEDULER_PROCESS, stop_timeout)
                raise BackendError(f"the scheduler did not start within {timeout:g} s")
            await asyncio.sleep(0.02)
            info = read_scheduler_file(scheduler_file)
        self.address = info["address"]
        dashboard_port = info.get("services", {}).get("dashboard")
        return SchedulerEndpoint(
            self.address, f"127.0.0.1:{dashboard_port}" if dashboard_port else None, info.get("id")
        )

    async def stop(self, timeout: float) -> None:
        await self.processes.stop(SCHEDULER_PROCESS, timeout)
        self.address = None

    def record(self) -> dict[str, dict[str, Any]]:
        """The scheduler's process record, under ``"scheduler"`` (empty when it does not run)."""
        return {k: v for k, v in self.processes.records().items() if k == SCHEDULER_PROCESS}

    def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> None:
        """Take over the recorded scheduler process, if it still runs, at ``endpoint``."""
        self.address = endpoint.address
        if SCHEDULER_PROCESS in records:
            self.processes.adopt({SCHEDULER_PROCESS: records[SCHEDULER_PROCESS]})
        self.spawned.set()

    def stopped_for_idleness(self, idle_timeout: float | None) -> bool:
        """True when its log says it shut itself down after ``idle_timeout``."""
        return bool(idle_timeout) and IDLE_SHUTDOWN_LOG_LINE in self.processes.log_tail(SCHEDULER_PROCESS, 40)
