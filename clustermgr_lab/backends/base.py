"""The backend interface: start a scheduler, start and stop named workers, clean up."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

from ..options import BackendOption
from ..spec import WorkerGroup

WorkerExited = Callable[[str, "int | None"], None]


@dataclass(frozen=True)
class Waiting:
    """Why a requested worker is not running yet, in the backend's words (e.g. SLURM's ``Resources``)."""

    reason: str
    job_id: str | None = None


@dataclass(frozen=True)
class SchedulerEndpoint:
    """Where a started scheduler listens: its comm address and its dashboard's host:port."""

    address: str
    dashboard_address: str | None


class Backend(abc.ABC):
    """Starts and stops the processes of one cluster.

    A backend knows *how* to run workers on some resource (local processes, SLURM jobs...).
    It is never asked to decide *when*: the cluster's scale routine calls :meth:`scale_up` with
    the names of the workers it wants and :meth:`scale_down` with the names it has retired.

    Parameters
    ----------
    cluster_id : str
        Used to label processes or jobs.
    workdir : Path
        A folder of this cluster's own, for logs and scheduler files.
    on_worker_exit : callable, optional
        Called with ``(name, returncode)`` when a worker process ends on its own.
    options : mapping, optional
        The template's options, already checked against :attr:`template_options`; each one
        sets the attribute of the same name.

    Examples
    --------
    A backend for another resource manager is one small class::

        class MyBackend(Backend):
            name = "mine"

            async def start_scheduler(self):
                ...  # start it, return SchedulerEndpoint(address, dashboard_address)

            async def scale_up(self, group, names):
                ...  # start one worker per name: `dask worker ADDRESS --name NAME ...`

            async def scale_down(self, names):
                ...  # stop those workers

            async def close(self):
                ...  # stop whatever is left, scheduler included
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: True when :meth:`scale_up` may be called while :meth:`start_scheduler` is still waiting
    #: for the scheduler, so that worker and scheduler start-ups overlap.
    workers_before_scheduler: ClassVar[bool] = False
    #: The options a template may give this backend (``"options": {...}``), checked at server start.
    template_options: ClassVar[Mapping[str, BackendOption]] = {}

    def __init__(
        self,
        cluster_id: str,
        workdir: Path,
        on_worker_exit: WorkerExited | None = None,
        options: Mapping[str, Any] | None = None,
    ):
        self.cluster_id = cluster_id
        self.workdir = Path(workdir)
        self.on_worker_exit = on_worker_exit
        #: Called (no arguments) when :meth:`waiting` has changed.
        self.on_change: Callable[[], None] | None = None
        for key, value in (options or {}).items():
            setattr(self, key, value)

    @abc.abstractmethod
    async def start_scheduler(self) -> SchedulerEndpoint:
        """Start the scheduler (loading ``clustermgr_lab.scheduler_preload``) and return its endpoint."""

    @abc.abstractmethod
    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        """Start one worker of ``group`` per name in ``names``, each with ``--name NAME``."""

    @abc.abstractmethod
    async def scale_down(self, names: list[str]) -> None:
        """Stop the workers called ``names`` (already retired by the scheduler, or never connected)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop every process this backend started, scheduler included."""

    def waiting(self) -> dict[str, Waiting]:
        """Why requested workers are not running yet, by worker name (those the backend knows about)."""
        return {}

    def started(self) -> set[str]:
        """Names of the workers this backend has started (processes or jobs) and not yet stopped."""
        return set(self.pids())

    def pids(self) -> dict[str, int]:
        """Process ids of what runs on this machine, by worker name (``"scheduler"`` too)."""
        return {}

    @classmethod
    def reap(cls, workdir: Path) -> list[str]:
        """Stop what a cluster left running in ``workdir`` when its server died; returns what was stopped.

        Called at start-up for the work folders of servers that are no longer running.
        """
        return []
