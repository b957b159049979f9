#!/usr/bin/env python
"""``make bench``: clustermgr-lab's speed targets, side by side with LocalCluster and dask-labextension.

Writes ``benchmarks/results/<date>.json`` (a list of rows ``{name, value, unit, target, pass}``),
a PNG chart next to it and a Markdown table (``<date>.md``), and prints the table. ``target`` is
an upper bound in the row's unit (every target here is "at most"); ``pass`` is ``value <= target``,
``null`` for rows that only report a figure. See ``benchmarks/README.md``.

    python benchmarks/bench.py [--repeat N] [--labext-python PATH] [--out PATH] [--chart PATH]
    python benchmarks/bench.py --smoke --out /tmp/rows.json   # small and quick (< 60 s): the test suite runs it

Everything is measured in one run, in interleaved order: clustermgr through its REST API and
WebSocket stream (a Jupyter server subprocess), ``LocalCluster`` in this process, and
dask-labextension in a second Jupyter server run by the Python of its own venv (``make bench``
creates it with pip from PyPI). Every process started carries ``CLUSTERMGR_BENCH_RUN``; the run
fails if any of them is left at the end (:func:`harness.reap_leftovers`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import http.client
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import requests

from clustermgr_lab.client import cluster_security

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bursty  # noqa: E402  (the bursty workload)
import bursty_data  # noqa: E402  (the bursty workload whose results stay on the workers)
import footprint  # noqa: E402  (the idle server's cost, its boot, re-adoption at start)
import growth  # noqa: E402  (the growth curves: workers of one cluster, clusters)
import harness as base  # noqa: E402  (the server, stream and raw-cluster helpers)
import multihost  # noqa: E402  (the rows measured on the two-node test bed)
from harness import BenchError, Server, Stream, log, now, percentile  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
MiB = 2**20
STANDBY_REFILL = 3.0  # seconds between the creates of the profile: a taken standby scheduler is replaced by then
UI_POLL_INTERVAL = 5.0  # dask-labextension's sidebar polls its cluster list every 5 s (backing off to 60 s)
LABEXT_FACTORY = {  # the same workers as clustermgr's and LocalCluster's side: 1 thread, 512 MiB, processes
    "n_workers": 0, "threads_per_worker": 1, "memory_limit": "512MiB", "processes": True,
    "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0",
}  # fmt: skip


# -- rows -----------------------------------------------------------------------------------------


def row(name: str, value: float, unit: str, target: float | None = None, note: str = "") -> dict[str, Any]:
    """One result: ``pass`` is ``value <= target`` (every target is an upper bound), None without a target."""
    result = {
        "name": name,
        "value": round(value, 4),
        "unit": unit,
        "target": target,
        "pass": None if target is None else value <= target,
    }
    if note:
        result["note"] = note
    return result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio_rows(
    label: str, ours: list[float], theirs: list[float], other: str, target: float | None, unit: str = "s"
) -> list[dict]:
    scale = 1000 if unit == "ms" else 1
    return [
        row(f"{label}: clustermgr", median(ours) * scale, unit),
        row(f"{label}: {other}", median(theirs) * scale, unit),
        row(f"{label}: ratio clustermgr / {other}", median(ours) / median(theirs), "x", target),
    ]


# -- servers ----------------------------------------------------------------------------------------

PLAIN_TEMPLATE = {
    "name": "plain", "backend": "local", "tls": False,
    "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}]},
}  # fmt: skip
# The many-workers row's shape: one process per worker (no nanny), its periodic work at sleep-friendly intervals
# (the tick is 1 s already for every local process): idle nanny + worker pairs, each worker sampling its own stack
# every 10 ms, kept 2 cores busy at 100 workers (round 7).
SMALL_WORKERS_TEMPLATE = {
    "name": "small", "backend": "local", "tls": False,
    "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}]},
    "options": {
        "nanny": False,
        "worker_config": {
            "distributed.admin.system-monitor.interval": "5s",
            "distributed.worker.profile.enabled": False,
            "distributed.worker.memory.monitor-interval": "5s",
        },
    },
}  # fmt: skip
GRAPH_TASKS = 1000


def start_clustermgr(tmp: Path, max_clusters: int, standby: int | None = None) -> tuple[Server, Stream]:
    server = Server(
        tmp / "clustermgr-server",
        config={
            "ServerApp": {"jpserver_extensions": {"clustermgr_lab": True, "jupyter_server_proxy": False}},
            "ClusterManager": {
                "workdir": str(tmp / "clustermgr"),
                "max_clusters": max_clusters + 5,
                "max_workers": MANY_WORKERS,
                "gpus": 2,  # the two-group workload's GPU group, up to 2 workers (declared; nothing uses a GPU)
                "on_shutdown": "stop",
                "templates": [PLAIN_TEMPLATE, SMALL_WORKERS_TEMPLATE],  # TLS off: the baseline of the TLS rows
            },
            "WarmLauncher": {"idle_timeout": 1.0},  # gone soon after the server: the leftover check waits 10 s
            **({} if standby is None else {"StandbySchedulers": {"count": standby}}),
        },
    )
    server.tmp.mkdir(parents=True, exist_ok=True)
    server.start()
    return server, Stream(server)


def start_labextension(tmp: Path, python: str) -> Server:
    folder = tmp / "labext-server"
    (folder / "dask-config").mkdir(parents=True, exist_ok=True)
    (folder / "dask-config" / "labextension.json").write_text(
        json.dumps({"labextension": {"factory": {"kwargs": LABEXT_FACTORY}}})
    )
    server = Server(
        folder,
        python=python,
        config={"ServerApp": {"jpserver_extensions": {"dask_labextension": True}}},
        env={"DASK_CONFIG": str(folder / "dask-config"), "PYTHONPATH": ""},
        ready_path="dask/clusters",
    )
    server.start()
    return server


def rss(server: Server) -> int:
    """RSS of the server's side (the server and its scheduler links' process, see ``Server.server_side``)."""
    total = 0
    for pid in server.server_side():
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return total


class Poller:
    """GET one URL every ``interval`` seconds in a thread, keeping (arrival time, JSON) of each answer."""

    def __init__(self, server: Server, path: str, interval: float):
        self.url, self.interval = server.base + path, interval
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {server.token}"
        self.answers: list[tuple[float, Any]] = []
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            data = self.session.get(self.url, timeout=30).json()
            with self.cond:
                self.answers.append((now(), data))
                self.cond.notify_all()
            self.stop.wait(self.interval)

    def wait(self, predicate: Callable[[Any], bool], after: float, timeout: float = 60) -> float:
        deadline = now() + timeout
        with self.cond:
            while True:
                for t, data in self.answers:
                    if t >= after and predicate(data):
                        return t
                if now() > deadline:
                    raise BenchError(f"poll of {self.url}: timed out")
                self.cond.wait(0.5)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


# -- clustermgr ---------------------------------------------------------------------------------------


def cm_create(server: Server, stream: Stream, workers: int) -> tuple[str, float]:
    c = base.create_clusters(server, stream, 1, workers)[0]
    return c["id"], c["t1"] - c["t0"]


def cm_scale(server: Server, stream: Stream, cid: str, workers: int) -> float:
    m = stream.mark()
    t0 = now()
    server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"scale": {"workers": workers}}, expect=200)
    t1, _, _ = stream.wait(base.settled(cid, workers), m, what=f"{workers} workers", cluster_id=cid)
    return t1 - t0


def cm_delete(server: Server, stream: Stream, cid: str) -> float:
    m = stream.mark()
    t0 = now()
    server.call("DELETE", f"clustermgr/api/clusters/{cid}", expect=202)
    t1, _, _ = stream.wait(base.removed(cid), m, what="cluster removed")
    return t1 - t0


#: Target of a create that is not a server's first (quiet and loaded), against LocalCluster's.
LATER_CREATES = 0.3
#: Seconds from a create's POST over which ``GET api/status`` is polled (each side the same number of samples,
#: whichever finishes first; a create that takes longer is polled until it is done).
STATUS_WINDOW = 1.0


def cm_lifecycle(server: Server, stream: Stream) -> dict[str, float]:
    out: dict[str, float] = {}
    with base.StatusPoller(server, window=STATUS_WINDOW) as poller:
        cid, out["create"] = cm_create(server, stream, 2)
    out["status_p99_during_create"] = percentile(poller.latencies, 99)
    out["scale_2_4"] = cm_scale(server, stream, cid, 4)
    out["delete"] = cm_delete(server, stream, cid)
    cid, _ = cm_create(server, stream, 0)
    out["scale_0_4"] = cm_scale(server, stream, cid, 4)
    cm_delete(server, stream, cid)
    return out


def cm_tls_lifecycle(server: Server, stream: Stream, template: str | None, workdir: Path) -> dict[str, float]:
    """Create -> 2 workers, then a 1,000-task graph from a Client of this process (with the cluster's TLS files).

    ``standby``: 1 when the create took a standby scheduler (its log starts before the POST), else 0.
    """
    from distributed import Client

    out: dict[str, float] = {}
    wall0 = time.time()
    created = base.create_clusters(server, stream, 1, 2, template=template)[0]
    out["create"] = created["t1"] - created["t0"]
    started = log_times(workdir / created["id"] / "scheduler.log")[0]
    out["standby"] = float(started is not None and started < wall0)
    _, cluster = server.call("GET", f"clustermgr/api/clusters/{created['id']}", expect=200)
    t0 = now()
    with Client(cluster["scheduler_address"], security=cluster_security(cluster), timeout=60) as client:
        out["connect"] = now() - t0
        t0 = now()
        futures = client.map(_inc, range(GRAPH_TASKS - 1), pure=False)
        total = client.submit(sum, futures).result()
        out["graph"] = now() - t0
    if total != sum(range(1, GRAPH_TASKS)):
        raise BenchError(f"the {GRAPH_TASKS}-task graph returned {total}")
    cm_delete(server, stream, created["id"])
    return out


def _inc(x: int) -> int:
    return x + 1


# -- LocalCluster -------------------------------------------------------------------------------------


def local_lifecycle() -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = now()
    cluster = base.make_local_cluster(2)
    try:
        out["create"] = base.wait_raw(cluster, 2, "create") - t0
        t0 = now()
        cluster.scale(4)
        out["scale_2_4"] = base.wait_raw(cluster, 4, "scale up") - t0
    finally:
        t0 = now()
        cluster.close()
        out["delete"] = now() - t0
    return out


def local_create() -> float:
    """Create -> 2 workers of ``LocalCluster``, then close it (not timed)."""
    t0 = now()
    cluster = base.make_local_cluster(2)
    try:
        return base.wait_raw(cluster, 2, "create") - t0
    finally:
        cluster.close()


# -- dask-labextension --------------------------------------------------------------------------------


def lab_workers(server: Server, cid: str, n: int, t0: float, timeout: float = base.TIMEOUT) -> float:
    """Poll (10 ms) until dask-labextension's model of ``cid`` shows ``n`` workers."""
    deadline = t0 + timeout
    while now() < deadline:
        _, model = server.call("GET", f"dask/clusters/{cid}", expect=200)
        if model["workers"] == n:
            return now() - t0
        time.sleep(0.01)
    raise BenchError(f"dask-labextension: {n} workers not seen within {timeout:g} s")


def lab_create(server: Server, workers: int) -> tuple[str, float]:
    """PUT (its one cluster type, 0 workers), then PATCH the workers, as its sidebar's user does."""
    t0 = now()
    _, model = server.call("PUT", "dask/clusters", expect=200)
    if workers:
        server.call("PATCH", f"dask/clusters/{model['id']}", {"workers": workers}, expect=200)
    return model["id"], lab_workers(server, model["id"], workers, t0)


def lab_delete(server: Server, cid: str) -> float:
    t0 = now()
    server.call("DELETE", f"dask/clusters/{cid}", expect=204)
    return now() - t0


def lab_lifecycle(server: Server) -> dict[str, float]:
    out: dict[str, float] = {}
    with base.StatusPoller(server, window=STATUS_WINDOW) as poller:
        cid, out["create"] = lab_create(server, 2)
    out["status_p99_during_create"] = percentile(poller.latencies, 99)
    t0 = now()
    server.call("PATCH", f"dask/clusters/{cid}", {"workers": 4}, expect=200)
    out["scale_2_4"] = lab_workers(server, cid, 4, t0)
    out["delete"] = lab_delete(server, cid)
    cid, _ = lab_create(server, 0)
    t0 = now()
    server.call("PATCH", f"dask/clusters/{cid}", {"workers": 4}, expect=200)
    out["scale_0_4"] = lab_workers(server, cid, 4, t0)
    lab_delete(server, cid)
    return out


# -- many clusters: list latency, memory --------------------------------------------------------------


def list_latencies(targets: list[tuple[Server, str]], samples: int) -> list[list[float]]:
    """``samples`` GETs of each (server, path), one after the other in turn, so load changes hit all alike.

    Sent with ``http.client`` on a kept-alive connection, as light a client as a browser's ``fetch``: the
    ``requests`` session used before spent about 3.5 ms of CPU per GET itself (round 7's profile), more than
    the server (2.2 ms), and on a loaded machine waited for that CPU inside the measured time. Like a
    browser, it sends back the login cookie the server set on its first answer: without it, jupyter_server
    signs and sets that cookie again on every token-authenticated GET (a tenth of its CPU for a small one).
    """
    connections = []
    for server, path in targets:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        request = ("/" + path, {"Authorization": f"token {server.token}"})
        cookies = [c.split(";", 1)[0] for c in _get(connection, *request).headers.get_all("Set-Cookie") or []]
        if cookies:
            request[1]["Cookie"] = "; ".join(cookies)
        for _ in range(10):  # warm up the keep-alive connection
            _get(connection, *request)
        connections.append((connection, request))
    latencies: list[list[float]] = [[] for _ in targets]
    try:
        with base.collector_paused():
            for _ in range(samples):
                for (connection, request), found in zip(connections, latencies):
                    t = now()
                    _get(connection, *request)
                    found.append(now() - t)
    finally:
        for connection, _ in connections:
            connection.close()
    return latencies


def _get(connection: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    """GET ``path`` on the kept-alive ``connection``: its response, body read (a status other than 200 raises)."""
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    if response.status != 200:
        raise BenchError(f"GET {path}: {response.status} {body[:200]!r}")
    return response


def settle_rss(server: Server) -> int:
    time.sleep(1.0)
    return rss(server)


def uss_of_descendants(pid: int) -> int:
    """Memory that the processes below ``pid`` do not share with it or each other (USS)."""
    total = 0
    for child in psutil.Process(pid).children(recursive=True):
        try:
            total += child.memory_full_info().uss
        except psutil.Error:
            continue
    return total


def idle_cpu(*groups: list[int], seconds: float = 2.0) -> list[float]:
    """CPU (in cores) that each group of processes uses over ``seconds`` of doing nothing asked of it."""

    def cpu(pids: list[int]) -> float:
        return growth.cpu_seconds(*pids)

    before = [cpu(g) for g in groups]
    time.sleep(seconds)
    return [(cpu(g) - b) / seconds for g, b in zip(groups, before)]


def launcher_process(server: Server) -> psutil.Process | None:
    for child in psutil.Process(server.process.pid).children():
        if "clustermgr_lab.backends.local.forkserver" in " ".join(child.cmdline()):
            return child
    return None


# -- push and adaptive --------------------------------------------------------------------------------


def push_p99(server: Server, subscribers: int, changes: int, cid: str) -> float:
    """PATCH a rename ``changes`` times; delay from sending it to its arrival at each of ``subscribers`` streams."""
    streams = [Stream(server) for _ in range(subscribers)]
    delays = []
    try:
        with base.collector_paused():
            for _ in range(changes):
                name = f"push {uuid.uuid4().hex[:6]}"
                marks = [s.mark() for s in streams]
                t0 = now()
                server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"name": name}, expect=200)
                for s, m in zip(streams, marks):
                    t, _, _ = s.wait(
                        lambda msg, name=name: (msg.get("cluster") or {}).get("name") == name, m, what="rename pushed"
                    )
                    delays.append(t - t0)
                time.sleep(0.02)
    finally:
        for s in streams:
            s.close()
    PUSH_P50.append(percentile(delays, 50))
    return percentile(delays, 99)


