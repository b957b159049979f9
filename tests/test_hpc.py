"""Given batch templates a site configures (backend options, user options), on a real single-node SLURM.

Pure tests check what is refused at server start and what job scripts dask-jobqueue writes for
each batch system; the ``slurm`` tests run real jobs: why workers wait, a refused job, and
adaptive mode under a burst and at idle.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustermgr_lab.backends import BACKENDS, HTCondorBackend, LSFBackend, PBSBackend, SGEBackend, SlurmBackend
from clustermgr_lab.backends.batch.jobs import write_job
from clustermgr_lab.backends.local.backend import scheduler_command
from clustermgr_lab.domain.spec import parse_spec
from clustermgr_lab.manager.cluster_manager import ClusterManager

from . import helpers
from .helpers import call, cluster_client, held_burst, requires_slurm, running_with, slurm_jobs, squeue, until, wait_for
from .test_client_cli import clustermgr, server  # noqa: F401 - fixtures

ONE_CPU = {"name": "default", "count": 0, "threads": 1, "memory": "300 MiB"}
GROUP = parse_spec({"groups": [{"name": "gpu", "count": 1, "threads": 2, "memory": "300 MiB", "gpus": 1}]}).groups[0]
SITE = {
    "name": "hpc",
    "description": "SLURM, with what a site sets and what a user may choose",
    "backend": "slurm",
    "options": {
        "walltime": "00:30:00",
        "job_script_prologue": ["export CLUSTERMGR_PROLOGUE=yes"],
        "scheduler_interface": "lo",  # where compute nodes reach it (here: the one node's loopback)
        "interface": "lo",
    },
    "user_options": {
        "walltime": {"label": "Walltime", "choices": ["00:20:00", "00:30:00"]},
        "nice": {"type": "integer", "default": 0, "minimum": 0, "maximum": 100},
    },
    "spec": {"groups": [ONE_CPU]},
}
GRID_ENGINE = {"name": "sge", "backend": "sge", "options": {"walltime": "00:10:00"}, "spec": {"groups": [ONE_CPU]}}
NOWHERE = {
    "name": "nowhere",
    "backend": "slurm",
    "options": {"queue": "nosuchpartition"},
    "spec": {"groups": [ONE_CPU]},
}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [SITE, NOWHERE, GRID_ENGINE]
    return jp_server_config


def grid_engine_unusable() -> str | None:
    """Why Grid Engine cannot be used here, or None when it can."""
    try:
        done = subprocess.run(["qstat", "-f"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"qstat: {exc} (start one with: bash ci/gridengine/start-gridengine.sh)"
    if done.returncode != 0 or "all.q@" not in done.stdout:
        return f"no Grid Engine queue all.q (qstat: {done.stderr.strip()}); start one with: bash ci/gridengine/start-gridengine.sh"
    return None


# Outside CI a machine without Grid Engine skips these; in CI (`make test` starts it) they run, and fail if it is missing.
_no_grid_engine = grid_engine_unusable()
requires_grid_engine = pytest.mark.skipif(
    _no_grid_engine is not None and not os.environ.get("CI"),
    reason=f"Grid Engine is not usable here: {_no_grid_engine}",
)

# -- refused at server start ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda t: t["options"].update(walltime="forever"), "templates[0].options.walltime"),
        (lambda t: t["options"].update(partition="gpu"), "templates[0].options.partition"),
        (lambda t: t["options"].update(queue="gpu\n#SBATCH --exclusive"), "templates[0].options.queue"),
        (
            lambda t: t["options"].update(job_script_prologue=["ok", "two\nlines"]),
            "templates[0].options.job_script_prologue[1]",
        ),
        (lambda t: t["options"].update(gpu_directive="--gres=gpu"), "templates[0].options.gpu_directive"),
        (
            lambda t: t["user_options"]["walltime"].update(default="01:00:00"),
            "templates[0].user_options.walltime.default",
        ),
        (
            lambda t: t["user_options"]["walltime"].update(choices=["soon"]),
            "templates[0].user_options.walltime.choices[0]",
        ),
        (
            lambda t: t["user_options"].update(colour={"type": "string", "default": "red"}),
            "templates[0].user_options.colour",
        ),
        (lambda t: t["user_options"]["walltime"].update(minimum=1), "templates[0].user_options.walltime"),
        (lambda t: t["user_options"]["nice"].update(default=101), "templates[0].user_options.nice.default"),
    ],
)
def test_a_bad_template_option_stops_the_server_naming_template_and_option(tmp_path, change, named):
    # Given a site template with one mistake in its options or user options
    template = {
        **SITE,
        "options": dict(SITE["options"]),
        "user_options": {k: dict(v) for k, v in SITE["user_options"].items()},
    }
    change(template)
    # When the server starts, Then it refuses, naming the template and the option
    with pytest.raises(ValueError) as refused:
        ClusterManager(
            workdir=str(tmp_path), templates=[template], include_builtin_templates=False, default_template="hpc"
        )
    assert "template 'hpc'" in str(refused.value) and named in str(refused.value), str(refused.value)


def test_every_batch_option_reaches_the_slurm_job_script(tmp_path):
    # Given a SLURM backend with every option a site may set
    options = {
        "queue": "gpu", "account": "proj42", "walltime": "04:00:00", "qos": "high", "nice": 10,
        "job_extra_directives": ["--constraint=a100"], "job_script_prologue": ["module load cuda"],
        "interface": "ib0", "python": "/shared/env/bin/python", "local_directory": "/scratch/dask",
        "gpu_directive": "--gpus-per-task={gpus}",
    }  # fmt: skip
    backend = SlurmBackend("abc123", tmp_path, options=options)
    backend.address = "tcp://10.0.0.1:8786"
    # When the job script of a GPU worker is written
    script = backend.job_script(GROUP, "gpu-1")
    # Then each option is where SLURM and the worker read it
    directives = [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]
    for expected in (
        "-p gpu",
        "-A proj42",
        "-t 04:00:00",
        "--qos=high",
        "--nice=10",
        "--constraint=a100",
        "--gpus-per-task=1",
    ):
        assert expected in directives, (expected, directives)
    assert "module load cuda" in script.splitlines()
    command = script.strip().splitlines()[-1]
    assert command.startswith(
        "exec /shared/env/bin/python -m distributed.cli.dask_worker tcp://10.0.0.1:8786 --name gpu-1 "
    )
    assert "--interface ib0" in command and "--local-directory /scratch/dask" in command


def test_the_scheduler_listens_where_the_compute_nodes_reach_it():
    # Given a scheduler host or interface from a template, Then the scheduler's command line says so
    assert scheduler_command(Path("s.json"), "10.0.0.1")[3:5] == ["--host", "10.0.0.1"]
    assert scheduler_command(Path("s.json"), "10.0.0.1", interface="ib0")[3:5] == ["--interface", "ib0"]
    assert "--dashboard-address" in (command := scheduler_command(Path("s.json"), "10.0.0.1"))
    assert command[command.index("--dashboard-address") + 1] == "127.0.0.1:0"  # only through the proxy


@pytest.mark.parametrize(
    "backend, expected",
    [
        (SGEBackend, ["#$ -q short", "#$ -P proj42", "#$ -l h_rt=01:00:00"]),
        (PBSBackend, ["#PBS -q short", "#PBS -A proj42", "#PBS -l walltime=01:00:00"]),
        (LSFBackend, ["#BSUB -q short", '#BSUB -P "proj42"', "#BSUB -W 01:00"]),
        (HTCondorBackend, ["MY.DaskWorkerCores = 2", "MY.DaskWorkerMemory = 314572800"]),
    ],
)  # fmt: skip
def test_each_batch_system_is_one_job_class_and_its_commands(tmp_path, backend, expected):
    # Given a template's options for a batch system other than SLURM
    options = {"queue": "short", "walltime": "01:00:00", "account": "proj42", "project": "proj42"}
    options = {k: v for k, v in options.items() if k in backend.template_options}
    instance = backend("abc123", tmp_path, options=options)
    instance.address = "tcp://10.0.0.1:8786"
    # When a worker's job is written
    job = write_job(instance.job_request(GROUP, "gpu-1"))
    script = job.script
    # Then dask-jobqueue's class for that system writes it, with the options as its directives
    for line in expected:
        assert line in script, (line, script)
    assert "dask_worker tcp://10.0.0.1:8786 --name gpu-1 " in script
    assert BACKENDS[backend.name] is backend
    assert (job.submit_command.split()[0], instance.cancel_command.split()[0]) == {
        "sge": ("qsub", "qdel"), "pbs": ("qsub", "qdel"), "lsf": ("bsub", "bkill"), "htcondor": ("condor_submit", "condor_rm"),
    }[backend.name]  # fmt: skip


async def test_the_command_line_sets_user_options_and_shows_a_refused_one(clustermgr, server):  # noqa: F811
    # Given the site template, and the command line pointed at the server
    auth = ("--url", server[0], "--token", server[1])
    # When a user option has a value the template does not allow, Then the server's message names it (exit 1)
    code, out, err = await clustermgr("create", "--template", "hpc", "--option", "walltime=01:00:00", *auth)
    assert code == 1 and "options.walltime" in err, (out, err)
    code, _, err = await clustermgr("create", "--template", "hpc", "--option", "walltime", *auth)
    assert code == 2 and "NAME=VALUE" in err
    # When the values are allowed, Then the cluster carries them, numbers as numbers
    options = ("--option", "walltime=00:20:00", "--option", "nice=5")
    code, out, err = await clustermgr("create", "--template", "hpc", "--name", "cli-options", *options, "--json", *auth)
    assert code == 0, err
    assert json.loads(out)["options"] == {"walltime": "00:20:00", "nice": 5}
    code, _, err = await clustermgr("delete", "cli-options", "--wait", *auth)
    assert code == 0, err


# -- real SLURM --------------------------------------------------------------------------------------


def foreign_jobs(prefix: str) -> bool:
    """Whether SLURM lists jobs (queued or running) that are not this test's: they take CPUs or queue ahead."""
    listed = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, timeout=60).stdout.split()
    return any(not name.startswith(prefix) for name in listed)


