"""Backends: *how* scheduler and worker processes are started and stopped, never *when*."""

from .base import Backend, SchedulerEndpoint
from .local import LocalBackend
from .slurm import SlurmBackend
from .ssh import SSHBackend

BACKENDS: dict[str, type[Backend]] = {LocalBackend.name: LocalBackend, SlurmBackend.name: SlurmBackend}
BACKENDS[SSHBackend.name] = SSHBackend

__all__ = ["BACKENDS", "Backend", "LocalBackend", "SchedulerEndpoint", "SlurmBackend", "SSHBackend"]
