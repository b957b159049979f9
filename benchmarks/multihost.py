"""The multi-host rows of ``make bench``: create -> 4 workers on the two nodes of the test bed (ci/testbed/).

clustermgr with its scheduler on the login side (``scheduler: "local"``) and as a batch job
(``scheduler: "job"``), next to ``dask_jobqueue.SLURMCluster`` doing the same on the same SLURM in
the same run: the time from the request to 4 workers connected, then the time to stop everything.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from harness import BenchError, Server, Stream, log, now, removed, settled

STATE = Path(os.environ.get("TESTBED_STATE", "/tmp/clustermgr-testbed"))
SLURM_CONF = str(STATE / "slurm.conf")
WORKER = {"name": "default", "count": 4, "threads": 1, "memory": "400 MiB"}
SPEC = {"groups": [{**WORKER, "count": 0}]}
BED = {"slurm_conf": SLURM_CONF, "queue": "compute", "walltime": "00:30:00", "interface": "eth0"}
TEMPLATES = [
    {"name": "bed-local", "backend": "slurm", "options": {**BED, "scheduler_interface": "cm-br0"}, "spec": SPEC},
    {
        "name": "bed-job",
        "backend": "slurm",
        "options": {**BED, "scheduler": "job", "scheduler_memory": "600 MiB"},
        "spec": SPEC,
    },
]


def bed_unusable() -> str | None:
    """Why the bed cannot be measured here, or None."""
    if not Path(SLURM_CONF).exists():
        return f"no test bed ({SLURM_CONF}); start it: sudo bash ci/testbed/start-testbed.sh"
    done = bed_command("sinfo", "-h", "-N", "-o", "%N=%T")
    states = done.stdout.split()
    if sorted(states) != ["node1=idle", "node2=idle"]:
        return f"the bed's nodes are not idle: {states or done.stderr.strip()}"
    return None


def bed_command(*command: str) -> subprocess.CompletedProcess:
    """A SLURM command (``sinfo``, ``squeue``) run against the bed's SLURM; its text output."""
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, "SLURM_CONF": SLURM_CONF})


def wait_bed_idle(timeout: float = 120.0) -> None:
    """Until no job is listed and both nodes are idle: every side starts on the same empty bed.

    Otherwise a side that follows one whose jobs are still leaving (SLURM's COMPLETING) waits for the
    nodes itself and pays for its predecessor: ``SLURMCluster.close()`` returns before its jobs are gone,
    and clustermgr's side came right after it.
    """
    deadline = now() + timeout
    while True:
        jobs = bed_command("squeue", "-h", "-o", "%i").stdout.split()
        nodes = bed_command("sinfo", "-h", "-N", "-o", "%T").stdout.split()
        if not jobs and set(nodes) == {"idle"}:
            return
        if now() > deadline:
            raise BenchError(f"the bed did not become idle within {timeout:g} s (jobs {jobs}, nodes {nodes})")
        time.sleep(0.1)


def clustermgr_flow(server: Server, stream: Stream, template: str) -> tuple[float, float]:
    """(create -> 4 workers running, delete -> gone) in seconds, through the REST API and the stream."""
    wait_bed_idle()
    m = stream.mark()
    t0 = now()
    _, cluster = server.call(
        "POST", "clustermgr/api/clusters", {"template": template, "spec": {"groups": [WORKER]}}, expect=202
    )
    t1, _, _ = stream.wait(
        settled(cluster["id"], 4), m, timeout=300, what="4 workers on the bed", cluster_id=cluster["id"]
    )
    m = stream.mark()
    t2 = now()
    server.call("DELETE", f"clustermgr/api/clusters/{cluster['id']}", expect=202)
    t3, _, _ = stream.wait(removed(cluster["id"]), m, timeout=300, what="cluster removed")
    return t1 - t0, t3 - t2


def slurmcluster_flow(folder: Path) -> tuple[float, float]:
    """The same with ``dask_jobqueue.SLURMCluster``: its scheduler in this process, on the bridge the nodes reach."""
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    wait_bed_idle()
    os.environ["SLURM_CONF"] = SLURM_CONF  # sbatch, squeue and scancel of this process reach the bed
    try:
        t0 = now()
        cluster = SLURMCluster(
            queue="compute", cores=1, processes=1, memory="400 MiB", walltime="00:30:00", interface="eth0",
            scheduler_options={"interface": "cm-br0", "dashboard_address": "127.0.0.1:0"},
            log_directory=str(folder), job_extra_directives=["--no-requeue"],
        )  # fmt: skip
        client = Client(cluster)
        cluster.scale(4)
        client.wait_for_workers(4, timeout=300)
        t1 = now()
        t2 = now()
        client.close()
        cluster.close()
        wait_bed_idle()  # gone from the queue, as clustermgr's stop is measured (its DELETE -> "removed")
        t3 = now()
    finally:
        os.environ.pop("SLURM_CONF", None)
    return t1 - t0, t3 - t2


def measure(tmp: Path, repeat: int, row, median) -> list[dict]:
    """The rows; ``row`` and ``median`` are bench.py's."""
    why = bed_unusable()
    if why:
        log(f"multi-host rows skipped: {why}")
        return [row("multi-host: create -> 4 workers on 2 nodes", float("nan"), "s", note=f"not measured: {why}")]
    server = Server(
        tmp / "multihost-server",
        config={
            "ServerApp": {"jpserver_extensions": {"clustermgr_lab": True, "jupyter_server_proxy": False}},
            "ClusterManager": {"workdir": str(tmp / "multihost"), "on_shutdown": "stop", "templates": TEMPLATES},
        },
    )
    server.tmp.mkdir(parents=True, exist_ok=True)
    server.start()
    stream = Stream(server)
    results: dict[str, list[tuple[float, float]]] = {"local": [], "job": [], "SLURMCluster": []}
    try:
        for rep in range(repeat):
            results["local"].append(clustermgr_flow(server, stream, "bed-local"))
            results["job"].append(clustermgr_flow(server, stream, "bed-job"))
            results["SLURMCluster"].append(slurmcluster_flow(tmp / "slurmcluster"))
            log(f"multi-host rep {rep + 1}/{repeat}: " + ", ".join(f"{k} {v[-1][0]:.2f} s" for k, v in results.items()))
    finally:
        stream.close()
        server.stop()
    theirs = median([c for c, _ in results["SLURMCluster"]])
    rows = []
    for placement in ("local", "job"):
        ours = median([c for c, _ in results[placement]])
        label = f"multi-host: create -> 4 workers on 2 nodes, scheduler {placement}"
        rows += [
            row(f"{label}: clustermgr", ours, "s"),
            row(
                f"{label}: ratio clustermgr / dask_jobqueue.SLURMCluster",
                ours / theirs,
                "x",
                1.0 if placement == "local" else None,
            ),
        ]
    rows.append(
        row("multi-host: create -> 4 workers on 2 nodes: dask_jobqueue.SLURMCluster (scheduler local)", theirs, "s")
    )
    for side in results:
        rows.append(row(f"multi-host: stop 4 workers on 2 nodes: {side}", median([s for _, s in results[side]]), "s"))
    return rows
