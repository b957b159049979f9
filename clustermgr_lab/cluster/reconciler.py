"""The plan of one cluster and the one routine that reconciles it: the only writer of the plan.

The Worker Spec's group counts are the *plan*. Workers the backend was asked to start are
*requested*; those that have connected to the scheduler are *observed* (as in distributed's
``AdaptiveCore``). :meth:`Reconciler.reconcile` compares the three and is the only place that
starts or stops workers: manual scaling, spec edits and adaptive mode all change the plan
(through :meth:`Reconciler.set_plan` or :meth:`Reconciler.replace_spec`) and wake it.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from clustermgr_lab.backends.base import Backend
from clustermgr_lab.cluster.departure_watch import DepartureWatch
from clustermgr_lab.cluster.events import INFO, WARNING, EventLog
from clustermgr_lab.common.metrics import EXTERNAL_GROUP, ScaleTimer
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.errors import ClusterManagerError
from clustermgr_lab.domain.fields import printable
from clustermgr_lab.domain.spec import GPU_RESOURCE, WorkerGroup, WorkerSpec, counted, spec_edit_words

log = logging.getLogger(__name__)

#: Seconds retired workers told to close have to exit before the backend stops them (signals).
RETIRED_EXIT_SECONDS = 10.0
#: How many workers that went away the workers view keeps listing (state ``gone``).
GONE_KEPT = 20


def shape_of(group: WorkerGroup) -> tuple:
    """What a worker of ``group`` looks like: a worker of another shape is replaced."""
    return (group.threads, group.memory, tuple(sorted(group.worker_resources.items())))


@dataclass
class WorkerRecord:
    """A worker the backend was asked to start; ``address`` is set once it has connected.

    ``pid`` is the process the backend started for it (if it runs here), ``connected_at`` the
    ``time.monotonic()`` of its last connection: the kernel log's OOM kills before then are not its.
    """

    name: str
    group: str
    shape: tuple
    address: str | None = None
    info: dict = field(default_factory=dict)
    stopping: bool = False
    connected_once: bool = False
    pid: int | None = None
    connected_at: float | None = None
    why: str | None = None  # the decision that asked for it (its pending reason until it connects)
    last_address: str | None = None  # where it was last connected (kept once it leaves)
    host: str | None = None  # the host it last connected from


def starting(record: WorkerRecord) -> str:
    """Why a worker is pending while the backend starts it: the decision that asked for it."""
    return f"starting: {record.why}" if record.why else "starting"


class RetiringLink(Protocol):
    """What the reconciler asks of the scheduler (a :class:`~.scheduler_link.SchedulerLink`, or a fake)."""

    async def workers_to_close(self, candidates: list[str], n: int) -> list[str]: ...

    async def retire_workers(self, addresses: list[str], close: bool = False) -> list[str]: ...


class Reconciler:
    """Holds a cluster's plan, requested and observed workers, and brings requested in line with the plan.

    Parameters
    ----------
    cluster_id : str
        For log lines.
    spec : WorkerSpec
        The first plan.
    backend : Backend
        Starts and stops the workers it is told to.
    events : EventLog
        Where plan changes are recorded.
    link : callable
        Returns the current scheduler link (None while there is none).
    is_running : callable
        True while the cluster runs (a worker exit is only acted on then).
    on_change : callable
        Called after every observable change.
    on_error : callable
        Called with the cluster's new error message (None clears it).
    """

    def __init__(
        self,
        cluster_id: str,
        spec: WorkerSpec,
        backend: Backend,
        events: EventLog,
        link: Callable[[], RetiringLink | None],
        is_running: Callable[[], bool],
        on_change: Callable[[], None],
        on_error: Callable[[str | None], None],
    ):
        self.cluster_id = cluster_id
        self._spec = spec
        self.backend = backend
        self.events = events
        self._link = link
        self._is_running = is_running
        self._on_change = on_change
        self._on_error = on_error
        self.workers: dict[str, WorkerRecord] = {}
        #: the workers that went away most recently (stopped here or exited), newest last
        self.gone: collections.deque[WorkerRecord] = collections.deque(maxlen=GONE_KEPT)
        self.external: dict[str, dict] = {}  # connected workers this cluster did not start
        self.names = itertools.count(1)
        self.plan_source: dict[str, str] = {}  # per group: who set its count last (manual, adaptive, spec, system...)
        self.plan_reason: dict[str, str] = {}  # per group: why
        self.group_errors: dict[str, str] = {}  # why a group stopped growing (e.g. the batch system refused its jobs)
        self._wake = asyncio.Event()
        self._loop: asyncio.Task | None = None
        self._closing: dict[str, asyncio.Event] = {}  # retired workers told to close: set once they exited
        self._stopping: set[asyncio.Future] = set()  # stops waiting for retired workers to exit first
        self.departures = DepartureWatch(backend, events, lambda: self._spec, on_change)
        self.scale_timer = ScaleTimer(backend.name)

    # -- the plan: written here only ------------------------------------------------------------

    @property
    def spec(self) -> WorkerSpec:
        """The plan (read-only: change it with :meth:`set_plan` or :meth:`replace_spec`)."""
        return self._spec

    def _write_plan(
        self,
        plan: WorkerSpec,
        reason: str,
        *,
        source: str,
        groups: Iterable[str],
        event: bool = True,
        asked: str | None = None,
        level: str = INFO,
    ) -> None:
        """The one writer of the plan: ``plan`` replaces it, and each of ``groups`` records ``source`` and ``reason``.

        ``source``: manual, adaptive, spec, system or store. ``event``: log the change of each group's
        count as a scale event (a decision that is noted otherwise, or a restored plan, logs none).
        ``tests/test_reconciler.py`` fails if any other code assigns the plan or its sources.
        """
        before = self._spec
        self._spec = plan
        for group in groups:
            self.plan_source[group] = source
            self.plan_reason[group] = reason
            if event:
                was = next((g.count for g in before.groups if g.name == group), 0)
                self.events.scale(group, was, plan.group(group).count, reason, source=source, asked=asked, level=level)

    def set_plan(self, group: str, count: int, reason: str, *, source: str, asked: str | None = None) -> None:
        """Plan ``count`` workers for ``group`` (``source``: manual, adaptive, spec or system) and wake the loop.

        ``asked``: what a person asked for, in their words (``4 GiB``), for the event.
        """
        before = self._spec.group(group).count
        if source == "manual":
            self._on_error(None)  # a new request from a person starts from a clean slate
            self.group_errors.pop(group, None)
        self._write_plan(self._spec.with_count(group, count), reason, source=source, groups=[group], asked=asked)
        self.scale_timer.planned(group, before, count)
        log.info("cluster %s group %s: %d -> %d workers (%s)", self.cluster_id, group, before, count, reason)
        self._on_change()  # before waking the reconcile loop, so the new plan is pushed first
        self._wake.set()

    def replace_spec(self, spec: WorkerSpec) -> None:
        """Replace the Worker Spec; workers whose group changed shape or vanished are replaced.

        Each group the edit changed gets one event: ``asked`` says what changed (``spec edited: default memory
        8 GiB → 1 GiB``), the reason how many workers it replaces (``worker spec edited, 2 workers replaced``).
        """
        old_spec = self._spec
        before = {g.name: g.count for g in old_spec.groups}
        self.group_errors.clear()
        words = spec_edit_words(old_spec, spec)
        new_shapes = {g.name: shape_of(g) for g in spec.groups}
        self._write_plan(spec, "worker spec edited", source="spec", groups=[], event=False)
        for name, change in words.items():
            reason = "worker spec edited"
            outdated = sum(1 for r in self.live(name) if new_shapes.get(name) != r.shape)
            if outdated:
                reason += f", {counted(outdated, 'worker')} {'replaced' if name in new_shapes else 'stopped'}"
            after = spec.group(name).count if name in new_shapes else 0
            if name in new_shapes:
                self._write_plan(spec, reason, source="spec", groups=[name], event=False)
                if before.get(name) != after:
                    self.scale_timer.planned(name, before.get(name, 0), after)
            self.events.scale(name, before.get(name, 0), after, reason, source="spec", asked=f"spec edited: {change}")
        self._wake.set()

    def restore_sources(self, groups: Iterable[str], source: str) -> None:
        """A restored cluster: ``groups`` were planned by ``source`` (e.g. adaptive mode) when it was stored."""
        self._write_plan(self._spec, "restored from the store", source=source, groups=groups, event=False)

    # -- requested and observed ------------------------------------------------------------------

    def live(self, group: str | None = None) -> list[WorkerRecord]:
        """Requested workers not being stopped (of ``group``, or all)."""
        return [r for r in self.workers.values() if not r.stopping and (group is None or r.group == group)]

    @property
    def pending_workers(self) -> int:
        return sum(1 for r in self.live() if r.address is None)

    @property
    def stopping_workers(self) -> int:
        return sum(1 for r in self.workers.values() if r.stopping)

    def members(self) -> dict[str, list[str]]:
        """The names of each group's live workers."""
        return {g.name: [r.name for r in self.live(g.name)] for g in self._spec.groups}

    def observed(self) -> list[dict]:
        return [r.info for r in self.workers.values() if r.address] + list(self.external.values())

    def worker_counts(self) -> dict[str, Any]:
        waiting = self.backend.waiting()

        def counts(records: list[WorkerRecord]) -> dict[str, Any]:
            running = sum(1 for r in records if r.address)
            reasons: dict[str, int] = {}
            for record in records:
                if record.address is None:
                    reason = waiting[record.name].reason if record.name in waiting else starting(record)
                    reasons[reason] = reasons.get(reason, 0) + 1
            return {
                "requested": len(records),
                "running": running,
                "pending": len(records) - running,
                "pending_reasons": reasons,
            }

        groups = [
            {"name": g.name, **counts(self.live(g.name)), "error": self.group_errors.get(g.name)}
            for g in self._spec.groups
        ]
        total = counts(self.live())
        total["running"] += len(self.external)
        pending_jobs = [
            {"name": r.name, "group": r.group, "reason": waiting[r.name].reason, "job_id": waiting[r.name].job_id}
            for r in self.live()
            if r.address is None and r.name in waiting
        ]
        return {**total, "stopping": self.stopping_workers, "groups": groups, "waiting": pending_jobs}

    def workers_by_group_and_state(self) -> dict[tuple[str, str], int]:
        """How many workers each group has in each state: pending, running (connected) or stopping.

        Workers that connected without being started here are group ``external``, running.
        """
        counts: dict[tuple[str, str], int] = {}
        for group in self._spec.groups:
            for state in ("pending", "running", "stopping"):
                counts[(group.name, state)] = 0
        for record in self.workers.values():
            state = "stopping" if record.stopping else "running" if record.address else "pending"
            counts[(record.group, state)] = counts.get((record.group, state), 0) + 1
        if self.external:
            counts[(EXTERNAL_GROUP, "running")] = len(self.external)
        return counts

    def usage_rates(self) -> dict[str, tuple[float, float, float]]:
        """What each group's connected workers have: (cores, GPUs, bytes of memory limit)."""
        rates: dict[str, list[float]] = {}
        observed = [(r.group, r.info) for r in self.workers.values() if r.address]
        observed += [(EXTERNAL_GROUP, info) for info in self.external.values()]
        for group, info in observed:
            rate = rates.setdefault(group, [0.0, 0.0, 0.0])
            rate[0] += float(info.get("nthreads") or 0)
            rate[1] += float((info.get("resources") or {}).get(GPU_RESOURCE, 0))
            rate[2] += float(info.get("memory_limit") or 0)
        return {group: tuple(rate) for group, rate in rates.items()}

    def observe_scale(self) -> None:
        """Close the scale timers whose plan is now met (see :class:`~.metrics.ScaleTimer`)."""
        running: dict[str, int] = {}
        present: dict[str, int] = {}
        for record in self.workers.values():
            present[record.group] = present.get(record.group, 0) + 1
            if record.address and not record.stopping:
                running[record.group] = running.get(record.group, 0) + 1
        self.scale_timer.observe(running, present)

    def resources(self) -> dict[str, int]:
        observed = self.observed()
        return {
            "cores": sum(int(info.get("nthreads", 0)) for info in observed),
            "memory": sum(int(info.get("memory_limit") or 0) for info in observed),
            "gpus": int(sum((info.get("resources") or {}).get(GPU_RESOURCE, 0) for info in observed)),
        }

    def worker_states(self) -> dict[str, str]:
        """Each requested worker's state by name: ``running`` (connected), ``pending`` or ``stopping``."""
        return {
            name: "stopping" if r.stopping else "running" if r.address else "pending"
            for name, r in self.workers.items()
        }

    def keep_only(self, alive: set[str]) -> None:
        """Forget the requested workers not in ``alive`` (after a server restart)."""
        for name in list(self.workers):
            if name not in alive:
                del self.workers[name]

    def clear(self) -> None:
        self.scale_timer.cancel()
        self.gone.extend(self.workers.values())
        self.workers.clear()
        self.external.clear()

    # -- what the scheduler and the backend tell us --------------------------------------------

    def worker_added(self, address: str, info: dict) -> None:
        record = self.workers.get(self.backend.claim_worker(info))
        if record is None:
            self.external[address] = info
        else:
            record.address, record.info, record.connected_once = address, info, True
            record.last_address, record.host = address, info.get("host")
            record.pid, record.connected_at = self.backend.pids().get(record.name), time.monotonic()
        self._on_change()

    def worker_removed(self, address: str) -> None:
        self.external.pop(address, None)
        for record in self.workers.values():
            if record.address == address:
                memory_limit = record.info.get("memory_limit")
                record.address, record.info = None, {}
                if not record.stopping and self._is_running():  # not one we retired: find out why
                    self.departures.explain(record, address, memory_limit, exited=False, returncode=None)
        self._on_change()

    def worker_exited(self, name: str, returncode: int | None) -> None:
        """A worker ended on its own: replaced if it had connected, else its group's plan drops by one."""
        record = self.workers.pop(name, None)
        if record is not None:
            self.gone.append(record)
            if name in self._closing:  # retired and told to close: it did, before any signal
                self._closing.pop(name).set()
        if record is None or not self._is_running() or record.stopping:
            return
        if record.connected_once:
            self.departures.explain(record, None, None, exited=True, returncode=returncode)
            self._wake.set()
        else:
            # Replacing a worker that never got as far as the scheduler would only repeat the crash.
            why = self.backend.exit_reason(name)
            code = f" with code {returncode}" if returncode is not None else ""  # a batch job's is not known
            error = f"worker {name} exited{code} before it connected" + (
                f": {why}" if why else f"; see {self.backend.workdir}"
            )
            self._on_error(error)
            group = self._spec.group(record.group)
            plan = self._spec.with_count(group.name, max(0, group.count - 1))
            why = f"not replacing {name}: {error}"
            self._write_plan(plan, why, source="system", groups=[group.name], level=WARNING)
        self._on_change()

    # -- the loop --------------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        """Run the reconcile loop (once), and reconcile at once."""
        if self._loop is None:
            self._loop = asyncio.ensure_future(self._run())
        self._wake.set()

    @property
    def started(self) -> bool:
        return self._loop is not None

    async def stop(self) -> None:
        await self.departures.stop()
        await cancel_and_wait(*self._stopping)  # retired workers told to close end on their own
        if self._loop is not None:
            await cancel_and_wait(self._loop)
            self._loop = None

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("cluster %s: reconcile failed", self.cluster_id)
                self.events.lifecycle(f"scaling failed: {exc}", level=WARNING)
                if isinstance(exc, ClusterManagerError):
                    self._on_error(exc.message)
            self._on_change()

    async def reconcile(self) -> None:
        """Bring requested workers in line with the plan, group by group.

        Up: ask the backend for the missing workers (counting those requested but not yet
        connected, so repeated calls never launch twice). Down: stop never-connected workers
        first, then ask the scheduler which connected ones are cheapest to close, retire them
        (their data moves to survivors), and only then have the backend stop them.
        """
        for group in self._spec.groups:
            shape = shape_of(group)
            live = [r for r in self.live(group.name) if r.shape == shape]
            missing = group.count - len(live)
            if missing > 0:
                names = [f"{group.name}-{next(self.names)}" for _ in range(missing)]
                for name in names:
                    self.workers[name] = WorkerRecord(name, group.name, shape, why=self.plan_reason.get(group.name))
                self._on_change()
                try:
                    await self.backend.scale_up(group, names)
                except Exception as exc:
                    self._launch_failed(group, names, exc)
            elif missing < 0:
                await self._shrink(group.name, live, -missing)
        current = {g.name: shape_of(g) for g in self._spec.groups}
        outdated = [r for r in self.live() if current.get(r.group) != r.shape]
        if outdated:
            await self._retire_and_stop(outdated, group=None, force=True)

    def _launch_failed(self, group: WorkerGroup, names: list[str], exc: Exception) -> None:
        """Workers the backend could not start: the plan drops to what did start, and the group says why.

        Not retried (a refused job would be refused again): a manual scale or a spec edit tries again.
        """
        started = self.backend.started()
        failed = [name for name in names if name not in started]
        for name in failed:  # what did not start must not count as requested
            self.workers.pop(name, None)
        message = printable(exc.message if isinstance(exc, ClusterManagerError) else str(exc))  # a batch system's text
        log.error(
            "cluster %s group %s: %d worker(s) not started: %s", self.cluster_id, group.name, len(failed), message
        )
        self.group_errors[group.name] = message
        self._on_error(message)
        after = max(0, self._spec.group(group.name).count - len(failed))
        plan = self._spec.with_count(group.name, after)
        self._write_plan(plan, f"not retrying: {message}", source="system", groups=[group.name], level=WARNING)

    async def _shrink(self, group: str, live: list[WorkerRecord], n: int) -> None:
        never_connected = [r for r in live if r.address is None][:n]
        chosen = list(never_connected)
        link = self._link()
        if n > len(chosen) and link is not None:
            by_address = {r.address: r for r in live if r.address}
            addresses = await link.workers_to_close(list(by_address), n - len(chosen))
            chosen += [by_address[a] for a in addresses if a in by_address]
        force = self.plan_source.get(group) != "adaptive"
        await self._retire_and_stop(chosen, group=group, force=force)

    async def _retire_and_stop(self, records: list[WorkerRecord], *, group: str | None, force: bool) -> None:
        """Retire connected workers (their data moves first), then have the backend stop them all.

        Workers the scheduler retired and told to close are left to exit on their own, for at most
        :data:`RETIRED_EXIT_SECONDS`, in a task of their own: the next decision does not wait for them.
        """
        for record in records:
            record.stopping = True
        self._on_change()
        addresses = {r.name: r.address for r in records if r.address}  # the scheduler's removals clear them
        connected = list(addresses.values())
        retired: set[str] = set()
        exits: dict[str, asyncio.Event] = {}
        link = self._link()
        if connected and link is not None:
            # Workers whose exit this server sees are told to close by the scheduler (then stop() finds them
            # gone): a scheduler that removed a worker still running logs warnings about it.
            close = self.backend.capabilities.runs_processes_here
            for record in records if close else []:
                self._closing[record.name] = asyncio.Event()
            try:
                retiring = link.retire_workers(connected, close=True) if close else link.retire_workers(connected)
                retired = set(await retiring)
            finally:
                for record in records:
                    event = self._closing.get(record.name)
                    if event is not None and addresses.get(record.name) in retired and not event.is_set():
                        exits[record.name] = event
                    else:
                        self._closing.pop(record.name, None)
        kept = [r for r in records if r.name in addresses and addresses[r.name] not in retired]
        if kept and not force:
            # Adaptive mode never drops data: keep those workers and raise the plan back.
            for record in kept:
                record.stopping = False
            records = [r for r in records if r not in kept]
            if group is not None:
                why = "cannot shrink: worker holds data a client still references"
                plan = self._spec.with_count(group, self._spec.group(group).count + len(kept))
                self._write_plan(plan, why, source="adaptive", groups=[group], event=False)
                self.events.note(group, why, source="adaptive")
        elif kept:
            self.events.note(group, f"data on {len(kept)} worker(s) could not be moved before closing", source="manual")
        if exits:
            stopping = asyncio.ensure_future(self._stop_after_exit(records, exits))
            self._stopping.add(stopping)
            stopping.add_done_callback(self._stopping.discard)
        else:
            await self._stop(records)

    async def _stop_after_exit(self, records: list[WorkerRecord], exits: dict[str, asyncio.Event]) -> None:
        """Give retired workers told to close time to exit, then stop what is left of ``records``."""
        try:
            await asyncio.wait_for(asyncio.gather(*(event.wait() for event in exits.values())), RETIRED_EXIT_SECONDS)
        except asyncio.TimeoutError:
            log.info("cluster %s: retired workers still running after %g s", self.cluster_id, RETIRED_EXIT_SECONDS)
        finally:
            for name in exits:
                self._closing.pop(name, None)
        try:
            await self._stop(records)
        except Exception:
            log.exception("cluster %s: stopping retired workers failed", self.cluster_id)
        self._on_change()

    async def _stop(self, records: list[WorkerRecord]) -> None:
        await self.backend.scale_down([r.name for r in records])
        for record in records:
            if self.workers.pop(record.name, None) is not None:
                self.gone.append(record)

    async def settled(self) -> None:
        """Wait until the retired workers still exiting are stopped."""
        while self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)
