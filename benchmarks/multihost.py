"""The multi-host rows of ``make bench``: create -> 4 workers on the two nodes of the test bed (ci/testbed/).

clustermgr with its scheduler on the login side (``scheduler: "local"``) and as a batch job
(``scheduler: "job"``), next to ``dask_jobqueue.SLURMCluster`` doing the same on the same SLURM in
the same run: the time from the request to 4 workers connected, then the time to stop everything.

SLURM starts a submitted batch job at its controller's next scheduling pass, about once a second: a
wait of 0 to 1 s that neither product controls, drawn afresh for every side (its controller's log shows
waits of 0.04 to 0.93 s for the same 4 jobs). The target ratio therefore leaves that wait out of both
sides; it is measured from the controller's log, and reported. Each side also starts after a seeded random
pause of up to 1 s, so that no side meets the pass at the same point of its cycle every repetition.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path

from harness import BenchError, Server, Stream, log, now, removed, settled

STATE = Path(os.environ.get("TESTBED_STATE", "/tmp/clustermgr-testbed"))
SLURM_CONF = str(STATE / "slurm.conf")
CONTROLLER_LOG = STATE / "slurmctld.log"
SUBMITTED = re.compile(r"^\[(\S+)\] _slurm_rpc_submit_batch_job: JobId=(\d+)")
STARTED = re.compile(r"^\[(\S+)\] (?:sched: Allocate|sched/backfill: _start_job: Started) JobId=(\d+)")
NO_BOKEH = "SLURMCluster --no-dashboard"  # the reference side: its workers started without Bokeh, as clustermgr's
PHASE = random.Random(2026)  # the pauses before each side
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


class QueueWatch:
    """From its creation on: the seconds that jobs waited in SLURM's queue, from the controller's log.

    :meth:`waited` gives the union of each job's interval from its submission to its start (a job's start logged as
    ``sched: Allocate`` or the backfill's ``Started``, to the millisecond): 4 jobs submitted together wait
    once, a scheduler job and then its workers wait twice.
    """

    def __init__(self):
        self.offset = CONTROLLER_LOG.stat().st_size

    def waited(self) -> float:
        with open(CONTROLLER_LOG, "rb") as log_file:
            log_file.seek(self.offset)
            lines = log_file.read().decode(errors="replace").splitlines()
        submitted: dict[str, float] = {}
        intervals = []
        for line in lines:
            if found := SUBMITTED.match(line):
                submitted[found[2]] = datetime.fromisoformat(found[1]).timestamp()
            elif (found := STARTED.match(line)) and found[2] in submitted:
                intervals.append((submitted[found[2]], datetime.fromisoformat(found[1]).timestamp()))
        return union_length(intervals)


def union_length(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals.

    >>> union_length([(0, 1), (0.5, 1.5), (3, 4)])
    2.5
    """
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def random_phase() -> None:
    """A seeded pause of up to 1 s (see the module's docstring)."""
    time.sleep(PHASE.uniform(0, 1))


def clustermgr_flow(server: Server, stream: Stream, template: str) -> tuple[float, float, float]:
    """(create -> 4 workers running, delete -> gone, SLURM's queue wait within the create) in seconds."""
    wait_bed_idle()
    random_phase()
    m = stream.mark()
    queue = QueueWatch()
    t0 = now()
    _, cluster = server.call(
        "POST", "clustermgr/api/clusters", {"template": template, "spec": {"groups": [WORKER]}}, expect=202
    )
    t1, _, _ = stream.wait(
        settled(cluster["id"], 4), m, timeout=300, what="4 workers on the bed", cluster_id=cluster["id"]
    )
    waited = queue.waited()
    m = stream.mark()
    t2 = now()
    server.call("DELETE", f"clustermgr/api/clusters/{cluster['id']}", expect=202)
    t3, _, _ = stream.wait(removed(cluster["id"]), m, timeout=300, what="cluster removed")
    return t1 - t0, t3 - t2, waited