PUSH_P50: list[float] = []


def log_tail_rows(server: Server, stream: Stream, tmp: Path, size: int, repeat: int) -> list[dict]:
    """Tail a log of ``size`` bytes (a cluster's worker log) through the API: latency, and the server's RSS growth.

    The file is written once (lines of about 100 bytes); the server's RSS is read after a warm-up request
    and after ``repeat`` more, so the growth is what tailing holds on to, not first-use allocations.
    """
    cid, _ = cm_create(server, stream, 0)
    log_path = tmp / "clustermgr" / cid / "bench-big.log"
    line = b"2026-12-01 14:00:00,000 - distributed.worker - INFO - a line of a long-running worker's log, 100 bytes\n"
    block = line * (4 * MiB // len(line))
    with open(log_path, "wb") as out:
        written = 0
        while written < size:
            out.write(block)
            written += len(block)
    path = f"clustermgr/api/clusters/{cid}/logs/bench-big?tail=200"
    server.call("GET", path, expect=200)
    before = settle_rss(server)
    latencies = []
    for _ in range(repeat):
        t0 = now()
        _, chunk = server.call("GET", path, expect=200)
        latencies.append(now() - t0)
        assert len(chunk["text"].splitlines()) == 200 and chunk["offset"] == written, "tail returned the wrong lines"
    grown = max(0, settle_rss(server) - before)
    cm_delete(server, stream, cid)
    gib = f"{written / 2**30:.2f} GiB" if written >= 2**30 else f"{written / MiB:.0f} MiB"
    note = f"{gib} file, 200 lines, {repeat} requests, p99 {percentile(latencies, 99) * 1000:.1f} ms"
    return [
        row(f"tail of a {gib} log (200 lines), median", median(latencies) * 1000, "ms", 100, note=note),
        row(
            f"server RSS growth while tailing a {gib} log",
            grown / MiB,
            "MiB",
            16,
            note=f"RSS before {before / MiB:.0f} MiB",
        ),
    ]


def adaptive_first_decision(server: Server, stream: Stream, interval: float) -> float:
    """A burst of tasks on an idle adaptive cluster (0 workers): intervals until the first adaptive decision."""
    from distributed import Client

    m = stream.mark()
    _, cluster = server.call(
        "POST", "clustermgr/api/clusters",
        {"spec": base.spec(0), "adapt": {"minimum": 0, "maximum": 4, "interval": interval}}, expect=202,
    )  # fmt: skip
    cid = cluster["id"]
    _, message, _ = stream.wait(
        lambda msg: (msg.get("cluster") or {}).get("id") == cid and msg["cluster"]["status"] == "running",
        m,
        what="running",
        cluster_id=cid,
    )

    security = cluster_security(message["cluster"])
    client = Client(message["cluster"]["scheduler_address"], set_as_default=False, timeout=30, security=security)
    try:
        m = stream.mark()
        t0 = now()
        futures = client.map(time.sleep, [0.5] * 40, pure=False)

        def decided(msg: dict) -> bool:
            last = (msg.get("cluster") or {}).get("last_decision") or {}
            return (
                msg.get("cluster", {}).get("id") == cid
                and last.get("source") == "adaptive"
                and (last.get("after") or 0) > 0
            )

        t1, _, _ = stream.wait(decided, m, what="an adaptive decision", cluster_id=cid)
        del futures
    finally:
        client.close()
        cm_delete(server, stream, cid)
    return (t1 - t0) / interval


# -- the bursty workload: fixed, distributed's Adaptive, clustermgr's adaptive mode -------------------

BURSTY_SEED = 22
BURSTY_MAX = 4
MANY_WORKERS = 200


def cm_adaptive_cluster(server: Server, stream: Stream, groups: list[dict], adapt: list[dict]) -> tuple[str, dict]:
    """POST a cluster of 0 workers with adaptive ranges (default settings); its id and its JSON."""
    m = stream.mark()
    _, cluster = server.call("POST", "clustermgr/api/clusters", {"spec": {"groups": groups}}, expect=202)
    cid = cluster["id"]
    _, message, _ = stream.wait(
        lambda msg: (msg.get("cluster") or {}).get("id") == cid and msg["cluster"]["status"] == "running",
        m, what="running", cluster_id=cid,
    )  # fmt: skip
    for body in adapt:
        server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"adapt": body}, expect=200)
    return cid, message["cluster"]