async def delete_and_wait(jp_fetch, cluster_id: str) -> None:
    """DELETE, wait until the cluster has left the list; by then its jobs have left squeue too."""
    await helpers.delete_and_wait(jp_fetch, cluster_id)
    assert await squeue(f"clustermgr-{cluster_id}-") == {}


@pytest.mark.slurm
@requires_slurm
async def test_user_options_are_checked_and_pending_workers_say_why_they_wait(jp_fetch):
    # Given the site template: the user may pick a walltime from a list and a nice value in 0-100
    _, templates = await call(jp_fetch, "GET", "templates", expect=200)
    (site,) = [t for t in templates["templates"] if t["name"] == "hpc"]
    assert [(o["name"], o["default"], o["choices"]) for o in site["user_options"]] == [
        ("walltime", "00:30:00", ["00:20:00", "00:30:00"]), ("nice", 0, None),
    ]  # fmt: skip
    # When a user asks for values the template does not allow, Then each is refused, naming the option
    for options, field in [
        ({"walltime": "01:00:00"}, "options.walltime"),
        ({"nice": 101}, "options.nice"),
        ({"nice": "high"}, "options.nice"),
        ({"queue": "gpu"}, "options.queue"),
    ]:
        status, error = await call(
            jp_fetch, "POST", "clusters", body={"template": "hpc", "options": options}, expect=400
        )
        assert error["field"] == field, error
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []

    # When a cluster of 4 one-CPU workers is created with allowed values, on the 2-CPU node
    spec = {"groups": [{**ONE_CPU, "count": 4}]}
    body = {"template": "hpc", "name": "waits", "spec": spec, "options": {"walltime": "00:20:00", "nice": 5}}
    _, cluster = await call(jp_fetch, "POST", "clusters", body=body, expect=202)
    cluster_id, prefix = cluster["id"], f"clustermgr-{cluster['id']}-"
    foreign_before = foreign_jobs(prefix)
    try:
        # Then the cluster carries its options
        assert cluster["options"] == {"walltime": "00:20:00", "nice": 5}

        # And once SLURM has placed what fits, the API's reasons are squeue's, per cluster and per group
        async def agrees():
            jobs = await asyncio.to_thread(slurm_jobs, prefix)
            _, now = await call(jp_fetch, "GET", "clusters", cluster_id)
            pending = collections.Counter(reason for _, state, reason in jobs.values() if state == "PENDING")
            running = sum(1 for _, state, _ in jobs.values() if state == "RUNNING")
            workers = now["workers"]
            if len(jobs) == 4 and workers["running"] == running and workers["pending_reasons"] == dict(pending):
                return jobs, now
            return None

        jobs, cluster = await until(agrees, 120, "the API to report squeue's reasons", step=0.5)
        workers = cluster["workers"]
        assert workers["running"] <= 2 and workers["pending"] >= 2
        if not foreign_before and not foreign_jobs(prefix):
            assert (workers["running"], workers["pending"]) == (2, 2) and "Resources" in workers["pending_reasons"]
        else:  # another job on the shared node may hold the CPUs (Resources) or be queued ahead (Priority)
            assert set(workers["pending_reasons"]) <= {"Resources", "Priority"}, workers["pending_reasons"]
        assert workers["groups"][0]["pending_reasons"] == workers["pending_reasons"]
        pending_ids = {job_id for job_id, state, _ in jobs.values() if state == "PENDING"}
        assert {w["job_id"] for w in workers["waiting"]} == pending_ids
        # And SLURM got the user's walltime and nice value, and the site's prologue ran in the job
        job_id = next(iter(pending_ids))
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
        assert "TimeLimit=00:20:00" in shown and "Nice=5" in shown, shown
        # And the scheduler listens on the template's interface
        assert cluster["scheduler_address"].startswith("tls://127.0.0.1:")
        async with cluster_client(cluster, asynchronous=True) as client:
            seen = await client.run(lambda: __import__("os").environ.get("CLUSTERMGR_PROLOGUE"))
            assert set(seen.values()) == {"yes"}
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


