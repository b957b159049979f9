"""Test set-up shared by every test module: a real Jupyter server with the extension on.

The server gets the configuration that ``pip install`` ships (``jupyter-config/``), read in
the order Jupyter reads it, on top of jupyter-server-proxy's own file (which enables it, with its
generic ``/proxy/<port>`` routes: it stays on, as at a site that has both).
"""

import json
from pathlib import Path

import pytest

pytest_plugins = ("pytest_jupyter.jupyter_server",)

# Programs the tests start as processes of their own (they read sys.argv at import): not test modules.
collect_ignore = ["tests/hostile_scheduler.py"]

SHIPPED_CONFIG = Path(__file__).parent / "jupyter-config" / "server-config"
JUPYTER_SERVER_PROXY_CONFIG = (
    "jupyter-server-proxy.json",
    {"ServerApp": {"jpserver_extensions": {"jupyter_server_proxy": True}}},
)


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
    # No standby scheduler (an idle process per test server): tests/test_standby.py turns it on where it is tested.
    config["StandbySchedulers"] = {"count": 0}
    # A scheduler starved of CPU (load 10 on 2 cores) can miss the 5 s heartbeat and flap to "unresponsive",
    # which changes the snapshots tests compare; tests/test_hardening.py tests that state with a short timeout.
    config["SchedulerLink"] = {"heartbeat_timeout": 30.0}
    return config


# Under pytest-xdist (`make test`: -n 2 --dist loadgroup) the tests in one group run one after another on one
# worker; every other test goes to whichever worker is free.
XDIST_GROUPS = {
    # The single-node SLURM and Grid Engine have 2 CPUs each: two tests' jobs at once would queue behind each other.
    "slurm": lambda item: item.get_closest_marker("slurm") is not None,
    "sge": lambda item: item.get_closest_marker("sge") is not None,
    # One private sshd (a module-scoped fixture) for the module, started once.
    "ssh": lambda item: item.path.name == "test_ssh.py",
    # One real dask-gateway per module (tests/test_gateway.py), started once.
    "gateway": lambda item: item.path.name == "test_gateway.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for group, belongs in XDIST_GROUPS.items():
            if belongs(item):
                item.add_marker(pytest.mark.xdist_group(group))
                break
    if getattr(config.option, "loadgroup", False):  # in an xdist worker, under --dist loadgroup
        for item in items:
            tag_with_groups(item)


def tag_with_groups(item: pytest.Item) -> None:
    """Suffix the item's node id with its groups (``test_x.py::test@slurm``): what xdist's scheduler groups by.

    xdist's own hook does the same, but it runs before this one (so it misses the groups added above) and it
    writes ``Node._nodeid``, which pytest 9 no longer reads (the id is ``Node._id``, a ``NodeId``): without
    this, ``--dist loadgroup`` silently runs a group's tests on both workers at once.
    """
    groups = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    if not groups:
        return
    tagged = f"{item.nodeid.split('@')[0]}@{'_'.join(sorted(groups))}"
    if hasattr(item, "_id"):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(tagged)
    else:
        item._nodeid = tagged
