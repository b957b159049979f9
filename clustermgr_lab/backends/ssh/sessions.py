"""The SSH connections of one cluster's workers: started, watched, stopped, and killed when lost.

Where distributed is imported already: the server's scheduler links' process
(:mod:`clustermgr_lab.cluster.link_host`, its ``ssh_*`` operations, :func:`answer`), which the server's
:class:`~.backend.SSHBackend` drives through :class:`~.hosted.HostedSSHSessions`. Only a backend made
without that process (``BackendContext.helper`` None) holds an :class:`SSHSessions` in its own process.
distributed's SSH deployment and asyncssh (about 35 MiB that a process never gives back) are then
never imported by the server, which returns to its idle footprint once its SSH clusters are gone.

Workers are started by distributed's own SSH deployment (``distributed.deploy.ssh.Worker``, on
asyncssh): one SSH connection per worker, running ``python -m distributed.cli.dask_spec`` with a
Nanny on the remote host. A worker is tracked by its SSH channel (it has ended when the channel
reports an exit status) and by its remote process group, which the Nanny reports as it starts.

A cluster's sessions, as the backend uses them (``on_ended`` hears of workers that end on their own)::

    sessions = SSHSessions(on_ended=lambda name, returncode: print(name, "ended", returncode))
    group = await sessions.start(WorkerStart(name="default-1", host="node1", scheduler="tls://10.0.0.5:8786", ...))
    await sessions.stop("default-1")
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distributed.deploy.ssh import Worker as SSHWorker

from clustermgr_lab.backends.ssh.commands import (
    kill_group_command,
    kill_unreported_command,
    reported_process_group,
    stop_group_command,
)
from clustermgr_lab.backends.ssh.messages import StartFailed, WorkerStart

log = logging.getLogger(__name__)

#: The operations of the links' process that :func:`answer` serves (see :mod:`clustermgr_lab.cluster.link_host`).
OPERATIONS = frozenset({"ssh_start", "ssh_stop", "ssh_kill", "ssh_close"})

# distributed.deploy.ssh logs each line the remote worker writes to stderr while it starts (at
# INFO); those lines carry the process group it reports and, when it fails, the reason.
_start_output: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("_start_output", default=None)


class _StartOutput(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        lines = _start_output.get()
        if lines is not None:
            lines.append(record.getMessage())


_ssh_deploy_log = logging.getLogger("distributed.deploy.ssh")
_ssh_deploy_log.addHandler(_StartOutput())
if not _ssh_deploy_log.isEnabledFor(logging.INFO):
    _ssh_deploy_log.setLevel(logging.INFO)


@dataclass
class _Session:
    request: WorkerStart
    process: SSHWorker
    process_group: int | None = None
    watcher: asyncio.Task | None = field(default=None)


async def run_over_ssh(host: str, connect_options: dict[str, Any], command: str, what: str, timeout: float) -> bool:
    """Over a new SSH connection, run a kill ``command`` for ``what``; True if it exited 0."""
    import asyncssh  # on first use, as distributed.deploy.ssh does

    async def run():
        async with asyncssh.connect(host, **connect_options) as connection:
            return await connection.run(command)

    try:
        done = await asyncio.wait_for(run(), timeout)
    except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
        log.warning("could not kill %s on %s: %s", what, host, exc)
        return False
    return done.exit_status == 0


class SSHSessions:
    """One cluster's workers over SSH, by name: each one's connection, process group and output copier.

    Parameters
    ----------
    on_ended : callable
        Called with ``(name, returncode)`` when a worker ends without being stopped: ``returncode`` is
        its remote exit status, or None when its connection was lost (its process group has been killed
        over a new connection by then, if it could be reached).
    """

    def __init__(self, on_ended: Callable[[str, int | None], None]):
        self._on_ended = on_ended
        self._sessions: dict[str, _Session] = {}
        self._starting: dict[str, asyncio.Task] = {}
        self._stopping: set[str] = set()

    def names(self) -> set[str]:
        """The workers started or starting, not yet stopped or ended."""
        return set(self._sessions) | set(self._starting)

    async def start(self, request: WorkerStart) -> int | None:
        """Start a worker; return the process group it reported (None: it did not).

        Raises
        ------
        StartFailed
            When it did not start within ``request.timeout``, or exited first, or was stopped while it
            started; what it left on its host has been killed.
        """
        task = asyncio.ensure_future(self._start(request))
        self._starting[request.name] = task
        try:
            return await task
        except asyncio.CancelledError:
            if request.name in self._stopping and not _cancelling():  # stop() gave it up, not our caller
                raise StartFailed(f"worker {request.name} was stopped while it started on {request.host}") from None
            raise
        finally:
            if self._starting.get(request.name) is task:
                del self._starting[request.name]

    async def _start(self, request: WorkerStart) -> int | None:
        name, host = request.name, request.host
        process = SSHWorker(
            request.scheduler,
            host,
            connect_options=dict(request.connect_options),
            kwargs=dict(request.kwargs),
            remote_python=request.remote_python,
            name=name,
        )
        output: list[str] = []
        _start_output.set(output)
        try:
            await asyncio.wait_for(process.start(), request.timeout)
        except asyncio.CancelledError:
            await self._abandon(request, process, output, ended=False)
            raise
        except Exception as exc:
            await self._abandon(request, process, output, ended=not isinstance(exc, asyncio.TimeoutError))
            status = process.proc.exit_status if process.proc is not None else None
            detail = "\n".join(output[-15:]) or f"{type(exc).__name__}: {exc}"
            if isinstance(exc, asyncio.TimeoutError):
                detail = f"no worker within {request.timeout:g} s\n{detail}"
            raise StartFailed(f"worker {name} did not start on {host} (remote exit status {status}): {detail}") from exc
        session = _Session(request, process, reported_process_group(output))
        self._sessions[name] = session
        session.watcher = asyncio.ensure_future(self._watch(session))
        return session.process_group

    async def _abandon(self, request: WorkerStart, process: SSHWorker, output: list[str], ended: bool) -> None:
        """Kill what a worker that did not start left on its host, and close its connection.

        ``ended``: its output has ended, so its exit status is on the way and worth waiting for.
        """
        group = reported_process_group(output)
        if group is not None:
            await run_over_ssh(
                request.host,
                request.connect_options,
                kill_group_command(group),
                f"process group {group}",
                request.command_timeout,
            )
        else:  # it may be running without having said its group yet: find it by name
            command = kill_unreported_command(request.scheduler, request.name)
            await run_over_ssh(
                request.host, request.connect_options, command, f"worker {request.name}", request.command_timeout
            )
        proc = process.proc
        if proc is not None and (ended or group is not None):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait_closed(), request.stop_timeout)
        with contextlib.suppress(OSError):
            await process.close()

    async def _watch(self, session: _Session) -> None:
        """Copy the worker's output into its log, then report its exit unless it was stopped."""
        request, process = session.request, session.process
        log_file = await asyncio.to_thread(_open_log, Path(request.log_path))
        with log_file:

            async def copy(stream) -> None:
                async for line in stream:
                    log_file.write(line)
                    log_file.flush()

            await asyncio.gather(copy(process.proc.stdout), copy(process.proc.stderr), return_exceptions=True)
        await process.proc.wait_closed()
        returncode = process.proc.returncode
        if self._sessions.get(request.name) is not session or request.name in self._stopping:
            return
        del self._sessions[request.name]
        with contextlib.suppress(OSError):
            await process.close()
        if returncode is None and session.process_group is not None:
            # No exit status: the connection was lost, not the worker; it must not run on untracked.
            killed = await run_over_ssh(
                request.host,
                request.connect_options,
                kill_group_command(session.process_group),
                f"process group {session.process_group}",
                request.command_timeout,
            )
            outcome = "killed it" if killed else "it was not running any more, or could not be reached"
            log.warning("lost the SSH connection of worker %s on %s; %s", request.name, request.host, outcome)
        else:
            log.warning("worker %s on %s ended on its own (%s)", request.name, request.host, returncode)
        self._on_ended(request.name, returncode)

    async def _signal_group(self, session: _Session, signal_name: str) -> bool:
        """Signal the worker's process group on its host over its own connection; True once the group is gone."""
        import asyncssh  # imported by the worker's start already

        request = session.request
        if session.process_group is None:
            log.warning("a worker on %s did not report its process group", request.host)
            return False
        command = stop_group_command(session.process_group, signal_name, request.stop_timeout)
        try:
            done = await asyncio.wait_for(
                session.process.connection.run(command), request.stop_timeout + request.command_timeout
            )
        except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
            log.warning("kill -%s of a worker on %s failed: %s", signal_name, request.host, exc)
            return False
        return done.exit_status == 0

    async def stop(self, name: str) -> None:
        """Stop a worker: kill its process group (TERM, then KILL), or give up its start; return once it is gone."""
        self._stopping.add(name)
        try:
            starting = self._starting.get(name)
            if starting is not None:
                starting.cancel()  # its start kills what it left on its host
                await asyncio.gather(starting, return_exceptions=True)
            session = self._sessions.get(name)
            if session is None:
                return
            for signal_name in ("TERM", "KILL"):
                if await self._signal_group(session, signal_name):
                    break
                log.warning("worker %s was still running after kill -%s", name, signal_name)
            self._sessions.pop(name, None)
            with contextlib.suppress(OSError):
                await session.process.close()
        finally:
            self._stopping.discard(name)

    async def kill(self, host: str, connect_options: dict[str, Any], command: str, what: str, timeout: float) -> bool:
        """Over a new SSH connection, run a kill ``command`` (:mod:`.commands`) for ``what``; True if it exited 0."""
        return await run_over_ssh(host, connect_options, command, what, timeout)

    async def close(self) -> None:
        """Give up every start and close every connection (which, alone, stops no remote process)."""
        for task in list(self._starting.values()):
            task.cancel()
        await asyncio.gather(*self._starting.values(), return_exceptions=True)
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            with contextlib.suppress(OSError):
                await session.process.close()