def bursty_side(name: str, tmp: Path, server: Server, stream: Stream, bursts: list, play=bursty.run) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    load = os.getloadavg()[0]
    log(f"bursty: {name} (load average {load:.1f})")
    shape = {"threads_per_worker": 1, "memory_limit": "512MiB", "processes": True,
             "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}  # fmt: skip
    if name == "clustermgr":
        cid, cluster = cm_adaptive_cluster(
            server, stream, [{"name": "default", "count": 0, "threads": 1, "memory": base.MEMORY}],
            [{"minimum": 0, "maximum": BURSTY_MAX}],
        )  # fmt: skip
        try:
            with Client(
                cluster["scheduler_address"], security=cluster_security(cluster), set_as_default=False, timeout=30
            ) as client:
                result = play(client, bursts, log)
        finally:
            cm_delete(server, stream, cid)
    else:
        with base.quiet_stderr(tmp / "raw.log"):
            cluster = LocalCluster(n_workers=BURSTY_MAX if name == "fixed" else 0, **shape)
            try:
                if name != "fixed":
                    cluster.adapt(minimum=0, maximum=BURSTY_MAX)
                with Client(cluster, set_as_default=False) as client:
                    if name == "fixed":
                        client.wait_for_workers(BURSTY_MAX, timeout=60)
                    result = play(client, bursts, log, adaptive=name != "fixed")
            finally:
                cluster.close()
    result["load"] = (load + os.getloadavg()[0]) / 2
    log(f"bursty: {name}: " + ", ".join(f"{k} {v:.3g}" for k, v in result.items()))
    return result


def bursty_rows(args: argparse.Namespace, tmp: Path, server: Server, stream: Stream) -> list[dict]:
    """The bursty workload on each side (in rotated order), then the two-group workload on clustermgr."""
    rows: list[dict] = []
    if args.smoke:
        bursts = bursty.script(BURSTY_SEED, bursts=2, tasks=(8, 12), sleep=(0.1, 0.3), gaps=(1.0, 2.0))
    else:
        bursts = bursty.script(BURSTY_SEED)
    names = ["clustermgr"] if args.smoke else args.bursty_sides.split(",")  # smoke: no LocalCluster to spawn
    results = {name: bursty_side(name, tmp, server, stream, bursts) for name in names}
    nothing = {"wall": float("nan"), "held": float("nan"), "recomputed": 0, "missing": 0, "load": 0.0}
    fixed, theirs, ours = (results.get(n, nothing) for n in ("fixed", "distributed Adaptive", "clustermgr"))
    tasks = ours["tasks"]

    def note(r: dict) -> str:
        return f"load average {r['load']:.1f}"

    rows.append(row("bursty: tasks' own core-seconds", tasks, "core-s"))
    for name, r in results.items():
        rows.append(row(f"bursty: wall time, {name}", r["wall"], "s", note=note(r)))
        rows.append(row(f"bursty: core-seconds held, {name}", r["held"], "core-s", note=note(r)))
        rows.append(row(f"bursty: worker starts, {name}", r["starts"], "workers"))
        rows.append(row(f"bursty: core-s held idle with nothing waiting, {name}", r["idle_nothing_waiting"], "core-s"))
        rows.append(
            row(f"bursty: core-s held idle while tasks waited for a thread, {name}", r["idle_tasks_waiting"], "core-s")
        )
    compared = [
        ("bursty: clustermgr wall / fixed", ours["wall"] / fixed["wall"], 1.05, note(ours)),
        ("bursty: clustermgr core-s held / tasks' own", ours["held"] / tasks, 1.10, note(ours)),
        ("bursty: distributed Adaptive wall / fixed", theirs["wall"] / fixed["wall"], None, note(theirs)),
        ("bursty: distributed Adaptive core-s held / tasks' own", theirs["held"] / tasks, None, note(theirs)),
        ("bursty: wall, clustermgr / distributed Adaptive", ours["wall"] / theirs["wall"], 1.0, ""),
        ("bursty: core-s held, clustermgr / distributed Adaptive", ours["held"] / theirs["held"], 1.0, ""),
    ]
    for name, value, target, why in compared:
        if value == value:  # a side left out (--smoke, --bursty-sides) gives NaN: no row
            rows.append(row(name, value, "x", target, note=why))
    rows.append(row("bursty: recomputed tasks, clustermgr", ours["recomputed"] + ours["missing"], "tasks", 0))
    if "distributed Adaptive" in results:
        rows.append(
            row("bursty: recomputed tasks, distributed Adaptive", theirs["recomputed"] + theirs["missing"], "tasks")
        )

    # two groups: CPU workers and workers with a GPU resource; bursts alternate between the two kinds
    if args.smoke:
        two = bursty.script(
            BURSTY_SEED, bursts=2, tasks=(6, 10), sleep=(0.1, 0.3), gaps=(1.0, 2.0), kinds=(None, "GPU")
        )
    else:
        two = bursty.script(
            BURSTY_SEED + 1, bursts=4, tasks=(30, 60), sleep=(0.2, 0.8), gaps=(6.0, 8.0), kinds=(None, "GPU")
        )
    load = os.getloadavg()[0]
    cid, cluster = cm_adaptive_cluster(
        server, stream,
        [{"name": "cpu", "count": 0, "threads": 1, "memory": base.MEMORY},
         {"name": "gpu", "count": 0, "threads": 1, "memory": base.MEMORY, "gpus": 1}],
        [{"group": "cpu", "minimum": 0, "maximum": 2}, {"group": "gpu", "minimum": 0, "maximum": 2}],
    )  # fmt: skip
    from distributed import Client

    try:
        with Client(
            cluster["scheduler_address"], security=cluster_security(cluster), set_as_default=False, timeout=30
        ) as client:
            r = bursty.run(client, two, log)
    finally:
        cm_delete(server, stream, cid)
    r["load"] = (load + os.getloadavg()[0]) / 2
    log("bursty two groups: " + ", ".join(f"{k} {v:.3g}" for k, v in r.items()))
    rows.append(
        row("bursty, two groups: core-s on the group the burst does not need", r["unneeded"], "core-s", 0, note=note(r))
    )
    rows.append(row("bursty, two groups: core-s held / tasks' own", r["held"] / r["tasks"], "x", note=note(r)))
    rows.append(row("bursty, two groups: recomputed tasks", r["recomputed"] + r["missing"], "tasks", 0))
    return rows


# -- where a create's time goes ----------------------------------------------------------------------

LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (.*)$")


def log_times(path: Path, *needles: str) -> list[float | None]:
    """Wall-clock time of the first line of a distributed log, then of the first line containing each needle."""
    found: list[float | None] = [None] * (len(needles) + 1)
    for line in path.read_text(errors="replace").splitlines():
        match = LOG_TIME.match(line)
        if not match:
            continue
        t = _dt.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if found[0] is None:
            found[0] = t
        for i, needle in enumerate(needles, 1):
            if found[i] is None and needle in match[2]:
                found[i] = t
    return found


def create_profile(server: Server, stream: Stream, workdir: Path, repeat: int) -> list[dict]:
    """Create -> 2 workers, split into phases from the stream and the scheduler's own log (medians of ``repeat``).

    A create that took a standby scheduler (its log starts before the POST) has no scheduler start-up
    phases: they are left out of the medians, and the rows note how many creates took one.
    """
    phases: dict[str, list[float]] = {}
    took_standby = 0
    for _ in range(repeat):
        time.sleep(STANDBY_REFILL)  # a standby taken by the previous create is replaced in the meantime
        wall0, t0 = time.time(), now()
        c = base.create_clusters(server, stream, 1, 2)[0]
        offset = wall0 - t0  # monotonic -> wall clock
        started, listening, registered = log_times(
            workdir / c["id"] / "scheduler.log", "Scheduler at:", "Starting worker compute stream"
        )
        second = [
            t for t in (log_times(p, "Registered to:")[1] for p in (workdir / c["id"]).glob("default-*.log")) if t
        ]
        if started is not None and started < wall0:
            took_standby += 1
            started = listening = None
        marks = {
            "scheduler's first log line (fork, set-up)": started,
            "scheduler listening (Scheduler and dashboard started)": listening,
            "address known to the server (scheduler file, link)": c["t_sched"] + offset,
            "both workers registered": max(second) if len(second) == 2 else registered,
            "the stream shows 2 running (push)": c["t1"] + offset,
        }
        for name, t in marks.items():
            if t is not None:
                phases.setdefault(name, []).append(t - wall0)
        cm_delete(server, stream, c["id"])
    note = f"{took_standby} of {repeat} creates took a standby scheduler; load average {os.getloadavg()[0]:.1f}"
    return [row(f"create profile: POST -> {name}", median(v) * 1000, "ms", note=note) for name, v in phases.items()]


# -- many clusters -------------------------------------------------------------------------------------


def many_clusters_rows(
    server: Server,
    stream: Stream,
    tmp: Path,
    many: int,
    subscribers: int,
    samples: int,
    repeat: int,
    loaded: bool = True,
) -> list[dict]:
    """``many`` clusters of 0 workers: push p99 with ``subscribers`` and list p99 while they all exist, the server's
    memory per cluster, the idle CPU of the server and of the schedulers; then (``loaded``) :func:`loaded_rows`."""
    rows: list[dict] = []
    rss0 = settle_rss(server)
    ours = [c["id"] for c in base.create_clusters(server, stream, many, 0)]
    try:
        p99 = push_p99(server, subscribers, 30 if loaded else 10, ours[0])
        note = f"p50 {PUSH_P50[-1] * 1000:.1f} ms; {many} clusters; load average {os.getloadavg()[0]:.1f}"
        rows.append(row(f"push p99 with {subscribers} subscribers", p99 * 1000, "ms", 100, note=note))
        found = list_latencies([(server, "clustermgr/api/clusters")], samples)[0]
        note = f"p50 {percentile(found, 50) * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}"
        rows.append(
            row(f"GET list p99 at {many} clusters (0 workers each)", percentile(found, 99) * 1000, "ms", 20, note=note)
        )
        rows.append(
            row(f"server RSS per cluster ({many} clusters)", (settle_rss(server) - rss0) / many / MiB, "MiB", 1.0)
        )
        launcher = launcher_process(server)
        schedulers = [p.pid for p in launcher.children()] if launcher else []
        server_cpu, schedulers_cpu = idle_cpu(server.server_side(), schedulers)
        rows.append(row(f"server CPU while idle with {many} clusters", server_cpu * 100, "% of a core"))
        rows.append(row(f"CPU of their {many} idle scheduler processes", schedulers_cpu * 100, "% of a core"))
        if loaded:
            rows += loaded_rows(server, stream, tmp, many, subscribers, samples, ours[0], repeat)
    finally:
        base.delete_clusters(server, stream, ours)
    return rows


# Busy processes of the loaded rows. 3 were enough while the 100 idle schedulers took 43 % of a core; at 23-36 %
# (round 12) the load average stopped at 3.5-3.8 in one run, short of the 4 the rows are measured at.
LOADED_HOGS = 4
LOADED_AVERAGE = 4.0


def loaded_rows(
    server: Server, stream: Stream, tmp: Path, many: int, subscribers: int, samples: int, cid: str, repeat: int
) -> list[dict]:
    """Push p99, list p99 and the cold start again with ``many`` clusters, while :data:`LOADED_HOGS` processes keep
    the CPUs busy.

    The measuring starts once the 1-minute load average is at least :data:`LOADED_AVERAGE` (a shared login
    node, a notebook computing beside the server); the notes give the load average at its start and end.
    jupyter_server's own ``GET /api`` (a few bytes) is asked in turn with the list: what any GET of this
    server takes under the same load, so that a miss shows how much of it is the list's own. The cold start
    (create -> 2 workers) alternates with ``LocalCluster``'s, ``repeat`` times each, which side goes first
    rotating.
    """
    with base.CpuLoad(LOADED_HOGS, LOADED_AVERAGE) as loaded:
        push = push_p99(server, subscribers, 30, cid)
        push_p50 = PUSH_P50[-1]
        found, floor = list_latencies([(server, "clustermgr/api/clusters"), (server, "api")], samples)
        ours: list[float] = []
        theirs: list[float] = []
        for rep in range(repeat):
            for side in ("clustermgr", "LocalCluster") if rep % 2 == 0 else ("LocalCluster", "clustermgr"):
                if side == "clustermgr":
                    created, took = cm_create(server, stream, 2)
                    ours.append(took)
                    cm_delete(server, stream, created)
                else:
                    with base.quiet_stderr(tmp / "raw.log"):
                        theirs.append(local_create())
            log(f"loaded create rep {rep + 1}/{repeat}: clustermgr {ours[-1]:.3f} s, LocalCluster {theirs[-1]:.3f} s")
        load_after = os.getloadavg()[0]
    load = f"load average {loaded.load_before:.1f} -> {load_after:.1f}" + (
        "" if loaded.reached else f" (did not reach {LOADED_AVERAGE:g})"
    )
    create = ratio_rows("create -> 2 workers running, machine loaded", ours, theirs, "LocalCluster", LATER_CREATES)
    create[-1]["note"] = f"{LOADED_HOGS} busy processes; {many} idle clusters beside; {load}"
    return create + [
        row(
            f"push p99 with {subscribers} subscribers, machine loaded",
            push * 1000,
            "ms",
            100,
            note=f"p50 {push_p50 * 1000:.1f} ms; {many} clusters; {load}",
        ),
        row(
            f"GET list p99 at {many} clusters, machine loaded",
            percentile(found, 99) * 1000,
            "ms",
            20,
            note=f"p50 {percentile(found, 50) * 1000:.1f} ms; {LOADED_HOGS} busy processes; {load}",
        ),
        row(
            "GET /api p99 (jupyter_server's smallest answer), machine loaded",
            percentile(floor, 99) * 1000,
            "ms",
            note=f"p50 {percentile(floor, 50) * 1000:.1f} ms; the floor of any GET under this load, asked in turn with the list",
        ),
    ]


# -- one cluster of many workers ----------------------------------------------------------------------


def server_side_cpu(server: Server) -> float:
    """CPU-seconds of the server's side (the server and its scheduler links' process)."""
    return growth.cpu_seconds(*server.server_side())


MANY_WORKERS_STEP = 50  # workers added per step of the many-workers row
MANY_WORKERS_STEP_TIMEOUT = 240.0  # seconds a step may take before the row stops there (a miss, with its cause)
MANY_WORKERS_MIN_FREE = 6 * 2**30  # bytes of memory that must stay available: the machine is shared


def many_workers_rows(server: Server, stream: Stream, workers: int) -> list[dict]:
    """One cluster of 0 workers scaled up to ``workers`` (1 thread, 512 MiB; they sleep), in steps of :data:`MANY_WORKERS_STEP`.

    Its template is :data:`SMALL_WORKERS_TEMPLATE`: no nanny, and the workers' periodic work at sleep-friendly
    intervals (``worker_config``).

    Bounded, so that a shared 2-core machine is never overrun: the row stops at the last step that settled
    when a step does not settle within :data:`MANY_WORKERS_STEP_TIMEOUT` or when less than
    :data:`MANY_WORKERS_MIN_FREE` of memory would be left, and reports the count reached and why (a miss).
    Rows: the time to the count reached, the server's CPU and the stream's message rate during the
    scale-up and over 10 s with all of them running.
    """
    rows: list[dict] = []
    load = os.getloadavg()[0]
    cid = base.create_clusters(server, stream, 1, 0, template=SMALL_WORKERS_TEMPLATE["name"])[0]["id"]
    reached, running, stopped_because = 0, 0, ""
    available0 = psutil.virtual_memory().available
    try:
        m0, cpu0, t0 = stream.mark(), server_side_cpu(server), now()
        t_reached = t0
        while reached < workers:
            target = min(workers, reached + MANY_WORKERS_STEP)
            available = psutil.virtual_memory().available
            per_worker = max(available0 - available, 0) / reached if reached else 64 * MiB  # one forked process each
            if available - per_worker * (target - reached) < MANY_WORKERS_MIN_FREE:
                stopped_because = (
                    f"memory guard: {psutil.virtual_memory().available / 2**30:.1f} GiB available, "
                    f"{target - reached} more workers would leave less than {MANY_WORKERS_MIN_FREE / 2**30:g} GiB"
                )
                break
            m = stream.mark()
            server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"scale": {"workers": target}}, expect=200)
            try:
                t_reached, _, _ = stream.wait(
                    base.settled(cid, target),
                    m,
                    timeout=MANY_WORKERS_STEP_TIMEOUT,
                    what=f"{target} workers",
                    cluster_id=cid,
                )
            except BenchError:
                last = [msg for msg in stream.between(m, stream.mark() - 1, cid) if msg.get("cluster")]
                running = last[-1]["cluster"]["workers"]["running"] if last else reached
                stopped_because = (
                    f"step {reached} -> {target} not settled after {MANY_WORKERS_STEP_TIMEOUT:g} s "
                    f"({running} running); load average {os.getloadavg()[0]:.1f}"
                )
                break
            reached = running = target
            log(f"many workers: {reached} running after {t_reached - t0:.1f} s, load average {os.getloadavg()[0]:.1f}")
        cpu1, elapsed = (
            server_side_cpu(server),
            max(now() - t0, 1e-3),
        )  # the whole scale-up, a step that failed included
        messages = stream.mark() - m0
        note = f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
        rows.append(row(f"{workers} workers (1 thread each): workers running", reached, "workers", note=note))
        if reached < workers:
            rows.append(row(f"{workers} workers: not reached", workers - reached, "workers", 0, note=stopped_because))
        rows.append(row(f"{workers} workers: scale 0 -> {reached}", t_reached - t0, "s", note=note))
        rows.append(
            row(f"{workers} workers: server CPU during the scale-up", (cpu1 - cpu0) / elapsed * 100, "% of a core")
        )
        rows.append(
            row(
                f"{workers} workers: stream messages during the scale-up",
                messages / elapsed,
                "messages/s",
                note=f"{messages} messages in {elapsed:.0f} s",
            )
        )
        if running:
            m, cpu0, t0 = stream.mark(), server_side_cpu(server), now()
            time.sleep(10)
            steady = stream.mark() - m
            rows.append(
                row(
                    f"{workers} workers: server CPU with {running} running",
                    (server_side_cpu(server) - cpu0) / (now() - t0) * 100,
                    "% of a core",
                    note=f"load average {os.getloadavg()[0]:.1f}",
                )
            )
            rows.append(
                row(f"{workers} workers: stream messages with {running} running", steady / (now() - t0), "messages/s")
            )
    finally:
        cm_delete(server, stream, cid)
    return rows


