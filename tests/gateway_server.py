"""A real dask-gateway server for the tests: PyPI's ``dask-gateway-server`` with its own proxy binary, on 127.0.0.1.

Its unsafe local backend runs each cluster's scheduler and workers as processes of this user, with
``dask scheduler`` / ``dask worker`` of this environment (the gateway's defaults are the old
``dask-scheduler`` scripts, which current distributed no longer installs); simple authentication
(one password, any user name). Its schedulers load this server's preload, as a site that wants the
product's adaptive mode for gateway clusters configures it (docs/backends.md). Every process it starts carries a marker in its environment, so that
stopping it can check that nothing of it is left (and kill what is, failing the run).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from .server_process import free_port

MARK = "CLUSTERMGR_TEST_GATEWAY"
PASSWORD = "gateway-test-password"

CONFIG = """
from dask_gateway_server.options import Float, Integer, Options, Select

c.Gateway.address = "127.0.0.1:{api_port}"
c.Proxy.address = "127.0.0.1:{proxy_port}"
c.Gateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
c.Gateway.authenticator_class = "dask_gateway_server.auth.SimpleAuthenticator"
c.SimpleAuthenticator.password = {password!r}
c.DaskGateway.db_url = "sqlite:///{folder}/gateway.sqlite"
c.LocalBackend.clusters_directory = "{folder}/clusters"
c.ClusterConfig.scheduler_cmd = [{dask!r}, "scheduler", "--preload", "clustermgr_lab.preloads.scheduler"]
c.ClusterConfig.worker_cmd = [{dask!r}, "worker"]
c.ClusterConfig.environment = {{{mark!r}: {folder!r}}}
c.ClusterConfig.cluster_max_workers = 4
c.DBBackendBase.cluster_heartbeat_period = 2

def options_handler(options):
    if options.environment == "ml" and options.worker_cores > 1:
        raise ValueError("environment 'ml' has 1-core workers only")
    return {{"worker_cores": options.worker_cores, "worker_memory": int(options.worker_memory * 2**30)}}

c.Backend.cluster_options = Options(
    Integer("worker_cores", default=1, min=1, max=2, label="Worker cores"),
    Float("worker_memory", default=0.5, min=0.25, max=2, label="Worker memory (GiB)"),
    Select("environment", ["base", "ml"], default="base", label="Environment"),
    handler=options_handler,
)
"""


@dataclass
class GatewayServer:
    """A running gateway: its address (REST and dashboards, through its proxy), password and process."""

    address: str
    folder: Path
    process: subprocess.Popen

    @property
    def options(self) -> dict:
        """A template's ``options`` naming this gateway, authenticating as user ``alice``."""
        return {"gateway_address": self.address, "auth": {"type": "basic", "username": "alice", "password": PASSWORD}}

    def leftovers(self) -> list[psutil.Process]:
        """Processes the gateway started that still run (scheduler, workers, nannies)."""
        found = []
        for process in psutil.process_iter():
            try:
                if process.environ().get(MARK) == str(self.folder) and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
            except psutil.Error:
                continue
        return found


def start_gateway(folder: Path, timeout: float = 60) -> GatewayServer:
    """Start a gateway on free ports of 127.0.0.1 and wait until it answers ``/api/health``."""
    folder.mkdir(parents=True, exist_ok=True)
    api_port, proxy_port = free_port(), free_port()
    dask = str(Path(sys.executable).with_name("dask"))
    config = folder / "gateway_config.py"
    config.write_text(
        CONFIG.format(
            api_port=api_port, proxy_port=proxy_port, password=PASSWORD, folder=str(folder), dask=dask, mark=MARK
        )
    )
    server = str(Path(sys.executable).with_name("dask-gateway-server"))
    with open(folder / "gateway.log", "ab") as log:
        process = subprocess.Popen(
            [server, "-f", str(config)], cwd=folder, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    gateway = GatewayServer(f"http://127.0.0.1:{proxy_port}", folder, process)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{gateway.address}/api/health", timeout=2) as answer:
                if answer.status == 200:
                    return gateway
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop_gateway(gateway)
            raise RuntimeError(f"the gateway did not start: {(folder / 'gateway.log').read_text()[-3000:]}")
        time.sleep(0.2)


def stop_gateway(gateway: GatewayServer, timeout: float = 30) -> list[str]:
    """Stop the gateway (it stops its clusters first); returns what was left running and had to be killed."""
    if gateway.process.poll() is None:
        gateway.process.send_signal(signal.SIGTERM)
        try:
            gateway.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(gateway.process.pid, signal.SIGKILL)
            gateway.process.wait()
    deadline = time.monotonic() + 10
    while gateway.leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = gateway.leftovers()
    described = [f"{p.pid}: {' '.join(p.cmdline())[:160]}" for p in left]
    for process in left:
        try:
            process.kill()
        except psutil.Error:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(gateway.process.pid, signal.SIGKILL)  # the proxy, if it outlived its parent
    return described
