"""Backends: *how* scheduler and worker processes are started and stopped, never *when*."""

from .base import Backend, SchedulerEndpoint, Waiting
from .batch import BatchBackend, HTCondorBackend, LSFBackend, PBSBackend, SGEBackend
from .local import LocalBackend
from .slurm import SlurmBackend
from .ssh import SSHBackend

BACKENDS: dict[str, type[Backend]] = {
    cls.name: cls
    for cls in (LocalBackend, SlurmBackend, SGEBackend, PBSBackend, LSFBackend, HTCondorBackend, SSHBackend)
}

__all__ = [
    "BACKENDS", "Backend", "BatchBackend", "HTCondorBackend", "LSFBackend", "LocalBackend", "PBSBackend",
    "SGEBackend", "SSHBackend", "SchedulerEndpoint", "SlurmBackend", "Waiting",
]  # fmt: skip
