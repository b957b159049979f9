"""LSF backend (IBM Spectrum LSF): each worker one job submitted on stdin, states from ``bjobs``."""

from __future__ import annotations

from typing import Any

from clustermgr_lab.backends.batch.backend import BatchBackend
from clustermgr_lab.backends.batch.jobs import JobState, run_command
from clustermgr_lab.domain.spec import WorkerGroup


class LSFBackend(BatchBackend):
    """IBM Spectrum LSF: ``bsub < script`` / ``bkill`` / ``bjobs``. Not tested against a real LSF here."""

    name = "lsf"
    description = "Scheduler on this machine, each worker one LSF job (dask-jobqueue job scripts)"
    submit_from_stdin = True

    jobqueue_job = ("lsf", "LSFJob")
    config_name = "lsf"
    cancel_command = "bkill"

    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        return {**super().job_kwargs(group, name), "project": self.account}

    async def job_states(self, job_ids: list[str]) -> dict[str, JobState] | None:
        fmt = "jobid job_name stat pend_reason delimiter='|'"
        code, out, err = await run_command(
            "bjobs", "-noheader", "-o", fmt, *job_ids, timeout=self.command_timeout, env=self.command_env()
        )
        jobs = {}
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) == 4 and parts[0] in job_ids:
                stat = parts[2]
                reason = (parts[3].strip() or stat) if stat in ("PEND", "PSUSP") else None
                jobs[parts[0]] = JobState(parts[1], active=stat not in ("DONE", "EXIT"), pending_reason=reason)
        return jobs
