"""The workers view: each worker of one cluster with its name, group, address, host, PID, memory and state.

What ``GET clustermgr/api/clusters/{id}/workers`` answers. States: ``starting`` (asked of the backend,
not connected yet), ``running`` (connected to the scheduler), ``closing`` (being retired and stopped)
and ``gone`` (went away lately: the last :data:`~.reconciler.GONE_KEPT` are kept). Memory in use is
asked of the scheduler at the time of the request (one call, with the link's timeout); where it does
not answer, the last figure the scheduler reported with the worker is shown.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from clustermgr_lab.cluster.reconciler import Reconciler, WorkerRecord

log = logging.getLogger(__name__)

STARTING, RUNNING, CLOSING, GONE = "starting", "running", "closing", "gone"


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value >= 0 else None


def _entry(
    name: str, group: str | None, address: str | None, info: dict, pid: int | None, state: str, memory: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "group": group,
        "address": address,
        "host": info.get("host"),
        "pid": pid,
        "memory": _number(memory),
        "memory_limit": _number(info.get("memory_limit")),
        "threads": _number(info.get("nthreads")),
        "state": state,
    }


async def list_workers(reconciler: Reconciler, link: Any, local: bool) -> list[dict[str, Any]]:
    """Each worker of a cluster, live ones first (by name), then those gone (newest last).

    Parameters
    ----------
    reconciler : Reconciler
        The cluster's requested, observed and departed workers.
    link : SchedulerLink or None
        The cluster's scheduler link now; its ``worker_metrics()`` gives each worker's memory in use.
    local : bool
        Whether the workers run on this host: PIDs are shown only then.
    """
    measured: dict[str, dict[str, float]] = {}
    read = getattr(link, "worker_metrics", None)  # a foreign scheduler's link does not have it
    if read is not None and link.responsive and (reconciler.observed()):
        try:
            measured = await read()
        except Exception as exc:  # the scheduler is busy or gone: the figures reported at join time stand
            log.debug("workers view: no live memory figures (%s)", exc)
    pids = reconciler.backend.pids() if local else {}

    def memory(address: str | None, info: dict) -> Any:
        if address in measured:
            return measured[address]["memory"]
        return (info.get("metrics") or {}).get("memory")

    def state(record: WorkerRecord) -> str:
        return CLOSING if record.stopping else RUNNING if record.address else STARTING

    live = [
        _entry(
            r.name,
            r.group,
            r.address,
            r.info or {"host": r.host},
            (pids.get(r.name) or r.pid) if local else None,
            state(r),
            memory(r.address, r.info) if r.address else None,
        )
        for r in reconciler.workers.values()
    ]
    external = [
        _entry(str(info.get("name", address)), None, address, info, None, RUNNING, memory(address, info))
        for address, info in reconciler.external.items()
    ]
    live = sorted(live + external, key=lambda e: _natural(e["name"]))
    gone = [
        _entry(r.name, r.group, r.last_address, {"host": r.host}, r.pid if local else None, GONE, None)
        for r in reconciler.gone
        if r.name not in reconciler.workers
    ]
    return live + gone