# -- the run ----------------------------------------------------------------------------------------


def lifecycle_rows(
    args: argparse.Namespace, tmp: Path, cm_server: Server, stream: Stream, lab: Server | None
) -> list[dict]:
    """Create -> 2, scale 2 -> 4, delete against ``LocalCluster`` (and dask-labextension), sides rotated each repetition."""
    rows: list[dict] = []
    sides: list[tuple[str, Callable[[], dict]]] = [
        ("clustermgr", lambda: cm_lifecycle(cm_server, stream)),
        ("LocalCluster", lambda: _quiet(tmp, local_lifecycle)),
    ]
    if lab:
        sides.append(("dask-labextension", lambda: lab_lifecycle(lab)))
    results: dict[str, list[dict]] = {name: [] for name, _ in sides}
    for rep in range(args.repeat):
        order = sides[rep % len(sides) :] + sides[: rep % len(sides)]
        for name, flow in order:
            results[name].append(flow())
            log(
                f"rep {rep + 1}/{args.repeat} {name}: {', '.join(f'{k} {base.fmt_time(v)}' for k, v in results[name][-1].items())}"
            )

    def col(side: str, key: str) -> list[float]:
        return [r[key] for r in results.get(side, []) if key in r]

    rows += ratio_rows(
        "create -> 2 workers running",
        col("clustermgr", "create"),
        col("LocalCluster", "create"),
        "LocalCluster",
        LATER_CREATES,
    )
    rows += ratio_rows(
        "scale 2 -> 4 workers",
        col("clustermgr", "scale_2_4"),
        col("LocalCluster", "scale_2_4"),
        "LocalCluster",
        0.5,
    )
    rows += ratio_rows("delete", col("clustermgr", "delete"), col("LocalCluster", "delete"), "LocalCluster", 1.0)
    if lab:
        other = "dask-labextension"
        rows += ratio_rows(
            "side by side: create -> 2 workers running",
            col("clustermgr", "create"),
            col(other, "create"),
            other,
            1.0,
        )
        rows += ratio_rows(
            "side by side: scale 0 -> 4 workers",
            col("clustermgr", "scale_0_4"),
            col(other, "scale_0_4"),
            other,
            1.0,
        )
        rows += ratio_rows(
            "side by side: GET api/status p99 during create",
            col("clustermgr", "status_p99_during_create"), col(other, "status_p99_during_create"), other, 1.0, unit="ms",
        )  # fmt: skip
    else:
        rows.append(
            row(
                "GET api/status p99 during create: clustermgr",
                median(col("clustermgr", "status_p99_during_create")) * 1000,
                "ms",
            )
        )
    return rows


