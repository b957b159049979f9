#!/usr/bin/env python
"""clustermgr-lab benchmarks: the REST API of a real Jupyter server against raw ``distributed``.

Every number is printed next to its raw-``distributed`` equivalent measured in the same run, and
the ratio (clustermgr / raw) is what to compare between runs: absolute times on a shared 2-core
machine move with whatever else runs there, ratios much less. See ``benchmarks/README.md``.

    python benchmarks/run.py [--repeat N] [--quick] [--json out.json]

The Jupyter server is a subprocess on 127.0.0.1 with a random port and token; the raw baselines
run in this process. Every process started here (server, schedulers, nannies, workers) carries
the environment variable ``CLUSTERMGR_BENCH_RUN=<run id>``; at the end the script checks with
psutil that none of them is left, kills any that is, and then exits with an error.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable

import psutil
import requests
import websocket

REPO = Path(__file__).resolve().parent.parent
MARK = "CLUSTERMGR_BENCH_RUN"
RUN_ID = uuid.uuid4().hex[:12]
MEMORY = "512 MiB"
PAYLOAD = 256 * 1024  # bytes per future in the scale-down benchmark
# 20 futures over 4 workers, the newest worker holding most of them (see README).
PLACEMENT = (3, 3, 3, 11)
TIMEOUT = 120.0

now = time.perf_counter


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class BenchError(RuntimeError):
    pass


class ClusterFailed(BenchError):
    def __init__(self, cluster_id: str, error: str | None):
        super().__init__(f"cluster {cluster_id} failed: {error}")
        self.cluster_id, self.error = cluster_id, error


# Clusters that ended `failed` while the benchmark waited for them (retried, and reported).
FAILURES: list[dict[str, Any]] = []


# -- statistics --------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


# -- the Jupyter server ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOOP_DEBUG = """
# Written by benchmarks/run.py --loop-debug: asyncio debug mode in the Jupyter server process only
# (not in the schedulers and workers it starts), logging every callback that holds the loop > 5 ms.
import os
if os.environ.pop("CLUSTERMGR_BENCH_LOOP_DEBUG", None):
    import asyncio.base_events, logging
    _init = asyncio.base_events.BaseEventLoop.__init__
    def __init__(self, *args, **kwargs):
        _init(self, *args, **kwargs)
        self.set_debug(True)
        self.slow_callback_duration = 0.005
    asyncio.base_events.BaseEventLoop.__init__ = __init__
    logging.getLogger("asyncio").addHandler(logging.StreamHandler())
    logging.getLogger("asyncio").setLevel(logging.WARNING)
