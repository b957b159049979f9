"""JupyterHub of the two-user test (ci/hub/start-hub.sh): PAM users alice and bob, local single-user servers.

Everything comes from the environment that start-hub.sh sets (CLUSTERMGR_HUB_*); every file of the hub,
and every user's server folder, lies below CLUSTERMGR_HUB_STATE, inside the test run's folder, so that the
run's leftover check sees what is left and two runs never share a store.
"""

import json
import os
import pwd
import random
import socket
from pathlib import Path

STATE = Path(os.environ["CLUSTERMGR_HUB_STATE"])
REPO = os.environ["CLUSTERMGR_HUB_REPO"]
PYTHON_BIN = Path(os.environ["CLUSTERMGR_HUB_PYTHON"]).parent
USERS = os.environ.get("CLUSTERMGR_HUB_USERS", "alice bob").split()
c = get_config()  # noqa: F821 (the loader provides it)


def unused_port() -> int:
    """A free port below the kernel's ephemeral range.

    Ports from bind(0) (what JupyterHub's random_port gives) come from that range, where the many schedulers
    and workers of the machine's test runs bind theirs: one may take it between the choice and the server's
    start, and the hub then waits for a server that never comes. Below the range only explicit binds land.
    """
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        port = random.randint(max(1024, low - 12000), low - 1)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(os.environ["CLUSTERMGR_HUB_PORT"])
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = unused_port()
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{unused_port()}"
c.ConfigurableHTTPProxy.command = [os.environ["CLUSTERMGR_HUB_CHP"]]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
# On a clean stop the hub stops the users' servers and its proxy: nothing of the test outlives it.
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True

# Real system accounts with passwords, as on a login node; only the two test users may use this hub.
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = set(USERS)

# The test itself (run as root) may read users and servers, e.g. to find alice's server.
c.JupyterHub.services = [{"name": "clustermgr-tests", "api_token": os.environ["CLUSTERMGR_HUB_SERVICE_TOKEN"]}]
c.JupyterHub.load_roles = [
    {"name": "clustermgr-tests", "scopes": ["read:users", "read:servers"], "services": ["clustermgr-tests"]}
]

c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(PYTHON_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.Spawner.notebook_dir = str(STATE / "users" / "{username}" / "notebooks")
# CLUSTERMGR_TEST_RUN: ci/check-leftovers.sh finds the run's processes by it.
c.Spawner.env_keep.append("CLUSTERMGR_TEST_RUN")


def prepare_user_folder(spawner):
    """Give the user a folder of their own for notebooks and the cluster manager, with its configuration.

    The extension's store, work folder (scheduler files, logs, launcher socket) and its servers' config lie
    there, so that the test knows where alice's files are and two test runs never share them.
    """
    spawner.port = unused_port()
    name = spawner.user.name
    account = pwd.getpwnam(name)
    home = STATE / "users" / name
    config_dir = home / "config"
    for folder in (home, config_dir, home / "notebooks"):
        folder.mkdir(parents=True, exist_ok=True)
        os.chown(folder, account.pw_uid, account.pw_gid)
    # Open like a home on many sites (0755): whatever keeps bob out of alice's cluster files must be the
    # extension's own modes, not this folder's. Her notebooks are not the extension's: private.
    home.chmod(0o755)
    (home / "notebooks").chmod(0o700)
    config = {
        "ClusterManager": {
            "workdir": str(home / "clustermgr"),
            "store_path": str(home / "store" / "clusters.sqlite3"),
            "on_shutdown": "stop",  # the hub stops the server at the end of the run; its clusters go with it
        },
        # A fresh layout each run (the test opens a notebook from the launcher), whatever the user's home holds.
        "LabApp": {"workspaces_dir": str(home / "workspaces")},
    }
    config_file = config_dir / "jupyter_server_config.json"
    config_file.write_text(json.dumps(config, indent=1))
    os.chown(config_file, account.pw_uid, account.pw_gid)
    spawner.environment = {
        **spawner.environment,
        # The checkout under test (the venv's editable install may point at another one).
        "PYTHONPATH": REPO,
        "JUPYTER_CONFIG_PATH": str(config_dir),
        **(
            {"JUPYTER_PATH": os.environ["CLUSTERMGR_HUB_JUPYTER_PATH"]}
            if os.environ.get("CLUSTERMGR_HUB_JUPYTER_PATH")
            else {}
        ),
        "PATH": f"{PYTHON_BIN}:/usr/local/bin:/usr/bin:/bin",
    }


c.Spawner.pre_spawn_hook = prepare_user_folder
