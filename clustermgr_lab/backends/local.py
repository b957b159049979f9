"""The embedded default backend: scheduler and workers as local processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import psutil

from ..errors import BackendError
from ..spec import WorkerGroup
from .base import Backend, SchedulerEndpoint

PRELOAD = "clustermgr_lab.scheduler_preload"
SCHEDULER = "scheduler"
PROCESSES_FILE = "processes.json"


def scheduler_command(scheduler_file: Path, host: str = "127.0.0.1", interface: str | None = None) -> list[str]:
    """The ``dask scheduler`` command line: on ``interface`` when given, else on ``host``; dashboard on loopback."""
    listen = ["--interface", interface] if interface else ["--host", host]
    return [
        sys.executable, "-m", "distributed.cli.dask_scheduler",
        *listen,
        "--port", "0",
        "--dashboard-address", "127.0.0.1:0",
        "--scheduler-file", str(scheduler_file),
        "--preload", PRELOAD,
    ]  # fmt: skip


def worker_command(scheduler: str | Path, group: WorkerGroup, name: str, death_timeout: float = 60) -> list[str]:
    """The ``dask worker`` command line for one worker of ``group``; any backend may reuse it.

    ``scheduler`` is the scheduler's address, or the path of its scheduler file (the worker then
    waits for the file, so it can start before the scheduler has).
    """
    target = ["--scheduler-file", str(scheduler)] if isinstance(scheduler, Path) else [scheduler]
    command = [
        sys.executable, "-m", "distributed.cli.dask_worker", *target,
        "--name", name,
        "--nthreads", str(group.threads),
        "--memory-limit", str(group.memory),
        "--host", "127.0.0.1",
        "--no-dashboard",
        "--death-timeout", str(death_timeout),
    ]  # fmt: skip
    if group.worker_resources:
        command += ["--resources", " ".join(f"{k}={v}" for k, v in group.worker_resources.items())]
    return command


class LocalBackend(Backend):
    """Runs ``dask scheduler`` and ``dask worker`` processes on this machine.

    Every process starts in a session of its own (so a signal to the Jupyter server does not
    reach it, and its whole process group — nanny and worker — can be stopped at once), and is
    tracked by PID until it has exited.
    """

    name = "local"
    description = "Scheduler and workers as processes on this machine"
    workers_before_scheduler = True
    stop_timeout = 10.0
    scheduler_start_timeout = 60.0
    worker_death_timeout = 60.0  # a worker that cannot reach its scheduler this long exits
    scheduler_host = "127.0.0.1"  # where the scheduler listens
    scheduler_interface: str | None = None  # or: the network interface it listens on (wins over the host)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._processes: dict[str, asyncio.subprocess.Process] = {}
        self._watchers: set[asyncio.Task] = set()
        self._stopping: set[str] = set()
        self._gpu_slots: dict[str, list[int]] = {}
        self._scheduler_spawned = asyncio.Event()
        self.address: str | None = None

    async def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None):
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / f"{name}.log", "ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        finally:
            log.close()
        self._processes[name] = process
        self._record_processes()
        watcher = asyncio.ensure_future(self._watch(name, process))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return process

    async def _watch(self, name: str, process: asyncio.subprocess.Process) -> None:
        returncode = await process.wait()
        if self._processes.get(name) is process:
            del self._processes[name]
            self._record_processes()
            self._gpu_slots.pop(name, None)
            if name not in self._stopping and name != SCHEDULER and self.on_worker_exit:
                self.on_worker_exit(name, returncode)
        self._stopping.discard(name)

    def _log_tail(self, name: str, lines: int = 15) -> str:
        try:
            text = (self.workdir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    @property
    def scheduler_file(self) -> Path:
        return self.workdir / "scheduler.json"

    async def start_scheduler(self) -> SchedulerEndpoint:
        scheduler_file = self.scheduler_file
        scheduler_file.unlink(missing_ok=True)
        process = await self._spawn(SCHEDULER, scheduler_command(scheduler_file, self.scheduler_host, self.scheduler_interface))
        self._scheduler_spawned.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.scheduler_start_timeout
        info: dict = {}
        while "address" not in info:
            if process.returncode is not None:
                raise BackendError(f"the scheduler exited with code {process.returncode}: {self._log_tail(SCHEDULER)}")
            if loop.time() > deadline:
                await self.close()
                raise BackendError(f"the scheduler did not start within {self.scheduler_start_timeout:g} s")
            await asyncio.sleep(0.02)
            try:  # the scheduler may not have finished writing the file yet
                info = json.loads(scheduler_file.read_text())
            except (OSError, ValueError):
                info = {}
        self.address = info["address"]
        dashboard_port = info.get("services", {}).get("dashboard")
        return SchedulerEndpoint(self.address, f"127.0.0.1:{dashboard_port}" if dashboard_port else None)

    def _gpu_env(self, group: WorkerGroup, name: str) -> dict[str, str]:
        if not group.gpus:
            return {}
        taken = {slot for slots in self._gpu_slots.values() for slot in slots}
        slots, candidate = [], 0
        while len(slots) < group.gpus:
            if candidate not in taken:
                slots.append(candidate)
            candidate += 1
        self._gpu_slots[name] = slots
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, slots))}

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        await self._scheduler_spawned.wait()
        if SCHEDULER not in self._processes:
            raise BackendError("the scheduler is not running")
        scheduler = self.address or self.scheduler_file  # before it answers, workers wait for its file
        for name in names:
            await self._spawn(name, worker_command(scheduler, group, name, self.worker_death_timeout), self._gpu_env(group, name))

    async def _stop(self, name: str) -> None:
        process = self._processes.get(name)
        if process is None or process.returncode is not None:
            return
        self._stopping.add(name)
        for sig, wait in ((signal.SIGTERM, self.stop_timeout), (signal.SIGKILL, self.stop_timeout)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                await asyncio.wait_for(asyncio.shield(process.wait()), wait)
                return
            except asyncio.TimeoutError:
                continue

    async def scale_down(self, names: list[str]) -> None:
        await asyncio.gather(*(self._stop(name) for name in names))

    async def close(self) -> None:
        await asyncio.gather(*(self._stop(name) for name in list(self._processes)))
        self.address = None

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self._processes.items() if p.returncode is None}

    def _record_processes(self) -> None:
        """Keep the PIDs on disk, so a server that dies hard leaves no untracked process."""
        (self.workdir / PROCESSES_FILE).write_text(json.dumps(self.pids()))

    @classmethod
    def reap(cls, workdir: Path) -> list[str]:
        try:
            recorded = json.loads((Path(workdir) / PROCESSES_FILE).read_text())
        except (OSError, ValueError):
            return []
        stopped = []
        for name, pid in recorded.items():
            try:
                process = psutil.Process(pid)
                ours = any("distributed.cli.dask_" in part for part in process.cmdline())
                if ours:  # the PID may have been reused by something else since
                    os.killpg(pid, signal.SIGKILL)
                    stopped.append(name)
            except (psutil.Error, ProcessLookupError, PermissionError):
                continue
        return stopped
