"""The change feed: every change of the listed clusters, numbered, to each subscriber of the push stream.

A subscriber first gets a snapshot (every cluster and the manager's status), then one message per
change: ``added``, ``changed`` (with the cluster's events since its previous message), ``removed``
and ``status``, each with the next ``seq``. Changes made in one turn of the event loop go out as one
``changed`` message per cluster. No tornado: the web layer's stream handler is one subscriber.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from clustermgr_lab.cluster.managed import ManagedCluster

Listener = Callable[[dict], None]


class ChangeFeed:
    """Numbers the manager's changes and hands each to every subscriber.

    Parameters
    ----------
    clusters : mapping
        The manager's clusters by id (read, never changed here).
    describe : callable
        A cluster as the API shows it.
    status : callable
        The manager's status (what a ``status`` message and the snapshot carry).
    before_send : callable
        Called with a changed cluster before its message goes out (the manager stores it).
    log : logging.Logger
    """

    def __init__(
        self,
        clusters: Mapping[str, ManagedCluster],
        describe: Callable[[ManagedCluster], dict[str, Any]],
        status: Callable[[], dict[str, Any]],
        before_send: Callable[[ManagedCluster], None],
        log: logging.Logger,
    ):
        self._clusters = clusters
        self._describe = describe
        self._status = status
        self._before_send = before_send
        self.log = log
        self._listeners: set[Listener] = set()
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self._events_pushed: dict[str, int] = {}  # per cluster: events appended when its last message went out
        self.seq = 0

    @property
    def subscriber_count(self) -> int:
        """How many listeners (WebSocket subscribers of the stream) are registered."""
        return len(self._listeners)

    def subscribe(self, listener: Listener) -> dict:
        """Register a listener and return the snapshot it starts from."""
        self.flush()
        self._listeners.add(listener)
        clusters = [self._describe(c) for c in self._clusters.values()]
        return {"type": "snapshot", "seq": self.seq, "clusters": clusters, "status": self._status()}

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def cluster_changed(self, cluster: ManagedCluster) -> None:
        """A cluster changed: its message goes out at the end of this turn of the event loop."""
        self._dirty.add(cluster.id)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_event_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Send the ``changed`` messages of the clusters changed since the last flush."""
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        for cluster_id in dirty:
            if cluster_id in self._clusters:
                self._before_send(self._clusters[cluster_id])
                self._emit(self._cluster_message("changed", self._clusters[cluster_id]), flush=False)

    def added(self, cluster: ManagedCluster) -> None:
        self._emit(self._cluster_message("added", cluster))

    def replaced(self, cluster: ManagedCluster) -> None:
        """A cluster started again under its id: its events are sent anew."""
        self._events_pushed[cluster.id] = 0
        self._emit(self._cluster_message("changed", cluster))

    def removed(self, cluster_id: str) -> None:
        self._dirty.discard(cluster_id)
        self._events_pushed.pop(cluster_id, None)
        self._emit({"type": "removed", "id": cluster_id})

    def status_changed(self) -> None:
        self._emit({"type": "status", "status": self._status()})

    def _cluster_message(self, kind: str, cluster: ManagedCluster) -> dict[str, Any]:
        """An ``added`` or ``changed`` stream message: the cluster, and its events since its previous message."""
        message: dict[str, Any] = {"type": kind, "cluster": self._describe(cluster)}
        events = cluster.events.since(self._events_pushed.get(cluster.id, 0))
        self._events_pushed[cluster.id] = cluster.events.appended
        if events:
            message["events"] = [e.to_dict() for e in events]
        return message

    def _emit(self, message: dict, flush: bool = True) -> None:
        if flush:
            self.flush()
        self.seq += 1
        message = {**message, "seq": self.seq}
        for listener in list(self._listeners):
            try:
                listener(message)
            except Exception:
                self.log.exception("stream listener failed")