def tls_rows(server: Server, stream: Stream, repeat: int, workdir: Path) -> list[dict]:
    """TLS (every cluster's default) against the same clusters with TLS off, interleaved: create, connect, a graph.

    Each of the two sides' creates comes :data:`STANDBY_REFILL` s after the last create (as the create profile's),
    so a TLS create finds the standby scheduler the server keeps for it, as it does unless creates follow each other
    within seconds. Such a create is measured too, as a figure: a TLS create right after the TLS side's, which finds
    no standby ready (its scheduler starts with TLS credentials made for it).
    """
    rows: list[dict] = []
    tls_sides = [("TLS", None), ("plain", "plain")]
    cold = "TLS right after another"
    tls_results: dict[str, list[dict]] = {name: [] for name in ("TLS", "plain", cold)}
    for rep in range(repeat):
        for name, template in tls_sides[rep % 2 :] + tls_sides[: rep % 2]:
            time.sleep(STANDBY_REFILL)  # a standby taken by the last TLS create is replaced in the meantime
            tls_results[name].append(cm_tls_lifecycle(server, stream, template, workdir))
            log(f"rep {rep + 1}/{repeat} clustermgr {name}: {tls_results[name][-1]}")
            if name == "TLS":
                tls_results[cold].append(cm_tls_lifecycle(server, stream, None, workdir))
                log(f"rep {rep + 1}/{repeat} clustermgr {cold}: {tls_results[cold][-1]}")

    def took(name: str) -> str:
        return f"{sum(r['standby'] for r in tls_results[name]):.0f} of {repeat} creates took a standby scheduler"

    for key, label, target in (
        ("create", "create -> 2 workers running", 1.2),
        ("connect", "Client connect", None),
        ("graph", f"{GRAPH_TASKS:,}-task graph", None),
    ):
        with_tls = [r[key] for r in tls_results["TLS"]]
        plain = [r[key] for r in tls_results["plain"]]
        note = f"each {STANDBY_REFILL:g} s after the last create; {took('TLS')}" if key == "create" else ""
        rows += [
            row(f"TLS on/off: {label}: TLS", median(with_tls), "s", note=note),
            row(f"TLS on/off: {label}: plain TCP", median(plain), "s"),
            row(f"TLS on/off: {label}: ratio TLS / plain", median(with_tls) / median(plain), "x", target),
        ]
        if key == "create":
            right_after = [r[key] for r in tls_results[cold]]
            label = f"{label}, right after another TLS create (no standby scheduler ready)"
            rows += [
                row(f"TLS on/off: {label}: TLS", median(right_after), "s", note=took(cold)),
                row(f"TLS on/off: {label}: ratio TLS / plain", median(right_after) / median(plain), "x"),
            ]
    return rows


