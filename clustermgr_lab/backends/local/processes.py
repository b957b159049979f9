"""Local process tracking shared by backends: start in a session of its own, watch for exits, stop by group."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.errors import BackendError

if TYPE_CHECKING:
    from clustermgr_lab.backends.local.launcher import WarmLauncher

# DASK_* settings for every local scheduler and worker (the server's own environment wins). Their
# event-loop health tick runs every 20 ms by default: about 1 % of a core per idle scheduler, a
# whole core for 100 idle clusters. Once a second still reports a loop blocked for 3 s. The system
# monitor (the dashboard's System page) samples every 500 ms by default: once a second takes an idle
# scheduler from 0.41 % to 0.28 % of a core.
PROCESS_DEFAULTS = {
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "1s",
}
EXCEPTION_LINE = re.compile(r"^[\w.]*(?:Error|Exception|Interrupt)\b")


@dataclass(frozen=True)
class TrackedProcess:
    """A process known by PID and creation time, so that a reused PID is never mistaken for it.

    Works whether or not this server is the process's parent (a re-adopted process is not).
    """

    pid: int
    create_time: float

    @classmethod
    def of(cls, pid: int) -> TrackedProcess:
        try:
            return cls(pid, psutil.Process(pid).create_time())
        except psutil.NoSuchProcess:
            return cls(pid, 0.0)  # already gone: never running

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> TrackedProcess | None:
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

    def open_exit_fd(self) -> int | None:
        """A pidfd of the process, readable once it has exited; None if there is none to have.

        None where the platform has no pidfd (not Linux 5.3 or later), when no descriptor is left, or when
        the process is gone. The creation time is checked after opening, so the descriptor is this process's.
        """
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            return None
        try:
            same = abs(psutil.Process(self.pid).create_time() - self.create_time) < 0.01
        except psutil.Error:
            same = False
        if not same:
            os.close(fd)
            return None
        return fd

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the process's group (it leads its own session); False if it is gone."""
        if not self.running():
            return False
        try:
            os.killpg(self.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False


def log_tail(path: Path, lines: int = 15, max_bytes: int = 16384) -> str:
    """The last ``lines`` lines of a log file ('' if there is none); a long log is not read whole."""
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - max_bytes))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def exit_reason(log: Path | None) -> str | None:
    """Why a worker ended, from its log: the exceptions it logged last (cause first,
    ``ModuleNotFoundError: ...; RuntimeError: ...``), else its last line, with the log's path."""
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


