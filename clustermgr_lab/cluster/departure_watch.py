"""Why a worker went away: the evidence (exit code, nanny log, batch job state, kernel OOM log) read in the background.

:class:`DepartureWatch` is started by the :class:`~.reconciler.Reconciler` for each worker that left
without being asked to, and logs one departure event with its cause (:mod:`~clustermgr_lab.domain.departures`).
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, Backend
from clustermgr_lab.cluster.events import INFO, WARNING, EventLog, utcnow
from clustermgr_lab.cluster.logs import read_tail
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.departures import (
    BATCH_KINDS,
    Cause,
    dead_worker_pids,
    from_nanny_log,
    from_returncode,
    oom_kill_of,
    oom_kills,
    read_kernel_log,
    recomputed_tasks,
)
from clustermgr_lab.domain.errors import ClusterManagerError
from clustermgr_lab.domain.spec import WorkerSpec, counted


class WorkerRecord(Protocol):
    """What is known of a worker that went away (a :class:`~.reconciler.WorkerRecord`)."""

    name: str
    group: str
    pid: int | None
    connected_at: float | None
    last_address: str | None


#: Two departures of one group within this time: a worker that keeps dying, shown as a warning.
KEEPS_DYING = datetime.timedelta(minutes=10)


class DepartureWatch:
    """Finds out, one background task per worker, why workers went away, and logs each as an event with its cause.

    Parameters
    ----------
    backend : Backend
        Its exit reasons, job states and worker logs are the evidence.
    events : EventLog
        Where each departure is logged.
    spec : callable
        The plan now (a worker's memory limit, when the scheduler did not say).
    on_change : callable
        Called after each departure is logged.
    """

    def __init__(
        self, backend: Backend, events: EventLog, spec: Callable[[], WorkerSpec], on_change: Callable[[], None]
    ) -> None:
        self.backend = backend
        self.events = events
        self._plan = spec
        self._on_change = on_change
        self._explaining: dict[
            str, tuple[asyncio.Task, str | None, int | None, WorkerRecord]
        ] = {}  # worker name -> finding out why it went away
        self._oom_kills = oom_kills()  # the OOM killer's count when this cluster started
        self._created = time.monotonic()

    def explain(self, record: WorkerRecord, address: str | None, memory_limit, *, exited: bool, returncode) -> None:
        """Find out, in the background, why worker ``record`` went away, and log it as an event with its cause."""
        record = replace(record)  # as it was when it went away (a restarted worker process reconnects meanwhile)
        previous = self._explaining.pop(record.name, None)
        if previous is not None:  # the scheduler lost it first; its exit explains more, with what we knew then
            task, address, memory_limit, record = previous
            task.cancel()
        memory_limit = memory_limit or record_memory(self._plan(), record)
        task = asyncio.ensure_future(self._find_cause(record, address, memory_limit, exited, returncode))
        self._explaining[record.name] = (task, address, memory_limit, record)

        def done(_, name=record.name) -> None:
            if self._explaining.get(name, (None,))[0] is task:
                del self._explaining[name]

        task.add_done_callback(done)

    async def _find_cause(self, record: WorkerRecord, address, memory_limit, exited: bool, returncode) -> None:
        loop = asyncio.get_running_loop()
        if not exited:  # the process or job may be about to end: its exit code or job state says more
            await asyncio.sleep(self.backend.departure_grace)
        deadline = loop.time() + (0 if exited else 3.0)
        pids = {record.pid} - {None}  # the processes whose death may be the OOM killer's
        while True:
            found = self.backend.departure_evidence(record.name) if exited else None
            if found is None:
                found, logged = await self._from_log(record.name, address, memory_limit)
                pids |= logged
            found = found or (from_returncode(returncode) if exited else None)
            if found is not None or loop.time() >= deadline:
                break
            await asyncio.sleep(0.25)
        if found is None:
            found = ("unknown", "its process ended; nothing says why") if exited else (
                "connection-lost", f"the scheduler lost its connection to {address} (its process still runs, or its host is unreachable)"
            )  # fmt: skip
        kind, detail = found
        sigkill = (kind == "signal" and "SIGKILL" in detail) or kind == "unknown"  # the OOM killer sends SIGKILL
        if sigkill and self.backend.capabilities.runs_processes_here:  # this kernel's log tells of this host only
            kind, detail = await self._oom_killer(record, pids, kind, detail)
        cause = Cause(kind, record.name, record.group, detail)
        back = (
            "; replacing it"
            if exited
            else ("; its nanny restarts it" if kind in ("memory-limit", "oom-killer", "signal", "exit") else "")
        )
        said = f" ({kind})" if kind in BATCH_KINDS else ""  # the batch system's own word, as its users know it
        recomputed = await self._recomputed(address or record.last_address)
        if recomputed:  # the work it did that is done again: linked to the departure that caused it
            back += f"; {counted(recomputed, 'task')} it had computed {'is' if recomputed == 1 else 'are'} recomputed elsewhere"
        previous = self.events.last_departure
        # One departure is news; another of the same group soon after is a worker that keeps dying.
        again = previous is not None and previous.group == record.group and utcnow() - previous.time < KEEPS_DYING
        level = WARNING if again else INFO
        self.events.departure(f"worker {record.name} went away{said}: {detail}{back}", cause.to_dict(), level=level)
        self._on_change()

    async def _oom_killer(self, record: WorkerRecord, pids: set[int], kind: str, detail: str) -> tuple[str, str]:
        """``("oom-killer", detail)`` if the kernel's OOM killer killed one of ``pids`` (the kernel log says so,
        by PID), else ``(kind, detail)`` unchanged. Where the kernel log cannot be read (or no PID is known), a
        rise in the OOM-kill count of this server's memory cgroup is taken as the sign (a whole cgroup's count:
        the detail says so)."""
        loop = asyncio.get_running_loop()
        records = await loop.run_in_executor(None, read_kernel_log) if pids else None
        if records is not None:
            kill = oom_kill_of(records, pids, record.connected_at or self._created)
            return ("oom-killer", kill.describe()) if kill is not None else (kind, detail)
        if kind != "signal" or self._oom_kills is None:
            return kind, detail
        now, before = await loop.run_in_executor(None, oom_kills), self._oom_kills
        self._oom_kills = now if now is not None else before
        if now is not None and now > before:
            return "oom-killer", (
                f"{detail}: the kernel's OOM killer, as the OOM-kill count of this server's memory cgroup rose "
                "(the kernel log, which names the process, could not be read)"
            )
        return kind, detail

    async def _recomputed(self, address: str | None) -> int | None:
        """How many computed tasks the scheduler recomputes because the worker at ``address`` went (its log says)."""
        path = (await asyncio.get_running_loop().run_in_executor(None, self.backend.log_files)).get(SCHEDULER_PROCESS)
        if not address or path is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 3.0  # its process's exit may be noticed here before the scheduler notices the loss
        while True:
            text = await loop.run_in_executor(None, read_tail, path)
            if f"Remove worker addr: {address}" in text or loop.time() >= deadline:
                return recomputed_tasks(text, address)
            await asyncio.sleep(0.25)

    async def _from_log(self, name: str, address: str | None, memory_limit) -> tuple[tuple[str, str] | None, set[int]]:
        """What the nanny's log says of the departure, and the PIDs of the worker processes it saw die."""
        path = self.backend.worker_log(name)
        if path is None:
            return None, set()
        text = await asyncio.get_running_loop().run_in_executor(None, read_tail, path)
        return from_nanny_log(text, address, memory_limit), dead_worker_pids(text, address)

    async def stop(self) -> None:
        await cancel_and_wait(*(task for task, *_ in self._explaining.values()))


def record_memory(spec: WorkerSpec, record: WorkerRecord) -> int | None:
    """The memory limit of ``record``'s group (bytes), if the group still exists."""
    try:
        return spec.group(record.group).memory
    except ClusterManagerError:
        return None
