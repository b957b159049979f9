"""The dashboard link a kernel's Client shows: through this server's proxy, so that it works wherever JupyterLab is opened.

In a kernel, ``client.dashboard_link`` (and the Client and cluster widgets' links) are Dask's
``distributed.dashboard.link`` template formatted with the dashboard's ``host`` and ``port``:
``http://127.0.0.1:<port>/status`` by default, which a browser on another machine cannot open.
The server gives the kernels it starts that template through ``DASK_DISTRIBUTED__DASHBOARD__LINK``
in their environment only (:mod:`.kernel_environment`; a link the site set itself is kept unless
``KernelDashboardLink.replace_site_link``): ``{base_url}clustermgr/dashboard-at/{host}/{port}/status``,
a path on the browser's own origin below the server's base URL (so JupyterHub's ``/user/<name>/``
prefix included). :class:`DashboardAtHandler` serves it: for an authenticated user allowed to
read clusters, it finds the one cluster this server lists whose dashboard is at that host and
port and redirects to that cluster's keyed dashboard URL (:mod:`.dashboard_proxy`); a host and port
of no listed cluster is a JSON 404, never a redirect elsewhere.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlparse

import dask.config
import yaml
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from traitlets import Bool, TraitError, Unicode, validate
from traitlets.config import LoggingConfigurable

from clustermgr_lab.common.addresses import get_address_host
from clustermgr_lab.domain.errors import NotFound
from clustermgr_lab.web.base import AUTH_RESOURCE, JSONErrorMixin, ManagerMixin

if TYPE_CHECKING:
    from clustermgr_lab.cluster.managed import ManagedCluster

LINK_ENV = "DASK_DISTRIBUTED__DASHBOARD__LINK"
ROUTE = "clustermgr/dashboard-at"
#: Names of this machine's loopback interface: a link's host and a cluster's may spell it differently.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def kernel_link_template(base_url: str, origin: str = "") -> str:
    """The ``distributed.dashboard.link`` template of this server's kernels.

    Dask formats it with ``host``, ``port``, ``scheme`` and the environment's variables, so any
    brace of the origin or base URL itself is doubled.

    >>> kernel_link_template("/user/ann/")
    '/user/ann/clustermgr/dashboard-at/{host}/{port}/status'
    >>> kernel_link_template("/", "https://jupyter.example.org/")
    'https://jupyter.example.org/clustermgr/dashboard-at/{host}/{port}/status'
    """
    prefix = origin.rstrip("/") + url_path_join("/", base_url, ROUTE)
    return prefix.replace("{", "{{").replace("}", "}}") + "/{host}/{port}/status"


def same_host(a: str, b: str) -> bool:
    """Whether two spellings of a host are the same host (as written, or both this machine's loopback).

    >>> same_host("localhost", "127.0.0.1"), same_host("[::1]", "127.0.0.1"), same_host("node1", "127.0.0.1")
    (True, True, False)
    """
    a, b = a.strip("[]").lower(), b.strip("[]").lower()
    return a == b or (a in LOOPBACK and b in LOOPBACK)


def find_cluster(clusters: list[ManagedCluster], host: str, port: int) -> ManagedCluster:
    """The listed cluster whose running dashboard is at ``host:port`` (only one can be, while it runs).

    ``host`` is the scheduler's host as the kernel's Client knows it (the host of the address it connected to):
    it matches the dashboard's host or the scheduler address's, loopback names being one.

    Raises
    ------
    NotFound
        No listed cluster has a running dashboard there.
    """
    for cluster in clusters:
        address = cluster.dashboard_address  # None unless its scheduler runs
        if not address:
            continue
        dashboard_host, _, dashboard_port = address.rpartition(":")
        if dashboard_port != str(port):
            continue
        hosts = {dashboard_host}
        if cluster.endpoint is not None and cluster.endpoint.address:
            with contextlib.suppress(ValueError):  # an address without a host (inproc://): its dashboard's only
                hosts.add(get_address_host(cluster.endpoint.address))
        if any(same_host(host, known) for known in hosts):
            return cluster
    raise NotFound(
        f"this server lists no running cluster with a dashboard at {host}:{port}; a cluster it does not manage "
        "serves its dashboard itself (attach it to see it here)",
        field="host",
    )


class DashboardAtHandler(JSONErrorMixin, ManagerMixin, JupyterHandler):
    """``GET clustermgr/dashboard-at/{host}/{port}/{path}``: to that dashboard's cluster's keyed dashboard URL."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated  # a browser without a session goes to the login page, and comes back here
    @authorized
    def get(self, host: str, port: str, proxied_path: str | None = None) -> None:
        cluster = find_cluster(self.manager.clusters(), host, int(port))
        keyed = url_path_join(
            self.base_url,
            "clustermgr/dashboard",
            cluster.id,
            self.manager.dashboard_keys.segment(cluster.id),
            proxied_path or "/status",
        )
        # The token has done its work: it is not carried into the dashboard's URL.
        query = [
            (name, value) for name, value in parse_qsl(self.request.query, keep_blank_values=True) if name != "token"
        ]
        self.redirect(keyed + (f"?{urlencode(query)}" if query else ""))


def dashboard_at_route() -> tuple[str, type]:
    return (ROUTE + r"/(?P<host>[^/]+)/(?P<port>[0-9]{1,5})(?P<proxied_path>/.*)?", DashboardAtHandler)


def distributed_default_link() -> str:
    """The ``distributed.dashboard.link`` that distributed ships (what a site that set none has)."""
    with open(Path(importlib.util.find_spec("distributed").origin).with_name("distributed.yaml")) as file:
        return yaml.safe_load(file)["distributed"]["dashboard"]["link"]


def site_link(env: Mapping[str, str]) -> str | None:
    """The dashboard link template a site or user set for kernels (environment or Dask config), or None.

    ``env`` is the environment the kernel would start with; Dask's config files are read as this server
    read them (the kernel reads the same files).
    """
    if env.get(LINK_ENV):
        return env[LINK_ENV]
    configured = dask.config.get("distributed.dashboard.link", None)
    return configured if configured and configured != distributed_default_link() else None


class KernelDashboardLink(LoggingConfigurable):
    """Gives the kernels this server starts the proxied dashboard link (a variable of their environment only)."""

    enabled = Bool(
        True,
        config=True,
        help="Make ``client.dashboard_link`` in this server's kernels (and the Client widget's link) a path "
        "through this server's authenticated dashboard proxy, which opens from wherever JupyterLab is opened, "
        "instead of the scheduler's own http://host:port/status. Sets DASK_DISTRIBUTED__DASHBOARD__LINK in the "
        "environment of the kernels this server starts (never in the server's own environment: terminals and "
        "other processes keep theirs). A link the site set itself (distributed.dashboard.link in Dask's config, "
        "or the variable in the server's environment) is kept, unless replace_site_link is True.",
    )

    replace_site_link = Bool(
        False,
        config=True,
        help="Give kernels this server's proxied dashboard link even where the site set its own "
        "distributed.dashboard.link (e.g. a JupyterHub's '/user/{JUPYTERHUB_USER}/proxy/{port}/status').",
    )

    public_origin = Unicode(
        "",
        config=True,
        help="The origin (scheme, host and port) at which users' browsers reach this server, e.g. "
        "'https://jupyter.example.org'. When set, the kernels' dashboard link is an absolute URL (clickable "
        "where it is printed as text); when empty, it is a path on the origin of the page that shows it "
        "(the Client widget's link in JupyterLab).",
    )

    @validate("public_origin")
    def _check_public_origin(self, proposal):
        value = proposal["value"].strip().rstrip("/")
        parsed = urlparse(value)
        if value and (parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.path):
            raise TraitError(f"KernelDashboardLink.public_origin must be like 'https://host[:port]', not {value!r}")
        return value

    def __init__(self, base_url: str = "/", **kwargs):
        super().__init__(**kwargs)
        self.base_url = base_url
        self._reported_site_link = False

    def kernel_environment(self) -> dict[str, str]:
        """The environment variable that gives a kernel the proxied link."""
        return {LINK_ENV: kernel_link_template(self.base_url, self.public_origin)}

    def kernel_variables(self, env: Mapping[str, str]) -> dict[str, str]:
        """What one kernel about to start with ``env`` gets: the proxied link, unless off or the site set its own."""
        if not self.enabled:
            return {}
        own = site_link(env)
        if own is not None and not self.replace_site_link:
            if not self._reported_site_link:
                self.log.info(
                    "clustermgr: kernels keep the site's dashboard link %r (KernelDashboardLink.replace_site_link)", own
                )
                self._reported_site_link = True
            return {}
        return self.kernel_environment()