# The parts of a run, in the order a full run measures them. Each row says which part measured it (``part``):
# ``bench.py --only <part>`` measures that row again, alone. ``create-profile`` runs only when named.
PARTS = (
    "footprint", "backend-footprint", "growth", "lifecycle", "tls", "side-by-side", "many-clusters", "log-tail",
    "bursty", "bursty-data", "many-workers", "multihost",
)  # fmt: skip
NAMED_ONLY = ("create-profile",)
NOT_IN_SMOKE = ("backend-footprint", "multihost")  # servers and a test bed of their own: tests run them alone
ON_THE_MAIN_SERVER = ("lifecycle", "tls", "side-by-side", "many-clusters", "log-tail", "bursty", "bursty-data",
                      "many-workers", "create-profile")  # fmt: skip


def selected_parts(only: str | None, smoke: bool) -> list[str]:
    """The parts to run, in :data:`PARTS` order: those ``--only`` names, or every part of a full run.

    >>> selected_parts("tls,lifecycle", smoke=False)
    ['lifecycle', 'tls']
    >>> selected_parts("lifecyle", smoke=False)
    Traceback (most recent call last):
    ...
    ValueError: --only: no part named 'lifecyle'; the parts: footprint, backend-footprint, growth, lifecycle, tls, side-by-side, many-clusters, log-tail, bursty, bursty-data, many-workers, multihost, create-profile
    """
    if not only:
        return [p for p in PARTS if not (smoke and p in NOT_IN_SMOKE)]
    names = [name.strip() for name in only.split(",") if name.strip()]
    for name in names:
        if name not in PARTS + NAMED_ONLY:
            raise ValueError(f"--only: no part named {name!r}; the parts: {', '.join(PARTS + NAMED_ONLY)}")
    return [p for p in PARTS + NAMED_ONLY if p in names]


@contextlib.contextmanager
def part_of(rows: list[dict], part: str):
    """Mark the rows appended to ``rows`` inside the block as measured by ``part`` (also those of a part that failed)."""
    start = len(rows)
    log(f"part {part}")
    try:
        yield
    finally:
        for r in rows[start:]:
            r.setdefault("part", part)


def reproduce(r: dict) -> str:
    """The command that measures row ``r`` again alone (a growth row: its curve alone).

    >>> reproduce({"name": "growth, workers: slope of time, clustermgr vs N (log-log)", "part": "growth"})
    "--only growth --growth-clusters ''"
    >>> reproduce({"name": "side by side: scale 0 -> 4 workers: ratio clustermgr / dask-labextension", "part": "lifecycle"})
    '--only lifecycle --labext-python .venv-labext/bin/python'
    """
    part = r.get("part")
    if not part:
        return ""
    words = [f"--only {part}"]
    if r["name"].startswith("growth, workers"):
        words.append("--growth-clusters ''")
    elif r["name"].startswith("growth, clusters"):
        words.append("--growth-workers ''")
    if r["name"].startswith("side by side"):
        words.append("--labext-python .venv-labext/bin/python")
    if part == "footprint" and "rfc3987" in r["name"]:
        words.append("--rfc3987-path .bench-rfc3987")
    return " ".join(words)


