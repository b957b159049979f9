"""Listing clusters this server did not start: attached by address, discovered in kernels, found on a resource.

:class:`ForeignClusters` is a part of :class:`~.cluster_manager.ClusterManager` (a mixin): it lists
such a cluster with the manager's own machinery (naming, limits, the store, the change feed); its
backend observes the cluster's scheduler and starts or stops nothing that is not its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from clustermgr_lab.backends import BACKENDS, BackendContext, ExternalBackend
from clustermgr_lab.cluster.managed import ATTACHED, DISCOVERED, FAILED, STOPPED, ManagedCluster
from clustermgr_lab.common.security import ClusterCredentials, private_folder
from clustermgr_lab.domain.errors import Conflict
from clustermgr_lab.domain.spec import WorkerSpec


class ForeignClusters:
    """The cluster manager's listing of clusters started elsewhere (see :class:`~.cluster_manager.ClusterManager`)."""

    def attach(
        self,
        address: str,
        name: str | None = None,
        origin: str = ATTACHED,
        tls: ClusterCredentials | None = None,
        closed_by_owner: Callable[[], Awaitable[str | None]] | None = None,
    ) -> ManagedCluster:
        """List a cluster started elsewhere (backend ``external``); returns it ``pending`` while its scheduler is reached.

        Its workers are observed, never started or stopped; deleting it detaches.
        ``origin`` (``"attached"`` or ``"discovered"``) becomes its ``template``; ``tls``: the certificate
        files that reach a ``tls://`` scheduler; ``closed_by_owner``: asked once the scheduler is gone, how
        whoever started it closed it (see :class:`~clustermgr_lab.backends.base.BackendContext`).
        """
        for other in self._clusters.values():
            if other.template == DISCOVERED and other.lifecycle in (STOPPED, FAILED):
                continue  # a notebook's cluster that ended: its scheduler is gone, its port may be another's now
            if address in (other.backend.address, other.endpoint and other.endpoint.address):
                raise Conflict(f"the scheduler at {address} is listed already, as {other.name!r}", "attach")
        if name is not None:
            self._require_unique_name(name)
        else:
            name = self.unique_name(f"{origin.capitalize()} {address.split('://', 1)[-1]}")
        self._check_cluster_limit()
        cluster_id = uuid.uuid4().hex[:8]
        cluster = self._new_cluster(
            cluster_id,
            name,
            origin,
            self._backend_factory(ExternalBackend, cluster_id, address=address),
            WorkerSpec(()),
            BackendContext(
                Path(self.workdir) / cluster_id,
                security=tls,
                listed_as=partial(self._listed_as, cluster_id),
                closed_by_owner=closed_by_owner,
            ),
        )
        self._register(cluster)
        self.log.info("cluster %s (%s) %s: scheduler %s", cluster_id, name, origin, address)
        return cluster

    def list_found(self, template_name: str, address: str) -> ManagedCluster:
        """List a cluster that runs already on the resource a template names (found there, e.g. a notebook's gateway
        cluster); its backend is the template's, made with ``address=``. Returns it ``pending`` while it is reached."""
        for other in self._clusters.values():
            if address in (other.backend.address, other.endpoint and other.endpoint.address):
                raise Conflict(f"the cluster at {address} is listed already, as {other.name!r}", "address")
        self._check_cluster_limit()
        template = self._templates[template_name]
        cluster_id = uuid.uuid4().hex[:8]
        workdir = private_folder(Path(self.workdir) / cluster_id)
        group = template.spec.groups[0].name if template.spec.groups else None
        spec = template.spec.with_count(group, 0) if group is not None else template.spec
        cluster = self._new_cluster(
            cluster_id,
            self.unique_name(f"{template.name} {address.rstrip('/').rsplit('/', 1)[-1][:8]}"),
            template.name,
            self._backend_factory(BACKENDS[template.backend], cluster_id, options=template.options, address=address),
            spec,
            self._context(cluster_id, workdir, None, ClusterCredentials.in_folder(workdir)),
        )
        cluster.events.lifecycle(f"found on its template's resource: {address}")
        self._register(cluster)
        self.log.info("cluster %s (%s) found: %s", cluster_id, cluster.name, address)
        return cluster
