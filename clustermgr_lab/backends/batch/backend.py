"""The batch engine every queueing system shares: options, job scripts, submit, poll, cancel, re-adopt.

One engine over dask-jobqueue's ``Job`` classes: the job script comes from the class
(``SLURMJob``, ``PBSJob``, ``SGEJob``, ``LSFJob``, ``HTCondorJob``), so do the submit and cancel
commands and the pattern of a job id. What differs per queueing system is that class and one
status command (:meth:`BatchBackend.job_states`). What goes into a job script, and where it is
written, is :mod:`.job_scripts`' (the server's scheduler links' process, never the server itself).
Every command runs through ``asyncio.create_subprocess_exec``, and the script files are written off
the event loop, never blocking the server.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import re
import shlex
from pathlib import Path
from typing import Any, ClassVar

from traitlets import Float

from clustermgr_lab.backends.base import SCHEDULER_PROCESS as SCHEDULER
from clustermgr_lab.backends.base import Backend, Capabilities, SchedulerEndpoint, Waiting
from clustermgr_lab.backends.batch.job_scripts import JobScripts
from clustermgr_lab.backends.batch.jobs import (
    JobRequest,
    JobState,
    SubmitRefused,
    run_command,
)
from clustermgr_lab.backends.batch.scheduler_job import SchedulerJob
from clustermgr_lab.backends.local.processes import LocalProcesses, exit_reason
from clustermgr_lab.backends.local.scheduler import LocalScheduler
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain import options as opt
from clustermgr_lab.domain.departures import from_job_state
from clustermgr_lab.domain.errors import BackendError
from clustermgr_lab.domain.spec import WorkerGroup

log = logging.getLogger(__name__)


#: A path written into the job script's command line: no shell metacharacters, spaces or line breaks can reach it.
script_path = opt.matching(
    re.compile(r"/[A-Za-z0-9_./+@%=,:~-]*"),
    "an absolute path of letters, digits and _ . / + @ % = , : ~ - only (it is written into the job script)",
)

BATCH_OPTIONS: dict[str, opt.BackendOption] = {
    "queue": opt.BackendOption(opt.word, "partition / queue the jobs go to"),
    "account": opt.BackendOption(opt.word, "account (project) the jobs are charged to"),
    "walltime": opt.BackendOption(opt.walltime, "time limit per job, e.g. 04:00:00"),
    "job_extra_directives": opt.BackendOption(
        opt.lines, "extra directives, e.g. ['--qos=debug'] or ['-l h_vmem=4G']", free_form=True
    ),
    "job_script_prologue": opt.BackendOption(
        opt.lines, "shell lines before the worker, e.g. ['module load cuda']", free_form=True
    ),
    "interface": opt.BackendOption(opt.word, "network interface the workers listen on, e.g. ib0 (lo: single node)"),
    "scheduler_host": opt.BackendOption(opt.host, "address the scheduler listens on, reachable from the compute nodes"),
    "scheduler_interface": opt.BackendOption(
        opt.word, "network interface the scheduler listens on (wins over scheduler_host)"
    ),
    "python": opt.BackendOption(script_path, "the Python that runs the workers on the compute nodes"),
    "local_directory": opt.BackendOption(script_path, "node-local scratch folder for the workers' spilled data"),
    "gpu_directive": opt.BackendOption(
        opt.gpu_directive, "directive for groups with GPUs, with {gpus}; null: none", free_form=True
    ),
    "scheduler": opt.BackendOption(
        opt.matching(re.compile("local|job"), "'local' (next to the server) or 'job' (a batch job near the workers)"),
        "where the scheduler runs: 'local' (this machine) or 'job' (a batch job; it listens on `interface`)",
    ),
    "scheduler_memory": opt.BackendOption(opt.memory, "memory of the scheduler's job (scheduler: 'job'), e.g. '2 GiB'"),
    "worker_config": opt.BackendOption(
        opt.dask_config,
        "dask configuration of the workers, exported in their job scripts, e.g. "
        "{'distributed.worker.multiprocessing-method': 'spawn'}",
    ),
}


class BatchBackend(JobScripts, Backend):
    """Each worker is one batch job; the scheduler is a local process (:class:`~.local_scheduler.LocalScheduler`).

    Subclasses name their dask-jobqueue ``Job`` class (:attr:`jobqueue_job`), its configuration
    section and cancel command (:attr:`config_name`, :attr:`cancel_command`: the class's own, which the
    server reads without importing it) and implement :meth:`job_states`. Templates set the options in :attr:`template_options`
    (``{"backend": "slurm", "options": {"queue": "gpu", "walltime": "04:00:00"}}``); ``None``
    leaves a setting to dask-jobqueue's configuration (``jobqueue.<system>.*``).

    Jobs that end on their own (walltime, node failure, cancelled from outside) are noticed by a
    status poll every ``poll_interval`` seconds while this cluster has jobs, and reported through
    ``on_worker_exit(name, None)``. The same poll keeps why queued jobs wait (:meth:`waiting`).
    Job ids and names are stored with the cluster (:meth:`process_records`), so that a restarted
    server re-adopts the jobs that still run (:meth:`adopt`), or cancels them with the rest of a
    cluster it cannot re-adopt.

    Where the scheduler runs is the template's ``scheduler`` option: ``"local"`` (default; a
    process next to the server, listening on ``scheduler_interface`` / ``scheduler_host``) or
    ``"job"`` (:class:`~.scheduler_job.SchedulerJob`: a batch job of its own, listening on the
    compute nodes' ``interface``, its address read from the scheduler file it writes).
    """

    workers_before_scheduler = False  # a job script needs the scheduler's address
    template_options = BATCH_OPTIONS
    capabilities = Capabilities(runs_processes_here=False)  # workers run on compute nodes

    scheduler_host = "127.0.0.1"  # where the scheduler listens, reachable from the compute nodes
    scheduler_interface: str | None = None  # or: the network interface it listens on (wins over the host)
    scheduler: str = "local"
    scheduler_memory: str = "1 GiB"
    scheduler_job_cores = 1
    poll_interval = 2.0
    command_timeout = Float(
        60.0, config=True, help="Seconds a queueing-system command (submit, cancel, status) may take."
    )
    stop_timeout = Float(10.0, config=True, help="Seconds the scheduler and other local processes get to stop.")
    cancel_timeout = Float(
        60.0,
        config=True,
        help="Seconds a scale-down waits for cancelled jobs to leave the queue's listing (SLURM COMPLETING included).",
    )
    scheduler_start_timeout = Float(60.0, config=True, help="Seconds the scheduler gets to write its address.")
    #: LSF's bsub reads the script from stdin
    submit_from_stdin: ClassVar[bool] = False
    #: That class's ``cancel_command``.
    cancel_command: ClassVar[str]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.processes = LocalProcesses(self.workdir, self.launcher, on_change=self._notify_change)
        self.local_scheduler = LocalScheduler(self.processes, self.security)
        self.scheduler_job = SchedulerJob(self, on_change=self._notify_change)
        self._stopping: set[str] = set()
        self._jobs: dict[str, str] = {}  # worker name -> job id
        self._waiting: dict[str, Waiting] = {}
        self._poller: asyncio.Task | None = None
        self._ended: dict[
            str, tuple[str, str]
        ] = {}  # worker name -> (cause kind, detail) of a job that ended on its own

    @property
    def scheduler_job_memory(self) -> str:
        return self.scheduler_memory

    def command_env(self) -> dict[str, str]:
        """Variables the queueing-system commands run with, on top of the server's environment."""
        return {}

    def job_record_extra(self) -> dict[str, Any]:
        """What a job record carries besides its id and name, so that a later server reaches the same system."""
        return {}

    # -- the scheduler: next to the server, or a batch job -----------------------------------------------

    async def start_scheduler(self) -> SchedulerEndpoint:
        if self.scheduler == "job":
            endpoint = await self.scheduler_job.start(
                idle_timeout=self.idle_timeout, timeout=self.scheduler_start_timeout
            )
            self.address = endpoint.address
            return endpoint
        endpoint = await self.local_scheduler.start_for(self)
        self.address = endpoint.address
        return endpoint

    def stopped_for_idleness(self) -> bool:
        if self.scheduler == "job":
            return self.scheduler_job.stopped_for_idleness(self.idle_timeout)
        return self.local_scheduler.stopped_for_idleness(self.idle_timeout)

    def pids(self) -> dict[str, int]:
        return self.processes.pids()

    def log_tail(self, name: str, lines: int = 15) -> str:
        if name == SCHEDULER and self.scheduler == "job":
            return self.scheduler_job.log_tail(lines)
        return self.processes.log_tail(name, lines)

    # -- starting and stopping workers ---------------------------------------------------------------

    async def submit(self, request: JobRequest, name: str) -> str:
        """Write the job of ``request`` (its script saved as ``<name>.job.sh``) and submit it; its job id.

        Raises
        ------
        SubmitRefused
            When the system refuses it or gives no job id.
        """
        text = await self.write_job(request)
        script = self.workdir / f"{name}.job.sh"
        await asyncio.to_thread(_write_script, script, text.script)
        command = shlex.split(text.submit_command)
        if self.submit_from_stdin:
            command = ["sh", "-c", f'{text.submit_command} < "$0"', str(script)]
        else:
            command.append(str(script))
        code, out, err = await run_command(*command, timeout=self.command_timeout, env=self.command_env())
        what = "the scheduler" if name == SCHEDULER else f"worker {name}"
        if code != 0:
            raise SubmitRefused(f"{command[0]} refused {what}: {(err or out).strip()}")
        try:
            return self.job_id(text, out)
        except ValueError:
            raise SubmitRefused(f"{command[0]} gave no job id for {what}: {(err or out).strip()}") from None

    async def _submit(self, group: WorkerGroup, name: str) -> None:
        job_id = await self.submit(self.job_request(group, name), name)
        self._ended.pop(name, None)
        self._jobs[name] = job_id
        self._waiting[name] = Waiting("submitted", job_id)
        self._notify_change()
        log.info("cluster %s: worker %s is job %s", self.cluster_id, name, job_id)

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        if self.address is None:
            raise BackendError("the scheduler is not running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        results = await asyncio.gather(*(self._submit(group, name) for name in names), return_exceptions=True)
        if self._jobs and (self._poller is None or self._poller.done()):
            self._poller = asyncio.ensure_future(self._poll())
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    @abc.abstractmethod
    async def job_states(self, job_ids: list[str]) -> dict[str, JobState] | None:
        """job id -> state of those of ``job_ids`` the system still lists; None if it did not answer."""

    async def _active(self, names: list[str]) -> dict[str, JobState] | None:
        """Those of ``names`` whose job is still queued or running, with its state.

        The state a listed job has ended in (SLURM: ``NODE_FAIL``, ``TIMEOUT``...) is kept for :meth:`exit_reason`.
        """
        wanted = {self._jobs[n]: n for n in names if n in self._jobs}
        if not wanted:
            return {}
        jobs = await self.job_states(list(wanted))
        if jobs is None:
            return None
        for job_id, name in wanted.items():
            state = jobs.get(job_id)
            if state is not None and not state.active and state.state:
                found = from_job_state(job_id, state.state, None, cancelled_by_us=name in self._stopping)
                if found is not None:
                    self._ended.setdefault(name, found)
        return {
            name: jobs[job_id]
            for job_id, name in wanted.items()
            if job_id in jobs and jobs[job_id].active and jobs[job_id].name in (self.job_name(name), "")
        }

    async def _poll(self) -> None:
        """Notice jobs that ended on their own, and why queued ones wait, while there are jobs to watch."""
        first = True
        while self._jobs:
            await asyncio.sleep(0.2 if first else self.poll_interval)
            first = False
            watched = [n for n in self._jobs if n not in self._stopping]
            try:
                active = await self._active(watched)
            except BackendError as exc:
                log.warning("cluster %s: job status failed: %s", self.cluster_id, exc)
                continue
            if active is None:
                continue
            waiting = {
                name: Waiting(state.pending_reason, self._jobs[name])
                for name, state in active.items()
                if state.pending_reason is not None
            }
            if waiting != self._waiting:
                self._waiting = waiting
                self._notify_change()
            for name in set(watched) - set(active):
                if name in self._stopping or name not in self._jobs:
                    continue  # being cancelled by us meanwhile
                job_id = self._jobs.pop(name)
                self._notify_change()
                log.warning("cluster %s: job %s of worker %s ended on its own", self.cluster_id, job_id, name)
                try:
                    ended = await self.final_state(name, job_id)
                except BackendError as exc:
                    log.warning("cluster %s: final state of job %s: %s", self.cluster_id, job_id, exc)
                    ended = None
                if ended is not None:
                    self._ended[name] = ended
                self._report_exit(name, None)

    async def final_state(self, name: str, job_id: str) -> tuple[str, str] | None:
        """``(kind, detail)`` of why job ``job_id`` (of worker ``name``) ended, from the queueing system, if it says."""
        return None

    def departure_evidence(self, name: str) -> tuple[str, str] | None:
        return self._ended.pop(name, None)

    @property
    def departure_grace(self) -> float:  # a job's end is noticed by the status poll
        return 2 * self.poll_interval + 2

    def log_files(self) -> dict[str, Path]:
        """The scheduler's log, and each job's standard error (by worker name) and output (``<worker>.stdout``)."""
        files = {name: path for name, path in super().log_files().items() if name == SCHEDULER}
        prefix = f"{self.job_name_prefix}-{self.cluster_id}-"
        try:
            entries = sorted(self.workdir.glob(f"{prefix}*"), key=lambda p: p.stat().st_mtime)
        except OSError:
            return files
        for path in entries:  # <prefix><worker>-<job id>.err / .out; the latest job of a name wins
            stem, suffix = path.stem, path.suffix
            if suffix not in (".err", ".out") or "-" not in stem:
                continue
            worker = stem.removeprefix(prefix).rsplit("-", 1)[0]
            files[worker if suffix == ".err" else f"{worker}.stdout"] = path
        return files

    def log_owner(self, log_name: str) -> str | None:
        return None if log_name == SCHEDULER else log_name.removesuffix(".stdout")

    def started(self) -> set[str]:
        return set(self._jobs)

    def waiting(self) -> dict[str, Waiting]:
        return {name: w for name, w in self._waiting.items() if name in self._jobs}

    async def scale_down(self, names: list[str]) -> None:
        """Cancel the jobs, then wait (up to ``cancel_timeout``) until the system no longer lists them."""
        names = [n for n in names if n in self._jobs]
        if not names:
            return
        self._stopping.update(names)
        try:
            await self.cancel_jobs([self._jobs[n] for n in names])
            for name in names:
                self._jobs.pop(name, None)
                self._waiting.pop(name, None)
            self._notify_change()
        finally:
            self._stopping.difference_update(names)

    async def cancel_jobs(self, job_ids: list[str]) -> None:
        """Cancel jobs, then wait (up to ``cancel_timeout``) until the system no longer lists them."""
        cancel = shlex.split(self.cancel_command)
        code, out, err = await run_command(*cancel, *job_ids, timeout=self.command_timeout, env=self.command_env())
        if code != 0:
            log.warning("cluster %s: %s %s: %s", self.cluster_id, cancel[0], " ".join(job_ids), (err or out).strip())
        # A cancelled job is listed (SLURM: COMPLETING) until the system has killed and cleaned up after
        # it, up to its kill grace time after the signal: only then is it gone, and its resources free.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cancel_timeout
        while loop.time() < deadline:
            jobs = await self.job_states(job_ids)
            if jobs is not None and not any(j.active or j.finishing for j in jobs.values()):
                return
            await asyncio.sleep(0.25)
        log.warning(
            "cluster %s: jobs %s still listed %g s after cancelling", self.cluster_id, job_ids, self.cancel_timeout
        )

    async def close(self) -> None:
        await self._stop_polling()
        await self.scale_down(list(self._jobs))
        await self.scheduler_job.cancel()
        await self.processes.stop_all(self.stop_timeout)
        self.address = None

    async def _stop_polling(self) -> None:
        if self._poller is not None:
            await cancel_and_wait(self._poller)
            self._poller = None

    async def detach(self) -> None:
        await self._stop_polling()
        await self.processes.detach()

    # -- what is left behind ---------------------------------------------------------------------------

    def exit_reason(self, name: str) -> str | None:
        """The state its job ended in (e.g. ``job ended: NODE_FAIL``) and what its log says last."""
        ended = self._ended.get(name)
        logged = exit_reason(self.worker_log(name))
        if ended:
            return f"{ended[0]}: {ended[1]}" + (f"; {logged}" if logged else "")
        return logged

    def adopt_system(self, records: dict[str, dict[str, Any]]) -> None:
        """Take from the job records which queueing system their jobs belong to (see :meth:`job_record_extra`)."""

    def job_ids(self) -> dict[str, str]:
        """Job ids by worker name."""
        return dict(self._jobs)

    def worker_log(self, name: str) -> Path | None:
        """The latest file the job of worker ``name`` wrote its output to, named after the job."""
        logs = sorted(self.workdir.glob(f"{self.job_name(name)}*"), key=lambda p: p.stat().st_mtime)
        logs = [p for p in logs if not p.name.endswith(".job.sh")]
        return logs[-1] if logs else None

    def process_records(self) -> dict[str, dict[str, Any]]:
        """The scheduler's PID, and each worker's job id and job name."""
        records = self.scheduler_job.record() if self.scheduler == "job" else self.local_scheduler.record()
        extra = self.job_record_extra()
        records.update(
            {name: {"job_id": job_id, "job_name": self.job_name(name), **extra} for name, job_id in self._jobs.items()}
        )
        return records

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        """Adopt the scheduler process, and the recorded jobs that the system lists, under their recorded name, as active.

        A recorded id that the system has since given to another job (e.g. after a restart) is
        left alone: the job name must match too.
        """
        self.address = endpoint.address
        self.adopt_system(records)
        scheduler = records.get(SCHEDULER) or {}
        if scheduler.get("job_id"):
            self.scheduler = "job"
            self.scheduler_job.adopt(endpoint, scheduler)
        else:
            self.local_scheduler.adopt(endpoint, {n: r for n, r in records.items() if n == SCHEDULER and "pid" in r})
        jobs = {
            n: str(r["job_id"])
            for n, r in records.items()
            if n != SCHEDULER and r.get("job_id") and r.get("job_name") == self.job_name(n)
        }
        if jobs:
            self._jobs.update(jobs)
            active = await self._active(list(jobs))
            if active is None:
                log.warning(
                    "cluster %s: the job status did not answer; keeping the recorded jobs %s", self.cluster_id, jobs
                )
                active = dict.fromkeys(jobs)
            for name in set(jobs) - set(active):
                del self._jobs[name]
            self._notify_change()
            if self._jobs:
                self._poller = asyncio.ensure_future(self._poll())
        return set(self._jobs)


def _write_script(path: Path, script: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
