"""The embedded cluster store: what a server must know to re-adopt its clusters after a restart.

One SQLite file (stdlib ``sqlite3``, WAL journal, one transaction per write) holds the clusters
(id, name, template, backend, spec, adaptive settings, idle timeout, scheduler address and id,
dashboard address), their worker records (name, group, PID or SLURM job id), the backend's own
state and a bounded event log per cluster. A server killed mid-write leaves the last committed
state readable (SQLite's guarantee). A file SQLite cannot read is moved aside, with a log line,
and an empty store takes its place. One server uses a store at a time: a lock file next to it is
held (``flock``) for the server's life and released by the kernel even when the server is killed.

No tornado, no asyncio: the manager calls the writing methods from one writer thread.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from .errors import ClusterManagerError

SCHEMA_VERSION = 1
MAX_EVENTS_PER_CLUSTER = 200

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS clusters (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    template TEXT NOT NULL,
    backend TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    spec TEXT NOT NULL,
    adapt TEXT,
    idle_timeout REAL,
    scheduler_address TEXT,
    scheduler_id TEXT,
    dashboard_address TEXT,
    workdir TEXT NOT NULL,
    created TEXT NOT NULL,
    backend_state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS workers (
    cluster_id TEXT NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    worker_group TEXT,
    shape TEXT,
    pid INTEGER,
    job_id TEXT,
    process TEXT NOT NULL,
    PRIMARY KEY (cluster_id, name)
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id TEXT NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
    event TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_cluster ON events (cluster_id, seq);
"""


class StoreLocked(ClusterManagerError):
    """Another server uses this cluster store."""

    code = "store_locked"
    status = 409


