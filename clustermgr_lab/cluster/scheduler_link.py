"""The manager's line to one scheduler: RPC calls and the pushed stream of worker joins/leaves."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from traitlets import Float
from traitlets.config import LoggingConfigurable

from clustermgr_lab.common.addresses import parse_address, parse_host_port
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.errors import SchedulerTimeout

if TYPE_CHECKING:
    from distributed.security import Security

log = logging.getLogger(__name__)

WORK_OP = "clustermgr-work"  # pushed by scheduler_preload.WorkNotifier on the worker-status stream
WorkerAdded = Callable[[str, dict], None]
WorkerRemoved = Callable[[str], None]


def connection_args(security: Security | ClusterCredentials | None) -> dict[str, Any]:
    """distributed's ``connection_args`` of the manager (the client role) for a cluster's ``Security`` (or its TLS
    files, made into one); blocking: the certificate files are read (call it in a thread)."""
    if isinstance(security, ClusterCredentials):
        security = security.security()
    return security.get_connection_args("client") if security is not None else {}


async def scheduler_identity(address: str, timeout: float = 10, security: Security | None = None) -> dict[str, Any]:
    """The scheduler's ``identity()`` (its ``id`` included); OSError when nothing takes the connection, TimeoutError
    when it is taken but not answered within ``timeout``."""
    host, port = parse_host_port(parse_address(address)[1])
    # A refused connection is final: distributed's connect() would retry it until the timeout.
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except asyncio.TimeoutError:  # not even taken (a host that is down): as good as refused
        raise OSError(f"no connection to {host}:{port} within {timeout:g} s") from None
    writer.close()
    await writer.wait_closed()
    # distributed's own connect timeout is longer than this call's: a scheduler that took the connection and does
    # not answer (stopped, swapping) is a TimeoutError here, never an OSError that reads like "gone"
    from distributed.core import rpc  # imported with the first cluster, not with the server

    connection = rpc(address, timeout=2 * timeout, connection_args=connection_args(security))
    try:
        return await asyncio.wait_for(connection.identity(n_workers=0), timeout)
    finally:
        await connection.close_rpc()


class SchedulerLink(LoggingConfigurable):
    """Talks to a scheduler in another process.

    Worker arrivals and departures are *pushed* by the scheduler
    (``subscribe_worker_status``, as ``distributed.deploy.Cluster`` does) and handed to
    ``on_added(address, identity)`` / ``on_removed(address)``; nothing is polled.

    Every call has a timeout (:class:`~clustermgr_lab.domain.errors.SchedulerTimeout` past it): a scheduler
    that is stopped (SIGSTOP) or overloaded accepts connections but never answers. A heartbeat
    (``echo``, every ``heartbeat_interval`` s, left out when another call was answered meanwhile) tells
    ``on_responsive(False)`` when the scheduler has not answered within ``heartbeat_timeout`` s, and
    ``on_responsive(True)`` when it answers again.
    Its timeouts are traits (``c.SchedulerLink.call_timeout``), read from ``parent``'s config.
    With ``security`` (the cluster's ``distributed.Security``, or its :class:`ClusterCredentials`) every connection is TLS with the cluster's
    certificate: the one place where the server's own connections to a scheduler get their credentials.
    """

    call_timeout = Float(
        10.0, config=True, help="Seconds a call to a scheduler (load, which workers to close) may take."
    )
    retire_timeout = Float(
        120.0, config=True, help="Seconds retiring workers may take (their data moves to the others first)."
    )
    #: The scheduler's handler that streams worker arrivals and departures to this link.
    subscribe_op: ClassVar[str] = "subscribe_worker_status"
    heartbeat_interval = Float(
        5.0,
        config=True,
        help="Seconds between heartbeats to a scheduler. Each costs the server about 0.7 ms of CPU (a TLS round "
        "trip): 100 idle clusters at 5 s are about 1.5 % of a core.",
    )
    heartbeat_timeout = Float(
        5.0, config=True, help="Seconds without an answer to a heartbeat after which a scheduler is shown unresponsive."
    )

    def __init__(
        self,
        address: str,
        on_added: WorkerAdded,
        on_removed: WorkerRemoved,
        on_lost: Callable[[], None],
        on_responsive: Callable[[bool], None] | None = None,
        security: Security | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.address = address
        self._security = security
        self._connection_args: dict[str, Any] = {}  # made by start(): reading the certificates is file I/O
        self._on_added = on_added
        self._on_removed = on_removed
        self._on_lost = on_lost
        self._on_responsive = on_responsive
        self._rpc: Any = None  # distributed's rpc to the scheduler, from start() on
        self._comm = None
        self._reader: asyncio.Task | None = None
        self._heartbeat: asyncio.Task | None = None
        self._closing = False
        self.responsive = True
        self._answered_at = float("-inf")  # event-loop time of the last answer to a call
        self.on_work: Callable[[str], None] | None = None  # the scheduler's wake-ups for adaptive mode

    async def start(self, timeout: float = 30) -> None:
        from distributed.comm import connect
        from distributed.core import rpc  # imported with the first cluster, not with the server

        if self._security is not None:  # the TLS context loads the cluster's certificate files: off the event loop
            self._connection_args = await asyncio.to_thread(connection_args, self._security)
        self._rpc = rpc(self.address, connection_args=self._connection_args)
        self._comm = await connect(self.address, timeout=timeout, **self._connection_args)
        await self._comm.write({"op": self.subscribe_op})
        identity = await self._call(self._comm.read(), timeout, "the worker subscription")
        for address, info in identity.get("workers", {}).items():
            self._on_added(address, info)
        self._reader = asyncio.ensure_future(self._read())
        self._heartbeat = asyncio.ensure_future(self._beat())

    async def _call(self, awaitable, timeout: float, what: str) -> Any:
        try:
            answer = await asyncio.wait_for(awaitable, timeout)
        except asyncio.TimeoutError:
            raise SchedulerTimeout(
                f"the scheduler at {self.address} did not answer {what} within {timeout:g} s"
            ) from None
        self._answered_at = asyncio.get_running_loop().time()
        return answer

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        last_beat = loop.time()
        while not self._closing:
            await asyncio.sleep(self.heartbeat_interval)
            if self._answered_at > last_beat:
                responsive = True  # it answered another call since the last beat (e.g. the cluster's sampling)
            else:
                try:
                    await self._call(self._rpc.echo(data="clustermgr"), self.heartbeat_timeout, "a heartbeat")
                    responsive = True
                except SchedulerTimeout:
                    responsive = False
                except OSError:  # connection gone: the worker-status stream reports the loss
                    continue
            last_beat = loop.time()
            if responsive != self.responsive:
                self.responsive = responsive
                log.warning("scheduler %s is %s", self.address, "answering again" if responsive else "not answering")
                if self._on_responsive is not None:
                    self._on_responsive(responsive)

    async def _read(self) -> None:
        try:
            while True:
                messages = await self._comm.read()
                for op, message in messages:
                    if op == "add":
                        for address, info in message["workers"].items():
                            self._on_added(address, info)
                    elif op == "remove":
                        self._on_removed(message)
                    elif op == WORK_OP and self.on_work is not None:
                        self.on_work(message)
        except (OSError, asyncio.CancelledError):
            pass
        except Exception:  # a malformed message must not kill the reader silently
            log.exception("worker-status stream of %s failed", self.address)
        if not self._closing:
            self._on_lost()

    async def load(self, target_duration: float) -> dict[str, Any]:
        return await self._call(
            self._rpc.clustermgr_load(target_duration=target_duration), self.call_timeout, "the load report"
        )

    async def workers_to_close(self, candidates: list[str], n: int) -> list[str]:
        return await self._call(
            self._rpc.clustermgr_workers_to_close(candidates=candidates, n=n),
            self.call_timeout,
            "which workers to close",
        )

    async def worker_metrics(self) -> dict[str, dict[str, float]]:
        """Each connected worker's memory in use (bytes, its process's), memory limit and CPU (percent of a core)."""
        identity = await self._call(self._rpc.identity(n_workers=-1), self.call_timeout, "the workers' metrics")
        return {
            address: {
                "memory": float((info.get("metrics") or {}).get("memory") or 0),
                "memory_limit": float(info.get("memory_limit") or 0),
                "cpu": float((info.get("metrics") or {}).get("cpu") or 0),
            }
            for address, info in identity.get("workers", {}).items()
        }

    async def set_idle_timeout(self, seconds: float | None) -> None:
        await self._rpc.clustermgr_set_idle_timeout(seconds=seconds)

    async def retire_workers(self, addresses: list[str], close: bool = False) -> list[str]:
        """Retire politely (data moved to survivors); returns the addresses actually retired.

        ``close``: the scheduler also tells each retired worker (and its nanny) to close, so it leaves without
        a signal and the scheduler logs no warning about it (no heartbeat from a removed worker, no cut stream).
        """
        retired = await self._call(
            self._rpc.retire_workers(workers=addresses, close_workers=close, remove=True),
            self.retire_timeout,
            "retiring workers",
        )
        return list(retired)

    async def close(self) -> None:
        self._closing = True
        if self._comm is not None:
            self._comm.abort()  # not close(): a stopped scheduler would never acknowledge it
        await cancel_and_wait(self._heartbeat, self._reader)
        if self._rpc is None:  # never started
            return
        try:
            await asyncio.wait_for(self._rpc.close_rpc(), self.call_timeout)
        except asyncio.TimeoutError:
            log.warning("closing the connections to scheduler %s took more than %g s", self.address, self.call_timeout)
