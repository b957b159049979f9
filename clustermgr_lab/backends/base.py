"""The backend interface: start a scheduler, start and stop named workers, clean up, re-adopt."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

from ..spec import WorkerGroup

WorkerExited = Callable[[str, "int | None"], None]


@dataclass(frozen=True)
class SchedulerEndpoint:
    """Where a started scheduler listens: its comm address, its dashboard's host:port, and its id.

    ``scheduler_id`` (``Scheduler.id``) tells this scheduler from another one that later listens
    on the same port: a restarted server re-adopts a cluster only when the id still matches.
    """

    address: str
    dashboard_address: str | None
    scheduler_id: str | None = None


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
    on_change : callable, optional
        Called after a process or job was started or stopped, so that the manager stores the
        new :meth:`process_records` before anything else can happen to the server.

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
    #: False for a cluster this server only attached to: scaling, spec edits and adaptive mode are refused.
    can_scale: ClassVar[bool] = True

    def __init__(
        self,
        cluster_id: str,
        workdir: Path,
        on_worker_exit: WorkerExited | None = None,
        on_change: Callable[[], None] | None = None,
    ):
        self.cluster_id = cluster_id
        self.workdir = Path(workdir)
        self.on_worker_exit = on_worker_exit
        self.on_change = on_change

    def _notify_change(self) -> None:
        if self.on_change is not None:
            self.on_change()

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

    def pids(self) -> dict[str, int]:
        """Process ids of what runs on this machine, by worker name (``"scheduler"`` too)."""
        return {}

    def exit_reason(self, name: str) -> str | None:
        """Why worker ``name`` ended, in a line (e.g. the error it printed last), when the backend can tell."""
        return None

    def process_records(self) -> dict[str, dict[str, Any]]:
        """What identifies each running process or job, by worker name (``"scheduler"`` too).

        JSON-ready (e.g. ``{"pid": 123, "create_time": 1.7e9}`` or ``{"job_id": "42", ...}``);
        stored, and handed back to :meth:`adopt` by the next server.
        """
        return {}

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        """Take over the processes or jobs of ``records`` that still run (after a server restart).

        Returns the names of the workers that still run; from then on they are tracked, and
        :meth:`close` stops them, as if this backend had started them.
        """
        return set()

    async def detach(self) -> None:
        """Stop watching the processes, and leave them running (for the next server to adopt)."""

    def log_tail(self, name: str, lines: int = 15) -> str:
        """The last lines of the log of process ``name`` (``"scheduler"`` or a worker), if there is one."""
        return ""
