"""PBS backend (PBS Pro, OpenPBS, Torque): each worker one job, states from ``qstat``."""

from __future__ import annotations

from typing import Any

from clustermgr_lab.backends.batch.backend import BatchBackend
from clustermgr_lab.backends.batch.jobs import JobState, run_command
from clustermgr_lab.domain.spec import WorkerGroup


class PBSBackend(BatchBackend):
    """PBS Pro / OpenPBS / Torque: ``qsub`` / ``qdel`` / ``qstat``. Not tested against a real PBS here."""

    name = "pbs"
    description = "Scheduler on this machine, each worker one PBS job (dask-jobqueue job scripts)"

    jobqueue_job = ("pbs", "PBSJob")
    config_name = "pbs"
    cancel_command = "qdel"

    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        return {**super().job_kwargs(group, name), "account": self.account}

    async def job_states(self, job_ids: list[str]) -> dict[str, JobState] | None:
        # `qstat JOBID...`: "Job id  Name  User  Time Use S Queue"; state Q (queued), H (held), R, E...
        code, out, err = await run_command("qstat", *job_ids, timeout=self.command_timeout, env=self.command_env())
        jobs = {}
        for line in out.splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[0].split(".")[0] in {j.split(".")[0] for j in job_ids}:
                full = next(j for j in job_ids if j.split(".")[0] == fields[0].split(".")[0])
                state = fields[4]
                jobs[full] = JobState(
                    "", active=state not in ("C", "F", "X"), pending_reason=None if state in ("R", "E") else state
                )
        return jobs if code == 0 or jobs or "Unknown Job" in err else None
