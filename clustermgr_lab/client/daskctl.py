"""dask-ctl's discovery of this user's clusters: the ``dask_cluster_discovery`` entry point ``clustermgr``.

``dask cluster list`` calls :func:`discover`, then ``DaskCtlCluster.from_name(name)`` for each name it
yields; ``dask cluster scale NAME N`` calls ``scale(N)`` and ``dask cluster delete NAME`` calls
``close()``, which for the object dask-ctl gets stops the cluster on the server.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from clustermgr_lab.client.api import ClusterManagerClient
from clustermgr_lab.client.cluster import JupyterServerCluster
from clustermgr_lab.client.connect import SCHEDULER_UP
from clustermgr_lab.client.errors import ClientError
from clustermgr_lab.client.servers import discover as find_server

# dask-ctl gives each discovery method 5 s per cluster name; a server that hangs costs at most this much.
DISCOVERY_BUDGET = 3.0


class DaskCtlCluster(JupyterServerCluster):
    """The cluster object dask-ctl gets: its ``close()`` also stops the cluster, as ``dask cluster delete`` expects.

    In a notebook use :func:`clustermgr_lab.get_cluster`, whose ``close()`` only lets go.
    """

    def __init__(self, name_or_id: str, **kwargs: Any):
        kwargs.setdefault("shutdown_on_close", True)
        super().__init__(name_or_id, **kwargs)

    def get_snippet(self) -> str:
        """What ``dask cluster snippet NAME`` prints: the notebook's lines for this cluster."""
        return "\n".join(
            [
                "import clustermgr_lab",
                "from distributed import Client",
                "",
                f"cluster = clustermgr_lab.get_cluster({self.id!r})",
                "client = Client(cluster)",
            ]
        )


def _listed() -> list[dict[str, Any]]:
    """The server's clusters: the server of ``$JUPYTER_URL`` (and ``$JUPYTER_TOKEN``), else the first that answers."""
    url = os.environ.get("JUPYTER_URL")
    url, token = (url, os.environ.get("JUPYTER_TOKEN", "")) if url else find_server(timeout=1.0)
    return ClusterManagerClient(url, token, timeout=DISCOVERY_BUDGET).list()


async def discover() -> AsyncIterator[tuple[str, type[DaskCtlCluster]]]:
    """Each cluster of this user's Jupyter server whose scheduler runs, as ``(name, DaskCtlCluster)``.

    A cluster is named by its name, or by its id where several share that name. With no server
    running (or one that does not answer within :data:`DISCOVERY_BUDGET` seconds) nothing is
    yielded and nothing is raised.
    """
    try:
        clusters = await asyncio.wait_for(asyncio.to_thread(_listed), DISCOVERY_BUDGET)
    except (ClientError, asyncio.TimeoutError):
        return
    names = Counter(cluster["name"] for cluster in clusters)
    for cluster in clusters:
        if cluster["status"] in SCHEDULER_UP:
            yield (cluster["name"] if names[cluster["name"]] == 1 else cluster["id"]), DaskCtlCluster