"""


class Server:
    """``python -m jupyter_server`` with the extension, on 127.0.0.1, in a private Jupyter home."""

    def __init__(
        self,
        tmp: Path,
        loop_debug: bool = False,
        *,
        python: str = sys.executable,
        config: dict | None = None,
        env: dict[str, str] | None = None,
        ready_path: str = "clustermgr/api/templates",
    ):
        self.tmp = tmp
        self.loop_debug = loop_debug
        self.python, self.extra_env, self.ready_path = python, env or {}, ready_path
        self.config = config or {
            "ServerApp": {"jpserver_extensions": {"clustermgr_lab": True, "jupyter_server_proxy": False}},
            "ClusterManager": {"workdir": str(tmp / "clustermgr"), "on_shutdown": "stop"},
        }
        self.token = secrets.token_hex(24)
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.log_path = tmp / "jupyter_server.log"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {self.token}"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        config_dir = self.tmp / "jupyter-config"
        for name in ("jupyter-config", "jupyter-data", "jupyter-runtime", "root"):
            (self.tmp / name).mkdir(parents=True, exist_ok=True)
        # A config file rather than a command-line dict: one place for both traits.
        (config_dir / "jupyter_server_config.json").write_text(json.dumps(self.config))
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "JUPYTER_CONFIG_DIR": str(config_dir),
            "JUPYTER_DATA_DIR": str(self.tmp / "jupyter-data"),
            "JUPYTER_RUNTIME_DIR": str(self.tmp / "jupyter-runtime"),
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }
        if self.loop_debug:
            site = self.tmp / "loop-debug"
            site.mkdir(exist_ok=True)
            (site / "sitecustomize.py").write_text(LOOP_DEBUG)
            env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
            env["CLUSTERMGR_BENCH_LOOP_DEBUG"] = "1"
        for attempt in range(3):
            self.port = free_port()
            command = [
                self.python, "-m", "jupyter_server",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                "--ServerApp.open_browser=False",
                "--allow-root",
                f"--ServerApp.root_dir={self.tmp / 'root'}",
            ]  # fmt: skip
            with open(self.log_path, "ab") as out:
                self.process = subprocess.Popen(
                    command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
                )
            if self._wait_ready():
                return
            if self.process.poll() is None:
                raise BenchError(f"the Jupyter server did not answer within 120 s; log: {self.log_path}\n{self.log_tail()}")
            log(f"server exited with {self.process.returncode} (attempt {attempt + 1}); retrying on another port")
        raise BenchError(f"the Jupyter server did not start; log: {self.log_path}\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = now() + 120  # under load (2 cores, load average 15) a Jupyter server takes 25-60 s to answer
        while now() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if self.session.get(self.base + "api/status", timeout=2).status_code == 200:
                    response = self.session.get(self.base + self.ready_path, timeout=5)
                    if response.status_code != 200:
                        raise BenchError(f"the extension does not answer: {response.status_code} {response.text[:300]}")
                    return True
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def call(self, method: str, path: str, body: Any = None, expect: int | None = None) -> tuple[int, Any]:
        response = self.session.request(
            method, self.base + path, data=None if body is None else json.dumps(body), timeout=30
        )
        data = response.json() if response.content else None
        if expect is not None and response.status_code != expect:
            raise BenchError(f"{method} {path}: {response.status_code} {data}")
        return response.status_code, data

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:  # graceful: runs the extension's stop_extension (close_all)
            self.session.post(self.base + "api/shutdown", timeout=60)
        except requests.RequestException:
            pass
        for sig, wait in ((None, 60), (signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            if sig is not None:
                log(f"server still running; sending {sig.name}")
                self.process.send_signal(sig)
            try:
                self.process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


# -- the WebSocket stream ----------------------------------------------------------------------


class Stream:
    """Reads ``clustermgr/api/stream`` in a thread and timestamps every message on arrival."""

    def __init__(self, server: Server):
        url = f"ws://127.0.0.1:{server.port}/clustermgr/api/stream?token={server.token}"
        self.ws = websocket.create_connection(url, timeout=TIMEOUT)
        self.messages: list[tuple[float, dict]] = []
        self.cond = threading.Condition()
        self.seq_gaps = 0
        self.closed = False
        first = json.loads(self.ws.recv())
        if first.get("type") != "snapshot":
            raise BenchError(f"the stream did not start with a snapshot: {first}")
        self.last_seq = first["seq"]
        self.thread = threading.Thread(target=self._read, name="stream", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        self.ws.settimeout(None)
        while True:
            try:
                raw = self.ws.recv()
            except Exception:
                break
            t = now()
            if not raw:
                break
            message = json.loads(raw)
            with self.cond:
                if message.get("seq") != self.last_seq + 1:
                    self.seq_gaps += 1
                self.last_seq = message.get("seq", self.last_seq)
                self.messages.append((t, message))
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def mark(self) -> int:
        with self.cond:
            return len(self.messages)

    def wait(
        self, predicate: Callable[[dict], bool], start: int, timeout: float = TIMEOUT, what: str = "", cluster_id: str | None = None
    ) -> tuple[float, dict, int]:
        """First message at index >= start matching; returns (arrival time, message, index).

        Raises :class:`ClusterFailed` at once if ``cluster_id`` turns ``failed`` first.
        """
        deadline = now() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.messages):
                    t, message = self.messages[i]
                    if predicate(message):
                        return t, message, i
                    c = message.get("cluster") or {}
                    if cluster_id is not None and c.get("id") == cluster_id and c.get("status") == "failed":
                        raise ClusterFailed(cluster_id, c.get("error"))
                    i += 1
                remaining = deadline - now()
                if remaining <= 0 or self.closed:
                    last = self.messages[-1][1] if self.messages else None
                    raise BenchError(f"stream: timed out waiting for {what}; last message: {json.dumps(last)[:800]}")
                self.cond.wait(remaining)

    def between(self, start: int, end: int, cluster_id: str) -> list[dict]:
        with self.cond:
            return [m for _, m in self.messages[start : end + 1] if _about(m, cluster_id)]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()
        self.thread.join(5)


def _about(message: dict, cluster_id: str) -> bool:
    return message.get("id") == cluster_id or (message.get("cluster") or {}).get("id") == cluster_id


def settled(cluster_id: str, n: int) -> Callable[[dict], bool]:
    """The cluster runs exactly n workers, none pending or stopping (its status is back to running)."""

    def predicate(message: dict) -> bool:
        c = message.get("cluster")
        if message.get("type") not in ("added", "changed") or not c or c["id"] != cluster_id:
            return False
        w = c["workers"]
        return c["status"] == "running" and w["running"] == n and w["requested"] == n and not w.get("stopping")

    return predicate


def planned(cluster_id: str, n: int) -> Callable[[dict], bool]:
    def predicate(message: dict) -> bool:
        c = message.get("cluster")
        return bool(c) and c["id"] == cluster_id and sum(g["count"] for g in c["spec"]["groups"]) == n

    return predicate


def removed(cluster_id: str) -> Callable[[dict], bool]:
    return lambda m: m.get("type") == "removed" and m.get("id") == cluster_id


def spec(workers: int) -> dict:
    return {"groups": [{"name": "default", "count": workers, "threads": 1, "memory": MEMORY}]}


def create_clusters(server: Server, stream: Stream, count: int, workers: int, attempts: int = 3) -> list[dict[str, Any]]:
    """POST ``count`` clusters at once and wait until each runs ``workers`` workers.

    A cluster that turns ``failed`` is recorded in FAILURES, deleted and created again (so a flaky
    start shows up in the report instead of aborting the run). Returns, per cluster: its id, the
    POST time, the arrival times of the first message with a scheduler address and of the
    settled message, and the stream indexes around it.
    """
    done: list[dict[str, Any]] = []
    todo = count
    for attempt in range(attempts):
        m = stream.mark()
        posted = []
        for _ in range(todo):
            t0 = now()
            _, cluster = server.call("POST", "clustermgr/api/clusters", {"spec": spec(workers)}, expect=202)
            posted.append((cluster["id"], t0))
        failed = []
        for cid, t0 in posted:
            try:
                t_sched, _, _ = stream.wait(
                    lambda msg, cid=cid: bool((msg.get("cluster") or {}).get("id") == cid and msg["cluster"].get("scheduler_address")),
                    m, what="scheduler address", cluster_id=cid,
                )  # fmt: skip
                t1, _, i = stream.wait(settled(cid, workers), m, what=f"{workers} workers running", cluster_id=cid)
                done.append({"id": cid, "t0": t0, "t_sched": t_sched, "t1": t1, "start": m, "end": i})
            except ClusterFailed as exc:
                log(f"cluster {cid} failed to start (attempt {attempt + 1}): {exc.error}")
                FAILURES.append({"id": cid, "error": exc.error, "after_s": round(now() - t0, 3)})
                failed.append(cid)
        for cid in failed:
            m2 = stream.mark()
            server.call("DELETE", f"clustermgr/api/clusters/{cid}")
            stream.wait(removed(cid), m2, what="failed cluster removed")
        todo = len(failed)
        if not todo:
            return done
    raise BenchError(f"{todo} cluster(s) failed to start {attempts} times; see FAILURES")


def delete_clusters(server: Server, stream: Stream, ids: list[str]) -> None:
    m = stream.mark()
    for cid in ids:
        server.call("DELETE", f"clustermgr/api/clusters/{cid}")
    for cid in ids:
        stream.wait(removed(cid), m, what="cluster removed")


# -- the data a client holds during scale-down ---------------------------------------------------


def natural(name: Any) -> int:
    return int(str(name).rsplit("-", 1)[-1])


def by_age(client, cluster=None) -> list[str]:
    """Worker addresses, oldest first: by name (clustermgr ``default-N``, LocalCluster ``N``), or,
    for SubprocessCluster whose workers are named by address, by the order of ``cluster.workers``
    (the nanny process of each worker is the ``dask spec`` process SpecCluster started; SpecCluster.scale
    drops the highest spec names first)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    try:
        return sorted(workers, key=lambda a: natural(workers[a]["name"]))
    except ValueError:
        if cluster is None:
            raise
    order = {w.process.pid: natural(key) for key, w in cluster.workers.items() if getattr(w, "process", None)}
    pids = client.run(os.getpid)
    return sorted(workers, key=lambda a: order[psutil.Process(pids[a]).ppid()])


