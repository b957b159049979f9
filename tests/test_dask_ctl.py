"""Given a real Jupyter server, the real dask-ctl CLI lists, scales and deletes its clusters through our entry point.

dask-ctl finds discovery methods in the ``dask_cluster_discovery`` entry point group. The entry point is
declared in ``pyproject.toml``; the tests put that declaration (as ``pip install`` writes it) on the
path of the ``dask`` process, so they test this source tree's declaration whether or not it is installed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import tomllib

from .helpers import REPO, call, run, running_with, subprocess_env, wait_for, wait_gone

SMALL = {"groups": [{"count": 1, "threads": 1, "memory": "256 MiB"}]}

# `dask cluster ...` as the `dask` script runs it. dask-ctl 2024.1.0, the newest on PyPI, imports
# distributed.cli.utils.install_signal_handlers at import time, which current distributed no longer
# has: without it, the `dask` CLI skips dask-ctl's `cluster` command with a warning. Only that name
# is supplied here (a no-op: the CLI's loop needs no signal handlers to list, scale or delete).
DASK = """
import sys
import distributed.cli.utils as utils
if not hasattr(utils, "install_signal_handlers"):
    utils.install_signal_handlers = lambda loop=None, cleanup=None: None
from dask.cli import run_cli
sys.argv[0] = "dask"
run_cli()
"""


def entry_points_on_path(directory: Path) -> Path:
    """Write the entry points of ``pyproject.toml`` as an installed distribution's metadata into ``directory``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    dist_info = directory / "clustermgr_lab_source-0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: clustermgr-lab-source\nVersion: 0\n")
    lines = []
    for group, entries in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture
def dask(tmp_path, jp_serverapp):
    """Runs ``dask ARGS...`` (dask-ctl's commands) with the test server findable; returns ``(code, out, err)``."""
    path = entry_points_on_path(tmp_path / "entry-points")

    async def dask(*args: str, **env: str):
        environment = subprocess_env(COLUMNS="250", **env)
        environment["PYTHONPATH"] = os.pathsep.join([str(path), environment["PYTHONPATH"]])
        environment.pop("JUPYTER_URL", None)
        environment.pop("JUPYTER_TOKEN", None)
        return await run(sys.executable, "-c", DASK, *args, env=environment)

    return dask


def row(out: str, name: str) -> list[str]:
    (line,) = [line for line in out.splitlines() if line.split()[:1] == [name]]
    return line.split()


def test_the_package_declares_its_discovery_for_dask_ctl():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["dask_cluster_discovery"] == {
        "clustermgr": "clustermgr_lab.client.daskctl:discover"
    }


async def test_dask_cluster_lists_scales_and_deletes_this_users_clusters(dask, jp_fetch):
    # Given a cluster of the server with one worker of 256 MiB
    _, made = await call(jp_fetch, "POST", "clusters", body={"name": "ctl", "spec": SMALL}, expect=202)
    made = await wait_for(jp_fetch, made["id"], running_with(1), what="1 running worker")

    # When `dask cluster list` runs
    code, out, err = await dask("cluster", "list")
    # Then it lists it, found by our discovery, with its workers, threads and memory
    print(out)
    assert code == 0, err
    assert "Discovery clustermgr failed" not in out and "timed out" not in err
    assert row(out, "ctl") == [
        "ctl", made["scheduler_address"], "clustermgr_lab.client.daskctl.DaskCtlCluster", "clustermgr",
        "1", "1", "256.00", "MiB", *row(out, "ctl")[8:-1], "Running",
    ]  # fmt: skip

    # When it is scaled to 3 workers from the command line
    code, out, err = await dask("cluster", "scale", "ctl", "3")
    # Then the server's one scale routine made it 3 workers, as the sidebar shows
    assert code == 0, err + out
    assert "Scaled cluster ctl to 3 workers." in out
    scaled = await wait_for(jp_fetch, made["id"], running_with(3), what="3 running workers")
    assert scaled["last_decision"]["after"] == 3 and scaled["last_decision"]["source"] == "manual"
    code, out, err = await dask("cluster", "list")
    assert row(out, "ctl")[4:8] == ["3", "3", "768.00", "MiB"]

    # When it is deleted from the command line
    code, out, err = await dask("cluster", "delete", "ctl")
    # Then it is gone from the server
    assert code == 0, err + out
    assert "Deleted cluster ctl." in out
    assert await wait_gone(jp_fetch, made["id"]) == 404
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []


async def test_with_no_server_discovery_yields_nothing_and_raises_nothing(dask, tmp_path):
    # Given no running Jupyter server, only the record of one that does not answer (a live PID, a closed port)
    runtime = tmp_path / "no-server-runtime"
    runtime.mkdir()
    (runtime / "jpserver-1.json").write_text(
        json.dumps({"url": "http://127.0.0.1:9/", "token": "x", "pid": os.getpid(), "port": 9, "sock": ""})
    )
    # When `dask cluster list clustermgr` runs (one discovery method: dask-ctl re-raises its errors)
    code, out, err = await dask("cluster", "list", "clustermgr", JUPYTER_RUNTIME_DIR=str(runtime))
    # Then it succeeds with an empty table: no error, no timeout (dask-ctl cuts a method off after 5 s)
    assert code == 0, err + out
    assert "timed out" not in err and "Traceback" not in out + err
    assert out.split()[:9] == [
        "Name",
        "Address",
        "Type",
        "Discovery",
        "Workers",
        "Threads",
        "Memory",
        "Created",
        "Status",
    ]
    assert len([line for line in out.splitlines() if line.strip()]) == 2  # the header and its rule
