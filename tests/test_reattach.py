"""Given real Jupyter server processes on one store, a cluster attached by address is attached again by the next
server (same id and name), its scheduler and workers untouched; one whose scheduler went away fails, saying so;
one whose certificate paths now name a FIFO fails without blocking the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from clustermgr_lab.client.errors import ClusterManagerAPIError
from clustermgr_lab.common.security import ClusterCredentials

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


@pytest.fixture
def outside_tls(tmp_path):
    """A tls:// scheduler started outside any Jupyter server, with credentials of its own."""
    credentials = ClusterCredentials.create(tmp_path / "elsewhere")
    scheduler_file = tmp_path / "outside-tls-scheduler.json"
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
         "--protocol", "tls", *credentials.cli_arguments(), "--scheduler-file", str(scheduler_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        eventually(lambda: scheduler_file.exists() and scheduler_file.read_text(), 60, "the scheduler's file")
        yield json.loads(scheduler_file.read_text())["address"], credentials
    finally:
        scheduler.kill()
        scheduler.wait()


def test_certificate_paths_that_name_a_fifo_are_refused_without_blocking_the_server(place, outside_tls):  # noqa: F811
    # Given a tls:// scheduler started elsewhere, and a FIFO that no one writes to
    address, credentials = outside_tls
    fifo = place.home / "key.fifo"
    os.mkfifo(fifo, 0o600)
    server = place.server(on_shutdown="keep")
    client = server.client()

    # When it is attached with its key file's path naming the FIFO
    with pytest.raises(ClusterManagerAPIError) as refused:
        client.attach(address, tls={**credentials.to_dict(), "key": str(fifo)})
    # Then that is a 400 naming the field, and the server goes on answering
    assert (refused.value.status, refused.value.field) == (400, "tls.key"), refused.value
    assert "regular file" in str(refused.value)
    assert client.list() == []

    # When it is attached with its real files, and the key file is then replaced by a FIFO while no server runs
    attached = client.attach(address, name="outside-tls", tls=credentials.to_dict(), wait=True, timeout=120)
    assert server.stop(signal.SIGTERM) == 0
    credentials.key.unlink()
    os.mkfifo(credentials.key, 0o600)
    started = time.monotonic()
    server = place.server(on_shutdown="stop")  # waits until Jupyter's own API answers (90 s at most)
    client = server.client()

    # Then the next server starts and answers at once, and lists the cluster as failed, saying why
    failed = client.wait(attached["id"], lambda c: c["status"] == "failed", timeout=60)
    print(f"server answering with the cluster failed {time.monotonic() - started:.1f} s after its start")
    assert "is not a regular file" in failed["error"] and str(credentials.key) in failed["error"], failed["error"]
    client.delete(attached["id"])
    assert server.stop(signal.SIGTERM) == 0
