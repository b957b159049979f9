"""The backend of clusters started elsewhere (attached or discovered): it reaches their scheduler, and starts or stops nothing."""

from __future__ import annotations

import ssl
from typing import Any, ClassVar

from traitlets import Float

from clustermgr_lab.backends.base import Backend, Capabilities, SchedulerEndpoint
from clustermgr_lab.common.addresses import parse_address, parse_host_port, unparse_host_port
from clustermgr_lab.domain.errors import BackendError, Conflict, InvalidRequest
from clustermgr_lab.domain.fields import check_number
from clustermgr_lab.domain.spec import WorkerGroup
from clustermgr_lab.foreign.scheduler import ForeignSchedulerError, ForeignSchedulerLink, foreign_identity

NOT_OURS = "its workers are started and stopped by whoever started it, not by this server; scale it there"


def parse_scheduler_address(value: Any, field: str = "attach", schemes: tuple[str, ...] = ("tcp",)) -> str:
    """A scheduler's comm address ``tcp://host:port`` (or another of ``schemes``, e.g. ``tls``), checked and normalised.

    Examples
    --------
    >>> parse_scheduler_address("tcp://127.0.0.1:8786")
    'tcp://127.0.0.1:8786'
    >>> parse_scheduler_address("localhost:8786")
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
        raise InvalidRequest(
            f"must be a scheduler address such as 'tcp://127.0.0.1:8786', not {value!r}", field
        ) from None
    if scheme not in schemes or not host or not port:
        kinds = " or ".join(f"{s}://" for s in schemes)
        raise InvalidRequest(f"must be a {kinds} scheduler address with a host and a port, not {value!r}", field)
    message = f"must name a port from 1 to 65535, not {port!r} (in {value!r})"
    check_number(port, field, message, integer=True, minimum=1, maximum=65535)
    if not host.isprintable() or len(host) > 253:
        raise InvalidRequest(f"must name a printable host of at most 253 characters, not {value!r}", field)
    if host.lower() == "localhost":  # the same scheduler as 127.0.0.1: one name, so it is listed once
        host = "127.0.0.1"
    return f"{scheme}://{unparse_host_port(host, port)}"


class ExternalBackend(Backend):
    """A scheduler this server did not start: its identity is read, nothing is ever started or stopped.

    Closing it *detaches*: the scheduler and its workers keep running.

    Parameters
    ----------
    address : str
        The scheduler's comm address, ``tcp://host:port``, or ``tls://host:port`` with the context's
        ``security`` naming the certificate files to present (files of the server's user).
    """

    name = "external"
    description = "A scheduler started elsewhere; attached, never started or stopped here"
    capabilities = Capabilities(
        can_scale=False,
        can_stop=False,
        multiple_groups=False,
        readoptable=False,
        runs_processes_here=False,
        exact_retire=False,
        editable_spec=False,
        enforces_tls=False,
    )
    connect_timeout = Float(10.0, config=True, help="Seconds to wait for the scheduler to answer when attaching.")
    attaches = True
    uses_launcher = False  # started elsewhere
    #: Observed by polling: subscribing would take the worker stream from the user's own Cluster object.
    scheduler_link: ClassVar[type] = ForeignSchedulerLink
    #: Its dashboard is proxied over plain HTTP (distributed's default, also for a tls:// scheduler).
    dashboard_over_tls: ClassVar[bool] = False

    def __init__(self, *args, address: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.address = address

    async def start_scheduler(self) -> SchedulerEndpoint:
        """Reach the scheduler and read where its dashboard is (on the scheduler's host, and nowhere else).

        It is an untrusted peer: its answer is size-capped, never unpickled, and checked against a schema.
        """
        try:
            # the files are opened in a thread, after a check that each is a regular file (a FIFO would block)
            ssl_context = await self.security.ssl_context_off_loop(self.connect_timeout) if self.security else None
        except (OSError, ssl.SSLError) as exc:
            raise BackendError(f"cannot use the certificate files of {self.address}: {exc}") from None
        try:
            identity = await foreign_identity(self.address, self.connect_timeout, ssl_context=ssl_context)
        except ForeignSchedulerError as exc:
            raise BackendError(f"cannot reach the scheduler at {self.address}: {exc}") from None
        listed_as = self.context.listed_as
        other = listed_as(identity.scheduler_id) if listed_as is not None else None
        if other is not None:  # e.g. attached as 127.0.0.1 and again by this host's name
            raise BackendError(
                f"the scheduler at {self.address} ({identity.scheduler_id}) is listed already, as {other!r}"
            )
        host = parse_host_port(parse_address(self.address)[1])[0]
        port = identity.dashboard_port
        dashboard = unparse_host_port(host, port) if port else None
        return SchedulerEndpoint(self.address, dashboard, identity.scheduler_id)  # the id: re-attached after a restart

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        raise Conflict(f"cluster {self.cluster_id} is attached: {NOT_OURS}")

    async def scale_down(self, names: list[str]) -> None:
        if names:
            raise Conflict(f"cluster {self.cluster_id} is attached: {NOT_OURS}")

    async def close(self) -> None:
        """Detach: the scheduler is not ours to stop."""
