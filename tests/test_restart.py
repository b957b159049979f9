"""Given real Jupyter server processes on one cluster store, clusters outlive the server that started them.

Each test starts ``jupyter server`` as a process of its own, kills it (SIGKILL or SIGTERM), starts
another on the same store and work folder, and checks what the new server made of the clusters,
and that nothing is left running at the end (process table, and squeue for SLURM).
"""

from __future__ import annotations

import datetime
import signal
import subprocess
import sys
import time

import psutil
import pytest

from clustermgr_lab.client import ClusterManagerAPIError
from clustermgr_lab.common.security import ClusterCredentials

from .helpers import cluster_client, eventually, requires_slurm, running_with, slurm_jobs
from .server_process import (
    JupyterServer,
    kill_leftovers,
    orphans,
    same_process,
    stored_cluster_ids,
    stored_usage,
    stored_workers,
)

SMALL = {"name": "default", "count": 2, "threads": 1, "memory": "256 MiB"}

# Every step has a deadline of its own, and a slow one fails naming itself. These tests start two or three
# Jupyter servers each; under load (2 cores, load average 10-15) the steps' deadlines add up to more than the
# suite's 300 s, and the suite's timeout must stay a backstop above them, not decide first (it did, as a "hang").
pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def place(tmp_path):
    """The store and work folder every server of one test shares; and the sessions of every process
    recorded in it, checked for orphans at the end."""

    class Place:
        home = tmp_path
        store = tmp_path / "store" / "clusters.sqlite3"
        workdir = tmp_path / "work"
        sessions: set[int] = set()
        servers: list[JupyterServer] = []

        def server(self, **config) -> JupyterServer:
            server = JupyterServer(self.home, self.store, self.workdir, **config)
            self.servers.append(server)
            return server.start()

        def remember(self, cluster_id: str) -> dict[str, dict]:
            records = stored_workers(self.store, cluster_id)
            self.sessions.update(r["pid"] for r in records.values() if r and "pid" in r)
            return records

    place = Place()
    yield place
    for server in place.servers:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGKILL)
    kill_leftovers(place.sessions, str(place.workdir))


def events_of(client, cluster_id: str) -> list[str]:
    return [e["message"] for e in client.events(cluster_id)]


