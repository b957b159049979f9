"""SLURM backend: the scheduler runs next to the Jupyter server, each worker is one SLURM job.

Job scripts come from dask-jobqueue's ``SLURMJob.job_script()`` (so ``~/.config/dask/jobqueue.yaml``
settings apply to whatever is not set here); submitting, cancelling and watching jobs is done
here with ``sbatch`` / ``scancel`` / ``squeue`` run through ``asyncio.create_subprocess_exec``,
never by a blocking call on the server's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from ..errors import BackendError
from ..spec import WorkerGroup
from .base import SchedulerEndpoint
from .local import SCHEDULER, LocalBackend

log = logging.getLogger(__name__)
# squeue's default listing holds only these; anything else (or no line at all) means the job ended.
ACTIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"}


async def _run(*command: str, timeout: float = 60) -> tuple[int, str, str]:
    """Run a SLURM command without blocking the event loop; returns (returncode, stdout, stderr)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
    except OSError as exc:
        raise BackendError(f"cannot run {command[0]}: {exc}") from exc
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise BackendError(f"{command[0]} did not answer within {timeout:g} s") from None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _slurm_job_class():
    """dask-jobqueue's ``SLURMJob``, imported on first use (~0.1 s once distributed is loaded).

    Importing dask_jobqueue replaces the process's SIGINT handler (``dask_jobqueue/runner.py``
    calls ``signal.signal(SIGINT, sys.exit)`` at import); the Jupyter server's own handler is put back.
    """
    sigint = signal.getsignal(signal.SIGINT)
    from dask_jobqueue.slurm import SLURMJob

    if sigint is not None and signal.getsignal(signal.SIGINT) is not sigint:
        signal.signal(signal.SIGINT, sigint)
    return SLURMJob


