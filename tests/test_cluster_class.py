"""Given a template that names a distributed Cluster class (backend ``cluster-class``), the server runs that class.

``distributed.LocalCluster`` (fast, also as dask-labextension's ``labextension.factory`` made a template)
and ``dask_jobqueue.SLURMCluster`` against the real single-node SLURM: created, scaled by the server's own
routine (``cluster.scale(n)`` underneath), adaptive, computed on through ``cluster_client``, deleted with
nothing left; what such a cluster cannot do is in its capabilities; it cannot outlive the server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid

import dask.config
import psutil
import pytest

from clustermgr_lab.domain.templates import labextension_template
from clustermgr_lab.manager.cluster_manager import ClusterManager
from clustermgr_lab.manager.store import ClusterStore

from .helpers import alive, call, cluster_client, eventually, requires_slurm, running_with, until, wait_for, wait_gone
from .server_process import JupyterServer, descendants, link_hosts, mapped_libraries
from .test_orphans import stored_cluster

MiB = 2**20
#: dask-labextension's configuration as its users have it: a LocalCluster factory, one worker to start with.
LABEXTENSION = {
    "factory": {
        "module": "distributed",
        "class": "LocalCluster",
        "args": [],
        "kwargs": {
            "n_workers": 0,
            "threads_per_worker": 1,
            "memory_limit": "256 MiB",
            "host": "127.0.0.1",
            "dashboard_address": "127.0.0.1:0",
        },
    },
    "default": {"workers": 1, "adapt": None},
}
#: Every SLURM job of this module is named with this prefix (filtered on in squeue, cancelled at the end).
JOB_PREFIX = f"cmclass-{uuid.uuid4().hex[:8]}"


def slurm_class_template(log_directory: str) -> dict:
    kwargs = {
        "cores": 1,
        "processes": 1,
        "memory": "512 MiB",
        "walltime": "00:30:00",
        "job_name": JOB_PREFIX,
        "log_directory": log_directory,
        "interface": "lo",
        "scheduler_options": {"dashboard_address": "127.0.0.1:0"},
    }
    return {
        "name": "slurm-class",
        "description": "dask_jobqueue.SLURMCluster",
        "backend": "cluster-class",
        "options": {"class": "dask_jobqueue.SLURMCluster", "kwargs": kwargs},
        "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}]},
    }


@pytest.fixture
def jp_server_config(jp_server_config, tmp_path):
    later = slurm_class_template(str(tmp_path / "slurm-logs"))
    later["name"] = "slurm-class-later"
    later["options"]["kwargs"]["job_extra_directives"] = ["--begin=now+3600"]  # its jobs wait in the queue
    jp_server_config["ClusterManager"]["templates"] = [slurm_class_template(str(tmp_path / "slurm-logs")), later]
    with dask.config.set({"labextension": LABEXTENSION}):  # read when the server starts
        yield jp_server_config


def manager_of(jp_serverapp) -> ClusterManager:
    return jp_serverapp.web_app.settings["clustermgr_manager"]


def module_jobs() -> dict[str, str]:
    """job id -> state of the jobs squeue lists whose name starts with this module's prefix (one name, many jobs)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%j|%T"], capture_output=True, text=True, timeout=60).stdout
    rows = (line.strip().split("|", 2) for line in out.splitlines() if line.strip())
    return {job_id: state for job_id, name, state in rows if name.startswith(JOB_PREFIX)}


def cancel_leftover_jobs() -> None:
    mine = list(module_jobs())
    if mine:
        subprocess.run(["scancel", *mine], capture_output=True, timeout=60)


