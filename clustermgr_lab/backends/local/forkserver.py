"""The warm fork server: a process with distributed preloaded that forks local schedulers and workers.

A program of its own (``python -m clustermgr_lab.backends.local.forkserver SOCKET``), never imported
by the Jupyter server except for its constants. Starting ``python -m distributed.cli.dask_worker``
spends most of its time importing distributed (and, for a scheduler, bokeh for the dashboard). The
fork server imports them once, then forks a scheduler or worker per request, which is ready in tens of
milliseconds instead of about a second.

It is single-threaded, in a session of its own, serving newline-delimited JSON on a unix socket in
the work folder. Every process it forks calls ``setsid`` (its own session and process group, so
``killpg`` stops nanny and worker together), writes its output to a log file, and has no pipe to
anyone. It reaps its children and reports each exit to every connected server. It exits once it has
had no server connected and no child running for ``idle_timeout`` seconds, so it neither dies with a
server (clusters may outlive one) nor stays around forever; the next server of the same work folder
re-uses it while it runs. The server's side is :mod:`.launcher`.

Children forked for requests that arrive together (a scale-up asks for every worker at once) wait,
once in their session, until the launcher has read and forked all of them (:class:`Batch`): each
fork then takes the launcher a few milliseconds instead of tens while the children forked before it
compete for the same cores, and the held children start together. What the launcher prepares once
before it forks (configuration, routes, the versions report) is :mod:`.fork_warmup`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import psutil

from .fork_warmup import YamlConfig, warm

#: ``python -m MODULE`` commands the launcher runs in a forked child instead of a new interpreter.
FORKABLE = ("distributed.cli.dask_scheduler", "distributed.cli.dask_worker")
DEFAULT_PRELOAD = [
    *FORKABLE,
    "distributed.dashboard.scheduler",  # bokeh and the dashboard's pages
    "clustermgr_lab.preloads.scheduler",
]
SOCKET_NAME = "launcher.sock"
MAX_SOCKET_PATH = 100  # sockaddr_un holds 108 bytes
POLL_INTERVAL = 0.5  # seconds between psutil checks once the launcher cannot report an exit
MAX_LINE_BYTES = 1 << 20  # one request (a spawn's environment included); a longer line drops its client
MAX_PENDING_BYTES = 4 << 20  # replies a client has not read yet; past it the client is dropped
MAX_CLIENTS = 64
ACCEPT_PAUSE = 0.5  # seconds without accepting after accept() failed (e.g. out of file descriptors)
MAX_HOLD = 5.0  # seconds the first child of a batch waits at most for the batch to be forked

log = logging.getLogger(__name__)


SOCKET_FOLDER_RECORD = "launcher.socket-folder"


def socket_path_for(workdir: Path) -> Path:
    """The launcher's socket for a work folder (a short stand-in under /tmp when the path is too long).

    The stand-in folder has an unpredictable name (``tempfile.mkdtemp``: created 0700 by this call,
    never one another user could have made beforehand to turn the launcher off). Its name is kept in
    the work folder (``launcher.socket-folder``), so the next server finds the same launcher; a
    recorded folder that is gone or not this user's alone is replaced by a new one.
    """
    path = Path(workdir) / SOCKET_NAME
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    record = Path(workdir) / SOCKET_FOLDER_RECORD
    prefix = f"clustermgr-{os.getuid()}-"
    with contextlib.suppress(OSError, ValueError):
        folder = Path(record.read_text().strip())
        if folder.parent == Path(tempfile.gettempdir()) and folder.name.startswith(prefix):
            check_socket_folder(folder)
            return folder / SOCKET_NAME
    Path(workdir).mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    written = record.with_name(f"{record.name}.{os.getpid()}")
    written.write_text(f"{folder}\n")
    written.replace(record)
    return folder / SOCKET_NAME


def check_socket_folder(folder: Path) -> None:
    """Refuse a socket folder this user does not own alone: whoever can write there can replace the socket.

    Raises
    ------
    PermissionError
        Saying who owns it or which mode lets others in.
    """
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"{folder} is not a folder")
    if info.st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to uid {info.st_uid}, not to this user (uid {os.getuid()})")
    if info.st_mode & 0o022:
        raise PermissionError(f"{folder} can be written by others (mode {stat.S_IMODE(info.st_mode):o})")


def peer_uid(connection: socket.socket) -> int:
    """The uid of the process at the other end of a unix socket (``SO_PEERCRED``)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[1]


def forkable(command: list[str]) -> bool:
    """True for ``[sys.executable, "-m", <a FORKABLE module>, ...]``."""
    return len(command) >= 3 and command[0] == sys.executable and command[1] == "-m" and command[2] in FORKABLE


