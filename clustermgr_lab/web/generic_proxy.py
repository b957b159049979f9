"""jupyter-server-proxy's generic ``/proxy/<port>`` routes, kept from the ports of this server's clusters.

jupyter-server-proxy stays on as the site installed it: its named ``ServerProcess`` apps, its
``host_allowlist`` and its generic routes ``/proxy/<port>/…``, ``/proxy/<host>:<port>/…`` and
their ``/proxy/absolute/…`` forms all work as before. Only in this server, and only for those
generic routes, a request whose target is the scheduler or dashboard port of a cluster this server
lists is refused (403, before any connection is made); so is one of its workers' ports (comm, nanny,
worker dashboard). Such a dashboard is served by this server's
own proxy only (:mod:`.dashboard_proxy`): sandboxed, behind its per-cluster key, read-only; through
the generic route it would run on Jupyter's own origin, where its scripts could read Jupyter's
cookies and XSRF token.

How: once every extension has added its routes, :func:`confine_generic_routes` replaces the handler
class of those four routes (``LocalProxyHandler`` and ``RemoteProxyHandler`` exactly, never a named
app's subclass) in this server's routing table by a subclass that checks the target first. The
site's configuration, and every other server, are untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from tornado import web

from clustermgr_lab.common.addresses import parse_address, parse_host_port
from clustermgr_lab.foreign.announcements import local_addresses

if TYPE_CHECKING:
    from clustermgr_lab.cluster.managed import ManagedCluster

#: Hosts that name every interface of the machine a process listens on.
ALL_INTERFACES = frozenset({"", "0.0.0.0", "::", "*"})


def _workers(cluster) -> list[tuple[str | None, dict]]:
    """``(address, scheduler info)`` of each worker connected to a listed cluster (its own and others)."""
    reconciler = getattr(cluster, "reconciler", None)
    if reconciler is None:
        return []
    return [(r.address, r.info or {}) for r in reconciler.workers.values()] + list(reconciler.external.items())


def cluster_ports(clusters: Iterable[ManagedCluster]) -> dict[int, set[str]]:
    """Port -> the hosts on which a listed cluster's scheduler, dashboard or workers (comm, nanny, worker dashboard)
    listen on it.

    >>> from types import SimpleNamespace as NS
    >>> endpoint = NS(address="tls://127.0.0.1:8786", dashboard_address="127.0.0.1:8787")
    >>> cluster_ports([NS(endpoint=endpoint), NS(endpoint=None)])
    {8786: {'127.0.0.1'}, 8787: {'127.0.0.1'}}
    """
    ports: dict[int, set[str]] = {}

    def add(address: str | None, port: int | None = None) -> None:
        if not address:
            return
        with contextlib.suppress(ValueError, TypeError):
            location = parse_address(address)[1] if "://" in address else address
            host, listed_port = parse_host_port(location)
            port = port if port is not None else listed_port
            if isinstance(port, int):
                ports.setdefault(port, set()).add(host.strip("[]"))

    for cluster in clusters:
        endpoint = cluster.endpoint
        if endpoint is None:
            continue
        add(endpoint.address)
        add(endpoint.dashboard_address)
        for address, info in _workers(cluster):
            add(address)
            add(info.get("nanny"))
            dashboard = (info.get("services") or {}).get("dashboard")
            if isinstance(dashboard, int):
                add(address, dashboard)
    return ports


async def _resolve(host: str) -> set[ipaddress._BaseAddress]:
    """The IP addresses a host name stands for (none when it does not resolve)."""
    host = host.strip("[]")
    with contextlib.suppress(ValueError):
        return {ipaddress.ip_address(host)}
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return set()
    found = set()
    for info in infos:
        with contextlib.suppress(ValueError):
            found.add(ipaddress.ip_address(info[4][0].split("%", 1)[0]))
    return found


def _is_this_machine(addresses: set[ipaddress._BaseAddress], local: set[ipaddress._BaseAddress]) -> bool:
    return any(a.is_loopback or a.is_unspecified or a in local for a in addresses)


async def reaches_a_cluster(host: str, port: int, clusters: Iterable[ManagedCluster]) -> bool:
    """Whether ``host:port`` is where a listed cluster's scheduler or dashboard listens.

    A host is matched by what it resolves to: any spelling of this machine (``localhost``,
    ``127.0.0.2``, its name, an address of one of its interfaces) matches a cluster listening on
    this machine (or on all its interfaces); another host matches a cluster listening there.
    """
    hosts = cluster_ports(clusters).get(int(port))
    if not hosts:
        return False
    target = await _resolve(host)
    local = local_addresses()
    target_here = _is_this_machine(target, local)
    for cluster_host in hosts:
        if cluster_host in ALL_INTERFACES:
            if target_here:
                return True
            continue
        cluster_addresses = await _resolve(cluster_host)
        if target & cluster_addresses or (target_here and _is_this_machine(cluster_addresses, local)):
            return True
    return False


REFUSAL = (
    "port {port} belongs to a Dask cluster that clustermgr-lab manages in this server: open its dashboard "
    "through the cluster's dashboard link (dashboard_url), not through /proxy/"
)


def _confined(handler_class: type, target: Callable[[tuple], tuple[str, str]], clusters: Callable[[], list]) -> type:
    """A subclass of a generic proxy handler that refuses the ports of the listed clusters."""

    class Confined(handler_class):
        #: jupyter-server-proxy's route, not one of this extension's (tests/test_route_matrix.py leaves it out)
        confines_jupyter_server_proxy = True

        async def prepare(self, *args, **kwargs):
            await super().prepare(*args, **kwargs)  # authentication first, as jupyter-server-proxy does it
            if self._finished:
                return
            host, port = target(self.path_args)
            if await reaches_a_cluster(host, int(port), clusters()):
                self.log.warning("clustermgr: refused /proxy/ to %s:%s, a port of one of its clusters", host, port)
                raise web.HTTPError(403, REFUSAL.format(port=port))

    Confined.__name__ = Confined.__qualname__ = f"ClustermgrConfined{handler_class.__name__}"
    return Confined


def _rules(router) -> Iterable:
    for rule in getattr(router, "rules", ()):
        yield rule
        if hasattr(rule.target, "rules"):
            yield from _rules(rule.target)


def confine_generic_routes(web_app, clusters: Callable[[], list]) -> int:
    """Replace the handler of jupyter-server-proxy's generic routes in ``web_app`` by one that refuses the ports
    of ``clusters()``; the number of routes confined (0 when jupyter-server-proxy is not loaded)."""
    try:
        from jupyter_server_proxy.handlers import LocalProxyHandler, RemoteProxyHandler
    except ImportError:  # not installed: nothing to confine
        return 0
    local = _confined(LocalProxyHandler, lambda args: ("localhost", args[0]), clusters)
    remote = _confined(RemoteProxyHandler, lambda args: (args[0], args[1]), clusters)
    confined = 0
    for router in (web_app.default_router, web_app.wildcard_router):
        for rule in _rules(router):
            if rule.target is LocalProxyHandler:  # exactly: a named ServerProcess app's subclass is the site's
                rule.target, confined = local, confined + 1
            elif rule.target is RemoteProxyHandler:
                rule.target, confined = remote, confined + 1
    return confined
