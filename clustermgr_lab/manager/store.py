"""The embedded cluster store: what a server must know to re-adopt its clusters after a restart.

One SQLite file (stdlib ``sqlite3``, WAL journal, one transaction per write) holds the cluster
records (their fields are declared once, in :mod:`.record`), their worker records, and a bounded
event log per cluster. A server killed mid-write leaves the last committed state readable
(SQLite's guarantee).

- **Versioned**: ``meta.schema_version`` says which of :data:`MIGRATIONS` a store has had; opening
  an older store applies the missing ones in place, each in one transaction. A new store is made
  by the same migrations, so an upgraded store and a new one have the same schema.
- **One owner**: an ``flock`` on the store file itself, held for the server's life (close-on-exec,
  released by the kernel when the server dies); deleting any file does not free it.
- **Its own writer thread**: writes are queued (:meth:`ClusterStore.save_later` and friends) and
  made in order off the event loop. A write that fails (disk full, read-only, store deleted) makes
  the store *unwritable* (:attr:`ClusterStore.health`) until a write or :meth:`ClusterStore.check_later`
  succeeds again; a store file deleted or replaced while the server runs is made again.
- **Read-only at start** (a read-only file system, a file this user may not write): the store is
  locked and opened read-only, and is *unwritable* from the start, saying so; the first write
  that is tried once it can be written opens it for writing again.
- **Damage**: a file SQLite cannot read is moved aside (with a log line) after what can still be
  read of it is salvaged (:attr:`ClusterStore.salvaged`); a 0-byte store is reported. The cluster
  manifests (:mod:`.record`) let the manager find the clusters the store no longer has.

No tornado, no asyncio: the manager turns the writer thread's futures into awaitables.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from clustermgr_lab.domain import record as codec
from clustermgr_lab.domain.errors import ClusterManagerError, StoreUnavailable

MAX_EVENTS_PER_CLUSTER = 200
#: Free bytes below which the store's file system counts as full (a write could not complete).
MIN_FREE_BYTES = 256 * 1024
#: What each write check writes (and rewrites): room for a record or two, so a check passes only if a save would.
HEADROOM_BYTES = 16 * 1024

#: The schema's history: ``(version, what it changes, SQL statements)``. Append, never edit.
MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (1, "the first released schema", (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS clusters (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, template TEXT NOT NULL, backend TEXT NOT NULL,
            status TEXT NOT NULL, error TEXT, spec TEXT NOT NULL, adapt TEXT, idle_timeout REAL,
            scheduler_address TEXT, scheduler_id TEXT, dashboard_address TEXT, workdir TEXT NOT NULL,
            created TEXT NOT NULL, backend_state TEXT NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS workers (
            cluster_id TEXT NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
            name TEXT NOT NULL, worker_group TEXT, shape TEXT, pid INTEGER, job_id TEXT,
            process TEXT NOT NULL, PRIMARY KEY (cluster_id, name))""",
        """CREATE TABLE IF NOT EXISTS events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            cluster_id TEXT NOT NULL REFERENCES clusters(id) ON DELETE CASCADE, event TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS events_by_cluster ON events (cluster_id, seq)",
    )),
    (2, "clusters.options: a cluster's chosen user options (they were lost at a restart)", (
        "ALTER TABLE clusters ADD COLUMN options TEXT",
    )),
    (3, "clusters.usage: core-, GPU- and memory-seconds a cluster has used, per group and per day", (
        "ALTER TABLE clusters ADD COLUMN usage TEXT",
    )),
)  # fmt: skip
SCHEMA_VERSION = MIGRATIONS[-1][0]
#: What ``open`` says of a file that exists but cannot be opened for writing (a read-only file system included).
READ_ONLY_ERRORS = (errno.EACCES, errno.EPERM, errno.EROFS)


class StoreLocked(ClusterManagerError):
    """Another server uses this cluster store."""

    code = "store_locked"
    status = 409


class StoreTooNew(ClusterManagerError):
    """The store was written by a newer release, whose schema this server does not know."""

    code = "store_too_new"
    status = 409


@dataclass(frozen=True)
class StoreHealth:
    """Whether the store can be written now; if not, why and since when (ISO time)."""

    writable: bool = True
    error: str | None = None
    since: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"writable": self.writable, "error": self.error, "since": self.since}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def lock_holder(path: Path) -> int | None:
    """The PID holding an ``flock`` on ``path``, from ``/proc/locks`` (Linux); None when unknown."""
    try:
        stat = path.stat()
        locks = Path("/proc/locks").read_text()
    except OSError:
        return None
    inode = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in locks.splitlines():
        match = re.match(r"\d+:\s+FLOCK\s+\S+\s+WRITE\s+(\d+)\s+(\S+)", line)
        if match and match.group(2) == inode:
            return int(match.group(1))
    return None


class ClusterStore:
    """The clusters of one server, kept on disk.

    Parameters
    ----------
    path : Path
        The SQLite file; its folder is created.
    log : logging.Logger, optional
        Where migrations, damage and write failures are reported.

    Raises
    ------
    StoreLocked
        When another process holds the store's lock.
    StoreTooNew
        When the store's schema is newer than :data:`SCHEMA_VERSION`.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> store = ClusterStore(folder / "clusters.sqlite3")
    >>> store.save({"id": "c1", "name": "a", "template": "local", "backend": "local", "status": "running",
    ...             "error": None, "spec": {"groups": []}, "adapt": None, "idle_timeout": None, "options": {},
    ...             "scheduler_address": None, "scheduler_id": None, "dashboard_address": None,
    ...             "workdir": str(folder), "created": "now", "backend_state": {}, "workers": []},
    ...            [{"message": "started"}])
    >>> [c["name"] for c in store.load()], store.load()[0]["events"]
    (['a'], [{'message': 'started'}])
    >>> store.close()
    """

    def __init__(self, path: str | Path, log: logging.Logger | None = None):
        self.path = Path(path)
        self.log = log or logging.getLogger(__name__)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.moved_aside: Path | None = None
        self.salvaged: list[dict[str, Any]] = []  # what could be read of a store that was moved aside
        self.health = StoreHealth()
        self.on_health: Callable[[StoreHealth], None] | None = None  # called on the writer thread
        self._health_lock = threading.Lock()
        self._manifest_failing: set[str] = set()
        self.read_only: str | None = None  # why the store was opened read-only (None: it was opened for writing)
        if self.path.exists() and self.path.stat().st_size == 0 and not Path(f"{self.path}-wal").exists():
            self.log.warning(
                "the cluster store %s is empty (0 bytes): it was cut short or truncated; "
                "clusters are looked for in their manifests in the work folder", self.path,
            )  # fmt: skip
        self._legacy_lock_fd: int | None = None
        try:
            self._lock_fd = self._lock()
            try:
                self._db = self._open()
            except sqlite3.DatabaseError as exc:
                if self.read_only is not None:  # it cannot be moved aside either
                    raise
                self._db = self._replace_unreadable(exc)
        except BaseException:
            for fd in (getattr(self, "_lock_fd", None), self._legacy_lock_fd):
                if fd is not None:
                    os.close(fd)
            raise
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clustermgr-store")
        if self.read_only is not None:
            self.health = StoreHealth(
                False,
                f"the cluster store {self.path} cannot be written: it is read-only ({self.read_only})",
                _now(),
            )
            self.log.error(
                "%s: its clusters are listed and watched; new clusters and changes are refused until it can",
                self.health.error,
            )

    # -- opening ---------------------------------------------------------------------------------

    def _lock(self) -> int:
        """Lock the store file itself (``flock``, close-on-exec): the lock lives as long as this server.

        The lock file the first release used (``<store>.lock``) is locked too, so that a server of that
        release still running on the store during an upgrade is not joined by this one.
        """
        if self._legacy_lock_fd is None:
            legacy = self.path.with_name(self.path.name + ".lock")
            try:
                self._legacy_lock_fd = self._lock_file(legacy)
                os.ftruncate(self._legacy_lock_fd, 0)
                os.pwrite(self._legacy_lock_fd, str(os.getpid()).encode(), 0)
            except OSError as exc:
                if exc.errno not in READ_ONLY_ERRORS:
                    raise
                # a read-only folder: lock the legacy file where it is (no such file: no such server either)
                self._legacy_lock_fd = self._lock_file(legacy, os.O_RDONLY) if legacy.exists() else None
        try:
            return self._lock_file(self.path)
        except OSError as exc:
            if exc.errno not in READ_ONLY_ERRORS or not self.path.exists():
                raise
            self.read_only = os.strerror(exc.errno)
            return self._lock_file(self.path, os.O_RDONLY)

    def _lock_file(self, path: Path, mode: int = os.O_RDWR | os.O_CREAT) -> int:
        fd = os.open(path, mode | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(path)
            if holder is None:  # /proc/locks does not say (not Linux): the first release wrote its PID there
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or None
            os.close(fd)
            raise StoreLocked(
                f"the cluster store {self.path} is in use by another Jupyter server "
                f"(pid {holder if holder is not None else 'unknown'}); "
                "stop that server, or give this one another ClusterManager.store_path"
            ) from None
        return fd

    def _open(self) -> sqlite3.Connection:
        if self.read_only is not None:
            return self._open_read_only()
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable across a process crash
            db.execute("PRAGMA foreign_keys=ON")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            self._migrate(db)
            self._read(db)  # every row must decode, or the store counts as unreadable
        except BaseException:
            db.close()
            raise
        return db

    def _open_read_only(self) -> sqlite3.Connection:
        """The store, opened only to be read: its clusters are listed and watched, nothing is written."""
        uri = f"file:{quote(str(self.path))}?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=10)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:  # a WAL store whose -shm cannot be made: read the file as it is
            db = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
        try:
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None or row[0] != str(SCHEMA_VERSION):
                raise StoreUnavailable(
                    f"the cluster store {self.path} is read-only ({self.read_only}) and of schema version "
                    f"{row[0] if row else 'none'}, not {SCHEMA_VERSION}: it cannot be upgraded; make it writable"
                )
            self._read(db)
        except BaseException:
            db.close()
            raise
        return db

    def _reopen_writable(self) -> None:
        """A store opened read-only: lock and open it for writing (OSError while it still cannot be)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        os.close(self._lock_fd)  # a second flock of this process on the file would conflict with the first
        self._lock_fd = fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreLocked(f"the cluster store {self.path} was locked by another process meanwhile") from None
        # SQLite shares one shared-memory mapping per file in a process: the read-only one goes first
        self._db.close()
        reason, self.read_only = self.read_only, None
        try:
            self._db = self._open()
        except BaseException:
            self.read_only = reason
            self._db = self._open_read_only()
            raise
        self.log.warning("the cluster store %s is no longer read-only: opened for writing", self.path)

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Apply the migrations this store has not had, in order, each in one transaction."""
        has_meta = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() if has_meta else None
        if row is None and db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] > 1:
            raise sqlite3.DatabaseError("it has tables but no schema version")
        try:
            version = int(row[0]) if row else 0
        except ValueError:
            raise sqlite3.DatabaseError(f"unreadable schema version {row[0]!r}") from None
        if version > SCHEMA_VERSION:
            raise StoreTooNew(
                f"the cluster store {self.path} has schema version {version}, written by a newer release; "
                f"this server reads versions up to {SCHEMA_VERSION}: upgrade it, or give it another "
                "ClusterManager.store_path"
            )
        for number, what, statements in MIGRATIONS:
            if number <= version:
                continue
            with db:
                db.execute("BEGIN IMMEDIATE")
                for statement in statements:
                    db.execute(statement)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(number),))
            if version:
                self.log.info("the cluster store %s: migrated to schema version %d (%s)", self.path, number, what)
        columns = {r[1] for r in db.execute("PRAGMA table_info(clusters)")}
        missing = [f.name for f in codec.CLUSTER_FIELDS if f.name not in columns]
        if missing:  # a field was declared in record.py without a migration adding its column
            raise RuntimeError(
                f"the store schema lacks the record fields {missing}: add a migration to store.MIGRATIONS"
            )

    def _replace_unreadable(self, error: Exception) -> sqlite3.Connection:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                source.replace(Path(f"{aside}{suffix}"))
        self.moved_aside = aside
        self.salvaged = self._salvage(aside)
        self.log.error(
            "the cluster store %s could not be read (%s); moved it aside to %s and started a new store; "
            "%d cluster record(s) could still be read from it; the others are looked for in their manifests",
            self.path, error, aside, len(self.salvaged),
        )  # fmt: skip
        old_fd, self._lock_fd = self._lock_fd, self._lock()  # the new file at the path
        os.close(old_fd)
        return self._open()

    def _salvage(self, path: Path) -> list[dict[str, Any]]:
        """The cluster records that can still be read from a damaged store, one by one; the rest is skipped."""
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        except sqlite3.Error:
            return []
        db.row_factory = sqlite3.Row
        records = []
        try:
            ids = [row[0] for row in db.execute("SELECT id FROM clusters")]
        except sqlite3.Error as exc:
            self.log.warning("the unreadable store %s: no cluster can be read from it (%s)", path, exc)
            ids = []
        for cluster_id in ids:
            try:
                row = db.execute("SELECT * FROM clusters WHERE id = ?", (cluster_id,)).fetchone()
                records.append(
                    codec.checked({**codec.from_row(row), "workers": self._workers(db, cluster_id), "events": []})
                )
            except (sqlite3.Error, ValueError, TypeError, KeyError) as exc:
                self.log.error("the unreadable store %s: cluster %s cannot be read (%s)", path, cluster_id, exc)
        db.close()
        return records

    # -- reading ---------------------------------------------------------------------------------

    def load(self) -> list[dict[str, Any]]:
        """Every stored cluster record (see :mod:`.record`), with its ``events`` (oldest first)."""
        return self._read(self._db)

    @staticmethod
    def _workers(db: sqlite3.Connection, cluster_id: str) -> list[dict[str, Any]]:
        rows = db.execute("SELECT * FROM workers WHERE cluster_id = ? ORDER BY rowid", (cluster_id,))
        return [codec.worker_from_row(w) for w in rows]

    @classmethod
    def _read(cls, db: sqlite3.Connection) -> list[dict[str, Any]]:
        db.row_factory = sqlite3.Row
        try:
            clusters = []
            for row in db.execute("SELECT * FROM clusters ORDER BY created").fetchall():
                events = db.execute("SELECT event FROM events WHERE cluster_id = ? ORDER BY seq", (row["id"],))
                clusters.append(codec.checked({
                    **codec.from_row(row),
                    "workers": cls._workers(db, row["id"]),
                    "events": [json.loads(e["event"]) for e in events],
                }))  # fmt: skip
            return clusters
        except (ValueError, TypeError, KeyError) as exc:
            raise sqlite3.DatabaseError(f"a stored row does not decode: {exc}") from exc
        finally:
            db.row_factory = None

    # -- writing (one transaction each) ---------------------------------------------------------

    def save(self, record: dict[str, Any], new_events: list[dict[str, Any]]) -> None:
        """Insert or replace one cluster record and its workers, append its new events, and write its manifest."""
        self._check_file()
        columns = [f.name for f in codec.CLUSTER_FIELDS]
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                f"INSERT INTO clusters ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
                f"ON CONFLICT(id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in columns[1:])}",
                codec.to_row(record),
            )
            self._db.execute("DELETE FROM workers WHERE cluster_id = ?", (record["id"],))
            self._db.executemany(
                "INSERT INTO workers (cluster_id, name, worker_group, shape, pid, job_id, process) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [codec.worker_row(record["id"], w) for w in record["workers"]],
            )
            for event in new_events:
                self._append_event(record["id"], event)
            if new_events:
                self._db.execute(
                    "DELETE FROM events WHERE cluster_id = ? AND seq <= "
                    "(SELECT seq FROM events WHERE cluster_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                    (record["id"], record["id"], MAX_EVENTS_PER_CLUSTER),
                )
        try:
            codec.write_manifest(record, self.path)
            self._manifest_failing.discard(record["id"])
        except (OSError, ValueError) as exc:  # the store has it: the manifest is only the fallback
            if record["id"] not in self._manifest_failing:  # once, not at every save
                self._manifest_failing.add(record["id"])
                self.log.warning(
                    "cluster %s: could not write its manifest in %s: %s", record["id"], record["workdir"], exc
                )

    def _append_event(self, cluster_id: str, event: dict[str, Any]) -> None:
        """Append ``event``, or, for an event counted again (``count`` > 1), replace the stored one it repeats."""
        if event.get("count", 1) > 1:
            last = self._db.execute(
                "SELECT seq, event FROM events WHERE cluster_id = ? ORDER BY seq DESC LIMIT 1", (cluster_id,)
            ).fetchone()
            if last is not None and _same_event(json.loads(last[1]), event):
                self._db.execute("UPDATE events SET event = ? WHERE seq = ?", (json.dumps(event), last[0]))
                return
        self._db.execute("INSERT INTO events (cluster_id, event) VALUES (?, ?)", (cluster_id, json.dumps(event)))

    def delete(self, cluster_id: str, workdir: str | Path | None = None) -> None:
        """Forget a cluster (it has been stopped): its manifest, its row, its workers and events."""
        self._check_file()
        if workdir is not None:
            codec.remove_manifest(workdir)
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM clusters WHERE id = ?", (cluster_id,))

    def check(self) -> None:
        """Make a small write (and check the free space), so that a failure shows before anything depends on it."""
        self._check_file()
        disk = os.statvfs(self.path.parent)
        free = disk.f_bavail * disk.f_frsize
        if free < MIN_FREE_BYTES:
            raise OSError(28, f"no space left on the store's file system ({free} bytes free)")
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('headroom', randomblob(?))", (HEADROOM_BYTES,))

    def _check_file(self) -> None:
        """Raise when the store file was deleted or replaced; the next write makes it again."""
        try:
            same = os.path.samestat(os.stat(self.path), os.fstat(self._lock_fd))
        except FileNotFoundError:
            same = False
        if not same:
            raise _Replaced(f"the store file {self.path} was deleted or replaced while the server ran")

    def _recreate(self) -> None:
        """After the store file was deleted or replaced: lock and open the file at the path (made anew)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._lock()
        try:
            db = self._open()
        except BaseException:
            os.close(fd)
            raise
        self._db.close()
        os.close(self._lock_fd)
        self._db, self._lock_fd = db, fd

    # -- the writer thread ---------------------------------------------------------------------

    def save_later(self, record: dict[str, Any], new_events: list[dict[str, Any]]) -> Future:
        """Queue :meth:`save` on the writer thread; the future gives the CPU-seconds the save took on that thread,
        or fails with :class:`StoreUnavailable`."""
        return self._writer.submit(self._cpu_seconds_of, self.save, record, new_events)

    def _cpu_seconds_of(self, operation: Callable, *args: Any) -> float:
        started = time.thread_time()
        self._guarded(operation, *args)
        return time.thread_time() - started

    def delete_later(self, cluster_id: str, workdir: str | Path | None = None) -> Future:
        """Queue :meth:`delete` on the writer thread."""
        return self._writer.submit(self._guarded, self.delete, cluster_id, workdir)

    def check_later(self) -> Future:
        """Queue :meth:`check` on the writer thread (after every write queued before it)."""
        return self._writer.submit(self._guarded, self.check)

    def _guarded(self, operation: Callable, *args: Any) -> None:
        try:
            try:
                if self.read_only is not None:
                    self._reopen_writable()
                operation(*args)
            except _Replaced as exc:
                self.log.error("%s; making it again", exc)
                self._recreate()
                self._set_health(StoreHealth(False, str(exc), _now()))  # so the manager writes every cluster again
                operation(*args)
        except (sqlite3.Error, OSError, ClusterManagerError) as exc:
            message = f"the cluster store {self.path} cannot be written: {exc}"
            if self.read_only is not None:  # still: say so, as at start
                message = f"the cluster store {self.path} cannot be written: it is read-only ({self.read_only})"
            self._set_health(StoreHealth(False, message, self.health.since or _now()))
            raise StoreUnavailable(message) from exc
        self._set_health(StoreHealth())

    def _set_health(self, health: StoreHealth) -> None:
        with self._health_lock:
            before, self.health = self.health, health
        if before.writable == health.writable:
            return
        if health.writable:
            self.log.warning("the cluster store %s can be written again", self.path)
        else:
            self.log.error("%s: new clusters and changes are refused until it can", health.error)
        if self.on_health is not None:
            self.on_health(health)

    def close(self) -> None:
        """Write what is queued, close the database and release the lock."""
        self._writer.shutdown(wait=True)
        self._db.close()
        os.close(self._lock_fd)
        if self._legacy_lock_fd is not None:
            os.close(self._legacy_lock_fd)


class _Replaced(OSError):
    """The store file at the path is not the one this server locked and opened."""


def _same_event(stored: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether ``event`` is ``stored`` counted again (see :meth:`~.events.Event.repeats`)."""
    keys = ("kind", "message", "group", "source", "before", "after", "cause", "asked")
    return all(stored.get(k) == event.get(k) for k in keys) and stored.get("count", 1) < event["count"]
