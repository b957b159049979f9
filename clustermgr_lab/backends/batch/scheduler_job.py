"""The scheduler as a batch job near its workers: submitted, found through its scheduler file, watched, cancelled."""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from dask.utils import parse_bytes

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, BackendContext, SchedulerEndpoint
from clustermgr_lab.backends.batch.jobs import JobRequest, JobState, write_job
from clustermgr_lab.backends.local.scheduler import IDLE_SHUTDOWN_LOG_LINE, read_scheduler_file, scheduler_command
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.domain.errors import BackendError
from clustermgr_lab.domain.spec import WorkerGroup


async def terminate_scheduler(address: str, timeout: float, security: Any = None) -> None:
    """Ask the scheduler at ``address`` to close (``security``: a ``distributed.Security``, or None for plain TCP)."""
    from distributed.core import rpc

    connection_args = security.get_connection_args("client") if security is not None else {}
    async with rpc(address, connection_args=connection_args, timeout=timeout) as scheduler:
        await asyncio.wait_for(scheduler.terminate(), timeout)


class BatchBackend(Protocol):
    """What a scheduler job needs of its batch backend (:class:`~.backend.BatchBackend` provides it)."""

    cluster_id: str
    workdir: Path
    security: ClusterCredentials | None
    context: BackendContext
    interface: str | None
    python: str
    scheduler_job_cores: int
    jobqueue_job: tuple[str, str]

    @property
    def scheduler_job_memory(self) -> str: ...
    def job_name(self, name: str) -> str: ...
    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]: ...
    def job_record_extra(self) -> dict[str, Any]: ...
    def worker_log(self, name: str) -> Path | None: ...
    async def submit(self, request: JobRequest, name: str) -> str: ...
    async def job_states(self, job_ids: list[str]) -> dict[str, JobState] | None: ...
    async def cancel_jobs(self, job_ids: list[str]) -> None: ...


log = logging.getLogger(__name__)


