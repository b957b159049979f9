"""Given real Jupyter server processes, a cluster store that cannot be written refuses new work (503) before
anything starts and recovers by itself; a store deleted while the server runs is made again; and the store's
lock cannot be taken by deleting a file.

The full store is a small tmpfs mounted for the test (the tests run as root, as in CI). A file system cannot be
remounted read-only while the server has its store open for writing, so "read-only while running" is not tested
separately: to SQLite and to the server it is the same failed write as a full disk. A store read-only at start is:
the tmpfs is remounted read-only between two servers (root cannot write it either).
"""

from __future__ import annotations

import errno
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from clustermgr_lab.backends.local.standby import MARKER as STANDBY_MARKER
from clustermgr_lab.client import ClusterManagerAPIError

from .helpers import validate_response, validate_stream_message
from .server_process import (
    JupyterServer,
    eventually,
    kill_leftovers,
    orphans,
    stored_cluster_ids,
    stored_workers,
)

ONE = {"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (unmounted after the test)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(mount)], check=True, capture_output=True
    )
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True, capture_output=True)


@pytest.fixture
def place(tmp_path):
    class Place:
        sessions: set[int] = set()
        servers: list[JupyterServer] = []
        workdir = tmp_path / "work"

        def server(self, store: Path) -> JupyterServer:
            self.servers.append(JupyterServer(tmp_path, store, self.workdir).start())
            return self.servers[-1]

        def remember(self, store: Path, cluster_id: str) -> None:
            self.sessions.update(r["pid"] for r in stored_workers(store, cluster_id).values() if r and "pid" in r)

    place = Place()
    yield place
    for server in place.servers:
        if server.process.poll() is None:
            server.stop(signal.SIGKILL)
    kill_leftovers(place.sessions, str(place.workdir))


def status_of(server: JupyterServer) -> dict:
    response = requests.get(
        f"{server.url}clustermgr/api/status", headers={"Authorization": f"token {server.token}"}, timeout=30
    )
    data = response.json()
    validate_response("GET", ("status",), response.status_code, response.headers.get("Content-Type"), data)
    return data