def test_labextension_default_sizing_becomes_the_templates_count_and_adaptive_range():
    # Given a dask-labextension config with a SLURMCluster factory, 3 workers to start with, adaptive 1-40
    config = {
        "factory": {"module": "dask_jobqueue", "class": "SLURMCluster", "kwargs": {"cores": 4, "processes": 2, "memory": "8 GiB"}},
        "default": {"workers": 3, "adapt": {"minimum": 1, "maximum": 40}},
    }  # fmt: skip
    with dask.config.set({"labextension": config}):
        # When it is read as a template, on a server allowing 12 workers per cluster
        (template,) = labextension_template(max_workers=12)
    # Then the class and its arguments are the options, the shape is one of its workers (2 per job)
    assert template["backend"] == "cluster-class"
    assert template["options"] == {
        "class": "dask_jobqueue.SLURMCluster",
        "args": [],
        "kwargs": config["factory"]["kwargs"],
    }
    (group,) = template["spec"]["groups"]
    assert (group["count"], group["threads"], group["memory"]) == (3, 2, 4 * 2**30)
    # And the adaptive range is kept, in workers, within the server's limit
    assert template["adapt"] == {"minimum": 1, "maximum": 12, "unit": "workers"}
    # And without a factory there is no such template
    with dask.config.set({"labextension": {}}):
        assert labextension_template(max_workers=12) == []


async def test_a_labextension_factory_runs_as_a_template_scaled_by_the_server(jp_fetch, jp_serverapp):
    # Given a server whose Dask config has dask-labextension's factory (a LocalCluster)
    _, templates = await call(jp_fetch, "GET", "templates")
    template = next(t for t in templates["templates"] if t["name"] == "labextension")
    # Then it is a template, whose capabilities say what such a cluster cannot do, and why
    assert template["backend"] == "cluster-class" and template["spec"]["groups"][0]["count"] == 1
    capabilities = template["capabilities"]
    assert capabilities["can_scale"] and capabilities["can_stop"]
    off = {k for k, v in capabilities.items() if v is False}
    assert off == {
        "multiple_groups",
        "readoptable",
        "runs_processes_here",
        "exact_retire",
        "editable_spec",
        "enforces_tls",
    }
    assert {"multiple_groups", "readoptable", "exact_retire", "editable_spec", "enforces_tls"} <= set(
        capabilities["reasons"]
    )

    # When a cluster is made from it
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "labextension"}, expect=202)
    cluster_id = cluster["id"]
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="the first worker", timeout=90)
        assert cluster["capabilities"] == capabilities and cluster["dashboard_url"]
        backend = manager_of(jp_serverapp).get(cluster_id).backend
        async with cluster_client(cluster, asynchronous=True) as client:
            # Then it computes, on a worker of its own process
            total = client.submit(sum, client.map(lambda x: x * x, range(10)))
            assert await total == 285
            worker_pids = set((await client.run(os.getpid)).values())
            # (workers of the Cluster object, which the server's scheduler links' process holds: not the server's)
            holder = manager_of(jp_serverapp).link_host.pid
            assert all(holder in {p.pid for p in psutil.Process(pid).parents()} for pid in worker_pids)

            # When its spec is edited, Then that is refused with the reason, and nothing changes
            spec = {"groups": [{**cluster["spec"]["groups"][0], "threads": 2}]}
            _, refused = await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"spec": spec}, expect=409)
            assert capabilities["reasons"]["editable_spec"] in refused["message"]

            # When it is scaled to 2 workers and back to 1
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)
            await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers", timeout=90)
            worker_pids |= set((await client.run(os.getpid)).values())
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"cores": 1}}, expect=200)
            cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker", timeout=60)
            # Then the Cluster object runs 1 worker too, and the other worker's process is gone
            await until(lambda: len(backend.object_workers) == 1, 30, "the class to close its worker")
            await until(lambda: len(alive(worker_pids)) == 1, 30, "the retired worker's process to end")
            assert cluster["resources"] == {"cores": 1, "memory": 256 * MiB, "gpus": 0}
            assert await client.submit(sum, [1, 2, 3]) == 6
    finally:
        # When it is deleted
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        assert await wait_gone(jp_fetch, cluster_id, 60) == 404
    # Then the Cluster object is closed and no worker process is left
    assert backend.object_workers == {} and backend.process_records() == {}
    await until(lambda: not alive(worker_pids), 30, "the worker processes to end")


