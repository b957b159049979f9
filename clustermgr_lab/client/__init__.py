"""Code that runs in kernels and terminals: the REST client, ``get_client`` and the ``clustermgr`` CLI.

Nothing here imports the server side of the package.
"""

from clustermgr_lab.client.api import (
    ClientError,
    ClusterFailedError,
    ClusterManagerAPIError,
    ClusterManagerClient,
    ServerNotFoundError,
    WaitTimeout,
    cluster_security,
    discover,
    get_client,
    running_servers,
)

__all__ = [
    "ClientError", "ClusterFailedError", "ClusterManagerAPIError", "ClusterManagerClient", "ServerNotFoundError",
    "WaitTimeout", "cluster_security", "discover", "get_client", "running_servers",
]  # fmt: skip
