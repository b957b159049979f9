"""The record codec: a managed cluster to the record a store keeps, and a stored record back onto a cluster.

The record's fields are listed once, in :mod:`clustermgr_lab.domain.record`; this module reads them
from and writes them to the pieces of a :class:`~.managed.ManagedCluster` (its reconciler, adaptive
mode, events and usage). Nothing is started or stopped here.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Mapping
from typing import Any

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, SchedulerEndpoint
from clustermgr_lab.cluster.events import Event
from clustermgr_lab.cluster.managed import FAILED, PENDING, STOPPED, STOPPING, ManagedCluster
from clustermgr_lab.cluster.reconciler import WorkerRecord
from clustermgr_lab.domain import record as cluster_record
from clustermgr_lab.domain.adaptive import AdaptRange, AdaptSettings
from clustermgr_lab.domain.usage import UsageMeter

#: Lifecycles a stored cluster keeps when it is restored; any other is ``pending`` until re-adopted.
ENDED = (FAILED, STOPPED, STOPPING)


def shape_to_json(shape: tuple) -> list:
    """A worker's shape ``(threads, memory, resources)`` as JSON.

    >>> shape_to_json((2, 1024, (("GPU", 1),)))
    [2, 1024, [['GPU', 1]]]
    """
    threads, memory, resources = shape
    return [threads, memory, [list(item) for item in resources]]


def shape_from_json(data: list) -> tuple:
    """The inverse of :func:`shape_to_json`.

    >>> shape_from_json([2, 1024, [["GPU", 1]]])
    (2, 1024, (('GPU', 1),))
    """
    threads, memory, resources = data
    return (threads, memory, tuple(tuple(item) for item in resources))


def to_record(cluster: ManagedCluster) -> dict[str, Any]:
    """Everything a restarted server needs to re-adopt ``cluster`` (JSON-ready; the fields: :mod:`~clustermgr_lab.domain.record`)."""
    backend, endpoint, workers = cluster.backend, cluster.endpoint, cluster.reconciler.workers
    processes = backend.process_records()
    records = [
        {"name": r.name, "group": r.group, "shape": shape_to_json(r.shape), "process": processes.get(r.name, {})}
        for r in workers.values()
    ]
    # Processes of workers the cluster already let go of, still being stopped: recorded until gone.
    records += [
        {"name": name, "group": None, "shape": None, "process": process}
        for name, process in processes.items()
        if name not in workers and name != SCHEDULER_PROCESS
    ]
    return cluster_record.build(
        {
            "id": cluster.id,
            "name": cluster.name,
            "template": cluster.template,
            "backend": backend.name,
            "status": cluster.lifecycle,
            "error": cluster.error,
            "spec": cluster.spec.to_dict(),
            "adapt": cluster.adapt.to_dict() if cluster.adapt else None,
            "idle_timeout": cluster.idle_timeout,
            "options": dict(cluster.options),
            "scheduler_address": endpoint.address if endpoint else None,
            "scheduler_id": endpoint.scheduler_id if endpoint else None,
            "dashboard_address": endpoint.dashboard_address if endpoint else None,
            "workdir": str(backend.workdir),
            "created": cluster.created.isoformat(),
            "backend_state": {
                SCHEDULER_PROCESS: processes.get(SCHEDULER_PROCESS),
                "tls": backend.security.to_dict() if backend.security is not None else None,
            },
            "usage": cluster.usage.to_record(),
            "workers": records,
        }
    )


def restore(cluster: ManagedCluster, record: Mapping[str, Any]) -> None:
    """Put the state of a stored cluster onto ``cluster`` (before it is re-adopted); nothing is started or stopped."""
    record = cluster_record.checked(record)
    # Until re-adopted, a cluster that was running is pending: nothing has been checked yet.
    cluster.lifecycle = record["status"] if record["status"] in ENDED else PENDING
    cluster.error = record.get("error")
    cluster.options = dict(record.get("options") or {})
    cluster.created = datetime.datetime.fromisoformat(record["created"])
    cluster.usage = UsageMeter.from_record(record.get("usage"))
    if record.get("scheduler_address"):
        cluster.endpoint = SchedulerEndpoint(
            record["scheduler_address"], record.get("dashboard_address"), record.get("scheduler_id")
        )
    if record.get("adapt"):
        adapt = record["adapt"]
        cluster.adapt = AdaptSettings(
            ranges=tuple(AdaptRange(**r) for r in adapt["groups"]),
            interval=adapt["interval"],
            wait_count=adapt["wait_count"],
            target_duration=adapt["target_duration"],
        )
        cluster.reconciler.restore_sources([r.group for r in cluster.adapt.ranges], "adaptive")
    cluster.events.restore([Event.from_dict(e) for e in record.get("events", [])])
    numbers = [0]
    for worker in record.get("workers", []):
        number = worker["name"].rsplit("-", 1)[-1]
        numbers.append(int(number) if number.isdigit() else 0)
        if worker.get("group") is not None:
            shape = shape_from_json(worker["shape"])
            cluster.reconciler.workers[worker["name"]] = WorkerRecord(worker["name"], worker["group"], shape)
    cluster.reconciler.names = itertools.count(max(numbers) + 1)