async def test_a_class_cluster_whose_holding_process_is_killed_fails_and_leaves_no_process(jp_fetch, jp_serverapp):
    # Given a LocalCluster class cluster running its first worker
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "labextension"}, expect=202)
    cluster_id = cluster["id"]
    try:
        await wait_for(jp_fetch, cluster_id, running_with(1), what="the first worker", timeout=90)
        holder = manager_of(jp_serverapp).link_host.pid
        held = [p.pid for p in psutil.Process(holder).children(recursive=True)]
        assert held
        # When the scheduler links' process, which holds its Cluster object, is killed
        os.kill(holder, signal.SIGKILL)
        # Then the cluster is failed, saying why, and the object's processes end with their holder
        cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "failed", what="failed", timeout=90)
        assert cluster["error"], cluster
        await until(lambda: not alive(held), 30, "the processes the killed holder had started to end")
    finally:
        # And it is deleted like any failed cluster
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        assert await wait_gone(jp_fetch, cluster_id, 60) == 404


async def test_a_new_cluster_of_a_class_keeps_one_group_of_the_templates_shape(jp_fetch):
    # Given the LocalCluster template; When a cluster of 2 groups, or of another shape, is asked for
    group = {"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}
    two = {"groups": [group, {**group, "name": "more"}]}
    _, refused = await call(jp_fetch, "POST", "clusters", body={"template": "labextension", "spec": two}, expect=400)
    # Then each is refused, naming the field and why; and no cluster is listed
    assert refused["field"] == "spec.groups" and "one group" in refused["message"]
    bigger = {"groups": [{**group, "threads": 4}]}
    _, refused = await call(jp_fetch, "POST", "clusters", body={"template": "labextension", "spec": bigger}, expect=400)
    assert refused["field"] == "spec.groups[0].threads"
    _, clusters = await call(jp_fetch, "GET", "clusters")
    assert clusters["clusters"] == []


async def test_a_clean_server_stop_stops_a_class_cluster_and_the_next_server_says_why(tmp_path):
    # Given a manager that keeps its clusters running over a restart, and a LocalCluster class cluster on it
    config = dict(workdir=str(tmp_path / "work"), store_path=str(tmp_path / "store.sqlite3"), on_shutdown="keep")
    with dask.config.set({"labextension": LABEXTENSION}):
        manager = ClusterManager(**config)
    cluster = await manager.create_durably({"template": "labextension"})
    await until(lambda: cluster.status == "running" and cluster.worker_counts()["running"] == 1, 90, "1 worker")
    async with cluster_client(manager.describe(cluster), asynchronous=True) as client:
        pids = list((await client.run(os.getpid)).values())
    # When the server stops cleanly
    await manager.close_all()
    # Then the cluster was stopped (not left running: no next server could adopt it), with the reason
    await until(lambda: not alive(pids), 30, "the worker process to end")
    with dask.config.set({"labextension": LABEXTENSION}):
        restarted = ClusterManager(**config)
    await restarted.readopt_all()
    (record,) = restarted.list()
    assert record["status"] == "stopped" and "cannot outlive a server restart" in record["error"]
    await restarted.close_all()


@pytest.mark.slurm
@requires_slurm
async def test_slurmcluster_class_scales_computes_adapts_and_leaves_no_job(jp_fetch):
    # Given a template naming dask_jobqueue.SLURMCluster, and a cluster of it with no workers
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "slurm-class"}, expect=202)
    cluster_id = cluster["id"]
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler", timeout=60)
        assert cluster["backend"] == "cluster-class" and await asyncio.to_thread(module_jobs) == {}

        # When it is scaled to 2 workers through the API
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)
        # Then 2 SLURM jobs run, and their 2 workers are counted as the requested ones
        cluster = await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers", timeout=180)
        jobs = await asyncio.to_thread(module_jobs)
        assert len(jobs) == 2 and set(jobs.values()) == {"RUNNING"}
        assert cluster["resources"]["cores"] == 2

        async with cluster_client(cluster, asynchronous=True) as client:
            # And a task graph computes on them, with checked results
            inside = await client.run(lambda: os.environ.get("SLURM_JOB_ID"))
            assert set(inside.values()) == set(jobs)
            squares = client.map(lambda x: x * x, range(40), pure=False)
            assert await client.submit(sum, squares) == sum(x * x for x in range(40))
            del squares

            # When it is scaled to 0
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 0}}, expect=200)
            # Then no worker and no job is left
            await wait_for(jp_fetch, cluster_id, running_with(0), what="0 workers", timeout=60)
            await until(lambda: _no_jobs(), 60, "its jobs to leave squeue")

            # When adaptive mode is on (the server's own policy) and a burst of work arrives
            adapt = {"minimum": 0, "maximum": 2, "interval": 0.5, "wait_count": 4, "target_duration": 1}
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"adapt": adapt}, expect=200)

            def slow_square(x: int) -> int:
                __import__("time").sleep(0.5)
                return x * x

            burst = client.map(slow_square, range(12), pure=False)
            # Then it grows, computes the burst, and shrinks back to 0 once idle, each step decided by the server
            await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] >= 1, what="growth", timeout=180)
            assert await client.gather(burst) == [x * x for x in range(12)]
            del burst
            cluster = await wait_for(jp_fetch, cluster_id, running_with(0), what="adaptive shrink", timeout=120)
            _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
            adaptive = [e for e in events["events"] if e["kind"] == "scale" and e["source"] == "adaptive"]
            assert any(e["after"] > e["before"] for e in adaptive) and adaptive[-1]["after"] == 0
            await until(lambda: _no_jobs(), 60, "the adaptive jobs to leave squeue")
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        gone = await wait_gone(jp_fetch, cluster_id, 90)
        try:
            # Then it leaves the list, and its job leaves squeue
            assert gone == 404
            await until(lambda: _no_jobs(), 60, "its jobs to leave squeue after DELETE")
        finally:
            await asyncio.to_thread(cancel_leftover_jobs)


