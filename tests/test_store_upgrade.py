"""Given the versioned store, every field of a cluster record survives it, and a store of the released
schema (version 1, ``tests/fixtures/store-v1.sql``) is migrated in place with every cluster re-adopted."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from pathlib import Path

import psutil
import pytest

from clustermgr_lab.backends.base import BackendContext, SchedulerEndpoint
from clustermgr_lab.backends.local.backend import LocalBackend, TrackedProcess, scheduler_command, worker_command
from clustermgr_lab.cluster.managed import ManagedCluster, WorkerRecord, shape_of
from clustermgr_lab.cluster.record_codec import restore, to_record
from clustermgr_lab.domain import record as codec
from clustermgr_lab.domain.adaptive import parse_adapt
from clustermgr_lab.domain.spec import parse_spec
from clustermgr_lab.manager.store import SCHEMA_VERSION, ClusterStore

from .helpers import subprocess_env
from .server_process import (
    JupyterServer,
    eventually,
    kill_leftovers,
    orphans,
    same_process,
    stored_workers,
)

FIXTURE = Path(__file__).parent / "fixtures" / "store-v1.sql"
SPEC = {"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "256 MiB"}]}


def a_cluster_with_every_field_set(workdir: Path) -> ManagedCluster:
    """A cluster whose record has a value other than the default in every field."""
    spec = parse_spec(SPEC)
    cluster = ManagedCluster(
        "c0ffee", "every field", "local", lambda context: LocalBackend("c0ffee", context), spec,
        on_change=lambda c: None, max_workers=8, context=BackendContext(workdir, idle_timeout=600.0),
    )  # fmt: skip
    backend = cluster.backend
    cluster.error = "a remembered error"
    cluster.options = {"walltime": "00:42:00", "queue": "debug"}
    cluster.adapt = parse_adapt({"minimum": 1, "maximum": 3}, spec, max_workers=8)
    cluster.endpoint = SchedulerEndpoint("tcp://127.0.0.1:1234", "127.0.0.1:8787", "Scheduler-abc")
    backend.processes._processes["scheduler"] = TrackedProcess(1, 1.5)
    backend.processes._processes["default-1"] = TrackedProcess(2, 2.5)
    cluster.reconciler.workers["default-1"] = WorkerRecord("default-1", "default", shape_of(spec.groups[0]))
    return cluster


def test_every_field_of_a_record_survives_a_store_round_trip_and_its_manifest(tmp_path):
    # Given a cluster whose record sets every field (none left at its default)
    workdir = tmp_path / "work" / "c0ffee"
    workdir.mkdir(parents=True)
    written = to_record(a_cluster_with_every_field_set(workdir))
    assert set(written) == set(codec.RECORD_FIELDS)
    unset = [key for key, value in written.items() if value in (None, {}, [], "")]
    assert unset == [], (
        f"set these fields in a_cluster_with_every_field_set, so that the round trip tests them: {unset}"
    )
    # When it is saved in a store, and the store is opened again
    path = tmp_path / "clusters.sqlite3"
    store = ClusterStore(path)
    store.save(written, [])
    store.close()
    store = ClusterStore(path)
    (read,) = store.load()
    store.close()
    # Then every field reads back as written (the chosen options included)
    assert {k: v for k, v in read.items() if k != "events"} == written
    # And the manifest next to its logs says the same, for the same store
    (from_manifest,) = codec.read_manifests(tmp_path / "work", path)
    assert {k: v for k, v in from_manifest.items() if k != "events"} == written
    # And a cluster restored from it gives the same record again
    again = ManagedCluster("c0ffee", "every field", "local", lambda context: LocalBackend("c0ffee", context),
                           parse_spec(read["spec"]), on_change=lambda c: None, max_workers=8,
                           context=BackendContext(workdir, idle_timeout=read["idle_timeout"]))  # fmt: skip
    restore(again, read)
    restored = to_record(again)
    assert restored["options"] == written["options"] and restored["adapt"] == written["adapt"]


def _start(command: list[str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=subprocess_env(), start_new_session=True
        )


def _process_record(process: subprocess.Popen) -> dict:
    return {"pid": process.pid, "create_time": psutil.Process(process.pid).create_time()}


@pytest.fixture
def released_store(tmp_path):
    """The fixture store of schema version 1, made to describe real processes started here as the released
    server starts them (a scheduler and its workers per cluster), so that they can be re-adopted."""
    store = tmp_path / "store" / "clusters.sqlite3"
    workdir = tmp_path / "work"
    store.parent.mkdir()
    db = sqlite3.connect(store)
    db.executescript(FIXTURE.read_text())
    processes: list[subprocess.Popen] = []
    clusters = {}
    try:
        rows = db.execute("SELECT id, spec, idle_timeout FROM clusters").fetchall()
        for cluster_id, spec, idle_timeout in rows:
            folder = workdir / cluster_id
            folder.mkdir(parents=True)
            scheduler = _start(
                scheduler_command(folder / "scheduler.json", idle_timeout=idle_timeout), folder / "scheduler.log"
            )
            processes.append(scheduler)
            info = eventually(
                lambda folder=folder: _scheduler_file(folder / "scheduler.json"), 60, "the scheduler file"
            )
            group = parse_spec(json.loads(spec)).groups[0]
            workers = {}
            for (name,) in db.execute("SELECT name FROM workers WHERE cluster_id = ?", (cluster_id,)).fetchall():
                worker = _start(worker_command(info["address"], group, name), folder / f"{name}.log")
                processes.append(worker)
                workers[name] = _process_record(worker)
            # The released schema's own columns, rewritten to name these processes
            db.execute(
                "UPDATE clusters SET scheduler_address = ?, scheduler_id = ?, dashboard_address = ?, workdir = ?, backend_state = ? WHERE id = ?",
                (info["address"], info["id"], f"127.0.0.1:{info['services']['dashboard']}", str(folder),
                 json.dumps({"scheduler": _process_record(scheduler)}), cluster_id),
            )  # fmt: skip
            for name, process in workers.items():
                db.execute(
                    "UPDATE workers SET pid = ?, process = ? WHERE cluster_id = ? AND name = ?",
                    (process["pid"], json.dumps(process), cluster_id, name),
                )
            clusters[cluster_id] = {"scheduler": _process_record(scheduler), **workers}
        db.commit()
        db.close()
        for cluster_id, records in clusters.items():
            eventually(
                lambda c=cluster_id, n=len(records) - 1: _workers_connected(workdir / c, n),  # noqa: B008 (bound per loop turn)
                90,
                "the workers to connect",
            )
        yield store, workdir, clusters
    finally:
        db.close()
        kill_leftovers({p.pid for p in processes}, str(workdir))
        for process in processes:
            process.wait(10)


def _scheduler_file(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _workers_connected(folder: Path, n: int) -> bool:
    log = (folder / "scheduler.log").read_text(errors="replace")
    return log.count("Register worker") >= n


def test_a_store_of_the_released_schema_is_migrated_in_place_and_every_cluster_re_adopted(tmp_path, released_store):
    # Given a store written by the released server (schema version 1, no options column),
    # describing two running clusters whose processes run
    store, workdir, processes = released_store
    assert sqlite3.connect(store).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    # When this release's server starts on it
    server = JupyterServer(tmp_path, store, workdir).start()
    sessions = {p["pid"] for records in processes.values() for p in records.values()}
    try:
        client = server.client()
        # Then every cluster is re-adopted, with the same processes, counted and not started again
        by_name = {}
        for cluster_id, records in processes.items():
            workers = len(records) - 1
            cluster = client.wait(
                cluster_id, lambda c, n=workers: c["status"] == "running" and c["workers"]["running"] == n, timeout=90
            )
            by_name[cluster["name"]] = cluster
            assert stored_workers(store, cluster_id) == records
            assert all(same_process(p) for p in records.values())
        assert set(by_name) == {"adaptive", "plain"}
        # And what the released server stored is kept: adaptive settings, idle timeout, spec
        assert by_name["adaptive"]["adapt"]["groups"] == [
            {"group": "default", "minimum": 2, "maximum": 3, "unit": "workers"}
        ]
        assert by_name["adaptive"]["idle_timeout"] == 3600 and by_name["plain"]["spec"]["groups"][0]["count"] == 1
        # And the store was migrated in place (same file, nothing moved aside), saying so in the log
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert "options" in {row[1] for row in db.execute("PRAGMA table_info(clusters)")}
        db.close()
        assert not list(store.parent.glob("*.unreadable-*"))
        assert f"migrated to schema version {SCHEMA_VERSION}" in server.log_text()

        # When the plain cluster is scaled up
        plain = by_name["plain"]
        client.scale(plain["id"], 2)
        # Then a new worker starts next to the re-adopted one, and is recorded
        client.wait(plain["id"], lambda c: c["status"] == "running" and c["workers"]["running"] == 2, timeout=90)
        recorded = eventually(
            lambda: r if len(r := stored_workers(store, plain["id"])) == 3 else None, 30, "the new worker's record"
        )
        sessions.update(r["pid"] for r in recorded.values())

        # When both are deleted, then nothing of them is left running
        for cluster in by_name.values():
            client.delete(cluster["id"], wait=True, timeout=60)
        assert eventually(lambda: not orphans(sessions, str(workdir)), 30, "no process left")
    finally:
        server.stop(signal.SIGKILL)
        kill_leftovers(sessions, str(workdir))
