"""Given a real server and real Dask processes, when a scheduler freezes or a worker cannot start, then the
cluster says so, nothing hangs, and stopping clusters still count against the server's limit."""

import os
import signal
import time

import pytest
from tornado.httpclient import HTTPClientError

from clustermgr_lab.backends.local.backend import LocalBackend
from clustermgr_lab.manager.machine import detect_gpus

from .helpers import call, requires_slurm, running_with, wait_for, wait_gone

EMPTY = {"groups": [{"count": 0, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def jp_server_config(jp_server_config, request):
    """The shared configuration without its declared GPUs: the server counts those of this machine.

    With ``quick_heartbeat``: a heartbeat every 0.5 s, and a scheduler silent for 1 s is unresponsive.
    """
    manager = {k: v for k, v in jp_server_config["ClusterManager"].items() if k != "gpus"}
    config = {**jp_server_config, "ClusterManager": manager}
    if "quick_heartbeat" in request.fixturenames:
        config["SchedulerLink"] = {"heartbeat_interval": 0.5, "heartbeat_timeout": 1.0}
    return config


@pytest.fixture
def quick_heartbeat(monkeypatch):
    """Quick heartbeats (see ``jp_server_config``) and a 3 s stop."""
    monkeypatch.setattr(LocalBackend, "stop_timeout", 3.0)


async def test_a_stopped_scheduler_shows_unresponsive_and_a_stopping_cluster_counts(
    jp_fetch, jp_serverapp, quick_heartbeat
):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    # Given a running cluster whose scheduler is then stopped with SIGSTOP
    _, created = await call(jp_fetch, "POST", "clusters", body={"name": "frozen", "spec": EMPTY}, expect=202)
    cluster_id = created["id"]
    await wait_for(jp_fetch, cluster_id, running_with(0), what="running")
    scheduler = manager.get(cluster_id).pids()["scheduler"]
    os.kill(scheduler, signal.SIGSTOP)
    try:
        # Then the cluster soon says its scheduler does not answer, and that the plan waits for it
        frozen = await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "unresponsive", 30, "unresponsive")
        assert "has not answered" in frozen["error"] and "plan" in frozen["error"], frozen["error"]
        # And a dashboard request is answered at once instead of hanging
        start = time.monotonic()
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("clustermgr", "dashboard", cluster_id, "status")
        assert refused.value.code == 503 and time.monotonic() - start < 15  # the hang it guards against is 20 s+
        # And a scale is accepted into the plan but not carried out
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
        _, waiting = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
        assert waiting["status"] == "unresponsive" and waiting["workers"]["running"] == 0
    finally:
        os.kill(scheduler, signal.SIGCONT)
    # When the scheduler runs again, then the plan is carried out and the error is gone
    thawed = await wait_for(jp_fetch, cluster_id, running_with(1), 90, "1 worker after SIGCONT")
    assert thawed["error"] is None

    # Given the same scheduler stopped again, and a server that allows one cluster
    os.kill(scheduler, signal.SIGSTOP)
    await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "unresponsive", 30, "unresponsive again")
    manager.max_clusters = 1
    # When it is deleted: it stops slowly (its scheduler ignores SIGTERM until it is killed)
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    # Then while it is stopping a new cluster is refused, naming why
    status, error = await call(jp_fetch, "POST", "clusters", body={"spec": EMPTY})
    assert status == 409 and "1 of them still stopping" in error["message"], error
    # And once it is gone, a new cluster is welcome
    assert await wait_gone(jp_fetch, cluster_id, 60) == 404, "the frozen cluster was not stopped within 60 s"
    _, again = await call(jp_fetch, "POST", "clusters", body={"spec": EMPTY}, expect=202)
    await call(jp_fetch, "DELETE", "clusters", again["id"], expect=202)


@pytest.mark.parametrize("template", ["local", pytest.param("slurm", marks=[pytest.mark.slurm, requires_slurm])])
async def test_a_worker_that_cannot_start_says_why(jp_fetch, monkeypatch, template):
    # Given a running cluster, and workers that will fail at start (a preload module that does not exist)
    _, created = await call(jp_fetch, "POST", "clusters", body={"template": template, "spec": EMPTY}, expect=202)
    await wait_for(jp_fetch, created["id"], running_with(0), what="running")
    monkeypatch.setenv("DASK_DISTRIBUTED__WORKER__PRELOAD", '["no_such_module_for_clustermgr"]')
    # When it is scaled up
    await call(jp_fetch, "PATCH", "clusters", created["id"], body={"scale": {"workers": 1}}, expect=200)
    # Then the cluster's error says why the worker did not start, and it is not restarted over and over
    failed = await wait_for(jp_fetch, created["id"], lambda c: c["error"], 90, "the worker's error")
    assert "No module named 'no_such_module_for_clustermgr'" in failed["error"], failed["error"]
    assert failed["spec"]["groups"][0]["count"] == 0 and failed["workers"]["requested"] == 0
    await call(jp_fetch, "DELETE", "clusters", created["id"], expect=202)


async def test_gpus_beyond_those_of_the_machine_are_refused_at_once(jp_fetch, jp_serverapp):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    present = detect_gpus()
    assert manager._gpus == present  # nothing declared: what the machine has (none on the CI machine)
    for gpus in (present + 1, 10_000_000):
        spec = {"groups": [{"count": 1, "threads": 1, "memory": "256 MiB", "gpus": gpus}]}
        start = time.monotonic()
        status, error = await call(jp_fetch, "POST", "clusters", body={"spec": spec})
        assert status == 400 and error["field"] == "spec.groups[0].gpus", error
        # refused before anything starts (a start that failed later would take tens of seconds)
        assert f"this machine has {present} GPU" in error["message"] and time.monotonic() - start < 10, error
    assert (await call(jp_fetch, "GET", "clusters", expect=200))[1]["clusters"] == []
