"""Code that runs in kernels and terminals: the REST client, ``get_client``, the Cluster object and the CLI.

Nothing here imports the server side of the package.
"""

from clustermgr_lab.client.api import ClusterManagerClient
from clustermgr_lab.client.connect import cluster_security, get_client
from clustermgr_lab.client.errors import (
    ClientError,
    ClusterFailedError,
    ClusterManagerAPIError,
    ServerNotFoundError,
    WaitTimeout,
)
from clustermgr_lab.client.servers import discover, running_servers

__all__ = [
    "ClientError", "ClusterFailedError", "ClusterManagerAPIError", "ClusterManagerClient", "ServerNotFoundError",
    "WaitTimeout", "cluster_security", "discover", "get_client", "running_servers",
    "JupyterServerCluster", "get_cluster", "new_cluster",
]  # fmt: skip


def __getattr__(name: str):
    # distributed.deploy is imported only by code that asks for a Cluster object (not by the CLI)
    if name in ("JupyterServerCluster", "get_cluster", "new_cluster"):
        from clustermgr_lab.client import cluster

        return getattr(cluster, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
