"""What a starting server reads of the clusters a previous one left: records, their options and credentials.

The store's records, what could be salvaged of a damaged store, and the clusters only their manifest
files know; for each, the backend options and TLS files it runs with now; and, for a record this server
cannot restore, stopping what still runs of it (never leaving processes or jobs running unseen).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clustermgr_lab.backends import ALL_BACKENDS, BACKENDS, Backend
from clustermgr_lab.backends.base import SCHEDULER_PROCESS, SchedulerEndpoint
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.options import parse_backend_options
from clustermgr_lab.domain.record import read_manifests
from clustermgr_lab.domain.spec import WorkerSpec, parse_spec
from clustermgr_lab.domain.templates import Template
from clustermgr_lab.manager.store import ClusterStore


def stored_records(store: ClusterStore, workdir: Path, log: logging.Logger) -> list[dict]:
    """The records of the store; of a damaged store, what could be read; and the clusters only their manifests know."""
    records = {r["id"]: r for r in store.salvaged}
    for record in store.salvaged:
        log.warning("cluster %s (%s): recovered from the unreadable store", record["id"], record["name"])
    records.update({r["id"]: r for r in store.load()})
    for record in read_manifests(workdir, store.path):
        if record["id"] not in records:
            log.warning(
                "cluster %s (%s): not in the store %s; recovered from its manifest in %s",
                record["id"], record["name"], store.path, record["workdir"],
            )  # fmt: skip
            records[record["id"]] = record
    return sorted(records.values(), key=lambda r: r["created"])


def stored_backend_options(templates: Mapping[str, Template], record: Mapping[str, Any]) -> dict[str, Any]:
    """The backend options of a stored cluster: its template's as configured now, with its user options."""
    template = templates.get(record["template"])
    if template is None or template.backend != record["backend"]:
        return {}
    declared = BACKENDS[template.backend].template_options
    try:
        return {**template.options, **parse_backend_options(record.get("options") or {}, declared, "options")}
    except InvalidRequest:  # the site has changed that option since: the template's own value
        return dict(template.options)


def stored_credentials(record: Mapping[str, Any]) -> ClusterCredentials | None:
    """The TLS files a stored cluster uses (None: it has none); a cluster of ours has them in its work folder."""
    paths = (record.get("backend_state") or {}).get("tls")
    backend_class = ALL_BACKENDS.get(record["backend"])
    if backend_class is not None and backend_class.attaches:  # a tls:// scheduler: the files it was attached with
        return ClusterCredentials.from_paths(paths) if paths else None
    if str(record.get("scheduler_address") or "").startswith("tcp://"):
        return None
    return ClusterCredentials.find(Path(record["workdir"]))


async def stop_leftovers(record: Mapping[str, Any], make_backend: Callable[[], Backend], log: logging.Logger) -> None:
    """Stop the recorded processes or jobs of a cluster that cannot be restored (never leave them running unseen).

    ``make_backend``: a backend of the record's kind, in its work folder with its credentials.
    """
    processes = {w["name"]: w["process"] for w in record.get("workers") or [] if w.get("process")}
    scheduler = (record.get("backend_state") or {}).get(SCHEDULER_PROCESS)
    if scheduler:
        processes[SCHEDULER_PROCESS] = scheduler
    try:
        backend = make_backend()
        await backend.adopt(SchedulerEndpoint(record.get("scheduler_address") or "", None), processes)
        running = sorted(backend.started() | set(backend.pids()))
        await backend.close()
    except Exception as exc:
        log.error("cluster %s: could not stop what may still run of it (%s): %s", record.get("id"), exc, processes)
        return
    log.warning("cluster %s: not restored; stopped what still ran of it: %s", record["id"], running or "nothing")


def restored_spec(backend_class: type[Backend], record: Mapping[str, Any]) -> WorkerSpec:
    """The Worker Spec a stored cluster is listed with again: its own, but an attached one's workers are not ours.

    A backend that attaches and scales (a gateway's cluster) keeps its groups with no worker planned: the
    workers that run are listed as they connect, not started again, and a scale adds to them.
    """
    if not backend_class.attaches:
        return parse_spec(record["spec"])
    if not backend_class.capabilities.can_scale:
        return WorkerSpec(())
    spec = parse_spec(record["spec"])
    for group in spec.groups:
        spec = spec.with_count(group.name, 0)
    return spec