@pytest.mark.slurm
@requires_slurm
async def test_a_job_slurm_refuses_sets_the_groups_error_once_without_retrying(jp_fetch):
    # Given a template whose partition SLURM does not have
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "nowhere"}, expect=202)
    cluster_id = cluster["id"]
    try:
        await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler")
        # When the user scales it to 2 workers
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)

        # Then the group's error is sbatch's own message, and the plan drops back to what started
        def refused(c):
            return c["workers"]["groups"][0]["error"] is not None

        cluster = await wait_for(jp_fetch, cluster_id, refused, what="the group's error")
        error = cluster["workers"]["groups"][0]["error"]
        assert "sbatch" in error and "invalid partition" in error.lower(), error
        assert cluster["error"] == error and cluster["spec"]["groups"][0]["count"] == 0
        assert cluster["workers"]["requested"] == 0

        # And nothing is retried: after several status-poll intervals, one refusal was logged and no job exists
        await asyncio.sleep(3 * SlurmBackend.poll_interval)
        _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
        refusals = [e for e in events["events"] if e["message"].startswith("not retrying")]
        assert [(e["before"], e["after"], e["source"]) for e in refusals] == [(2, 0, "system")]
        assert await squeue(f"clustermgr-{cluster_id}-") == {}

        # When adaptive mode would grow the group (its minimum is 1), Then it does not, and says why
        adapt = {"minimum": 1, "maximum": 2, "interval": 0.2}
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"adapt": adapt}, expect=200)

        async def held_back():
            _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
            return [e for e in events["events"] if e["message"].startswith("not growing: ") and error in e["message"]]

        await until(held_back, 30, "adaptive mode to hold the group back", step=0.2)
        await asyncio.sleep(1)
        _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
        assert len([e for e in events["events"] if e["message"].startswith("not retrying")]) == 1
        # When the user scales by hand, Then SLURM is asked once more (and refuses once more)
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)

        async def refused_twice():
            _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
            return len([e for e in events["events"] if e["message"].startswith("not retrying")]) == 2

        await until(refused_twice, 30, "the second refusal", step=0.2)
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


