"""Grid Engine backend (SGE, Son of Grid Engine, Univa/Altair): each worker one job, states from ``qstat -xml``."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from typing import Any

from clustermgr_lab.backends.batch.backend import BATCH_OPTIONS, BatchBackend
from clustermgr_lab.backends.batch.jobs import JobState, run_command
from clustermgr_lab.domain import options as opt
from clustermgr_lab.domain.spec import WorkerGroup


class SGEBackend(BatchBackend):
    """Grid Engine (SGE, Son of Grid Engine, Univa/Altair): ``qsub`` / ``qdel`` / ``qstat -xml``.

    A queued job's reason is its state code (``qw``, ``hqw``, ``Eqw``): qstat gives no more
    unless the site turns on ``schedd_job_info``.
    """

    name = "sge"
    description = "Scheduler on this machine, each worker one Grid Engine job (dask-jobqueue job scripts)"
    template_options = {
        **{k: v for k, v in BATCH_OPTIONS.items() if k != "account"},
        "project": opt.BackendOption(opt.word, "project (-P) the jobs belong to"),
        "resource_spec": opt.BackendOption(opt.resource_list, "resources (-l), e.g. h_vmem=4G,mem_req=4G"),
    }
    project: str | None = None
    resource_spec: str | None = None

    jobqueue_job = ("sge", "SGEJob")
    config_name = "sge"
    cancel_command = "qdel"

    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        return {**super().job_kwargs(group, name), "project": self.project, "resource_spec": self.resource_spec}

    @staticmethod
    def parse_qstat_xml(text: str) -> dict[str, JobState]:
        """job id -> state, from ``qstat -xml`` (its queued and running jobs)."""
        jobs = {}
        for entry in ElementTree.fromstring(text).iter("job_list"):
            state = entry.findtext("state", "")
            running = "r" in state or "t" in state
            jobs[entry.findtext("JB_job_number", "")] = JobState(
                name=entry.findtext("JB_name", ""),
                active="d" not in state,
                pending_reason=None if running else state,
                finishing="d" in state,  # deleted, still listed until the execd has killed it
            )
        return jobs

    async def job_states(self, job_ids: list[str]) -> dict[str, JobState] | None:
        code, out, err = await run_command(
            "qstat", "-xml", "-u", "*", timeout=self.command_timeout, env=self.command_env()
        )
        if code != 0:
            return None
        listed = self.parse_qstat_xml(out)
        return {job_id: state for job_id, state in listed.items() if job_id in job_ids}
