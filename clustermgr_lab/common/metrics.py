"""The manager's Prometheus series, exported at the Jupyter server's ``/metrics`` next to jupyter_server's own.

jupyter_server registers its series (``http_request_duration_seconds``, ``kernel_currently_running_total``...)
as module-level objects of ``prometheus_client``'s default registry, and serves that registry at
``/metrics`` (token or login needed unless ``ServerApp.authenticate_prometheus = False``). This module
does the same for the cluster manager, in two parts:

- events counted as they happen (module-level counters and histograms): scale and adaptive decisions
  by reason, the time a cluster takes to start and a scale to be carried out, the warm launcher's forks;
- state read at scrape time (:class:`ManagerCollector`, from the managers that :func:`watch` was given):
  clusters by status and backend, workers by state and group, stream subscribers, resources and usage.
  Read from the same objects ``GET clustermgr/api/clusters`` describes, so the two always agree.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

#: The status names a cluster can have (``ManagedCluster.status``): each is exported, 0 included.
STATUSES = ("pending", "running", "scaling", "unresponsive", "stopping", "stopped", "failed")
#: A worker's states: requested and not yet connected, connected, being retired or stopped.
WORKER_STATES = ("pending", "running", "stopping")
#: The group label of workers that connected to a cluster's scheduler without being started by it.
EXTERNAL_GROUP = "external"

SECONDS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)

DECISIONS = Counter(
    "clustermgr_decisions_total",
    "Scale and adaptive decisions: kind 'scale' changed a group's plan, 'note' held a change back; "
    "source manual, adaptive, spec or system; reason a fixed category of the decision's message",
    ["kind", "source", "reason"],
)
CLUSTER_START_SECONDS = Histogram(
    "clustermgr_cluster_start_seconds",
    "Seconds from a cluster's creation until its scheduler runs (the scheduler's own start; workers follow)",
    ["backend"],
    buckets=SECONDS_BUCKETS,
)
SCALE_SECONDS = Histogram(
    "clustermgr_scale_seconds",
    "Seconds from a change of a group's plan until that many of its workers run (up) or only that many are "
    "left (down); a plan changed again before it was met is not observed",
    ["backend", "direction"],
    buckets=SECONDS_BUCKETS,
)
LAUNCHER_FORKS = Counter(
    "clustermgr_launcher_forks_total",
    "Processes asked of the warm launcher: result 'forked', or 'fallback' when it could not and a fresh "
    "interpreter was started instead",
    ["process", "result"],
)

# The reason categories of decisions, matched against the start of a decision's message (see
# events.EventLog.scale/note): free text (numbers, worker names, errors) never becomes a label value.
_REASONS: tuple[tuple[str, str], ...] = (
    (r"manual scale", "manual"),
    (r"worker spec edited", "spec-edited"),
    (r"\d+ tasks? queued", "tasks-queued"),
    (r"stored data fills", "memory-pressure"),
    (r"tasks need", "tasks-need-resource"),
    (r"tasks running", "tasks-running"),
    (r"adaptive minimum", "adaptive-minimum"),
    (r"adaptive maximum", "adaptive-maximum"),
    (r"idle for", "idle"),
    (r"load wants", "load-dropped"),
    (r"cannot shrink", "cannot-shrink"),
    (r"not growing", "not-growing"),
    (r"not replacing", "worker-failed-to-connect"),
    (r"not retrying", "launch-failed"),
    (r"data on \d+ worker", "data-not-moved"),
)


def reason_label(message: str) -> str:
    """The fixed category of a decision's message (``"other"`` for one not listed).

    Examples
    --------
    >>> reason_label("12 tasks queued, 5 s target duration (growing by 1 per interval)")
    'tasks-queued'
    >>> reason_label("idle for 3 intervals")
    'idle'
    """
    for pattern, label in _REASONS:
        if re.match(pattern, message):
            return label
    return "other"


def count_decision(kind: str, source: str | None, message: str) -> None:
    """Count one scale decision or held-back note (called by :class:`~.events.EventLog`)."""
    DECISIONS.labels(kind=kind, source=source or "system", reason=reason_label(message)).inc()


def fork_process(command: list[str]) -> str:
    """The ``process`` label of a command the warm launcher runs: ``scheduler``, ``worker`` or ``other``.

    Both spellings of the dask commands count: ``python -m distributed.cli.dask_worker ...`` (how this
    extension starts them) and ``dask worker ...``.

    >>> fork_process(["/usr/bin/python3", "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1"])
    'scheduler'
    >>> fork_process(["dask", "worker", "tls://127.0.0.1:8786"])
    'worker'
    >>> fork_process(["sleep", "1"])
    'other'
    """
    words = command[:4]  # the program and its module or subcommand, never an argument such as --name worker
    for kind in ("scheduler", "worker"):
        if (
            f"distributed.cli.dask_{kind}" in words
            or f"dask-{kind}" in words
            or (len(command) > 1 and command[1] == kind and command[0].endswith("dask"))
        ):
            return kind
    return "other"


def count_fork(command: list[str], forked: bool) -> None:
    """Count one process the warm launcher forked (or could not: ``forked=False``)."""
    LAUNCHER_FORKS.labels(process=fork_process(command), result="forked" if forked else "fallback").inc()


class ScaleTimer:
    """Times how long a group's new plan takes to be carried out (:data:`SCALE_SECONDS`).

    Parameters
    ----------
    backend : str
        The ``backend`` label.
    """

    def __init__(self, backend: str):
        self.backend = backend
        self._open: dict[str, tuple[float, int, str]] = {}  # group -> (started, target, direction)

    def planned(self, group: str, before: int, after: int) -> None:
        """A group's plan changed from ``before`` to ``after`` workers (a change that is no change is not timed)."""
        if after == before:
            return
        self._open[group] = (time.monotonic(), after, "up" if after > before else "down")

    def observe(self, running: dict[str, int], present: dict[str, int]) -> None:
        """Close the timers whose plan is met: ``running`` (connected) reached an up target, ``present`` (all
        requested, stopping included) came down to a down target."""
        for group, (started, target, direction) in list(self._open.items()):
            done = running.get(group, 0) >= target if direction == "up" else present.get(group, 0) <= target
            if done:
                del self._open[group]
                SCALE_SECONDS.labels(backend=self.backend, direction=direction).observe(time.monotonic() - started)

    def cancel(self) -> None:
        """Forget every open timer (the cluster stopped: what was asked will not be carried out)."""
        self._open.clear()


