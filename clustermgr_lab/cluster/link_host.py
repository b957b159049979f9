"""The scheduler links' own process: distributed's connections to every scheduler, out of the Jupyter server.

A program of its own (``python -m clustermgr_lab.cluster.link_host``), started by the server with its
first use of clusters and spoken to over the child's stdin and stdout; :mod:`.hosted_link` is the
server's side. Speaking distributed's protocol means importing distributed, NumPy with it: about 30 MiB
of private memory that a process never gives back; making a cluster's TLS credentials imports
cryptography (about 10 MiB more). Both are done here, by a process the server lets go once no link has
been open for ``LinkHost.release_after`` seconds: a server whose clusters are all gone is back to the
footprint of one that never made one, and the server's event loop never waits on those imports.

Each link is an in-process :class:`~.scheduler_link.SchedulerLink` (or, of kind ``gateway``, a gateway cluster's
``GatewaySchedulerLink``), unchanged: its calls, timeouts and
heartbeat run here. Messages are msgpack maps, one after another on each pipe:

- server to host: ``{"id", "op": "start", "link", "address", "tls", "traits", "timeout"}``,
  ``{"id", "op": "call", "link", "method", "kwargs"}``, ``{"id", "op": "close", "link"}``,
  ``{"id", "op": "identity", "address", "tls", "timeout"}``, ``{"id", "op": "memory_limit"}`` (distributed's
  ``MEMORY_LIMIT``, what a local worker may use: RAM, cgroup and rlimit),
  ``{"id", "op": "make_credentials", "tls"}`` (a cluster's TLS files, made with cryptography),
  ``{"id", "op": "submit_commands", "backends"}`` (read from dask-jobqueue's classes, which import distributed),
  ``{"id", "op": "write_job", "job", "jobqueue"}`` (a batch job's script, written by dask-jobqueue:
  ``BatchBackend.write_job_message``); ``{"id", "op": "ssh_start" | "ssh_stop" | "ssh_kill" | "ssh_close", ...}``
  (SSH workers' connections, by backend topic: ``SSHSessions.answer``);
  ``{"id", "op": "terminate_scheduler", "address", "tls", "timeout"}`` (a batch scheduler job asked to close);
  ``{"id", "op": "gateway", "call", "options", "timeout", ...}`` (a dask-gateway server's API, with dask-gateway's
  client: ``backends/gateway/remote.py``); ``{"id", "op": "class_check" | "class_build" | "class_scale" | "class_close"
  | "class_cancel_jobs", ...}`` (cluster-class clusters' Cluster objects, held here by backend topic:
  ``backends/cluster_class/objects.py``); a ``start`` names its link's ``kind`` (:data:`LINK_KINDS`);
- host to server: ``{"id", "result"}`` or ``{"id", "error", "message"}`` (``error``: one of
  :data:`ERROR_KINDS`), and a link's news ``{"link", "event", "args"}`` (``event``: one of
  :data:`EVENTS`), written in the order its :class:`SchedulerLink` reported it; a backend's news
  ``{"to": topic, "event", "args"}`` (e.g. an SSH worker that ended on its own).

It exits when its stdin closes (the server stopped, or died: no orphan). It ignores SIGINT, which a
terminal sends to the server's whole process group: the server closes its links first.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

import msgpack

from clustermgr_lab.domain.errors import Conflict, SchedulerTimeout

log = logging.getLogger("clustermgr_lab.link_host")

#: What a link tells the server, besides answers: a worker came or went, the stream ended, the heartbeat's
#: verdict changed, the scheduler asked adaptive mode to look (see :class:`~.scheduler_link.SchedulerLink`).
EVENTS = ("added", "removed", "lost", "responsive", "work", "gone")
#: How an error crosses the pipe, by kind: the server raises the same type with the same words.
ERROR_KINDS = ("scheduler-timeout", "timeout", "os", "value", "conflict", "other")
#: The links a ``start`` may make: a scheduler's own (subscribed to its worker stream), a gateway cluster's
#: (polled through the gateway's proxy: ``GatewaySchedulerLink``, which also tells ``gone`` with a worker's name), or
#: a Cluster object's scheduler's (subscribed beside the object's own subscription: ``ClusterClassLink``).
LINK_KINDS = ("scheduler", "gateway", "cluster-class")
#: The link methods a ``call`` may name.
CALLS = frozenset({"load", "workers_to_close", "worker_metrics", "set_idle_timeout", "retire_workers"})
#: The process's title (``ps``, ``/proc/PID/cmdline``) when ``setproctitle`` is installed; else its command line
#: names this module.
PROCESS_TITLE = "clustermgr-lab scheduler links"
#: Largest message either side accepts (a scheduler's identity with thousands of workers is a few MiB).
MAX_MESSAGE = 64 * 2**20
#: Bytes of answers and news the server may leave unread before this process gives up on it.
MAX_BACKLOG = 4 * MAX_MESSAGE
#: The settings of a link that the server's configuration decides (``c.SchedulerLink.*``).
TRAITS = ("call_timeout", "retire_timeout", "heartbeat_interval", "heartbeat_timeout")


def packer() -> msgpack.Packer:
    """Both sides' encoder: what msgpack cannot encode (a scheduler's odd value) is sent as its text."""
    return msgpack.Packer(use_bin_type=True, default=str)


def unpacker() -> msgpack.Unpacker:
    """Both sides' decoder, bounded by :data:`MAX_MESSAGE`."""
    return msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=MAX_MESSAGE)


