"""HTCondor backend: each worker one job, states from ``condor_q``."""

from __future__ import annotations

import re
from typing import Any

from clustermgr_lab.backends.batch.backend import BATCH_OPTIONS, BatchBackend
from clustermgr_lab.backends.batch.jobs import JobState, JobText, run_command
from clustermgr_lab.domain.spec import WorkerGroup

#: What ``condor_submit`` prints: "1 job(s) submitted to cluster 17."
CLUSTER_ID = r"submitted to cluster (\d+)"


class HTCondorBackend(BatchBackend):
    """HTCondor: ``condor_submit`` / ``condor_rm`` / ``condor_q``. Not tested against a real HTCondor here."""

    name = "htcondor"
    description = "Scheduler on this machine, each worker one HTCondor job (dask-jobqueue job scripts)"
    template_options = {k: v for k, v in BATCH_OPTIONS.items() if k not in ("queue", "account", "walltime")}
    STATUS = {"1": "Idle", "5": "Held", "7": "Suspended"}

    jobqueue_job = ("htcondor", "HTCondorJob")
    config_name = "htcondor"
    cancel_command = "condor_rm"

    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        kwargs = super().job_kwargs(group, name)
        for unsupported in ("queue", "walltime", "job_name"):
            kwargs.pop(unsupported)
        kwargs["disk"] = "1 GiB"
        return kwargs

    def job_id(self, text: JobText, out: str) -> str:
        """As ``HTCondorJob`` reads it: the cluster ``condor_submit`` names, as ``<cluster>.0`` (one job per submit)."""
        match = re.search(CLUSTER_ID, out)
        if match is None:
            raise ValueError(
                "Could not parse cluster id from submission command output.\n"
                f"Cluster id regexp is {CLUSTER_ID!r}\nSubmission command output is:\n{out}"
            )
        return f"{match.group(1)}.0"

    async def job_states(self, job_ids: list[str]) -> dict[str, JobState] | None:
        code, out, err = await run_command(
            "condor_q",
            *job_ids,
            "-af",
            "ClusterId",
            "ProcId",
            "JobStatus",
            timeout=self.command_timeout,
            env=self.command_env(),
        )
        if code != 0:
            return None
        jobs = {}
        for line in out.splitlines():
            cluster, proc, status = (line.split() + ["", "", ""])[:3]
            job_id = f"{cluster}.{proc}"
            if job_id in job_ids:
                jobs[job_id] = JobState("", active=status not in ("3", "4"), pending_reason=self.STATUS.get(status))
        return jobs
