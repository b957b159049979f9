"""clustermgr-lab: Dask cluster managers inside the Jupyter server, with a JupyterLab sidebar."""

try:
    from clustermgr_lab._version import __version__
except ImportError:  # running from a source tree that was never built
    __version__ = "dev"


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": "clustermgr-lab"}]


def _jupyter_server_extension_points():
    from clustermgr_lab.extension import ClusterManagerApp

    return [{"module": "clustermgr_lab", "app": ClusterManagerApp}]


def connect(name_or_id: str, **kwargs):
    """A ``distributed.Client`` for a cluster of this Jupyter server, by name or id, with its TLS credentials.

    The server is found on its own inside its kernels (else pass ``url`` and ``token``); the
    cluster's certificate files are read as this user. See :func:`clustermgr_lab.client.connect.get_client`.
    """
    from clustermgr_lab.client.connect import get_client

    return get_client(name_or_id, **kwargs)


# A notebook's Cluster objects, imported on first use: the server imports this package without distributed.deploy.
_CLUSTER_OBJECTS = ("JupyterServerCluster", "get_cluster", "new_cluster")


def __getattr__(name: str):
    if name in _CLUSTER_OBJECTS:
        from clustermgr_lab.client import cluster

        return getattr(cluster, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_CLUSTER_OBJECTS])