def refused(call) -> ClusterManagerAPIError:
    with pytest.raises(ClusterManagerAPIError) as caught:
        call()
    assert caught.value.status == 503 and caught.value.code == "store_unavailable", caught.value
    return caught.value


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until its file system is full."""
    filler = folder / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def work_folders(workdir: Path) -> list[str]:
    """What the workdir holds, but for the folders of standby schedulers: the server refills those on its own."""
    return sorted(p.name for p in workdir.iterdir() if not (p / STANDBY_MARKER).exists())


def running_with(n: int):
    return lambda c: c["status"] == "running" and c["workers"]["running"] == n and c["workers"]["requested"] == n


def test_a_full_store_refuses_new_work_before_anything_starts_and_recovers(place, small_disk):
    # Given a server whose store is on a small disk, with one running cluster of one worker
    store = small_disk / "clusters.sqlite3"
    server = place.server(store)
    client = server.client()
    kept = client.create(name="kept", spec=ONE)
    doomed = client.create(name="doomed", spec={"groups": [{**ONE["groups"][0], "count": 0}]})
    client.wait(kept["id"], running_with(1), timeout=120)
    client.wait(doomed["id"], running_with(0), timeout=120)
    place.remember(store, kept["id"])
    assert status_of(server) == {"store": {"writable": True, "error": None}}
    folders = work_folders(place.workdir)
    stream = client.watch(timeout=30)
    snapshot = next(stream)
    validate_stream_message(snapshot)
    assert snapshot["status"] == {"store": {"writable": True, "error": None}}

    # When the disk is full
    filler = fill(small_disk)
    # Then creating a cluster is refused with a 503 that says why, and nothing is created or started
    error = refused(lambda: client.create(name="refused", spec=ONE))
    assert str(store) in error.message and "space" in error.message
    assert sorted(c["name"] for c in client.list()) == ["doomed", "kept"]
    assert work_folders(place.workdir) == folders
    # And scaling is refused too, and the cluster keeps its plan and its worker
    refused(lambda: client.scale(kept["id"], 2))
    time.sleep(1)  # what a started worker would take to be requested
    assert running_with(1)(client.get(kept["id"])) and client.get(kept["id"])["spec"]["groups"][0]["count"] == 1
    # And the status endpoint, the stream and the log say so
    status = status_of(server)["store"]
    assert status["writable"] is False and str(store) in status["error"]
    pushed = next(m for m in stream if m["type"] == "status")
    validate_stream_message(pushed)
    assert pushed["status"]["store"]["writable"] is False
    assert "cannot be written" in server.log_text()
    # And deleting a cluster still works (it frees resources), though the store cannot forget it yet
    client.delete(doomed["id"], wait=True, timeout=60)
    assert doomed["id"] in stored_cluster_ids(store)

    # When the disk has room again
    filler.unlink()
    # Then the server notices by itself, and takes new clusters again
    eventually(lambda: status_of(server)["store"]["writable"], 30, "the store to be writable again")
    assert next(m for m in stream if m["type"] == "status")["status"]["store"]["writable"] is True
    stream.close()
    assert "can be written again" in server.log_text()
    # And the store has forgotten the cluster deleted meanwhile
    eventually(lambda: doomed["id"] not in stored_cluster_ids(store), 30, "the deleted cluster to leave the store")
    after = client.create(name="after", spec=ONE)
    client.wait(after["id"], running_with(1), timeout=120)
    place.remember(store, after["id"])

    # When the cluster is scaled while the store can be written, then it is
    client.scale(kept["id"], 2)
    client.wait(kept["id"], running_with(2), timeout=120)
    place.remember(store, kept["id"])

    # And what was written meanwhile is all in the store: a restarted server re-adopts both, as they are
    server.stop(signal.SIGKILL)
    client = place.server(store).client()
    client.wait(kept["id"], running_with(2), timeout=90)
    client.wait(after["id"], running_with(1), timeout=90)
    for cluster_id in (kept["id"], after["id"]):
        client.delete(cluster_id, wait=True, timeout=60)
    assert eventually(lambda: not orphans(place.sessions, str(place.workdir)), 30, "no process left")


def test_a_store_deleted_while_the_server_runs_is_made_again_with_every_cluster(place, tmp_path):
    # Given a server with a running cluster
    store = tmp_path / "store" / "clusters.sqlite3"
    server = place.server(store)
    client = server.client()
    before = client.create(name="before", spec=ONE)
    client.wait(before["id"], running_with(1), timeout=120)
    place.remember(store, before["id"])

    # When its store file is deleted while it runs, and a cluster is created after
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    after = client.create(name="after", spec=ONE)
    client.wait(after["id"], running_with(1), timeout=120)
    # Then the log says the store was deleted, and the store is made again with both clusters
    assert "was deleted or replaced" in server.log_text()
    eventually(
        lambda: sorted(stored_cluster_ids(store)) == sorted([before["id"], after["id"]]), 30, "both clusters stored"
    )
    place.remember(store, after["id"])

    # When the server is killed and another starts on the same store, then both are re-adopted
    server.stop(signal.SIGKILL)
    client = place.server(store).client()
    for cluster in (before, after):
        client.wait(cluster["id"], running_with(1), timeout=90)
        client.delete(cluster["id"], wait=True, timeout=60)
    assert eventually(lambda: not orphans(place.sessions, str(place.workdir)), 30, "no process left")


def test_deleting_the_lock_file_does_not_let_a_second_server_manage_the_store(place, tmp_path):
    # Given a server on a store
    store = tmp_path / "store" / "clusters.sqlite3"
    first = place.server(store)
    # When every other file next to the store is deleted (a lock file, as the released server kept, included)
    for path in store.parent.iterdir():
        if path != store and not path.name.startswith(store.name + "-"):
            path.unlink()
    # And a second server starts on the same store
    second = place.server(store)
    # Then it does not serve clusters, and its log names the server that holds the store
    with pytest.raises(ClusterManagerAPIError):
        second.client().list()
    assert f"is in use by another Jupyter server (pid {first.process.pid})" in second.log_text()
    # And the first still does
    assert first.client().list() == []


def test_a_store_read_only_at_start_lists_and_watches_refuses_changes_and_recovers(place, small_disk):
    # Given a server whose store (on its own file system) records one running cluster of one worker
    store = small_disk / "clusters.sqlite3"
    server = place.server(store)
    client = server.client()
    kept = client.create(name="kept", spec=ONE)
    client.wait(kept["id"], running_with(1), timeout=120)
    place.remember(store, kept["id"])
    server.stop(signal.SIGKILL)  # its cluster keeps running
    # And that file system is read-only when the next server starts (root cannot write it either)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True, capture_output=True)
    with pytest.raises(OSError) as caught:
        (small_disk / "probe").write_text("x")
    assert caught.value.errno == errno.EROFS

    # When a server starts on it
    server = place.server(store)
    client = server.client()
    # Then the extension is loaded: it lists the cluster and watches it (re-adopted, with its worker)
    assert client.wait(kept["id"], running_with(1), timeout=90)["name"] == "kept"
    # And its status says the store cannot be written, and why
    status = status_of(server)["store"]
    assert status["writable"] is False and str(store) in status["error"] and "read-only" in status["error"], status
    stream = client.watch(timeout=30)
    snapshot = next(stream)
    validate_stream_message(snapshot)
    assert snapshot["status"]["store"]["writable"] is False
    # And new clusters and changes are refused with a 503 that says why, and nothing starts
    error = refused(lambda: client.create(name="refused", spec=ONE))
    assert str(store) in error.message and "read-only" in error.message, error.message
    refused(lambda: client.scale(kept["id"], 2))
    assert [c["name"] for c in client.list()] == ["kept"]
    assert "read-only" in server.log_text()

    # When its file system can be written again
    subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True, capture_output=True)
    # Then the server notices by itself, and takes changes again
    eventually(lambda: status_of(server)["store"]["writable"], 30, "the store to be writable again")
    assert next(m for m in stream if m["type"] == "status")["status"]["store"]["writable"] is True
    stream.close()
    client.scale(kept["id"], 2)
    client.wait(kept["id"], running_with(2), timeout=120)
    place.remember(store, kept["id"])
    client.delete(kept["id"], wait=True, timeout=60)
    assert eventually(lambda: kept["id"] not in stored_cluster_ids(store), 30, "the store to forget it")
    assert eventually(lambda: not orphans(place.sessions, str(place.workdir)), 30, "no process left")
