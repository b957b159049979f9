"""The growth curves: how time, CPU, push bytes, memory and latency grow with a cluster's workers and with clusters.

``bench.py`` runs :func:`measure` in ``make bench``, in ``--smoke`` (tiny sizes) and alone with
``--only growth``; ``--growth-workers`` and ``--growth-clusters`` set the sizes (an empty list skips
a curve). Each curve is printed as a table, drawn on log-log axes with its least-squares slope
(``<out>-growth.png``, Markdown ``<out>-growth.md``) and reported as rows with targets.

- **Workers** (N = 10, 50, 200, 500): one cluster of 0 workers of the small-workers template (no nanny,
  1 thread, 512 MiB) scaled 0 -> N by one ``PATCH``, until the stream shows N running: the time, the
  Jupyter server's CPU-seconds and the stream's bytes during it, the memory each worker took (drop of
  available memory) and the server's CPU over ``IDLE`` seconds with N running; ``--growth-repeat``
  times (the medians; the ratio to LocalCluster is the first's, see :func:`cm_repeated`). Beside it, in turn,
  ``LocalCluster(n_workers=N)`` with the same worker shape and worker settings (it starts a nanny per
  worker; it has no nanny-less process mode) in this process: the time to N running and this
  process's CPU-seconds (its scheduler and nannies run here). Each side first checks that N more
  workers leave :data:`MIN_FREE` of memory (from the previous point's memory per worker); a side that
  does not fit, fails or times out is a row saying so, never a crash. Targets: clustermgr ≤ 0.5×
  LocalCluster at every N, slope of the time ≤ 1.0, slope of the idle server's CPU ≤ 1.05 (per worker
  flat), the largest N all running.
- **Clusters** (C = 1, 10, 50, 100): C clusters of 0 workers (idle); then, beside all of the largest C's
  clusters, the first C each scaled to 2 workers kept busy by tasks of 0.5 s sleeps from a ``Client`` per
  cluster (where 2C more workers fit): ``GET`` list
  p99, push p99 with ``subscribers`` streams (bench's helpers), the server's RSS, the server's CPU and
  that of the launcher's children (schedulers; busy: schedulers and workers) over ``IDLE`` seconds.
  Targets: slope of the idle list p99 ≤ 0.5, slope of the idle server's CPU ≤ 1.05.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as base  # noqa: E402
from harness import BenchError, Server, Stream, log, now, percentile  # noqa: E402

MiB, GiB = 2**20, 2**30
WORKERS = [10, 50, 200, 500]
CLUSTERS = [1, 10, 50, 100]
SMOKE_WORKERS, SMOKE_CLUSTERS = [2, 4], [1, 2]
MIN_FREE = 4 * GiB  # memory a point must leave available (the machine is shared): predicted before, watched during
SETTLE_TIMEOUT = 300.0  # seconds a scale-up may take before its point is a miss
LOCAL_TIMEOUT = 240.0  # the same for LocalCluster (its N nannies and workers start from scratch: slow on 2 cores)
MARGIN = 1.5  # memory per worker predicted for the next point: the largest measured so far, times this
GUESS_PER_WORKER = {"clustermgr": 64 * MiB, "LocalCluster": 200 * MiB}  # before a point has measured one
BUSY_TASK = 0.5  # seconds each busy task sleeps
REPEAT = 3  # clustermgr's scale-ups per N (--growth-repeat): the curve is their median, the ratio the first's


def add_arguments(parser: Any) -> None:
    """``--growth-workers`` and ``--growth-clusters`` on bench's parser."""
    parser.add_argument("--growth-workers", help=f"the workers curve's sizes (default {','.join(map(str, WORKERS))})")
    parser.add_argument(
        "--growth-clusters", help=f"the clusters curve's sizes (default {','.join(map(str, CLUSTERS))})"
    )
    parser.add_argument(
        "--growth-repeat", type=int, default=REPEAT,
        help=f"clustermgr's scale-ups per N on the workers curve (default {REPEAT}; 1 in --smoke)",
    )  # fmt: skip


def sizes(text: str | None, default: list[int], smoke: list[int], is_smoke: bool) -> list[int]:
    if text is None:
        return smoke if is_smoke else default
    return sorted({int(x) for x in text.split(",") if x.strip()})


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y on log x over the points with both > 0; None with fewer than 2."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x and y and x > 0 and y > 0 and y == y]
    if len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def cpu_seconds(*pids: int) -> float:
    """User and system CPU-seconds of the processes (those gone are left out)."""
    total = 0.0
    for pid in pids:
        try:
            total += sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.Error:
            continue
    return total


