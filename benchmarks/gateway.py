#!/usr/bin/env python
"""Gateway clusters: create → running and scale 0 → 2, through clustermgr and with dask-gateway's own client, one run.

Starts a real dask-gateway server (``tests/gateway_server.py``: PyPI's server and proxy, the unsafe local
backend, on 127.0.0.1) and a Jupyter server with a gateway template (``tests/server_process.py``), then
times, interleaved, ``--repeat`` times each:

- clustermgr: ``POST clusters`` until the cluster is ``running``; ``PATCH scale`` to 2 workers until both run
  (the REST client, polling the cluster as the sidebar's stream would show it);
- dask-gateway: ``Gateway.new_cluster()`` until it returns (running); ``cluster.scale(2)`` until the
  client's ``wait_for_workers(2)`` returns.

Prints a Markdown table of medians (and every value); nothing is left running (both servers stopped,
the gateway's processes checked).

    python benchmarks/gateway.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dask_gateway import BasicAuth, Gateway  # noqa: E402

from tests.gateway_server import PASSWORD, start_gateway, stop_gateway  # noqa: E402
from tests.server_process import JupyterServer  # noqa: E402

GROUP = {"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}


def clustermgr_round(client) -> tuple[float, float]:
    start = time.perf_counter()
    cluster = client.create(template="gateway", options={"worker_cores": 1})
    client.wait(cluster["id"], lambda c: c["status"] == "running", timeout=120)
    created = time.perf_counter() - start
    start = time.perf_counter()
    client.scale(cluster["id"], workers=2)
    client.wait(cluster["id"], lambda c: c["workers"]["running"] == 2, timeout=120)
    scaled = time.perf_counter() - start
    client.delete(cluster["id"], wait=True, timeout=120)
    return created, scaled


def gateway_round(address: str) -> tuple[float, float]:
    with Gateway(address, auth=BasicAuth("alice", PASSWORD)) as gateway:
        start = time.perf_counter()
        cluster = gateway.new_cluster(worker_cores=1)
        created = time.perf_counter() - start
        try:
            with cluster.get_client(set_as_default=False) as dask_client:
                start = time.perf_counter()
                cluster.scale(2)
                dask_client.wait_for_workers(2, timeout=120)
                scaled = time.perf_counter() - start
        finally:
            cluster.shutdown()
    return created, scaled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="clustermgr-gateway-bench-"))
    gateway = start_gateway(folder / "gateway")
    template = {"name": "gateway", "backend": "gateway", "options": gateway.options, "spec": {"groups": [GROUP]}}
    server = JupyterServer(
        folder,
        folder / "store" / "clusters.sqlite3",
        folder / "work",
        templates=[template],
        default_template="gateway",
        include_builtin_templates=False,
        on_shutdown="stop",
    )
    rows: dict[str, list[float]] = {k: [] for k in ("cm_create", "cm_scale", "gw_create", "gw_scale")}
    try:
        server.start()
        client = server.client()
        deadline = time.monotonic() + 60
        while not client.templates()[0]["user_options"] and time.monotonic() < deadline:
            time.sleep(0.5)
        for _ in range(args.repeat):
            created, scaled = clustermgr_round(client)
            rows["cm_create"].append(created)
            rows["cm_scale"].append(scaled)
            created, scaled = gateway_round(gateway.address)
            rows["gw_create"].append(created)
            rows["gw_scale"].append(scaled)
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)
        left = stop_gateway(gateway)
    print("| step | clustermgr (REST API) | dask-gateway's client |")
    print("| --- | --- | --- |")
    for step, label in (("create", "create → running"), ("scale", "scale 0 → 2 workers running")):
        ours, theirs = rows[f"cm_{step}"], rows[f"gw_{step}"]
        print(
            f"| {label} | {statistics.median(ours):.2f} s ({', '.join(f'{v:.2f}' for v in ours)}) "
            f"| {statistics.median(theirs):.2f} s ({', '.join(f'{v:.2f}' for v in theirs)}) |"
        )
    if left:
        print(f"left running (killed): {left}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
