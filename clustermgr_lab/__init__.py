"""clustermgr-lab: Dask cluster managers inside the Jupyter server, with a JupyterLab sidebar."""

try:
    from ._version import __version__
except ImportError:  # running from a source tree that was never built
    __version__ = "dev"


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": "clustermgr-lab"}]


def _jupyter_server_extension_points():
    from .app import ClusterManagerApp

    return [{"module": "clustermgr_lab", "app": ClusterManagerApp}]