@pytest.mark.slurm
@requires_slurm
async def test_adaptive_on_slurm_grows_under_a_burst_and_cancels_exactly_the_retired_job_at_idle(
    jp_fetch, jp_serverapp
):
    # Given an adaptive SLURM cluster between 1 and 2 workers
    adapt = {"minimum": 1, "maximum": 2, "unit": "workers", "interval": 0.5, "wait_count": 4, "target_duration": 1}
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "hpc", "adapt": adapt}, expect=202)
    cluster_id, prefix = cluster["id"], f"clustermgr-{cluster['id']}-"
    backend = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).backend
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="the first worker", timeout=120)
        async with cluster_client(cluster, asynchronous=True) as client:
            # When a burst of work arrives, held running until the two jobs are checked (once it ends, the idle
            # countdown of 4 x 0.5 s starts, which a loaded machine can use up before squeue answers)
            burst, release = held_burst(client, 12, f"release-{cluster_id}")
            # Then it grows to 2 workers, each its own job
            await wait_for(jp_fetch, cluster_id, running_with(2), what="a second worker", timeout=120)
            jobs_before = backend.job_ids()
            assert len(jobs_before) == 2 and len(await squeue(prefix)) == 2
            await release.set()
            assert sorted(await client.gather(burst)) == list(range(12))
            del burst

            # When the load is gone (idle)
            started = time.monotonic()
            cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="the shrink at idle", timeout=120)
            print(f"[slurm timing] idle -> one worker retired: {time.monotonic() - started:.2f} s", file=sys.stderr)
            # Then exactly the retired worker's job is cancelled; the survivor's job runs on
            (survivor,) = [w["name"] for w in (await client.scheduler.identity(n_workers=-1))["workers"].values()]
            listed = await squeue(prefix)
            assert set(listed) == {f"{prefix}{survivor}"}
            ((job_id, _),) = listed.values()
            assert backend.job_ids() == {survivor: job_id} and jobs_before[survivor] == job_id
            # And it still computes
            assert await client.submit(sum, [1, 2, 3]) == 6
            _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
            shrink = [e for e in events["events"] if e["kind"] == "scale" and e["before"] == 2 and e["after"] == 1]
            assert shrink and shrink[-1]["source"] == "adaptive"
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