def on_cpu(pids: list[int]) -> dict[int, float]:
    """Seconds each process's live threads have run, to the nanosecond (``/proc/<pid>/task/*/schedstat``).

    An idle window's CPU is a few ticks of ``cpu_times`` (10 ms each) at most: too coarse to fit a slope to.
    """
    found = {}
    for pid in pids:
        try:
            found[pid] = sum(int(f.read_text().split()[0]) for f in Path(f"/proc/{pid}/task").glob("*/schedstat")) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return found


def idle_window(server: Server, bench: ModuleType, seconds: float) -> dict[str, float]:
    """CPU (in cores) of the server and of the launcher's descendants (schedulers, workers) over ``seconds``."""
    launcher = bench.launcher_process(server)
    kids = [p.pid for p in launcher.children(recursive=True)] if launcher else []
    own = server.server_side()  # the server and its scheduler links' process
    before, t0 = on_cpu([*own, *kids]), now()
    time.sleep(seconds)
    after, elapsed = on_cpu([*own, *kids]), now() - t0
    spent = {p: after[p] - before[p] for p in after if p in before}
    return {
        "cpu": sum(spent.get(p, 0.0) for p in own) / elapsed,
        "children_cpu": sum(v for p, v in spent.items() if p not in own) / elapsed,
        "children": len(kids),
    }


def fits(n: int, per_worker: float) -> tuple[bool, str]:
    available = psutil.virtual_memory().available
    left = available - n * per_worker
    why = f"{available / GiB:.1f} GiB available, {n} workers at {per_worker / MiB:.0f} MiB would leave {left / GiB:.1f} GiB"
    return left >= MIN_FREE, why


def start_server(tmp: Path, bench: ModuleType, workers: int, clusters: int) -> tuple[Server, Stream]:
    server = Server(
        tmp / "growth-server",
        config={
            "ServerApp": {"jpserver_extensions": {"clustermgr_lab": True, "jupyter_server_proxy": False}},
            "ClusterManager": {
                "workdir": str(tmp / "growth"),
                "max_clusters": clusters + 5,
                "max_workers": max(workers, 2),
                "on_shutdown": "stop",
                "templates": [bench.SMALL_WORKERS_TEMPLATE],
            },
            "WarmLauncher": {"idle_timeout": 1.0},
        },
    )
    server.start()
    return server, Stream(server)


# -- the workers curve ----------------------------------------------------------------------------------


def wait_guarded(stream: Stream, cid: str, n: int, mark: int) -> tuple[float | None, str]:
    """Wait for ``n`` running, watching memory: (arrival time, "") or (None, why it stopped)."""
    deadline = now() + SETTLE_TIMEOUT
    while True:
        try:
            t, _, _ = stream.wait(base.settled(cid, n), mark, timeout=1.0, what=f"{n} workers", cluster_id=cid)
            return t, ""
        except base.ClusterFailed as exc:
            return None, f"cluster failed: {exc.error}"
        except BenchError:
            pass
        available = psutil.virtual_memory().available
        if available < MIN_FREE:
            return None, f"memory guard: {available / GiB:.1f} GiB available"
        if now() > deadline:
            return None, f"not settled after {SETTLE_TIMEOUT:g} s"


def running_now(stream: Stream, mark: int, cid: str) -> int:
    last = [m for m in stream.between(mark, stream.mark() - 1, cid) if m.get("cluster")]
    return last[-1]["cluster"]["workers"]["running"] if last else 0


def cm_point(server: Server, stream: Stream, bench: ModuleType, n: int, per_worker: float, idle: float) -> dict:
    """One scale-up 0 -> ``n`` of a new cluster; with ``idle`` > 0, the server's CPU over ``idle`` s after it."""
    out: dict[str, Any] = {"n": n}
    ok, why = fits(n, per_worker)
    if not ok:
        out.update(reached=0, why=f"not started, memory guard: {why}")
        return out
    cid = base.create_clusters(server, stream, 1, 0, template=bench.SMALL_WORKERS_TEMPLATE["name"])[0]["id"]
    try:
        time.sleep(0.5)
        available0 = psutil.virtual_memory().available
        m, bytes0, cpu0, t0 = stream.mark(), stream.bytes, cpu_seconds(*server.server_side()), now()
        server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"scale": {"workers": n}}, expect=200)
        t1, why = wait_guarded(stream, cid, n, m)
        out.update(
            cpu=cpu_seconds(*server.server_side()) - cpu0, bytes=stream.bytes - bytes0, messages=stream.mark() - m
        )
        if t1 is None:
            out.update(reached=running_now(stream, m, cid), why=why)
            return out
        out.update(time=t1 - t0, reached=n, per_worker=max(available0 - psutil.virtual_memory().available, 0) / n)
        if idle > 0:
            m = stream.mark()
            out.update(idle_cpu=idle_window(server, bench, idle)["cpu"], idle_messages=stream.mark() - m)
    finally:
        base.delete_clusters(server, stream, [cid])
    return out


