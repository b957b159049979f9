"""The backend registry: *how* scheduler and worker processes are started and stopped, never *when*.

``BACKENDS`` maps a template's ``backend`` name to its class; the rest of the package imports
backends from here (or the contract from :mod:`.base`), never from a backend's own module.
"""

from clustermgr_lab.backends.base import (
    Backend,
    BackendContext,
    Capabilities,
    SchedulerEndpoint,
    TemplateProbe,
    Waiting,
)
from clustermgr_lab.backends.batch.backend import BatchBackend
from clustermgr_lab.backends.batch.gridengine import SGEBackend
from clustermgr_lab.backends.batch.htcondor import HTCondorBackend
from clustermgr_lab.backends.batch.lsf import LSFBackend
from clustermgr_lab.backends.batch.pbs import PBSBackend
from clustermgr_lab.backends.batch.slurm import SlurmBackend
from clustermgr_lab.backends.cluster_class import ClusterClassBackend
from clustermgr_lab.backends.external import ExternalBackend, parse_scheduler_address
from clustermgr_lab.backends.gateway.backend import GatewayBackend
from clustermgr_lab.backends.local.backend import LocalBackend
from clustermgr_lab.backends.local.launcher import WarmLauncher
from clustermgr_lab.backends.local.standby import StandbySchedulers
from clustermgr_lab.backends.ssh import SSHBackend

BACKENDS: dict[str, type[Backend]] = {
    cls.name: cls
    for cls in (
        LocalBackend,
        SlurmBackend,
        SGEBackend,
        PBSBackend,
        LSFBackend,
        HTCondorBackend,
        SSHBackend,
        ClusterClassBackend,
        GatewayBackend,
    )
}
#: Every backend a cluster may have: those templates name, and the one of clusters attached by address.
ALL_BACKENDS: dict[str, type[Backend]] = {**BACKENDS, ExternalBackend.name: ExternalBackend}

__all__ = [
    "ALL_BACKENDS", "BACKENDS", "Backend", "BackendContext", "BatchBackend", "Capabilities", "ClusterClassBackend", "ExternalBackend", "GatewayBackend", "HTCondorBackend",
    "LSFBackend", "LocalBackend", "PBSBackend", "SGEBackend", "SSHBackend", "SchedulerEndpoint", "SlurmBackend",
    "StandbySchedulers", "TemplateProbe", "Waiting", "WarmLauncher", "parse_scheduler_address",
]  # fmt: skip