class SchedulerJob:
    """One ``dask scheduler`` running as a batch job of ``backend``'s queueing system (``options.scheduler: "job"``).

    The job script is the backend's own (its partition, account, walltime, directives and prologue),
    with :func:`~.local_scheduler.scheduler_command` as its command: the scheduler listens on the
    compute nodes' ``interface``, its dashboard on every interface of its node, and it writes its
    address to ``scheduler.json`` in the cluster's work folder (a shared file system), which is how
    the server learns where it runs. Its job id and name are stored with the cluster (under
    ``"scheduler"``), so that a restarted server re-adopts it, or cancels it.

    Parameters
    ----------
    backend : BatchBackend
        Submits, lists and cancels the job.
    on_change : callable
        Called when the job's id or address changes (the cluster stores them at once).
    """

    def __init__(self, backend: BatchBackend, on_change: Callable[[], None]):
        self.backend = backend
        self._on_change = on_change
        self.job_id: str | None = None
        self.address: str | None = None

    @property
    def scheduler_file(self):
        return self.backend.workdir / "scheduler.json"

    @property
    def job_name(self) -> str:
        return self.backend.job_name(SCHEDULER_PROCESS)

    def job_request(self, idle_timeout: float | None) -> JobRequest:
        """The dask-jobqueue ``Job`` of the scheduler: the backend's script, the scheduler's command line."""
        backend = self.backend
        group = WorkerGroup(
            SCHEDULER_PROCESS, 1, backend.scheduler_job_cores, parse_bytes(backend.scheduler_job_memory)
        )
        kwargs = backend.job_kwargs(group, SCHEDULER_PROCESS)
        kwargs.update(scheduler="tcp://scheduler-job:0", worker_extra_args=[])  # the worker command is replaced below
        if backend.security is not None:  # encryption required, the dashboard over HTTPS: as for a local scheduler
            environment = backend.security.environment()
            kwargs["job_script_prologue"] = [
                *kwargs.get("job_script_prologue", []),
                *(f"export {name}={shlex.quote(value)}" for name, value in environment.items()),
            ]
        command = scheduler_command(
            self.scheduler_file,
            interface=backend.worker_interface,
            idle_timeout=idle_timeout,
            dashboard_host="",
            python=shlex.split(backend.worker_python)[0],
            credentials=backend.security,
        )
        # exec: the scheduler is the job's own process, which the system signals when the job is cancelled (a child
        # of the script's shell outlives it where SLURM tracks processes by parentage, proctrack/linuxproc)
        return JobRequest(*backend.jobqueue_job, kwargs, "exec " + shlex.join(command))

    def job_script(self, idle_timeout: float | None = None) -> str:
        """The scheduler's batch script, written in this process."""
        return write_job(self.job_request(idle_timeout)).script

    async def start(self, *, idle_timeout: float | None, timeout: float) -> SchedulerEndpoint:
        """Submit the job and wait (up to ``timeout`` s) until the scheduler has written its address.

        Raises
        ------
        BackendError
            When the queueing system refuses the job, the job ends before the scheduler wrote its
            address (with the last lines of its log), or ``timeout`` passes (the job is cancelled;
            the message says why it was still waiting, e.g. ``Resources``).
        """
        self.scheduler_file.unlink(missing_ok=True)
        self.job_id = await self.backend.submit(self.job_request(idle_timeout), SCHEDULER_PROCESS)
        self._on_change()  # stored at once: a server that dies now still knows the job
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_check = loop.time() + 0.5
        waiting_for = "submitted"
        info: dict = {}
        while not info:
            if loop.time() > deadline:
                await self.cancel()
                raise BackendError(
                    f"the scheduler job {self.job_id} did not start within {timeout:g} s (last state: {waiting_for})"
                )
            if loop.time() >= next_check:
                next_check = loop.time() + 1.0
                states = await self.backend.job_states([self.job_id])
                state = (states or {}).get(self.job_id)
                if states is not None and (state is None or not state.active):
                    ended = state.state if state is not None and state.state else "ended"
                    job_id, self.job_id = self.job_id, None
                    self._on_change()
                    raise BackendError(
                        f"the scheduler job {job_id} {ended} before the scheduler started: {self.log_tail(5) or 'no log'}"
                    )
                if state is not None:
                    waiting_for = state.pending_reason or "running"
            await asyncio.sleep(0.1)
            info = read_scheduler_file(self.scheduler_file)
        self.address = info["address"]
        host = self.address.split("://", 1)[-1].rsplit(":", 1)[0]
        dashboard_port = info.get("services", {}).get("dashboard")
        log.info("cluster %s: the scheduler is job %s at %s", self.backend.cluster_id, self.job_id, self.address)
        return SchedulerEndpoint(self.address, f"{host}:{dashboard_port}" if dashboard_port else None, info.get("id"))

    async def cancel(self) -> None:
        """Stop the scheduler, then cancel its job (if any) and wait until the queueing system no longer lists it.

        The scheduler is asked to close first: its job then ends on its own. A cancel alone was seen to leave
        the scheduler running where slurmd runs in a network namespace ("Kill task failed", the node drained).
        """
        if self.job_id is None:
            return
        if self.address is not None:
            await self._terminate_scheduler()
        await self.backend.cancel_jobs([self.job_id])
        self.job_id = None
        self.address = None
        self._on_change()

    async def _terminate_scheduler(self, timeout: float = 10.0) -> None:
        """Ask the scheduler to close (over the cluster's credentials), then wait a little for its job to end.

        Asked from the server's helper process when there is one (distributed is imported there), else from here.
        """
        security = self.backend.security
        helper = self.backend.context.helper
        try:
            if helper is not None:
                tls = security.to_dict() if security is not None else None
                message = {"op": "terminate_scheduler", "address": self.address, "tls": tls, "timeout": timeout}
                await helper.ask(message, timeout)
            else:
                await terminate_scheduler(self.address, timeout, security.security() if security else None)
        except Exception as exc:  # gone already, or not answering: the cancel below still ends its job
            log.info("cluster %s: the scheduler job did not close on request: %s", self.backend.cluster_id, exc)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            states = await self.backend.job_states([self.job_id])
            if states is not None and not any(state.active for state in states.values()):
                return
            await asyncio.sleep(0.25)

    def record(self) -> dict[str, dict[str, Any]]:
        """``{"scheduler": {"job_id", "job_name", ...}}`` while the job exists, else {}."""
        if self.job_id is None:
            return {}
        return {
            SCHEDULER_PROCESS: {"job_id": self.job_id, "job_name": self.job_name, **self.backend.job_record_extra()}
        }

    def adopt(self, endpoint: SchedulerEndpoint, record: dict[str, Any] | None) -> None:
        """Take over the recorded job (whether it still runs decides the scheduler's answer, not this)."""
        self.address = endpoint.address or None
        if record and record.get("job_id") and record.get("job_name") == self.job_name:
            self.job_id = str(record["job_id"])

    def log_path(self):
        return self.backend.worker_log(SCHEDULER_PROCESS)

    def log_tail(self, lines: int = 15) -> str:
        path = self.log_path()
        try:
            text = path.read_text(errors="replace") if path is not None else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stopped_for_idleness(self, idle_timeout: float | None) -> bool:
        return bool(idle_timeout) and IDLE_SHUTDOWN_LOG_LINE in self.log_tail(40)