def cm_repeated(
    server: Server, stream: Stream, bench: ModuleType, n: int, per_worker: float, idle: float, repeat: int
) -> dict:
    """:func:`cm_point` ``repeat`` times: the median of each figure, and the first scale-up's time as ``first_time``.

    One scale-up to 500 on 2 cores varies by a third from run to run (its workers' start-up is
    CPU-bound, half of it in the kernel: about 3,600 fresh pages each); the median of the repeats is
    the curve, and the first is kept for the ratio to ``LocalCluster`` (measured once). The
    idle window runs after the first only. A repeat that does not reach N is the point's result.
    """
    runs: list[dict] = []
    for i in range(repeat):
        if i:
            settle_cpu()
            time.sleep(2)
        found = cm_point(server, stream, bench, n, per_worker, idle if i == 0 else 0.0)
        if "time" not in found:
            if runs:
                found["why"] = f"repeat {i + 1} of {repeat}: {found.get('why', '')}"
            return found
        runs.append(found)
        per_worker = max(per_worker, found["per_worker"] * MARGIN)
    out = dict(runs[0])
    for key in ("time", "cpu", "bytes", "messages", "per_worker"):
        out[key] = statistics.median(r[key] for r in runs)
    out.update(first_time=runs[0]["time"], times=[r["time"] for r in runs])
    return out


def local_point(tmp: Path, bench: ModuleType, n: int, per_worker: float) -> dict:
    import dask
    from distributed import LocalCluster

    out: dict[str, Any] = {"n": n}
    ok, why = fits(n, per_worker)
    if not ok:
        out.update(why=f"not started, memory guard: {why}")
        return out
    available0, cpu0, t0 = psutil.virtual_memory().available, cpu_seconds(os.getpid()), now()
    children_before = {p.pid for p in psutil.Process().children()}  # the server, started before
    cluster = None
    try:
        with (
            base.quiet_stderr(tmp / "raw.log"),
            dask.config.set(bench.SMALL_WORKERS_TEMPLATE["options"]["worker_config"]),
        ):
            # n_workers=0, then scale(n): the same cluster as LocalCluster(n_workers=n), whose constructor blocks
            # until every worker started and so cannot be bounded on a machine that runs out of time or memory
            cluster = LocalCluster(
                n_workers=0, threads_per_worker=1, memory_limit="512MiB", processes=True,
                host="127.0.0.1", dashboard_address="127.0.0.1:0",
            )  # fmt: skip
            cluster.scale(n)
            t1, why = _wait_local(cluster, n, t0)
        if t1 is None:
            out["why"] = why
            if "after" in why:  # timed out: its time is at least this long
                out["at_least"] = now() - t0
            return out
        out.update(time=t1 - t0, cpu=cpu_seconds(os.getpid()) - cpu0)
        out["per_worker"] = max(available0 - psutil.virtual_memory().available, 0) / n
    except Exception as exc:  # noqa: BLE001  (a point that fails is a row saying why)
        out["why"] = f"failed after {now() - t0:.0f} s: {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        if cluster is not None:
            with base.quiet_stderr(tmp / "raw.log"):
                try:
                    cluster.close(timeout=120)
                except Exception as exc:  # noqa: BLE001
                    log(f"LocalCluster({n}).close: {exc}")
        stop_left_over(children_before, f"LocalCluster({n})")
    return out


def _multiprocessing_helper(process: psutil.Process) -> bool:
    """multiprocessing's resource tracker or forkserver: started once, kept for the whole run."""
    try:
        cmdline = " ".join(process.cmdline())
    except psutil.Error:
        return True
    return "resource_tracker" in cmdline or "multiprocessing.forkserver" in cmdline