class SlurmBackend(LocalBackend):
    """Each worker is one SLURM job; the scheduler is a local process (inherited from LocalBackend).

    The scheduler listens on 127.0.0.1 and the workers use ``interface = "lo"``: right for a
    single-node SLURM (CI, a workstation). Across several nodes, the scheduler must listen on an
    address the compute nodes reach (a non-loopback ``--host``/interface, e.g. ``ib0``), ``interface``
    must name the nodes' network interface, and ``workdir`` (job logs) and ``sys.executable`` must
    be on a shared file system.

    Configure by class attributes, e.g. in ``jupyter_server_config.py``::

        from clustermgr_lab.backends import BACKENDS
        from clustermgr_lab.backends.slurm import SlurmBackend

        class GpuPartition(SlurmBackend):
            name = "slurm-gpu"
            queue = "gpu"
            walltime = "04:00:00"

        BACKENDS[GpuPartition.name] = GpuPartition

    ``None`` leaves a setting to dask-jobqueue's configuration (``jobqueue.slurm.*``; its default
    walltime is 00:30:00 — a worker whose job hits it ends and is replaced like any that exits).

    Jobs that end on their own (walltime, node failure, ``scancel`` from outside) are noticed by
    a ``squeue`` poll every ``poll_interval`` seconds while this cluster has jobs, and reported
    through ``on_worker_exit(name, None)`` (squeue gives no exit code). Job ids and names are
    stored with the cluster (:meth:`process_records`), so that a restarted server re-adopts the
    jobs that still run (:meth:`adopt`), or cancels them with the rest of a cluster it cannot re-adopt.
    """

    name = "slurm"
    description = "Scheduler on this machine, each worker one SLURM job (dask-jobqueue job scripts)"
    workers_before_scheduler = False  # a job script needs the scheduler's address

    queue: str | None = None  # partition (-p)
    account: str | None = None  # -A
    walltime: str | None = None  # -t, e.g. "01:00:00"
    job_extra_directives: tuple[str, ...] = ()  # extra "#SBATCH ..." lines, e.g. ("--qos=debug",)
    job_script_prologue: tuple[str, ...] = ()  # shell lines before the worker, e.g. ("module load cuda",)
    interface: str | None = "lo"  # the workers' network interface
    gpu_directive: str | None = "--gres=gpu:{gpus}"  # for groups with GPUs; None if SLURM has no GRES
    job_name_prefix = "clustermgr"
    poll_interval = 2.0
    command_timeout = 60.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._jobs: dict[str, str] = {}  # worker name -> SLURM job id
        self._poller: asyncio.Task | None = None

    # -- job scripts -------------------------------------------------------------------------------

    def job_name(self, name: str) -> str:
        return f"{self.job_name_prefix}-{self.cluster_id}-{name}"

    def job_script(self, group: WorkerGroup, name: str) -> str:
        """The batch script of worker ``name``, as dask-jobqueue's ``SLURMJob`` writes it."""
        SLURMJob = _slurm_job_class()
        # dask-jobqueue rounds --memory-limit to 3 digits; a later flag wins, so give the exact bytes.
        extra = ["--memory-limit", str(group.memory)]
        if group.worker_resources:
            resources = " ".join(f"{k}={v}" for k, v in group.worker_resources.items())
            extra += ["--resources", shlex.quote(resources)]  # the command line is joined into a shell script
        directives = list(self.job_extra_directives)
        if group.gpus and self.gpu_directive:
            directives.append(self.gpu_directive.format(gpus=group.gpus))
        job = SLURMJob(
            scheduler=self.address,
            name=name,  # becomes `dask worker --name NAME`: how connected workers are matched
            job_name=self.job_name(name),
            cores=group.threads,
            memory=group.memory,
            processes=1,
            interface=self.interface,
            python=sys.executable,
            log_directory=str(self.workdir),
            queue=self.queue,
            account=self.account,
            walltime=self.walltime,
            job_extra_directives=directives,
            job_script_prologue=list(self.job_script_prologue),
            worker_extra_args=extra,
        )
        return job.job_script()

    # -- starting and stopping workers ---------------------------------------------------------------

    async def _submit(self, group: WorkerGroup, name: str) -> None:
        script = self.workdir / f"{name}.sbatch"
        script.write_text(self.job_script(group, name))
        started = asyncio.get_running_loop().time()
        code, out, err = await _run("sbatch", "--parsable", str(script), timeout=self.command_timeout)
        match = re.match(r"\s*(\d+)", out)
        if code != 0 or match is None:
            raise BackendError(f"sbatch failed for worker {name}: {(err or out).strip()}")
        self._jobs[name] = match.group(1)
        self._notify_change()
        elapsed = asyncio.get_running_loop().time() - started
        log.info("cluster %s: worker %s is SLURM job %s (sbatch took %.3f s)", self.cluster_id, name, match.group(1), elapsed)

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

    async def _squeue(self, job_ids: list[str]) -> dict[str, tuple[str, str]] | None:
        """job id -> (job name, state) for the active ones of ``job_ids``; None if SLURM did not answer."""
        code, out, err = await _run("squeue", "-h", "-o", "%i|%j|%T", "-j", ",".join(job_ids), timeout=self.command_timeout)
        if code != 0:
            return {} if "Invalid job id" in err else None  # only the first: every id is unknown
        jobs = {}
        for line in out.splitlines():
            job_id, _, rest = line.strip().partition("|")
            job_name, _, state = rest.partition("|")
            jobs[job_id] = (job_name, state)
        return jobs

    async def _active(self, names: list[str]) -> list[str] | None:
        """Those of ``names`` whose job is still queued or running (not completing)."""
        wanted = {self._jobs[n]: n for n in names if n in self._jobs}
        if not wanted:
            return []
        jobs = await self._squeue(list(wanted))
        if jobs is None:
            return None
        return [
            name
            for job_id, name in wanted.items()
            if job_id in jobs and jobs[job_id][0] == self.job_name(name) and jobs[job_id][1] in ACTIVE_STATES
        ]

    async def _poll(self) -> None:
        """Notice jobs that ended on their own, while there are jobs to watch."""
        while self._jobs:
            await asyncio.sleep(self.poll_interval)
            watched = [n for n in self._jobs if n not in self._stopping]
            try:
                active = await self._active(watched)
            except BackendError as exc:
                log.warning("cluster %s: squeue failed: %s", self.cluster_id, exc)
                continue
            if active is None:
                continue
            for name in set(watched) - set(active):
                if name in self._stopping or name not in self._jobs:
                    continue  # being cancelled by us meanwhile
                job_id = self._jobs.pop(name)
                self._notify_change()
                log.warning("cluster %s: SLURM job %s of worker %s ended on its own", self.cluster_id, job_id, name)
                if self.on_worker_exit:
                    self.on_worker_exit(name, None)

    async def scale_down(self, names: list[str]) -> None:
        """``scancel`` the jobs, then wait (up to ``stop_timeout``) until squeue no longer lists them."""
        names = [n for n in names if n in self._jobs]
        if not names:
            return
        self._stopping.update(names)
        try:
            job_ids = [self._jobs[n] for n in names]
            code, out, err = await _run("scancel", *job_ids, timeout=self.command_timeout)
            if code != 0:
                log.warning("cluster %s: scancel %s: %s", self.cluster_id, " ".join(job_ids), (err or out).strip())
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.stop_timeout
            while loop.time() < deadline:
                jobs = await self._squeue(job_ids)
                if jobs is not None and not jobs:
                    break
                await asyncio.sleep(0.1)
            else:
                log.warning("cluster %s: jobs %s still listed %g s after scancel", self.cluster_id, job_ids, self.stop_timeout)
            for name in names:
                self._jobs.pop(name, None)
            self._notify_change()
        finally:
            self._stopping.difference_update(names)

    async def close(self) -> None:
        await self._stop_polling()
        await self.scale_down(list(self._jobs))
        await self._stop(SCHEDULER)
        await super().detach()
        self.address = None

    async def _stop_polling(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None

    async def detach(self) -> None:
        await self._stop_polling()
        await super().detach()

    # -- what is left behind ---------------------------------------------------------------------------

    def pids(self) -> dict[str, int]:
        """Only the scheduler runs as a process of this server; workers are jobs (see :meth:`job_ids`)."""
        return super().pids()

    def job_ids(self) -> dict[str, str]:
        """SLURM job ids by worker name."""
        return dict(self._jobs)

    def worker_log(self, name: str) -> Path | None:
        """The job's standard error, as dask-jobqueue names it (``<job name>-<job id>.err``); the latest."""
        logs = sorted(self.workdir.glob(f"{self.job_name(name)}-*.err"), key=lambda p: p.stat().st_mtime)
        return logs[-1] if logs else None

    def process_records(self) -> dict[str, dict[str, Any]]:
        """The scheduler's PID (see LocalBackend), and each worker's job id and job name."""
        records = super().process_records()
        records.update({name: {"job_id": job_id, "job_name": self.job_name(name)} for name, job_id in self._jobs.items()})
        return records

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        """Adopt the scheduler process, and the recorded jobs that squeue lists, under their recorded name, as active.

        A recorded id that SLURM has since given to another job (e.g. after a SLURM restart) is
        left alone: the job name must match too.
        """
        scheduler = {n: r for n, r in records.items() if "pid" in r}
        await super().adopt(endpoint, scheduler)
        jobs = {n: str(r["job_id"]) for n, r in records.items() if r.get("job_id") and r.get("job_name") == self.job_name(n)}
        if jobs:
            self._jobs.update(jobs)
            active = await self._active(list(jobs))
            if active is None:
                log.warning("cluster %s: squeue did not answer; keeping the recorded jobs %s", self.cluster_id, jobs)
                active = list(jobs)
            for name in set(jobs) - set(active):
                del self._jobs[name]
            self._notify_change()
            if self._jobs:
                self._poller = asyncio.ensure_future(self._poll())
        return set(self._jobs)
