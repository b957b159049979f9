"""The manager's line to one scheduler: RPC calls and the pushed stream of worker joins/leaves."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from distributed.comm import connect
from distributed.comm.addressing import parse_address, parse_host_port
from distributed.core import rpc

log = logging.getLogger(__name__)

WorkerAdded = Callable[[str, dict], None]
WorkerRemoved = Callable[[str], None]


async def scheduler_identity(address: str, timeout: float = 10) -> dict[str, Any]:
    """The scheduler's ``identity()`` (its ``id`` included), or OSError / TimeoutError if it does not answer."""
    host, port = parse_host_port(parse_address(address)[1])
    # A refused connection is final: distributed's connect() would retry it until the timeout.
    _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    writer.close()
    await writer.wait_closed()
    connection = rpc(address, timeout=timeout)
    try:
        return await asyncio.wait_for(connection.identity(n_workers=0), timeout)
    finally:
        await connection.close_rpc()


class SchedulerLink:
    """Talks to a scheduler in another process.

    Worker arrivals and departures are *pushed* by the scheduler
    (``subscribe_worker_status``, as ``distributed.deploy.Cluster`` does) and handed to
    ``on_added(address, identity)`` / ``on_removed(address)``; nothing is polled.
    """

    def __init__(self, address: str, on_added: WorkerAdded, on_removed: WorkerRemoved, on_lost: Callable[[], None]):
        self.address = address
        self._on_added = on_added
        self._on_removed = on_removed
        self._on_lost = on_lost
        self._rpc = rpc(address)
        self._comm = None
        self._reader: asyncio.Task | None = None
        self._closing = False

    async def start(self, timeout: float = 30) -> None:
        self._comm = await connect(self.address, timeout=timeout)
        await self._comm.write({"op": "subscribe_worker_status"})
        identity = await self._comm.read()
        for address, info in identity.get("workers", {}).items():
            self._on_added(address, info)
        self._reader = asyncio.ensure_future(self._read())

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
        except (OSError, asyncio.CancelledError):
            pass
        except Exception:  # a malformed message must not kill the reader silently
            log.exception("worker-status stream of %s failed", self.address)
        if not self._closing:
            self._on_lost()

    async def load(self, target_duration: float) -> dict[str, Any]:
        return await self._rpc.clustermgr_load(target_duration=target_duration)

    async def workers_to_close(self, candidates: list[str], n: int) -> list[str]:
        return await self._rpc.clustermgr_workers_to_close(candidates=candidates, n=n)

    async def set_idle_timeout(self, seconds: float | None) -> None:
        await self._rpc.clustermgr_set_idle_timeout(seconds=seconds)

    async def retire_workers(self, addresses: list[str]) -> list[str]:
        """Retire politely (data moved to survivors); returns the addresses actually retired."""
        retired = await self._rpc.retire_workers(workers=addresses, close_workers=False, remove=True)
        return list(retired)

    async def close(self) -> None:
        self._closing = True
        if self._comm is not None:
            await self._comm.close()
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except asyncio.CancelledError:
                pass
        await self._rpc.close_rpc()