def stop_left_over(children_before: set[int], what: str) -> None:
    """Stop what ``what`` left running (its nannies are this process's children; their workers, theirs).

    A ``LocalCluster.close`` that times out under load (its scheduler does not answer) leaves hundreds
    of workers trying to reconnect, which would slow every measurement after it.
    """
    left = [p for p in psutil.Process().children() if p.pid not in children_before and not _multiprocessing_helper(p)]
    family = []
    for process in left:
        with contextlib.suppress(psutil.Error):
            family += [process, *process.children(recursive=True)]
    if not family:
        return
    log(f"{what} left {len(family)} processes after its close; stopping them")
    for process in family:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(family, timeout=15)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=15)


def _wait_local(cluster: Any, n: int, t0: float) -> tuple[float | None, str]:
    """Poll (1 ms, as :func:`harness.wait_raw`) until ``n`` workers run, within :data:`LOCAL_TIMEOUT` and memory."""
    checked = now()
    while not (base._observed(cluster) == n and len(cluster.workers) == n):
        if now() - checked > 0.5:
            checked = now()
            available = psutil.virtual_memory().available
            if available < MIN_FREE:
                return None, f"memory guard: {available / GiB:.1f} GiB available, {base._observed(cluster)} running"
            if checked - t0 > LOCAL_TIMEOUT:
                return None, f"{base._observed(cluster)} of {n} running after {LOCAL_TIMEOUT:g} s"
        time.sleep(0.001)
    return now(), ""


def workers_curve(
    tmp: Path, server: Server, stream: Stream, bench: ModuleType, ns: list[int], idle: float, local: bool,
    repeat: int = 1,
) -> list[dict]:  # fmt: skip
    """Each N: clustermgr (``repeat`` times) and (``local``) LocalCluster in turn, which goes first alternating."""
    points = []
    per = dict(GUESS_PER_WORKER)
    measured: set[str] = set()
    for i, n in enumerate(ns):
        point: dict[str, Any] = {"n": n, "load": os.getloadavg()[0], "LocalCluster": {"why": "not run in --smoke"}}
        for side in ("clustermgr", "LocalCluster") if i % 2 == 0 else ("LocalCluster", "clustermgr"):
            if side == "LocalCluster" and not local:
                continue
            settle_cpu()  # what the side before left (400 exiting processes) does not slow this one
            found = (
                cm_repeated(server, stream, bench, n, per[side], idle, repeat)
                if side == "clustermgr"
                else local_point(tmp, bench, n, per[side])
            )
            if found.get("per_worker"):  # measured: the next point's prediction, with a margin for growth after it
                per[side] = max(found["per_worker"] * MARGIN, per[side] if side in measured else 0)
                measured.add(side)
            point[side] = found
            log(f"growth, workers: {side} at {n}: {_brief(found)}, load average {os.getloadavg()[0]:.1f}")
            time.sleep(2)  # the processes of the side before are gone
        point["load_after"] = os.getloadavg()[0]
        points.append(point)
    return points


def settle_cpu(busy_below: float = 25.0, timeout: float = 180.0) -> None:
    """Wait until the machine's CPUs are mostly idle (two 1 s samples below ``busy_below`` %), at most ``timeout`` s.

    The 1-minute load average falls too slowly to wait on after a side that ran hundreds of processes.
    """
    deadline, quiet = now() + timeout, 0
    while quiet < 2 and now() < deadline:
        quiet = quiet + 1 if psutil.cpu_percent(interval=1.0) < busy_below else 0
    if quiet < 2:
        log(f"growth: CPUs still busy after {timeout:g} s; measuring anyway")


def _brief(found: dict) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in found.items() if k != "n")


# -- the clusters curve ---------------------------------------------------------------------------------


def cluster_metrics(server: Server, bench: ModuleType, subscribers: int, samples: int, cid: str, idle: float) -> dict:
    push = bench.push_p99(server, subscribers, 10 if samples < 200 else 30, cid)
    found = bench.list_latencies([(server, "clustermgr/api/clusters")], samples)[0]
    server_rss = bench.settle_rss(server)
    return {
        "list_p99": percentile(found, 99),
        "list_p50": percentile(found, 50),
        "push_p99": push,
        "rss": server_rss,
        **idle_window(server, bench, idle),
        "load": os.getloadavg()[0],
    }