# -- real Grid Engine ---------------------------------------------------------------------------------


def grid_engine_jobs(prefix: str) -> dict[str, tuple[str, str]]:
    """job name -> (job id, state code) of the listed Grid Engine jobs whose name starts with ``prefix``."""
    out = subprocess.run(["qstat", "-xml", "-u", "*"], capture_output=True, text=True, check=True).stdout
    listed = SGEBackend.parse_qstat_xml(out)
    states = {job_id: state for job_id, state in listed.items() if state.name.startswith(prefix)}
    return {state.name: (job_id, state.pending_reason or "r") for job_id, state in states.items()}


@pytest.mark.sge
@requires_grid_engine
async def test_workers_are_grid_engine_jobs_that_scale_up_compute_and_go(jp_fetch):
    # Given a cluster from a Grid Engine template (the same batch engine, with SGEJob and qsub/qdel/qstat)
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "sge"}, expect=202)
    cluster_id, prefix = cluster["id"], f"clustermgr-{cluster['id']}-"
    try:
        await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler")
        # When it is scaled to one worker
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
        # Then one Grid Engine job runs the worker, which computes
        cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="the Grid Engine worker", timeout=120)
        ((job_id, state),) = grid_engine_jobs(prefix).values()
        assert state == "r"
        async with cluster_client(cluster, asynchronous=True) as client:
            inside = await client.run(lambda: __import__("os").environ.get("JOB_ID"))
            assert list(inside.values()) == [job_id]
            assert await client.submit(sum, [1, 2, 3]) == 6
        # When it is scaled down to none, Then the job is gone from qstat
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 0}}, expect=200)
        await wait_for(jp_fetch, cluster_id, running_with(0), what="no worker")

        async def no_jobs():
            return not grid_engine_jobs(prefix)

        await until(no_jobs, 120, "the job to leave qstat", step=0.2)
    finally:
        await delete_and_wait(jp_fetch, cluster_id)
        assert grid_engine_jobs(prefix) == {}


def test_the_scheduler_as_a_job_is_the_sites_job_script_with_the_scheduler_command(tmp_path):
    # Given a SLURM template whose scheduler is a batch job, on a SLURM of its own (slurm_conf)
    options = {"scheduler": "job", "queue": "compute", "interface": "ib0", "slurm_conf": "/etc/slurm-b/slurm.conf"}
    backend = SlurmBackend("abc123", tmp_path, options=options)
    # When its job script is written
    script = backend.scheduler_job.job_script(idle_timeout=600)
    # Then it is the site's script (partition, name, logs in the work folder, never requeued) running `dask scheduler`
    directives = [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]
    assert directives[0] == "-J clustermgr-abc123-scheduler" and "-p compute" in directives
    assert "--no-requeue" in directives
    command = script.strip().splitlines()[-1].split()
    assert command[0] == "exec" and command[2:4] == ["-m", "distributed.cli.dask_scheduler"]
    command = command[1:]
    # listening on the compute nodes' interface, its dashboard on the node's interfaces, its address in the work folder
    assert command[3:5] == ["--interface", "ib0"] and "--dashboard-address" in command
    assert command[command.index("--dashboard-address") + 1] == ":0"
    assert command[command.index("--scheduler-file") + 1] == str(tmp_path / "scheduler.json")
    assert command[command.index("--idle-timeout") + 1] == "600s"
    # And every queueing-system command reaches that SLURM
    assert backend.command_env() == {"SLURM_CONF": "/etc/slurm-b/slurm.conf"}


@pytest.mark.parametrize("placement", ["remote", "", "JOB"])
def test_an_unknown_scheduler_placement_stops_the_server_naming_it(tmp_path, placement):
    # Given a template whose scheduler placement is neither "local" nor "job", When the server starts, Then it refuses
    template = {"name": "hpc", "backend": "slurm", "options": {"scheduler": placement}, "spec": {"groups": [ONE_CPU]}}
    with pytest.raises(ValueError) as refused:
        ClusterManager(
            workdir=str(tmp_path), templates=[template], include_builtin_templates=False, default_template="hpc"
        )
    assert "template 'hpc'" in str(refused.value) and "options.scheduler" in str(refused.value), str(refused.value)
