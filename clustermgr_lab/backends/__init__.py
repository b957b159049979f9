"""The backend registry: *how* scheduler and worker processes are started and stopped, never *when*.

``BACKENDS`` maps a template's ``backend`` name to its class; the rest of the package imports
backends from here (or the contract from :mod:`.base`), never from a backend's own module.

A backend's module is imported the first time its class is asked for (``BACKENDS["ssh"]``, or
``from clustermgr_lab.backends import SSHBackend``): a server whose templates name only the local
backend never imports dask-gateway, asyncssh or the cluster-class machinery.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING

from clustermgr_lab.backends.base import (
    Backend,
    BackendContext,
    Capabilities,
    SchedulerEndpoint,
    TemplateProbe,
    Waiting,
)

if TYPE_CHECKING:  # what _MODULES names, for type checkers and the import graph (tests/test_import_graph.py)
    from clustermgr_lab.backends.batch.backend import BatchBackend
    from clustermgr_lab.backends.batch.gridengine import SGEBackend
    from clustermgr_lab.backends.batch.htcondor import HTCondorBackend
    from clustermgr_lab.backends.batch.lsf import LSFBackend
    from clustermgr_lab.backends.batch.pbs import PBSBackend
    from clustermgr_lab.backends.batch.scheduler_job import terminate_scheduler
    from clustermgr_lab.backends.batch.slurm import SlurmBackend
    from clustermgr_lab.backends.cluster_class.backend import ClusterClassBackend
    from clustermgr_lab.backends.cluster_class.link import ClusterClassLink
    from clustermgr_lab.backends.cluster_class.objects import ClusterObjects
    from clustermgr_lab.backends.external import ExternalBackend, parse_scheduler_address
    from clustermgr_lab.backends.gateway.backend import GatewayBackend
    from clustermgr_lab.backends.gateway.link import GatewaySchedulerLink
    from clustermgr_lab.backends.gateway.remote import serve_gateway_request
    from clustermgr_lab.backends.local.backend import LocalBackend
    from clustermgr_lab.backends.local.launcher import WarmLauncher
    from clustermgr_lab.backends.local.standby import StandbySchedulers
    from clustermgr_lab.backends.ssh.backend import SSHBackend
    from clustermgr_lab.backends.ssh.sessions import SSHSessions

#: Each class (or function) this package exports lazily -> the module that defines it.
_MODULES = {
    "BatchBackend": "clustermgr_lab.backends.batch.backend",
    "SGEBackend": "clustermgr_lab.backends.batch.gridengine",
    "HTCondorBackend": "clustermgr_lab.backends.batch.htcondor",
    "LSFBackend": "clustermgr_lab.backends.batch.lsf",
    "PBSBackend": "clustermgr_lab.backends.batch.pbs",
    "terminate_scheduler": "clustermgr_lab.backends.batch.scheduler_job",
    "SlurmBackend": "clustermgr_lab.backends.batch.slurm",
    "ClusterClassBackend": "clustermgr_lab.backends.cluster_class.backend",
    "ClusterClassLink": "clustermgr_lab.backends.cluster_class.link",
    "ClusterObjects": "clustermgr_lab.backends.cluster_class.objects",
    "ExternalBackend": "clustermgr_lab.backends.external",
    "parse_scheduler_address": "clustermgr_lab.backends.external",
    "GatewayBackend": "clustermgr_lab.backends.gateway.backend",
    "GatewaySchedulerLink": "clustermgr_lab.backends.gateway.link",
    "serve_gateway_request": "clustermgr_lab.backends.gateway.remote",
    "LocalBackend": "clustermgr_lab.backends.local.backend",
    "WarmLauncher": "clustermgr_lab.backends.local.launcher",
    "StandbySchedulers": "clustermgr_lab.backends.local.standby",
    "SSHBackend": "clustermgr_lab.backends.ssh.backend",
    "SSHSessions": "clustermgr_lab.backends.ssh.sessions",
}


def _load(name: str):
    return getattr(importlib.import_module(_MODULES[name]), name)


class BackendRegistry(MutableMapping):
    """Backend name -> its class, the class's module imported on first use.

    ``BACKENDS[name] = cls`` registers a backend of one's own (see docs/backends.md); ``under``: a
    registry whose backends this one lists too, after its own (``ALL_BACKENDS`` lists ``BACKENDS``'s).
    """

    def __init__(self, classes: Mapping[str, str | type[Backend]], under: BackendRegistry | None = None):
        self._entries: dict[str, str | type[Backend]] = dict(classes)  # a class, or the name of one in _MODULES
        self._under = under

    def __getitem__(self, name: str) -> type[Backend]:
        if name not in self._entries and self._under is not None:
            return self._under[name]
        entry = self._entries[name]
        return _load(entry) if isinstance(entry, str) else entry

    def __setitem__(self, name: str, backend_class: type[Backend]) -> None:
        self._entries[name] = backend_class

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        if self._under is not None:
            yield from (name for name in self._under if name not in self._entries)
        yield from self._entries

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return name in self._entries or (self._under is not None and name in self._under)


BACKENDS: BackendRegistry = BackendRegistry(
    {
        "local": "LocalBackend",
        "slurm": "SlurmBackend",
        "sge": "SGEBackend",
        "pbs": "PBSBackend",
        "lsf": "LSFBackend",
        "htcondor": "HTCondorBackend",
        "ssh": "SSHBackend",
        "cluster-class": "ClusterClassBackend",
        "gateway": "GatewayBackend",
    }
)
#: Every backend a cluster may have: those templates name, and the one of clusters attached by address.
ALL_BACKENDS: BackendRegistry = BackendRegistry({"external": "ExternalBackend"}, under=BACKENDS)


def __getattr__(name: str):
    if name in _MODULES:
        return _load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_MODULES])


__all__ = [
    "ALL_BACKENDS", "BACKENDS", "Backend", "BackendContext", "BackendRegistry", "BatchBackend", "Capabilities",
    "ClusterClassBackend", "ClusterClassLink", "ClusterObjects", "ExternalBackend", "GatewayBackend", "GatewaySchedulerLink", "HTCondorBackend",
    "LSFBackend", "LocalBackend", "PBSBackend", "SGEBackend", "SSHBackend", "SSHSessions", "SchedulerEndpoint",
    "SlurmBackend", "StandbySchedulers", "TemplateProbe", "Waiting", "WarmLauncher", "parse_scheduler_address",
    "serve_gateway_request", "terminate_scheduler",
]  # fmt: skip