class LocalProcesses:
    """The local processes of one cluster, by name: started, watched until they exit, stopped.

    Every process starts in a session of its own (so a signal to the Jupyter server does not
    reach it, and its whole process group — nanny and worker — can be stopped at once), writes
    its output to ``<name>.log`` in ``workdir``, has no pipe to the server, and is tracked by PID
    and creation time until it has exited. Exits are noticed through a pidfd of each process, which
    the event loop watches (no polling: 100 idle clusters cost the server nothing here); where there is
    none, by polling the process table. Neither waits on a child, so processes adopted from a previous
    server are watched the same way.

    Parameters
    ----------
    workdir : Path
        Where the logs go.
    launcher : WarmLauncher, optional
        Forks the processes when it can; else they start as fresh interpreters.
    on_exit : callable, optional
        Called with ``(name, returncode)`` when a process ends on its own.
    on_change : callable, optional
        Called when a process was started, stopped or noticed gone.
    tied : bool
        Only forked from the launcher, which stops them when this server's connection ends (standby
        schedulers, see :mod:`.standby`); a start without the launcher fails instead of starting a plain process.
    """

    exit_poll_interval = 0.5

    def __init__(
        self,
        workdir: Path,
        launcher: WarmLauncher | None = None,
        on_exit: Callable[[str, int | None], None] | None = None,
        on_change: Callable[[], None] | None = None,
        tied: bool = False,
    ):
        self.workdir = Path(workdir)
        self.tied = tied
        self.launcher = launcher
        self.on_exit = on_exit
        self.on_change = on_change
        self._processes: dict[str, TrackedProcess] = {}
        self._children: dict[int, Any] = {}  # PID -> what _start_process returned, for its exit code
        self._watcher: asyncio.Task | None = None  # polls the processes that have no exit descriptor
        self._exit_fds: dict[str, int] = {}  # name -> the pidfd the event loop watches
        self._exits: set[asyncio.Task] = set()  # exits being handled
        self._starting: set[asyncio.Task] = set()
        self._stopping: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self._processes

    def get(self, name: str) -> TrackedProcess | None:
        return self._processes.get(name)

    def names(self) -> list[str]:
        return list(self._processes)

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self._processes.items()}

    def records(self) -> dict[str, dict[str, Any]]:
        """``{"pid", "create_time"}`` of each process, by name."""
        return {name: {"pid": p.pid, "create_time": p.create_time} for name, p in self._processes.items()}

    def log_path(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def log_tail(self, name: str, lines: int = 15, max_bytes: int = 16384) -> str:
        return log_tail(self.log_path(name), lines, max_bytes)

    def _notify_change(self) -> None:
        if self.on_change is not None:
            self.on_change()

    async def spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> TrackedProcess:
        """Start process ``name`` and track it (by PID and creation time) until it exits."""
        # Shielded: a caller cancelled mid-start (a cluster deleted while scaling) must not lose the
        # process that starts anyway; close() waits for it and stops it.
        starting = asyncio.ensure_future(self._start_and_track(name, command, env))
        self._starting.add(starting)
        starting.add_done_callback(self._starting.discard)
        return await asyncio.shield(starting)

    async def _start_and_track(self, name: str, command: list[str], env: dict[str, str] | None) -> TrackedProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        process = await self._start_process(
            name, command, {**PROCESS_DEFAULTS, **os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        )
        create_time = getattr(process, "create_time", None)
        tracked = TrackedProcess(process.pid, create_time) if create_time else TrackedProcess.of(process.pid)
        self._children[process.pid] = process
        self.track(name, tracked)
        return tracked

    async def _start_process(self, name: str, command: list[str], env: dict[str, str]):
        """The one spawn step: a process in a session of its own, output to ``<name>.log``, no pipe to
        the server. Returns an object with its ``pid`` (``returncode``, once it exited, if known).

        Forked from the warm launcher when there is one, else a fresh interpreter."""
        if self.launcher is not None:
            process = await self.launcher.spawn(command, env, self.log_path(name), tied=self.tied)
            if process is not None:
                return process
        if self.tied:
            raise BackendError(f"{name} must be forked from the warm launcher, which is not available")
        with open(self.log_path(name), "ab") as log:
            return await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=env
            )

    def track(self, name: str, tracked: TrackedProcess, child: Any = None, *, notify: bool = True) -> None:
        """Watch ``tracked`` under ``name`` (a process just started, adopted, or handed over with its ``child`` object).

        ``notify``: call ``on_change`` (not while the owner is still being built).
        """
        if child is not None:
            self._children[tracked.pid] = child
        self._processes[name] = tracked
        if notify:
            self._notify_change()
        self._watch_exit(name, tracked)

    def _watch_exit(self, name: str, tracked: TrackedProcess) -> None:
        self._forget_exit_fd(name)
        fd = tracked.open_exit_fd()
        if fd is not None:
            self._exit_fds[name] = fd
            asyncio.get_running_loop().add_reader(fd, self._exit_fd_ready, name, tracked)
        elif self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch())

    def _forget_exit_fd(self, name: str) -> None:
        fd = self._exit_fds.pop(name, None)
        if fd is not None:
            asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def _exit_fd_ready(self, name: str, tracked: TrackedProcess) -> None:
        self._forget_exit_fd(name)
        handling = asyncio.ensure_future(self._ended(name, tracked))
        self._exits.add(handling)
        handling.add_done_callback(self._exits.discard)

    async def exit_code(self, tracked: TrackedProcess) -> int | None:
        """The exit code of a process this server started (None for an adopted one, or if not known soon)."""
        child = self._children.get(tracked.pid)
        if getattr(child, "returncode", None) is not None or not hasattr(child, "wait"):
            return getattr(child, "returncode", None)
        try:
            return await asyncio.wait_for(asyncio.shield(child.wait()), 1)
        except asyncio.TimeoutError:
            return None

    def _polled(self) -> list[tuple[str, TrackedProcess]]:
        return [(name, tracked) for name, tracked in self._processes.items() if name not in self._exit_fds]

    async def _watch(self) -> None:
        """Poll for the processes without an exit descriptor that ended on their own, while there are any."""
        while self._polled():
            await asyncio.sleep(self.exit_poll_interval)
            for name, tracked in self._polled():
                if name not in self._stopping and not tracked.running():
                    await self._ended(name, tracked)

    async def _ended(self, name: str, tracked: TrackedProcess) -> None:
        """Stop tracking a process that ended on its own and tell ``on_exit`` (not one being stopped by us)."""
        if name in self._stopping or self._processes.get(name) != tracked:
            return
        code = await self.exit_code(tracked)
        if name in self._stopping or self._processes.get(name) != tracked:
            return  # being stopped by us meanwhile: stop() untracks it
        self._untrack(name, tracked)
        if self.on_exit is not None:
            self.on_exit(name, code)

    def _untrack(self, name: str, tracked: TrackedProcess) -> None:
        if self._processes.get(name) == tracked:
            self._forget_exit_fd(name)
            del self._processes[name]
            self._children.pop(tracked.pid, None)
            self._notify_change()

    async def stop(self, name: str, timeout: float) -> None:
        """SIGTERM the process group of ``name``, then SIGKILL after ``timeout`` s; return once it is gone."""
        tracked = self._processes.get(name)
        if tracked is None:
            return
        self._stopping.add(name)
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if not tracked.signal_group(sig):
                    break
                deadline = loop.time() + timeout
                while tracked.running() and loop.time() < deadline:
                    await asyncio.sleep(0.05)
                if not tracked.running():
                    break
            self._untrack(name, tracked)
        finally:
            self._stopping.discard(name)

    async def stop_all(self, timeout: float) -> None:
        """Stop every process, those still starting included, then stop watching."""
        await asyncio.gather(*self._starting, return_exceptions=True)
        await asyncio.gather(*(self.stop(name, timeout) for name in list(self._processes)))
        await self.detach()

    def release(self, name: str) -> tuple[TrackedProcess, Any] | None:
        """Stop tracking ``name`` without stopping it; returns it and its child object, to track elsewhere."""
        self._forget_exit_fd(name)
        tracked = self._processes.pop(name, None)
        if tracked is None:
            return None
        return tracked, self._children.pop(tracked.pid, None)

    def adopt(self, records: dict[str, dict[str, Any]]) -> set[str]:
        """Track the recorded processes that still run; returns their names."""
        adopted = set()
        for name, record in records.items():
            tracked = TrackedProcess.from_record(record)
            if tracked is not None and tracked.running():
                self.track(name, tracked)
                adopted.add(name)
        return adopted

    async def detach(self) -> None:
        """Stop watching; the processes keep running."""
        for name in list(self._exit_fds):
            self._forget_exit_fd(name)
        await cancel_and_wait(self._watcher, *self._exits)
        self._watcher = None
