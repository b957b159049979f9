"""Finding the Jupyter server from a kernel or a terminal: its running servers, the first whose API answers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

if TYPE_CHECKING:
    pass


from clustermgr_lab.client.errors import ServerNotFoundError

API = "clustermgr/api/"


def _parent_pids() -> set[int]:
    pids = {os.getppid()}
    parent = os.environ.get("JPY_PARENT_PID", "")  # set by jupyter_client for the kernels it starts
    if parent.isdigit():
        pids.add(int(parent))
    return pids


def running_servers() -> list[dict[str, Any]]:
    """The running Jupyter servers, as ``jupyter server list`` finds them; this process's parent first.

    Returns
    -------
    list of dict
        Their server info (``url``, ``token``, ``pid``, ...). In a kernel, the server that started
        it comes first.
    """
    # What jupyter_server.serverapp.list_running_servers reads (jpserver-*.json of live PIDs in the runtime dir),
    # without importing that module: all of jupyter_server, 1-2 s on a quiet machine and 15-50 s under load.
    import psutil
    from jupyter_core.paths import jupyter_runtime_dir

    servers = []
    for path in sorted(Path(jupyter_runtime_dir()).glob("jpserver-*.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and isinstance(info.get("pid"), int) and psutil.pid_exists(info["pid"]):
            servers.append(info)
    parents = _parent_pids()
    return sorted(servers, key=lambda info: info.get("pid") not in parents)


def discover(timeout: float = 5.0) -> tuple[str, str]:
    """The URL and token of the first running Jupyter server whose clustermgr API answers.

    Parameters
    ----------
    timeout : float
        Seconds to wait for each server's answer.

    Returns
    -------
    (str, str)
        The server's URL (with its base URL) and token.

    Raises
    ------
    ServerNotFoundError
        When no server answers; the message lists what was tried.
    """
    tried = []
    for info in running_servers():
        # A JupyterHub single-user server lists no token of its own: its kernels hold the user's hub token.
        url, token = info.get("url"), info.get("token") or os.environ.get("JUPYTERHUB_API_TOKEN", "")
        if not url or info.get("sock"):
            continue
        try:
            response = requests.get(join_url(url, API + "templates"), headers=auth_header(token), timeout=timeout)
        except requests.RequestException as exc:
            tried.append(f"{url} ({type(exc).__name__})")
            continue
        if response.status_code == 200:
            return url, token
        tried.append(f"{url} (HTTP {response.status_code})")
    where = f"; tried {', '.join(tried)}" if tried else ""
    raise ServerNotFoundError(
        "found no running Jupyter server with the clustermgr extension"
        + where
        + "; give its URL and token (--url/--token, or JUPYTER_URL/JUPYTER_TOKEN)"
    )


def join_url(url: str, path: str) -> str:
    return url.rstrip("/") + "/" + path


def auth_header(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"} if token else {}