def clusters_curve(
    server: Server, stream: Stream, bench: ModuleType, cs: list[int], subscribers: int, samples: int, idle: float,
    per_worker: float,
) -> list[dict]:  # fmt: skip
    points = [{"c": c} for c in cs]
    ids: list[str] = []
    rss0 = bench.settle_rss(server)
    clients: list[Any] = []
    futures: list[Any] = []
    try:
        for point in points:
            c = point["c"]
            ids += [x["id"] for x in base.create_clusters(server, stream, c - len(ids), 0, template="small")]
            point["idle"] = cluster_metrics(server, bench, subscribers, samples, ids[0], idle)
            point["idle"]["rss_per_cluster"] = (point["idle"]["rss"] - rss0) / c
            log(f"growth, clusters: {c} idle: {_brief(point['idle'])}")
        for point in points:  # the same clusters, each now with 2 busy workers
            c = point["c"]
            ok, why = fits(2 * (c - len(clients)), per_worker)
            if not ok:
                point["busy_why"] = f"not run, memory guard: {why}"
                break
            busy_start(server, stream, ids[len(clients) : c], clients)
            for client in clients:  # keep every cluster busy through this point's measuring
                futures += client.map(time.sleep, [BUSY_TASK] * int(2 * (idle + 30) / BUSY_TASK), pure=False)
            point["busy"] = cluster_metrics(server, bench, subscribers, samples, ids[0], idle)
            log(f"growth, clusters: {c} busy: {_brief(point['busy'])}")
    except BenchError as exc:
        log(f"growth, clusters: stopped: {exc}")
        for point in points:
            point.setdefault("busy_why", f"stopped: {str(exc)[:200]}")
    finally:
        for client in clients:
            try:
                client.close(timeout=10)
            except Exception as exc:  # noqa: BLE001
                log(f"growth, clusters: client close: {exc}")
        base.delete_clusters(server, stream, ids)
    return points


def busy_start(server: Server, stream: Stream, ids: list[str], clients: list) -> None:
    """Scale ``ids`` to 2 workers each and open a ``Client`` on each (appended to ``clients``)."""
    from distributed import Client

    m = stream.mark()
    for cid in ids:
        server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"scale": {"workers": 2}}, expect=200)
    for cid in ids:
        stream.wait(base.settled(cid, 2), m, timeout=SETTLE_TIMEOUT, what="2 workers", cluster_id=cid)
        _, model = server.call("GET", f"clustermgr/api/clusters/{cid}", expect=200)
        clients.append(Client(model["scheduler_address"], timeout=60))


# -- report ---------------------------------------------------------------------------------------------