def place_data(client, cluster=None) -> tuple[list, dict[str, str]]:
    """Scatter 20 futures over the 4 workers, the newest worker holding 11 of them."""
    by_age_ = by_age(client, cluster)
    if len(by_age_) != len(PLACEMENT):
        raise BenchError(f"expected {len(PLACEMENT)} workers, found {len(by_age_)}")
    futures = []
    for address, count in zip(by_age_, PLACEMENT):
        payloads = [os.urandom(PAYLOAD) for _ in range(count)]
        futures += client.scatter(payloads, workers=[address], hash=False)
    holders = {k: list(v)[0] for k, v in client.who_has(futures).items()}
    if len(set(holders.values())) != len(PLACEMENT):
        raise BenchError(f"the data did not spread over the workers: {holders}")
    return futures, holders


def check_data(client, futures: list, before: dict[str, str], expected: list[bytes]) -> dict[str, Any]:
    """How many futures survived with the same bytes, how many keys moved, was the big holder kept.

    The data is scattered, so it cannot be recomputed: a future whose only copy was on a closed
    worker ends ``cancelled`` ("already forgotten") instead of ``finished``.
    """
    deadline = now() + 30
    while any(f.status == "pending" for f in futures) and now() < deadline:
        time.sleep(0.05)
    alive = []
    for i, future in enumerate(futures):
        try:
            if client.gather(future) == expected[i]:
                alive.append(i)
        except Exception:  # cancelled: "already forgotten", its only copy was closed
            pass
    intact = len(alive)
    after = {k: set(v) for k, v in client.who_has([futures[i] for i in alive]).items()}
    moved = sum(1 for k, holder in before.items() if k in after and holder not in after[k])
    counts: dict[str, int] = {}
    for holder in before.values():
        counts[holder] = counts.get(holder, 0) + 1
    survivors = set().union(*after.values()) if after else set()
    return {
        "kept": intact,
        "lost": len(futures) - intact,
        "moved": moved,
        "kept_biggest_holder": max(counts, key=counts.get) in survivors,
    }


