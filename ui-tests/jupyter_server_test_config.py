"""Jupyter server configuration for the galata UI tests.

Starts JupyterLab on 127.0.0.1:$UI_TEST_PORT (a free port that playwright.config.js or
ci/ui_shards.py picked) without a token, with the
clustermgr_lab server extension enabled (it is enabled by the installed
jupyter-config file; it is listed here too so a bare checkout also works).
"""

import atexit
import os
import sys
import tempfile
from pathlib import Path

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821 - no token, exposes window.jupyterapp

c.ServerApp.ip = "127.0.0.1"
# The port Playwright waits on; never a fixed default (`make lab` may be using 8888).
c.ServerApp.port = int(os.environ["UI_TEST_PORT"])
c.ServerApp.port_retries = 0  # the port is taken meanwhile: fail, never serve on another that Playwright does not know
c.ServerApp.allow_root = True  # CI machines run as root
c.ServerApp.jpserver_extensions = {"clustermgr_lab": True}
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
# Each UI test server has a store of its own, and stops its clusters when it stops (tests leave nothing running).
# Below the test run's folder when `make test` gives one, so ci/check-leftovers.sh finds what is left there.
_state = tempfile.mkdtemp(prefix="clustermgr-ui-", dir=os.environ.get("CLUSTERMGR_TEST_RUN_DIR") or None)
c.ClusterManager.store_path = os.path.join(_state, "clusters.sqlite3")
c.ClusterManager.workdir = os.path.join(_state, "clusters")
c.ClusterManager.on_shutdown = "stop"
# User settings of its own too: ci/ui_shards.py runs several of these servers at once, as one user.
c.LabApp.user_settings_dir = os.path.join(_state, "user-settings")

# A batch template with user options, for ui-tests/tests/hpc.spec.ts (real SLURM: `make test` starts it).
c.ClusterManager.templates = [
    {
        "name": "hpc",
        "description": "SLURM jobs: pick a walltime and a nice value",
        "backend": "slurm",
        "options": {"walltime": "00:30:00"},
        "user_options": {
            "walltime": {"label": "Walltime", "choices": ["00:20:00", "00:30:00"]},
            "nice": {"type": "integer", "default": 0, "minimum": 0, "maximum": 100},
        },
        "spec": {"groups": [{"name": "default", "count": 4, "threads": 1, "memory": "300 MiB"}]},
    }
]

# A real dask-gateway server for ui-tests/tests/gateway.spec.ts (tests/gateway_server.py: PyPI's server and proxy, on
# 127.0.0.1), started with this Jupyter server and stopped when it exits, and a template naming it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.gateway_server import start_gateway, stop_gateway  # noqa: E402

_gateway = start_gateway(Path(_state) / "gateway")
atexit.register(stop_gateway, _gateway)
c.ClusterManager.templates.append(
    {
        "name": "gateway",
        "description": "A dask-gateway server: its options are the form",
        "backend": "gateway",
        "options": _gateway.options,
        "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "512 MiB"}]},
    }
)
