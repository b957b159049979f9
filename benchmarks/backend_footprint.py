#!/usr/bin/env python
"""The footprint rows of the backends past this machine: a server with an SSH or a gateway template, or that attached a TLS cluster.

:func:`measure` returns the rows; ``bench.py`` runs it as part of ``make bench`` (part
``backend-footprint``), and this file runs it alone::

    python benchmarks/backend_footprint.py [--seconds 30] [--release-after S] [--out rows.json]

What it starts, all on 127.0.0.1: a private sshd (``tests/ssh_server.py``), a dask-gateway server
(``tests/gateway_server.py``) and a ``tls://`` scheduler with one worker started elsewhere
(``tests/started_elsewhere.py``); then Jupyter servers side by side: one with the extension off,
and with it on: with an SSH template (the private sshd its one host), with a gateway template (that
gateway), with the built-in templates only (it attaches the TLS scheduler), with dask-labextension's
``labextension.yaml`` in its Dask config (its LocalCluster factory, which the extension makes a
cluster-class template), and, where the two-node
test bed runs (``ci/testbed/``; ``--without-bed`` leaves it out), with a SLURM template whose
scheduler is a batch job there (``multihost.py``'s ``bed-job``).

- **Idle**: all of them over the same ``seconds`` (USS of each server and its descendants, their
  most descendants; as ``footprint.py``), and each one's CPU from the moment it answered to the end
  (they start one after another; each spends some 30-40 ms just after it answers, on or off),
  each server with a template against the one off: a template alone must cost what the extension
  costs (≤ 10 MiB, 0 processes, ≤ 0.1 % of a core).
- **After their clusters, sidebar open**: each on server, with its stream open (as the sidebar, to
  the end: the gateway's server goes on asking the gateway for the user's clusters every 2 s),
  makes a cluster of 2 workers (the SSH, gateway, LocalCluster class and SLURM templates) or attaches the TLS scheduler
  (1 worker), records the USS of the server and its descendants while it runs, and deletes it (a
  detach for the TLS one). Once the last is gone and the servers have had ``release_after`` + 5 s
  (as the footprint rows: the product's 120 s), they are all measured again: each on − off against
  the issue's targets (≤ 10 MiB, 0 processes), the processes left below the private sshd (0) and
  the jobs left on the bed's SLURM (0).

Nothing of what it starts is left: the sshd, the gateway (its processes checked) and the TLS
scheduler are stopped, the servers too, and every process started carries the run's mark.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import footprint  # noqa: E402
import harness as base  # noqa: E402
import multihost  # noqa: E402
from harness import BenchError, Server, Stream, log, now  # noqa: E402

from tests.gateway_server import start_gateway, stop_gateway  # noqa: E402
from tests.ssh_server import start_sshd, stop_sshd  # noqa: E402
from tests.started_elsewhere import start_tls_scheduler_and_worker, stop_process  # noqa: E402

MiB = 2**20
WORKERS = 2
GROUP = {"name": "default", "count": 0, "threads": 1, "memory": base.MEMORY}
Row = Callable[..., dict[str, Any]]
#: What a server's start waits for: jupyter_server's own status, which does not count as a use of the extension (an
#: API request of the extension would have the gateway asked for the user's clusters for a minute).
UNUSED = "api/status"
#: The servers with the extension on, by the backend they used, and the words of their rows.
SIDES = {
    "ssh": "with an SSH template",
    "gateway": "with a dask-gateway template",
    "tls": "that attached a TLS cluster",
    "class": "with dask-labextension's factory (a LocalCluster class)",
    "job": "with a SLURM template whose scheduler is a job",
}


def _running(cluster_id: str, workers: int) -> Callable[[dict], bool]:
    """The cluster is ``running`` with ``workers`` running (an attached cluster's requested count is not ours)."""

    def predicate(message: dict) -> bool:
        cluster = message.get("cluster") or {}
        return (
            message.get("type") in ("added", "changed")
            and cluster.get("id") == cluster_id
            and cluster["status"] == "running"
            and cluster["workers"]["running"] == workers
        )

    return predicate


def _uss(server: Server) -> float:
    """USS of the server and its descendants, MiB."""
    return footprint.sample(server.process.pid)[0] / MiB


def use(server: Server, stream: Stream, body: dict[str, Any], workers: int) -> tuple[float, float]:
    """POST ``body``, wait on ``stream`` until ``workers`` run, then DELETE and wait until it is gone.

    Returns the USS (MiB) of the server and its descendants while the cluster ran, and when it was gone.
    """
    mark = stream.mark()
    _, cluster = server.call("POST", "clustermgr/api/clusters", body, expect=202)
    stream.wait(_running(cluster["id"], workers), mark, what=f"{workers} workers running", cluster_id=cluster["id"])
    during = _uss(server)
    base.delete_clusters(server, stream, [cluster["id"]])
    return during, now()


def _labextension_config(folder: Path) -> Path:
    """A Dask config folder with dask-labextension's ``labextension.yaml`` as a site has it: its LocalCluster factory,
    made a template by the extension, starting :data:`WORKERS` workers."""
    folder.mkdir(parents=True, exist_ok=True)
    kwargs = {
        "n_workers": 0,
        "threads_per_worker": 1,
        "memory_limit": base.MEMORY,
        "host": "127.0.0.1",
        "dashboard_address": "127.0.0.1:0",
    }
    factory = {"module": "dask.distributed", "class": "LocalCluster", "args": [], "kwargs": kwargs}
    config = {"labextension": {"factory": factory, "default": {"workers": WORKERS, "adapt": None}}}
    (folder / "labextension.yaml").write_text(json.dumps(config))  # JSON is YAML
    return folder


def _tls_address(scheduler_file: Path, timeout: float = 60) -> str:
    deadline = now() + timeout
    while now() < deadline:
        if scheduler_file.exists():
            address = json.loads(scheduler_file.read_text() or "{}").get("address")
            if address:
                return address
        time.sleep(0.1)
    raise BenchError(f"the TLS scheduler wrote no address to {scheduler_file} within {timeout:g} s")


def measure(
    tmp: Path, row: Row, *, seconds: float = 30, release_after: float | None = None, bed: bool = True
) -> list[dict]:
    """Every row of this part, in order: idle with a template, during (a note), after the clusters are gone.

    ``bed``: also the SLURM side on the two-node test bed (``multihost.py``); where the bed cannot be used, its
    rows are there, missed, saying why.
    """
    release_after = footprint.RELEASE_AFTER if release_after is None else release_after
    unusable = multihost.bed_unusable() if bed else "left out"
    sides = [side for side in SIDES if side != "job" or unusable is None]
    folder = tmp / "backend-footprint"
    sshd = gateway = None
    elsewhere: list = []
    servers: dict[str, Server] = {}
    streams: list[Stream] = []
    try:
        sshd = start_sshd(folder / "sshd")
        gateway = start_gateway(folder / "gateway")
        credentials, scheduler_file, elsewhere = start_tls_scheduler_and_worker(folder)
        address = _tls_address(scheduler_file)
        servers["off"] = footprint.server(folder / "off", "server", False)
        servers["ssh"] = footprint.server(
            folder / "ssh", "server", True, release_after=release_after, ready_path=UNUSED,
            templates=[{"name": "ssh", "description": "workers over SSH", "backend": "ssh", "spec": {"groups": [GROUP]}}],
            extra_config={"SSHBackend": {"hosts": ["127.0.0.1"], "connect_options": sshd.connect_options, "interface": "lo"}},
        )  # fmt: skip
        servers["gateway"] = footprint.server(
            folder / "gateway", "server", True, release_after=release_after, ready_path=UNUSED,
            templates=[{"name": "gateway", "description": "dask-gateway", "backend": "gateway", "options": gateway.options, "spec": {"groups": [GROUP]}}],
        )  # fmt: skip
        servers["tls"] = footprint.server(
            folder / "tls", "server", True, release_after=release_after, ready_path=UNUSED
        )
        servers["class"] = footprint.server(
            folder / "class", "server", True, release_after=release_after, ready_path=UNUSED,
            env={"DASK_CONFIG": str(_labextension_config(folder / "dask"))},
        )  # fmt: skip
        if "job" in sides:
            servers["job"] = footprint.server(
                folder / "job", "server", True, release_after=release_after, ready_path=UNUSED,
                templates=[t for t in multihost.TEMPLATES if t["name"] == "bed-job"],
            )  # fmt: skip
        answered = []  # each server's CPU seconds when it answered: its CPU is counted from its own start
        for server in servers.values():
            server.start()
            answered.append((footprint.sample(server.process.pid)[2], now()))
        names = list(servers)
        log(f"backend footprint: {len(names)} servers answer; measuring for {seconds:g} s")
        measured = dict(zip(names, footprint.idle(list(servers.values()), seconds, since=answered)))
        for side in sides:  # the extension answers (asked only now: a request is a use)
            servers[side].call("GET", "clustermgr/api/clusters", expect=200)
        rows: list[dict] = []
        for side in [s for s in sides if s != "tls"]:
            note = f"over {seconds:g} s after start, beside the other servers of this part"
            rows += footprint.difference_rows(
                f"idle server {SIDES[side]}", measured[side], measured["off"], row, note, cpu=True
            )
        spec = {"groups": [{**GROUP, "count": WORKERS}]}
        during, deleted = {}, 0.0
        bodies = {
            "ssh": ({"template": "ssh", "spec": spec}, WORKERS),
            "gateway": ({"template": "gateway", "spec": spec}, WORKERS),
            "tls": ({"attach": address, "tls": credentials.to_dict()}, 1),
            "class": ({"template": "labextension"}, WORKERS),
            "job": ({"template": "bed-job", "spec": {"groups": [{**multihost.WORKER, "count": WORKERS}]}}, WORKERS),
        }
        for side in sides:
            body, workers = bodies[side]
            streams.append(Stream(servers[side]))  # the sidebar opens, and stays open to the end
            during[side], deleted = use(servers[side], streams[-1], body, workers)
            log(f"backend footprint: {side}: {during[side]:.1f} MiB while its cluster ran; gone")
        wait = release_after + 5.0
        time.sleep(max(0.0, deleted + wait - now()))
        log(f"backend footprint: {now() - deleted:.0f} s after the last cluster; measuring for {seconds:g} s")
        measured = dict(zip(names, footprint.idle(list(servers.values()), seconds)))
        for side in sides:
            note = (
                f"over {seconds:g} s from {wait:g} s after its cluster was deleted; "
                f"{during[side]:.1f} MiB while the cluster ran"
            )
            rows += footprint.difference_rows(
                f"server {SIDES[side]}, its clusters gone, sidebar open",
                measured[side],
                measured["off"],
                row,
                note,
                cpu=False,
            )
        left = len(footprint.tree(sshd.process.pid)) - 1
        rows.append(row("processes left below the SSH host's sshd after its clusters", left, "processes", 0))
        if "job" in sides:
            jobs = multihost.bed_command("squeue", "-h", "-o", "%i").stdout.split()
            rows.append(row("jobs left on the test bed's SLURM after its clusters", len(jobs), "jobs", 0))
        elif bed:
            what = f"server {SIDES['job']}, its clusters gone, sidebar open, extension on - off: USS of the server and its descendants"
            rows.append(row(what, float("nan"), "MiB", 10, note=f"not measured: {unusable}"))
            log(f"backend footprint: the test bed's side left out: {unusable}")
        return rows
    finally:
        for stream in streams:
            stream.close()
        footprint.stop(*servers.values())
        for process in elsewhere:
            stop_process(process)
        if gateway is not None:
            leftovers = stop_gateway(gateway)
            if leftovers:
                log(f"backend footprint: the gateway left {leftovers} (killed)")
        if sshd is not None:
            stop_sshd(sshd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="each measurement (default 30 s)")
    parser.add_argument(
        "--release-after",
        type=float,
        help=f"the servers' WarmLauncher and LinkHost release_after (default the product's, {footprint.RELEASE_AFTER:g} s)",
    )
    parser.add_argument("--without-bed", action="store_true", help="leave the test bed's SLURM side out")
    parser.add_argument("--out", type=Path, help="rows JSON")
    args = parser.parse_args()
    return footprint.run_alone(
        "clustermgr-backend-footprint-",
        lambda tmp: measure(
            tmp, footprint._row, seconds=args.seconds, release_after=args.release_after, bed=not args.without_bed
        ),
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
