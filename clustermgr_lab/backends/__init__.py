"""The backend registry: *how* scheduler and worker processes are started and stopped, never *when*.

``BACKENDS`` maps a template's ``backend`` name to its class; the rest of the package imports
backends from here (or the contract from :mod:`.base`), never from a backend's own module.
"""

from .base import Backend, BackendContext, Capabilities, SchedulerEndpoint, Waiting
from .batch import BatchBackend, HTCondorBackend, LSFBackend, PBSBackend, SGEBackend
from .cluster_class import ClusterClassBackend
from .external import ExternalBackend, parse_scheduler_address
from .launcher import WarmLauncher
from .local import LocalBackend
from .slurm import SlurmBackend
from .ssh import SSHBackend
from .standby import StandbySchedulers

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
    )
}

__all__ = [
    "BACKENDS", "Backend", "BackendContext", "BatchBackend", "Capabilities", "ClusterClassBackend", "ExternalBackend", "HTCondorBackend",
    "LSFBackend", "LocalBackend", "PBSBackend", "SGEBackend", "SSHBackend", "SchedulerEndpoint", "SlurmBackend",
    "StandbySchedulers", "Waiting", "WarmLauncher", "parse_scheduler_address",
]  # fmt: skip