def slurmcluster_flow(folder: Path, worker_extra_args: list[str] | None = None) -> tuple[float, float, float]:
    """The same with ``dask_jobqueue.SLURMCluster``: its scheduler in this process, on the bridge the nodes reach.

    As configured by default, unless ``worker_extra_args`` (the reference side: ``--no-dashboard``, the worker
    started as clustermgr starts it, without the Bokeh pages).
    """
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    wait_bed_idle()
    random_phase()
    os.environ["SLURM_CONF"] = SLURM_CONF  # sbatch, squeue and scancel of this process reach the bed
    try:
        queue = QueueWatch()
        t0 = now()
        cluster = SLURMCluster(
            queue="compute", cores=1, processes=1, memory="400 MiB", walltime="00:30:00", interface="eth0",
            scheduler_options={"interface": "cm-br0", "dashboard_address": "127.0.0.1:0"},
            log_directory=str(folder), job_extra_directives=["--no-requeue"],
            worker_extra_args=worker_extra_args or [],
        )  # fmt: skip
        client = Client(cluster)
        cluster.scale(4)
        client.wait_for_workers(4, timeout=300)
        t1 = now()
        waited = queue.waited()
        t2 = now()
        client.close()
        cluster.close()
        wait_bed_idle()  # gone from the queue, as clustermgr's stop is measured (its DELETE -> "removed")
        t3 = now()
    finally:
        os.environ.pop("SLURM_CONF", None)
    return t1 - t0, t3 - t2, waited


TARGET = 0.5  # clustermgr / SLURMCluster, scheduler local, queue wait left out


def target_row_name(placement: str = "local") -> str:
    """The name of the create ratio row, SLURM's queue wait left out (with ``placement`` "local": the target row)."""
    return (
        f"multi-host: create -> 4 workers on 2 nodes, scheduler {placement}, SLURM's queue wait left out: "
        "ratio clustermgr / dask_jobqueue.SLURMCluster"
    )


def measure(tmp: Path, repeat: int, row, median) -> list[dict]:
    """The rows; ``row`` and ``median`` are bench.py's."""
    why = bed_unusable()
    if why:
        log(f"multi-host rows skipped: {why}")
        # the row with a target is there, missed: a run without the bed does not meet the multi-host target
        return [row(target_row_name(), float("nan"), "x", TARGET, note=f"not measured: {why}")]
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
    results: dict[str, list[tuple[float, float, float]]] = {
        "local": [], "job": [], "SLURMCluster": [], NO_BOKEH: []
    }  # fmt: skip
    try:
        for rep in range(repeat):
            results["local"].append(clustermgr_flow(server, stream, "bed-local"))
            results["job"].append(clustermgr_flow(server, stream, "bed-job"))
            results["SLURMCluster"].append(slurmcluster_flow(tmp / "slurmcluster"))
            results[NO_BOKEH].append(slurmcluster_flow(tmp / "slurmcluster", ["--no-dashboard"]))
            log(
                f"multi-host rep {rep + 1}/{repeat}: "
                + ", ".join(f"{k} {v[-1][0]:.2f} s (queue {v[-1][2]:.2f} s)" for k, v in results.items())
            )
    finally:
        stream.close()
        server.stop()

    def create(side: str) -> float:
        return median([c for c, _, _ in results[side]])

    def outside_queue(side: str) -> float:
        return median([c - q for c, _, q in results[side]])

    def waits(side: str) -> str:
        return "SLURM's queue wait " + ", ".join(f"{q:.2f}" for _, _, q in results[side]) + " s"

    rows = []
    for placement in ("local", "job"):
        label = f"multi-host: create -> 4 workers on 2 nodes, scheduler {placement}"
        rows += [
            row(f"{label}: clustermgr", create(placement), "s", note=waits(placement)),
            row(
                f"{label}: ratio clustermgr / dask_jobqueue.SLURMCluster",
                create(placement) / create("SLURMCluster"),
                "x",
            ),
            row(
                target_row_name(placement),
                outside_queue(placement) / outside_queue("SLURMCluster"),
                "x",
                TARGET if placement == "local" else None,
                note=f"medians {outside_queue(placement):.2f} s / {outside_queue('SLURMCluster'):.2f} s",
            ),
        ]
    rows.append(
        row(
            "multi-host: create -> 4 workers on 2 nodes: dask_jobqueue.SLURMCluster (scheduler local)",
            create("SLURMCluster"),
            "s",
            note=waits("SLURMCluster"),
        )
    )
    rows.append(
        row(
            "multi-host: create -> 4 workers on 2 nodes, scheduler local, SLURM's queue wait left out: ratio "
            "clustermgr / SLURMCluster with worker_extra_args=['--no-dashboard'] (workers without Bokeh, as clustermgr's)",
            outside_queue("local") / outside_queue(NO_BOKEH),
            "x",
            note=f"medians {outside_queue('local'):.2f} s / {outside_queue(NO_BOKEH):.2f} s",
        )
    )
    for side in results:
        rows.append(
            row(f"multi-host: stop 4 workers on 2 nodes: {side}", median([s for _, s, _ in results[side]]), "s")
        )
    return rows
