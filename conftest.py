"""Test set-up shared by every test module: a real Jupyter server with the extension on.

The server gets the configuration that ``pip install`` ships (``jupyter-config/``), read in
the order Jupyter reads it, on top of jupyter-server-proxy's own file (which enables its
generic ``/proxy/<port>`` routes; ours turns that extension off again).
"""

import json
from pathlib import Path

import pytest

pytest_plugins = ("pytest_jupyter.jupyter_server",)

SHIPPED_CONFIG = Path(__file__).parent / "jupyter-config" / "server-config"
JUPYTER_SERVER_PROXY_CONFIG = ("jupyter-server-proxy.json", {"ServerApp": {"jpserver_extensions": {"jupyter_server_proxy": True}}})


def shipped_config() -> dict:
    files = [(p.name, json.loads(p.read_text())) for p in SHIPPED_CONFIG.glob("*.json")]
    config: dict = {"ServerApp": {"jpserver_extensions": {}}}
    for _, data in sorted(files + [JUPYTER_SERVER_PROXY_CONFIG]):
        config["ServerApp"]["jpserver_extensions"].update(data["ServerApp"]["jpserver_extensions"])
    return config


@pytest.fixture
def jp_server_config(jp_server_config, tmp_path):
    config = shipped_config()
    config["ServerApp"]["allow_unauthenticated_access"] = False
    # GPUs declared as a site would (there are none here): the GPU groups of the tests advertise them to Dask
    config["ClusterManager"] = {
        "workdir": str(tmp_path / "clustermgr"),
        "store_path": str(tmp_path / "clustermgr-store" / "clusters.sqlite3"),
        "on_shutdown": "stop",  # each test's server leaves nothing running (tests/test_restart.py keeps them)
        "max_workers": 12,
        "gpus": 4,
    }
    return config