def _open_log(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a", errors="replace")


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def answer(message: dict[str, Any], by_topic: dict[str, SSHSessions], send: Callable[[dict], None]) -> Any:
    """Serve an ``ssh_*`` operation of the links' process: each topic (a backend) has its :class:`SSHSessions`.

    ``{"op": "ssh_start", "topic", "worker"}`` → ``{"process_group"}`` or ``{"failed": message}``;
    ``{"op": "ssh_stop", "topic", "name"}``; ``{"op": "ssh_close", "topic"}``;
    ``{"op": "ssh_kill", "host", "connect_options", "command", "what", "timeout"}`` → bool. A worker that ends
    on its own is news: ``{"to": topic, "event": "ended", "args": [name, returncode]}``.
    """
    op = message["op"]
    if op == "ssh_kill":
        return await run_over_ssh(
            message["host"], message["connect_options"], message["command"], message["what"], message["timeout"]
        )
    topic = message["topic"]
    if op == "ssh_close":
        sessions = by_topic.pop(topic, None)
        if sessions is not None:
            await sessions.close()
        return None
    sessions = by_topic.get(topic)
    if sessions is None:
        if op != "ssh_start":
            return None  # nothing started under that topic (or closed already)

        def ended(name: str, returncode: int | None) -> None:
            send({"to": topic, "event": "ended", "args": [name, returncode]})

        sessions = by_topic[topic] = SSHSessions(ended)
    if op == "ssh_stop":
        await sessions.stop(message["name"])
        return None
    try:
        return {"process_group": await sessions.start(WorkerStart.from_message(message["worker"]))}
    except StartFailed as exc:
        return {"failed": str(exc)}


#: How the links' process reaches :func:`answer`: through the backends' registry, as the import-graph rule wants.
SSHSessions.answer = staticmethod(answer)