@pytest.mark.slurm
@requires_slurm
async def test_jobs_of_a_class_cluster_whose_holding_process_is_killed_are_cancelled(jp_fetch, jp_serverapp):
    # Given a SLURMCluster class cluster scaled to 1 worker, whose job waits in the queue (to begin in an hour)
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "slurm-class-later"}, expect=202)
    cluster_id = cluster["id"]
    try:
        await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler", timeout=60)
        backend = manager_of(jp_serverapp).get(cluster_id).backend
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
        await until(lambda: any(backend.object_workers.values()), 60, "the object to report its job")
        assert list((await asyncio.to_thread(module_jobs)).values()) == ["PENDING"]
        # When the scheduler links' process, which holds its Cluster object, is killed (it cannot close the job)
        os.kill(manager_of(jp_serverapp).link_host.pid, signal.SIGKILL)
        # Then the cluster is failed, and the server cancels the job the object had reported
        await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "failed", what="failed", timeout=90)
        await until(lambda: _no_jobs(), 30, "the killed object's job to leave squeue")
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        try:
            assert await wait_gone(jp_fetch, cluster_id, 90) == 404
        finally:
            await asyncio.to_thread(cancel_leftover_jobs)


async def _no_jobs() -> bool:
    return await asyncio.to_thread(module_jobs) == {}


