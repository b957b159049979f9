"""Given real Jupyter server processes on one store, a cluster attached by address is attached again by the next
server (same id and name), its scheduler and workers untouched; one whose scheduler went away fails, saying so."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from .helpers import eventually
from .server_process import stored_cluster_ids
from .test_restart import events_of, place  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(600)


def observed_running(n: int):
    """Running with ``n`` workers: an attached cluster's workers are observed, never requested."""
    return lambda cluster: cluster["status"] == "running" and cluster["workers"]["running"] == n


@pytest.fixture
def outside(tmp_path):
    """A scheduler and one worker started outside any Jupyter server (``dask scheduler``, ``dask worker``)."""
    scheduler_file = tmp_path / "outside-scheduler.json"
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
             "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(scheduler_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
    ]  # fmt: skip
    try:
        eventually(scheduler_file.exists, 60, "the outside scheduler's file")
        address = json.loads(scheduler_file.read_text())["address"]
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        )
        yield address, started
    finally:
        for process in reversed(started):
            process.kill()
            process.wait()


def test_an_attached_cluster_is_attached_again_after_a_server_restart(place, outside):  # noqa: F811
    # Given a cluster started outside the server, with one worker, attached to a server that keeps its clusters
    address, processes = outside
    server = place.server(on_shutdown="keep")
    client = server.client()
    attached = client.attach(address, name="outside", wait=True, timeout=120)
    client.wait(attached["id"], observed_running(1), timeout=120)

    # When the server stops and another starts on the same store
    assert server.stop(signal.SIGTERM) == 0
    assert stored_cluster_ids(place.store) == [attached["id"]]
    server = place.server(on_shutdown="keep")
    client = server.client()

    # Then the cluster is listed again under its id and name, running with its worker, and says how it came back
    again = client.wait(attached["id"], observed_running(1), timeout=120)
    assert (again["name"], again["template"], again["scheduler_address"]) == ("outside", "attached", address)
    assert any(m.startswith("attached again after a server restart") for m in events_of(client, attached["id"]))
    # And the outside scheduler and worker were never touched
    assert all(p.poll() is None for p in processes)

    # When the server stops, and the outside scheduler goes away before the next one starts
    assert server.stop(signal.SIGTERM) == 0
    for process in reversed(processes):
        process.kill()
        process.wait()
    server = place.server(on_shutdown="stop")
    client = server.client()
    # Then the next server lists it as failed, saying it could not attach it again
    failed = client.wait(attached["id"], lambda c: c["status"] == "failed", timeout=120)
    assert "could not attach it again" in failed["error"]
    # And removing it forgets it
    client.delete(attached["id"])
    assert server.stop(signal.SIGTERM) == 0
    assert stored_cluster_ids(place.store) == []
