"""SLURM backend: the scheduler runs next to the Jupyter server, each worker is one SLURM job.

The batch engine (:mod:`.batch`) over dask-jobqueue's ``SLURMJob`` (so ``~/.config/dask/jobqueue.yaml``
settings apply to whatever is not set here), with ``squeue`` for job states and why jobs wait.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from clustermgr_lab.backends.batch.backend import BATCH_OPTIONS, BatchBackend
from clustermgr_lab.backends.batch.jobs import JobState, run_command
from clustermgr_lab.cluster.logs import read_tail
from clustermgr_lab.domain import options as opt
from clustermgr_lab.domain.departures import from_job_state, from_slurm_output
from clustermgr_lab.domain.spec import WorkerGroup

# A job in one of these states queues or runs; in any other (or with no line at all) its worker has ended.
ACTIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "SUSPENDED",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
}
# Listed after the worker ended, while SLURM kills what is left of the job and cleans up (up to KillWait and the epilog).
LISTED_STATES = {"COMPLETING", "SIGNALING", "STAGE_OUT"}


SCONTROL_FIELD = re.compile(r"\b(JobState|Reason)=(\S+)")


class SlurmBackend(BatchBackend):
    """Each worker is one SLURM job; the scheduler is a local process.

    The scheduler listens on 127.0.0.1 and the workers use ``interface = "lo"``: right for a
    single-node SLURM (CI, a workstation). Across several nodes, set the template options
    ``scheduler_interface`` (or ``scheduler_host``) to an address the compute nodes reach and
    ``interface`` to the nodes' network interface; the work folder (job logs) and ``python`` must
    be on a shared file system (see docs/hpc.md).

    A queued job's reason is squeue's (``Resources``, ``Priority``, ``QOSMaxJobsPerUserLimit``...).
    Why a job ended (:meth:`final_state`): ``sacct`` where SLURM keeps accounting, else ``scontrol
    show job`` (which lists a finished job for ``MinJobAge``, 300 s by default), else slurmstepd's
    line in the job's standard error.
    """

    name = "slurm"
    description = "Scheduler on this machine, each worker one SLURM job (dask-jobqueue job scripts)"
    template_options = {
        **BATCH_OPTIONS,
        "qos": opt.BackendOption(opt.word, "quality of service (--qos)"),
        "nice": opt.BackendOption(opt.integer, "lower the jobs' priority by this much (--nice)", kind="integer"),
        "slurm_conf": opt.BackendOption(
            opt.absolute_path, "the slurm.conf of the SLURM cluster to use (SLURM_CONF for sbatch, squeue, scancel)"
        ),
    }
    gpu_directive: str | None = "--gres=gpu:{gpus}"  # None where SLURM has no GPU GRES
    qos: str | None = None
    nice: int | None = None
    slurm_conf: str | None = None  # None: SLURM's default (SLURM_CONF of the server, else /etc/slurm/slurm.conf)

    jobqueue_job = ("slurm", "SLURMJob")
    config_name = "slurm"
    cancel_command = "scancel"

    def command_env(self) -> dict[str, str]:
        return {"SLURM_CONF": self.slurm_conf} if self.slurm_conf else {}

    def job_record_extra(self) -> dict[str, Any]:
        return {"slurm_conf": self.slurm_conf} if self.slurm_conf else {}

    def adopt_system(self, records: dict[str, dict[str, Any]]) -> None:
        """The recorded jobs' SLURM (their ``slurm_conf``) wins: that is where they run, whatever the template says now."""
        for record in records.values():
            if record.get("job_id") and record.get("slurm_conf"):
                self.slurm_conf = record["slurm_conf"]
                return

    def system_directives(self, group: WorkerGroup) -> list[str]:
        # A job whose node fails ends as NODE_FAIL, reported, and the cluster starts a replacement; a requeued
        # job would come back later, by SLURM's choice, next to that replacement (a scheduler at a new address).
        own = ["--no-requeue"]
        own += [f"--qos={self.qos}"] if self.qos else []
        own += [f"--nice={self.nice}"] if self.nice is not None else []
        return own

    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        return {**super().job_kwargs(group, name), "account": self.account}

    @staticmethod
    def parse_squeue(out: str) -> dict[str, JobState]:
        """job id -> state, from ``squeue -h -o '%i|%j|%T|%r'``."""
        jobs = {}
        for line in out.splitlines():
            job_id, job_name, state, reason = (line.strip().split("|", 3) + ["", "", ""])[:4]
            waits = (reason if reason not in ("", "None") else "queued") if state == "PENDING" else None
            active = state in ACTIVE_STATES
            jobs[job_id] = JobState(
                job_name,
                active=active,
                pending_reason=waits,
                finishing=not active and state in LISTED_STATES,
                state=state or None,
            )
        return jobs

    async def job_states(self, job_ids: list[str]) -> dict[str, JobState] | None:
        code, out, err = await run_command(
            "squeue",
            "-h",
            "-o",
            "%i|%j|%T|%r",
            "-t",
            "all",  # also jobs that have just ended (NODE_FAIL, TIMEOUT...): their end state is the worker's exit reason
            "-j",
            ",".join(job_ids),
            timeout=self.command_timeout,
            env=self.command_env(),
        )
        if code != 0:
            return {} if "Invalid job id" in err else None  # only the first: every id is unknown
        return self.parse_squeue(out)

    def worker_log(self, name: str) -> Path | None:
        """The job's standard error, as dask-jobqueue names it (``<job name>-<job id>.err``); the latest."""
        logs = sorted(self.workdir.glob(f"{self.job_name(name)}-*.err"), key=lambda p: p.stat().st_mtime)
        return logs[-1] if logs else None

    async def final_state(self, name: str, job_id: str) -> tuple[str, str] | None:
        """Why the job ended: ``sacct``'s state (``CANCELLED by 1000``), else ``scontrol``'s, else the job's stderr."""
        code, out, _ = await run_command("sacct", "-n", "-X", "-P", "-o", "State,Reason", "-j", job_id,
                                         timeout=self.command_timeout, env=self.command_env())  # fmt: skip
        line = out.strip().splitlines()[0] if code == 0 and out.strip() else ""
        state, _, reason = line.partition("|")
        if not state:  # no accounting ("Slurm accounting storage is disabled"): the controller's memory
            code, out, _ = await run_command(
                "scontrol", "show", "job", "-o", job_id, timeout=self.command_timeout, env=self.command_env()
            )
            fields = dict(SCONTROL_FIELD.findall(out)) if code == 0 else {}
            state, reason = fields.get("JobState", ""), fields.get("Reason")
        found = from_job_state(job_id, state, reason, cancelled_by_us=False) if state else None
        if found is None or found[0] == "exit":
            log = self.worker_log(name)
            text = await asyncio.get_running_loop().run_in_executor(None, read_tail, log) if log else ""
            found = from_slurm_output(text) or found
        return found
