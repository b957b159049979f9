"""``get_client``: a notebook's one call to a managed cluster, with the cluster's TLS credentials."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clustermgr_lab.client.api import ClusterManagerClient

if TYPE_CHECKING:
    import distributed

SCHEDULER_UP = ("running", "scaling")


def get_client(
    name_or_id: str,
    *,
    url: str | None = None,
    token: str | None = None,
    timeout: float = 120.0,
    **client_kwargs: Any,
) -> distributed.Client:
    """A ``distributed.Client`` for a managed cluster, by name or id: the notebook's one call.

    Inside a kernel started by the Jupyter server, the server is found on its own (see
    :class:`ClusterManagerClient`); a cluster that is still starting is waited for.

    Parameters
    ----------
    name_or_id : str
        The cluster's name (as in the sidebar) or id.
    url, token : str, optional
        Where the Jupyter server is, when it cannot be discovered.
    timeout : float
        Seconds to wait for the scheduler to run.
    **client_kwargs
        Passed on to ``distributed.Client`` (e.g. ``asynchronous=True``).

    Returns
    -------
    distributed.Client
    """
    from distributed import Client

    manager = ClusterManagerClient(url, token)
    cluster = manager.find(name_or_id)
    if cluster["status"] not in SCHEDULER_UP:
        cluster = manager.wait(cluster["id"], lambda c: c["status"] in SCHEDULER_UP, timeout)
    client_kwargs.setdefault("timeout", manager.timeout)
    client_kwargs.setdefault("security", cluster_security(cluster))
    register_comm(cluster["scheduler_address"])
    return Client(cluster["scheduler_address"], **client_kwargs)


def cluster_security(cluster: dict[str, Any]) -> distributed.Security | None:
    """The ``distributed.Security`` of a cluster as the API lists it (None when it has no TLS).

    Made from the files its ``tls`` object names, which only the server's user can read: a Client of
    another user fails to read them, and a Client without them is refused by the scheduler.
    """
    from clustermgr_lab.common.security import ClusterCredentials

    tls = cluster.get("tls")
    return ClusterCredentials.from_paths(tls).security() if tls else None


def register_comm(address: str) -> None:
    """Make ``address``'s scheme known to distributed: ``gateway://`` is dask-gateway's comm through its proxy.

    Call it before connecting a Client or an rpc to a cluster's scheduler address.
    """
    if str(address).startswith("gateway://"):
        import dask_gateway.comm  # noqa: F401 - registers the gateway:// comm
