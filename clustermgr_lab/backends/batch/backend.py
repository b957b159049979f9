"""The batch engine every queueing system shares: options, job scripts, submit, poll, cancel, re-adopt.

One engine over dask-jobqueue's ``Job`` classes: the job script comes from the class
(``SLURMJob``, ``PBSJob``, ``SGEJob``, ``LSFJob``, ``HTCondorJob``), so do the submit and cancel
commands and the pattern of a job id. What differs per queueing system is that class and one
status command (:meth:`BatchBackend.job_states`). The scripts are written where distributed is
imported already (the server's scheduler links' process, ``BackendContext.job_writer``), never in
the server itself. Every command runs through ``asyncio.create_subprocess_exec``, never blocking
the server's event loop.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import dask.config
from traitlets import Float

from clustermgr_lab.backends.base import SCHEDULER_PROCESS as SCHEDULER
from clustermgr_lab.backends.base import Backend, Capabilities, SchedulerEndpoint, Waiting
from clustermgr_lab.backends.batch.jobs import (
    JobRequest,
    JobState,
    JobText,
    SubmitRefused,
    job_id_from_submit_output,
    jobqueue_class,
    run_command,
    write_job,
)
from clustermgr_lab.backends.batch.scheduler_job import SchedulerJob
from clustermgr_lab.backends.local.backend import WORKER_PRELOAD_ENV, worker_preload_environment
from clustermgr_lab.backends.local.processes import LocalProcesses, exit_reason
from clustermgr_lab.backends.local.scheduler import LocalScheduler
from clustermgr_lab.common.security import REQUIRE_ENCRYPTION
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

#: dask configuration of every batch worker, under the template's ``worker_config``. The nanny forks its
#: worker, as it does for local workers, instead of starting a second interpreter that imports
#: distributed again: about a second of a compute node's CPU less per worker (4 workers on the two-node
#: test bed: create 2.9 s against 4.1 s, SLURM's queue wait left out).
WORKER_DEFAULTS = {"distributed.worker.multiprocessing-method": "fork"}


class BatchBackend(Backend):
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

    queue: str | None = None
    account: str | None = None
    walltime: str | None = None
    job_extra_directives: tuple[str, ...] = ()
    job_script_prologue: tuple[str, ...] = ()
    interface: str | None = "lo"
    python: str = sys.executable
    local_directory: str | None = None
    gpu_directive: str | None = None
    scheduler_host = "127.0.0.1"  # where the scheduler listens, reachable from the compute nodes
    scheduler_interface: str | None = None  # or: the network interface it listens on (wins over the host)
    scheduler: str = "local"
    scheduler_memory: str = "1 GiB"
    worker_config: dict[str, str | int | float | bool] = {}  # a template's replaces it; never changed in place
    scheduler_job_cores = 1
    job_name_prefix = "clustermgr"
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
    #: The dask-jobqueue ``Job`` class that writes this system's job scripts: ``dask_jobqueue.<module>.<class>``.
    jobqueue_job: ClassVar[tuple[str, str]]
    #: That class's ``config_name``: the site's settings are ``jobqueue.<config_name>.*``.
    config_name: ClassVar[str]
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
        endpoint = await self.local_scheduler.start(
            host=self.scheduler_host,
            interface=self.scheduler_interface,
            idle_timeout=self.idle_timeout,
            timeout=self.scheduler_start_timeout,
            stop_timeout=self.stop_timeout,
        )
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

    # -- job scripts -------------------------------------------------------------------------------

    @classmethod
    def job_class(cls):
        """The dask-jobqueue ``Job`` class that writes this system's job scripts (imported: it imports distributed)."""
        return jobqueue_class(*cls.jobqueue_job)

    @classmethod
    def submit_command(cls) -> str | None:
        """The command that submits this system's jobs (e.g. ``sbatch``), from its dask-jobqueue ``Job`` class.

        Examples
        --------
        >>> from clustermgr_lab.backends import BACKENDS
        >>> BACKENDS["slurm"].submit_command(), BACKENDS["local"].submit_command()
        ('sbatch', None)
        """
        try:
            return shlex.split(cls.job_class().submit_command)[0]
        except Exception:  # dask-jobqueue missing or broken: the backend's own error says more
            return None

    def job_name(self, name: str) -> str:
        return f"{self.job_name_prefix}-{self.cluster_id}-{name}"

    # -- the site's dask-jobqueue configuration (jobqueue.yaml) -----------------------------------------

    def site_config(self, key: str, *deprecated: str) -> Any:
        """The site's ``jobqueue.<system>.<key>`` from Dask's config (its jobqueue.yaml, ``DASK_JOBQUEUE__...``),
        or its ``deprecated`` name's, as dask-jobqueue reads it; None when unset."""
        for name in (key, *deprecated):
            value = dask.config.get(f"jobqueue.{self.config_name}.{name}", None)
            if value:
                return value
        return None

    def site_lines(self, key: str, *deprecated: str) -> list[str]:
        """A list option of the site's config (``job-script-prologue``...), as a list of strings."""
        value = self.site_config(key, *deprecated)
        if value is None or isinstance(value, Mapping):  # a mapping (HTCondor's directives): see directives()
            return []
        return [value] if isinstance(value, str) else [str(line) for line in value]

    def set_by_template(self, option: str) -> bool:
        """Whether the template (or a subclass) set ``option``, rather than leaving it to the defaults."""
        return option in vars(self) or getattr(type(self), option) is not getattr(BatchBackend, option)

    @property
    def worker_interface(self) -> str | None:
        """The template's ``interface``; else the site's ``jobqueue.<system>.interface``; else ``lo`` (one node)."""
        if self.set_by_template("interface"):
            return self.interface
        return self.site_config("interface") or self.interface

    @property
    def worker_python(self) -> str:
        """The template's ``python`` (quoted); else the site's ``jobqueue.<system>.python`` (as written: it may
        carry arguments); else the server's interpreter."""
        if self.set_by_template("python"):
            return shlex.quote(self.python)
        return str(self.site_config("python") or shlex.quote(self.python))

    def system_directives(self, group: WorkerGroup) -> list[str]:
        """Directives this backend always gives its jobs on this queueing system (after the site's)."""
        return []

    def directives(self, group: WorkerGroup) -> list[str] | None:
        """Extra directives for one worker of ``group``: the site's (jobqueue config), this system's, the template's,
        the GPU request.

        A site's directives given as a mapping (HTCondor's submit description) cannot be merged with lines:
        None then (dask-jobqueue reads the site's own) when the template asks for none, else the template's.
        """
        directives = self.site_lines("job-extra-directives", "job-extra") + self.system_directives(group)
        directives += self.job_extra_directives
        if group.gpus and self.gpu_directive:
            directives.append(self.gpu_directive.format(gpus=group.gpus))
        if not directives and isinstance(self.site_config("job-extra-directives", "job-extra"), Mapping):
            return None
        return directives

    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        """Arguments of the ``Job`` class for worker ``name`` of ``group``."""
        # dask-jobqueue rounds --memory-limit to 3 digits; a later flag wins, so give the exact bytes.
        extra = self.site_lines("worker-extra-args", "extra") + ["--memory-limit", str(group.memory)]
        # The worker's own HTTP routes (/health, /metrics) on its node's loopback only, never every interface, and
        # without its Bokeh pages, as local and SSH workers: importing Bokeh is 0.6 CPU-s of every worker's start.
        extra += ["--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
        if group.worker_resources:
            resources = " ".join(f"{k}={v}" for k, v in group.worker_resources.items())
            extra += ["--resources", shlex.quote(resources)]  # the command line is joined into a shell script
        worker_config = {**WORKER_DEFAULTS, **self.worker_config}
        prologue = self.site_lines("job-script-prologue", "env-extra")  # the site's module loads / conda activate
        prologue += [
            f"export {key}={shlex.quote(value)}"
            for key, value in {**opt.dask_config_environment(worker_config), **self.title_environment()}.items()
        ]
        if not group.gpus:  # CUDA shows it no device (left unset, it would see every GPU of the node)
            prologue.append("export CUDA_VISIBLE_DEVICES=''")
        prologue += self.job_script_prologue
        if self.security is not None:  # the work folder must be visible to the compute nodes (it is for the logs)
            extra += [shlex.quote(argument) for argument in self.security.cli_arguments()]
            prologue += [f"export {name}={value}" for name, value in REQUIRE_ENCRYPTION.items()]
            # ...and served over HTTPS to holders of the cluster's certificate only (clustermgr_lab.preloads.worker,
            # which the worker's Python must import: the server's interpreter does).
            preloads = worker_preload_environment(
                opt.dask_config_environment(worker_config).get(WORKER_PRELOAD_ENV) or os.environ.get(WORKER_PRELOAD_ENV)
            )
            for key, value in {**self.security.dashboard_environment(), **preloads}.items():
                prologue.append(f"export {key}={shlex.quote(value)}")
        return dict(
            scheduler=self.address,
            name=name,  # becomes `dask worker --name NAME`: how connected workers are matched
            job_name=self.job_name(name),
            cores=group.threads,
            memory=group.memory,
            processes=1,
            interface=self.worker_interface,
            # Checked by script_path already; quoted as well, since dask-jobqueue joins them into a shell line.
            # `exec`: the worker replaces the job's shell. Cancelling a job signals every process of it at once;
            # a shell killed first would leave the worker to init, out of reach of a system that tracks a
            # job's processes by parentage (SLURM's proctrack/linuxproc), still running after the job ended.
            python=f"exec {self.worker_python}",
            local_directory=shlex.quote(self.local_directory) if self.local_directory else None,
            log_directory=str(self.workdir),
            queue=self.queue,
            walltime=self.walltime,
            job_extra_directives=self.directives(group),
            job_script_prologue=prologue,
            worker_extra_args=extra,
        )

    def job_request(self, group: WorkerGroup, name: str, command: str | None = None) -> JobRequest:
        """The dask-jobqueue ``Job`` of worker ``name`` of ``group``: class and arguments (``command``: another one)."""
        return JobRequest(*self.jobqueue_job, self.job_kwargs(group, name), command)

    def job_script(self, group: WorkerGroup, name: str) -> str:
        """The batch script of worker ``name``, as dask-jobqueue writes it, written in this process."""
        return write_job(self.job_request(group, name)).script

    async def write_job(self, request: JobRequest) -> JobText:
        """``request``'s script and commands, written by the context's ``job_writer`` (the server's scheduler links'
        process) with this server's ``jobqueue`` settings; in this process when there is none, or when it cannot
        answer (a warning says so).

        Raises
        ------
        ValueError, RuntimeError
            What the ``Job`` class raised for these arguments, with its words.
        """
        writer = self.context.job_writer
        if writer is not None:
            message = {"job": request.to_message(), "jobqueue": dask.config.get("jobqueue", {})}
            try:
                return JobText.from_message(await writer(message))
            except OSError as exc:
                log.warning("cluster %s: job script written in the server: %s", self.cluster_id, exc)
        return write_job(request)

    @staticmethod
    def write_job_message(message: Mapping[str, Any]) -> dict[str, str]:
        """The ``job_writer``'s work where it runs: ``{"job", "jobqueue"}`` (as :meth:`write_job` sends them) to
        :meth:`JobText.to_message <.jobs.JobText.to_message>`."""
        return write_job(JobRequest.from_message(message["job"]), message.get("jobqueue")).to_message()

    def job_id(self, text: JobText, out: str) -> str:
        """The job id in the submit command's output ``out`` (:func:`~.jobs.job_id_from_submit_output`).

        Raises
        ------
        ValueError
            When ``out`` has none.
        """
        return job_id_from_submit_output(text.job_id_regexp, out)

    # -- starting and stopping workers ---------------------------------------------------------------

    async def submit(self, request: JobRequest, name: str) -> str:
        """Write the job of ``request`` (its script saved as ``<name>.job.sh``) and submit it; its job id.

        Raises
        ------
        SubmitRefused
            When the system refuses it or gives no job id.
        """
        text = await self.write_job(request)
        self.workdir.mkdir(parents=True, exist_ok=True)
        script = self.workdir / f"{name}.job.sh"
        script.write_text(text.script)
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
