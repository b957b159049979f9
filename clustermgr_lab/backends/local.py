"""The embedded default backend: scheduler and workers as local processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ..errors import BackendError
from ..spec import WorkerGroup
from .base import Backend, SchedulerEndpoint
from .launcher import WarmLauncher

PRELOAD = "clustermgr_lab.scheduler_preload"
SCHEDULER = "scheduler"
# DASK_* settings for every local scheduler and worker (the server's own environment wins). Their
# event-loop health tick runs every 20 ms by default: about 1 % of a core per idle scheduler, a
# whole core for 100 idle clusters. Once a second still reports a loop blocked for 3 s.
PROCESS_DEFAULTS = {"DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s"}
EXCEPTION_LINE = re.compile(r"^[\w.]*(?:Error|Exception|Interrupt)\b")


def scheduler_command(scheduler_file: Path, host: str = "127.0.0.1", idle_timeout: float | None = None) -> list[str]:
    """The ``dask scheduler`` command line; with ``idle_timeout`` (seconds) it shuts itself down when idle."""
    command = [
        sys.executable, "-m", "distributed.cli.dask_scheduler",
        "--host", host,
        "--port", "0",
        "--dashboard-address", "127.0.0.1:0",
        "--scheduler-file", str(scheduler_file),
        "--preload", PRELOAD,
    ]  # fmt: skip
    if idle_timeout:
        command += ["--idle-timeout", f"{idle_timeout:g}s"]
    return command


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


@dataclass(frozen=True)
class TrackedProcess:
    """A process known by PID and creation time, so that a reused PID is never mistaken for it.

    Works whether or not this server is the process's parent (a re-adopted process is not).
    """

    pid: int
    create_time: float

    @classmethod
    def of(cls, pid: int) -> "TrackedProcess":
        try:
            return cls(pid, psutil.Process(pid).create_time())
        except psutil.NoSuchProcess:
            return cls(pid, 0.0)  # already gone: never running

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "TrackedProcess | None":
        try:
            return cls(int(record["pid"]), float(record["create_time"]))
        except (KeyError, TypeError, ValueError):
            return None

    def running(self) -> bool:
        try:
            process = psutil.Process(self.pid)
            same = abs(process.create_time() - self.create_time) < 0.01
            return same and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the process's group (it leads its own session); False if it is gone."""
        if not self.running():
            return False
        try:
            os.killpg(self.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False


class LocalBackend(Backend):
    """Runs ``dask scheduler`` and ``dask worker`` processes on this machine.

    Every process starts in a session of its own (so a signal to the Jupyter server does not
    reach it, and its whole process group — nanny and worker — can be stopped at once), writes
    its output to a log file, has no pipe to the server, and is tracked by PID and creation time
    until it has exited. Exits are noticed by polling the process table, not by waiting on a
    child, so processes adopted from a previous server are watched the same way. Processes are
    forked from the warm launcher when there is one (see :mod:`.launcher`), else started as
    fresh interpreters.
    """

    name = "local"
    description = "Scheduler and workers as processes on this machine"
    workers_before_scheduler = True
    stop_timeout = 10.0
    scheduler_start_timeout = 60.0
    worker_death_timeout = 60.0  # a worker that cannot reach its scheduler this long exits
    scheduler_host = "127.0.0.1"  # where the scheduler listens (its dashboard stays on 127.0.0.1)
    exit_poll_interval = 0.5
    #: Seconds without tasks and clients after which the scheduler shuts itself down (None: never).
    idle_timeout: float | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._processes: dict[str, TrackedProcess] = {}
        self._children: dict[int, Any] = {}  # PID -> what _start_process returned, for its exit code
        self._watcher: asyncio.Task | None = None
        self._starting: set[asyncio.Task] = set()
        #: Set by the manager: forks the processes when it can; None starts plain processes.
        self.launcher: WarmLauncher | None = None
        self._stopping: set[str] = set()
        self._gpu_slots: dict[str, list[int]] = {}
        self._scheduler_spawned = asyncio.Event()
        self.address: str | None = None

    async def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> TrackedProcess:
        """Start process ``name`` and track it (by PID and creation time) until it exits."""
        # Shielded: a caller cancelled mid-start (a cluster deleted while scaling) must not lose the
        # process that starts anyway; close() waits for it and stops it.
        starting = asyncio.ensure_future(self._start_and_track(name, command, env))
        self._starting.add(starting)
        starting.add_done_callback(self._starting.discard)
        return await asyncio.shield(starting)

    async def _start_and_track(self, name: str, command: list[str], env: dict[str, str] | None) -> TrackedProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        process = await self._start_process(name, command, {**PROCESS_DEFAULTS, **os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        create_time = getattr(process, "create_time", None)
        tracked = TrackedProcess(process.pid, create_time) if create_time else TrackedProcess.of(process.pid)
        self._children[process.pid] = process
        self._track(name, tracked)
        return tracked

    async def _start_process(self, name: str, command: list[str], env: dict[str, str]):
        """The one spawn step: a process in a session of its own, output to ``<name>.log``, no pipe to
        the server. Returns an object with its ``pid`` (``returncode``, once it exited, if known).

        Forked from the warm launcher when there is one, else a fresh interpreter."""
        if self.launcher is not None:
            process = await self.launcher.spawn(command, env, self.workdir / f"{name}.log")
            if process is not None:
                return process
        with open(self.workdir / f"{name}.log", "ab") as log:
            return await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=env
            )

    def _track(self, name: str, tracked: TrackedProcess) -> None:
        self._processes[name] = tracked
        self._notify_change()
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())

    async def _exit_code(self, tracked: TrackedProcess) -> int | None:
        """The exit code of a process this server started (None for an adopted one, or if not known soon)."""
        child = self._children.get(tracked.pid)
        if getattr(child, "returncode", None) is not None or not hasattr(child, "wait"):
            return getattr(child, "returncode", None)
        try:
            return await asyncio.wait_for(asyncio.shield(child.wait()), 1)
        except asyncio.TimeoutError:
            return None

    async def _watch(self) -> None:
        """Notice processes that ended on their own, while there are processes to watch."""
        while self._processes:
            await asyncio.sleep(self.exit_poll_interval)
            for name, tracked in list(self._processes.items()):
                if name in self._stopping or tracked.running():
                    continue
                code = await self._exit_code(tracked)
                if name in self._stopping:
                    continue  # being stopped by us meanwhile
                self._forget(name, tracked)
                if name != SCHEDULER and self.on_worker_exit:
                    self.on_worker_exit(name, code)

    def _forget(self, name: str, tracked: TrackedProcess) -> None:
        if self._processes.get(name) == tracked:
            del self._processes[name]
            self._gpu_slots.pop(name, None)
            self._children.pop(tracked.pid, None)
            self._notify_change()

    def log_tail(self, name: str, lines: int = 15, max_bytes: int = 16384) -> str:
        try:
            with open(self.workdir / f"{name}.log", "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - max_bytes))  # a long log is not read whole
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def exit_reason(self, name: str) -> str | None:
        """The exceptions the worker logged last (cause first, ``ModuleNotFoundError: ...; RuntimeError: ...``),
        else its last line, with the log's path."""
        log = self.worker_log(name)
        try:
            text = log.read_text(errors="replace") if log is not None else ""
        except OSError:
            return None
        lines = [line.strip() for line in text.splitlines()[-200:] if line.strip()]
        if not lines:
            return None
        exceptions = list(dict.fromkeys(line for line in lines if EXCEPTION_LINE.match(line)))
        why = "; ".join(exceptions) if exceptions else lines[-1]
        return f"{why[:500]} (log: {log})"

    def worker_log(self, name: str) -> Path | None:
        """The file worker ``name`` writes its output to."""
        return self.workdir / f"{name}.log"

    @property
    def scheduler_file(self) -> Path:
        return self.workdir / "scheduler.json"

    async def start_scheduler(self) -> SchedulerEndpoint:
        scheduler_file = self.scheduler_file
        scheduler_file.unlink(missing_ok=True)
        process = await self._spawn(SCHEDULER, scheduler_command(scheduler_file, self.scheduler_host, self.idle_timeout))
        self._scheduler_spawned.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.scheduler_start_timeout
        info: dict = {}
        while "address" not in info:
            if not process.running():
                code = await self._exit_code(process)
                raise BackendError(f"the scheduler exited with code {code}: {self.log_tail(SCHEDULER)}")
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
        return SchedulerEndpoint(self.address, f"127.0.0.1:{dashboard_port}" if dashboard_port else None, info.get("id"))

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
            command = worker_command(scheduler, group, name, self.worker_death_timeout)
            await self._spawn(name, command, self._gpu_env(group, name))

    async def _stop(self, name: str) -> None:
        tracked = self._processes.get(name)
        if tracked is None:
            return
        self._stopping.add(name)
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if not tracked.signal_group(sig):
                    break
                deadline = loop.time() + self.stop_timeout
                while tracked.running() and loop.time() < deadline:
                    await asyncio.sleep(0.05)
                if not tracked.running():
                    break
            self._forget(name, tracked)
        finally:
            self._stopping.discard(name)

    async def scale_down(self, names: list[str]) -> None:
        await asyncio.gather(*(self._stop(name) for name in names))

    async def close(self) -> None:
        await asyncio.gather(*self._starting, return_exceptions=True)
        await asyncio.gather(*(self._stop(name) for name in list(self._processes)))
        await self.detach()
        self.address = None

    async def detach(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self._processes.items()}

    def process_records(self) -> dict[str, dict[str, Any]]:
        return {
            name: {"pid": p.pid, "create_time": p.create_time, **({"gpus": self._gpu_slots[name]} if name in self._gpu_slots else {})}
            for name, p in self._processes.items()
        }

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        self.address = endpoint.address
        for name, record in records.items():
            tracked = TrackedProcess.from_record(record)
            if tracked is not None and tracked.running():
                if record.get("gpus"):
                    self._gpu_slots[name] = list(record["gpus"])
                self._track(name, tracked)
        self._scheduler_spawned.set()
        return set(self._processes) - {SCHEDULER}