# -- one run of the cluster lifecycle, through clustermgr ----------------------------------------


def clustermgr_flow(server: Server, stream: Stream) -> dict[str, Any]:
    from distributed import Client

    out: dict[str, Any] = {}
    server_proc = psutil.Process(server.process.pid)
    cpu0 = sum(server_proc.cpu_times()[:2])

    c = create_clusters(server, stream, 1, 2)[0]
    cid = c["id"]
    out["create"] = c["t1"] - c["t0"]
    out["create_scheduler"] = c["t_sched"] - c["t0"]
    out["create_messages"] = len(stream.between(c["start"], c["end"], cid))

    # control for the push latency: a change that wakes nothing but the stream (a rename)
    m = stream.mark()
    name = f"bench {uuid.uuid4().hex[:6]}"
    t0 = now()
    server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"name": name}, expect=200)
    t_resp = now()
    t_push, _, _ = stream.wait(lambda msg: (msg.get("cluster") or {}).get("name") == name, m, what="rename", cluster_id=cid)
    out["rename_push_after_response"] = t_push - t_resp

    out["patch_rtt"], out["push_after_response"], out["push_after_request"] = [], [], []

    def scale(workers: int, key: str) -> dict:
        """PATCH a scale and time it until settled (returns that stream message); the push
        latency is the first stream message showing the new plan."""
        m = stream.mark()
        t0 = now()
        server.call("PATCH", f"clustermgr/api/clusters/{cid}", {"scale": {"workers": workers}}, expect=200)
        t_resp = now()
        t_plan, _, _ = stream.wait(planned(cid, workers), m, what=f"plan of {workers}", cluster_id=cid)
        t1, message, i = stream.wait(settled(cid, workers), m, what=f"{workers} workers running", cluster_id=cid)
        out[key] = t1 - t0
        out["patch_rtt"].append(t_resp - t0)
        out["push_after_response"].append(t_plan - t_resp)
        out["push_after_request"].append(t_plan - t0)
        out[f"{key}_messages"] = len(stream.between(m, i, cid))
        return message

    address = scale(4, "scale_up")["cluster"]["scheduler_address"]
    client = Client(address, set_as_default=False, timeout=30)
    try:
        futures, before = place_data(client)
        expected = client.gather(futures)
        scale(1, "scale_down")
        out["scale_down_data"] = check_data(client, futures, before, expected)
        del futures, expected
    finally:
        client.close()

    m = stream.mark()
    t0 = now()
    server.call("DELETE", f"clustermgr/api/clusters/{cid}", expect=202)
    t1, _, _ = stream.wait(removed(cid), m, what="cluster removed")
    out["delete"] = t1 - t0
    _, listing = server.call("GET", "clustermgr/api/clusters", expect=200)
    if any(c["id"] == cid for c in listing["clusters"]):
        raise BenchError("a removed cluster is still listed")
    out["server_cpu_s"] = sum(server_proc.cpu_times()[:2]) - cpu0
    return out


# -- the same lifecycle with raw distributed -----------------------------------------------------


def _observed(cluster) -> int:
    return len(cluster.scheduler_info.get("workers", {}))


def wait_raw(cluster, n: int, what: str) -> float:
    """Poll (1 ms) until the scheduler reports n workers and the cluster object has n workers.

    ``cluster.scheduler_info`` is kept current by the scheduler's pushed worker-status stream, like
    clustermgr's; ``Client.wait_for_workers`` would add up to 100 ms of polling granularity.
    """
    deadline = now() + TIMEOUT
    while not (_observed(cluster) == n and len(cluster.workers) == n):
        if now() > deadline:
            raise BenchError(f"raw {what}: timed out ({_observed(cluster)} workers observed)")
        time.sleep(0.001)
    return now()


def make_local_cluster(n: int):
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        memory_limit="512MiB",
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )


def make_subprocess_cluster(n: int, tmp: Path):
    from distributed.deploy.subprocess import SubprocessCluster

    return SubprocessCluster(
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        n_workers=n,
        threads_per_worker=1,
        worker_kwargs={"memory_limit": "512MiB"},
        scheduler_kwargs={"scheduler_file": str(tmp / f"subprocess-scheduler-{uuid.uuid4().hex}.json")},
    )


