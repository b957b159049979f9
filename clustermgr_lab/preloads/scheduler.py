"""Scheduler preload: handlers the cluster manager calls in the scheduler process.

Loaded with ``dask scheduler --preload clustermgr_lab.preloads.scheduler``. It adds two RPC
handlers, so the manager (in the Jupyter server process) can ask, in one round trip each:

- ``clustermgr_load``: the load report adaptive mode needs, including what the scheduler's own
  ``adaptive_target`` cannot tell: tasks stuck because no worker has a resource they need.
- ``clustermgr_workers_to_close``: the scheduler's own ``workers_to_close`` preference
  (idle first, least data first), limited to the workers of one group.
- ``clustermgr_set_idle_timeout``: change the scheduler's idle timeout (seconds, or None).

A :class:`WorkNotifier` pushes a wake-up on the manager's worker-status stream when tasks arrive
or a worker runs out of them with nothing queued, so adaptive mode reacts at once rather than at
its next interval.

It also makes distributed's idle timeout (``dask scheduler --idle-timeout``) count a connected
client as activity: the scheduler shuts itself down only after that long with no tasks *and*
no client, whether or not a Jupyter server is running.

Its idle checks run once a second rather than distributed's four times (and the no-workers check not
at all when there is no such timeout): an idle scheduler wakes 4.5 times a second instead of 6.5.

And a dashboard served over HTTPS (a cluster with TLS) asks every peer for the cluster's certificate.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections import defaultdict

import distributed.scheduler
from dask.utils import parse_timedelta
from distributed.diagnostics.plugin import SchedulerPlugin
from toolz import take
from tornado.ioloop import IOLoop, PeriodicCallback

from clustermgr_lab.common.proctitle import label_titles, process_label
from clustermgr_lab.common.security import require_dashboard_client_certificates

SAMPLE = 100


def load_report(scheduler, target_duration="5s") -> dict:
    """Load as :class:`clustermgr_lab.domain.adaptive.Load` reads it (see there for the fields)."""
    target_duration = parse_timedelta(target_duration)
    resource_demand: dict[str, float] = defaultdict(float)
    for ts in scheduler.unrunnable:
        for resource, amount in (ts.resource_restrictions or {}).items():
            resource_demand[resource] += amount
    unrestricted_unrunnable = [ts for ts in scheduler.unrunnable if not ts.resource_restrictions]
    ready = len(scheduler.queued) + len(unrestricted_unrunnable)

    # The CPU part of Scheduler.adaptive_target, over unrestricted work only: tasks that need a
    # resource are the business of the groups that provide it.
    sample = list(take(SAMPLE, itertools.chain(scheduler.queued, unrestricted_unrunnable)))
    queued_occupancy = sum(scheduler._get_prefix_duration(ts.prefix) for ts in sample)
    if ready > SAMPLE:
        queued_occupancy *= ready / SAMPLE
    processing = [ts for ws in scheduler.workers.values() for ts in ws.processing if not ts.resource_restrictions]
    processing_occupancy = sum(scheduler._get_prefix_duration(ts.prefix) for ts in processing)
    cores = math.ceil((processing_occupancy + queued_occupancy) / target_duration)
    cores = min(cores, ready + len(processing))

    limit = sum(ws.memory_limit or 0 for ws in scheduler.workers.values())
    used = sum(ws.nbytes for ws in scheduler.workers.values())
    idle_closable = scheduler.workers_to_close() if scheduler.workers else []
    return {
        "cores_wanted": cores,
        "ready": ready,
        "memory_pressure": bool(limit and used > 0.6 * limit),
        "workers_holding_data": len(scheduler.workers) - len(idle_closable),
        "resource_demand": dict(resource_demand),
        "busy": {str(ws.name): len(ws.processing) for ws in scheduler.workers.values()},
    }


def workers_to_close_among(scheduler, candidates: list[str], n: int) -> list[str]:
    """Up to ``n`` of the ``candidates`` (worker addresses), cheapest to close first."""
    wanted = set(candidates)
    ranked = scheduler.workers_to_close(n=len(scheduler.workers))
    chosen = [address for address in ranked if address in wanted][:n]
    if len(chosen) < n:  # long-running workers are left out of the ranking; take them last
        chosen += [address for address in candidates if address not in chosen][: n - len(chosen)]
    return chosen


WORK_OP = "clustermgr-work"  # the same as scheduler_link.WORK_OP (this module must not import the server's)
DRY_CHECK_DELAY = 0.05  # seconds: one check for idle workers after a batch of finished tasks


class WorkNotifier(SchedulerPlugin):
    """Wakes the manager's adaptive mode: new tasks, or a worker without tasks while nothing is queued."""

    name = "clustermgr-work"

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self._dry_check_pending = False

    def _notify(self, why: str) -> None:
        subscriber = self.scheduler.plugins.get("worker-status")  # the manager's SchedulerLink
        if subscriber is not None:
            with contextlib.suppress(Exception):  # the subscriber is gone; distributed removes its plugin itself
                subscriber.bcomm.send([WORK_OP, why])

    def update_graph(self, scheduler, **kwargs) -> None:
        self._notify("tasks")

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        # A task finished, or data held in memory was let go (a client released it): a worker may now be
        # free to retire, and with no new tasks nothing else would wake adaptive mode to see it.
        if start in ("processing", "memory") and not self._dry_check_pending:
            self._dry_check_pending = True
            IOLoop.current().call_later(DRY_CHECK_DELAY, self._check_dry)

    def _check_dry(self) -> None:
        self._dry_check_pending = False
        scheduler = self.scheduler
        if scheduler.queued or scheduler.unrunnable:
            return
        if any(not ws.processing for ws in scheduler.workers.values()):
            self._notify("idle")


