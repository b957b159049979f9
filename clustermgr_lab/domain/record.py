"""The cluster record: the one list of what is persisted about a cluster, its store rows and its manifest file.

A *record* is the JSON-ready dict :meth:`ManagedCluster.to_record` builds and
:meth:`ManagedCluster.restore` reads. :data:`CLUSTER_FIELDS` and :data:`WORKER_FIELDS` name every
field once; the store's columns, its row codec and the manifest all follow from them, so a field
added here is stored everywhere (and the store refuses to open a schema that lacks its column:
add a migration in ``store.py``).

Besides the store, each cluster's work folder holds a *manifest* (``cluster.json``), written with
every record: a server whose store is lost or unreadable finds its clusters again from them.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST_NAME = "cluster.json"
MANIFEST_FORMAT = 1

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Field:
    """One persisted field: its name, its SQLite column type, whether a record must have it, and its default.

    ``kind`` is ``"text"``, ``"real"`` or ``"json"`` (any JSON value, stored as its text).
    """

    name: str
    kind: str
    required: bool = False
    default: Any = None

    @property
    def sql_type(self) -> str:
        return {"text": "TEXT", "real": "REAL", "json": "TEXT"}[self.kind]


#: Every field of a cluster record (besides ``workers``), in store column order.
CLUSTER_FIELDS: tuple[Field, ...] = (
    Field("id", "text", required=True),
    Field("name", "text", required=True),
    Field("template", "text", required=True),
    Field("backend", "text", required=True),
    Field("status", "text", required=True),
    Field("error", "text"),
    Field("spec", "json", required=True),
    Field("adapt", "json"),
    Field("idle_timeout", "real"),
    Field("scheduler_address", "text"),
    Field("scheduler_id", "text"),
    Field("dashboard_address", "text"),
    Field("workdir", "text", required=True),
    Field("created", "text", required=True),
    Field("backend_state", "json", required=True, default={}),
    Field("options", "json", default={}),  # a cluster's chosen user options (schema version 2)
    Field("usage", "json", default={}),  # core-, GPU- and memory-seconds so far, per group and day (version 3)
)

#: Every field of one worker's record (a worker the cluster requested, or one still being stopped).
WORKER_FIELDS: tuple[str, ...] = ("name", "group", "shape", "process")

RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in CLUSTER_FIELDS) + ("workers",)


class RecordError(ValueError):
    """A record (from a store row, a manifest, or a cluster) does not have the declared shape."""


def build(values: Mapping[str, Any]) -> dict[str, Any]:
    """A record from exactly the declared fields; a field missing or undeclared is a programming error.

    Raises
    ------
    RecordError
        When ``values`` does not name exactly :data:`RECORD_FIELDS`.
    """
    missing = set(RECORD_FIELDS) - set(values)
    extra = set(values) - set(RECORD_FIELDS)
    if missing or extra:
        raise RecordError(
            f"a cluster record has exactly the fields of record.CLUSTER_FIELDS and 'workers': "
            f"missing {sorted(missing)}, undeclared {sorted(extra)}"
        )
    workers = [{key: worker.get(key) for key in WORKER_FIELDS} for worker in values["workers"]]
    return {**{f.name: values[f.name] for f in CLUSTER_FIELDS}, "workers": workers}


def checked(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record as read back (from a store row or a manifest), with defaults for fields it predates.

    Keeps ``events`` when present. Raises :class:`RecordError` when a required field is missing.
    """
    result: dict[str, Any] = {}
    for f in CLUSTER_FIELDS:
        value = record.get(f.name)
        if value is None:
            if f.required and f.default is None:
                raise RecordError(f"the stored cluster {record.get('id')!r} has no {f.name!r}")
            value = json.loads(json.dumps(f.default))  # a fresh copy
        result[f.name] = value
    workers = record.get("workers") or []
    if not isinstance(workers, list) or not all(isinstance(w, Mapping) and "name" in w for w in workers):
        raise RecordError(f"the stored cluster {record.get('id')!r} has malformed worker records")
    result["workers"] = [{key: w.get(key) for key in WORKER_FIELDS} for w in workers]
    result["events"] = list(record.get("events") or [])
    return result


