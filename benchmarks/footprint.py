#!/usr/bin/env python
"""The footprint rows: what the extension costs a Jupyter server that makes no cluster, its boot, and re-adoption.

:func:`measure` returns the rows; ``bench.py`` runs it as part of ``make bench`` (and ``--smoke``),
and this file runs it alone::

    python benchmarks/footprint.py [--seconds 30] [--repeat 3] [--clusters 3] [--out rows.json]

- **Idle**: two Jupyter servers started side by side, one with the extension on and one with it
  off (``ServerApp.jpserver_extensions``; jupyter-server-proxy on in both, as installing
  clustermgr-lab leaves it, or off in both with ``--without-server-proxy``), each waited for
  until it answers (``GET api/status`` and, on, ``GET clustermgr/api/clusters``); then both measured
  over the same ``seconds``: USS of the server and all its descendants (mean of 1 s samples), the
  most descendants seen, and CPU seconds of the server and its descendants. The rows are the
  differences (on − off), with the issue's targets: ≤ 10 MiB, 0 processes, ≤ 0.1 % of a core.
- **First create after start**: on the server with the extension on, what the sidebar does when
  it opens (the stream, ``GET templates``: the warm launcher and standby scheduler start then),
  2 s later (``THINK``) a cluster of the default template with 2 workers, POST → 2 running;
  against ``LocalCluster(n_workers=2)`` in this process (≤ 0.5×). The same POST at once after the
  sidebar opened (it waits for the launcher's start) is reported as a figure.
- **After the last cluster**: the same two servers, once the first create's cluster is deleted and
  the server has let the warm launcher and standby go (``WarmLauncher.release_after``, the product's
  120 s unless ``release_after`` is given, plus 5 s), measured as at first: the issue asks that a
  server whose clusters are all gone return to the idle footprint within a few minutes.
- **Boot**: ``python -m jupyter_server`` started → its API answers (``GET api/status``, and with
  the extension ``GET clustermgr/api/clusters``), on and off in turn, ``repeat`` times each.
- **Re-adoption**: a server (``on_shutdown = "keep"``) makes ``clusters`` clusters of 1 worker
  and stops cleanly; a new server on the same store and work folder is started: started → its API
  answers and every cluster is ``running`` (target ≤ 2 s on a quiet machine), median of ``repeat``;
  beside it, what jupyter_server's own boot spends importing ``rfc3987_syntax`` (an upstream cost of
  every server in the environment, jupyter_server#1559), the extension's share (the restart less the
  boot with the extension off), and, with ``--rfc3987-path`` (``make bench`` gives one), the same
  restart with the regex-based ``rfc3987`` importable so that jsonschema does not load ``rfc3987_syntax``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as base  # noqa: E402
from harness import BenchError, Server, Stream, log, now  # noqa: E402

from clustermgr_lab.backends.local.launcher import WarmLauncher  # noqa: E402
from clustermgr_lab.cluster.hosted_link import LinkHost  # noqa: E402

MiB = 2**20
#: Seconds between the sidebar's opening and the first create (a person reading it before a click).
THINK = 2.0
#: The product's ``WarmLauncher.release_after`` and ``LinkHost.release_after``: how long a server keeps the warm
#: launcher and the scheduler links' process after its last cluster.
RELEASE_AFTER = float(max(WarmLauncher.release_after.default_value, LinkHost.release_after.default_value))
SMALL = {"groups": [{"name": "default", "count": 1, "threads": 1, "memory": base.MEMORY}]}

Row = Callable[..., dict[str, Any]]


def server(
    tmp: Path,
    name: str,
    on: bool,
    proxy: bool = True,
    env: dict[str, str] | None = None,
    release_after: float | None = None,
    extra_config: dict[str, dict[str, Any]] | None = None,
    ready_path: str | None = None,
    **manager: Any,
) -> Server:
    """A Jupyter server with the extension on or off (its API is waited for, not the extension's templates).

    ``proxy``: jupyter-server-proxy on (as installing clustermgr-lab leaves it: on by its own config) or off.
    ``manager``: ``ClusterManager`` settings; ``extra_config``: other classes' (e.g. ``{"SSHBackend": {...}}``).
    ``ready_path``: what is waited for (default: the extension's list with it on, ``api/status`` with it off).
    """
    extensions = {"clustermgr_lab": on, "jupyter_server_proxy": proxy}
    config: dict[str, Any] = {"ServerApp": {"jpserver_extensions": extensions}}
    if on:
        config["ClusterManager"] = {
            "workdir": str(tmp / "work"),
            "store_path": str(tmp / "store" / "clusters.sqlite3"),
            "on_shutdown": "stop",
            **manager,
        }
        config["WarmLauncher"] = {"idle_timeout": 1.0}  # gone soon after the server: the leftover check waits 10 s
        if release_after is not None:  # the warm launcher's and the scheduler links' process alike
            config["WarmLauncher"]["release_after"] = release_after
            config["LinkHost"] = {"release_after": release_after}
        config.update(extra_config or {})
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    result = Server(
        folder, config=config, env=env, ready_path=ready_path or ("clustermgr/api/clusters" if on else "api/status")
    )
    result.poll_step = 0.02
    return result


def tree(pid: int) -> list[psutil.Process]:
    """The process and its live descendants."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def sample(pid: int) -> tuple[int, int, float]:
    """(USS of the process and its descendants, how many descendants, their CPU seconds so far).

    Live processes only: a child the server starts and reaps between two samples is not counted (jupyter_server
    runs a few at start, unevenly: counted, they swung the difference by ±0.5 % of a core).
    """
    uss, count, cpu = 0, 0, 0.0
    for process in tree(pid):
        try:
            with process.oneshot():
                if process.status() == psutil.STATUS_ZOMBIE:
                    continue
                uss += process.memory_full_info().uss
                times = process.cpu_times()
                cpu += times.user + times.system
                count += 1
        except psutil.Error:
            continue
    return uss, count - 1, cpu


def idle(
    servers: list[Server], seconds: float, since: list[tuple[float, float]] | None = None
) -> list[dict[str, float]]:
    """Each server's mean USS (bytes), most descendants and CPU share (of one core) over ``seconds``.

    ``since``: per server, (its CPU seconds, :func:`now`) when it answered: its CPU share is then counted from
    there to the end, so that servers started one after another are each measured from their start.
    """
    pids = [s.process.pid for s in servers]
    start = [sample(pid) for pid in pids]
    t0 = now()
    uss: list[list[int]] = [[] for _ in pids]
    most = [0 for _ in pids]
    last = start
    while now() - t0 < seconds:
        time.sleep(1.0)
        last = [sample(pid) for pid in pids]
        for i, (u, n, _) in enumerate(last):
            uss[i].append(u)
            most[i] = max(most[i], n)
    end = now()
    begun = since or [(start[i][2], t0) for i in range(len(pids))]
    return [
        {"uss": statistics.mean(uss[i]), "processes": most[i], "cpu": (last[i][2] - begun[i][0]) / (end - begun[i][1])}
        for i in range(len(pids))
    ]


def boot(
    tmp: Path, name: str, on: bool, proxy: bool = True, env: dict[str, str] | None = None, **manager: Any
) -> tuple[Server, float]:
    """Start a server; returns it and the seconds from its start to its API (the extension's too) answering."""
    started = server(tmp, name, on, proxy, env, **manager)
    t0 = now()
    started.start()
    return started, now() - t0


def stop(*servers: Server | None) -> None:
    for s in servers:
        if s is not None:
            s.stop()


def idle_rows(
    tmp: Path, seconds: float, row: Row, proxy: bool = True, release_after: float | None = None
) -> tuple[list[dict], Server, Server]:
    """The idle rows; returns them and both servers, still running (for the first create and the rows after it)."""
    on = off = None
    try:
        on, off = (
            server(tmp, "idle-on", True, proxy, release_after=release_after),
            server(tmp, "idle-off", False, proxy),
        )
        for s in (on, off):
            s.start()
        log(f"footprint: both servers answer; measuring for {seconds:g} s (load average {os.getloadavg()[0]:.2f})")
        measured_on, measured_off = idle([on, off], seconds)
    except BaseException:
        stop(on, off)
        raise
    note = f"over {seconds:g} s after start, jupyter-server-proxy {'on' if proxy else 'off'} on both"
    return difference_rows("idle server", measured_on, measured_off, row, note, cpu=True), on, off


def after_last_cluster_rows(
    on: Server, off: Server, seconds: float, row: Row, release_after: float, deleted: float
) -> list[dict]:
    """On − off again once the server has let go of what its last cluster started (``deleted``: when it was gone)."""
    wait = release_after + 5.0
    time.sleep(max(0.0, deleted + wait - now()))
    log(f"footprint: {now() - deleted:.0f} s after the last cluster; measuring for {seconds:g} s")
    measured_on, measured_off = idle([on, off], seconds)
    note = f"over {seconds:g} s from {wait:g} s after the last cluster was deleted (WarmLauncher.release_after + 5 s)"
    return difference_rows("server whose clusters are all gone", measured_on, measured_off, row, note, cpu=False)


def difference_rows(
    what: str, measured_on: dict[str, float], measured_off: dict[str, float], row: Row, note: str, cpu: bool
) -> list[dict]:
    """The rows extension on − off of two :func:`idle` measurements: USS, processes and (``cpu``) CPU, with targets."""
    load = f"load average {os.getloadavg()[0]:.2f}"
    note += "; extension on / off: "
    rows = [
        row(
            f"{what}, extension on - off: USS of the server and its descendants",
            (measured_on["uss"] - measured_off["uss"]) / MiB,
            "MiB",
            10,
            note + f"{measured_on['uss'] / MiB:.1f} / {measured_off['uss'] / MiB:.1f} MiB; {load}",
        ),
        row(
            f"{what}, extension on - off: processes",
            measured_on["processes"] - measured_off["processes"],
            "processes",
            0,
            note + f"{measured_on['processes']} / {measured_off['processes']} descendants",
        ),
    ]
    if cpu:
        rows.append(
            row(
                f"{what}, extension on - off: CPU",
                (measured_on["cpu"] - measured_off["cpu"]) * 100,
                "% of a core",
                0.1,
                note + f"{measured_on['cpu'] * 100:.3f} / {measured_off['cpu'] * 100:.3f} % of a core; {load}",
            )
        )
    return rows


def first_create(on: Server, think: float) -> float:
    """A just-started server's first create: the sidebar opens (stream, templates), ``think`` s later the POST;
    seconds from the POST to 2 workers running."""
    stream = Stream(on)
    try:
        on.call("GET", "clustermgr/api/templates", expect=200)
        time.sleep(think)
        m = stream.mark()
        t0 = now()
        _, cluster = on.call("POST", "clustermgr/api/clusters", {"spec": base.spec(2)}, expect=202)
        t1, _, _ = stream.wait(base.settled(cluster["id"], 2), m, what="2 workers running", cluster_id=cluster["id"])
        base.delete_clusters(on, stream, [cluster["id"]])
    finally:
        stream.close()
    return t1 - t0


def local_create(folder: Path) -> float:
    """``LocalCluster(n_workers=2)`` in this process, after one not timed (its imports): create -> 2 workers."""
    with base.quiet_stderr(folder / "raw.log"):
        base.make_local_cluster(2).close()
        t = now()
        local = base.make_local_cluster(2)
        try:
            return base.wait_raw(local, 2, "create") - t
        finally:
            local.close()


def first_create_rows(on: Server, row: Row, think: float = THINK) -> list[dict]:
    """The first create of a server that has just started, ``think`` s after the sidebar opened; against LocalCluster."""
    ours = first_create(on, think)
    local = local_create(on.tmp)
    return [
        row(
            "first create after start -> 2 workers running: ratio clustermgr / LocalCluster",
            ours / local,
            "x",
            0.5,
            f"clustermgr {ours:.3f} s, the POST {think:g} s after the sidebar opened (stream, GET templates: the "
            f"warm launcher and standby start then); LocalCluster {local:.3f} s; load average {os.getloadavg()[0]:.2f}",
        )
    ]


def boot_rows(tmp: Path, repeat: int, row: Row) -> list[dict]:
    """Boot times on and off; and on the first server with the extension, its first create at once (a figure)."""
    times: dict[bool, list[float]] = {True: [], False: []}
    at_once = None
    for i in range(repeat):
        for on in (True, False) if i % 2 == 0 else (False, True):
            started, seconds = boot(tmp, f"boot-{'on' if on else 'off'}-{i}", on)
            try:
                if on and at_once is None:
                    at_once = first_create(started, 0.0)
            finally:
                stop(started)
            times[on].append(seconds)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    BOOT_OFF.append(off)
    return [
        row(
            "server boot -> API answers: extension on / off",
            on / off,
            "x",
            None,
            f"on {on:.2f} s (its GET clusters answers), off {off:.2f} s (GET api/status); medians of {repeat}; "
            f"load average {os.getloadavg()[0]:.2f}",
        ),
        row("server boot -> API answers, extension on", on, "s", None, f"median of {repeat}"),
        row(
            "first create at once after the sidebar opened -> 2 workers running",
            at_once,
            "s",
            None,
            "the POST right after the stream and GET templates: it waits for the warm launcher's start",
        ),
    ]


#: The median boot with the extension off of :func:`boot_rows`, for the re-adoption rows' share of the extension.
BOOT_OFF: list[float] = []
#: jupyter_server's own boot imports jsonschema's format checkers, which import ``rfc3987_syntax``: it compiles
#: ~35 Lark parsers at import (jupyter-server/jupyter_server#1559) unless the regex-based ``rfc3987`` is importable.
UPSTREAM_MODULE = "rfc3987_syntax"


def upstream_import_seconds(env: dict[str, str] | None = None) -> float:
    """Seconds that importing ``jupyter_server.serverapp`` spends in :data:`UPSTREAM_MODULE` (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import jupyter_server.serverapp"],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120,
    )  # fmt: skip
    cumulative = [
        int(line.split("|")[1]) for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.split("|")[-1].strip() == UPSTREAM_MODULE
    ]  # fmt: skip
    return cumulative[0] / 1e6 if cumulative else 0.0


def restart(place: Path, clusters: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """A server made ``clusters`` clusters and stopped keeping them; a new one started on the same store.

    Returns (started -> API answers and every cluster running, started -> API answers), in seconds.
    """
    first = second = None
    ids: list[str] = []
    try:
        first, _ = boot(place, "first", True, env=env, on_shutdown="keep")
        stream = Stream(first)
        try:
            ids = [c["id"] for c in base.create_clusters(first, stream, clusters, 1)]
        finally:
            stream.close()
        stop(first)
        t0 = now()
        second, answered = boot(place, "second", True, env=env, on_shutdown="stop")
        deadline = t0 + base.TIMEOUT
        while True:
            _, listed = second.call("GET", "clustermgr/api/clusters", expect=200)
            running = {c["id"] for c in listed["clusters"] if c["status"] == "running"}
            if set(ids) <= running:
                break
            if now() > deadline:
                raise BenchError(f"re-adoption: {sorted(set(ids) - running)} not running after {base.TIMEOUT:g} s")
            time.sleep(0.02)
        total = now() - t0
        stream = Stream(second)
        try:
            base.delete_clusters(second, stream, ids)
        finally:
            stream.close()
    finally:
        stop(first, second)
    return total, answered


def readopt_rows(
    tmp: Path, clusters: int, row: Row, repeat: int = 3, fast_import_path: Path | None = None
) -> list[dict]:
    """A server restarted with ``clusters`` clusters to re-adopt: started → API answers and every cluster running.

    ``repeat`` restarts, medians. With ``fast_import_path`` (a folder holding the ``rfc3987`` package), the same
    again with that folder on the servers' ``PYTHONPATH``: jupyter_server's boot without its upstream import cost.
    """
    plural = "s" * (clusters != 1)
    name = f"server restarted with {clusters} cluster{plural} to re-adopt -> API answers and every cluster running"
    runs = [restart(tmp / f"readopt-{i}", clusters) for i in range(repeat)]
    total = statistics.median(t for t, _ in runs)
    answered = statistics.median(a for _, a in runs)
    upstream = upstream_import_seconds()
    load = f"load average {os.getloadavg()[0]:.2f}"
    rows = [
        row(
            name, total, "s", 2.0,
            f"median of {repeat}; of which the server's boot to its API answering {answered:.2f} s; {load} "
            "(the target is for a quiet machine)",
        ),
        row(
            f"{name}: jupyter_server's own import of {UPSTREAM_MODULE} (upstream, jupyter_server#1559)",
            upstream, "s", None,
            "in every Jupyter server of this environment, extension on or off: jsonschema's IRI format checker",
        ),
    ]  # fmt: skip
    if BOOT_OFF:
        rows.append(
            row(
                f"{name}: the extension's share (restart - boot with the extension off)",
                total - BOOT_OFF[-1], "s", None,
                f"{total:.2f} s - {BOOT_OFF[-1]:.2f} s (median boot, extension off)",
            )
        )  # fmt: skip
    if fast_import_path is not None:
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(fast_import_path), os.environ.get("PYTHONPATH")]))}
        fast = [restart(tmp / f"readopt-fast-{i}", clusters, env) for i in range(repeat)]
        rows.append(
            row(
                f"{name}, {UPSTREAM_MODULE}'s import cost removed (the regex-based rfc3987 importable instead)",
                statistics.median(t for t, _ in fast), "s", None,
                f"median of {repeat}; of which boot {statistics.median(a for _, a in fast):.2f} s; "
                f"{UPSTREAM_MODULE} import then {upstream_import_seconds(env):.3f} s; {load}",
            )
        )  # fmt: skip
    return rows


def measure(
    tmp: Path,
    row: Row,
    *,
    seconds: float = 30,
    repeat: int = 3,
    clusters: int = 3,
    proxy: bool = True,
    fast_import_path: Path | None = None,
    release_after: float | None = None,
) -> list[dict]:
    """Every footprint row, in order: idle, first create, after the last cluster, boot, re-adoption.

    ``release_after``: the server's ``WarmLauncher.release_after`` (None: the product's default).
    """
    release_after = RELEASE_AFTER if release_after is None else release_after
    rows, on, off = idle_rows(tmp / "footprint", seconds, row, proxy, release_after)
    try:
        rows += first_create_rows(on, row)  # its cluster is deleted before the LocalCluster beside it
        rows += after_last_cluster_rows(on, off, seconds, row, release_after, deleted=now())
    finally:
        stop(on, off)
    rows += boot_rows(tmp / "footprint", repeat, row)
    rows += readopt_rows(tmp / "footprint", clusters, row, repeat, fast_import_path)
    return rows


def _row(name: str, value: float, unit: str, target: float | None = None, note: str = "") -> dict[str, Any]:
    result = {"name": name, "value": value, "unit": unit, "target": target, "pass": None}
    if target is not None:
        result["pass"] = value <= target
    if note:
        result["note"] = note
    return result


def run_alone(prefix: str, rows_of: Callable[[Path], list[dict]], out: Path | None) -> int:
    """A part of the benchmark run alone: ``rows_of`` a fresh temporary folder, printed (and written to ``out``).

    Every process it starts carries the run's mark; returns 1 if any is left at the end (killed then), else 0.
    """
    os.environ[base.MARK] = base.RUN_ID
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    log(f"run {base.RUN_ID}: tmp={tmp}, load average {os.getloadavg()[0]:.2f}")
    try:
        rows = rows_of(tmp)
    finally:
        leftovers = base.reap_leftovers()
    for r in rows:
        verdict = "" if r["pass"] is None else (" PASS" if r["pass"] else " MISS")
        target = "" if r["target"] is None else f" (target <= {r['target']:g})"
        print(f"{r['name']}: {r['value']:.3f} {r['unit']}{target}{verdict}  [{r.get('note', '')}]")
    if out:
        out.write_text(json.dumps(rows, indent=1) + "\n")
    if leftovers:
        print(f"LEFTOVER PROCESSES (killed now): {leftovers}")
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="idle measurement (default 30 s)")
    parser.add_argument("--repeat", type=int, default=3, help="boots per side (default 3)")
    parser.add_argument("--clusters", type=int, default=3, help="clusters to re-adopt (default 3)")
    parser.add_argument(
        "--without-server-proxy", action="store_true", help="idle rows with jupyter-server-proxy off on both servers"
    )
    parser.add_argument(
        "--rfc3987-path",
        type=Path,
        help="a folder holding the rfc3987 package: adds the restart without the upstream cost",
    )
    parser.add_argument(
        "--release-after",
        type=float,
        help=f"the server's WarmLauncher.release_after before the rows after the last cluster "
        f"(default the product's, {RELEASE_AFTER:g} s)",
    )
    parser.add_argument("--out", type=Path, help="rows JSON")
    args = parser.parse_args()
    return run_alone(
        "clustermgr-footprint-",
        lambda tmp: measure(
            tmp,
            _row,
            seconds=args.seconds,
            repeat=args.repeat,
            clusters=args.clusters,
            proxy=not args.without_server_proxy,
            fast_import_path=args.rfc3987_path,
            release_after=args.release_after,
        ),
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
