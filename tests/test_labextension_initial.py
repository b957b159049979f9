"""Given dask-labextension's ``labextension.initial`` in Dask's config, its clusters start with the server, once.

Real Jupyter server processes on one store (tests/server_process.py): the first server starts the listed
clusters; a second one, after a restart that keeps the clusters, re-adopts them and starts no duplicate.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time

import psutil
import pytest

from .helpers import running_with
from .server_process import JupyterServer, kill_leftovers, stored_workers

pytestmark = pytest.mark.timeout(600)

SMALL = {"name": "default", "count": 0, "threads": 1, "memory": "256 MiB"}
INITIAL = [
    {"name": "initial-fixed", "workers": 1},
    {"name": "initial-adaptive", "adapt": {"minimum": 1, "maximum": 2}},
    {"workers": 0, "colour": "blue"},  # unnamed: "Initial cluster 3"; a key it does not use is reported
]


@pytest.fixture
def dask_config_initial(monkeypatch):
    """``labextension.initial`` as the servers' Dask config has it (the environment's form of a labextension.yaml)."""
    monkeypatch.setenv("DASK_LABEXTENSION__INITIAL", json.dumps(INITIAL))
    monkeypatch.setenv("DASK_LABEXTENSION__DEFAULT", json.dumps({"workers": None, "adapt": None}))


def processes_below(folder) -> list[psutil.Process]:
    """Processes whose command line names ``folder`` or whose working folder is below it."""
    found = []
    for process in psutil.process_iter(["cmdline", "cwd"]):
        cmdline, cwd = process.info["cmdline"] or [], process.info["cwd"] or ""
        if any(str(folder) in part for part in cmdline) or cwd.startswith(str(folder)):
            found.append(process)
    return found


def names_and_ids(client) -> dict[str, str]:
    return {c["name"]: c["id"] for c in client.list()}


def test_initial_clusters_start_with_the_server_once_and_are_re_adopted_not_duplicated(dask_config_initial, tmp_path):
    store, workdir = tmp_path / "store" / "clusters.sqlite3", tmp_path / "work"
    config = {"on_shutdown": "keep", "templates": [{"name": "small", "backend": "local", "spec": {"groups": [SMALL]}}]}
    servers: list[JupyterServer] = []
    pids: set[int] = set()
    try:
        # Given a server started with labextension.initial in its Dask config
        first = JupyterServer(tmp_path, store, workdir, default_template="small", **config).start()
        servers.append(first)
        client = first.client()
        # Then it starts those clusters: one of 1 worker, one adaptive from 1 to 2, and the unnamed one
        started = time.monotonic()
        while len(client.list()) < 3 and time.monotonic() - started < 60:
            time.sleep(0.2)
        listed = names_and_ids(client)
        assert set(listed) == {"initial-fixed", "initial-adaptive", "Initial cluster 3"}
        client.wait(listed["initial-fixed"], running_with(1), timeout=120)
        adaptive = client.wait(listed["initial-adaptive"], running_with(1), timeout=120)
        ((adapt_range,),) = [adaptive["adapt"]["groups"]]
        assert (adapt_range["minimum"], adapt_range["maximum"], adapt_range["unit"]) == (1, 2, "workers")
        assert "colour" in first.log_text() and "labextension.initial[2]" in first.log_text()
        for cluster_id in listed.values():
            pids.update(r["pid"] for r in stored_workers(store, cluster_id).values() if r and "pid" in r)

        # When the server stops, keeping them, and another starts on the same store with the same config
        assert first.stop(signal.SIGTERM) == 0
        second = JupyterServer(tmp_path, store, workdir, default_template="small", **config).start()
        servers.append(second)
        client = second.client()
        client.wait(listed["initial-fixed"], running_with(1), timeout=120)
        client.wait(listed["initial-adaptive"], running_with(1), timeout=120)
        # Then it lists the same clusters, re-adopted (same ids), and started none again
        time.sleep(2)  # past the start-up step that creates the initial clusters
        assert names_and_ids(client) == listed
        assert "is listed already" in second.log_text()
        for cluster_id in listed.values():
            client.delete(cluster_id)
        started = time.monotonic()
        while client.list() and time.monotonic() - started < 60:
            time.sleep(0.2)
        assert client.list() == []
    finally:
        for server in servers:  # a failed test's server: its clusters are deleted (it keeps them), then it stops
            if server.process is not None and server.process.poll() is None:
                with contextlib.suppress(Exception):
                    for cluster in server.client().list():
                        server.client().delete(cluster["id"])
                server.stop(signal.SIGTERM)
        kill_leftovers(pids, str(workdir))
        # the warm launcher exits once idle (2 s); a failed test's schedulers are found by their folder
        _, alive = psutil.wait_procs(processes_below(tmp_path), timeout=15)
        for process in alive:
            process.kill()
        assert not alive, f"left running: {alive}"