def error_kind(exc: BaseException) -> str:
    """The :data:`ERROR_KINDS` entry that carries ``exc`` to the server."""
    if isinstance(exc, SchedulerTimeout):
        return "scheduler-timeout"
    if isinstance(exc, Conflict):
        return "conflict"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, OSError):  # refused, reset, distributed's CommClosedError
        return "os"
    if isinstance(exc, ValueError):
        return "value"
    return "other"


def security_of(tls: dict[str, str] | None):
    """The ``distributed.Security`` of a cluster's TLS files (``{"ca_file", "cert", "key"}``), or None."""
    if not tls:
        return None
    from clustermgr_lab.common.security import ClusterCredentials

    return ClusterCredentials.from_paths(tls).security()


class Host:
    """Serves one server: its links by number, each request answered in a task of its own."""

    def __init__(self, out: asyncio.StreamWriter):
        from clustermgr_lab.cluster.scheduler_link import SchedulerLink  # after the event loop runs

        self._link_class = SchedulerLink
        self._out = out
        self._packer = packer()
        self.links: dict[int, Any] = {}
        self.ssh_sessions: dict[str, Any] = {}  # each SSH backend's SSHSessions, by its topic
        self.cluster_objects: dict[str, Any] = {}  # each cluster-class backend's Cluster object, by its topic
        self._tasks: set[asyncio.Task] = set()

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(self._packer.pack(message))
        if self._out.transport.get_write_buffer_size() > MAX_BACKLOG:
            # the server has not read for a long while: end rather than grow; it starts a new process, whose
            # links subscribe anew
            log.error("the server has not read %d bytes of news: exiting", MAX_BACKLOG)
            os._exit(1)

    def handle(self, message: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._answer(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, message: dict[str, Any]) -> None:
        request = message.get("id")
        try:
            result = await self._do(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.send({"id": request, "error": error_kind(exc), "message": str(exc).strip() or type(exc).__name__})
        else:
            self.send({"id": request, "result": result})

    async def _do(self, message: dict[str, Any]) -> Any:
        op = message.get("op")
        if op == "start":
            return await self._start(message)
        if op == "call":
            method = message.get("method")
            if method not in CALLS:
                raise ValueError(f"no link call {method!r}")
            link = self.links.get(message["link"])
            if link is None:
                raise OSError(f"link {message['link']} is closed")
            return await getattr(link, method)(**message.get("kwargs", {}))
        if op == "close":
            link = self.links.pop(message["link"], None)
            if link is not None:
                await link.close()
            return None
        if op == "identity":
            from clustermgr_lab.cluster.scheduler_link import scheduler_identity

            security = await asyncio.to_thread(security_of, message.get("tls"))
            return await scheduler_identity(message["address"], message["timeout"], security=security)
        if op == "make_credentials":
            from clustermgr_lab.common.security import ClusterCredentials

            await asyncio.to_thread(ClusterCredentials.from_paths(message["tls"]).make)
            return None
        if op == "submit_commands":
            from clustermgr_lab.backends import ALL_BACKENDS

            return {name: ALL_BACKENDS[name].submit_command() for name in message["backends"] if name in ALL_BACKENDS}
        if op == "write_job":
            from clustermgr_lab.backends import BatchBackend

            return BatchBackend.write_job_message(message)
        if op == "gateway":
            from clustermgr_lab.backends import serve_gateway_request

            return await serve_gateway_request(message)
        if op == "terminate_scheduler":
            from clustermgr_lab.backends import terminate_scheduler

            security = await asyncio.to_thread(security_of, message.get("tls"))
            return await terminate_scheduler(message["address"], message["timeout"], security)
        if isinstance(op, str) and op.startswith("class_"):
            from clustermgr_lab.backends import ClusterObjects

            return await ClusterObjects.answer(message, self.cluster_objects, self.send)
        if isinstance(op, str) and op.startswith("ssh_"):
            from clustermgr_lab.backends import SSHSessions

            return await SSHSessions.answer(message, self.ssh_sessions, self.send)
        if op == "memory_limit":
            from distributed.system import MEMORY_LIMIT

            return MEMORY_LIMIT
        raise ValueError(f"no operation {op!r}")

    async def _start(self, message: dict[str, Any]) -> None:
        number = message["link"]

        def tell(event: str):
            return lambda *args: self.send({"link": number, "event": event, "args": list(args)})

        security = await asyncio.to_thread(security_of, message.get("tls"))  # reads no file yet, but imports
        callbacks = (message["address"], tell("added"), tell("removed"), tell("lost"))
        kind = message.get("kind", "scheduler")
        if kind == "gateway":
            from clustermgr_lab.backends import GatewaySchedulerLink

            link = GatewaySchedulerLink(
                *callbacks, on_responsive=tell("responsive"), security=security, on_gone=tell("gone")
            )
        elif kind in ("scheduler", "cluster-class"):
            traits = {k: v for k, v in (message.get("traits") or {}).items() if k in TRAITS}
            make = self._link_class
            if kind == "cluster-class":
                from clustermgr_lab.backends import ClusterClassLink

                make = ClusterClassLink
            link = make(*callbacks, on_responsive=tell("responsive"), security=security, **traits)
        else:
            raise ValueError(f"no link kind {kind!r}")
        link.on_work = tell("work")
        self.links[number] = link
        try:
            await link.start(timeout=message.get("timeout", 30))
        except BaseException:
            self.links.pop(number, None)
            await link.close()
            raise

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        links, self.links = list(self.links.values()), {}
        await asyncio.gather(*(link.close() for link in links), return_exceptions=True)
        sessions, self.ssh_sessions = list(self.ssh_sessions.values()), {}
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        if self.cluster_objects:  # the server ended without closing them (it died): their workers and jobs too
            from clustermgr_lab.backends import ClusterObjects

            await asyncio.gather(ClusterObjects.close_all(self.cluster_objects), return_exceptions=True)


async def serve() -> None:
    """Read requests from stdin until it closes; answer on stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_MESSAGE, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    out = asyncio.StreamWriter(transport, protocol, None, loop)
    host = Host(out)
    import distributed.core  # noqa: F401  (now, while the server waits for its scheduler anyway)

    messages = unpacker()
    try:
        while chunk := await reader.read(65536):
            messages.feed(chunk)
            for message in messages:
                host.handle(message)
            await out.drain()  # bounded: stops reading while the server does not read its answers
    finally:
        await host.close()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    try:
        from setproctitle import setproctitle

        setproctitle(PROCESS_TITLE)
    except ImportError:  # an optional dependency of distributed's: the title stays python's
        pass
    asyncio.run(serve())


if __name__ == "__main__":
    main()