def test_a_local_adaptive_cluster_survives_sigkill_with_the_same_processes_and_grows_after(place):
    # Given a server with a local cluster of 2 workers, adaptive between 2 and 4
    server = place.server()
    client = server.client()
    cluster = client.create(name="durable", spec={"groups": [SMALL]}, adapt={"minimum": 2, "maximum": 4})
    before = client.wait(cluster["id"], running_with(2), timeout=120)
    # And the store holds its 2 running workers' usage rate (a cluster's newest state is written within
    # MAX_WRITE_PAUSE of a change: a crash sooner may lose it, and the time they ran unwatched with it)
    eventually(
        lambda: sum(rate[0] for rate in stored_usage(place.store, cluster["id"]).get("rates", {}).values()) == 2,
        30,
        "the store to hold the 2 running workers' usage rate",
    )
    processes = place.remember(cluster["id"])
    assert set(processes) == {"scheduler", "default-1", "default-2"}

    # When the server is killed with SIGKILL
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL
    # Then the scheduler and workers keep running
    assert all(same_process(p) for p in processes.values())

    # When a new server starts on the same store
    started, restarted = time.monotonic(), time.time()
    server = place.server()
    client = server.client()
    after = client.wait(cluster["id"], running_with(2), timeout=60)
    print(f"[restart timing] new server process started -> cluster re-adopted: {time.monotonic() - started:.2f} s")
    # And the scheduler links' process was spawned before the re-adoption began, the garbage collector's start-up
    # pass came after it (the re-adoption did not wait for either's start-up work)
    frozen = "objects alive at start-up are left out of full garbage collections"
    log = eventually(lambda: text if frozen in (text := server.log_text()) else None, 30, "the start-up pass")
    assert log.index("scheduler links run in process") < log.index("(durable): running") < log.index(frozen)

    # Then a client of the stream (as the sidebar, once it reconnects) gets the cluster in its first snapshot
    stream = client.watch(timeout=30)
    snapshot = next(stream)
    stream.close()
    assert [(c["id"], c["name"]) for c in snapshot["clusters"]] == [(cluster["id"], "durable")]
    # And the cluster is re-adopted as it was: id, name, spec, address, adaptive settings
    for key in ("id", "name", "template", "backend", "spec", "scheduler_address", "adapt", "created"):
        assert after[key] == before[key], key
    # And what it used was kept, and its 2 workers count while no server watched them (they ran on)
    as_of = datetime.datetime.fromisoformat(before["usage"]["as_of"]).timestamp()
    assert before["usage"]["rate"]["cores"] == 2
    assert after["usage"]["core_seconds"] >= before["usage"]["core_seconds"] + 2 * (restarted - as_of) - 0.01
    assert after["dashboard_url"] == before["dashboard_url"]
    assert any(
        "re-adopted after a server restart" in m and "2 workers running" in m for m in events_of(client, cluster["id"])
    )
    # And its workers are the same processes, counted and not started again
    assert place.remember(cluster["id"]) == processes
    assert sorted(p.name for p in (place.workdir / cluster["id"]).glob("default-*.log")) == [
        "default-1.log",
        "default-2.log",
    ]

    # When a burst of work arrives
    with cluster_client(after, timeout="30s") as dask:
        futures = dask.map(time.sleep, [0.5] * 200, pure=False)
        # Then adaptive mode, resumed, grows the cluster
        grown = client.wait(cluster["id"], lambda c: c["workers"]["running"] > 2, timeout=90)
        assert grown["adapt"] == before["adapt"]
        assert any(
            e["source"] == "adaptive" and e["after"] > 2 for e in client.events(cluster["id"]) if e["kind"] == "scale"
        )
        place.remember(cluster["id"])
        del futures

    # When it is deleted
    client.delete(cluster["id"], wait=True, timeout=60)
    # Then nothing of it is left running, and the store forgot it
    assert eventually(lambda: not orphans(place.sessions, str(place.workdir)), 30, "no process left")
    server.stop(signal.SIGTERM)
    assert stored_cluster_ids(place.store) == []


def test_sigterm_keeps_or_stops_and_a_cluster_whose_scheduler_went_away_fails(place):
    # Given a server that keeps its clusters at a clean stop, with three clusters of one worker
    server = place.server(on_shutdown="keep")
    client = server.client()
    one = {"groups": [{**SMALL, "count": 1}]}
    kept, gone, replaced = (client.create(name=name, spec=one)["id"] for name in ("kept", "gone", "replaced"))
    clusters = {cid: client.wait(cid, running_with(1), timeout=120) for cid in (kept, gone, replaced)}
    processes = {cid: place.remember(cid) for cid in clusters}

    # When it stops cleanly (SIGTERM)
    assert server.stop(signal.SIGTERM) == 0
    # Then every scheduler and worker still runs
    assert all(same_process(p) for records in processes.values() for p in records.values())

    # When, while no server runs, one scheduler is killed, and another's is replaced by a stranger on its port
    for cid in (gone, replaced):
        psutil.Process(processes[cid]["scheduler"]["pid"]).kill()
        eventually(lambda cid=cid: not same_process(processes[cid]["scheduler"]), 10, "the scheduler to exit")
    port = clusters[replaced]["scheduler_address"].rsplit(":", 1)[1]
    # (with that cluster's own TLS files, which only this user can read: a scheduler without them cannot even answer)
    tls = ClusterCredentials.from_paths(clusters[replaced]["tls"]).cli_arguments()
    stranger = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard",
         "--protocol", "tls", *tls],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        eventually(lambda: _answers(clusters[replaced]), 120, "the stranger scheduler")

        # And a server that stops its clusters at a clean stop starts on the same store
        server = place.server(on_shutdown="stop")
        client = server.client()

        # Then the first cluster is re-adopted with its worker
        client.wait(kept, running_with(1), timeout=60)
        assert same_process(processes[kept]["default-1"])
        # And the one whose scheduler is gone fails, says why, has no dashboard, and its worker is stopped
        failed = client.wait(gone, lambda c: c["status"] == "failed", timeout=60)
        assert "is gone" in failed["error"] and failed["dashboard_url"] is None
        # And the one whose port answers with another scheduler fails too, saying so, and the stranger is left alone
        other = client.wait(replaced, lambda c: c["status"] == "failed", timeout=60)
        assert "another scheduler" in other["error"] and other["dashboard_url"] is None
        for cid in (gone, replaced):
            eventually(
                lambda cid=cid: not same_process(processes[cid]["default-1"]), 30, f"the worker of {cid} to be stopped"
            )
        assert stranger.poll() is None

        # When that server stops cleanly
        assert server.stop(signal.SIGTERM) == 0
        # Then it stopped every cluster, the store is empty and nothing is left running
        assert stored_cluster_ids(place.store) == []
        assert orphans(place.sessions, str(place.workdir)) == []
    finally:
        stranger.kill()
        stranger.wait()


