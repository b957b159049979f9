"""A cluster as the API shows it: the ``Cluster`` object of ``openapi.json``, from a managed cluster's state."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Protocol

from clustermgr_lab.backends.base import Backend, SchedulerEndpoint
from clustermgr_lab.cluster.events import EventLog
from clustermgr_lab.domain.adaptive import AdaptSettings
from clustermgr_lab.domain.spec import WorkerSpec
from clustermgr_lab.domain.usage import UsageMeter


class Described(Protocol):
    """What the view reads of a cluster (:class:`~.managed.ManagedCluster` has it)."""

    id: str
    name: str
    template: str
    backend: Backend
    error: str | None
    ended: str | None
    endpoint: SchedulerEndpoint | None
    options: Mapping[str, Any]
    idle_timeout: float | None
    events: EventLog
    created: datetime.datetime
    usage: UsageMeter

    @property
    def status(self) -> str: ...
    @property
    def dashboard_address(self) -> str | None: ...
    @property
    def spec(self) -> WorkerSpec: ...
    @property
    def adapt(self) -> AdaptSettings | None: ...
    def worker_counts(self) -> dict[str, Any]: ...
    def resources(self) -> dict[str, int]: ...


def api_view(cluster: Described, base_url: str = "/", dashboard_key: str = "") -> dict[str, Any]:
    """The cluster as the API shows it; ``dashboard_key`` is the key segment of its dashboard's URL."""
    dashboard = "/".join(part for part in ("clustermgr/dashboard", cluster.id, dashboard_key, "status") if part)
    events, endpoint, security = cluster.events, cluster.endpoint, cluster.backend.security
    last = events.last_decision
    return {
        "id": cluster.id,
        "name": cluster.name,
        "template": cluster.template,
        "backend": cluster.backend.name,
        "capabilities": cluster.backend.capabilities.to_dict(),
        "status": cluster.status,
        "error": cluster.error,
        "ended": cluster.ended,
        "scheduler_address": endpoint.address if endpoint else None,
        # the cluster's TLS files (null: plain TCP): their owner's Client builds a distributed.Security from them
        "tls": security.to_dict() if security is not None else None,
        # a dashboard of its own (a gateway's route) is opened there; any other through this server's proxy
        "dashboard_url": (
            (cluster.backend.dashboard_link if endpoint else None)
            or (f"{base_url}{dashboard}" if cluster.dashboard_address else None)
        ),
        "spec": cluster.spec.to_dict(),
        "workers": cluster.worker_counts(),
        "resources": cluster.resources(),
        "adapt": cluster.adapt.to_dict() if cluster.adapt else None,
        "options": dict(cluster.options),
        "idle_timeout": cluster.idle_timeout,
        "last_decision": last.to_dict() if last else None,
        "last_departure": events.last_departure.to_dict() if events.last_departure else None,
        "created": cluster.created.isoformat(),
        "usage": cluster.usage.to_dict(),
    }
