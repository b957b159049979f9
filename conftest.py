"""Test set-up shared by every test module: a real Jupyter server with the extension on."""

import pytest

pytest_plugins = ("pytest_jupyter.jupyter_server",)


@pytest.fixture
def jp_server_config(jp_server_config, tmp_path):
    return {
        "ServerApp": {
            "jpserver_extensions": {"clustermgr_lab": True},
            "allow_unauthenticated_access": False,
        },
        "ClusterManager": {"workdir": str(tmp_path / "clustermgr"), "max_workers": 12},
    }
