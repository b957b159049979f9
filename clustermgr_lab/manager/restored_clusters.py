"""Re-adopting the clusters a previous server left: registered as stored, then re-adopted concurrently.

:class:`RestoredClusters` is a part of :class:`~.cluster_manager.ClusterManager` (a mixin): it turns
each stored record into a registered :class:`~clustermgr_lab.cluster.managed.ManagedCluster` with the
manager's own machinery, re-adopts them all at start-up, and stops what still runs of a record this
server cannot restore (see :mod:`.stored_clusters`).
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from clustermgr_lab.backends import ALL_BACKENDS, BACKENDS, Backend
from clustermgr_lab.cluster import record_codec
from clustermgr_lab.cluster.managed import FAILED, STOPPING, ManagedCluster
from clustermgr_lab.manager.stored_clusters import (
    restored_spec,
    stop_leftovers,
    stored_backend_options,
    stored_credentials,
)


class RestoredClusters:
    """The cluster manager's re-adoption of stored clusters (see :class:`~.cluster_manager.ClusterManager`)."""

    def _restore(self, record: dict) -> ManagedCluster:
        """A stored cluster, registered as it was stored; :meth:`readopt_all` then re-adopts it."""
        backend_class = ALL_BACKENDS.get(record["backend"])
        if backend_class is None:  # a backend this server no longer has: listed as failed
            record = {**record, "status": FAILED, "error": f"unknown backend {record['backend']!r}"}
            backend_class = BACKENDS["local"]
        # An attached cluster's backend is its scheduler's address; it is re-attached if that scheduler (same id) answers.
        attaches = backend_class.attaches
        extra = {"address": record["scheduler_address"]} if attaches else {}
        cluster_id = record["id"]
        cluster = self._new_cluster(
            cluster_id,
            record["name"],
            record["template"],
            self._backend_factory(
                backend_class, cluster_id, options=stored_backend_options(self._templates, record), **extra
            ),
            restored_spec(backend_class, record),
            self._context(
                cluster_id,
                Path(record["workdir"]),
                record.get("idle_timeout"),
                stored_credentials(record),
                record["name"],
            ),
        )
        record_codec.restore(cluster, record)
        self.writer.restored(cluster)
        self._clusters[cluster.id] = cluster
        return cluster

    async def start_links_for_readoption(self) -> bool:
        """Spawn the scheduler links' process when stored clusters wait for re-adoption; whether any do.

        Awaited at the event loop's first turn, before the rest of the start-up work: the process's import of
        distributed (about half a second) then overlaps that work instead of following it. Returns once the
        process is spawned; a failure is logged, and :meth:`readopt_all` tries again.
        """
        if not self._stored:
            return False
        try:
            await self.link_host.start()
        except Exception as exc:
            self.log.warning("clustermgr_lab: the scheduler links' process did not start at once: %s", exc)
        return True

    async def readopt_all(self) -> None:
        """Re-adopt every stored cluster (at start-up, once the event loop runs); concurrently."""
        self.writer.watch()  # a store read-only from the start: tried until it can be written
        stored, self._stored = self._stored, []
        unrestorable, self._unrestorable = self._unrestorable, []
        if stored:  # each re-adoption asks its scheduler through the links' process: started once, for all
            self.link_host.warm_up()

        async def readopt(cluster: ManagedCluster, record: dict) -> None:
            try:
                await cluster.readopt(record)
            except Exception:
                self.log.exception("cluster %s: re-adoption failed", cluster.id)
                return
            if record["status"] == STOPPING:  # was being deleted when the last server stopped
                await self._forget_and_remove(cluster)
            else:
                self.log.info("cluster %s (%s): %s", cluster.id, cluster.name, cluster.status)

        leftovers = [stop_leftovers(r, partial(self._leftover_backend, r), self.log) for r in unrestorable]
        await asyncio.gather(*(readopt(c, r) for c, r in stored), *leftovers)

    def _leftover_backend(self, record: dict) -> Backend:
        """A backend for what may still run of a cluster that cannot be restored (to stop it)."""
        make = self._backend_factory(BACKENDS[record["backend"]], record["id"])
        return make(self._context(record["id"], Path(record["workdir"]), None, stored_credentials(record)))
