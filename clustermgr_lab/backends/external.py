"""The backend of clusters started elsewhere (attached or discovered): it reaches their scheduler, and starts or stops nothing."""

from __future__ import annotations

import asyncio

from typing import Any

from distributed.comm import parse_address, parse_host_port, unparse_host_port
from distributed.core import rpc

from ..errors import BackendError, Conflict, InvalidRequest
from ..spec import WorkerGroup
from traitlets import Float

from .base import Backend, Capabilities, SchedulerEndpoint

NOT_OURS = "its workers are started and stopped by whoever started it, not by this server; scale it there"


def parse_scheduler_address(value: Any, field: str = "attach") -> str:
    """A scheduler's comm address ``tcp://host:port``, checked and normalised.

    Examples
    --------
    >>> parse_scheduler_address("tcp://127.0.0.1:8786")
    'tcp://127.0.0.1:8786'
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"must be a scheduler address such as 'tcp://127.0.0.1:8786', not {value!r}", field)
    text = value.strip()
    if "://" not in text:
        text = f"tcp://{text}"
    try:
        scheme, location = parse_address(text)
        host, port = parse_host_port(location)
    except ValueError:
        raise InvalidRequest(f"must be a scheduler address such as 'tcp://127.0.0.1:8786', not {value!r}", field) from None
    if scheme != "tcp" or not host or not port:
        raise InvalidRequest(f"must be a tcp:// scheduler address with a host and a port, not {value!r}", field)
    return f"tcp://{unparse_host_port(host, port)}"


class ExternalBackend(Backend):
    """A scheduler this server did not start: its identity is read, nothing is ever started or stopped.

    Closing it *detaches*: the scheduler and its workers keep running.

    Parameters
    ----------
    address : str
        The scheduler's comm address, ``tcp://host:port``.
    """

    name = "external"
    description = "A scheduler started elsewhere; attached, never started or stopped here"
    capabilities = Capabilities(
        can_scale=False, can_stop=False, multiple_groups=False, readoptable=False, runs_processes_here=False
    )
    connect_timeout = Float(10.0, config=True, help="Seconds to wait for the scheduler to answer when attaching.")

    def __init__(self, *args, address: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.address = address

    async def start_scheduler(self) -> SchedulerEndpoint:
        """Reach the scheduler and read where its dashboard is (on the scheduler's host, and nowhere else)."""
        scheduler = rpc(self.address, timeout=self.connect_timeout)
        try:
            # rpc's timeout bounds the connection only: a stopped scheduler accepts it and never answers
            identity = await asyncio.wait_for(scheduler.identity(), self.connect_timeout)
        except Exception as exc:
            raise BackendError(f"cannot reach the scheduler at {self.address}: {exc}") from None
        finally:
            await scheduler.close_rpc()
        if identity.get("type") != "Scheduler":
            raise BackendError(f"{self.address} is not a Dask scheduler (it says it is a {identity.get('type')!r})")
        host = parse_host_port(parse_address(self.address)[1])[0]
        dashboard_port = (identity.get("services") or {}).get("dashboard")
        dashboard = unparse_host_port(host, dashboard_port) if dashboard_port else None
        return SchedulerEndpoint(self.address, dashboard, identity.get("id"))  # the id: re-attached after a restart

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        raise Conflict(f"cluster {self.cluster_id} is attached: {NOT_OURS}")

    async def scale_down(self, names: list[str]) -> None:
        if names:
            raise Conflict(f"cluster {self.cluster_id} is attached: {NOT_OURS}")

    async def close(self) -> None:
        """Detach: the scheduler is not ours to stop."""
