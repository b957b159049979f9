"""The gateway backend: one cluster of a dask-gateway server, created or found there, scaled and stopped through its API.

The gateway starts the scheduler and the workers (on Kubernetes, a batch system or local processes,
whatever its own backend is) and reaches them through its proxy over TLS; this backend only speaks to
the gateway's REST API with dask-gateway's own client (``dask_gateway.Gateway``), and writes the
cluster's TLS credentials, which the gateway hands out, into the cluster's work folder so that the
server's link, ``clustermgr_lab.connect`` and the inserted cell use them like any cluster's.

dask-gateway's client imports distributed: the server asks the gateway from its helper process
(``BackendContext.helper``, :mod:`.remote`), where the cluster's scheduler link runs too
(:attr:`GatewayBackend.hosted_link_kind`); the server itself imports neither. The two reads it makes
while someone uses it, the gateway's options and whether this user runs clusters there, it makes itself
(:mod:`.direct_reads`), so that an open sidebar does not keep that process alive.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlparse

from traitlets import Float

from clustermgr_lab.backends.base import Backend, Capabilities, HelperProcess, SchedulerEndpoint, TemplateProbe
from clustermgr_lab.backends.gateway import direct_reads
from clustermgr_lab.common.security import private_folder
from clustermgr_lab.domain.errors import BackendError, Conflict, InvalidRequest
from clustermgr_lab.domain.options import BackendOption, UserOption
from clustermgr_lab.domain.spec import WorkerGroup

AUTH_TYPES = ("basic", "jupyterhub", "kerberos")
#: dask-gateway's option types → the user option types of a template (its ``mapping`` type has no form field here).
OPTION_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "string": "string", "select": "string"}


def _url(value: Any, field_name: str) -> str:
    parsed = urlparse(value) if isinstance(value, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InvalidRequest(f"must be an http:// or https:// URL of the gateway, not {value!r}", field_name)
    return value.rstrip("/")


def _public(value: Any, field_name: str) -> str:
    """An http(s) URL, or a path on the page's own host (``/services/dask-gateway``, as under JupyterHub)."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//"):
        return value.rstrip("/")
    return _url(value, field_name)


def _proxy(value: Any, field_name: str) -> str:
    text = value.split("://", 1)[-1] if isinstance(value, str) else ""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidRequest(
            f"must be the gateway proxy's host:port (or gateway://host:port), not {value!r}", field_name
        )
    return f"gateway://{text}"


