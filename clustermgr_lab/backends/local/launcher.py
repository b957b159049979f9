"""The server's client of the warm fork server: start or re-use it, ask it to fork, watch the exits.

:class:`WarmLauncher` starts (or re-uses) the fork server of its work folder (:mod:`.forkserver`),
asks it to fork, and turns its exit reports into :class:`LaunchedProcess` objects that the local
backend waits on like ``asyncio.subprocess.Process``. When the fork server cannot be reached,
:meth:`WarmLauncher.spawn` returns ``None`` (after logging why) and the backend starts a plain
process instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from traitlets import Bool, Float, List, Unicode
from traitlets.config import LoggingConfigurable

from clustermgr_lab.backends.local import forkserver
from clustermgr_lab.backends.local.forkserver import (
    DEFAULT_PRELOAD,
    POLL_INTERVAL,
    check_socket_folder,
    forkable,
    peer_uid,
    socket_path_for,
)

log = logging.getLogger(__name__)


class LaunchedProcess:
    """A process forked by the launcher, awaited like ``asyncio.subprocess.Process``.

    Its exit comes from the launcher's report or, if the launcher is gone, from polling psutil
    (``returncode`` is then -1: the exit code is known only to the process's parent).
    """

    def __init__(self, pid: int, create_time: float | None):
        self.pid = pid
        self.create_time = create_time
        self.returncode: int | None = None
        self._exited = asyncio.get_running_loop().create_future()

    def set_exited(self, returncode: int) -> None:
        """The process has ended with ``returncode`` (the first report counts)."""
        if not self._exited.done():
            self.returncode = returncode
            self._exited.set_result(returncode)

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def on_exit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the process has ended."""
        self._exited.add_done_callback(lambda _: callback())

    def is_running(self) -> bool:
        """True while the PID still names this process (psutil: alive, not a zombie, same create time)."""
        try:
            process = psutil.Process(self.pid)
            if self.create_time is not None and abs(process.create_time() - self.create_time) > 0.01:
                return False
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    async def poll_until_gone(self) -> None:
        while self.returncode is None:
            if not await asyncio.get_running_loop().run_in_executor(None, self.is_running):
                self.set_exited(-1)
                return
            await asyncio.sleep(POLL_INTERVAL)


class LauncherUnavailable(Exception):
    """The warm launcher could not be started or reached."""


class WarmLauncher(LoggingConfigurable):
    """The server's connection to the warm launcher of its work folder (started or re-used on demand)."""

    enabled = Bool(
        True,
        config=True,
        help="Fork local schedulers and workers from a warm launcher process that has distributed and the "
        "dashboard imported already (starts in tens of milliseconds instead of about a second). When off, or "
        "when the launcher cannot start, every process is a fresh `python -m distributed.cli.dask_*`.",
    )
    idle_timeout = Float(
        2.0,
        config=True,
        help="Seconds the launcher stays with no server connected and no process running before it exits "
        "(while it runs processes, e.g. clusters kept for the next server, it stays).",
    )
    release_after = Float(
        120.0,
        min=0.0,
        config=True,
        help="Seconds after the last cluster of this server is gone before the server lets go of the warm "
        "launcher and its standby schedulers (the launcher then exits after its own idle_timeout). A server "
        "with no cluster costs no process; the next create, template listing or stream subscription starts "
        "them again.",
    )
    start_timeout = Float(
        60.0, config=True, help="Seconds to wait for the launcher to start before falling back to plain processes."
    )
    retry_after = Float(
        60.0, config=True, help="Seconds to use plain processes after the launcher failed, before trying it again."
    )
    preload = List(
        Unicode(),
        default_value=DEFAULT_PRELOAD,
        config=True,
        help="Modules the launcher imports before it forks anything.",
    )

    def __init__(self, workdir: Path, **kwargs):
        super().__init__(**kwargs)
        self.socket_path = socket_path_for(Path(workdir))
        self.log_path = Path(workdir) / "launcher.log"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        self._connecting: asyncio.Task | None = None
        self._process: subprocess.Popen | None = None
        self._replies: dict[int, asyncio.Future] = {}
        self._launched: dict[int, LaunchedProcess] = {}
        self._exits: dict[int, int] = {}  # reported exits of processes no one is watching yet
        self._next_id = 0
        self._failed_at: float | None = None
        self._closing = False
        self._releasing = False
        self._handshaking = False
        self.pid: int | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def spawn(
        self, command: list[str], env: dict[str, str], log_path: Path, *, tied: bool = False
    ) -> LaunchedProcess | None:
        """Fork ``command`` from the launcher; ``None`` when it cannot (the caller starts a plain process).

        ``tied``: the launcher stops the process (SIGTERM to its group) when this server's connection
        ends, unless :meth:`untie` was called for it first (a standby scheduler, see :mod:`.standby`).
        """
        if not self.enabled or not forkable(command):
            return None
        from clustermgr_lab.common.metrics import count_fork

        try:
            await self.ensure()
            reply = await self._request(
                {
                    "op": "spawn",
                    "name": log_path.stem,
                    "argv": command,
                    "env": env,
                    "log": str(log_path),
                    "cwd": str(log_path.parent),
                    **({"tied": True} if tied else {}),
                }
            )
        except LauncherUnavailable as exc:
            self._give_up(str(exc))
            count_fork(command, forked=False)
            return None
        if "error" in reply:
            self._give_up(reply["error"])
            count_fork(command, forked=False)
            return None
        count_fork(command, forked=True)
        return self.watch(reply["pid"], reply.get("create_time"), poll=False)

    async def untie(self, pid: int) -> bool:
        """Let a process spawned ``tied`` outlive this server's connection; False if the launcher could not be told."""
        try:
            reply = await self._request({"op": "untie", "pid": pid})
        except LauncherUnavailable:
            return False
        return "error" not in reply

    def watch(self, pid: int, create_time: float | None = None, *, poll: bool = True) -> LaunchedProcess:
        """A :class:`LaunchedProcess` for ``pid``, e.g. one that an earlier server (or launcher) started.

        Its exit comes from the launcher's report when the launcher is its parent, else (``poll``,
        or once the launcher is gone) from polling psutil, so a re-adopted process stays watchable.
        """
        process = self._launched.get(pid)
        if process is None or process.create_time != create_time:
            process = self._launched[pid] = LaunchedProcess(pid, create_time)
            process.on_exit(lambda: self._launched.pop(pid, None) if self._launched.get(pid) is process else None)
        if pid in self._exits:
            process.set_exited(self._exits.pop(pid))
        elif poll or not self.connected:
            asyncio.ensure_future(process.poll_until_gone())
        return process

    async def warm_up(self) -> None:
        """Connect to (or start) the launcher now; logs and falls back like :meth:`spawn` if it cannot."""
        try:
            await self.ensure()
        except LauncherUnavailable as exc:
            self._give_up(str(exc))

    async def ensure(self) -> None:
        """Connect to the launcher, starting one if none runs; raises :class:`LauncherUnavailable`."""
        if self.connected:
            return
        if self._failed_at is not None and time.monotonic() - self._failed_at < self.retry_after:
            raise LauncherUnavailable("it failed recently")
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())
        await asyncio.shield(self._connecting)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.start_timeout
        # Only a launcher started by this attempt can fail it: an earlier one may still be dying (a killed
        # launcher's socket closes before its exit code can be read), and its code says nothing of the next.
        self._process = None
        starts = 0
        try:
            self.socket_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            check_socket_folder(self.socket_path.parent)
        except OSError as exc:  # PermissionError included: someone else's folder, or one others can write
            raise LauncherUnavailable(f"its socket folder is not safe to use: {exc}") from None
        while not await self._handshake():
            exited = self._process.poll() if self._process is not None else None
            if exited:
                raise LauncherUnavailable(f"it exited with code {exited}; see {self.log_path}")
            # None started yet, or ours exited 0: another launcher held the lock (it may have gone since).
            if (self._process is None or exited == 0) and starts < 3:
                await self._start_process()
                starts += 1
            if loop.time() > deadline:
                raise LauncherUnavailable(f"it did not answer within {self.start_timeout:g} s; see {self.log_path}")
            await asyncio.sleep(0.02)
        self._failed_at = None
        self.log.info("clustermgr: warm launcher %s at %s", self.pid, self.socket_path)

    async def _handshake(self) -> bool:
        """Connect and ask the launcher who it is; False when no launcher answers at the socket (yet).

        A launcher killed a moment ago may still have queued the connection before its listener closed,
        which then resets it: that counts as no answer (the caller starts a new launcher), not as a failure.
        """
        try:
            reader, writer = await asyncio.open_unix_connection(str(self.socket_path))
        except OSError:
            return False
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid != os.getuid():
            writer.close()
            raise LauncherUnavailable(f"the process serving {self.socket_path} runs as uid {uid}, not as this user")
        self._reader, self._writer = reader, writer
        self._handshaking = True
        self._read_task = asyncio.ensure_future(self._read_loop(reader))
        try:
            self.pid = (await self._request({"op": "info"}))["pid"]
        except LauncherUnavailable:
            if self._reader is reader:  # no answer in time: let this connection go quietly
                self._reader = self._writer = None
                writer.close()
            return False
        finally:
            self._handshaking = False
        return True

    async def _start_process(self) -> None:
        # subprocess.Popen, not asyncio's: asyncio kills a child whose transport is collected, and the
        # launcher must outlive this server (start_new_session: no signal to the server reaches it).
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-c", f"import sys; from {forkserver.__name__} import main; sys.exit(main())",
            str(self.socket_path), "--idle-timeout", str(self.idle_timeout),
        ]  # fmt: skip
        if self.preload != DEFAULT_PRELOAD:  # by default its command line names no dask CLI: it is none
            command += ["--preload", ",".join(self.preload)]

        def start() -> subprocess.Popen:
            with open(self.log_path, "ab") as out:
                return subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )  # fmt: skip

        self._process = await asyncio.get_running_loop().run_in_executor(None, start)

    async def _request(self, message: dict) -> dict:
        if not self.connected:
            raise LauncherUnavailable("not connected")
        self._next_id += 1
        message = {**message, "id": self._next_id}
        future = self._replies[self._next_id] = asyncio.get_running_loop().create_future()
        try:
            self._writer.write(json.dumps(message).encode() + b"\n")
            await self._writer.drain()
            return await asyncio.wait_for(future, 30)
        except (OSError, asyncio.TimeoutError) as exc:
            raise LauncherUnavailable(f"lost the connection: {exc!r}") from exc
        finally:
            self._replies.pop(message["id"], None)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                message = json.loads(line)
                if not isinstance(message, dict):
                    raise ValueError(f"the launcher sent {line[:80]!r}, not a JSON object")
                if message.get("event") == "exited":
                    process = self._launched.get(message["pid"])
                    if process is None:
                        self._exits[message["pid"]] = message["returncode"]
                    else:
                        process.set_exited(message["returncode"])
                elif (future := self._replies.get(message.get("id"))) is not None and not future.done():
                    future.set_result(message)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.log.warning("clustermgr: lost the warm launcher: %r", exc)
        finally:
            if self._reader is reader:  # not a connection given up already (see _handshake)
                self._disconnected()

    def _disconnected(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = self._reader = None
        for future in self._replies.values():
            if not future.done():
                future.set_exception(LauncherUnavailable("the launcher went away"))
        if not self._closing and not self._handshaking:  # a failed handshake: _connect tries again itself
            for process in list(self._launched.values()):  # their exits can no longer be reported
                asyncio.ensure_future(process.poll_until_gone())
        if not self._closing and not self._releasing and not self._handshaking:
            # While a server is connected the launcher never exits on its own: it crashed or was killed.
            # A new one starts now, so the next cluster does not wait for it (or start plain processes).
            self.log.warning("clustermgr: the warm launcher %s went away; starting a new one", self.pid)
            self.pid = None
            asyncio.ensure_future(self.warm_up())

    def _give_up(self, reason: str) -> None:
        self._failed_at = time.monotonic()
        self.log.warning("clustermgr: warm launcher unavailable (%s); starting plain processes", reason)

    async def release(self) -> None:
        """Disconnect while nothing of this server runs there: the launcher exits after its ``idle_timeout``.

        The next :meth:`ensure` (a create, or a first sidebar open) starts or reaches one again.
        """
        if self._connecting is not None and not self._connecting.done():
            await asyncio.gather(self._connecting, return_exceptions=True)
        self._releasing = True
        try:
            await self._disconnect()
        finally:
            self._releasing = False
        if not self.connected:
            self.pid = None

    async def close(self) -> None:
        """Disconnect. The launcher keeps running its processes and exits once it has none."""
        self._closing = True
        await self._disconnect()

    async def _disconnect(self) -> None:
        writer, read_task = self._writer, self._read_task  # not those of a connection made meanwhile
        if writer is not None:
            writer.close()
        if read_task is not None:
            await asyncio.gather(read_task, return_exceptions=True)
