"""Code that runs in kernels and terminals: the REST client, ``get_client`` and the ``clustermgr`` CLI.

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
]  # fmt: skip