# -- the launcher process -----------------------------------------------------------------------


class Client:
    """One connected server: what it sent that is not a whole line yet, and what it has not read yet."""

    def __init__(self, connection: socket.socket):
        self.connection = connection
        self.incoming = bytearray()
        self.outgoing = bytearray()


class Batch:
    """Children forked in a row, waiting to go on until the launcher closes :attr:`go` (EOF on :attr:`wait`).

    The launcher's exit closes it too, so no child waits for a launcher that is gone.
    """

    def __init__(self) -> None:
        self.wait, self.go = os.pipe()
        self.started = time.monotonic()

    def release(self) -> None:
        os.close(self.go)
        os.close(self.wait)


class Launcher:
    """The launcher process's loop: accept servers, fork on request, reap and report exits.

    Every client is bounded (a line of at most :data:`MAX_LINE_BYTES`, replies pending up to
    :data:`MAX_PENDING_BYTES`) and written to without blocking, so one client that misbehaves or never
    reads is dropped without holding up the others; a request that is not a JSON object is answered
    with an error; a failing ``accept`` (out of file descriptors) is logged and retried shortly after.
    """

    def __init__(self, listener: socket.socket, idle_timeout: float, lock_fd: int | None = None):
        self.listener = listener
        self.idle_timeout = idle_timeout
        self.lock_fd = lock_fd
        self.yaml_config = YamlConfig()
        self.selector = selectors.DefaultSelector()
        self.clients: dict[socket.socket, Client] = {}
        self.children: dict[int, str] = {}
        self.batch: Batch | None = None  # the children forked since the last release (see _release)
        #: Children that end with the connection that asked for them (standby schedulers): PID -> that connection.
        self.tied: dict[int, socket.socket] = {}
        self.stopping = False
        self.accept_paused_until: float | None = None
        self.wakeup_read, wakeup_write = os.pipe()
        os.set_blocking(self.wakeup_read, False)
        os.set_blocking(wakeup_write, False)
        self.wakeup_write = wakeup_write
        signal.set_wakeup_fd(wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the selector
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wakeup_read, selectors.EVENT_READ, "wakeup")

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def run(self) -> None:
        idle_since: float | None = time.monotonic()
        while not self.stopping:
            for key, events in self.selector.select(timeout=ACCEPT_PAUSE if self.accept_paused_until else 1.0):
                if key.data == "accept":
                    self._accept()
                elif key.data == "wakeup":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wakeup_read, 512)
                elif key.fileobj in self.clients:
                    if events & selectors.EVENT_WRITE:
                        self._flush(key.fileobj)
                    if events & selectors.EVENT_READ and key.fileobj in self.clients:
                        self._read(key.fileobj)
            if self.accept_paused_until is not None and time.monotonic() >= self.accept_paused_until:
                self.accept_paused_until = None
                self.selector.register(self.listener, selectors.EVENT_READ, "accept")
            self._release()
            self._reap()
            if self.clients or self.children:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > self.idle_timeout:
                print(f"launcher {os.getpid()}: idle for {self.idle_timeout:g} s, exiting", flush=True)
                return

    def _accept(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except BlockingIOError:
            return
        except OSError as exc:  # EMFILE / ENFILE / ENOBUFS: stop accepting for a moment instead of spinning
            print(
                f"launcher {os.getpid()}: cannot accept a connection: {exc}; retrying in {ACCEPT_PAUSE:g} s", flush=True
            )
            self.selector.unregister(self.listener)
            self.accept_paused_until = time.monotonic() + ACCEPT_PAUSE
            return
        try:
            uid = peer_uid(connection)
        except OSError:
            uid = -1
        if uid != os.getuid() or len(self.clients) >= MAX_CLIENTS:
            why = f"uid {uid} is not this launcher's user" if uid != os.getuid() else f"{MAX_CLIENTS} clients already"
            print(f"launcher {os.getpid()}: refused a connection: {why}", flush=True)
            connection.close()
            return
        connection.setblocking(False)
        self.clients[connection] = Client(connection)
        self.selector.register(connection, selectors.EVENT_READ, "client")

    def _read(self, connection: socket.socket) -> None:
        try:
            data = connection.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(connection)
            return
        client = self.clients[connection]
        client.incoming += data
        while (newline := client.incoming.find(b"\n")) >= 0 and newline <= MAX_LINE_BYTES:
            line = bytes(client.incoming[:newline])
            del client.incoming[: newline + 1]
            try:
                request = json.loads(line)
            except ValueError:
                request = None
            self._send(connection, self._answer(request, connection))
            if connection not in self.clients:
                return
        if len(client.incoming) > MAX_LINE_BYTES:
            print(f"launcher {os.getpid()}: dropped a client that sent a line over {MAX_LINE_BYTES} bytes", flush=True)
            self._drop(connection)

    def _answer(self, request: Any, connection: socket.socket | None = None) -> dict:
        if not isinstance(request, dict):
            return {"id": None, "error": "a request must be one JSON object per line"}
        reply: dict[str, Any] = {"id": request.get("id") if isinstance(request.get("id"), (int, str)) else None}
        if request.get("op") == "spawn":
            try:
                pid = self._fork(request)
            except Exception as exc:
                return {**reply, "error": f"{type(exc).__name__}: {exc}"}
            self.children[pid] = str(request.get("name", ""))
            if request.get("tied") is True and connection is not None:
                self.tied[pid] = connection
            with contextlib.suppress(psutil.Error):
                reply["create_time"] = psutil.Process(pid).create_time()
            return {**reply, "pid": pid}
        if request.get("op") == "untie":  # a standby scheduler became a cluster's: it outlives its server
            self.tied.pop(request.get("pid"), None)
            return {**reply, "pid": request.get("pid")}
        if request.get("op") == "info":
            return {**reply, "pid": os.getpid(), "children": {str(p): n for p, n in self.children.items()}}
        return {**reply, "error": f"unknown op {str(request.get('op'))[:40]!r}"}

    def _send(self, connection: socket.socket, message: dict) -> None:
        client = self.clients.get(connection)
        if client is None:
            return
        client.outgoing += json.dumps(message).encode() + b"\n"
        if len(client.outgoing) > MAX_PENDING_BYTES:
            print(f"launcher {os.getpid()}: dropped a client that does not read its replies", flush=True)
            self._drop(connection)
            return
        self._flush(connection)

    def _flush(self, connection: socket.socket) -> None:
        client = self.clients[connection]
        try:
            sent = connection.send(client.outgoing) if client.outgoing else 0
        except BlockingIOError:
            sent = 0
        except OSError:
            self._drop(connection)
            return
        del client.outgoing[:sent]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.outgoing else 0)
        if self.selector.get_key(connection).events != events:
            self.selector.modify(connection, events, "client")

    def _drop(self, connection: socket.socket) -> None:
        if self.clients.pop(connection, None) is not None:
            self.selector.unregister(connection)
            connection.close()
        for pid in [pid for pid, owner in self.tied.items() if owner is connection]:
            # Its server is gone (stopped, crashed or killed): a standby scheduler must not outlive it.
            del self.tied[pid]
            print(f"launcher {os.getpid()}: stopping {self.children.get(pid, pid)}: its server went away", flush=True)
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGTERM)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.pop(pid, None)
            self.tied.pop(pid, None)
            event = {"event": "exited", "pid": pid, "returncode": os.waitstatus_to_exitcode(status)}
            for connection in list(self.clients):
                self._send(connection, event)

    def _release(self) -> None:
        """Let the batch's children go on once no client has more to send (or the batch waited MAX_HOLD s)."""
        if self.batch is None:
            return
        if time.monotonic() - self.batch.started < MAX_HOLD and self._more_to_read():
            return
        self.batch.release()
        self.batch = None

    def _more_to_read(self) -> bool:
        """Whether a client has sent part of a request, or more that is not read yet (likely the same batch)."""
        if any(client.incoming for client in self.clients.values()):
            return True
        return any(
            key.fileobj in self.clients and events & selectors.EVENT_READ
            for key, events in self.selector.select(timeout=0)
        )

    def _fork(self, request: dict) -> int:
        argv = request.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not forkable(argv):
            raise ValueError(f"not a command this launcher runs: {str(argv)[:200]}")
        env = request.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ValueError("env must be an object of strings")
        if not isinstance(request.get("log"), str) or not isinstance(request.get("cwd") or "/", str):
            raise ValueError("log and cwd must be paths")
        # The child must hold none of these: above all the lock, or no launcher could start after this one died.
        inherited = [self.listener.fileno(), self.wakeup_read, self.wakeup_write, self.selector.fileno()]
        inherited += [c.fileno() for c in self.clients]
        if self.lock_fd is not None:
            inherited.append(self.lock_fd)
        yaml_config = self.yaml_config.current()
        sys.stdout.flush()
        sys.stderr.flush()
        # The reply waits until the child is in its own session: a killpg(pid) right after it must work.
        in_session, tell_parent = os.pipe()
        if self.batch is None:
            self.batch = Batch()
        pid = os.fork()
        if pid == 0:
            os.close(in_session)
            os.close(self.batch.go)
            run_child(
                argv, env, request["log"], request.get("cwd") or "/", inherited, tell_parent, yaml_config,
                self.batch.wait,
            )  # fmt: skip
        os.close(tell_parent)
        try:
            os.read(in_session, 1)  # b"" if the child died first: its exit is reported as usual
        finally:
            os.close(in_session)
        return pid


