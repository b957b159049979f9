"""One managed cluster: the lifecycle facade over its backend, its plan and its adaptive mode.

What it delegates: the plan, requested and observed workers, and the one routine that starts or
stops workers to :class:`~.reconciler.Reconciler` (the only writer of the plan); adaptive mode's
periodic callback to :class:`~.adaptive_loop.AdaptiveController`; processes to its
:class:`~clustermgr_lab.backends.base.Backend`; the timeline to :class:`~.sampling.TimelineSampler`.
What it keeps: lifecycle (pending, running, stopping...), the scheduler link, errors, and what callers
see. What the store keeps of it is read and written by :mod:`.record_codec`; what a restarted server
makes of it is :class:`~.readoption.Readoption`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from clustermgr_lab.backends.base import Backend, BackendContext, SchedulerEndpoint
from clustermgr_lab.cluster.adaptive_loop import AdaptiveController, Policy
from clustermgr_lab.cluster.description import api_view
from clustermgr_lab.cluster.events import WARNING, EventLog, utcnow
from clustermgr_lab.cluster.hosted_link import HostedSchedulerLink, LinkHost
from clustermgr_lab.cluster.readoption import Readoption
from clustermgr_lab.cluster.reconciler import Reconciler, WorkerRecord, shape_of
from clustermgr_lab.cluster.sampling import TimelineSampler
from clustermgr_lab.cluster.scheduler_link import SchedulerLink
from clustermgr_lab.cluster.states import (
    ATTACHED,
    DISCOVERED,
    FAILED,
    PENDING,
    RUNNING,
    SCALING,
    SCHEDULER_SILENT,
    STOPPED,
    STOPPING,
    UNRESPONSIVE,
    reason_of,
)
from clustermgr_lab.common import metrics
from clustermgr_lab.domain.adaptive import AdaptivePolicy, AdaptOff, AdaptSettings
from clustermgr_lab.domain.errors import Conflict
from clustermgr_lab.domain.fields import printable
from clustermgr_lab.domain.spec import Resolution, WorkerSpec
from clustermgr_lab.domain.timeline import Timeline
from clustermgr_lab.domain.usage import UsageMeter

log = logging.getLogger(__name__)


__all__ = [
    "ATTACHED", "DISCOVERED", "FAILED", "PENDING", "RUNNING", "SCALING", "STOPPED", "STOPPING", "UNRESPONSIVE", "ManagedCluster", "WorkerRecord",
    "shape_of",
]  # fmt: skip


class ManagedCluster(Readoption):
    """A Dask cluster owned by the Jupyter server.

    Parameters
    ----------
    cluster_id, name, template : str
    backend : callable
        Makes the backend (it starts and stops the processes; never decides when) from the
        context it is given: ``context`` with this cluster's callbacks.
    spec : WorkerSpec
        The desired workers, per group.
    on_change : callable
        Called with the cluster after every observable change (for the push stream).
    max_workers : int
        The per-cluster limit that every plan is checked against.
    context : BackendContext
        The backend's work folder, launcher and idle timeout (seconds with no tasks and no client
        after which the scheduler shuts itself down).
    policy_class : callable, optional
        Makes adaptive mode's policy from its settings (default :class:`~.adaptive.AdaptivePolicy`).
    config_parent : traitlets Configurable, optional
        Whose config the scheduler link reads (``c.SchedulerLink.*``).
    sample_interval : float, optional
        Seconds between two samples of the workers' memory and CPU for :attr:`timeline`.
    """

    def __init__(
        self,
        cluster_id: str,
        name: str,
        template: str,
        backend: Callable[[BackendContext], Backend],
        spec: WorkerSpec,
        on_change: Callable[[ManagedCluster], None],
        max_workers: int,
        context: BackendContext,
        policy_class: Callable[[AdaptSettings], Policy] = AdaptivePolicy,
        config_parent: Any = None,
        sample_interval: float = 5.0,
    ):
        self.id = cluster_id
        self.name = name
        self.template = template
        self.max_workers = max_workers
        self.lifecycle = PENDING
        self.error: str | None = None
        self.ended: str | None = None  # how a cluster that ended by itself ended normally, in words
        self.created = utcnow()
        self._created_clock = time.monotonic()
        self.usage = UsageMeter()
        self.endpoint: SchedulerEndpoint | None = None
        self.events = EventLog()
        self._on_change = on_change
        self._link: SchedulerLink | None = None
        self._awaiting_scheduler: asyncio.Task | None = None  # re-adoption waits for a scheduler that is silent
        self._change_count = 0  # calls of _changed: part of what keys the cached description
        self._description: tuple[tuple, dict[str, Any], str] | None = None  # (key, to_dict(), its JSON)
        self._security = None
        self._dashboard_ssl: ssl.SSLContext | None = None
        self._config_parent = config_parent
        self.options: dict[str, Any] = {}  # the template's user options, as set at creation
        self.idle_timeout = context.idle_timeout
        self._released = asyncio.Event()  # set once a failed or stopped cluster has stopped what was left of it
        self._start_begun = False
        self._start_ended = asyncio.Event()  # set once start() has returned, whatever became of it
        self.backend = backend(replace(context, on_worker_exit=self._worker_exited, on_change=self._changed))
        self.reconciler = Reconciler(
            cluster_id,
            spec,
            self.backend,
            self.events,
            link=lambda: self._link,
            is_running=lambda: self.lifecycle == RUNNING,
            on_change=self._changed,
            on_error=self._set_error,
        )
        self.adaptive = AdaptiveController(
            cluster_id,
            self.reconciler,
            self.events,
            read_load=self._read_load,
            is_running=lambda: self.lifecycle == RUNNING and self._link is not None,
            on_change=self._changed,
            policy_class=policy_class,
        )
        self.sampler = TimelineSampler(cluster_id, sample_interval, lambda: self._link, self.reconciler.observed)

    @property
    def spec(self) -> WorkerSpec:
        return self.reconciler.spec

    @property
    def adapt(self) -> AdaptSettings | None:
        return self.adaptive.settings

    @adapt.setter
    def adapt(self, settings: AdaptSettings | None) -> None:
        self.adaptive.configure(settings, run=False)

    @property
    def link(self) -> SchedulerLink | None:
        """The line to the scheduler now (None while there is none)."""
        return self._link

    @property
    def timeline(self) -> Timeline:
        return self.sampler.timeline

    @property
    def group_errors(self) -> dict[str, str]:
        """Why a group stopped growing (e.g. the batch system refused its jobs)."""
        return self.reconciler.group_errors

    # -- state as callers see it ---------------------------------------------------------

    @property
    def status(self) -> str:
        if self.lifecycle == RUNNING and self._link is not None and not self._link.responsive:
            return UNRESPONSIVE
        if self.lifecycle == RUNNING and self._awaiting_scheduler is not None:
            return UNRESPONSIVE
        if self.lifecycle == RUNNING and (self.pending_workers or self.reconciler.stopping_workers):
            return SCALING
        return self.lifecycle

    @property
    def pending_workers(self) -> int:
        return self.reconciler.pending_workers

    def worker_counts(self) -> dict[str, Any]:
        return self.reconciler.worker_counts()

    def resources(self) -> dict[str, int]:
        return self.reconciler.resources()

    @property
    def dashboard_address(self) -> str | None:
        """The dashboard's ``host:port`` while the scheduler is alive; None once it failed or stopped.

        A dead scheduler's port may be taken by another process, which must never see our users' requests;
        so until the scheduler is confirmed (``running``: its id checked after a restart), there is none either.
        """
        if self.endpoint is None or self.lifecycle != RUNNING:
            return None
        return self.endpoint.dashboard_address

    def describe(self, base_url: str = "/", dashboard_key: str = "") -> tuple[dict[str, Any], str]:
        """:meth:`to_dict` and its JSON, made again only when the cluster has changed since the last call.

        A list of 100 clusters is asked for far more often than any of them changes. The cache is
        keyed by everything :meth:`to_dict` reads that can change without a :meth:`_changed` (cheap to
        compare), plus the count of those calls, which the workers, resources and usage change through.
        The dict is shared: read it, never modify it. Two calls with no change between them return
        the same objects (``tests/test_description_cache.py`` checks that, and that a change is never missed).
        """
        link = self._link
        key = (
            self._change_count,
            self.events.appended,
            self.lifecycle,
            self.error,
            self.ended,
            self.name,
            self.idle_timeout,
            self.endpoint,
            self.spec,
            self.adapt,
            dict(self.options),  # a copy: a change in place must not change the key kept
            link is not None and link.responsive,
            self.backend.capabilities,
            self.backend.security,
            base_url,
            dashboard_key,
        )
        if self._description is None or self._description[0] != key:
            description = self.to_dict(base_url, dashboard_key)
            self._description = (key, description, json.dumps(description))
        return self._description[1], self._description[2]

    def to_dict(self, base_url: str = "/", dashboard_key: str = "") -> dict[str, Any]:
        """The cluster as the API shows it (see :func:`~.description.api_view`)."""
        return api_view(self, base_url, dashboard_key)

    def _link_host(self) -> LinkHost | None:
        """The process this cluster's scheduler link runs in: the manager's, unless the backend brings its own link
        to run here (a foreign scheduler's, observed by polling) or no manager is the parent (the link runs in this
        process). A backend's own link of a ``hosted_link_kind`` (a gateway cluster's) runs in the manager's too."""
        if self.backend.scheduler_link is not None and self.backend.hosted_link_kind is None:
            return None
        return getattr(self._config_parent, "link_host", None)

    def _new_link(self) -> SchedulerLink:
        """The link to this cluster's scheduler: its worker stream and heartbeat feed the reconciler."""
        host = self._link_host()
        if host is not None:  # in the links' process, given the cluster's TLS files
            kind = self.backend.hosted_link_kind or "scheduler"
            make = partial(HostedSchedulerLink, host, kind=kind, on_gone=self.backend.worker_gone)
            extra = {"security": self.backend.security}
        else:  # here, given the cluster's TLS files; a foreign scheduler's own link observes by polling
            make = self.backend.scheduler_link or SchedulerLink
            extra = {"security": self.backend.security} if self.backend.security is not None else {}
        link = make(
            self.endpoint.address,
            self.reconciler.worker_added,
            self.reconciler.worker_removed,
            self._scheduler_lost,
            on_responsive=self._scheduler_responsive,
            parent=self._config_parent,
            **extra,
        )
        link.on_work = self.adaptive.wake
        return link

    def dashboard_ssl_context(self) -> ssl.SSLContext | None:
        """What the dashboard proxy presents to this cluster's HTTPS dashboard (None: plain HTTP); made once."""
        over_tls = self.backend.dashboard_over_tls
        if self._dashboard_ssl is None and self.backend.security is not None and over_tls:
            self._dashboard_ssl = self.backend.security.client_ssl_context()
        return self._dashboard_ssl

    def security(self):
        """The ``distributed.Security`` of this cluster's scheduler (None: plain TCP); made once."""
        if self._security is None and self.backend.security is not None:
            self._security = self.backend.security.security()
        return self._security

    async def _read_load(self, target_duration: float) -> dict[str, Any]:
        return await self._link.load(target_duration)

    async def detach(self) -> None:
        """Stop managing, and leave every process running for the next server to re-adopt."""
        await self._stop_managing()
        await self.backend.detach()

    def _changed(self) -> None:
        self._change_count += 1
        self.usage.update(self.reconciler.usage_rates())
        self.reconciler.observe_scale()
        try:
            self._on_change(self)
        except Exception:
            log.exception("change listener failed")

    def _set_error(self, message: str | None) -> None:
        self.error = printable(message) if message is not None else None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the scheduler, subscribe to its workers, then reconcile towards the plan."""
        self._start_begun = True
        try:
            await self._start()
        finally:
            self._start_ended.set()

    async def start_ended(self) -> None:
        """Wait until :meth:`start` has returned, if it began (a cluster deleted while it starts: its files are
        written until then)."""
        if self._start_begun:
            await self._start_ended.wait()

    async def _start(self) -> None:
        self.events.lifecycle(f"starting ({self.backend.name} backend)")
        credentials = self.backend.security
        if credentials is not None and not credentials.exist():
            host = self._link_host()
            try:  # made in another process, or an executor: key generation must not hold up the server's event loop
                if host is not None:
                    await host.make_credentials(credentials)
                else:
                    await asyncio.get_running_loop().run_in_executor(None, credentials.make)
            except Exception as exc:
                await self._fail(f"could not make its TLS credentials: {exc}")
                return
        scheduler = asyncio.ensure_future(self.backend.start_scheduler())
        if self.backend.workers_before_scheduler:
            self.reconciler.start()
        try:
            self.endpoint = await scheduler
            if self.lifecycle == PENDING:
                # Workers can be asked for once the scheduler has an address (a batch job waits in its queue
                # meanwhile); those that connect before the link subscribes are in its first answer.
                self.reconciler.start()
                self._link = self._new_link()
                await self._link.start()
                if seconds := self.backend.idle_timeout_to_push:  # e.g. a standby scheduler's
                    asyncio.ensure_future(self._push_idle_timeout(seconds))
        except Exception as exc:
            if self.lifecycle == PENDING:
                action = "start the scheduler" if self.backend.capabilities.can_stop else "attach it"
                await self._fail(f"could not {action}: {reason_of(exc)}")
            return
        if self.lifecycle != PENDING:  # deleted while starting: close() may already have torn down
            await self._teardown()
            return
        self.lifecycle = RUNNING
        metrics.CLUSTER_START_SECONDS.labels(backend=self.backend.name).observe(time.monotonic() - self._created_clock)
        self.events.lifecycle(f"scheduler running at {self.endpoint.address}")
        self.reconciler.start()
        self.adaptive.start()
        self.sampler.start()
        self._changed()

    async def _fail(self, message: str) -> None:
        message = printable(message)  # it may quote a peer: never an escape sequence, in the log or the API
        log.error("cluster %s failed: %s", self.id, message)
        self.lifecycle = FAILED
        self.error = message
        self.events.lifecycle(message, level=WARNING)
        self._changed()
        await self._teardown()
        self._changed()  # what it used, now that nothing of it runs

    async def _stop_managing(self) -> None:
        """Stop the adaptive loop, the reconcile loop, sampling and the scheduler link (not the processes)."""
        if self._awaiting_scheduler is not None:
            self._awaiting_scheduler.cancel()
            self._awaiting_scheduler = None
        self.adaptive.stop()
        await self.sampler.stop()
        await self.reconciler.stop()
        if self._link is not None:
            await self._link.close()
            self._link = None

    async def _teardown(self) -> None:
        await self._stop_managing()
        await self.backend.close()
        self.reconciler.clear()
        self.usage.update(self.reconciler.usage_rates())  # its usage stops here (pushed with the next change)
        self._released.set()

    async def released(self) -> None:
        """Wait until what was left of this (failed or stopped) cluster has been stopped, e.g. before a restart."""
        await self._released.wait()

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

    async def end_with_server(self) -> None:
        """At a clean server stop, for a cluster that cannot be re-adopted: stop it, ``stopped`` with the reason."""
        reasons = self.backend.capabilities.reasons
        why = reasons.get("readoptable", "it cannot be re-adopted by the next server")
        await self.close()
        self.error = f"stopped with the Jupyter server: {why}"
        self.events.lifecycle(self.error)
        self._changed()

    def _require_running(self, action: str) -> None:
        if self.lifecycle not in (PENDING, RUNNING):
            raise Conflict(f"cannot {action} cluster {self.id}: it is {self.status}")

    # -- changing the plan: parsed values in, applied, then reconciled in the background --------

    def scale(self, resolution: Resolution) -> Resolution:
        """Set one group's plan to a resolved target; a manual scale turns adaptive mode off for that group."""
        self._require_running("scale")
        reason = resolution.reason
        if self.adapt and self.adapt.range_for(resolution.group):
            self.adaptive.keep_ranges(lambda r: r.group != resolution.group, run=self.lifecycle == RUNNING)
            reason += " (adaptive mode turned off)"
        self.reconciler.set_plan(resolution.group, resolution.workers, reason, source="manual", asked=resolution.asked)
        return resolution

    def set_spec(self, spec: WorkerSpec) -> None:
        """Replace the Worker Spec; workers whose group changed shape or vanished are replaced."""
        self._require_running("change the spec of")
        names = {g.name for g in spec.groups}
        self.adaptive.keep_ranges(lambda r: r.group in names, run=self.lifecycle == RUNNING)
        self.reconciler.replace_spec(spec)
        self._changed()

    def adapt_to(self, change: AdaptSettings | AdaptOff | None) -> None:
        """Turn adaptive mode on or change it (settings), off for one group (:class:`AdaptOff`), or off (None)."""
        self._require_running("change adaptive mode of")
        self.adaptive.change(change, run=self.lifecycle == RUNNING)
        self._changed()

    def rename(self, name: str) -> None:
        self.name = name
        self._changed()

    # -- what the scheduler and the backend tell us --------------------------------------------

    def _worker_exited(self, name: str, returncode: int | None) -> None:
        self.reconciler.worker_exited(name, returncode)

    def _scheduler_responsive(self, responsive: bool) -> None:
        if responsive:
            self.events.lifecycle("the scheduler answers again")
            if self.error and self.error.startswith(SCHEDULER_SILENT):
                self.error = None
            self.reconciler.wake()  # whatever the plan asked for meanwhile
        else:
            seconds = self._link.heartbeat_interval + self._link.heartbeat_timeout
            self.error = (
                f"{SCHEDULER_SILENT} for {seconds:g} s (stopped or overloaded?): the workers and resources shown are "
                "as last seen, and the plan cannot be carried out until it answers"
            )
            self.events.lifecycle(self.error, level=WARNING)
        self._changed()

    def _scheduler_lost(self) -> None:
        if self.lifecycle == RUNNING:
            if self._shut_down_for_idleness():
                asyncio.ensure_future(self._idle_stopped())
            else:
                asyncio.ensure_future(self._scheduler_gone(getattr(self._link, "lost_reason", None)))

    def _shut_down_for_idleness(self) -> bool:
        return bool(self.idle_timeout) and self.backend.stopped_for_idleness()

    async def _idle_stopped(self) -> None:
        """The scheduler shut itself down after its idle timeout."""
        await self.ended_by_itself(
            f"shut down: idle (no tasks and no client) for {self.idle_timeout:g} s, the cluster's idle timeout"
        )

    async def _scheduler_gone(self, reason: str | None) -> None:
        """The scheduler went: closed normally by whoever started it (the backend knows), else lost: ``failed``."""
        how = await self.backend.closed_by_owner()  # e.g. a notebook's scheduler, which tells discovery
        if self.lifecycle != RUNNING:  # ended meanwhile (deleted, or told of the close another way)
            return
        if how:
            await self.ended_by_itself(how)
        else:
            await self._fail(reason or "lost the connection to the scheduler")

    async def ended_by_itself(self, how: str) -> None:
        """The scheduler shut down normally, unasked: stop what is left, end ``stopped`` saying ``how``, with no error.

        E.g. its idle timeout, or a discovered cluster closed in its notebook.
        """
        if self.lifecycle not in (PENDING, RUNNING):
            return
        self.lifecycle = STOPPING
        self.ended = how
        self.events.lifecycle(how)
        self._changed()
        await self._teardown()
        self.lifecycle = STOPPED
        self._changed()

    def set_idle_timeout(self, seconds: float | None) -> None:
        """Change the idle timeout; a running scheduler takes it at once (it also starts counting anew)."""
        self._require_running("change the idle timeout of")
        self.idle_timeout = seconds
        self.backend.set_idle_timeout(seconds)
        if self._link is not None:
            asyncio.ensure_future(self._push_idle_timeout(seconds))
        self.events.lifecycle(f"idle timeout set to {seconds:g} s" if seconds else "idle timeout off")
        self._changed()

    async def _push_idle_timeout(self, seconds: float | None) -> None:
        try:
            await self._link.set_idle_timeout(seconds)
        except Exception as exc:
            log.warning("cluster %s: could not set the scheduler's idle timeout: %s", self.id, exc)
            self.events.lifecycle(f"could not set the scheduler's idle timeout: {exc}", level=WARNING)
            self._changed()

    def pids(self) -> dict[str, int]:
        return self.backend.pids()
