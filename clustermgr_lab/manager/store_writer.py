"""The store writer: what of the clusters goes to the store, when, and what happens while it cannot be written.

Snapshots of clusters (and their new events) are handed to the store's writer thread, at most one per
cluster at a time: changes made while a cluster's write is under way go out as one write of its newest
state once that write is done, so a burst of changes (hundreds of workers joining) costs a few writes,
not one per change. A write's cost grows with the cluster (every worker's row), so the next write of a
cluster still changing waits :data:`WRITE_PACE` times the CPU-seconds its last write took (its record
made in the event loop and its save on the writer thread; at most :data:`MAX_WRITE_PAUSE`): a cluster
of 500 workers joining keeps the writer busy a quarter of a core at most, not all of one (the CPU the
joining workers need), while a small cluster's next write waits a few milliseconds. A failed save
keeps its events for the next one. While the store cannot be written, a write is tried every few
seconds, so that recovery shows by itself; then every cluster is saved again and the deletions that
could not be written are written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path

from clustermgr_lab.cluster.managed import ATTACHED, ManagedCluster
from clustermgr_lab.cluster.record_codec import to_record
from clustermgr_lab.domain.errors import StoreUnavailable
from clustermgr_lab.manager.store import ClusterStore, StoreHealth

STORE_RETRY_SECONDS = 2.0
#: The pause before a cluster's next write, as a multiple of the CPU-seconds its last write took...
WRITE_PACE = 3.0
#: ...and at most this many seconds (what a crash can lose of a changing cluster's newest state).
MAX_WRITE_PAUSE = 1.0


def kept_in_store(cluster: ManagedCluster) -> bool:
    """Whether the store keeps the cluster: every cluster whose processes are ours to stop, and those attached.

    Those a restarted server cannot re-adopt are kept too, so that it says why they ended and
    stops what is left of them; clusters attached by address are attached again. Clusters
    discovered in a kernel are not stored (they leave with their kernel).
    """
    return cluster.backend.capabilities.can_stop or cluster.template == ATTACHED


class StoreWriter:
    """Writes the manager's clusters to its :class:`~.store.ClusterStore`, off the event loop.

    Parameters
    ----------
    store : ClusterStore
    clusters : mapping
        The manager's clusters by id (read, never changed here): saved again once the store recovers.
    on_health : callable
        Called in the event loop when the store's health changes (the manager tells its subscribers).
    log : logging.Logger
    """

    def __init__(
        self,
        store: ClusterStore,
        clusters: Mapping[str, ManagedCluster],
        on_health: Callable[[StoreHealth], None],
        log: logging.Logger,
    ):
        self.store = store
        self._clusters = clusters
        self._on_health = on_health
        self.log = log
        self._events_written: dict[str, int] = {}
        self._unforgotten: dict[str, Path | None] = {}  # deleted clusters the store could not forget yet
        self._in_flight: set[str] = set()  # clusters with a write queued or under way
        self._dirty: dict[str, ManagedCluster] = {}  # changed since: written once their write in flight is done
        self._paced: dict[str, asyncio.TimerHandle] = {}  # clusters whose next write waits (see WRITE_PACE)
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch: asyncio.TimerHandle | None = None
        store.on_health = self._health_changed

    def watch(self) -> None:
        """Once the event loop runs: a store that could not be written from the start is tried every few seconds."""
        self._loop = self._loop or asyncio.get_running_loop()
        if not self.store.health.writable and self._watch is None:
            self._retry()

    def restored(self, cluster: ManagedCluster, written: int | None = None) -> None:
        """A cluster registered from the store: its events up to ``written`` (default: all) are there already."""
        self._events_written[cluster.id] = cluster.events.appended if written is None else written

    def save(self, cluster: ManagedCluster) -> None:
        """Hand a snapshot of the cluster (and its new events) to the store's writer thread, if the store keeps it.

        While a write of the same cluster is queued or under way, the cluster is only marked: its newest
        state is written once that write is done.
        """
        if not kept_in_store(cluster):
            return
        if cluster.id in self._in_flight and not self._closing:
            self._dirty[cluster.id] = cluster
            return
        self._write(cluster)

    def _write(self, cluster: ManagedCluster) -> None:
        written = self._events_written.get(cluster.id, 0)
        events = [e.to_dict() for e in cluster.events.since(written)]
        self._events_written[cluster.id] = cluster.events.appended
        self._in_flight.add(cluster.id)
        started = time.thread_time()
        record = to_record(cluster)
        record_cost = time.thread_time() - started
        future = self.store.save_later(record, events)
        self._follow(
            future,
            lambda: self._events_unwritten(cluster.id, written),
            lambda: self._written(cluster.id, record_cost + (0.0 if future.exception() else future.result())),
        )

    def _written(self, cluster_id: str, cost: float) -> None:
        """In the event loop, once a cluster's write (of ``cost`` CPU-seconds) is done or failed: write what changed
        meanwhile, paced."""
        pause = min(MAX_WRITE_PAUSE, WRITE_PACE * cost)
        if cluster_id in self._dirty and not self._closing and pause >= 0.005:
            self._paced[cluster_id] = self._loop.call_later(pause, self._write_dirty, cluster_id)
            return  # still "in flight": changes meanwhile only mark it
        self._write_dirty(cluster_id)

    def _write_dirty(self, cluster_id: str) -> None:
        self._paced.pop(cluster_id, None)
        self._in_flight.discard(cluster_id)
        cluster = self._dirty.pop(cluster_id, None)
        if cluster is not None and not self._closing and self._clusters.get(cluster_id) is cluster:
            self._write(cluster)

    def delete(self, cluster_id: str, workdir: Path | None) -> Future:
        """Have the store forget a cluster; if it cannot now, it does once it can be written again.

        Returns the queued deletion: done once it and every write queued before it are.
        """
        self._events_written.pop(cluster_id, None)
        self._unforgotten.pop(cluster_id, None)
        self._dirty.pop(cluster_id, None)
        if (paced := self._paced.pop(cluster_id, None)) is not None:
            paced.cancel()
            self._in_flight.discard(cluster_id)
        future = self.store.delete_later(cluster_id, workdir)
        self._follow(future, lambda: self._unforgotten.setdefault(cluster_id, workdir))
        return future

    def require_writable(self, action: str) -> None:
        """Refuse ``action`` (:class:`StoreUnavailable`) while the store is known not to be writable."""
        health = self.store.health
        if not health.writable:
            raise StoreUnavailable(f"cannot {action} now: {health.error}; try again once it can be written")

    async def ensure_writable(self) -> None:
        """Check with a real write (on the store's writer thread) that the store can be written now.

        Raises
        ------
        StoreUnavailable
            When it cannot: the request fails before anything is started.
        """
        self._loop = self._loop or asyncio.get_running_loop()
        await asyncio.wrap_future(self.store.check_later())

    async def close(self) -> None:
        """Stop watching, write what is still marked changed, then release the store once the queued writes are done."""
        if self._watch is not None:
            self._watch.cancel()
        self._closing = True
        for paced in self._paced.values():
            paced.cancel()
        self._paced.clear()
        for cluster in list(self._dirty.values()):  # queued after the writes in flight: one writer thread, in order
            self._write(cluster)
        self._dirty.clear()
        await asyncio.get_running_loop().run_in_executor(None, self.store.close)

    def _events_unwritten(self, cluster_id: str, written: int) -> None:
        """A save failed: its events go with the next save (e.g. once the store can be written again)."""
        if cluster_id in self._events_written:
            self._events_written[cluster_id] = min(self._events_written[cluster_id], written)

    def _follow(
        self,
        future: Future,
        on_failure: Callable[[], None] | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        """Follow a queued store write; a failure is logged by the store and shown by the manager's status.

        ``on_failure`` and then ``on_done`` are called in the event loop.
        """
        self._loop = self._loop or asyncio.get_event_loop()

        def written(future: Future) -> None:
            if future.exception() is not None and on_failure is not None:
                self._call_in_loop(on_failure)
            if on_done is not None:
                self._call_in_loop(on_done)

        future.add_done_callback(written)

    def _call_in_loop(self, callback: Callable[[], None]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(callback)

    def _health_changed(self, health: StoreHealth) -> None:
        """On the writer thread: hand the change to the event loop."""
        self._call_in_loop(lambda: self._health_in_loop(health))

    def _health_in_loop(self, health: StoreHealth) -> None:
        self._on_health(health)
        if health.writable:
            for cluster in list(self._clusters.values()):  # what could not be written meanwhile
                self.save(cluster)
            for cluster_id, workdir in list(self._unforgotten.items()):
                if cluster_id not in self._clusters:
                    self.delete(cluster_id, workdir)
        elif self._watch is None:
            self._retry()

    def _retry(self) -> None:
        """While the store cannot be written, try a write every few seconds, so that recovery shows by itself."""
        self._watch = None
        if self.store.health.writable:
            return
        self._follow(self.store.check_later())
        self._watch = self._loop.call_later(STORE_RETRY_SECONDS, self._retry)
