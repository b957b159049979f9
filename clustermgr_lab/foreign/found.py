"""Clusters found on the resources templates name (a gateway's): listed by themselves, and dropped once they end there.

Every ``interval`` seconds while someone uses the server (an API request within ``watch_grace`` seconds, or a
sidebar's push stream open: :mod:`~clustermgr_lab.manager.attention`), each template's backend is asked for the clusters this user runs on its
resource (:meth:`~clustermgr_lab.backends.base.Backend.find_clusters`: a gateway's running clusters,
made from the sidebar or with ``Gateway().new_cluster()`` in a notebook). One that this server does not
list and that was there at the previous round too (so that a cluster being created here, whose address
is not known yet, is never listed twice) is listed with the template's backend. A cluster of such a
template that has ended and no longer runs there leaves the list. The same rounds keep the templates'
availability and user options fresh (:meth:`~clustermgr_lab.manager.cluster_manager.ClusterManager.probe_templates`).
"""

from __future__ import annotations

import asyncio

from traitlets import Float
from traitlets.config import LoggingConfigurable

from clustermgr_lab.backends.base import Backend
from clustermgr_lab.cluster.managed import FAILED, RUNNING, STOPPED
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.errors import ClusterManagerError
from clustermgr_lab.manager.cluster_manager import ClusterManager


class FoundClusters(LoggingConfigurable):
    """Lists the clusters found on templates' resources, and lets go of those that ended there."""

    interval = Float(2.0, config=True, help="Seconds between two rounds of asking the templates' resources.")
    watch_grace = Float(
        60.0,
        config=True,
        help="Seconds after the last request to the extension's API that rounds go on (and always while a sidebar's "
        "push stream is open): a server nobody uses does not ask its templates' resources.",
    )
    timeout = Float(5.0, config=True, help="Seconds one resource gets to list its clusters.")

    def __init__(self, manager: ClusterManager, **kwargs):
        super().__init__(**kwargs)
        self.manager = manager
        self._seen: dict[str, set[str]] = {}  # template -> addresses found at the previous round
        self._ever: set[str] = set()  # every address found so far
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Ask the templates' resources every ``interval`` seconds; not at all when no template's backend can
        find clusters or be probed (e.g. only local templates): an idle server then has no timer here."""
        if any(_asks_its_resource(backend_class) for _, backend_class, _ in self.manager.found_sources()):
            self._task = asyncio.ensure_future(self._run())
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:  # never silently: nothing is found from now on
            self.log.error("clustermgr_lab: asking the templates' resources stopped", exc_info=task.exception())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def _run(self) -> None:
        while True:
            await self.manager.attention.until_watched(self.watch_grace)
            await self.manager.probe_templates()
            for template, backend_class, options in self.manager.found_sources():
                try:
                    found = await backend_class.find_clusters(options, self.timeout, helper=self.manager.link_host)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the resource is down: its template says so (probe); nothing changes
                    self.log.debug("template %s: no clusters found: %s", template, exc)
                    continue
                if found is not None:
                    self._apply(template, set(found))
            await asyncio.sleep(self.interval)

    def _apply(self, template: str, found: set[str]) -> None:
        clusters = self.manager.clusters()
        listed = {c.backend.address for c in clusters} | {c.endpoint.address for c in clusters if c.endpoint}
        before = self._seen.get(template, set())
        for address in sorted(found & before - listed):
            try:
                self.manager.list_found(template, address)
            except ClusterManagerError as exc:  # e.g. the server lists as many clusters as it allows
                self.log.warning("template %s: cannot list the cluster found at %s: %s", template, address, exc)
        self._seen[template] = found
        self._ever |= found
        for cluster in clusters:
            address = cluster.backend.address
            if cluster.template != template or not address or address in found:
                continue
            # It ended on the resource (stopped there, by its user or the resource): it leaves the list. One that
            # runs here must have been found there once, then missed twice in a row (a listing made as it started
            # is no reason).
            missed = address in self._ever and address not in before
            if cluster.lifecycle in (STOPPED, FAILED) or (cluster.lifecycle == RUNNING and missed):
                self.log.info(
                    "cluster %s (%s) no longer runs at %s: it leaves the list", cluster.id, cluster.name, address
                )
                self.manager.delete(cluster.id)


def _asks_its_resource(backend_class: type[Backend]) -> bool:
    """True when the backend finds clusters on, or probes, the resource its templates name (not the defaults)."""
    finds, probes = backend_class.find_clusters, backend_class.probe
    return finds.__func__ is not Backend.find_clusters.__func__ or probes.__func__ is not Backend.probe.__func__
