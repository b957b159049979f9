"""Given a real warm launcher process and misbehaving clients, then it answers or drops bad input, bounds each client,
survives running out of file descriptors, serves only its own user from a folder only its user can write, and a
launcher that dies is replaced at once (its forked processes do not hold its lock)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from clustermgr_lab.backends.base import BackendContext
from clustermgr_lab.backends.local.backend import LocalBackend
from clustermgr_lab.backends.local.launcher import WarmLauncher

from .helpers import alive, subprocess_env

NOBODY = 65534


def start_launcher(socket_path: Path, log: Path, max_fds: int | None = None, preload: str = "") -> subprocess.Popen:
    """A launcher on ``socket_path`` that preloads ``preload`` (by default nothing: fast to start)."""

    def limit() -> None:
        if max_fds is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max_fds, max_fds))

    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "clustermgr_lab.backends.local.forkserver", str(socket_path), "--idle-timeout", "30", "--preload", preload],
            env=subprocess_env(PYTHONUNBUFFERED="1"), stdin=subprocess.DEVNULL, stdout=out, stderr=out, preexec_fn=limit,
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while not socket_path.exists():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return process


@pytest.fixture
def launcher(tmp_path):
    processes = []

    def start(max_fds: int | None = None) -> tuple[subprocess.Popen, Path]:
        socket_path = tmp_path / "l.sock"
        process = start_launcher(socket_path, tmp_path / "launcher.log", max_fds)
        processes.append(process)
        return process, socket_path

    yield start
    for process in processes:
        process.kill()
        process.wait()


def connect(socket_path: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(str(socket_path))
    return client


def replies(client: socket.socket, n: int) -> list[dict]:
    data = b""
    while data.count(b"\n") < n:
        chunk = client.recv(1 << 16)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return [json.loads(line) for line in data.splitlines()[:n]]


def info(socket_path: Path) -> dict:
    with connect(socket_path) as client:
        client.sendall(b'{"op": "info", "id": 1}\n')
        return replies(client, 1)[0]


def test_lines_that_are_not_json_objects_are_answered_with_an_error(launcher):
    process, socket_path = launcher()
    with connect(socket_path) as client:
        # When a client sends a list, a string, null, broken JSON, then a good request
        client.sendall(b'[1, 2]\n"x"\nnull\n{bad\n{"op": "spawn", "argv": 5}\n{"op": "info", "id": 7}\n')
        answers = replies(client, 6)
    # Then each bad line gets an error, and the good one its answer: the launcher is still there
    assert all("error" in a for a in answers[:5]), answers
    assert answers[5]["id"] == 7 and answers[5]["pid"] == process.pid
    assert process.poll() is None


def test_a_line_without_an_end_is_bounded(launcher):
    process, socket_path = launcher()
    before = psutil.Process(process.pid).memory_info().rss
    # When a client sends 32 MiB without a newline
    with connect(socket_path) as client:
        chunk = b"x" * 2**20
        with pytest.raises(OSError):  # the launcher drops it once past the line limit
            for _ in range(32):
                client.sendall(chunk)
            while client.recv(1 << 16):
                pass
            raise ConnectionResetError("closed by the launcher")
    # Then the launcher did not keep it, and still serves others
    grown = psutil.Process(process.pid).memory_info().rss - before
    assert grown < 8 * 2**20, f"the launcher grew by {grown / 2**20:.0f} MiB"
    assert info(socket_path)["pid"] == process.pid


def test_a_client_that_never_reads_does_not_block_the_others(launcher):
    process, socket_path = launcher()
    # Given a client that sends 150,000 requests and never reads a reply
    greedy = connect(socket_path)
    flood = threading.Thread(target=_send_quietly, args=(greedy, b'{"op": "info"}\n' * 150_000), daemon=True)
    flood.start()
    try:
        time.sleep(0.5)  # let the flood start; the outcome below is decided by a deadline, not by this pause
        # When another client asks something, Then it is answered promptly
        started = time.monotonic()
        assert info(socket_path)["pid"] == process.pid
        assert time.monotonic() - started < 15  # a launcher held by the flood would not answer at all
    finally:
        greedy.close()
        flood.join(15)
    assert process.poll() is None


def _send_quietly(client: socket.socket, data: bytes) -> None:
    try:
        client.settimeout(30)
        client.sendall(data)
    except OSError:
        pass


def test_running_out_of_file_descriptors_is_survived_and_logged(launcher, tmp_path):
    # Given a launcher allowed only 24 open files
    process, socket_path = launcher(max_fds=24)
    clients = []
    try:
        # When 40 clients connect at once
        for _ in range(40):
            clients.append(connect(socket_path))
        deadline = time.monotonic() + 15
        while "cannot accept" not in (tmp_path / "launcher.log").read_text():
            assert process.poll() is None, (tmp_path / "launcher.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "launcher.log").read_text()
            time.sleep(0.1)
    finally:
        for client in clients:
            client.close()
    # Then it logged why, is still running, and serves the next client once files are free again
    deadline = time.monotonic() + 15
    while True:
        try:
            assert info(socket_path)["pid"] == process.pid
            break
        except (OSError, AssertionError):
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "launcher.log").read_text()
            time.sleep(0.2)


def test_a_connection_from_another_user_is_refused(tmp_path):
    # Given a launcher whose socket another user could reach (a folder others may enter, a socket anyone may open)
    folder = Path(tempfile.mkdtemp(prefix="clustermgr-test-", dir="/tmp"))
    os.chmod(folder, 0o755)
    socket_path = folder / "l.sock"
    process = start_launcher(socket_path, tmp_path / "launcher.log")
    os.chmod(socket_path, 0o666)
    try:
        _probe_as_nobody(socket_path, tmp_path)
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _probe_as_nobody(socket_path: Path, tmp_path: Path) -> None:
    # When a process of another user connects and asks for info
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
        's.sendall(b\'{"op": "info"}\\n\')\n'
        "print(repr(s.recv(1000)))\n"
    )
    result = subprocess.run(
        ["/usr/bin/python3", "-c", probe, str(socket_path)], capture_output=True, text=True, timeout=30,
        preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)),
    )  # fmt: skip
    # Then it gets nothing, and the launcher logs why
    refused = result.stdout.strip() == "b''" or any(e in result.stderr for e in ("ConnectionReset", "BrokenPipe"))
    assert refused, (result.stdout, result.stderr)
    assert f"uid {NOBODY}" in (tmp_path / "launcher.log").read_text()


@pytest.mark.parametrize("owner, mode", [(None, 0o777), (NOBODY, 0o700)])
async def test_a_fallback_socket_folder_is_unpredictable_and_one_someone_else_made_is_never_used(tmp_path, owner, mode):
    # Given a work folder whose path is too long for a socket, so the socket goes to a stand-in folder under /tmp
    workdir = tmp_path / ("w" * 120)
    workdir.mkdir()
    # And another user who made the folder a predictable name would have (/tmp/clustermgr-<uid>-<digest>)
    digest = hashlib.sha256(os.fsencode(workdir.resolve())).hexdigest()[:16]
    predictable = Path(tempfile.gettempdir()) / f"clustermgr-{os.getuid()}-{digest}"
    shutil.rmtree(predictable, ignore_errors=True)
    predictable.mkdir()
    os.chmod(predictable, mode)
    if owner is not None:
        os.chown(predictable, owner, owner)
    launcher = WarmLauncher(workdir, start_timeout=20)
    folder = launcher.socket_path.parent
    try:
        # When the server wants its launcher, Then it serves, from a folder of a random name that only this user
        # can write, kept in the work folder so the next server finds the same one
        await launcher.ensure()
        assert launcher.connected
        assert folder != predictable and folder.name.startswith(f"clustermgr-{os.getuid()}-")
        info = os.lstat(folder)
        assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
        assert WarmLauncher(workdir).socket_path == launcher.socket_path
        # And when the recorded folder is replaced by one someone else could write, a new random one is chosen
        await launcher.close()
        shutil.rmtree(folder)
        folder.mkdir()
        os.chmod(folder, mode)
        if owner is not None:
            os.chown(folder, owner, owner)
        assert WarmLauncher(workdir).socket_path.parent not in (folder, predictable)
        # And a launcher started by hand in a folder someone else could write refuses to serve, with a log line
        result = subprocess.run(
            [sys.executable, "-m", "clustermgr_lab.backends.local.forkserver", str(predictable / "launcher.sock"), "--preload", ""],
            capture_output=True, text=True, timeout=60, env=subprocess_env(),
        )  # fmt: skip
        assert result.returncode == 2 and "refusing to serve" in result.stdout, (result.stdout, result.stderr)
        assert not (predictable / "launcher.sock").exists()
    finally:
        await launcher.close()
        for made in (folder, predictable, WarmLauncher(workdir).socket_path.parent):
            shutil.rmtree(made, ignore_errors=True)


async def test_a_killed_launcher_is_replaced_at_once_and_forked_processes_show_their_command(tmp_path):
    # Given a scheduler forked by the launcher of a work folder
    launcher = WarmLauncher(tmp_path, idle_timeout=1.0)
    backend = LocalBackend("c1", BackendContext(tmp_path / "c1", launcher=launcher))
    await backend.start_scheduler()
    scheduler = backend.pids()["scheduler"]
    first = launcher.pid
    try:
        # Then the forked scheduler holds no handle on the launcher's lock, and ps shows a dask command
        lock = str(launcher.socket_path) + ".lock"
        held = [os.readlink(f"/proc/{scheduler}/fd/{fd}") for fd in os.listdir(f"/proc/{scheduler}/fd")]
        assert lock not in held, held
        deadline = time.monotonic() + 20  # the title is set in the child once it runs the dask command
        while "clustermgr_lab.backends.local.forkserver" in (title := " ".join(psutil.Process(scheduler).cmdline())):
            assert time.monotonic() < deadline, title
            await asyncio.sleep(0.1)
        assert "dask" in title, title
        # When the launcher is killed
        os.kill(first, signal.SIGKILL)
        # Then a new launcher serves within seconds (not after a 60 s fallback), and forks again;
        # its imports alone took 5 s at load average 30
        deadline = time.monotonic() + 40
        while not (launcher.connected and launcher.pid not in (None, first)):
            assert time.monotonic() < deadline, f"no new launcher; see {launcher.log_path.read_text()[-2000:]}"
            await asyncio.sleep(0.1)
        second = LocalBackend("c2", BackendContext(tmp_path / "c2", launcher=launcher))
        await second.start_scheduler()
        assert psutil.Process(second.pids()["scheduler"]).ppid() == launcher.pid
        await second.close()
    finally:
        await backend.detach()
        new = launcher.pid
        await launcher.close()
        for pid in alive([scheduler, first, new or first]):
            os.kill(pid, signal.SIGKILL)


async def test_a_launcher_still_dying_when_the_next_is_started_does_not_fail_the_next(tmp_path):
    # Given a server whose launcher's socket has closed but whose process has not exited yet: SIGKILL closes
    # the socket before the exit code can be read (the race behind a 1-in-3 failure of the test above)
    launcher = WarmLauncher(tmp_path, idle_timeout=1.0, preload=[])
    dying = subprocess.Popen(
        [sys.executable, "-c", "import os, signal, time; time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL)"]
    )
    launcher._process = dying  # noqa: SLF001 - the one state this race needs; no public way to stage it
    try:
        # When the server connects again (as it does at once when its launcher goes away)
        await launcher.ensure()
        # Then it starts and reaches a new launcher, rather than reporting the dying one's exit code (-9)
        assert launcher.connected and launcher.pid not in (None, dying.pid)
        assert dying.wait(10) == -signal.SIGKILL
    finally:
        new = launcher.pid
        await launcher.close()
        for pid in alive([new or dying.pid]):
            os.kill(pid, signal.SIGKILL)


async def test_a_connection_reset_by_a_launcher_dying_as_it_queued_it_is_tried_again(tmp_path):
    # Given a socket whose listener queues connections and then closes without accepting them, as a killed
    # launcher's does in the moment between its server connection closing and its listener closing
    launcher = WarmLauncher(tmp_path, idle_timeout=1.0, preload=[])
    launcher.socket_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    dying = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dying.bind(str(launcher.socket_path))
    dying.listen(8)
    asyncio.get_running_loop().call_later(0.5, dying.close)  # resets what it queued
    try:
        # When the server connects (its connection is queued, then reset)
        await launcher.ensure()
        # Then it starts a launcher of its own and reaches it, rather than giving up for a minute
        assert launcher.connected and launcher.pid is not None
        assert psutil.Process(launcher.pid).is_running()
    finally:
        dying.close()
        new = launcher.pid
        await launcher.close()
        for pid in alive([new] if new else []):
            os.kill(pid, signal.SIGKILL)


async def test_the_launchers_forks_are_counted_as_scheduler_and_worker_not_other(tmp_path):
    # Given the launcher's fork counter, and a local cluster whose processes the warm launcher forks
    from clustermgr_lab.common.metrics import LAUNCHER_FORKS
    from clustermgr_lab.domain.spec import parse_spec

    def forks(process: str) -> float:
        return LAUNCHER_FORKS.labels(process=process, result="forked")._value.get()

    before = {process: forks(process) for process in ("scheduler", "worker", "other")}
    launcher = WarmLauncher(tmp_path, idle_timeout=1.0)
    backend = LocalBackend("c1", BackendContext(tmp_path / "c1", launcher=launcher))
    pids: list[int] = []
    try:
        # When it starts its scheduler and one worker
        await backend.start_scheduler()
        group = parse_spec({"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "300 MiB"}]}).groups[0]
        await backend.scale_up(group, ["default-1"])
        pids = list(backend.pids().values())
        assert all(psutil.Process(pid).ppid() == launcher.pid for pid in pids), "not forked by the launcher"
        # Then the metric counts one scheduler and one worker fork, and nothing as "other"
        assert forks("scheduler") - before["scheduler"] == 1
        assert forks("worker") - before["worker"] == 1
        assert forks("other") == before["other"]
    finally:
        await backend.close()
        await launcher.close()
        for pid in alive(pids):
            os.kill(pid, signal.SIGKILL)


def test_children_asked_for_together_start_once_all_of_them_are_forked(tmp_path):
    # Given a launcher with dask's worker command preloaded (a forked `dask worker --version` prints at once)
    socket_path = tmp_path / "l.sock"
    process = start_launcher(socket_path, tmp_path / "launcher.log", preload="distributed.cli.dask_worker")
    try:
        # When a client asks for 30 of them in one write, as a scale-up does
        logs = [tmp_path / f"w{i}.log" for i in range(30)]
        argv = [sys.executable, "-m", "distributed.cli.dask_worker", "--version"]
        requests = b"".join(
            json.dumps(
                {"op": "spawn", "id": i, "argv": argv, "env": {}, "log": str(log), "cwd": str(tmp_path)}
            ).encode()
            + b"\n"
            for i, log in enumerate(logs)
        )
        with connect(socket_path) as client:
            client.sendall(requests)
            answers = replies(client, 30)
        # Then every one was forked, and none ran its command before the last one was forked
        assert all("pid" in a for a in answers), answers
        last_fork = max(a["create_time"] for a in answers)
        deadline = time.monotonic() + 60
        while not all(log.exists() and log.stat().st_size for log in logs):
            assert time.monotonic() < deadline, "a forked `dask worker --version` printed nothing"
            time.sleep(0.05)
        first_output = min(log.stat().st_mtime for log in logs)
        # (a process's start time is counted in clock ticks: 10 ms)
        assert first_output >= last_fork - 0.01, f"a child ran {last_fork - first_output:.3f} s before the last fork"
    finally:
        process.kill()
        process.wait()
