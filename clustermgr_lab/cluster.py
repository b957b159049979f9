"""One managed cluster: its lifecycle, its plan, and the one routine that reconciles it.

The Worker Spec's group counts are the *plan*. Workers the backend was asked to start are
*requested*; those that have connected to the scheduler are *observed*. :meth:`ManagedCluster._reconcile`
compares the three and is the only place that starts or stops workers: manual scaling, spec edits
and adaptive mode all change the plan and wake it.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from .adaptive import AdaptivePolicy, AdaptRange, AdaptSettings, Load, parse_adapt, parse_adapt_off
from .backends.base import Backend, SchedulerEndpoint
from .backends.local import SCHEDULER as SCHEDULER_PROCESS
from .errors import ClusterManagerError, Conflict
from .events import Event, EventLog, utcnow
from .scheduler_link import SchedulerLink, scheduler_identity
from .spec import GPU_RESOURCE, Resolution, ScaleTarget, WorkerGroup, WorkerSpec, resolve_target

log = logging.getLogger(__name__)

PENDING, RUNNING, SCALING, STOPPING, STOPPED, FAILED = "pending", "running", "scaling", "stopping", "stopped", "failed"
UNRESPONSIVE = "unresponsive"  # running, but the scheduler does not answer: what it holds is unknown
SCHEDULER_SILENT = "the scheduler has not answered"
IDLE_SHUTDOWN_LOG_LINE = "Scheduler closing after being idle"  # distributed's Scheduler.check_idle


def shape_of(group: WorkerGroup) -> tuple:
    return (group.threads, group.memory, tuple(sorted(group.worker_resources.items())))


def _shape_to_json(shape: tuple) -> list:
    threads, memory, resources = shape
    return [threads, memory, [list(item) for item in resources]]


def _shape_from_json(data: list) -> tuple:
    threads, memory, resources = data
    return (threads, memory, tuple(tuple(item) for item in resources))


@dataclass
class WorkerRecord:
    """A worker the backend was asked to start; ``address`` is set once it has connected."""

    name: str
    group: str
    shape: tuple
    address: str | None = None
    info: dict = field(default_factory=dict)
    stopping: bool = False
    connected_once: bool = False


class ManagedCluster:
    """A Dask cluster owned by the Jupyter server.

    Parameters
    ----------
    cluster_id, name, template : str
    backend : Backend
        Starts and stops the processes; never decides when.
    spec : WorkerSpec
        The desired workers, per group.
    on_change : callable
        Called with the cluster after every observable change (for the push stream).
    max_workers : int
        The per-cluster limit that every plan is checked against.
    idle_timeout : float, optional
        Seconds with no tasks and no client after which the scheduler shuts itself down.
    """

    def __init__(
        self,
        cluster_id: str,
        name: str,
        template: str,
        backend: Backend,
        spec: WorkerSpec,
        on_change: Callable[["ManagedCluster"], None],
        max_workers: int,
        idle_timeout: float | None = None,
    ):
        self.id = cluster_id
        self.name = name
        self.template = template
        self.backend = backend
        self.spec = spec
        self.max_workers = max_workers
        self.lifecycle = PENDING
        self.error: str | None = None
        self.created = utcnow()
        self.endpoint: SchedulerEndpoint | None = None
        self.events = EventLog()
        self.adapt: AdaptSettings | None = None
        self._policy: AdaptivePolicy | None = None
        self._adaptive_task: asyncio.Task | None = None
        self._on_change = on_change
        self._workers: dict[str, WorkerRecord] = {}
        self._external: dict[str, dict] = {}  # connected workers this cluster did not start
        self._link: SchedulerLink | None = None
        self._names = itertools.count(1)
        self._plan_source: dict[str, str] = {}
        self._wake = asyncio.Event()
        self._reconciler: asyncio.Task | None = None
        self._held_notes: dict[str, str] = {}
        self.options: dict[str, Any] = {}  # the template's user options, as set at creation
        self.group_errors: dict[str, str] = {}  # why a group stopped growing (e.g. the batch system refused its jobs)
        self.idle_timeout = idle_timeout
        self.backend.idle_timeout = idle_timeout
        self.backend.on_worker_exit = self._worker_exited
        self.backend.on_change = self._changed

    # -- state as callers see it ---------------------------------------------------------

    @property
    def status(self) -> str:
        if self.lifecycle == RUNNING and self._link is not None and not self._link.responsive:
            return UNRESPONSIVE
        if self.lifecycle == RUNNING and (self.pending_workers or any(r.stopping for r in self._workers.values())):
            return SCALING
        return self.lifecycle

    def _live(self, group: str | None = None) -> list[WorkerRecord]:
        return [r for r in self._workers.values() if not r.stopping and (group is None or r.group == group)]

    @property
    def pending_workers(self) -> int:
        return sum(1 for r in self._live() if r.address is None)

    def _observed(self) -> list[dict]:
        return [r.info for r in self._workers.values() if r.address] + list(self._external.values())

    def worker_counts(self) -> dict[str, Any]:
        waiting = self.backend.waiting()

        def counts(records: list[WorkerRecord]) -> dict[str, Any]:
            running = sum(1 for r in records if r.address)
            reasons: dict[str, int] = {}
            for record in records:
                if record.address is None:
                    reason = waiting[record.name].reason if record.name in waiting else "starting"
                    reasons[reason] = reasons.get(reason, 0) + 1
            return {"requested": len(records), "running": running, "pending": len(records) - running, "pending_reasons": reasons}

        groups = [
            {"name": g.name, **counts(self._live(g.name)), "error": self.group_errors.get(g.name)} for g in self.spec.groups
        ]
        total = counts(self._live())
        total["running"] += len(self._external)
        pending_jobs = [
            {"name": r.name, "group": r.group, "reason": waiting[r.name].reason, "job_id": waiting[r.name].job_id}
            for r in self._live()
            if r.address is None and r.name in waiting
        ]
        return {
            **total,
            "stopping": sum(1 for r in self._workers.values() if r.stopping),
            "groups": groups,
            "waiting": pending_jobs,
        }

    def resources(self) -> dict[str, int]:
        observed = self._observed()
        return {
            "cores": sum(int(info.get("nthreads", 0)) for info in observed),
            "memory": sum(int(info.get("memory_limit") or 0) for info in observed),
            "gpus": int(sum((info.get("resources") or {}).get(GPU_RESOURCE, 0) for info in observed)),
        }

    @property
    def dashboard_address(self) -> str | None:
        """The dashboard's ``host:port`` while the scheduler is alive; None once it failed or stopped.

        A dead scheduler's port may be taken by another process, which must never see our users' requests;
        so until the scheduler is confirmed (``running``: its id checked after a restart), there is none either.
        """
        if self.endpoint is None or self.lifecycle != RUNNING:
            return None
        return self.endpoint.dashboard_address

    def to_dict(self, base_url: str = "/", dashboard_key: str = "") -> dict[str, Any]:
        """The cluster as the API shows it; ``dashboard_key`` is the key segment of its dashboard's URL."""
        dashboard = "/".join(part for part in ("clustermgr/dashboard", self.id, dashboard_key, "status") if part)
        last = self.events.last_decision
        return {
            "id": self.id,
            "name": self.name,
            "template": self.template,
            "backend": self.backend.name,
            "status": self.status,
            "error": self.error,
            "scheduler_address": self.endpoint.address if self.endpoint else None,
            "dashboard_url": f"{base_url}{dashboard}" if self.dashboard_address else None,
            "spec": self.spec.to_dict(),
            "workers": self.worker_counts(),
            "resources": self.resources(),
            "adapt": self.adapt.to_dict() if self.adapt else None,
            "options": dict(self.options),
            "idle_timeout": self.idle_timeout,
            "last_decision": last.to_dict() if last else None,
            "created": self.created.isoformat(),
        }

    # -- what a store keeps, and what a restarted server makes of it -------------------------

    def to_record(self) -> dict[str, Any]:
        """Everything a restarted server needs to re-adopt this cluster (JSON-ready; see ``store.py``)."""
        processes = self.backend.process_records()
        workers = [
            {"name": r.name, "group": r.group, "shape": _shape_to_json(r.shape), "process": processes.get(r.name, {})}
            for r in self._workers.values()
        ]
        # Processes of workers the cluster already let go of, still being stopped: recorded until gone.
        workers += [
            {"name": name, "group": None, "shape": None, "process": process}
            for name, process in processes.items()
            if name not in self._workers and name != SCHEDULER_PROCESS
        ]
        return {
            "id": self.id,
            "name": self.name,
            "template": self.template,
            "backend": self.backend.name,
            "status": self.lifecycle,
            "error": self.error,
            "spec": self.spec.to_dict(),
            "adapt": self.adapt.to_dict() if self.adapt else None,
            "idle_timeout": self.idle_timeout,
            "options": dict(self.options),
            "scheduler_address": self.endpoint.address if self.endpoint else None,
            "scheduler_id": self.endpoint.scheduler_id if self.endpoint else None,
            "dashboard_address": self.endpoint.dashboard_address if self.endpoint else None,
            "workdir": str(self.backend.workdir),
            "created": self.created.isoformat(),
            "backend_state": {SCHEDULER_PROCESS: processes.get(SCHEDULER_PROCESS)},
            "workers": workers,
        }

    def restore(self, record: Mapping[str, Any]) -> None:
        """Take the state of a stored cluster (before :meth:`readopt`); nothing is started or stopped."""
        # Until re-adopted, a cluster that was running is pending: nothing has been checked yet.
        self.lifecycle = record["status"] if record["status"] in (FAILED, STOPPED, STOPPING) else PENDING
        self.error = record.get("error")
        self.options = dict(record.get("options") or {})
        self.created = datetime.datetime.fromisoformat(record["created"])
        if record.get("scheduler_address"):
            self.endpoint = SchedulerEndpoint(
                record["scheduler_address"], record.get("dashboard_address"), record.get("scheduler_id")
            )
        if record.get("adapt"):
            adapt = record["adapt"]
            self.adapt = AdaptSettings(
                ranges=tuple(AdaptRange(**r) for r in adapt["groups"]),
                interval=adapt["interval"],
                wait_count=adapt["wait_count"],
                target_duration=adapt["target_duration"],
            )
            self._policy = AdaptivePolicy(self.adapt)
            self._plan_source.update({r.group: "adaptive" for r in self.adapt.ranges})
        self.events.restore([Event.from_dict(e) for e in record.get("events", [])])
        numbers = [0]
        for worker in record.get("workers", []):
            number = worker["name"].rsplit("-", 1)[-1]
            numbers.append(int(number) if number.isdigit() else 0)
            if worker.get("group") is not None:
                shape = _shape_from_json(worker["shape"])
                self._workers[worker["name"]] = WorkerRecord(worker["name"], worker["group"], shape)
        self._names = itertools.count(max(numbers) + 1)

    async def readopt(self, record: Mapping[str, Any]) -> None:
        """Re-adopt a stored cluster after a server restart, or fail it and stop what is left of it.

        Re-adopted when its scheduler answers at the stored address with the stored scheduler id:
        workers that still run are counted (not started again), adaptive mode resumes. Otherwise
        the cluster ends ``failed`` with the reason (or ``stopped``, when its scheduler shut itself
        down for being idle), and its processes or jobs that still run are stopped.
        """
        records = {w["name"]: w["process"] for w in record.get("workers", []) if w.get("process")}
        if (record.get("backend_state") or {}).get(SCHEDULER_PROCESS):
            records[SCHEDULER_PROCESS] = record["backend_state"][SCHEDULER_PROCESS]
        endpoint = self.endpoint or SchedulerEndpoint("", None)
        stored_lifecycle = self.lifecycle
        try:
            alive = await self.backend.adopt(endpoint, records)
        except Exception as exc:
            log.exception("cluster %s: could not adopt its processes", self.id)
            alive = set()
            await self._fail(f"could not re-adopt its processes: {exc}")
            return
        for name in list(self._workers):
            if name not in alive:
                del self._workers[name]
        if stored_lifecycle in (FAILED, STOPPED, STOPPING):
            self.lifecycle = stored_lifecycle
            await self._teardown()
            self._changed()
            return
        reason = await self._scheduler_mismatch()
        if reason is not None:
            if self._shut_down_for_idleness():
                await self._idle_stopped()
            else:
                await self._fail(reason)
            return
        try:
            self._link = self._new_link()
            await self._link.start()
        except Exception as exc:
            await self._fail(f"could not reconnect to the scheduler at {self.endpoint.address}: {exc}")
            return
        self.lifecycle = RUNNING
        counts = self.worker_counts()
        self.events.lifecycle(
            f"re-adopted after a server restart: scheduler {self.endpoint.address}, "
            f"{counts['running']} workers running, {counts['pending']} starting"
            + (", adaptive mode resumed" if self.adapt else "")
        )
        self._reconciler = asyncio.ensure_future(self._reconcile_loop())
        self._wake.set()
        if self.adapt:
            self._start_adaptive()
        self._changed()

    def _new_link(self) -> SchedulerLink:
        """The link to this cluster's scheduler: its worker stream and heartbeat feed this cluster."""
        link = getattr(self.backend, "scheduler_link", SchedulerLink)  # foreign schedulers: observed by polling
        return link(
            self.endpoint.address,
            self._worker_added,
            self._worker_removed,
            self._scheduler_lost,
            on_responsive=self._scheduler_responsive,
        )

    async def _scheduler_mismatch(self) -> str | None:
        """Why the stored scheduler cannot be re-adopted, or None when it answers with its stored id."""
        if self.endpoint is None or not self.endpoint.address:
            return "the server stopped before the scheduler had started"
        try:
            identity = await scheduler_identity(self.endpoint.address)
        except (OSError, asyncio.TimeoutError) as exc:
            return f"its scheduler at {self.endpoint.address} is gone ({exc or type(exc).__name__})"
        if identity.get("id") != self.endpoint.scheduler_id:
            return (
                f"{self.endpoint.address} now answers with another scheduler "
                f"(id {identity.get('id')}, not {self.endpoint.scheduler_id})"
            )
        return None

    async def detach(self) -> None:
        """Stop managing, and leave every process running for the next server to re-adopt."""
        await self._stop_managing()
        await self.backend.detach()

    def _changed(self) -> None:
        try:
            self._on_change(self)
        except Exception:
            log.exception("change listener failed")

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the scheduler, subscribe to its workers, then reconcile towards the plan."""
        self.events.lifecycle(f"starting ({self.backend.name} backend)")
        scheduler = asyncio.ensure_future(self.backend.start_scheduler())
        if self.backend.workers_before_scheduler:
            self._reconciler = asyncio.ensure_future(self._reconcile_loop())
            self._wake.set()
        try:
            self.endpoint = await scheduler
            if self.lifecycle == PENDING:
                self._link = self._new_link()
                await self._link.start()
        except Exception as exc:
            if self.lifecycle == PENDING:
                await self._fail(f"could not start the scheduler: {exc}")
            return
        if self.lifecycle != PENDING:  # deleted while starting: close() may already have torn down
            await self._teardown()
            return
        self.lifecycle = RUNNING
        self.events.lifecycle(f"scheduler running at {self.endpoint.address}")
        if self._reconciler is None:
            self._reconciler = asyncio.ensure_future(self._reconcile_loop())
        self._wake.set()
        if self.adapt:
            self._start_adaptive()
        self._changed()

    async def _fail(self, message: str) -> None:
        log.error("cluster %s failed: %s", self.id, message)
        self.lifecycle = FAILED
        self.error = message
        self.events.lifecycle(message)
        self._changed()
        await self._teardown()

    async def _stop_managing(self) -> None:
        """Stop the adaptive loop, the reconcile loop and the scheduler link (not the processes)."""
        self._stop_adaptive()
        if self._reconciler is not None:
            self._reconciler.cancel()
            await asyncio.gather(self._reconciler, return_exceptions=True)
            self._reconciler = None
        if self._link is not None:
            await self._link.close()
            self._link = None

    async def _teardown(self) -> None:
        await self._stop_managing()
        await self.backend.close()
        self._workers.clear()
        self._external.clear()

    async def close(self) -> None:
        """Stop every worker and the scheduler; the cluster ends ``stopped``."""
        if self.lifecycle == FAILED:
            await self._teardown()
            return
        self.lifecycle = STOPPING
        self.events.lifecycle("stopping")
        self._changed()
        await self._teardown()
        self.lifecycle = STOPPED
        self.events.lifecycle("stopped")
        self._changed()

    def _require_running(self, action: str) -> None:
        if self.lifecycle not in (PENDING, RUNNING):
            raise Conflict(f"cannot {action} cluster {self.id}: it is {self.status}")

    # -- changing the plan (synchronous: validated, applied, then reconciled in the background) --

    def scale(self, target: ScaleTarget) -> Resolution:
        """Set one group's plan from a target; a manual scale turns adaptive mode off for that group."""
        self._require_running("scale")
        resolution = resolve_target(self.spec, target, max_workers=self.max_workers)
        reason = "manual scale"
        if self.adapt and self.adapt.range_for(resolution.group):
            self._keep_adapt_ranges(lambda r: r.group != resolution.group)
            reason = "manual scale (adaptive mode turned off)"
        self._set_plan(resolution.group, resolution.workers, reason, source="manual")
        return resolution

    def set_spec(self, spec: WorkerSpec) -> None:
        """Replace the Worker Spec; workers whose group changed shape or vanished are replaced."""
        self._require_running("change the spec of")
        if self.adapt:
            names = {g.name for g in spec.groups}
            self._keep_adapt_ranges(lambda r: r.group in names)
        before = {g.name: g.count for g in self.spec.groups}
        self.group_errors.clear()
        self.spec = spec
        for group in spec.groups:
            if before.get(group.name) != group.count:
                self.events.scale(group.name, before.get(group.name, 0), group.count, "worker spec edited", source="spec")
                self._plan_source[group.name] = "spec"
        self._wake.set()
        self._changed()

    def adapt_to(self, data: Any) -> None:
        """Turn adaptive mode on (or change a group's range) from its JSON form, or off with None."""
        self._require_running("change adaptive mode of")
        if data is None:
            self._set_adapt(None)
            self.events.lifecycle("adaptive mode turned off")
        elif isinstance(data, Mapping) and data.get("enabled") is False:
            group = parse_adapt_off(data, self.spec)
            if self.adapt and self.adapt.range_for(group):
                self._keep_adapt_ranges(lambda r: r.group != group)
                self.events.lifecycle(f"adaptive mode turned off for group {group}")
        else:
            settings = parse_adapt(data, self.spec, self.adapt, max_workers=self.max_workers)
            self._set_adapt(settings)
            self.events.lifecycle(
                "adaptive mode on: " + ", ".join(f"{r.group} {r.minimum}-{r.maximum} {r.unit}" for r in settings.ranges)
            )
        self._changed()

    def _keep_adapt_ranges(self, keep: Callable[[AdaptRange], bool]) -> None:
        """Drop the adaptive ranges ``keep`` refuses; adaptive mode goes off with the last one."""
        ranges = tuple(r for r in self.adapt.ranges if keep(r))
        self._set_adapt(replace(self.adapt, ranges=ranges) if ranges else None)

    def _set_adapt(self, settings: AdaptSettings | None) -> None:
        self._stop_adaptive()
        self.adapt = settings
        self._policy = AdaptivePolicy(settings) if settings else None
        if settings and self.lifecycle == RUNNING:
            self._start_adaptive()

    def _set_plan(self, group: str, count: int, reason: str, *, source: str) -> None:
        before = self.spec.group(group).count
        if source == "manual":
            self.error = None  # a new request from a person starts from a clean slate
            self.group_errors.pop(group, None)
        self.spec = self.spec.with_count(group, count)
        self._plan_source[group] = source
        self.events.scale(group, before, count, reason, source=source)
        log.info("cluster %s group %s: %d -> %d workers (%s)", self.id, group, before, count, reason)
        self._changed()  # before waking the reconcile loop, so the new plan is pushed first
        self._wake.set()

    def rename(self, name: str) -> None:
        self.name = name
        self._changed()

    # -- the one scale routine ---------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("cluster %s: reconcile failed", self.id)
                self.events.lifecycle(f"scaling failed: {exc}")
                if isinstance(exc, ClusterManagerError):
                    self.error = exc.message
            self._changed()

    async def _reconcile(self) -> None:
        """Bring requested workers in line with the plan, group by group.

        Up: ask the backend for the missing workers (counting those requested but not yet
        connected, so repeated calls never launch twice). Down: stop never-connected workers
        first, then ask the scheduler which connected ones are cheapest to close, retire them
        (their data moves to survivors), and only then have the backend stop them.
        """
        for group in self.spec.groups:
            shape = shape_of(group)
            live = [r for r in self._live(group.name) if r.shape == shape]
            missing = group.count - len(live)
            if missing > 0:
                names = [f"{group.name}-{next(self._names)}" for _ in range(missing)]
                for name in names:
                    self._workers[name] = WorkerRecord(name, group.name, shape)
                self._changed()
                try:
                    await self.backend.scale_up(group, names)
                except Exception as exc:
                    self._launch_failed(group, names, exc)
            elif missing < 0:
                await self._shrink(group.name, live, -missing)
        current = {g.name: shape_of(g) for g in self.spec.groups}
        outdated = [r for r in self._live() if current.get(r.group) != r.shape]
        if outdated:
            await self._retire_and_stop(outdated, group=None, force=True)

    def _launch_failed(self, group: WorkerGroup, names: list[str], exc: Exception) -> None:
        """Workers the backend could not start: the plan drops to what did start, and the group says why.

        Not retried (a refused job would be refused again): a manual scale or a spec edit tries again.
        """
        started = self.backend.started()
        failed = [name for name in names if name not in started]
        for name in failed:  # what did not start must not count as requested
            self._workers.pop(name, None)
        message = exc.message if isinstance(exc, ClusterManagerError) else str(exc)
        log.error("cluster %s group %s: %d worker(s) not started: %s", self.id, group.name, len(failed), message)
        self.error = self.group_errors[group.name] = message
        current = self.spec.group(group.name).count
        after = max(0, current - len(failed))
        self.spec = self.spec.with_count(group.name, after)
        self.events.scale(group.name, current, after, f"not retrying: {message}", source="system")

    async def _shrink(self, group: str, live: list[WorkerRecord], n: int) -> None:
        never_connected = [r for r in live if r.address is None][:n]
        chosen = list(never_connected)
        if n > len(chosen) and self._link is not None:
            by_address = {r.address: r for r in live if r.address}
            addresses = await self._link.workers_to_close(list(by_address), n - len(chosen))
            chosen += [by_address[a] for a in addresses if a in by_address]
        force = self._plan_source.get(group) != "adaptive"
        await self._retire_and_stop(chosen, group=group, force=force)

    async def _retire_and_stop(self, records: list[WorkerRecord], *, group: str | None, force: bool) -> None:
        for record in records:
            record.stopping = True
        self._changed()
        connected = [r.address for r in records if r.address]
        retired: set[str] = set()
        if connected and self._link is not None:
            retired = set(await self._link.retire_workers(connected))
        kept = [r for r in records if r.address and r.address not in retired]
        if kept and not force:
            # Adaptive mode never drops data: keep those workers and raise the plan back.
            for record in kept:
                record.stopping = False
            records = [r for r in records if r not in kept]
            if group is not None:
                self.spec = self.spec.with_count(group, self.spec.group(group).count + len(kept))
                self.events.note(group, "cannot shrink: worker holds data a client still references", source="adaptive")
        elif kept:
            self.events.note(group, f"data on {len(kept)} worker(s) could not be moved before closing", source="manual")
        await self.backend.scale_down([r.name for r in records])
        for record in records:
            self._workers.pop(record.name, None)

    # -- what the scheduler and the backend tell us --------------------------------------------

    def _worker_added(self, address: str, info: dict) -> None:
        record = self._workers.get(str(info.get("name")))
        if record is None:
            self._external[address] = info
        else:
            record.address, record.info, record.connected_once = address, info, True
        self._changed()

    def _worker_removed(self, address: str) -> None:
        self._external.pop(address, None)
        for record in self._workers.values():
            if record.address == address:
                record.address, record.info = None, {}
        self._changed()

    def _worker_exited(self, name: str, returncode: int | None) -> None:
        record = self._workers.pop(name, None)
        if record is None or self.lifecycle != RUNNING:
            return
        if record.connected_once:
            self.events.lifecycle(f"worker {name} exited with code {returncode}; replacing it")
            self._wake.set()
        else:
            # Replacing a worker that never got as far as the scheduler would only repeat the crash.
            why = self.backend.exit_reason(name)
            code = f" with code {returncode}" if returncode is not None else ""  # a batch job's is not known
            self.error = f"worker {name} exited{code} before it connected" + (
                f": {why}" if why else f"; see {self.backend.workdir}"
            )
            group = self.spec.group(record.group)
            self.spec = self.spec.with_count(group.name, max(0, group.count - 1))
            self.events.scale(group.name, group.count, group.count - 1, f"not replacing {name}: {self.error}", source="system")
        self._changed()

    def _scheduler_responsive(self, responsive: bool) -> None:
        if responsive:
            self.events.lifecycle("the scheduler answers again")
            if self.error and self.error.startswith(SCHEDULER_SILENT):
                self.error = None
            self._wake.set()  # whatever the plan asked for meanwhile
        else:
            seconds = self._link.heartbeat_interval + self._link.heartbeat_timeout
            self.error = (
                f"{SCHEDULER_SILENT} for {seconds:g} s (stopped or overloaded?): the workers and resources shown are "
                "as last seen, and the plan cannot be carried out until it answers"
            )
            self.events.lifecycle(self.error)
        self._changed()

    def _scheduler_lost(self) -> None:
        if self.lifecycle == RUNNING:
            if self._shut_down_for_idleness():
                asyncio.ensure_future(self._idle_stopped())
            else:
                reason = getattr(self._link, "lost_reason", None)
                asyncio.ensure_future(self._fail(reason or "lost the connection to the scheduler"))

    def _shut_down_for_idleness(self) -> bool:
        return bool(self.idle_timeout) and IDLE_SHUTDOWN_LOG_LINE in self.backend.log_tail(SCHEDULER_PROCESS, 40)

    async def _idle_stopped(self) -> None:
        """The scheduler shut itself down after its idle timeout: stop what is left, end ``stopped``."""
        self.lifecycle = STOPPING
        self.events.lifecycle(
            f"shut down: idle (no tasks and no client) for {self.idle_timeout:g} s, the cluster's idle timeout"
        )
        self._changed()
        await self._teardown()
        self.lifecycle = STOPPED
        self._changed()

    def set_idle_timeout(self, seconds: float | None) -> None:
        """Change the idle timeout; a running scheduler takes it at once (it also starts counting anew)."""
        self._require_running("change the idle timeout of")
        self.idle_timeout = seconds
        self.backend.idle_timeout = seconds
        if self._link is not None:
            asyncio.ensure_future(self._push_idle_timeout(seconds))
        self.events.lifecycle(f"idle timeout set to {seconds:g} s" if seconds else "idle timeout off")
        self._changed()

    async def _push_idle_timeout(self, seconds: float | None) -> None:
        try:
            await self._link.set_idle_timeout(seconds)
        except Exception as exc:
            log.warning("cluster %s: could not set the scheduler's idle timeout: %s", self.id, exc)
            self.events.lifecycle(f"could not set the scheduler's idle timeout: {exc}")
            self._changed()

    # -- adaptive mode: a periodic callback feeding the same scale routine ---------------------

    def _start_adaptive(self) -> None:
        self._adaptive_task = asyncio.ensure_future(self._adaptive_loop())

    def _stop_adaptive(self) -> None:
        if self._adaptive_task is not None:
            self._adaptive_task.cancel()
            self._adaptive_task = None

    async def _adaptive_loop(self) -> None:
        while self.adapt is not None and self._policy is not None:
            await asyncio.sleep(self.adapt.interval)
            if self.lifecycle != RUNNING or self._link is None:
                continue
            try:
                load = Load.from_dict(await self._link.load(self.adapt.target_duration))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cluster %s: could not read the scheduler's load: %s", self.id, exc)
                continue
            members = {g.name: [r.name for r in self._live(g.name)] for g in self.spec.groups}
            proposals, notes = self._policy.propose(self.spec, load, members)
            for proposal in proposals:
                if proposal.after > proposal.before and proposal.group in self.group_errors:
                    notes.append((proposal.group, f"not growing: {self.group_errors[proposal.group]}"))
                    continue
                self._set_plan(proposal.group, proposal.after, proposal.reason, source="adaptive")
            for group, note in notes:
                if self._held_notes.get(group) != note:
                    self.events.note(group, note, source="adaptive")
                    self._changed()
            self._held_notes = dict(notes)

    def pids(self) -> dict[str, int]:
        return self.backend.pids()
