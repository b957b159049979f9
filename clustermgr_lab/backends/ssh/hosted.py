"""The server's side of a cluster's SSH sessions: :class:`HostedSSHSessions`, served by the scheduler links' process.

The same methods as :class:`~.sessions.SSHSessions`, each one a request to the server's helper process
(``BackendContext.helper``: the scheduler links' process, where distributed is imported already), whose
:func:`~.sessions.answer` holds the connections. The server imports neither asyncssh nor distributed for
its SSH clusters.

News of a worker that ends on its own comes on the backend's topic. When the helper process itself
exits (killed, out of memory), every connection it held is gone while the remote workers may still run:
each started worker's process group is killed over a new connection (a new helper process) and the
worker reported ended with no exit status, as for any lost connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clustermgr_lab.backends.ssh.commands import kill_group_command, kill_unreported_command
from clustermgr_lab.backends.ssh.messages import StartFailed, WorkerStart

if TYPE_CHECKING:
    from clustermgr_lab.backends.base import HelperProcess

log = logging.getLogger(__name__)

#: Seconds closing a topic's sessions may take in the helper process.
CLOSE_TIMEOUT = 10.0


class HostedSSHSessions:
    """A cluster's workers over SSH, held by the helper process under ``topic``.

    Parameters
    ----------
    helper : HelperProcess
        The server's helper process.
    topic : str
        This backend's name there (unique in the server).
    on_ended : callable
        Called with ``(name, returncode)`` when a worker ends without being stopped (None: its
        connection was lost).
    """

    def __init__(self, helper: HelperProcess, topic: str, on_ended: Callable[[str, int | None], None]):
        self._helper = helper
        self._topic = topic
        self._on_ended = on_ended
        self._starting: dict[str, WorkerStart] = {}
        self._started: dict[str, tuple[WorkerStart, int | None]] = {}
        self._ended_while_answered: dict[str, int | None] = {}
        self._subscribed = False

    def names(self) -> set[str]:
        """The workers started or starting, not yet stopped or ended."""
        return set(self._started) | set(self._starting)

    # -- the helper's news ---------------------------------------------------------------------

    def _hold(self) -> None:
        if not self._subscribed:
            self._helper.subscribe(self._topic, self._event)
            self._subscribed = True

    def _let_go_if_unused(self) -> None:
        """Let the helper process go (when nothing else holds it) once no worker of this backend is left."""
        if self._subscribed and not self.names():
            self._helper.unsubscribe(self._topic)
            self._subscribed = False

    def _event(self, event: str, args: list[Any]) -> None:
        if event == "ended":
            name, returncode = args[0], args[1]
            if name in self._starting:  # its start's answer is read, not yet handled: see start()
                self._ended_while_answered[name] = returncode
            elif self._started.pop(name, None) is not None:
                self._let_go_if_unused()
                self._on_ended(name, returncode)
        elif event == "lost":
            for name, (request, group) in list(self._started.items()):
                asyncio.ensure_future(self._connection_lost(name, request, group))

    async def _connection_lost(self, name: str, request: WorkerStart, group: int | None) -> None:
        if self._started.get(name, (None,))[0] is not request:
            return
        if group is not None:
            command = kill_group_command(group)
            what = f"process group {group}"
            killed = await self.kill(request.host, request.connect_options, command, what, request.command_timeout)
            outcome = "killed it" if killed else "it was not running any more, or could not be reached"
        else:
            outcome = "it had not reported its process group"
        if self._started.get(name, (None,))[0] is not request:  # stopped meanwhile
            return
        del self._started[name]
        log.warning("the helper process that held worker %s's SSH connection exited; %s", name, outcome)
        self._let_go_if_unused()
        self._on_ended(name, None)

    # -- SSHSessions' interface ----------------------------------------------------------------

    async def start(self, request: WorkerStart) -> int | None:
        """Start a worker in the helper process; return its process group. Raises ``StartFailed`` as there."""
        name = request.name
        self._starting[name] = request
        self._hold()
        message = {"op": "ssh_start", "topic": self._topic, "worker": request.to_message()}
        try:
            result = await self._helper.ask(
                message, request.timeout + 2 * request.command_timeout + request.stop_timeout
            )
        except asyncio.CancelledError:
            # given up here: given up there too (its start kills what it left on the host)
            self._forget_start(name)
            asyncio.ensure_future(self._quietly({"op": "ssh_stop", "topic": self._topic, "name": name}, 60))
            raise
        except Exception as exc:  # the helper exited or hung: the worker may be running, untracked
            self._forget_start(name)
            command = kill_unreported_command(request.scheduler, name)
            await self.kill(request.host, request.connect_options, command, f"worker {name}", request.command_timeout)
            raise StartFailed(f"worker {name} did not start on {request.host}: {exc}") from exc
        self._starting.pop(name, None)
        ended = self._ended_while_answered.pop(name, ...)
        if "failed" in result:
            self._let_go_if_unused()
            raise StartFailed(result["failed"])
        group = result.get("process_group")
        if ended is not ...:  # it ended as its start was answered
            self._let_go_if_unused()
            asyncio.get_running_loop().call_soon(self._on_ended, name, ended)
        else:
            self._started[name] = (request, group)
        return group

    def _forget_start(self, name: str) -> None:
        self._starting.pop(name, None)
        self._ended_while_answered.pop(name, None)
        self._let_go_if_unused()

    async def stop(self, name: str) -> None:
        """Stop a worker (or give up its start) in the helper process; kill its group over SSH if that fails."""
        started = self._started.get(name)
        if started is None and name not in self._starting:
            return
        request, group = started or (self._starting[name], None)
        timeout = 2 * (request.stop_timeout + request.command_timeout)
        try:
            await self._helper.ask({"op": "ssh_stop", "topic": self._topic, "name": name}, timeout)
        except (OSError, RuntimeError) as exc:
            log.warning("stopping worker %s in the helper process failed (%s): killing its process group", name, exc)
            if group is not None:
                command = kill_group_command(group)
                await self.kill(request.host, request.connect_options, command, f"process group {group}", timeout)
        finally:
            if self._started.get(name) is started:
                self._started.pop(name, None)
            self._let_go_if_unused()

    async def kill(self, host: str, connect_options: dict[str, Any], command: str, what: str, timeout: float) -> bool:
        """Over a new SSH connection from the helper process, run a kill ``command``; True if it exited 0."""
        message = {
            "op": "ssh_kill",
            "host": host,
            "connect_options": connect_options,
            "command": command,
            "what": what,
            "timeout": timeout,
        }
        try:
            return bool(await self._helper.ask(message, timeout))
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning("could not kill %s on %s: %s", what, host, exc)
            return False

    async def close(self) -> None:
        """Close this backend's connections in the helper process and stop listening to its news."""
        self._starting.clear()
        self._started.clear()
        if self._subscribed:
            await self._quietly({"op": "ssh_close", "topic": self._topic}, CLOSE_TIMEOUT)
            self._helper.unsubscribe(self._topic)
            self._subscribed = False

    async def _quietly(self, message: dict[str, Any], timeout: float) -> None:
        try:
            await self._helper.ask(message, timeout)
        except (OSError, RuntimeError) as exc:
            log.debug("%s in the helper process: %s", message["op"], exc)
