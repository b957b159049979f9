"""The benchmark harness: a real Jupyter server with the extension, its push stream, raw-``distributed`` baselines, and the orphan check.

:mod:`bench` measures with these pieces. The Jupyter server is a subprocess on 127.0.0.1 with a
random port and token; the raw baselines run in the benchmark's own process. Every process started
here (server, schedulers, nannies, workers) carries the environment variable
``CLUSTERMGR_BENCH_RUN=<run id>``; :func:`reap_leftovers` finds (and kills) any of them still
there at the end.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import requests
import websocket

REPO = Path(__file__).resolve().parent.parent
MARK = "CLUSTERMGR_BENCH_RUN"
RUN_ID = uuid.uuid4().hex[:12]
MEMORY = "512 MiB"
# under load (2 cores, load average 15) a Jupyter server takes 25-60 s to answer, over 120 s at 25-30
START_TIMEOUT = float(os.environ.get("CLUSTERMGR_BENCH_START_TIMEOUT", "120"))
TIMEOUT = 120.0
FAILURES: list[dict[str, Any]] = []  # clusters that failed to start, retried by create_clusters

now = time.perf_counter


#: How the server's scheduler links' process shows in its command line: its title, or the module's name.
LINK_HOST = ("clustermgr-lab scheduler links", "clustermgr_lab.cluster.link_host")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class BenchError(RuntimeError):
    pass


class ClusterFailed(BenchError):
    def __init__(self, cluster_id: str, error: str | None):
        super().__init__(f"cluster {cluster_id} failed: {error}")
        self.cluster_id, self.error = cluster_id, error


# Clusters that ended `failed` while the benchmark waited for them (retried, and reported).
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

    #: Seconds between two asks whether the server answers (a boot time is measured to this step).
    poll_step = 0.1

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
                raise BenchError(
                    f"the Jupyter server did not answer within {START_TIMEOUT:g} s; log: {self.log_path}\n{self.log_tail()}"
                )
            log(f"server exited with {self.process.returncode} (attempt {attempt + 1}); retrying on another port")
        raise BenchError(f"the Jupyter server did not start; log: {self.log_path}\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = now() + START_TIMEOUT
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
            time.sleep(self.poll_step)
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

    def server_side(self) -> list[int]:
        """The server's process and, while it runs, its scheduler links' process (``LinkHost``): the server's own
        work for its clusters, done in two processes. Every "server CPU" or "server RSS" counts both."""
        pids = [self.process.pid]
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.process.pid).children():
                with contextlib.suppress(psutil.Error):
                    if any(name in " ".join(child.cmdline()) for name in LINK_HOST):
                        pids.append(child.pid)
        return pids

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(requests.RequestException):  # graceful: runs the extension's stop_extension
            self.session.post(self.base + "api/shutdown", timeout=60)
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
        self.bytes = 0  # bytes of the messages read after the snapshot (the growth curves' push cost)
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
                self.bytes += len(raw) if isinstance(raw, bytes) else len(raw.encode())
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
        self,
        predicate: Callable[[dict], bool],
        start: int,
        timeout: float = TIMEOUT,
        what: str = "",
        cluster_id: str | None = None,
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


def create_clusters(
    server: Server, stream: Stream, count: int, workers: int, attempts: int = 3, template: str | None = None
) -> list[dict[str, Any]]:
    """POST ``count`` clusters at once (of ``template``, default the server's) and wait until each runs ``workers``.

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
            body = {"spec": spec(workers), **({"template": template} if template else {})}
            _, cluster = server.call("POST", "clustermgr/api/clusters", body, expect=202)
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


@contextlib.contextmanager
def collector_paused():
    """The benchmark process's own garbage collector off while a block times something, as :mod:`timeit` does.

    The delays are stamped by this process's threads; a full collection of its own objects (19 and 43 ms in a
    small push-timing script, round 13) stops them all at once and would be counted as the server's time.
    Collected once before, so nothing is pending.
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


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
    """GET api/status every 10 ms in a thread; records each request's latency.

    With ``window`` (s), leaving the ``with`` block waits until that long after entering it: two sides
    compared over the same window give their percentiles from the same number of requests (a p99 of 14
    requests is their slowest; of 100, the second slowest).
    """

    def __init__(self, server: Server, interval: float = 0.010, window: float = 0.0):
        self.server, self.interval, self.window = server, interval, window
        self._entered = 0.0
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

    def __enter__(self) -> StatusPoller:
        self._entered = now()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.wait(max(0.0, self._entered + self.window - now()))
        self._stop.set()
        self._thread.join(30)


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


def fmt_time(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"


class CpuLoad:
    """``hogs`` processes that spin on the CPU until the block ends: the loaded machine of the rows that ask for one.

    Entering waits until the 1-minute load average reaches ``load`` (it follows a step of load within about
    a minute and a half), or ``timeout`` s pass: :attr:`reached` says which. The hogs carry this run's mark,
    so :func:`reap_leftovers` would find one left behind.

    Examples
    --------
    >>> with CpuLoad(hogs=3, load=4.0) as loaded:  # doctest: +SKIP
    ...     measure_something()
    ...     print(loaded.load_before, os.getloadavg()[0])
    """

    def __init__(self, hogs: int = 3, load: float = 4.0, timeout: float = 240.0):
        self.hogs, self.load, self.timeout = hogs, load, timeout
        self.reached = False
        self.load_before = 0.0  # the load average when the measuring began
        self._processes: list[subprocess.Popen] = []

    def __enter__(self) -> CpuLoad:
        env = {**os.environ, MARK: RUN_ID}
        for _ in range(self.hogs):
            self._processes.append(
                subprocess.Popen([sys.executable, "-c", "while True: pass"], env=env, stdin=subprocess.DEVNULL)
            )
        deadline = now() + self.timeout
        while os.getloadavg()[0] < self.load and now() < deadline:
            time.sleep(1.0)
        self.load_before = os.getloadavg()[0]
        self.reached = self.load_before >= self.load
        log(f"CPU load: {self.hogs} busy processes, load average {self.load_before:.1f} (asked for {self.load:g})")
        return self

    def __exit__(self, *exc) -> None:
        for process in self._processes:
            process.kill()
        for process in self._processes:
            process.wait(30)
