"""Jupyter server configuration for the galata UI tests.

Starts JupyterLab on 127.0.0.1:8888 without a token, with the
clustermgr_lab server extension enabled (it is enabled by the installed
jupyter-config file; it is listed here too so a bare checkout also works).
"""

import os
import tempfile

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821 - port 8888, no token, exposes window.jupyterapp

c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port = int(os.environ.get("UI_TEST_PORT", "8888"))  # several checkouts side by side
c.ServerApp.allow_root = True  # CI machines run as root
c.ServerApp.jpserver_extensions = {"clustermgr_lab": True}
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
# Each UI test server has a store of its own, and stops its clusters when it stops (tests leave nothing running).
c.ClusterManager.store_path = os.path.join(tempfile.mkdtemp(prefix="clustermgr-ui-"), "clusters.sqlite3")
c.ClusterManager.on_shutdown = "stop"