def workers_rows(points: list[dict], row: Any, baseline: dict) -> tuple[list[dict], str]:
    rows: list[dict] = []
    lines = [
        "| N | clustermgr: to all running (median) | clustermgr: first | LocalCluster | ratio (first / LocalCluster) "
        "| server CPU-s (clustermgr) | CPU-s of LocalCluster's process "
        "| stream bytes | MiB per worker (cm / LC) | idle server CPU, N running | above no-cluster baseline, per worker "
        "| load average |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        n, cm, lc = p["n"], p["clustermgr"], p["LocalCluster"]
        note = f"load average {p['load']:.1f} -> {p['load_after']:.1f}"
        if "time" in cm:
            runs = cm.get("times", [cm["time"]])
            rows.append(
                row(
                    f"growth, workers: scale 0 -> {n}: clustermgr",
                    cm["time"],
                    "s",
                    note=f"median of {len(runs)}: {', '.join(f'{t:.3g}' for t in runs)} s; {note}",
                )
            )
            rows.append(row(f"growth, workers: scale 0 -> {n}: server CPU", cm["cpu"], "CPU-s"))
            rows.append(
                row(
                    f"growth, workers: scale 0 -> {n}: stream bytes",
                    cm["bytes"] / 1024,
                    "KiB",
                    note=f"{cm['messages']} messages",
                )
            )
            rows.append(
                row(
                    f"growth, workers: server CPU idle with {n} running",
                    cm["idle_cpu"] * 100,
                    "% of a core",
                    note=f"{baseline['cpu'] * 100:.3g} % with no cluster",
                )
            )
        else:
            rows.append(
                row(
                    f"growth, workers: {n} not reached: clustermgr",
                    n - cm.get("reached", 0),
                    "workers",
                    0,
                    note=cm["why"],
                )
            )
        if "time" in lc:
            rows.append(row(f"growth, workers: LocalCluster(n_workers={n}) -> all running", lc["time"], "s", note=note))
            rows.append(row(f"growth, workers: LocalCluster(n_workers={n}): CPU of its process", lc["cpu"], "CPU-s"))
        else:
            rows.append(row(f"growth, workers: LocalCluster(n_workers={n}): not measured", 1, "points", note=lc["why"]))
        first = cm.get("first_time", cm.get("time"))  # LocalCluster runs once: against clustermgr's first
        ratio = first / lc["time"] if first is not None and "time" in lc else None
        if ratio is not None:
            rows.append(
                row(
                    f"growth, workers: scale 0 -> {n}: ratio clustermgr / LocalCluster",
                    ratio,
                    "x",
                    0.5,
                    note="clustermgr's first scale-up to N",
                )
            )
        elif first is not None and "at_least" in lc:
            ratio = first / lc["at_least"]
            rows.append(
                row(
                    f"growth, workers: scale 0 -> {n}: ratio clustermgr / LocalCluster (at most)",
                    ratio,
                    "x",
                    0.5,
                    note=f"LocalCluster not all running after {lc['at_least']:.0f} s: the ratio is at most this",
                )
            )
        lines.append(
            f"| {n} | {_s(cm.get('time'), cm.get('why'))} | {_f(cm.get('first_time'), 's')} "
            f"| {_s(lc.get('time'), lc.get('why'))} | {_f(ratio, 'x')} "
            f"| {_f(cm.get('cpu'))} | {_f(lc.get('cpu'))} | {_f((cm.get('bytes') or 0) / 1024, 'KiB')} "
            f"| {_f(_mib(cm.get('per_worker')))} / {_f(_mib(lc.get('per_worker')))} "
            f"| {_f(_pct(cm.get('idle_cpu')), '%')} | {_f(_pct(_above(cm.get('idle_cpu'), baseline, n)), '%')} "
            f"| {p['load']:.1f} -> {p['load_after']:.1f} |"
        )
    ns = [p["n"] for p in points]
    fitted = {
        "time, clustermgr": (_col(points, "clustermgr", "time"), 1.0),
        "time, clustermgr's first scale-up": (_col(points, "clustermgr", "first_time"), None),
        "time, LocalCluster": (_col(points, "LocalCluster", "time"), None),
        "server CPU during the scale-up": (_col(points, "clustermgr", "cpu"), None),
        "LocalCluster process CPU during the scale-up": (_col(points, "LocalCluster", "cpu"), None),
        "stream bytes": (_col(points, "clustermgr", "bytes"), None),
        "idle server CPU with N running (per worker flat)": (_col(points, "clustermgr", "idle_cpu"), 1.05),
        "idle server CPU above the no-cluster baseline": (
            [_above(p["clustermgr"].get("idle_cpu"), baseline, 1) for p in points],
            None,
        ),
    }
    lines.append("")
    for name, (ys, target) in fitted.items():
        s = slope(ns, ys)
        lines.append(f"- slope of {name} vs N: {_f(s)}" + ("" if target is None else f" (target ≤ {target:g})"))
        if s is not None:
            rows.append(row(f"growth, workers: slope of {name} vs N (log-log)", s, "", target))
    if points:
        top = points[-1]
        short = top["n"] - top["clustermgr"].get("reached", 0)
        rows.append(
            row(
                f"growth, workers: {top['n']} workers: short of running",
                short,
                "workers",
                0,
                note=top["clustermgr"].get("why", ""),
            )
        )
    return rows, "\n".join(lines)


def clusters_rows(points: list[dict], row: Any, subscribers: int, baseline: dict) -> tuple[list[dict], str]:
    rows: list[dict] = []
    lines = [
        f"| C | phase | list p99 | list p50 | push p99 ({subscribers} subscribers) | server RSS | RSS per cluster "
        "| server CPU | above no-cluster baseline, per cluster | launcher's children CPU (processes) | load average |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        for phase in ("idle", "busy"):
            m = p.get(phase)
            if m is None:
                if phase == "busy":
                    lines.append(f"| {p['c']} | busy | {p.get('busy_why', 'not run')} |||||||")
                continue
            c, note = p["c"], f"load average {m['load']:.1f}"
            what = "idle" if phase == "idle" else "2 busy workers each"
            rows.append(
                row(f"growth, clusters: GET list p99 at {c} clusters, {what}", m["list_p99"] * 1000, "ms", note=note)
            )
            rows.append(row(f"growth, clusters: push p99 at {c} clusters, {what}", m["push_p99"] * 1000, "ms"))
            rows.append(row(f"growth, clusters: server RSS at {c} clusters, {what}", m["rss"] / MiB, "MiB"))
            rows.append(row(f"growth, clusters: server CPU at {c} clusters, {what}", m["cpu"] * 100, "% of a core"))
            rows.append(
                row(
                    f"growth, clusters: launcher's children CPU at {c} clusters, {what}",
                    m["children_cpu"] * 100,
                    "% of a core",
                    note=f"{m['children']} processes",
                )
            )
            lines.append(
                f"| {c} | {phase} | {_f(m['list_p99'] * 1000, 'ms')} | {_f(m['list_p50'] * 1000, 'ms')} | {_f(m['push_p99'] * 1000, 'ms')} "
                f"| {_f(m['rss'] / MiB, 'MiB')} | {_f(_mib(m.get('rss_per_cluster')), 'MiB')} | {_f(m['cpu'] * 100, '%')} "
                f"| {_f(_pct(_above(m['cpu'], baseline, c)), '%')} | {_f(m['children_cpu'] * 100, '%')} ({m['children']}) | {m['load']:.1f} |"
            )
    lines.append("")
    for phase, targets in (("idle", {"list p99": 0.5, "server CPU (per cluster flat)": 1.05}), ("busy", {})):
        have = [p for p in points if phase in p]
        cs = [p["c"] for p in have]
        for name, key in (
            ("list p99", "list_p99"),
            ("push p99", "push_p99"),
            ("server RSS", "rss"),
            ("server CPU (per cluster flat)", "cpu"),
            ("server CPU above the no-cluster baseline", "above"),
            ("launcher's children CPU", "children_cpu"),
        ):
            ys = [_above(p[phase]["cpu"], baseline, 1) if key == "above" else p[phase][key] for p in have]
            s = slope(cs, ys)
            target = targets.get(name)
            lines.append(
                f"- {phase}: slope of {name} vs C: {_f(s)}" + ("" if target is None else f" (target ≤ {target:g})")
            )
            if s is not None:
                rows.append(row(f"growth, clusters: slope of {name} vs C, {phase} (log-log)", s, "", target))
    return rows, "\n".join(lines)


def _above(cpu: float | None, baseline: dict, per: int) -> float | None:
    """CPU above the idle server's with no cluster, per unit; None where not above it."""
    return None if cpu is None or cpu <= baseline["cpu"] else (cpu - baseline["cpu"]) / per


def _col(points: list[dict], side: str, key: str) -> list[float | None]:
    return [p[side].get(key) for p in points]


def _f(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.3g}{(' ' + unit) if unit else ''}"


def _s(value: float | None, why: str | None) -> str:
    return _f(value, "s") if value is not None else f"— ({why})"


def _mib(value: float | None) -> float | None:
    return None if value is None else value / MiB


def _pct(value: float | None) -> float | None:
    return None if value is None else value * 100


def chart(wpoints: list[dict], cpoints: list[dict], path: Path, title: str) -> None:
    """Log-log panels, one per measured quantity; each series labelled with its fitted slope."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ns = [p["n"] for p in wpoints]
    panels: list[tuple[str, str, list[tuple[str, list, list]]]] = [
        ("time to all running (s)", "N workers", [
            ("clustermgr, median", ns, _col(wpoints, "clustermgr", "time")),
            ("clustermgr, first", ns, _col(wpoints, "clustermgr", "first_time")),
            ("LocalCluster", ns, _col(wpoints, "LocalCluster", "time"))]),
        ("CPU-s during the scale-up", "N workers", [
            ("Jupyter server", ns, _col(wpoints, "clustermgr", "cpu")), ("LocalCluster's process", ns, _col(wpoints, "LocalCluster", "cpu"))]),
        ("push stream bytes during the scale-up", "N workers", [("stream", ns, _col(wpoints, "clustermgr", "bytes"))]),
        ("idle server CPU with N running (cores)", "N workers", [("server", ns, _col(wpoints, "clustermgr", "idle_cpu"))]),
    ]  # fmt: skip
    for title_, key, scale in (
        ("GET list p99 (ms)", "list_p99", 1000), ("push p99 (ms)", "push_p99", 1000),
        ("server RSS (MiB)", "rss", 1 / MiB), ("CPU (cores)", "cpu", 1),
    ):  # fmt: skip
        series = []
        for phase in ("idle", "busy"):
            have = [p for p in cpoints if phase in p]
            series.append(
                (
                    f"server, {phase}" if key == "cpu" else phase,
                    [p["c"] for p in have],
                    [p[phase][key] * scale for p in have],
                )
            )
            if key == "cpu":
                series.append(
                    (f"launcher's children, {phase}", [p["c"] for p in have], [p[phase]["children_cpu"] for p in have])
                )
        panels.append((title_, "C clusters", series))
    fig, axes = plt.subplots(2, 4, figsize=(18, 8.5))
    for ax, (label, xlabel, series) in zip(axes.flat, panels):
        if not any(y for _, _, ys in series for y in ys):
            ax.set_visible(False)  # a curve that was not measured
            continue
        for name, xs, ys in series:
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None and y > 0]
            if not pts:
                continue
            s = slope([x for x, _ in pts], [y for _, y in pts])
            line = ax.plot(*zip(*pts), "o-", label=f"{name}: slope {_f(s)}")[0]
            if s is not None:
                lx = [math.log(x) for x, _ in pts]
                ly = [math.log(y) for _, y in pts]
                b = sum(ly) / len(ly) - s * sum(lx) / len(lx)
                fx = [min(x for x, _ in pts), max(x for x, _ in pts)]
                ax.plot(fx, [math.exp(b + s * math.log(x)) for x in fx], "--", color=line.get_color(), linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        xs = sorted({x for _, xs_, _ in series for x in xs_})
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(label, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.grid(True, which="both", linewidth=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- entry ----------------------------------------------------------------------------------------------


def measure(args: Any, tmp: Path, rows: list[dict], bench: ModuleType) -> list[dict]:
    """Run both curves on a server of their own, append their rows to ``rows``, print the tables, draw the chart.

    ``bench`` is the module of ``bench.py`` (its ``row``, ``list_latencies``, ``push_p99``, templates).
    """
    ns = sizes(args.growth_workers, WORKERS, SMOKE_WORKERS, args.smoke)
    cs = sizes(args.growth_clusters, CLUSTERS, SMOKE_CLUSTERS, args.smoke)
    if not ns and not cs:
        return rows
    idle = 1.0 if args.smoke else 10.0
    subscribers, samples = (5, 60) if args.smoke else (20, 1000)
    load0, started = os.getloadavg()[0], _dt.datetime.now(_dt.timezone.utc)
    server, stream = start_server(tmp, bench, max(ns, default=2), max(cs, default=1))
    wpoints: list[dict] = []
    cpoints: list[dict] = []
    wtext = ctext = ""
    try:
        bench.cm_delete(server, stream, bench.cm_create(server, stream, 2)[0])  # warm-up: the launcher's first start
        if ns and not args.smoke:
            with base.quiet_stderr(tmp / "raw.log"):
                base.make_local_cluster(2).close()  # warm-up of the other side (imports, its first spawn)
        time.sleep(2)
        baseline = idle_window(server, bench, idle)
        log(f"growth: idle server with no cluster: {_brief(baseline)}")
        if ns:
            repeat = 1 if args.smoke else max(1, args.growth_repeat)
            wpoints = workers_curve(tmp, server, stream, bench, ns, idle, local=not args.smoke, repeat=repeat)
            found, wtext = workers_rows(wpoints, bench.row, baseline)
            rows += found
            print(f"\ngrowth: workers curve\n\n{wtext}\n", flush=True)
        per_worker = max([p["clustermgr"].get("per_worker", 0) for p in wpoints] + [GUESS_PER_WORKER["clustermgr"]])
        if cs:
            cpoints = clusters_curve(server, stream, bench, cs, subscribers, samples, idle, per_worker)
            found, ctext = clusters_rows(cpoints, bench.row, subscribers, baseline)
            rows += found
            print(f"\ngrowth: clusters curve\n\n{ctext}\n", flush=True)
    finally:
        stream.close()
        server.stop()
    title = (
        f"growth curves, {started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / GiB:.0f} GiB, load average {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    out = args.out or bench.RESULTS / f"{started:%Y-%m-%d}.json"
    md = out.with_name(out.stem + "-growth.md")
    md.write_text(
        f"{title}\n\n"
        + (f"## workers\n\n{wtext}\n\n" if wtext else "")
        + (f"## clusters\n\n{ctext}\n" if ctext else "")
    )
    if not args.no_chart:
        png = out.with_name(out.stem + "-growth.png")
        chart(wpoints, cpoints, png, title)
        log(f"growth: chart {png}, tables {md}")
    return rows