FIRE_AND_FORGET = "fire-and-forget"  # a client entry every scheduler has
IDLE_CHECK_INTERVAL = 1000  # ms: idle timeouts are minutes; distributed checks every 250 ms


def install_client_aware_idle_check(scheduler) -> None:
    """Replace the scheduler's idle check with one for which a connected client is activity too."""

    def check_idle():
        if any(client != FIRE_AND_FORGET for client in scheduler.clients):
            scheduler.idle_since = None
            return None
        return scheduler.check_idle()

    replace_periodic_callback(scheduler, "idle-timeout", check_idle, IDLE_CHECK_INTERVAL)


def check_for_no_workers_less_often(scheduler) -> None:
    """distributed's no-workers check once a second, or never when no ``no-workers-timeout`` is set."""
    if scheduler.no_workers_timeout is None:  # then distributed's check returns at once, 4 times a second
        replace_periodic_callback(scheduler, "no-workers-timeout", None, 0)
    else:
        replace_periodic_callback(scheduler, "no-workers-timeout", scheduler._check_no_workers, IDLE_CHECK_INTERVAL)


def replace_periodic_callback(scheduler, name: str, callback, interval_ms: float) -> None:
    """Put ``callback`` every ``interval_ms`` in the place of the scheduler's periodic callback ``name`` (None: remove it)."""
    previous = scheduler.periodic_callbacks.pop(name, None)
    running = previous is not None and previous.is_running()
    if previous is not None:
        previous.stop()
    if callback is None:
        return
    replacement = PeriodicCallback(callback, interval_ms)
    scheduler.periodic_callbacks[name] = replacement
    if running:
        replacement.start()


def set_idle_timeout(scheduler, seconds: float | None) -> None:
    scheduler.idle_timeout = seconds or None
    scheduler.idle_since = None  # counted again from now


def dask_setup(scheduler):
    require_dashboard_client_certificates(scheduler)
    label_titles(distributed.scheduler, "scheduler", process_label())
    install_client_aware_idle_check(scheduler)
    check_for_no_workers_less_often(scheduler)
    scheduler.add_plugin(WorkNotifier(scheduler))
    scheduler.handlers["clustermgr_set_idle_timeout"] = lambda seconds=None: set_idle_timeout(scheduler, seconds)
    scheduler.handlers["clustermgr_load"] = lambda target_duration="5s": load_report(scheduler, target_duration)
    scheduler.handlers["clustermgr_workers_to_close"] = lambda candidates, n: workers_to_close_among(
        scheduler, candidates, n
    )