def measure(args: argparse.Namespace, tmp: Path, rows: list[dict]) -> list[dict]:
    """Append every row to ``rows`` as it is measured (a failure later keeps the rows measured before it).

    The parts run in :data:`PARTS` order; those on the main server share one clustermgr server (and, with
    ``--labext-python``, one dask-labextension server), started after the parts with servers of their own.
    """
    parts = selected_parts(args.only, args.smoke)
    many = 10 if args.smoke else 100
    subscribers = 5 if args.smoke else 20
    # GETs per list row: its p99 is then the 10th slowest, not the 3rd (300 before round 12: one GET that met a
    # heartbeat or another process's time slice moved the row by a third at 5 clusters)
    samples = 60 if args.smoke else 1000
    if "footprint" in parts:  # first: its servers start on a machine at rest
        with part_of(rows, "footprint"):
            rows += footprint.measure(
                tmp,
                row,
                seconds=3 if args.smoke else 30,
                repeat=1 if args.smoke else 3,
                clusters=1 if args.smoke else 3,
                fast_import_path=args.rfc3987_path,
                release_after=2.0 if args.smoke else None,  # smoke: not the product's 120 s
            )
    if "backend-footprint" in parts:  # servers of its own
        # imported here, not with this module: a LocalCluster's workers are spawned processes that import this module
        # again (as __mp_main__), and the backend footprint's helpers come from tests/ (whose import asks SLURM, up to
        # 15 s, when it does not run)
        import backend_footprint  # the same with an SSH or gateway template, dask-labextension's, a TLS cluster

        with part_of(rows, "backend-footprint"):
            rows += backend_footprint.measure(tmp, row, seconds=3 if args.smoke else 30)
    if "growth" in parts:  # a server of its own, before the main one starts
        with part_of(rows, "growth"):
            growth.measure(args, tmp, rows, sys.modules[__name__])
    if any(p in ON_THE_MAIN_SERVER for p in parts):
        main_server_parts(args, tmp, rows, parts, many, subscribers, samples)
    if "multihost" in parts:  # the two-node test bed (ci/testbed/): scheduler local vs job, next to SLURMCluster
        with part_of(rows, "multihost"):
            rows += multihost.measure(tmp, args.repeat, row, median)
    return rows


def main_server_parts(
    args: argparse.Namespace, tmp: Path, rows: list[dict], parts: list[str], many: int, subscribers: int, samples: int
) -> None:
    """The parts measured on one clustermgr server (and dask-labextension's, for the side-by-side rows)."""
    cm_server, stream = start_clustermgr(tmp, many, args.standby)
    lab = None
    try:
        log(f"clustermgr server on {cm_server.base}")
        if args.labext_python and ("lifecycle" in parts or "side-by-side" in parts):
            lab = start_labextension(tmp, args.labext_python)
            log(f"dask-labextension server on {lab.base}")
        # warm-up, not measured: the launcher's first start, cold imports and disk caches on each side
        cm_delete(cm_server, stream, cm_create(cm_server, stream, 2)[0])
        if lab:
            lab_delete(lab, lab_create(lab, 2)[0])
        if "lifecycle" in parts:
            with part_of(rows, "lifecycle"):
                if not args.smoke:
                    with base.quiet_stderr(tmp / "raw.log"):
                        base.make_local_cluster(2).close()  # warm-up of the other side
                rows += launcher_rows(cm_server)
                rows += lifecycle_rows(args, tmp, cm_server, stream, lab)
        if "tls" in parts:
            with part_of(rows, "tls"):
                rows += tls_rows(cm_server, stream, args.repeat, tmp / "clustermgr")
        if "side-by-side" in parts:
            with part_of(rows, "side-by-side"):
                rows += side_by_side_rows(args, cm_server, stream, lab, samples)
        if "many-clusters" in parts:
            with part_of(rows, "many-clusters"):
                rows += many_clusters_rows(
                    cm_server, stream, tmp, many, subscribers, samples, args.repeat, loaded=not args.smoke
                )
        if "log-tail" in parts:
            with part_of(rows, "log-tail"):
                rows += log_tail_rows(
                    cm_server, stream, tmp, (16 if args.smoke else 1024) * MiB, 20 if args.smoke else 100
                )
        if "bursty" in parts:
            with part_of(rows, "bursty"):
                rows.append(
                    row(
                        "adaptive: first decision after a burst (1 s interval)",
                        adaptive_first_decision(cm_server, stream, 1.0),
                        "intervals",
                        2,
                    )
                )
                rows += bursty_rows(args, tmp, cm_server, stream)
        if "bursty-data" in parts:
            with part_of(rows, "bursty-data"):
                rows += bursty_data.measure(args, tmp, cm_server, stream, row, bursty_side)
        if "many-workers" in parts:
            with part_of(rows, "many-workers"):
                rows += many_workers_rows(cm_server, stream, 10 if args.smoke else MANY_WORKERS)
        if "create-profile" in parts:
            with part_of(rows, "create-profile"):
                rows += create_profile(cm_server, stream, tmp / "clustermgr", args.repeat)
    finally:
        stream.close()
        cm_server.stop()
        if lab:
            lab.stop()


def launcher_rows(server: Server) -> list[dict]:
    """The warm launcher's memory with no cluster running (after the warm-up's cluster is gone)."""
    launcher = launcher_process(server)
    time.sleep(1)
    if launcher is None:
        raise BenchError("no warm launcher runs next to the server: see its log")
    info = launcher.memory_full_info()
    return [
        row("warm launcher idle memory (RSS)", info.rss / MiB, "MiB"),
        row("warm launcher idle memory (USS, not shared with its forks)", info.uss / MiB, "MiB"),
    ]


def side_by_side_rows(
    args: argparse.Namespace, server: Server, stream: Stream, lab: Server | None, samples: int
) -> list[dict]:
    """List p99 at 1, 5, 20 clusters of 0 workers on each side (interleaved GETs), server RSS per cluster, the
    delay until a change reaches a UI client (clustermgr's stream against dask-labextension's 5 s poll).

    Without ``lab`` (no ``--labext-python``): clustermgr's list p99 and its memory per cluster only.
    """
    rows: list[dict] = []
    counts = (5,) if args.smoke else (1, 5, 20)
    rss0 = settle_rss(server)
    lab_rss0 = settle_rss(lab) if lab else 0
    ours: list[str] = []
    theirs: list[str] = []
    try:
        for n in counts:
            ours += [c["id"] for c in base.create_clusters(server, stream, n - len(ours), 0)]
            while lab and len(theirs) < n:
                theirs.append(lab_create(lab, 0)[0])
            targets = [(server, "clustermgr/api/clusters")] + ([(lab, "dask/clusters")] if lab else [])
            found = list_latencies(targets, samples)
            if lab:
                rows += ratio_rows(
                    f"side by side: GET list p99 at {n} clusters", [percentile(found[0], 99)], [percentile(found[1], 99)],
                    "dask-labextension", 1.0, unit="ms",
                )  # fmt: skip
            else:
                rows.append(row(f"GET list p99 at {n} clusters: clustermgr", percentile(found[0], 99) * 1000, "ms"))
        n = counts[-1]
        per_cluster = (settle_rss(server) - rss0) / n / MiB
        if lab:
            lab_per_cluster = (settle_rss(lab) - lab_rss0) / n / MiB
            rows += [
                row(f"side by side: server RSS per cluster ({n} clusters): clustermgr", per_cluster, "MiB"),
                row(
                    f"side by side: server RSS per cluster ({n} clusters): dask-labextension (scheduler inside)",
                    lab_per_cluster,
                    "MiB",
                ),
                row(
                    "side by side: server RSS per cluster: ratio clustermgr / dask-labextension",
                    per_cluster / lab_per_cluster,
                    "x",
                    1.0,
                ),
            ]
        launcher = launcher_process(server)
        if launcher is not None:
            schedulers_uss = uss_of_descendants(launcher.pid) / len(ours) / MiB
            rows.append(
                row(
                    "clustermgr memory per cluster outside the server (its scheduler process, USS)",
                    schedulers_uss,
                    "MiB",
                )
            )
        if lab:
            rows += change_to_ui_rows(args, server, stream, lab, ours[0], theirs[0])
    finally:
        base.delete_clusters(server, stream, ours)
        for cid in theirs:
            lab_delete(lab, cid)
    return rows


