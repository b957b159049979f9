"""The server's line to a gateway cluster's scheduler, through the gateway's proxy: workers observed by polling.

The scheduler runs where the gateway put it and loads the gateway's preload, not this server's: its
workers are observed by polling ``identity`` (never ``subscribe_worker_status``, which would take the
worker stream away from a notebook's own ``GatewayCluster`` object), and only distributed's own
handlers are called (``workers_to_close``, ``retire_workers``), and the load report for adaptive mode
when the gateway's schedulers load this server's preload (``clustermgr_load``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import dask_gateway.comm  # noqa: F401 - registers the gateway:// comm that reaches schedulers through the proxy
from distributed.core import rpc

from clustermgr_lab.cluster.scheduler_link import connection_args
from clustermgr_lab.common.tasks import cancel_and_wait
from clustermgr_lab.domain.errors import Conflict, SchedulerTimeout

if TYPE_CHECKING:
    from distributed.security import Security

    from clustermgr_lab.common.security import ClusterCredentials

log = logging.getLogger(__name__)

PRELOAD = "clustermgr_lab.preloads.scheduler"
NO_LOAD_REPORT = (
    "adaptive mode needs the load report of this server's scheduler preload, which this gateway's schedulers do "
    f"not load: add '--preload', '{PRELOAD}' to the gateway's c.ClusterConfig.scheduler_cmd (clustermgr_lab "
    "installed in the clusters' environment), or use dask-gateway's own cluster.adapt() from a notebook"
)


class GatewaySchedulerLink:
    """Observes a gateway cluster's workers by polling its scheduler's ``identity`` through the gateway's proxy.

    The same interface as :class:`~clustermgr_lab.cluster.scheduler_link.SchedulerLink` for the cluster:
    ``on_added`` / ``on_removed`` per worker (and ``on_gone`` with the gateway's name of a worker that left), ``on_lost`` once the scheduler is gone (the gateway
    stopped it: its proxy route is removed), ``on_responsive`` when it stops or resumes answering.
    """

    poll_interval = 1.0
    heartbeat_interval = 1.0
    heartbeat_timeout = 5.0
    #: Polls in a row that fail to connect before the scheduler counts as gone.
    lost_after = 3
    call_timeout = 10.0
    retire_timeout = 120.0

    def __init__(
        self,
        address: str,
        on_added: Callable[[str, dict], None],
        on_removed: Callable[[str], None],
        on_lost: Callable[[], None],
        on_responsive: Callable[[bool], None] | None = None,
        parent: object = None,  # the same signature as SchedulerLink's; nothing here is configurable
        security: Security | ClusterCredentials | None = None,
        on_gone: Callable[[str], None] | None = None,
    ):
        if security is None:
            raise Conflict(f"the gateway cluster at {address} is reached over TLS only, and it has no credentials")
        self.address = address
        self._on_added = on_added
        self._on_removed = on_removed
        self._on_lost = on_lost
        self._on_responsive = on_responsive
        self._on_gone = on_gone
        self._rpc = rpc(address, timeout=self.call_timeout, connection_args=connection_args(security))
        self._workers: dict[str, dict] = {}
        self._poller: asyncio.Task | None = None
        self._closing = False
        self.responsive = True
        self.on_work: Callable[[str], None] | None = None  # no wake-ups: adaptive mode runs on the gateway

    async def _call(self, what: str, timeout: float, **arguments: Any) -> Any:
        try:
            return await asyncio.wait_for(getattr(self._rpc, what)(**arguments), timeout)
        except asyncio.TimeoutError:
            raise SchedulerTimeout(
                f"the scheduler at {self.address} did not answer {what} within {timeout:g} s"
            ) from None

    async def start(self, timeout: float = 30) -> None:
        self._apply(await self._call("identity", min(timeout, self.call_timeout), n_workers=-1))
        self._poller = asyncio.ensure_future(self._poll())

    def _apply(self, identity: dict[str, Any]) -> None:
        workers = identity.get("workers") or {}
        for address in set(self._workers) - set(workers):
            info = self._workers.pop(address)
            self._on_removed(address)
            if self._on_gone is not None:
                self._on_gone(str(info.get("name")))
        for address, info in workers.items():
            known = address in self._workers
            self._workers[address] = info
            if not known:
                self._on_added(address, info)

    async def _poll(self) -> None:
        failures = 0
        while not self._closing:
            await asyncio.sleep(self.poll_interval)
            try:
                identity = await self._call("identity", self.heartbeat_timeout, n_workers=-1)
            except asyncio.CancelledError:
                raise
            except SchedulerTimeout:
                self._set_responsive(False)
                continue
            except Exception as exc:  # refused, reset, TLS closed: the proxy no longer routes to it
                failures += 1
                if failures >= self.lost_after:
                    log.warning("stopped observing the gateway cluster at %s: %s", self.address, exc)
                    break
                continue
            failures = 0
            self._set_responsive(True)
            self._apply(identity)
        if not self._closing:
            self._on_lost()

    def _set_responsive(self, responsive: bool) -> None:
        if responsive != self.responsive:
            self.responsive = responsive
            if self._on_responsive is not None:
                self._on_responsive(responsive)

    async def load(self, target_duration: float) -> dict[str, Any]:
        """The load report of the preload, for this server's adaptive policy (when the gateway's schedulers load it)."""
        report = await self._call("clustermgr_load", self.call_timeout, target_duration=target_duration)
        if report is None:  # distributed answers None to a handler it does not have
            raise Conflict(NO_LOAD_REPORT)
        return report

    async def set_idle_timeout(self, seconds: float | None) -> None:
        raise Conflict("the idle timeout of a gateway cluster is the gateway's (c.ClusterConfig.idle_timeout)")

    async def workers_to_close(self, candidates: list[str], n: int) -> list[str]:
        """The ``n`` of ``candidates`` the scheduler would close first (distributed's own choice: least data)."""
        chosen = await self._call("workers_to_close", self.call_timeout, n=n)
        preferred = [a for a in chosen if a in candidates]
        return (preferred + [a for a in candidates if a not in preferred])[:n]

    async def retire_workers(self, addresses: list[str], close: bool = True) -> list[str]:
        """Retire politely (data moved to survivors) and close them (whatever ``close`` says): the gateway then sees
        them closed."""
        retired = await self._call(
            "retire_workers", self.retire_timeout, workers=addresses, close_workers=True, remove=True
        )
        return list(retired)

    async def worker_metrics(self) -> dict[str, dict[str, float]]:
        """Each connected worker's memory in use, memory limit and CPU, from the last poll."""
        return {
            address: {
                "memory": float((info.get("metrics") or {}).get("memory") or 0),
                "memory_limit": float(info.get("memory_limit") or 0),
                "cpu": float((info.get("metrics") or {}).get("cpu") or 0),
            }
            for address, info in self._workers.items()
        }

    async def close(self) -> None:
        self._closing = True
        await cancel_and_wait(self._poller)
        try:
            await asyncio.wait_for(self._rpc.close_rpc(), self.call_timeout)
        except asyncio.TimeoutError:
            log.warning("closing the connections to the gateway cluster at %s timed out", self.address)
