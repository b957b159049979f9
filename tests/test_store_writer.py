"""Given the store writer, a burst of changes to a cluster costs a few writes of its newest state, and none is lost."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

from clustermgr_lab.backends.base import BackendContext
from clustermgr_lab.backends.local.backend import LocalBackend
from clustermgr_lab.cluster.managed import ManagedCluster
from clustermgr_lab.domain.spec import parse_spec
from clustermgr_lab.manager.store import ClusterStore
from clustermgr_lab.manager.store_writer import StoreWriter

SPEC = {"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "256 MiB"}]}


class HeldStore(ClusterStore):
    """A real store whose first write waits on the writer thread until the test lets it go; it counts its writes."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.writes = 0
        self.first_write_started = threading.Event()
        self.let_go = threading.Event()

    def save(self, record, new_events):
        self.writes += 1
        if self.writes == 1:
            self.first_write_started.set()
            assert self.let_go.wait(30)
        super().save(record, new_events)


def a_cluster(workdir: Path) -> ManagedCluster:
    workdir.mkdir(parents=True)
    return ManagedCluster(
        "c0ffee", "burst", "local", lambda context: LocalBackend("c0ffee", context), parse_spec(SPEC),
        on_change=lambda c: None, max_workers=8, context=BackendContext(workdir, idle_timeout=600.0),
    )  # fmt: skip


def stored(path: Path) -> dict:
    store = ClusterStore(path)
    try:
        (record,) = store.load()
    finally:
        store.close()
    return record


async def _until(condition, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the writes did not finish"
        await asyncio.sleep(0.01)


async def a_write_held(tmp_path: Path) -> tuple[HeldStore, ManagedCluster, dict, StoreWriter]:
    """Given: a cluster saved once, its write held on the store's writer thread (store, cluster, clusters, writer)."""
    store = HeldStore(tmp_path / "clusters.sqlite3")
    cluster = a_cluster(tmp_path / "work" / "c0ffee")
    clusters = {cluster.id: cluster}
    writer = StoreWriter(store, clusters, lambda health: None, logging.getLogger("test"))
    writer.save(cluster)
    assert await asyncio.to_thread(store.first_write_started.wait, 10)
    return store, cluster, clusters, writer


def test_changes_made_during_a_write_go_out_as_one_write_of_the_newest_state(tmp_path):
    async def scenario() -> HeldStore:
        # Given a cluster whose first write is held on the store's writer thread
        store, cluster, _, writer = await a_write_held(tmp_path)
        # When it changes 100 times while that write is under way
        for n in range(100):
            cluster.error = f"change {n}"
            cluster.events.lifecycle(f"change {n}")
            writer.save(cluster)
        store.let_go.set()
        await _until(lambda: store.writes == 2 and not writer._in_flight)
        await asyncio.sleep(0.2)  # nothing more is queued after it
        await writer.close()
        return store

    store = asyncio.run(scenario())
    # Then the store was written twice: the first snapshot, then the newest state with every event
    assert store.writes == 2
    record = stored(tmp_path / "clusters.sqlite3")
    assert record["error"] == "change 99"
    messages = [event["message"] for event in record["events"]]
    assert [m for m in messages if m.startswith("change ")] == [f"change {n}" for n in range(100)]


def test_what_changed_during_a_write_is_written_when_the_writer_closes(tmp_path):
    async def scenario() -> None:
        # Given a cluster whose first write is held, and a change made during it
        store, cluster, clusters, writer = await a_write_held(tmp_path)
        cluster.error = "the last change"
        writer.save(cluster)
        # When the server stops (its clusters already taken off the list) before that write is done
        clusters.clear()
        threading.Timer(0.3, store.let_go.set).start()
        await writer.close()

    asyncio.run(scenario())
    # Then the store has the last change
    assert stored(tmp_path / "clusters.sqlite3")["error"] == "the last change"


def test_a_cluster_deleted_during_its_write_is_not_written_again(tmp_path):
    async def scenario() -> HeldStore:
        # Given a cluster whose first write is held, and a change made during it
        store, cluster, clusters, writer = await a_write_held(tmp_path)
        cluster.error = "changed"
        writer.save(cluster)
        # When it is deleted before that write is done
        del clusters[cluster.id]
        deleted = writer.delete(cluster.id, None)
        store.let_go.set()
        await asyncio.wrap_future(deleted)
        await asyncio.sleep(0.2)
        await writer.close()
        return store

    store = asyncio.run(scenario())
    # Then it was written once, and the store no longer has it
    assert store.writes == 1
    reopened = ClusterStore(tmp_path / "clusters.sqlite3")
    try:
        assert reopened.load() == []
    finally:
        reopened.close()


class SlowStore(ClusterStore):
    """A real store whose every write costs ``seconds`` more CPU, as a large cluster's does; it notes when each began."""

    def __init__(self, path: Path, seconds: float):
        super().__init__(path)
        self.seconds = seconds
        self.began: list[float] = []

    def save(self, record, new_events):
        self.began.append(time.monotonic())
        spent = time.thread_time() + self.seconds
        while time.thread_time() < spent:  # busy, on this thread's CPU time
            pass
        super().save(record, new_events)


def test_a_cluster_that_keeps_changing_keeps_the_writer_busy_a_quarter_of_the_time_at_most(tmp_path):
    async def scenario() -> tuple[SlowStore, float]:
        # Given a cluster whose every write takes 0.1 CPU-seconds
        store = SlowStore(tmp_path / "clusters.sqlite3", 0.1)
        cluster = a_cluster(tmp_path / "work" / "c0ffee")
        writer = StoreWriter(store, {cluster.id: cluster}, lambda health: None, logging.getLogger("test"))
        # When it changes every 10 ms for 2 s (workers joining one after another)
        started = time.monotonic()
        for n in range(200):
            cluster.error = f"change {n}"
            writer.save(cluster)
            await asyncio.sleep(0.01)
        await _until(lambda: not writer._in_flight)
        elapsed = time.monotonic() - started
        await writer.close()
        return store, elapsed

    store, elapsed = asyncio.run(scenario())
    # Then each write began at least 3 times its CPU cost after the one before ended: busy <= 1/4 of the time
    gaps = [later - earlier for earlier, later in zip(store.began, store.began[1:])]
    assert gaps and min(gaps) >= 0.1 + 3 * 0.1 - 0.02, gaps
    assert len(store.began) <= elapsed / 0.4 + 2
    # And nothing is lost: the newest state is in the store
    assert stored(tmp_path / "clusters.sqlite3")["error"] == "change 199"