def _auth(value: Any, field_name: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or value.get("type") not in AUTH_TYPES:
        raise InvalidRequest(
            f"must be an object whose type is one of {', '.join(AUTH_TYPES)} (e.g. {{'type': 'jupyterhub'}}), "
            f"not {value!r}",
            field_name,
        )
    allowed = {"basic": {"type", "username", "password"}}.get(value["type"], {"type"})
    unknown = set(value) - allowed
    if unknown:
        raise InvalidRequest(f"{value['type']} authentication takes only {', '.join(sorted(allowed))}", field_name)
    if not all(isinstance(v, str) for v in value.values()):
        raise InvalidRequest("every setting of the authentication must be a string", field_name)
    return dict(value)


def _mapping(value: Any, field_name: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidRequest(f"must be an object of option name -> value, not {value!r}", field_name)
    return dict(value)


async def ask_gateway(
    options: Mapping[str, Any], call: str, timeout: float, helper: HelperProcess | None = None, **fields: Any
) -> Any:
    """A gateway ``call`` (:data:`.remote.CALLS`) with a template's ``options``, asked from ``helper`` (the server's
    helper process) or, without one, from this process. Raises what :func:`.remote.serve_gateway_request` raises."""
    message = {"op": "gateway", "call": call, "options": dict(options), "timeout": timeout, **fields}
    if helper is not None:
        return await helper.ask(message, timeout)
    from clustermgr_lab.backends.gateway.remote import serve_gateway_request  # imports dask-gateway, distributed

    return await serve_gateway_request(message)


def user_options_of(spec: list[dict[str, Any]]) -> tuple[UserOption, ...]:
    """A gateway's ``/api/v1/options`` specification as a template's user options: same fields, defaults, bounds, choices.

    Examples
    --------
    >>> [o.to_dict()["maximum"] for o in user_options_of([
    ...     {"field": "worker_cores", "label": "Cores", "default": 1, "spec": {"type": "int", "min": 1, "max": 4}}])]
    [4]
    """
    options = []
    for field in spec:
        kind = field["spec"]["type"]
        if kind not in OPTION_TYPES:
            continue  # a mapping: left to the gateway's default
        options.append(
            UserOption(
                name=field["field"],
                type=OPTION_TYPES[kind],
                default=field["default"],
                label=field.get("label") or field["field"],
                choices=tuple(field["spec"]["options"]) if kind == "select" else None,
                minimum=field["spec"].get("min"),
                maximum=field["spec"].get("max"),
            )
        )
    return tuple(options)


class GatewayBackend(Backend):
    """One cluster of a dask-gateway server: created there (or found there, made with ``address=``), scaled, stopped.

    Workers are the gateway's: scaling sets the gateway cluster's worker count, after this server's
    scheduler link has retired the workers to go (their data moved, as for any cluster), and the
    gateway's worker names are matched to the names this server requested in the order they connect.

    Parameters
    ----------
    address : str, optional
        ``gateway://proxy-host:port/cluster-name``: a cluster that runs on the gateway already (found
        there, or stored by an earlier server); without it, :meth:`start_scheduler` creates one.
    """

    name = "gateway"
    description = "Clusters of a dask-gateway server (Kubernetes, HPC, YARN or local processes behind it)"
    capabilities = Capabilities(
        multiple_groups=False,
        runs_processes_here=False,
        editable_spec=False,
        reasons={
            "multiple_groups": "a gateway cluster has one kind of worker, set by its options",
            "editable_spec": "the gateway sets its workers' size from the cluster's options",
            "runs_processes_here": "the gateway runs its scheduler and workers",
        },
    )
    template_options: ClassVar[Mapping[str, BackendOption]] = {
        "gateway_address": BackendOption(_url, "The gateway's address, e.g. 'https://gateway.example.org'."),
        "proxy_address": BackendOption(_proxy, "The gateway's scheduler proxy, host:port (default: as the address)."),
        "public_address": BackendOption(_public, "The gateway's address as a browser reaches it (dashboards)."),
        "auth": BackendOption(_auth, "How to authenticate: {'type': 'jupyterhub' | 'basic' | 'kerberos', ...}."),
        "cluster_options": BackendOption(_mapping, "Cluster options sent to the gateway (the user's, from its form)."),
    }
    user_options_option = "cluster_options"
    attaches = True
    #: The cluster's link polls its scheduler through the gateway's proxy (:class:`.link.GatewaySchedulerLink`), in
    #: the helper process when the server has one.
    hosted_link_kind: ClassVar[str | None] = "gateway"
    uses_launcher = False  # the gateway starts its scheduler and workers
    dashboard_over_tls: ClassVar[bool] = False
    start_timeout = Float(300.0, config=True, help="Seconds the gateway gets to start a cluster's scheduler.")
    request_timeout = Float(30.0, config=True, help="Seconds one request to the gateway's API may take.")

    def __init__(self, *args: Any, address: str | None = None, **kwargs: Any):
        self.gateway_address: str | None = None
        self.proxy_address: str | None = None
        self.public_address: str | None = None
        self.auth: dict[str, str] | None = None
        self.cluster_options: dict[str, Any] = {}
        super().__init__(*args, **kwargs)
        self.address = address
        self.dashboard_link: str | None = None
        self._requested: list[str] = []  # worker names this server asked for, oldest first
        self._claimed: dict[str, str] = {}  # the gateway's worker name -> the requested name it is
        self._foreign: set[str] = set()  # connected gateway workers this server did not request (made before it)
        # this cluster's link tells which gateway workers left, so that those made before it stop counting
        self.scheduler_link = partial(_gateway_link, on_gone=self.worker_gone)

    @property
    def cluster_name(self) -> str | None:
        """The gateway's name of the cluster (the last part of its address)."""
        return self.address.rstrip("/").rsplit("/", 1)[-1] if self.address else None

    def _options(self) -> dict[str, Any]:
        return {
            "gateway_address": self.gateway_address,
            "proxy_address": self.proxy_address,
            "public_address": self.public_address,
            "auth": self.auth,
        }

    async def _ask(self, call: str, what: str, timeout: float | None = None, **fields: Any) -> Any:
        """Ask the gateway; its refusals and silences become errors that say what was asked."""
        if self.gateway_address is None:
            raise BackendError("the template names no gateway (options.gateway_address)")
        timeout = timeout or self.request_timeout
        try:
            return await ask_gateway(self._options(), call, timeout, self.context.helper, **fields)
        except asyncio.TimeoutError:
            raise BackendError(f"the gateway at {self.gateway_address} did not answer ({what}) in time") from None
        except ValueError as exc:  # 404 and 422: the gateway's own words
            raise BackendError(f"the gateway refused to {what}: {exc}") from None
        except Exception as exc:  # refused connection, 5xx, a cluster that failed to start, no helper process
            raise BackendError(f"the gateway at {self.gateway_address} could not {what}: {exc}") from None

    # -- the template ---------------------------------------------------------------------------------

    @classmethod
    async def probe(
        cls, options: Mapping[str, Any], timeout: float, helper: HelperProcess | None = None
    ) -> TemplateProbe:
        """Whether the gateway answers (with these credentials), and its cluster options as user options."""
        address = options.get("gateway_address")
        if direct_reads.reads_directly(options):
            asking = direct_reads.read_options(options, timeout)
        else:
            asking = ask_gateway(options, "options", timeout, helper)
        try:
            spec = await asyncio.wait_for(asking, timeout + 1)
        except asyncio.TimeoutError:
            return TemplateProbe(f"the gateway at {address} did not answer within {timeout:g} s")
        except Exception as exc:
            return TemplateProbe(f"the gateway at {address} cannot be used: {exc or type(exc).__name__}")
        return TemplateProbe(None, user_options_of(spec))

    @classmethod
    async def create_ahead(cls, options: Mapping[str, Any], timeout: float, helper: HelperProcess | None = None) -> str:
        """Create the cluster on the gateway while the request waits: a value it refuses is a 400 naming the field.

        The gateway checks the options (its fields, then its options handler) before it creates anything,
        and answers 422 with its message; the field is the first of the request's options the message names.
        """
        values = dict(options.get("cluster_options") or {})
        address = options.get("gateway_address")
        try:
            return await ask_gateway(options, "submit", timeout, helper, cluster_options=values)
        except ValueError as exc:  # 422: the gateway's own words
            message = str(exc)
            named = sorted((message.index(k), k) for k in values if k in message)
            field = f"options.{named[0][1]}" if named else "options"
            raise InvalidRequest(f"the gateway refused it: {message}", field) from None
        except asyncio.TimeoutError:
            raise Conflict(f"the gateway at {address} did not answer within {timeout:g} s", "template") from None
        except Exception as exc:
            raise Conflict(f"the gateway at {address} cannot be used: {exc}", "template") from None

    @classmethod
    async def withdraw_ahead(
        cls, options: Mapping[str, Any], address: str, timeout: float, helper: HelperProcess | None = None
    ) -> None:
        """Stop on the gateway a cluster :meth:`create_ahead` made that the server did not list."""
        await ask_gateway(options, "stop", timeout, helper, name=address.rsplit("/", 1)[-1])

    @classmethod
    def worker_shape(cls, group: WorkerGroup, values: Mapping[str, Any]) -> WorkerGroup:
        """The group with the cores and memory dask-gateway's conventional options give (``worker_cores``, and
        ``worker_memory`` in GiB, as in dask-gateway's documentation); other options leave it as the template has it.

        Examples
        --------
        >>> from clustermgr_lab.domain.spec import parse_group
        >>> group = parse_group({"name": "default", "count": 0, "threads": 1, "memory": "1 GiB"}, "group")
        >>> shaped = GatewayBackend.worker_shape(group, {"worker_cores": 2, "worker_memory": 0.5})
        >>> shaped.threads, shaped.memory
        (2, 536870912)
        """
        cores, memory = values.get("worker_cores"), values.get("worker_memory")
        if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0:
            group = replace(group, threads=cores)
        if isinstance(memory, (int, float)) and not isinstance(memory, bool) and memory > 0:
            group = replace(group, memory=int(memory * 2**30))
        return group

    @classmethod
    async def find_clusters(
        cls, options: Mapping[str, Any], timeout: float, helper: HelperProcess | None = None
    ) -> list[str]:
        """The addresses of this user's running clusters on the gateway, made from here or from anywhere else.

        Where the server reads the gateway itself (:mod:`.direct_reads`), it asks the links' process for their
        addresses (as dask-gateway's client makes them) only when the gateway runs any: a server whose user has
        no cluster there does not start that process.
        """
        if direct_reads.reads_directly(options) and not await direct_reads.read_running_names(options, timeout):
            return []
        return await ask_gateway(options, "running", timeout, helper)

    # -- the cluster ----------------------------------------------------------------------------------

    async def start_scheduler(self) -> SchedulerEndpoint:
        """Create the cluster on the gateway (or find the one of ``address``), wait until it runs, take its credentials."""
        if self.security is None:
            raise BackendError("a gateway cluster is reached over TLS only: its template must not say 'tls': false")
        if self.address is None:
            self.address = await self._ask("submit", "create a cluster", cluster_options=self.cluster_options)
            self._notify_change()  # known from now on: it is not "found" as another
        name = self.cluster_name
        timeout = self.start_timeout + self.request_timeout
        report = await self._ask("start", f"start cluster {name}", timeout, name=name)
        if report["tls_cert"] is None:
            raise BackendError(f"gateway cluster {name} is {report['status']}, not running")
        await asyncio.to_thread(self._write_credentials, report["tls_cert"], report["tls_key"])
        self.dashboard_link = report["dashboard_link"]
        scheduler_id = await self._ask(
            "scheduler_id", "reach the cluster's scheduler", address=self.address, tls=self.security.to_dict()
        )
        listed_as = self.context.listed_as
        other = listed_as(scheduler_id) if listed_as is not None and scheduler_id else None
        if other is not None:
            raise BackendError(f"gateway cluster {name} is listed already, as {other!r}")
        return SchedulerEndpoint(self.address, None, scheduler_id)

    def _write_credentials(self, cert: str, key: str) -> None:
        """The gateway's certificate (its own CA) and key, as the cluster's TLS files (this user's only)."""
        credentials = self.security
        private_folder(Path(credentials.key).parent)
        for path, text in ((credentials.ca_file, cert), (credentials.cert, cert), (credentials.key, key)):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(text)

    async def closed_by_owner(self) -> str | None:
        """Once the scheduler is gone: "stopped on the gateway" when the gateway says it stopped it; None: it was lost."""
        try:
            report = await self._ask("report", "report on the cluster", name=self.cluster_name)
        except BackendError:
            return None
        if report["stopped"]:
            return "stopped on the gateway (by its user, its idle timeout, or the gateway's administrator)"
        return None

    def claim_worker(self, info: Mapping[str, Any]) -> str:
        """The requested worker a newly connected gateway worker is: the oldest requested one not claimed yet."""
        gateway_name = str(info.get("name"))
        if gateway_name not in self._claimed:
            unclaimed = [n for n in self._requested if n not in self._claimed.values()]
            if not unclaimed:
                self._foreign.add(gateway_name)  # one it had before this server listed it: shown as not ours
                return gateway_name
            self._claimed[gateway_name] = unclaimed[0]
        return self._claimed[gateway_name]

    def worker_gone(self, gateway_name: str) -> None:
        """A gateway worker left (its link tells, by the gateway's name of it): it no longer counts."""
        self._foreign.discard(gateway_name)
        self._claimed.pop(gateway_name, None)

    def started(self) -> set[str]:
        return set(self._requested)

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        self._requested += names
        await self._scale()

    async def scale_down(self, names: list[str]) -> None:
        gone = set(names)
        self._requested = [n for n in self._requested if n not in gone]
        self._claimed = {g: n for g, n in self._claimed.items() if n not in gone}
        await self._scale()

    async def _scale(self) -> None:
        count = len(self._requested) + len(self._foreign)  # the workers it had when found stay
        await self._ask("scale", f"scale to {count} workers", name=self.cluster_name, count=count)
        self._notify_change()

    async def close(self) -> None:
        """Stop the cluster on the gateway (its scheduler and workers)."""
        if self.cluster_name is not None and self.gateway_address is not None:
            await self._ask("stop", f"stop {self.cluster_name}", name=self.cluster_name)


def _gateway_link(*args: Any, **kwargs: Any):
    """The cluster's link when it runs in this process (made without a helper process): imports distributed."""
    from clustermgr_lab.backends.gateway.link import GatewaySchedulerLink

    return GatewaySchedulerLink(*args, **kwargs)