# -- store rows ---------------------------------------------------------------------------------


def to_row(record: Mapping[str, Any]) -> list[Any]:
    """The values of :data:`CLUSTER_FIELDS` as store columns (JSON fields encoded), in column order."""
    return [json.dumps(record.get(f.name)) if f.kind == "json" else record.get(f.name) for f in CLUSTER_FIELDS]


def from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields of one store row (JSON fields decoded); without workers and events."""
    values = {}
    for f in CLUSTER_FIELDS:
        value = row[f.name] if f.name in row.keys() else None  # noqa: SIM118 (a sqlite3.Row has no __contains__ for names)
        values[f.name] = json.loads(value) if f.kind == "json" and value is not None else value
    return values


def worker_row(cluster_id: str, worker: Mapping[str, Any]) -> tuple:
    """One worker as a ``workers`` row: (cluster_id, name, worker_group, shape, pid, job_id, process)."""
    process = worker.get("process") or {}
    return (
        cluster_id, worker["name"], worker.get("group"), json.dumps(worker.get("shape")),
        process.get("pid"), process.get("job_id"), json.dumps(process),
    )  # fmt: skip


def worker_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": row["name"],
        "group": row["worker_group"],
        "shape": json.loads(row["shape"] or "null"),
        "process": json.loads(row["process"]),
    }


# -- manifests ------------------------------------------------------------------------------------


def manifest_path(record: Mapping[str, Any]) -> Path:
    return Path(record["workdir"]) / MANIFEST_NAME


def write_manifest(record: Mapping[str, Any], store: Path) -> None:
    """Write the record (no events) to ``cluster.json`` in its work folder, atomically (rename).

    ``store`` is the store the record belongs to: a server only recovers manifests of its own store.
    """
    path = manifest_path(record)
    # Only in a cluster's own folder (named after its id, as the manager makes them), once it exists.
    if path.parent.name != record["id"] or not path.parent.is_dir():
        return
    kept = checked(record)
    del kept["events"]
    body = {"format": MANIFEST_FORMAT, "store": str(Path(store).resolve()), "record": kept}
    temporary = path.with_name(f".{MANIFEST_NAME}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w") as out:
            out.write(json.dumps(body))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def remove_manifest(workdir: str | Path) -> None:
    (Path(workdir) / MANIFEST_NAME).unlink(missing_ok=True)


def read_manifests(workdir: Path, store: Path, max_bytes: int = 1 << 20) -> Iterator[dict[str, Any]]:
    """The records of the manifests in ``workdir/*/cluster.json`` that belong to ``store``.

    A manifest that cannot be read, or that belongs to another store, is skipped with a log line.
    """
    store = Path(store).resolve()
    if not workdir.is_dir():
        return
    for path in sorted(workdir.glob(f"*/{MANIFEST_NAME}")):
        try:
            if not path.is_file() or path.stat().st_size > max_bytes:
                raise RecordError("not a regular file of at most 1 MiB")
            body = json.loads(path.read_text())
            if body.get("format") != MANIFEST_FORMAT:
                raise RecordError(f"unknown manifest format {body.get('format')!r}")
            if Path(body.get("store", "")) != store:
                log.info(
                    "cluster manifest %s belongs to the store %s, not this server's: left alone",
                    path,
                    body.get("store"),
                )
                continue
            record = checked(body["record"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error(
                "cluster manifest %s cannot be read (%s): the cluster it describes cannot be recovered", path, exc
            )
            continue
        if Path(record["workdir"]).resolve() != path.parent.resolve() or path.parent.name != record["id"]:
            log.error("cluster manifest %s names another work folder (%s): ignored", path, record["workdir"])
            continue
        yield record
