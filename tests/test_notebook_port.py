"""Given a notebook written for ``LocalCluster``, when only its cluster line changes, it runs on a cluster of the server.

The notebook (``tests/notebooks/localcluster.ipynb``) runs through a real kernel with nbclient, as it is
and ported; the ported run prints what the LocalCluster run printed, and the server's state (what the
sidebar shows) is what the notebook did: scaled to 3, adaptive from 0 to 3, let go on ``close()``, and
still adapting after the kernel is gone.
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from .helpers import call, delete_and_wait, subprocess_env, wait_for

NOTEBOOK = Path(__file__).parent / "notebooks" / "localcluster.ipynb"
LOCAL_LINE = (
    'cluster = LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="256 MiB", dashboard_address="127.0.0.1:0")'
)
SERVER_LINE = (
    "import clustermgr_lab; cluster = clustermgr_lab.new_cluster("
    'name="ported", spec={"groups": [{"count": 1, "threads": 1, "memory": "256 MiB"}]})'
)


def ported(notebook):
    """The notebook with its one cluster line changed, and nothing else."""
    changed = copy.deepcopy(notebook)
    for cell in changed.cells:
        cell.source = cell.source.replace(LOCAL_LINE, SERVER_LINE)
    before = [line for cell in notebook.cells for line in cell.source.splitlines()]
    after = [line for cell in changed.cells for line in cell.source.splitlines()]
    assert [(a, b) for a, b in zip(before, after, strict=True) if a != b] == [(LOCAL_LINE, SERVER_LINE)]
    return changed


async def execute(notebook, cwd: Path) -> list[str]:
    """Run every cell in a fresh kernel; each code cell's printed text."""
    client = NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    await client.async_execute()
    return [
        "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs).strip()
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


async def test_a_local_cluster_notebook_runs_on_a_server_cluster_with_one_line_changed(
    jp_serverapp, jp_fetch, tmp_path, monkeypatch
):
    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])  # the kernel imports this source tree
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert sum(LOCAL_LINE in cell.source for cell in notebook.cells) == 1

    # Given the notebook as written, run with LocalCluster
    local = await execute(copy.deepcopy(notebook), tmp_path)
    assert local[1].startswith("LocalCluster(") and "workers=1, threads=1, memory=256.00 MiB" in local[1]

    # When it runs with only its cluster line changed
    outputs = await execute(ported(notebook), tmp_path)
    print("\n".join(f"[{n}] {text}" for n, text in enumerate(outputs) if text))

    # Then it printed what the LocalCluster run printed, but for the cluster's repr and adapt()'s value
    # (LocalCluster's is its in-kernel Adaptive object; the server's adaptive mode has none: dask-gateway's way)
    assert outputs[1].startswith("JupyterServerCluster(ported, 'tls://")
    assert outputs[1].endswith("workers=1, threads=1, memory=256.00 MiB)")
    assert local[5].startswith("<distributed.deploy.adaptive.Adaptive") and outputs[5] == ""
    same = [0, 2, 3, 4, 6, 7]
    assert [outputs[i] for i in same] == [local[i] for i in same]
    assert outputs[2:] == ["dashboard: True", "workers: 3", "sum: 499500", "", "burst: 435", "closed"]

    # And the server's state is what the notebook did: one cluster, made from code, scaled to 3 by hand
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    (cluster,) = [c for c in listed["clusters"] if c["name"] == "ported"]
    _, events = await call(jp_fetch, "GET", "clusters", cluster["id"], "events", expect=200)
    scales = [(e["before"], e["after"], e["source"]) for e in events["events"] if e["kind"] == "scale"]
    # (made with 1 worker; then the notebook's scale(3); then only adaptive mode, within 0 to 3)
    assert scales[0] == (1, 3, "manual"), scales
    assert all(source == "adaptive" and 0 <= after <= 3 for _, after, source in scales[1:]), scales
    # And adaptive from 0 to 3 workers, which outlived the kernel: the cluster was let go, not stopped
    assert cluster["adapt"]["groups"] == [{"group": "default", "minimum": 0, "maximum": 3, "unit": "workers"}]
    assert cluster["status"] in ("running", "scaling")
    idle = await wait_for(
        jp_fetch,
        cluster["id"],
        lambda c: c["workers"]["running"] == 0 and c["last_decision"]["source"] == "adaptive",
        timeout=120,
        what="adaptive mode shrinking the idle cluster to 0 after the kernel is gone",
    )
    assert idle["adapt"] is not None
    # And the LocalCluster of the first run, discovered in its kernel, ended stopped (closed in its notebook)
    for other in listed["clusters"]:
        if other["id"] != cluster["id"]:
            assert other["backend"] == "external" and other["status"] == "stopped", other
    for other in listed["clusters"]:
        await delete_and_wait(jp_fetch, other["id"])
