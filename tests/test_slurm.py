"""Given a real single-node SLURM (``bash ci/slurm/start-slurm.sh``), each worker is one SLURM job.

The tests that need SLURM are marked ``slurm`` and skipped, with the reason, when ``sbatch``,
``squeue``, ``scancel`` or ``sinfo`` are missing or SLURM does not answer. Timings are printed
(``pytest -s``) as ``[slurm timing]`` lines.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from clustermgr_lab.backends.batch.slurm import SlurmBackend
from clustermgr_lab.domain.spec import parse_spec
from clustermgr_lab.manager.cluster_manager import ClusterManager
from clustermgr_lab.manager.store import ClusterStore

from .helpers import (
    alive,
    assert_workers_closed_to_strangers,
    call,
    cluster_client,
    requires_slurm,
    running_with,
    squeue,
    tree,
    until,
    wait_for,
    wait_gone,
)
from .test_orphans import stored_cluster

MiB = 2**20
WORKERS = {"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}


def timing(what: str, seconds: float) -> None:
    print(f"[slurm timing] {what}: {seconds:.2f} s", file=sys.stderr)


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [
        {"name": "slurm", "description": "SLURM test workers", "backend": "slurm", "spec": {"groups": [WORKERS]}},
        # The job's shell takes 3 s to exit after SIGTERM: SLURM lists the job COMPLETING meanwhile
        {
            "name": "slow-exit",
            "description": "jobs that outlive their worker",
            "backend": "slurm",
            "options": {"job_script_prologue": ["trap 'sleep 3' TERM"]},
            "spec": {"groups": [{**WORKERS, "count": 1}]},
        },
    ]
    return jp_server_config


def backend_of(jp_serverapp, cluster_id) -> SlurmBackend:
    return jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).backend


def test_job_script_asks_slurm_for_the_group_and_names_the_worker(tmp_path):
    # Given a SLURM backend with a partition, and a group with 2 threads, 300 MiB, a GPU and a resource
    class Partition(SlurmBackend):
        queue = "debug"
        walltime = "01:00:00"

    backend = Partition("abc123", tmp_path)
    backend.address = "tcp://127.0.0.1:8786"
    group = {"name": "gpu", "count": 1, "threads": 2, "memory": "300 MiB", "gpus": 1, "resources": {"fast": 1}}
    spec = parse_spec({"groups": [group]})
    # When its job script is written
    script = backend.job_script(spec.groups[0], "gpu-7")
    # Then SLURM is asked for what the worker gets, and the logs go to the cluster's work folder
    directives = [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]
    assert directives[:3] == [
        "-J clustermgr-abc123-gpu-7",
        f"-e {tmp_path}/clustermgr-abc123-gpu-7-%J.err",
        f"-o {tmp_path}/clustermgr-abc123-gpu-7-%J.out",
    ]
    assert directives[3:] == [
        "-p debug", "-n 1", "--cpus-per-task=2", "--mem=300M", "-t 01:00:00", "--no-requeue", "--gres=gpu:1"
    ]  # fmt: skip
    # And the worker replaces the job's shell (a cancelled job's shell cannot die first and leave it running),
    # is called by our name, with its exact memory, its resources as one shell word, on loopback
    command = script.strip().splitlines()[-1]
    assert command.startswith(
        f"exec {sys.executable} -m distributed.cli.dask_worker tcp://127.0.0.1:8786 --name gpu-7 "
    )
    assert command.endswith(
        f"--memory-limit {300 * MiB} --no-dashboard --dashboard-address 127.0.0.1:0 --resources 'fast=1 GPU=1' "
        "--interface lo"
    )  # (its own HTTP routes on the node's loopback, without the Bokeh pages nobody is shown)


def test_the_nanny_forks_its_worker_unless_the_template_says_otherwise(tmp_path):
    # Given a SLURM backend as configured, and one whose template sets the start method back to spawn
    default = SlurmBackend("abc123", tmp_path)
    spawn = SlurmBackend(
        "abc123", tmp_path, options={"worker_config": {"distributed.worker.multiprocessing-method": "spawn"}}
    )
    group = parse_spec({"groups": [WORKERS]}).groups[0]
    for backend in (default, spawn):
        backend.address = "tcp://127.0.0.1:8786"
    # Then the job scripts export the start method the workers' nannies use
    assert "export DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD=fork" in default.job_script(group, "default-1")
    script = spawn.job_script(group, "default-1")
    assert "export DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD=spawn" in script
    assert "MULTIPROCESSING_METHOD=fork" not in script


@pytest.mark.slurm
@requires_slurm
async def test_workers_are_slurm_jobs_that_scale_compute_and_go(jp_fetch, jp_serverapp):
    # Given a cluster made from the SLURM template, with no workers yet
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "slurm", "name": "on slurm"}, expect=202)
    cluster_id = cluster["id"]
    prefix = f"clustermgr-{cluster_id}-"
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler")
        assert cluster["backend"] == "slurm"
        scheduler_pids = [p for pid in backend_of(jp_serverapp, cluster_id).pids().values() for p in tree(pid)]
        assert scheduler_pids

        # When it is scaled to 2 workers
        started = time.monotonic()
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)

        # Then 2 jobs are queued, then run, and 2 workers connect
        async def two_jobs(states=None):
            jobs = await squeue(prefix)
            return jobs if len(jobs) == 2 and (states is None or {s for _, s in jobs.values()} <= states) else None

        await until(two_jobs, 60, "2 jobs in squeue")
        timing("scale call -> 2 jobs listed in squeue (submission)", time.monotonic() - started)
        jobs = await until(lambda: two_jobs({"RUNNING"}), 60, "2 running jobs")
        timing("scale call -> 2 jobs RUNNING in SLURM", time.monotonic() - started)
        cluster = await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers", timeout=120)
        timing("scale call -> 2 workers connected", time.monotonic() - started)
        assert cluster["resources"] == {"cores": 2, "memory": 1024 * MiB, "gpus": 0}
        assert set(jobs) == {prefix + "default-1", prefix + "default-2"}
        assert {n: j for n, j in backend_of(jp_serverapp, cluster_id).job_ids().items()} == {
            name.removeprefix(prefix): job_id for name, (job_id, _) in jobs.items()
        }

        async with cluster_client(cluster, asynchronous=True) as client:
            # And the scheduler, the workers in their jobs and the dashboard refuse peers without the cluster's
            # certificate (plain, another certificate, none), while this Client (the cluster's Security) is served
            dashboard = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).endpoint.dashboard_address
            # And each worker's own HTTP routes (/health, /metrics) listen on loopback only, and refuse strangers too
            await assert_workers_closed_to_strangers(client, cluster, dashboard)
            # And each worker is called by our name and runs inside the SLURM job of that name, forked from its
            # nanny (multiprocessing's spawn would have imported the main module again, as __mp_main__)
            inside = await client.run(
                lambda dask_worker: (
                    dask_worker.name,
                    __import__("os").environ.get("SLURM_JOB_ID"),
                    __import__("sys").modules["__main__"].__name__,
                    __import__("os").environ.get("CUDA_VISIBLE_DEVICES"),
                )
            )
            # (and, its group having no GPUs, CUDA_VISIBLE_DEVICES="": CUDA shows it no device of the node)
            assert sorted(inside.values()) == sorted(
                (n.removeprefix(prefix), j, "__main__", "") for n, (j, _) in jobs.items()
            )
            # And each nanny is its job's own process, not a child of the job script's shell: cancelling the job
            # signals both at once, and a shell that died first would leave the nanny to init, unseen by SLURM
            parents = await client.run(lambda: __import__("psutil").Process().parent().name(), nanny=True)
            assert list(parents.values()) == ["slurmstepd"] * 2, parents

            # And they compute
            futures = client.map(lambda i: bytes(1000) * i, range(20), pure=False)
            assert [len(r) for r in await client.gather(futures)] == [1000 * i for i in range(20)]
            assert len({w for ws in (await client.who_has(futures)).values() for w in ws}) == 2

            # When it is scaled down to 1
            started = time.monotonic()
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
            await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker")
            timing("scale 2 -> 1: one worker left", time.monotonic() - started)
            # Then one job is gone from squeue and every result is still there
            left = await until(lambda: _jobs_if(prefix, 1), 120, "1 job in squeue")
            timing("scale 2 -> 1: one job left in squeue", time.monotonic() - started)
            assert [len(r) for r in await client.gather(futures)] == [1000 * i for i in range(20)]
            ((survivor, (survivor_job, _)),) = left.items()

            # When the last job is cancelled from outside (as a walltime or a node failure would end it)
            started = time.monotonic()
            subprocess.run(["scancel", survivor_job], check=True)

            # Then the cluster notices, says so, and a new job replaces it
            async def replaced():
                _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
                name = survivor.removeprefix(prefix)
                return any(name in e["message"] and "replacing" in e["message"] for e in events["events"])

            await until(replaced, 120, "the ended job to be noticed", step=0.2)
            timing("job ended outside -> noticed", time.monotonic() - started)
            await wait_for(jp_fetch, cluster_id, running_with(1), what="a replacement worker", timeout=120)
            timing("job ended outside -> replacement worker connected", time.monotonic() - started)
            jobs = await squeue(prefix)
            assert len(jobs) == 1 and survivor not in jobs
    finally:
        # When the cluster is deleted
        started = time.monotonic()
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        assert await wait_gone(jp_fetch, cluster_id, 60) == 404
        timing("delete -> cluster gone", time.monotonic() - started)
    # Then no job of it is left in squeue, and no scheduler process
    assert await squeue(prefix) == {}
    assert alive(scheduler_pids) == []


@pytest.mark.slurm
@requires_slurm
async def test_a_deleted_cluster_is_gone_only_once_its_jobs_have_left_squeue(jp_fetch):
    # Given a SLURM cluster of one worker whose job is still listed (COMPLETING) for a while after its worker ended
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "slow-exit"}, expect=202)
    cluster_id, prefix = cluster["id"], f"clustermgr-{cluster['id']}-"
    try:
        await wait_for(jp_fetch, cluster_id, running_with(1), what="the worker", timeout=120)
        assert [state for _, state in (await squeue(prefix)).values()] == ["RUNNING"]
        # When it is deleted, and has left the list
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        assert await wait_gone(jp_fetch, cluster_id, 60) == 404
        # Then squeue no longer lists its job, in any state
        assert await squeue(prefix) == {}
    finally:
        leftover = [job_id for job_id, _ in (await squeue(prefix)).values()]
        if leftover:
            subprocess.run(["scancel", *leftover], capture_output=True)


async def _jobs_if(prefix: str, n: int, empty_ok: bool = False):
    jobs = await squeue(prefix)
    return (jobs or empty_ok) if len(jobs) == n else None


@pytest.mark.slurm
@requires_slurm
async def test_a_group_with_gpus_and_resources_runs_as_a_job_of_its_shape(jp_fetch, jp_serverapp, monkeypatch):
    # Given a SLURM without GPUs configured as GRES (so no --gres directive), and a GPU group
    monkeypatch.setattr(SlurmBackend, "gpu_directive", None)
    spec = {
        "groups": [{"name": "gpu", "count": 1, "threads": 2, "memory": "300 MiB", "gpus": 1, "resources": {"fast": 1}}]
    }
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "slurm", "spec": spec}, expect=202)
    cluster_id = cluster["id"]
    try:
        # When its worker has connected
        cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="the GPU worker", timeout=120)
        # Then the scheduler sees it with the group's threads, exact memory and resources
        assert cluster["resources"] == {"cores": 2, "memory": 300 * MiB, "gpus": 1}
        async with cluster_client(cluster, asynchronous=True) as client:
            (worker,) = (await client.scheduler.identity(n_workers=-1))["workers"].values()
            assert (worker["name"], worker["nthreads"], worker["memory_limit"], worker["resources"]) == (
                "gpu-1", 2, 300 * MiB, {"GPU": 1, "fast": 1},
            )  # fmt: skip
            # And a task that needs a GPU runs there
            assert await client.submit(lambda: 42, resources={"GPU": 1}) == 42
        # And SLURM gave the job 2 CPUs
        ((job_id, _),) = (await squeue(f"clustermgr-{cluster_id}-")).values()
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
        assert "NumCPUs=2" in shown
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        await until(lambda: _jobs_if(f"clustermgr-{cluster_id}-", 0, empty_ok=True), 60, "no jobs left")


@pytest.mark.slurm
@requires_slurm
async def test_jobs_of_a_cluster_that_cannot_be_re_adopted_are_cancelled(tmp_path):
    # Given a store with a SLURM cluster whose scheduler is gone, and whose worker job still runs
    def submit(job_name: str) -> str:
        done = subprocess.run(
            ["sbatch", "--parsable", "-J", job_name, "--mem=16M", "-o", "/dev/null", "--wrap", "sleep 120"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout.strip().split(";")[0]

    orphan = submit("clustermgr-abc123-default-1")
    # And a recorded id that now belongs to another job (as after a SLURM restart)
    bystander = submit("someone-else")
    jobs = {
        "_backend": "slurm",
        "default-1": {"job_id": orphan, "job_name": "clustermgr-abc123-default-1"},
        "default-2": {"job_id": bystander, "job_name": "clustermgr-abc123-default-2"},
    }
    store_path = tmp_path / "clusters.sqlite3"
    store = ClusterStore(store_path)
    store.save(stored_cluster("abc123", tmp_path / "abc123", jobs), [])
    store.close()
    try:
        # When a new manager starts on that store
        manager = ClusterManager(workdir=str(tmp_path), store_path=str(store_path))
        await manager.readopt_all()
        # Then the cluster failed, its job is cancelled, and the other job is left alone
        assert manager.list()[0]["status"] == "failed"
        listed = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-j", f"{orphan},{bystander}"], capture_output=True, text=True
        ).stdout
        assert listed.split() == [bystander]
        await manager.close_all()
    finally:
        subprocess.run(["scancel", orphan, bystander], capture_output=True)


def test_importing_dask_jobqueue_keeps_the_servers_sigint_handler():
    # Given a process with a SIGINT handler of its own (as the Jupyter server has)
    code = (
        "import signal\n"
        "def mine(*_): pass\n"
        "signal.signal(signal.SIGINT, mine)\n"
        "from clustermgr_lab.backends.batch.slurm import SlurmBackend\n"
        "SlurmBackend.job_class()\n"  # When dask-jobqueue is imported (it sets SIGINT to sys.exit at import)
        "assert signal.getsignal(signal.SIGINT) is mine, signal.getsignal(signal.SIGINT)\n"
    )
    # Then the handler is still that process's own
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