def _answers(cluster: dict) -> bool:
    try:
        with cluster_client(cluster, timeout="2s"):
            return True
    except OSError:
        return False


def test_a_corrupt_store_is_moved_aside_and_a_second_server_on_a_store_is_refused(place):
    # Given a store file that is not a database
    place.store.parent.mkdir(parents=True)
    place.store.write_bytes(b"not a database\n" * 100)
    # When a server starts on it
    server = place.server()
    # Then it serves, with no clusters, and said in its log where the unreadable store went
    assert server.client().list() == []
    aside = list(place.store.parent.glob("clusters.sqlite3.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"not a database")
    assert "could not be read" in server.log_text() and str(aside[0]) in server.log_text()
    # And the new store works: a cluster is recorded in it
    cluster = server.client().create(name="after", spec={"groups": [{**SMALL, "count": 0}]})
    server.client().wait(cluster["id"], "running", timeout=60)
    assert stored_cluster_ids(place.store) == [cluster["id"]]
    place.remember(cluster["id"])

    # When a second server starts on the same store
    second = place.server()
    # Then it does not serve clusters, and its log says which server holds the store
    with pytest.raises(ClusterManagerAPIError):
        second.client().list()
    assert f"is in use by another Jupyter server (pid {server.process.pid})" in second.log_text()
    second.stop(signal.SIGTERM)
    # And the first server's cluster is untouched
    assert server.client().get(cluster["id"])["status"] == "running"
    server.client().delete(cluster["id"], wait=True, timeout=60)
    server.stop(signal.SIGTERM)
    assert orphans(place.sessions, str(place.workdir)) == []


def test_idle_timeout_is_enforced_by_the_scheduler_while_no_server_runs(place):
    # Given a cluster of one worker, with a client connected to it
    server = place.server()
    client = server.client()
    cluster = client.create(name="idle", spec={"groups": [{**SMALL, "count": 1}]})
    cluster = client.wait(cluster["id"], running_with(1), timeout=120)
    processes = place.remember(cluster["id"])
    with cluster_client(cluster, timeout="30s"):
        # When its idle timeout is set to 3 s, and no task runs for longer than that
        assert client.set_idle_timeout(cluster["id"], 3)["idle_timeout"] == 3
        time.sleep(5)
        # Then the connected client keeps it running
        assert client.get(cluster["id"])["status"] == "running"
        # When the server is killed, and then the client goes
        server.stop(signal.SIGKILL)
    # Then the scheduler shuts itself down, with no server running
    eventually(lambda: not same_process(processes["scheduler"]), 60, "the idle scheduler to exit")

    # When a server starts again
    server = place.server()
    client = server.client()
    # Then the cluster is listed as stopped, the event says why, and its worker is stopped
    stopped = client.wait(cluster["id"], lambda c: c["status"] == "stopped", timeout=60)
    assert stopped["dashboard_url"] is None
    assert any("idle (no tasks and no client) for 3 s" in m for m in events_of(client, cluster["id"]))
    eventually(lambda: not same_process(processes["default-1"]), 30, "the worker to be stopped")
    # And deleting it removes it
    client.delete(cluster["id"], wait=True, timeout=60)
    server.stop(signal.SIGTERM)
    assert stored_cluster_ids(place.store) == []
    assert orphans(place.sessions, str(place.workdir)) == []


def squeue_jobs(prefix: str) -> dict[str, str]:
    """job name -> job id of the jobs squeue lists whose name starts with ``prefix``."""
    return {name: job_id for name, (job_id, _, _) in slurm_jobs(prefix).items()}


@pytest.mark.slurm
@requires_slurm
def test_a_slurm_cluster_survives_sigkill_and_its_jobs_are_re_adopted_by_id(place):
    # Given a server with a SLURM cluster of one worker (one job)
    template = {"name": "slurm", "description": "test", "backend": "slurm", "spec": {"groups": [{**SMALL, "count": 1}]}}
    server = place.server(templates=[template])
    client = server.client()
    cluster = client.create(template="slurm", name="on slurm")
    prefix = f"clustermgr-{cluster['id']}-"
    try:
        before = client.wait(cluster["id"], running_with(1), timeout=120)
        jobs = squeue_jobs(prefix)
        assert list(jobs) == [prefix + "default-1"]
        records = place.remember(cluster["id"])
        assert records["default-1"]["job_id"] == jobs[prefix + "default-1"]

        # When the server is killed with SIGKILL, and another starts on the same store
        server.stop(signal.SIGKILL)
        server = place.server(templates=[template])
        client = server.client()

        # Then the cluster is re-adopted with the same job, by id, and no job is submitted again
        after = client.wait(cluster["id"], running_with(1), timeout=60)
        assert after["scheduler_address"] == before["scheduler_address"]
        assert squeue_jobs(prefix) == jobs
        assert place.remember(cluster["id"])["default-1"]["job_id"] == jobs[prefix + "default-1"]
        assert any("re-adopted" in m for m in events_of(client, cluster["id"]))

        # When it is deleted
        client.delete(cluster["id"], wait=True, timeout=60)
        # Then no job and no process of it is left
        assert squeue_jobs(prefix) == {}
        server.stop(signal.SIGTERM)
        assert orphans(place.sessions, str(place.workdir)) == []
    finally:
        leftover = list(squeue_jobs(prefix).values())
        if leftover:
            subprocess.run(["scancel", *leftover], capture_output=True)


def test_a_scheduler_that_does_not_answer_at_a_restart_is_unresponsive_not_gone(place):
    # Given a server that keeps its clusters at a clean stop, with a cluster of one worker
    server = place.server(on_shutdown="keep")
    client = server.client()
    cluster_id = client.create(name="frozen", spec={"groups": [{**SMALL, "count": 1}]})["id"]
    client.wait(cluster_id, running_with(1), timeout=120)
    processes = place.remember(cluster_id)
    assert server.stop(signal.SIGTERM) == 0
    # And its scheduler stopped (SIGSTOP: it takes connections and answers nothing) while no server runs
    scheduler = psutil.Process(processes["scheduler"]["pid"])
    scheduler.suspend()
    try:
        # When another server starts on the same store
        server = place.server(on_shutdown="stop")
        client = server.client()
        # Then the cluster is listed unresponsive, saying so, once its scheduler has not answered in time
        frozen = client.wait(cluster_id, lambda c: c["status"] == "unresponsive", timeout=60)
        assert frozen["error"].startswith("the scheduler has not answered since the server started"), frozen["error"]
        # And it is kept, workers and all: still unresponsive, not failed, after several more tries
        time.sleep(25)
        assert client.get(cluster_id)["status"] == "unresponsive"
        assert same_process(processes["scheduler"]) and same_process(processes["default-1"])
    finally:
        scheduler.resume()
    # When the scheduler answers again, Then the cluster is re-adopted with the same worker, and says so
    client.wait(cluster_id, running_with(1), timeout=90)
    assert client.get(cluster_id)["error"] is None
    assert same_process(processes["default-1"])
    messages = events_of(client, cluster_id)
    assert "the scheduler answers again" in messages
    assert any(m.startswith("re-adopted after a server restart") for m in messages)
    client.delete(cluster_id, wait=True, timeout=60)
    assert server.stop(signal.SIGTERM) == 0
    assert orphans(place.sessions, str(place.workdir)) == []