def raw_flow(make: Callable[[int], Any]) -> dict[str, Any]:
    from distributed import Client

    out: dict[str, Any] = {}
    t0 = now()
    cluster = make(2)
    try:
        out["create"] = wait_raw(cluster, 2, "create") - t0
        client = Client(cluster, set_as_default=False)
        try:
            client.wait_for_workers(2, timeout=30)  # as a user would; already satisfied

            t0 = now()
            cluster.scale(4)
            out["scale_up"] = wait_raw(cluster, 4, "scale up") - t0
            client.wait_for_workers(4, timeout=30)

            futures, before = place_data(client, cluster)
            expected = client.gather(futures)
            t0 = now()
            cluster.scale(1)  # SpecCluster.scale: drops the newest worker specs, asks nobody
            out["scale_down"] = wait_raw(cluster, 1, "scale down") - t0
            out["scale_down_data"] = check_data(client, futures, before, expected)
            del futures, expected
        finally:
            client.close()
        t0 = now()
        cluster.close()
        out["delete"] = now() - t0
    except BaseException:
        with contextlib.suppress(Exception):
            cluster.close(timeout=30)
        raise
    return out


@contextlib.contextmanager
def quiet_stderr(path: Path):
    """Send fd 2 (ours and our children's: distributed's worker logs) to a file for a while."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


# -- server responsiveness -----------------------------------------------------------------------


class StatusPoller:
    """GET api/status every 10 ms in a thread; records each request's latency."""

    def __init__(self, server: Server, interval: float = 0.010):
        self.server, self.interval = server, interval
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"token {server.token}"
        self._thread = threading.Thread(target=self._run, name="status-poller", daemon=True)

    def _run(self) -> None:
        url = self.server.base + "api/status"
        self._session.get(url, timeout=30)  # open the keep-alive connection first
        while not self._stop.is_set():
            t0 = now()
            self._session.get(url, timeout=30).raise_for_status()
            self.latencies.append(now() - t0)
            self._stop.wait(self.interval)

    def __enter__(self) -> "StatusPoller":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)


RAW_CREATE = """
import sys
from distributed import LocalCluster
cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="512MiB", processes=True,
                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
cluster.wait_for_workers(2)
print("ready", flush=True)
sys.stdin.read()
cluster.close()
"""