@pytest.mark.slurm
@requires_slurm
async def test_jobs_left_by_a_class_cluster_are_cancelled_by_the_next_server(tmp_path):
    # Given a store whose SLURMCluster class cluster was running when its server was killed, with a job left
    done = subprocess.run(
        ["sbatch", "--parsable", "-J", f"{JOB_PREFIX}-left", "--mem=16M", "-o", "/dev/null", "--wrap", "sleep 120"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    job = done.stdout.strip().split(";")[0]
    record = stored_cluster("abc123", tmp_path / "abc123", {"_backend": "cluster-class", "default-1": {"job_id": job}})
    record["template"] = "slurm-class"
    record["backend_state"] = {"scheduler": {"cluster_class": "dask_jobqueue.SLURMCluster"}}
    store = ClusterStore(tmp_path / "store.sqlite3")
    store.save(record, [])
    store.close()
    try:
        # When a new server starts on that store
        manager = ClusterManager(
            workdir=str(tmp_path), store_path=str(tmp_path / "store.sqlite3"),
            templates=[slurm_class_template(str(tmp_path / "logs"))],
        )  # fmt: skip
        await manager.readopt_all()
        # Then the cluster is failed with the reason, and its job is cancelled
        (cluster,) = manager.list()
        assert cluster["status"] == "failed" and "cannot outlive a server restart" in cluster["error"]
        assert f"scancel {job}" in cluster["error"]
        await until(lambda: _no_jobs(), 60, "the leftover job to leave squeue")
        await manager.close_all()
    finally:
        await asyncio.to_thread(cancel_leftover_jobs)


#: dask-labextension's own config file as a site has it (its default factory), with small workers.
LABEXTENSION_YAML = """
labextension:
  factory:
    module: dask.distributed
    class: LocalCluster
    args: []
    kwargs: {n_workers: 0, threads_per_worker: 1, memory_limit: 256 MiB, host: 127.0.0.1, dashboard_address: "127.0.0.1:0"}
  default: {workers: 1, adapt: null}
"""


def test_a_server_with_dask_labextensions_factory_holds_no_cluster_object_itself(tmp_path, monkeypatch):
    # Given dask-labextension's config file (its LocalCluster factory), a template whose class does not exist, and a
    # server (a process of its own) that lets its scheduler links' process go 1 s after it is last needed
    (tmp_path / "dask").mkdir()
    (tmp_path / "dask" / "labextension.yaml").write_text(LABEXTENSION_YAML)
    monkeypatch.setenv("DASK_CONFIG", str(tmp_path / "dask"))
    missing = {
        "name": "missing",
        "backend": "cluster-class",
        "options": {"class": "distributed.NoSuchCluster"},
        "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "256 MiB"}]},
    }
    config = {"LinkHost": {"release_after": 1.0}}
    server = JupyterServer(
        tmp_path, tmp_path / "store" / "clusters.sqlite3", tmp_path / "work", config,
        templates=[missing], default_template="labextension", include_builtin_templates=False,
    )  # fmt: skip

    def distributed_here() -> bool:  # distributed brings NumPy; a LocalCluster's TLS, cryptography
        libraries = mapped_libraries(server.process.pid)
        return "/numpy/" in libraries or "/cryptography/" in libraries

    try:
        server.start()
        client = server.client()
        # When its templates are listed (the sidebar's first look)
        templates = {t["name"]: t for t in client.templates()}
        # Then dask-labextension's factory is a template that can be used, and the class that does not exist is
        # unavailable with the reason (asked of the links' process: the server imports neither class)
        assert templates["labextension"]["available"], templates["labextension"]

        def missing_unavailable() -> dict | None:  # the first look may come before the links' process answers
            listed = {t["name"]: t for t in client.templates()}
            return None if listed["missing"]["available"] else listed

        templates = eventually(missing_unavailable, 30, "the missing class's template to be unavailable", step=1.0)
        reason = templates["missing"]["unavailable_reason"]
        assert "cannot import the Cluster class 'distributed.NoSuchCluster'" in reason, reason
        assert not distributed_here()

        # When a cluster of the factory runs its first worker
        cluster = client.create(template="labextension")
        client.wait(cluster["id"], lambda c: c["workers"]["running"] == 1, timeout=120)
        # Then the Cluster object's scheduler and worker run below the scheduler links' process, not the server
        (holder,) = link_hosts(server)
        held = {p.pid for p in holder.children(recursive=True)}
        others = [p.cmdline() for p in descendants(server) if p.pid not in held | {holder.pid}]
        assert held and not others, others
        assert not distributed_here()

        # When it is deleted, Then the server, used on, lets that process go: nothing is left below it
        client.delete(cluster["id"], wait=True, timeout=60)

        def nothing_left() -> bool:
            client.list()
            return descendants(server) == []

        eventually(nothing_left, 60, "the links' process and the object's workers to exit", step=1.0)
        assert not distributed_here() and client.list() == []
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)
