"""A dask-gateway server's API, asked where dask-gateway and distributed are imported: the scheduler links' process.

dask-gateway's client (``dask_gateway.Gateway``) imports distributed (its ``GatewayCluster`` is a
distributed ``Cluster``), and reaching a gateway cluster's scheduler needs its ``gateway://`` comm: the
server asks both through its helper process (``BackendContext.helper``, operation ``gateway``), served
by :func:`serve_gateway_request`; only a backend made without that process asks from its own (the same function).

A request is ``{"op": "gateway", "call", "options", "timeout", ...}``: ``options`` the template's
gateway options (address, proxy, public address, authentication), ``call`` one of :data:`CALLS`. What
the gateway refuses (its 404 and 422) is a ``ValueError`` with its own words; a timeout an
``asyncio.TimeoutError``; whatever else goes wrong (connection refused, 5xx, a cluster that failed to
start) another exception whose message says it.
"""

from __future__ import annotations

import asyncio
import getpass
import os
from collections.abc import Mapping
from typing import Any

from dask_gateway import BasicAuth, Gateway, JupyterHubAuth, KerberosAuth
from dask_gateway.client import ClusterStatus

from clustermgr_lab.backends.gateway.direct_reads import auth_of


def gateway_client(options: Mapping[str, Any]) -> Gateway:
    """dask-gateway's own client, asynchronous on the running loop, for a template's options.

    Authentication: ``{"type": "jupyterhub"}`` presents this server's ``JUPYTERHUB_API_TOKEN`` (under a
    hub); ``{"type": "basic", "username", "password"}`` the gateway's simple authenticator (the user
    defaults to this server's); ``{"type": "kerberos"}`` the ticket of this server's user.
    """
    auth = auth_of(options)
    if auth["type"] == "jupyterhub":
        authenticator = JupyterHubAuth(api_token=os.environ.get("JUPYTERHUB_API_TOKEN"))
    elif auth["type"] == "kerberos":
        authenticator = KerberosAuth()
    else:
        authenticator = BasicAuth(auth.get("username") or getpass.getuser(), auth.get("password"))
    return Gateway(
        options["gateway_address"],
        proxy_address=options.get("proxy_address"),
        public_address=options.get("public_address"),
        auth=authenticator,
        asynchronous=True,
    )


async def serve_gateway_request(message: Mapping[str, Any]) -> Any:
    """Serve one ``gateway`` request (see the module's docstring) within its ``timeout``."""
    serve = CALLS.get(message.get("call"))
    if serve is None:
        raise ValueError(f"no gateway call {message.get('call')!r}")
    gateway = gateway_client(message["options"])
    try:
        return await asyncio.wait_for(serve(gateway, message), message["timeout"])
    finally:
        await gateway.close()


async def _options(gateway: Gateway, message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The gateway's cluster options specification, as it sends it (``cluster_options()`` makes widgets of it)."""
    response = await gateway._request("GET", f"{gateway.address}/api/v1/options")
    return (await response.json())["cluster_options"]


async def _submit(gateway: Gateway, message: Mapping[str, Any]) -> str:
    """Create a cluster with ``cluster_options``; its address, ``gateway://proxy/name``."""
    name = await gateway.submit(**dict(message.get("cluster_options") or {}))
    return f"{gateway.proxy_address}/{name}"


async def _start(gateway: Gateway, message: Mapping[str, Any]) -> dict[str, Any]:
    """Wait until cluster ``name`` runs (as ``Gateway.connect()`` waits); its status, TLS credentials, dashboard."""
    await gateway._wait_for_start(message["name"])
    report = await gateway.get_cluster(message["name"])
    return {
        "status": report.status.name.lower(),
        "tls_cert": report.tls_cert,
        "tls_key": report.tls_key,
        "dashboard_link": report.dashboard_link,
    }


async def _report(gateway: Gateway, message: Mapping[str, Any]) -> dict[str, Any]:
    """Cluster ``name``'s status (``running``, ``stopping``, ``stopped``...), and whether the gateway stopped it."""
    report = await gateway.get_cluster(message["name"])
    stopped = report.status in (ClusterStatus.STOPPING, ClusterStatus.STOPPED)
    return {"status": report.status.name.lower(), "stopped": stopped}


async def _scale(gateway: Gateway, message: Mapping[str, Any]) -> None:
    await gateway.scale_cluster(message["name"], message["count"])


async def _stop(gateway: Gateway, message: Mapping[str, Any]) -> None:
    await gateway.stop_cluster(message["name"])


async def _running(gateway: Gateway, message: Mapping[str, Any]) -> list[str]:
    """The scheduler addresses of this user's running clusters, made from anywhere."""
    reports = await gateway.list_clusters(status=ClusterStatus.RUNNING)
    return [r.scheduler_address for r in reports if r.scheduler_address]


async def _scheduler_id(gateway: Gateway, message: Mapping[str, Any]) -> str | None:
    """The id of the scheduler at ``address`` (through the gateway's proxy, over the cluster's ``tls`` files)."""
    import dask_gateway.comm  # noqa: F401 - registers the gateway:// comm
    from distributed.core import rpc

    from clustermgr_lab.common.security import ClusterCredentials

    security = await asyncio.to_thread(lambda: ClusterCredentials.from_paths(message["tls"]).security())
    connection = rpc(message["address"], connection_args=security.get_connection_args("client"))
    try:
        identity = await connection.identity(n_workers=0)
    finally:
        await connection.close_rpc()
    return identity.get("id")


#: What a ``gateway`` request may ask (its ``call``), and the function that serves it.
CALLS = {
    "options": _options,
    "submit": _submit,
    "start": _start,
    "report": _report,
    "scale": _scale,
    "stop": _stop,
    "running": _running,
    "scheduler_id": _scheduler_id,
}