def _polled_raw_create(server: Server, raw_log: Path) -> tuple[StatusPoller, float]:
    """Poll the (idle) server while a LocalCluster starts in another process: the same CPU load, no clustermgr."""
    with open(raw_log, "ab") as err, StatusPoller(server) as poller:
        t0 = now()
        process = subprocess.Popen(
            [sys.executable, "-c", RAW_CREATE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
        line = process.stdout.readline()
        t1 = now()
    process.stdin.close()
    process.wait(60)
    if line.strip() != b"ready":
        raise BenchError(f"the LocalCluster control process failed; see {raw_log}")
    return poller, t1 - t0


def _polled_clustermgr_create(server: Server, stream: Stream) -> tuple[StatusPoller, float]:
    with StatusPoller(server) as poller:
        c = create_clusters(server, stream, 1, 2)[0]
    delete_clusters(server, stream, [c["id"]])
    return poller, c["t1"] - c["t0"]


def responsiveness(server: Server, stream: Stream, idle_seconds: float, raw_log: Path, rep: int) -> dict[str, Any]:
    """Latency of Jupyter's own GET api/status, polled every 10 ms: idle, while a LocalCluster
    starts in another process (CPU contention only), and while clustermgr creates a cluster."""
    with StatusPoller(server) as idle:
        time.sleep(idle_seconds)
    if rep % 2:
        busy, t_cm = _polled_clustermgr_create(server, stream)
        control, t_raw = _polled_raw_create(server, raw_log)
    else:
        control, t_raw = _polled_raw_create(server, raw_log)
        busy, t_cm = _polled_clustermgr_create(server, stream)
    out: dict[str, Any] = {}
    for name, poller in (("idle", idle), ("raw", control), ("busy", busy)):
        out[f"{name}_max"] = max(poller.latencies)
        out[f"{name}_p99"] = percentile(poller.latencies, 99)
        out[f"{name}_n"] = len(poller.latencies)
    out["create_while_polled"] = t_cm
    out["raw_create_while_polled"] = t_raw
    return out


def api_latency(server: Server, stream: Stream, samples: int, blocks: int, idle_seconds: float) -> dict[str, Any]:
    """p50/p99 of GET clustermgr/api/clusters with 4 clusters vs GET api/status, interleaved."""
    ids = [c["id"] for c in create_clusters(server, stream, 4, 1)]
    try:
        server_proc = psutil.Process(server.process.pid)
        time.sleep(0.5)
        cpu0, t0 = sum(server_proc.cpu_times()[:2]), now()
        time.sleep(idle_seconds)
        idle_cpu = (sum(server_proc.cpu_times()[:2]) - cpu0) / (now() - t0)

        session = requests.Session()
        session.headers["Authorization"] = f"token {server.token}"
        urls = {"clusters": server.base + "clustermgr/api/clusters", "status": server.base + "api/status"}
        for url in urls.values():  # warm up
            for _ in range(20):
                session.get(url, timeout=30).raise_for_status()
        lat: dict[str, list[list[float]]] = {k: [] for k in urls}
        size = len(session.get(urls["clusters"], timeout=30).content)
        for _ in range(blocks):
            block = {k: [] for k in urls}
            for _ in range(samples // blocks):
                for key, url in urls.items():
                    t = now()
                    response = session.get(url, timeout=30)
                    block[key].append(now() - t)
                    response.raise_for_status()
            for key in urls:
                lat[key].append(block[key])
        if len(session.get(urls["clusters"], timeout=30).json()["clusters"]) != 4:
            raise BenchError("expected 4 clusters in the list")
    finally:
        delete_clusters(server, stream, ids)
    flat = {k: [x for b in v for x in b] for k, v in lat.items()}
    return {
        "clusters_p50": percentile(flat["clusters"], 50),
        "clusters_p99": percentile(flat["clusters"], 99),
        "status_p50": percentile(flat["status"], 50),
        "status_p99": percentile(flat["status"], 99),
        "clusters_block_p50": [percentile(b, 50) for b in lat["clusters"]],
        "status_block_p50": [percentile(b, 50) for b in lat["status"]],
        "samples_each": len(flat["clusters"]),
        "list_bytes": size,
        "server_idle_cpu_4_clusters": idle_cpu,
    }


# -- leftovers ---------------------------------------------------------------------------------


def marked_processes() -> list[psutil.Process]:
    """Live processes (other than this one) whose environment carries this run's mark."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARK) != RUN_ID or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.ppid() == os.getpid() and "multiprocessing.resource_tracker" in " ".join(proc.cmdline()):
                continue  # LocalCluster's helper; it reads a pipe from this process and ends with it
            found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def reap_leftovers(grace: float = 10.0) -> list[str]:
    """Wait a little for our processes to end; kill and name any that does not."""
    deadline = now() + grace
    left = marked_processes()
    while left and now() < deadline:
        time.sleep(0.2)
        left = marked_processes()
    described = []
    for proc in left:
        with contextlib.suppress(psutil.Error):
            described.append(f"{proc.pid} (parent {proc.ppid()}, in {proc.cwd()}): {' '.join(proc.cmdline())[:160]}")
            proc.kill()
    return described


def slow_callbacks(log_path: Path) -> dict[str, list[float]]:
    """``Executing <...> took 0.012 seconds`` lines of asyncio debug mode, grouped by callback."""
    import re

    pattern = re.compile(r"Executing (<.*?>) took ([0-9.]+) seconds")
    found: dict[str, list[float]] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        match = pattern.search(line)
        if match:
            where = re.sub(r" at 0x[0-9a-f]+| cb=\[.*?\]| wait_for=<.*?>>?| name='Task-\d+'| created at \S+", "", match.group(1))
            where = re.sub(r"Task (pending|finished|cancelled)", "Task", where)
            found.setdefault(where[:220], []).append(float(match.group(2)))
    return found


# -- report --------------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    s = summary(values)
    if s["n"] == 1:
        return fmt_time(s["median"])
    return f"{fmt_time(s['median'])} [{fmt_time(s['min'])}–{fmt_time(s['max'])}]"


def ratio(a: list[float], b: list[float]) -> str:
    if not a or not b:
        return "-"
    return f"{statistics.median(a) / statistics.median(b):.2f}×"


def build_rows(results: dict[str, Any]) -> list[list[str]]:
    cm, lc, sp = results["clustermgr"], results["local_cluster"], results["subprocess_cluster"]

    def col(flows: list[dict], key: str) -> list[float]:
        return [f[key] for f in flows if key in f]

    rows = [["benchmark", "clustermgr", "LocalCluster", "ratio", "SubprocessCluster", "ratio"]]
    labels = {
        "create": "create → 2 workers running",
        "scale_up": "scale up 2 → 4",
        "scale_down": "scale down 4 → 1, client holds 20 futures (kept? see notes)",
        "delete": "delete / close",
    }
    for key, label in labels.items():
        a, b, c = col(cm, key), col(lc, key), col(sp, key)
        rows.append([label, cell(a), cell(b), ratio(a, b), cell(c), ratio(a, c)])
    for name, flows in (("clustermgr", cm), ("LocalCluster", lc), ("SubprocessCluster", sp)):
        data = [f["scale_down_data"] for f in flows if "scale_down_data" in f]
        if data:
            kept = ", ".join(f"{d['kept']}/20" for d in data)
            moved = ", ".join(str(d["moved"]) for d in data)
            biggest = sum(d["kept_biggest_holder"] for d in data)
            results.setdefault("notes", []).append(
                f"scale-down, {name}: futures intact after 4 → 1: {kept}; keys moved to a survivor: {moved}; "
                f"kept the worker holding 11 of them in {biggest}/{len(data)} runs"
            )

    lat = results.get("latency")
    if lat:
        rows.append(
            ["GET clustermgr/api/clusters (4 clusters) p50 vs GET api/status p50", fmt_time(lat["clusters_p50"]),
             fmt_time(lat["status_p50"]), f"{lat['clusters_p50'] / lat['status_p50']:.2f}×", "", ""]
        )  # fmt: skip
        rows.append(
            ["  … p99 vs p99", fmt_time(lat["clusters_p99"]), fmt_time(lat["status_p99"]),
             f"{lat['clusters_p99'] / lat['status_p99']:.2f}×", "", ""]
        )  # fmt: skip
    resp = results["responsiveness"]
    if resp:
        for stat, label in (("max", "worst"), ("p99", "p99")):
            busy, raw, idle = ([r[f"{k}_{stat}"] for r in resp] for k in ("busy", "raw", "idle"))
            rows.append([f"{label} GET api/status during create vs during LocalCluster start", cell(busy), cell(raw), ratio(busy, raw), "", ""])
            rows.append([f"  … vs idle server", "", cell(idle), ratio(busy, idle), "", ""])
    push = [x for f in cm for x in f.get("push_after_response", [])]
    push_req = [x for f in cm for x in f.get("push_after_request", [])]
    rtt = [x for f in cm for x in f.get("patch_rtt", [])]
    rename = [f["rename_push_after_response"] for f in cm if "rename_push_after_response" in f]
    if push:
        rows.append(["push: PATCH scale response → stream shows plan (vs PATCH name)", cell(push), cell(rename), ratio(push, rename), "", ""])
        rows.append(["  … PATCH sent → stream shows plan (vs PATCH round trip)", cell(push_req), cell(rtt), ratio(push_req, rtt), "", ""])
    return rows


def print_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    text = "\n".join(lines)
    print(text)
    return text


# -- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each benchmark (default 3)")
    parser.add_argument("--quick", action="store_true", help="one repetition, fewer samples, no SubprocessCluster")
    parser.add_argument("--json", metavar="PATH", help="write every sample and the summary to this file")
    parser.add_argument(
        "--loop-debug",
        action="store_true",
        help="diagnosis, not measurement: asyncio debug mode in the server; lists callbacks that block its loop > 5 ms",
    )
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder (server and cluster logs)")
    args = parser.parse_args()
    repeat = 1 if args.quick else max(1, args.repeat)
    samples = 120 if args.quick else 300
    idle_seconds = 1.0 if args.quick else 1.5
    with_subprocess = not args.quick

    os.environ[MARK] = RUN_ID  # inherited by every process started from here on
    tmp = Path(tempfile.mkdtemp(prefix="clustermgr-bench-"))
    started = _dt.datetime.now().astimezone()
    load_before = os.getloadavg()
    results: dict[str, Any] = {
        "date": started.isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
                    "python": platform.python_version(), "platform": platform.platform()},
        "repeat": repeat,
        "quick": args.quick,
        "clustermgr": [],
        "local_cluster": [],
        "subprocess_cluster": [],
        "responsiveness": [],
        "latency": None,
    }  # fmt: skip
    import distributed
    import jupyter_server

    results["versions"] = {"distributed": distributed.__version__, "jupyter_server": jupyter_server.__version__}
    log(f"run {RUN_ID}: repeat={repeat}, tmp={tmp}, load average {load_before[0]:.2f}")

    server = Server(tmp, loop_debug=args.loop_debug)
    stream = None
    failed = None
    t_start = now()
    raw_log = tmp / "raw-distributed.log"
    try:
        server.start()
        log(f"Jupyter server on {server.base} (pid {server.process.pid})")
        stream = Stream(server)
        flows: list[tuple[str, Callable[[], dict]]] = [
            ("clustermgr", lambda: clustermgr_flow(server, stream)),
            ("local_cluster", lambda: raw_flow(make_local_cluster)),
        ]
        if with_subprocess:
            flows.append(("subprocess_cluster", lambda: raw_flow(lambda n: make_subprocess_cluster(n, tmp))))
        # Warm-up, not measured: the first start of each kind pays for cold imports and disk caches.
        t = now()
        delete_clusters(server, stream, [c["id"] for c in create_clusters(server, stream, 1, 2)])
        with quiet_stderr(raw_log):
            make_local_cluster(2).close()
        log(f"warm-up done ({now() - t:.1f} s)")
        for rep in range(repeat):
            # Rotate the order so that neither side always runs first (cold caches, other load).
            order = flows[rep % len(flows) :] + flows[: rep % len(flows)]
            for name, flow in order:
                t = now()
                if name == "clustermgr":
                    result = flow()
                else:
                    with quiet_stderr(raw_log):
                        result = flow()
                results[name].append(result)
                log(f"rep {rep + 1}/{repeat} {name}: create {fmt_time(result['create'])}, "
                    f"up {fmt_time(result['scale_up'])}, down {fmt_time(result['scale_down'])}, "
                    f"delete {fmt_time(result['delete'])} ({now() - t:.1f} s)")  # fmt: skip
            r = responsiveness(server, stream, idle_seconds, raw_log, rep)
            results["responsiveness"].append(r)
            log(f"rep {rep + 1}/{repeat} responsiveness: worst GET api/status idle {fmt_time(r['idle_max'])}, "
                f"during LocalCluster start {fmt_time(r['raw_max'])}, during clustermgr create {fmt_time(r['busy_max'])}")  # fmt: skip
        results["latency"] = api_latency(server, stream, samples, repeat if repeat > 1 else 3, idle_seconds)
        log("api latency: done")
        results["stream_seq_gaps"] = stream.seq_gaps
    except BaseException as exc:
        failed = exc
        log(f"FAILED: {exc!r}")
        traceback.print_exc(file=sys.stdout)
        log(f"server log tail:\n{server.log_tail()}")
    finally:
        if stream is not None:
            stream.close()
        server.stop()
        leftovers = reap_leftovers()
    results["elapsed_s"] = round(now() - t_start, 1)
    results["load_average"] = {"before": load_before, "after": os.getloadavg()}
    results["leftover_processes"] = leftovers
    results["cluster_start_failures"] = FAILURES

    if failed is None:
        print()
        print(f"clustermgr-lab benchmarks, {results['date']}, {os.cpu_count()} cores, repeat={repeat}; "
              f"median [min–max]; ratio = clustermgr / raw (medians)")  # fmt: skip
        results["table"] = print_table(build_rows(results))
        for note in results.get("notes", []):
            print("- " + note)
        lat = results["latency"]
        print(f"- GET clustermgr/api/clusters: {lat['list_bytes']} bytes for 4 clusters; per-block p50 "
              f"{', '.join(fmt_time(x) for x in lat['clusters_block_p50'])} (api/status "
              f"{', '.join(fmt_time(x) for x in lat['status_block_p50'])}); {lat['samples_each']} samples each")  # fmt: skip
        print(f"- Jupyter server CPU while idle with 4 clusters: {lat['server_idle_cpu_4_clusters'] * 100:.1f}% of a core")
        msgs = {k: statistics.median(f[f"{k}_messages"] for f in results["clustermgr"]) for k in ("create", "scale_up", "scale_down")}
        print(f"- stream messages per operation (median): {msgs}; seq gaps: {results.get('stream_seq_gaps')}")
        sched = [f["create_scheduler"] for f in results["clustermgr"]]
        create = [f["create"] for f in results["clustermgr"]]
        print(f"- clustermgr create: scheduler address known after {cell(sched)}, workers then took "
              f"{fmt_time(statistics.median(create) - statistics.median(sched))} more (medians)")
        cpu = [f["server_cpu_s"] for f in results["clustermgr"]]
        print(f"- Jupyter server CPU per clustermgr lifecycle (create, up, down, delete): {cell(cpu)}")
    print(f"- load average before {load_before[0]:.2f}, after {results['load_average']['after'][0]:.2f}; "
          f"total {results['elapsed_s']} s")  # fmt: skip
    if FAILURES:
        print(f"- CLUSTERS THAT FAILED TO START (retried): {len(FAILURES)}: "
              + "; ".join(f"{f['id']} after {f['after_s']} s: {f['error']}" for f in FAILURES))
    else:
        print("- no cluster failed to start")
    if args.loop_debug:
        slow = slow_callbacks(server.log_path)
        print(f"- loop debug: {sum(len(v) for v in slow.values())} callbacks held the server's event loop > 5 ms "
              "(debug mode itself slows everything; the timings above are not comparable):")  # fmt: skip
        for where, times in sorted(slow.items(), key=lambda kv: -max(kv[1]))[:15]:
            print(f"    {len(times):3d}× max {fmt_time(max(times))}  {where}")
    if leftovers:
        print(f"LEFTOVER PROCESSES (killed now): {leftovers}")
    else:
        print("- no process of this run is left (psutil scan of the run's environment mark)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        print(f"- samples written to {args.json}")
    if args.keep_tmp or failed is not None:
        print(f"- logs kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    if failed is not None:
        if isinstance(failed, KeyboardInterrupt):
            return 130
        return 1
    return 1 if leftovers else 0


if __name__ == "__main__":
    sys.exit(main())