def default_signals() -> None:
    """The default action for the signals the launcher (or a nanny's event loop) handles itself."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


def set_process_title(argv: list[str]) -> None:
    """Show the dask command in ``ps`` and ``/proc/PID/cmdline``, not the launcher's (needs ``setproctitle``)."""
    try:
        import setproctitle
    except ImportError:
        return
    setproctitle.setproctitle(" ".join(argv))


def run_child(
    argv: list[str],
    env: dict[str, str],
    log_path: str,
    cwd: str,
    inherited: list[int],
    tell_parent: int,
    yaml_config: dict | None = None,
    batch: int | None = None,
) -> None:
    """In the forked child: a session of its own, output to ``log_path``, then the dask CLI. Never returns.

    ``batch``: a pipe's read end to wait on (until EOF) once in the session, before anything else runs.

    ``yaml_config`` is dask's YAML configuration as the launcher parsed it (see :class:`YamlConfig`);
    None: the child reads the files itself.
    """
    code = 1
    try:
        os.setsid()
        os.write(tell_parent, b"1")
        os.close(tell_parent)
        default_signals()  # before waiting: a killpg while it waits stops it
        if batch is not None:
            os.read(batch, 1)  # b"" once the launcher has forked the whole batch (or exited)
            os.close(batch)
        # The nanny forks its worker from a thread while its event loop holds SIGTERM and SIGINT:
        # without this, the worker would inherit handlers that only wake the nanny's loop.
        os.register_at_fork(after_in_child=default_signals)
        for fd in inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.chdir(cwd)
        set_process_title(argv)  # before the environment is replaced: setproctitle finds argv's memory through it
        os.environ.clear()
        os.environ.update(env)
        import dask

        if yaml_config is None:
            dask.config.refresh()  # the requesting server's DASK_* variables
        else:  # the same steps without parsing the files again: defaults, then the files, then DASK_*
            dask.config.refresh(paths=[], env={})
            dask.config.update(dask.config.config, yaml_config)
            dask.config.update(dask.config.config, dask.config.collect(paths=[]))
        # The nanny forks its worker too: this process has distributed imported already.
        dask.config.set({"distributed.worker.multiprocessing-method": "fork"})
        command = importlib.import_module(argv[2]).main
        sys.argv = [argv[2], *argv[3:]]
        command.main(args=argv[3:], prog_name=argv[2], standalone_mode=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(socket_path: Path, idle_timeout: float, preload: list[str]) -> int:
    """Run the launcher on ``socket_path`` until it has been idle for ``idle_timeout`` seconds."""
    import fcntl

    socket_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        check_socket_folder(socket_path.parent)
    except PermissionError as exc:
        print(f"launcher {os.getpid()}: refusing to serve {socket_path}: {exc}", flush=True)
        return 2
    # Close-on-exec (Python's default), and closed in every forked child (see Launcher._fork): the lock
    # dies with this process, so a new launcher can start at once after this one crashed.
    lock = open(socket_path.with_name(socket_path.name + ".lock"), "a")  # noqa: SIM115 (held for the launcher's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"another launcher serves {socket_path}", flush=True)
        return 0
    started = time.perf_counter()
    warmed = warm(preload, FORKABLE)
    print(
        f"launcher {os.getpid()}: preloaded {', '.join(preload)}; warmed {', '.join(warmed) or 'nothing'} "
        f"in {time.perf_counter() - started:.2f} s",
        flush=True,
    )
    socket_path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # only this user may ask for processes
    try:
        listener.bind(str(socket_path))
    finally:
        os.umask(old_umask)
    listener.listen(64)
    try:
        Launcher(listener, idle_timeout, lock.fileno()).run()
    finally:
        socket_path.unlink(missing_ok=True)
        listener.close()
    return 0


# -- the server's side ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("socket", type=Path, help="the unix socket to serve")
    parser.add_argument(
        "--idle-timeout", type=float, default=2.0, help="exit after this long with no server and no child"
    )
    parser.add_argument("--preload", default=",".join(DEFAULT_PRELOAD), help="comma-separated modules to import first")
    args = parser.parse_args(argv)
    return serve(args.socket, args.idle_timeout, [m for m in args.preload.split(",") if m])


if __name__ == "__main__":
    sys.exit(main())