def change_to_ui_rows(
    args: argparse.Namespace, server: Server, stream: Stream, lab: Server, change_cid: str, lab_cid: str
) -> list[dict]:
    """``PATCH {"adapt": …}`` sent -> what a UI client shows: our stream message, dask-labextension's next poll."""
    poller = Poller(lab, "dask/clusters", UI_POLL_INTERVAL)
    ui_ours, ui_theirs = [], []
    try:
        for i in range(2 if args.smoke else 4):
            maximum = 10 + i
            m = stream.mark()
            t0 = now()
            server.call(
                "PATCH",
                f"clustermgr/api/clusters/{change_cid}",
                {"adapt": {"minimum": 0, "maximum": maximum}},
                expect=200,
            )
            t1, _, _ = stream.wait(
                lambda msg, maximum=maximum: any(
                    g["maximum"] == maximum for g in ((msg.get("cluster") or {}).get("adapt") or {}).get("groups", [])
                ),
                m,
                what="adapt pushed",
            )
            ui_ours.append(t1 - t0)
            server.call("PATCH", f"clustermgr/api/clusters/{change_cid}", {"adapt": None}, expect=200)
            time.sleep(random.uniform(0, UI_POLL_INTERVAL))  # the change lands anywhere in the UI's poll cycle
            t0 = now()
            lab.call("PATCH", f"dask/clusters/{lab_cid}", {"adapt": {"minimum": 0, "maximum": maximum}}, expect=200)
            t1 = poller.wait(
                lambda data, maximum=maximum: any((c.get("adapt") or {}).get("maximum") == maximum for c in data),
                t0,
            )
            ui_theirs.append(t1 - t0)
    finally:
        poller.close()
    return ratio_rows(
        "side by side: change -> UI client (push vs its 5 s poll)",
        ui_ours,
        ui_theirs,
        "dask-labextension",
        1.0,
        unit="ms",
    )


def _quiet(tmp: Path, flow: Callable[[], dict]) -> dict:
    with base.quiet_stderr(tmp / "raw.log"):
        return flow()


# -- report -----------------------------------------------------------------------------------------


TABLE_HEADER = "| benchmark | value | target | pass | reproduce: `bench.py …` | note |"


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table; its fifth column measures the row again alone (:func:`reproduce`)."""
    lines = [TABLE_HEADER, "|---|---|---|---|---|---|"]
    for r in rows:
        value = "-" if r["value"] != r["value"] else f"{r['value']:.3g} {r['unit']}"
        target = "" if r["target"] is None else f"≤ {r['target']:g} {r['unit']}"
        verdict = {True: "yes", False: "**no**", None: ""}[r["pass"]]
        again = reproduce(r)
        lines.append(
            f"| {r['name']} | {value} | {target} | {verdict} | {f'`{again}`' if again else ''} | {r.get('note', '')} |"
        )
    return "\n".join(lines)


def target_fraction(row: dict) -> float:
    """A row's value over its target; a row whose target is 0 (e.g. workers not reached) is 0 if met, else 2."""
    if row["target"]:
        return row["value"] / row["target"]
    return 0.0 if row["value"] <= 0 else 2.0


def chart(rows: list[dict], path: Path, title: str) -> None:
    """One bar per row with a target: its value as a fraction of the target (left of 1.0 passes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targeted = [r for r in rows if r["target"] is not None and r["value"] == r["value"]]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(targeted) + 1.5))
    fractions = [target_fraction(r) for r in targeted]
    ax.barh(range(len(targeted)), fractions, color=["tab:green" if r["pass"] else "tab:red" for r in targeted])
    ax.axvline(1.0, color="black", linewidth=1)
    labels = [
        textwrap.fill(r["name"].removeprefix("side by side: "), 70) for r in targeted
    ]  # a long one squeezed the bars
    ax.set_yticks(range(len(targeted)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("value / target (≤ 1 meets the target)")
    ax.set_title(textwrap.fill(title, 110), fontsize=9)
    for i, (r, f) in enumerate(zip(targeted, fractions)):
        ax.text(f, i, f" {r['value']:.3g} {r['unit']}", va="center", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="lifecycle repetitions per side (default 3)")
    parser.add_argument(
        "--smoke", action="store_true", help="small and quick (< 60 s): 1 repetition, 10 clusters, 5 subscribers"
    )
    parser.add_argument(
        "--labext-python", help="the Python of a venv with dask-labextension: adds the side-by-side rows"
    )
    parser.add_argument(
        "--only",
        help=f"only these parts, comma-separated: {', '.join(PARTS + NAMED_ONLY)} (writes only their rows; "
        "each row's part is in its 'part' field and the table's reproduce column)",
    )
    parser.add_argument(
        "--bursty-sides", default="fixed,distributed Adaptive,clustermgr", help="the bursty workload's sides (tuning)"
    )
    parser.add_argument(
        "--standby", type=int, help="StandbySchedulers.count of the clustermgr server (default: the product's, 1)"
    )
    parser.add_argument(
        "--rfc3987-path",
        type=Path,
        help="a folder holding the rfc3987 package: adds the restart row without jupyter_server's upstream import cost",
    )
    growth.add_arguments(parser)
    parser.add_argument("--out", type=Path, help="rows JSON (default benchmarks/results/<date>.json)")
    parser.add_argument("--chart", type=Path, help="PNG chart (default next to --out; needs matplotlib)")
    parser.add_argument("--no-chart", action="store_true", help="write no chart")
    args = parser.parse_args()
    try:
        selected_parts(args.only, args.smoke)
    except ValueError as exc:
        parser.error(str(exc))
    if args.smoke:
        args.repeat = 1
    started = _dt.datetime.now(_dt.timezone.utc)
    out = args.out or RESULTS / f"{started:%Y-%m-%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    os.environ[base.MARK] = base.RUN_ID
    # the bursty workload's tasks are functions of benchmarks/bursty.py: its schedulers and workers import it
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(Path(__file__).parent)]))
    tmp = Path(tempfile.mkdtemp(prefix="clustermgr-bench-"))
    load_before = os.getloadavg()[0]
    log(f"run {base.RUN_ID}: repeat={args.repeat}, smoke={args.smoke}, tmp={tmp}, load average {load_before:.2f}")
    t0 = now()
    rows: list[dict] = []
    failed = False
    try:
        measure(args, tmp, rows)
    except BaseException:
        failed = True
        traceback.print_exc(file=sys.stdout)
    finally:
        leftovers = base.reap_leftovers()
    if leftovers:
        print(f"LEFTOVER PROCESSES (killed now): {leftovers}")
    if failed or leftovers:
        print(f"- logs kept in {tmp}")
        print(table(rows))
        return 1
    import distributed

    header = (
        f"{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.1f} GiB, "
        f"Python {sys.version.split()[0]}, distributed {distributed.__version__}, "
        f"{'smoke' if args.smoke else f'--repeat {args.repeat}'}, load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}, "
        f"{now() - t0:.0f} s"
    )
    out.write_text(json.dumps(rows, indent=1) + "\n")
    text = f"{header}\n\n{table(rows)}\n"
    out.with_suffix(".md").write_text(text)
    print(text)
    if not args.no_chart:
        png = args.chart or out.with_suffix(".png")
        chart(rows, png, header)
        print(f"- chart: {png}")
    shutil.rmtree(tmp, ignore_errors=True)  # its servers' logs and work folders: kept only when the run fails
    print(f"- rows: {out}; no process of this run is left, nor its folder {tmp}")
    missed = [r["name"] for r in rows if r["pass"] is False]
    print(
        f"- {len(missed)} of {sum(r['pass'] is not None for r in rows)} targets missed"
        + (f": {missed}" if missed else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
