"""Backends: *how* scheduler and worker processes are started and stopped, never *when*."""

from .base import Backend, SchedulerEndpoint
from .local import LocalBackend

BACKENDS: dict[str, type[Backend]] = {LocalBackend.name: LocalBackend}

__all__ = ["BACKENDS", "Backend", "LocalBackend", "SchedulerEndpoint"]
