"""Given a real single-node SLURM, a worker whose job is cancelled from outside (``scancel``) or reaches its
walltime leaves an event with the job's final state as its cause, and its job output stays readable as a log.

This SLURM keeps no accounting (``sacct``: "Slurm accounting storage is disabled"): the states come from
``scontrol show job`` (finished jobs stay listed for ``MinJobAge``), else from slurmstepd's line in the job's
standard error. One cluster of two one-minute jobs serves both cases.
"""

from __future__ import annotations

import asyncio

import pytest

from .helpers import call, delete_and_wait, requires_slurm, run, running_with, subprocess_env, until, wait_for

WORKERS = {"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [
        {
            "name": "one-minute",
            "description": "SLURM jobs with a walltime of one minute",
            "backend": "slurm",
            "options": {"walltime": "00:01:00"},
            "spec": {"groups": [WORKERS]},
        }
    ]
    return jp_server_config


async def cause_of(jp_fetch, cluster_id: str, worker: str) -> dict | None:
    _, body = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    return next((e["cause"] for e in body["events"] if (e.get("cause") or {}).get("worker") == worker), None)


@pytest.mark.slurm
@requires_slurm
async def test_a_job_cancelled_from_outside_and_one_past_its_walltime_say_so(jp_fetch, jp_serverapp):
    # Given a cluster of two SLURM workers whose jobs have a walltime of one minute
    spec = {"groups": [{**WORKERS, "count": 2}]}
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "one-minute", "spec": spec}, expect=202)
    cluster_id = cluster["id"]
    try:
        # (the job to be cancelled gets 10 minutes as soon as it is submitted, so that on a loaded machine, where
        # two workers may take most of a minute to connect, its walltime cannot end it first)
        backend = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).backend
        job_of_second = await until(lambda: backend.job_ids().get("default-2"), 120, "default-2's job", step=0.1)
        code, _, err = await run(
            "scontrol", "update", f"JobId={job_of_second}", "TimeLimit=00:10:00", env=subprocess_env(), timeout=60
        )
        assert code == 0, err
        await wait_for(jp_fetch, cluster_id, running_with(2), 180, "2 workers")

        # When the second worker's job is cancelled from outside the server
        code, _, err = await run("scancel", job_of_second, env=subprocess_env(), timeout=60)
        assert code == 0, err
        # Then its departure says the job was cancelled from outside, with the job id
        cancelled = await until(lambda: cause_of(jp_fetch, cluster_id, "default-2"), 60, "default-2's cause")
        assert cancelled["kind"] == "CANCELLED" and job_of_second in cancelled["detail"], cancelled

        # When the first worker's job reaches its walltime
        timed_out = await until(lambda: cause_of(jp_fetch, cluster_id, "default-1"), 150, "default-1's cause", step=1)
        # Then its departure says TIMEOUT
        assert timed_out["kind"] == "TIMEOUT" and "walltime" in timed_out["detail"], timed_out
        assert timed_out["group"] == "default"

        # And both jobs' standard error stays readable as the workers' logs
        _, listing = await call(jp_fetch, "GET", "clusters", cluster_id, "logs", expect=200)
        logs = {entry["name"]: entry for entry in listing["logs"]}
        assert {"scheduler", "default-1", "default-2"} <= set(logs)
        assert logs["default-1"]["state"] == "gone" and logs["default-1"]["size"] > 0
        _, chunk = await call(jp_fetch, "GET", "clusters", cluster_id, "logs", "default-1", expect=200)
        assert "DUE TO TIME LIMIT" in chunk["text"]
    finally:
        await asyncio.shield(delete_and_wait(jp_fetch, cluster_id, timeout=120))