class ManagerCollector:
    """The manager's state at scrape time, for every manager :func:`watch` was given (one per server)."""

    def __init__(self) -> None:
        self.managers: weakref.WeakSet[Any] = weakref.WeakSet()

    def describe(self) -> list[Metric]:
        families = self._families()
        return [f for f in families.values() if isinstance(f, Metric)] + list(families["usage"].values())

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        clusters_family, workers, subscribers, resources, usage = families.values()
        backends: set[str] = set()
        counts: dict[tuple[str, str], int] = {}
        now = time.time()
        for manager in list(self.managers):
            subscribers.add_metric([], manager.feed.subscriber_count)
            backends.update(manager.backend_names())
            for cluster in manager.clusters():
                key = (cluster.status, cluster.backend.name)
                backends.add(cluster.backend.name)
                counts[key] = counts.get(key, 0) + 1
                for (group, state), n in cluster.reconciler.workers_by_group_and_state().items():
                    workers.add_metric([cluster.id, group, state], n)
                for resource, amount in cluster.resources().items():
                    resources.add_metric([cluster.id, resource], amount)
                for group, amounts in cluster.usage.totals(now).items():
                    for kind, seconds in amounts.items():
                        usage[kind].add_metric([cluster.id, group], seconds)
        for backend in sorted(backends):
            for status in STATUSES:
                clusters_family.add_metric([status, backend], counts.get((status, backend), 0))
        yield clusters_family
        yield workers
        yield subscribers
        yield resources
        yield from usage.values()

    @staticmethod
    def _families() -> dict[str, Any]:
        return {
            "clusters": GaugeMetricFamily(
                "clustermgr_clusters",
                "Clusters this server lists, by status and backend (as GET clustermgr/api/clusters shows them)",
                labels=["status", "backend"],
            ),
            "workers": GaugeMetricFamily(
                "clustermgr_workers",
                "Workers of each cluster by group and state: pending (requested, not connected yet), running "
                f"(connected; group '{EXTERNAL_GROUP}' for workers the cluster did not start), stopping",
                labels=["cluster", "group", "state"],
            ),
            "subscribers": GaugeMetricFamily(
                "clustermgr_stream_subscribers", "WebSocket subscribers of clustermgr/api/stream"
            ),
            "resources": GaugeMetricFamily(
                "clustermgr_cluster_resources",
                "What a cluster's connected workers have: cores (threads), memory (bytes of memory limits), gpus",
                labels=["cluster", "resource"],
            ),
            "usage": {
                kind: CounterMetricFamily(
                    f"clustermgr_usage_{kind}",
                    f"{what} a cluster's workers have had while connected, per group (kept across server restarts)",
                    labels=["cluster", "group"],
                )
                for kind, what in (
                    ("core_seconds", "Core-seconds (threads x seconds)"),
                    ("gpu_seconds", "GPU-seconds"),
                    ("memory_seconds", "Byte-seconds of memory limit"),
                )
            },
        }


COLLECTOR = ManagerCollector()
REGISTRY.register(COLLECTOR)


def watch(manager: Any) -> None:
    """Export ``manager``'s state at ``/metrics`` (it needs ``clusters()``, ``backend_names()``, ``feed.subscriber_count``)."""
    COLLECTOR.managers.add(manager)


def unwatch(manager: Any) -> None:
    COLLECTOR.managers.discard(manager)