class ClusterStore:
    """The clusters of one server, kept on disk.

    Parameters
    ----------
    path : Path
        The SQLite file; its folder is created. ``<path>.lock`` is the one-server lock.
    log : logging.Logger, optional
        Where moving an unreadable store aside is reported.

    Raises
    ------
    StoreLocked
        When another process holds the store's lock.

    Examples
    --------
    >>> import tempfile
    >>> store = ClusterStore(Path(tempfile.mkdtemp()) / "clusters.sqlite3")
    >>> store.save({"id": "c1", "name": "a", "template": "local", "backend": "local", "status": "running",
    ...             "spec": {"groups": []}, "workdir": "/tmp", "created": "now", "backend_state": {},
    ...             "workers": []}, [{"message": "started"}])
    >>> [c["name"] for c in store.load()], store.load()[0]["events"]
    (['a'], [{'message': 'started'}])
    >>> store.close()
    """

    def __init__(self, path: str | Path, log: logging.Logger | None = None):
        self.path = Path(path)
        self.log = log or logging.getLogger(__name__)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = self._lock()
        self.moved_aside: Path | None = None
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as exc:
            self._db = self._replace_unreadable(exc)

    # -- opening ---------------------------------------------------------------------------------

    def _lock(self):
        lock_path = self.path.with_name(self.path.name + ".lock")
        lock_file = open(lock_path, "a+")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.seek(0)
            holder = lock_file.read().strip() or "unknown"
            lock_file.close()
            raise StoreLocked(
                f"the cluster store {self.path} is in use by another Jupyter server (pid {holder}); "
                "stop that server, or give this one another ClusterManager.store_path"
            ) from None
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(str(os.getpid()))
        lock_file.flush()
        return lock_file

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable across a process crash
            db.execute("PRAGMA foreign_keys=ON")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            db.executescript(SCHEMA)  # CREATE ... IF NOT EXISTS: nothing to undo if cut short
            with db:
                db.execute("BEGIN IMMEDIATE")
                row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None:
                    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                elif row[0] != str(SCHEMA_VERSION):
                    raise sqlite3.DatabaseError(f"schema version {row[0]}, this server reads {SCHEMA_VERSION}")
            self._read(db)  # every row must decode, or the store counts as unreadable
        except BaseException:
            db.close()
            raise
        return db

    def _replace_unreadable(self, error: Exception) -> sqlite3.Connection:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                source.replace(Path(f"{aside}{suffix}"))
        self.moved_aside = aside
        self.log.error(
            "the cluster store %s could not be read (%s); moved it aside to %s and started an empty store: "
            "clusters it recorded are no longer managed",
            self.path, error, aside,
        )  # fmt: skip
        return self._open()

    # -- reading ---------------------------------------------------------------------------------

    def load(self) -> list[dict[str, Any]]:
        """Every stored cluster as a dict, with its ``workers`` and ``events`` (oldest first)."""
        return self._read(self._db)

    @staticmethod
    def _read(db: sqlite3.Connection) -> list[dict[str, Any]]:
        db.row_factory = sqlite3.Row
        try:
            clusters = []
            for row in db.execute("SELECT * FROM clusters ORDER BY created"):
                cluster = dict(row)
                for key in ("spec", "adapt", "backend_state"):
                    cluster[key] = json.loads(cluster[key]) if cluster[key] is not None else None
                cluster["workers"] = [
                    {"name": w["name"], "group": w["worker_group"], "shape": json.loads(w["shape"] or "null"),
                     "process": json.loads(w["process"])}
                    for w in db.execute("SELECT * FROM workers WHERE cluster_id = ? ORDER BY rowid", (row["id"],))
                ]  # fmt: skip
                cluster["events"] = [
                    json.loads(e["event"])
                    for e in db.execute("SELECT event FROM events WHERE cluster_id = ? ORDER BY seq", (row["id"],))
                ]
                clusters.append(cluster)
            return clusters
        except (ValueError, TypeError, KeyError) as exc:
            raise sqlite3.DatabaseError(f"a stored row does not decode: {exc}") from exc
        finally:
            db.row_factory = None

    # -- writing (one transaction each) ---------------------------------------------------------

    def save(self, cluster: dict[str, Any], new_events: list[dict[str, Any]]) -> None:
        """Insert or replace one cluster, its worker records, and append its new events."""
        columns = (
            "id", "name", "template", "backend", "status", "error", "spec", "adapt", "idle_timeout",
            "scheduler_address", "scheduler_id", "dashboard_address", "workdir", "created", "backend_state",
        )  # fmt: skip
        values = [cluster.get(c) for c in columns]
        for i, column in enumerate(columns):
            if column in ("spec", "adapt", "backend_state") and values[i] is not None:
                values[i] = json.dumps(values[i])
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                f"INSERT INTO clusters ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
                f"ON CONFLICT(id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in columns[1:])}",
                values,
            )
            self._db.execute("DELETE FROM workers WHERE cluster_id = ?", (cluster["id"],))
            self._db.executemany(
                "INSERT INTO workers (cluster_id, name, worker_group, shape, pid, job_id, process) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (cluster["id"], w["name"], w.get("group"), json.dumps(w.get("shape")),
                     w["process"].get("pid"), w["process"].get("job_id"), json.dumps(w["process"]))
                    for w in cluster["workers"]
                ],
            )  # fmt: skip
            self._db.executemany(
                "INSERT INTO events (cluster_id, event) VALUES (?, ?)",
                [(cluster["id"], json.dumps(e)) for e in new_events],
            )
            if new_events:
                self._db.execute(
                    "DELETE FROM events WHERE cluster_id = ? AND seq <= "
                    "(SELECT seq FROM events WHERE cluster_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                    (cluster["id"], cluster["id"], MAX_EVENTS_PER_CLUSTER),
                )

    def delete(self, cluster_id: str) -> None:
        """Forget a cluster (it has been stopped), its workers and events."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM clusters WHERE id = ?", (cluster_id,))

    def close(self) -> None:
        """Close the database and release the lock."""
        self._db.close()
        fcntl.flock(self._lock_file, fcntl.LOCK_UN)
        self._lock_file.close()
