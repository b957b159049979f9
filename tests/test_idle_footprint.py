"""Given a real Jupyter server, the warm launcher and standby scheduler run only from first use until no cluster is left.

A server with the extension on and no cluster costs no process (benchmarks/footprint.py measures its
memory and CPU); the first create (or the sidebar's first look) starts them; once every cluster is
gone and ``WarmLauncher.release_after`` has passed, they are gone again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from clustermgr_lab.backends.local.forkserver import SOCKET_FOLDER_RECORD

from .helpers import eventually, requires_slurm, running_with, slurm_jobs, subprocess_env
from .server_process import JupyterServer, descendants, kill_leftovers, link_hosts, mapped_libraries, not_zombie
from .started_elsewhere import start_tls_scheduler_and_worker, stop_process

pytestmark = pytest.mark.timeout(300)

SMALL = {"name": "default", "count": 1, "threads": 1, "memory": "256 MiB"}
FORKSERVER = "clustermgr_lab.backends.local.forkserver"


def launchers(server: JupyterServer) -> list[psutil.Process]:
    """Warm launcher processes of this server's work folder, wherever they are in the process table.

    A launcher's command line names its socket: in the work folder, or, when that path is too long for
    a socket (``make test``'s run folders), in the stand-in folder the work folder records.
    """
    folders = [str(server.workdir)]
    with contextlib.suppress(OSError):
        if recorded := (server.workdir / SOCKET_FOLDER_RECORD).read_text().strip():
            folders.append(recorded + "/")
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if FORKSERVER in cmdline and any(f in cmdline for f in folders) and not_zombie(process):
            found.append(process)
    return found


def standby_folders(server: JupyterServer) -> list:
    return list(server.workdir.glob("*/standby"))


SHORT_DELAYS = {
    "WarmLauncher": {"release_after": 1.0, "idle_timeout": 0.5},
    "StandbySchedulers": {"count": 1},
    "LinkHost": {"release_after": 1.0},
}


@pytest.fixture
def servers(tmp_path):
    """Makes servers on one store and work folder (started), stops them and what they leave at the end."""
    made = []

    def make(**config) -> JupyterServer:
        server = JupyterServer(
            tmp_path, tmp_path / "store" / "clusters.sqlite3", tmp_path / "work", SHORT_DELAYS, **config
        )
        made.append(server)
        return server.start()

    yield make
    for server in made:
        if server.process.poll() is None:
            server.stop(signal.SIGTERM)
    kill_leftovers(set(), str(tmp_path / "work"))


@pytest.fixture
def server(servers):
    return servers(on_shutdown="stop")


def test_no_launcher_or_standby_until_first_use_and_none_after_the_last_cluster(server):
    # Given a server just started, with no cluster ever made, that has had time to do what it does at start
    client = server.client()
    assert client.list() == []
    time.sleep(3)
    # Then it started no process at all: no warm launcher, no standby scheduler
    assert descendants(server) == [] and launchers(server) == []
    assert standby_folders(server) == []

    # When a first cluster is made
    cluster = client.create(name="first", spec={"groups": [SMALL]})
    client.wait(cluster["id"], running_with(1), timeout=120)
    # Then the warm launcher runs (a child of the server), and a standby scheduler is made ready beside it
    launcher = eventually(lambda: launchers(server), 30, "the warm launcher")[0]
    assert launcher.ppid() == server.process.pid
    eventually(lambda: standby_folders(server), 60, "a standby scheduler's folder")
    # launcher, scheduler links' process, the cluster's scheduler and worker, the standby scheduler
    assert len(descendants(server)) >= 5 and len(link_hosts(server)) == 1

    # When every cluster is deleted, and the release delay (1 s here) has passed
    client.delete(cluster["id"], wait=True, timeout=120)
    # Then the launcher, the standby scheduler and its folder, and the scheduler links' process are gone: the server
    # is back to no process
    eventually(lambda: not launchers(server) and not descendants(server), 60, "the launcher and standby to end")
    assert standby_folders(server) == []
    assert "no cluster left; the warm launcher and standby schedulers are let go" in server.log_text()

    # When the sidebar opens again (its template listing)
    client.templates()
    # Then the launcher and a standby scheduler are started again, ready for the next create
    eventually(lambda: launchers(server), 30, "the warm launcher, again")
    eventually(lambda: standby_folders(server), 60, "a standby scheduler, again")
    # And with no cluster made, they are let go again after the delay
    eventually(lambda: not launchers(server) and not descendants(server), 60, "the launcher and standby to end")


LOAD_AND_LIST = """
import sys, tempfile
import jupyter_server.serverapp
from clustermgr_lab.extension import ClusterManagerApp
from clustermgr_lab.manager.cluster_manager import ClusterManager
folder = tempfile.mkdtemp()
manager = ClusterManager(workdir=folder + "/work", store_path=folder + "/clusters.sqlite3")
assert manager.list_templates() and manager.list() == []
print(sorted(m for m in ("distributed", "numpy", "dask_gateway", "asyncssh", "cryptography") if m in sys.modules))
"""


def test_the_extension_loads_without_distributed_or_unused_backends():
    # Given a fresh interpreter with jupyter_server imported, as a server has it before loading extensions
    # When the extension is imported and its manager made with the default (local) template, and templates listed
    result = subprocess.run([sys.executable, "-c", LOAD_AND_LIST], capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 0, result.stderr[-3000:]
    # Then neither distributed (with NumPy), nor the gateway's or SSH's libraries, nor cryptography were imported
    assert result.stdout.split("\n")[-2] == "[]", result.stdout


def test_the_lazy_registry_names_each_backend_as_its_class_does():
    # Given the backend registry, whose modules are imported on first use
    from clustermgr_lab.backends import ALL_BACKENDS, BACKENDS

    # Then each name gives the class of that name, and BACKENDS is ALL_BACKENDS but the external one
    assert {name: cls.name for name, cls in ALL_BACKENDS.items()} == {name: name for name in ALL_BACKENDS}
    assert set(ALL_BACKENDS) - set(BACKENDS) == {"external"}
    assert "nope" not in BACKENDS
    with pytest.raises(KeyError):
        BACKENDS["nope"]


async def test_no_timer_asks_resources_when_no_template_can_be_asked(jp_serverapp):
    # Given a server whose templates are local only (the test server's), once its event loop has turned
    app = next(iter(jp_serverapp.extension_manager.extension_apps["clustermgr_lab"]))
    await asyncio.sleep(0.1)
    # Then the found-clusters loop (every 2 s for a gateway's templates) was not started, and nothing was warmed
    assert app.found._task is None
    assert not app.manager.warm.in_use and app.manager.launcher.pid is None


def test_a_launcher_left_running_for_kept_clusters_is_reused_then_let_go(servers):
    # Given a server that made a cluster and stopped, keeping it (its launcher runs on for it)
    first = servers(on_shutdown="keep")
    cluster = first.client().create(name="kept", spec={"groups": [SMALL]})
    first.client().wait(cluster["id"], running_with(1), timeout=120)
    launcher = eventually(lambda: launchers(first), 30, "the warm launcher")[0]
    first.stop(signal.SIGTERM)
    assert launcher.is_running()
    # When a new server re-adopts it: it starts no launcher of its own
    second = servers(on_shutdown="stop")
    client = second.client()
    client.wait(cluster["id"], running_with(1), timeout=120)
    assert launchers(second) == [launcher] and descendants(second) == link_hosts(second)
    # And its scale forks the new worker from the launcher left running (re-used, not a new one)
    client.scale(cluster["id"], workers=2)
    client.wait(cluster["id"], running_with(2), timeout=120)
    assert launchers(second) == [launcher]
    # When the cluster is deleted and the release delay has passed
    client.delete(cluster["id"], wait=True, timeout=120)
    # Then that launcher is let go too, and exits: nothing of ours runs
    eventually(lambda: not launchers(second), 60, "the re-used launcher to exit")


def test_the_server_speaks_to_schedulers_through_a_process_it_lets_go(server):
    # Given a server that made a cluster (TLS, the default) and scaled it
    client = server.client()
    client.templates()  # the sidebar's first look: the memory limit comes from the links' process
    cluster = client.create(name="linked", spec={"groups": [SMALL]})
    client.wait(cluster["id"], running_with(1), timeout=120)
    client.scale(cluster["id"], workers=2)
    client.wait(cluster["id"], running_with(2), timeout=120)
    # Then its scheduler links run in one child process, and the server itself never loaded NumPy (distributed's
    # import brings it) nor cryptography (the cluster's TLS credentials were made in that process)
    host = eventually(lambda: link_hosts(server), 30, "the scheduler links' process")
    assert len(host) == 1 and host[0].ppid() == server.process.pid
    libraries = mapped_libraries(server.process.pid)
    assert "/numpy/" not in libraries and "/cryptography/" not in libraries
    assert "/numpy/" in mapped_libraries(host[0].pid)

    # When that process is killed (out of memory, a mistaken kill)
    host[0].kill()
    # Then the cluster stays running: a new process subscribes again, and the cluster scales through it
    replacement = eventually(lambda: [p for p in link_hosts(server) if p.pid != host[0].pid], 60, "a new links process")
    client.scale(cluster["id"], workers=1)
    client.wait(cluster["id"], running_with(1), timeout=120)
    assert client.get(cluster["id"])["status"] == "running"
    assert "the scheduler links' process exited" in server.log_text()

    # When the cluster is deleted and the release delay has passed
    client.delete(cluster["id"], wait=True, timeout=120)
    # Then the links' process exits with the rest: nothing of ours runs
    eventually(lambda: not replacement[0].is_running() and not descendants(server), 60, "the links' process to exit")


@pytest.mark.slurm
@requires_slurm
def test_a_slurm_clusters_job_scripts_are_written_outside_the_server(servers):
    # Given a server with a SLURM template: its scheduler next to the server, each worker a job
    template = {"name": "slurm", "description": "test", "backend": "slurm", "spec": {"groups": [{**SMALL, "count": 1}]}}
    server = servers(on_shutdown="stop", templates=[template])
    client = server.client()
    # When a SLURM cluster is made and scaled to two workers (two jobs, each with its dask-jobqueue script)
    cluster = client.create(template="slurm", name="on slurm")
    prefix = f"clustermgr-{cluster['id']}-"
    try:
        client.wait(cluster["id"], running_with(1), timeout=120)
        client.scale(cluster["id"], workers=2)
        client.wait(cluster["id"], running_with(2), timeout=120)
        assert sorted(slurm_jobs(prefix)) == [prefix + "default-1", prefix + "default-2"]
        scripts = sorted(server.workdir.glob("**/default-*.job.sh"))
        assert [s.name for s in scripts] == ["default-1.job.sh", "default-2.job.sh"]
        assert "#SBATCH -J " + prefix + "default-2" in scripts[1].read_text()
        # Then the server itself never loaded distributed (NumPy comes with it): dask-jobqueue, which writes the
        # scripts, ran in the scheduler links' process
        assert "/numpy/" not in mapped_libraries(server.process.pid)
        assert "job script written in the server" not in server.log_text()

        # When the cluster is deleted
        client.delete(cluster["id"], wait=True, timeout=60)
        # Then its jobs are gone, and the server is back to no process of ours, still without distributed
        assert slurm_jobs(prefix) == {}
        eventually(lambda: not descendants(server), 60, "the links' process and launcher to exit")
        assert "/numpy/" not in mapped_libraries(server.process.pid)
    finally:
        leftover = [job_id for job_id, _, _ in slurm_jobs(prefix).values()]
        if leftover:
            subprocess.run(["scancel", *leftover], capture_output=True)


def test_a_tls_cluster_started_elsewhere_is_observed_without_distributed_in_the_server(servers, tmp_path):
    # Given a tls:// scheduler and worker started elsewhere, with credentials of their own
    credentials, scheduler_file, processes = start_tls_scheduler_and_worker(tmp_path)
    try:
        address = eventually(
            lambda: scheduler_file.exists() and json.loads(scheduler_file.read_text() or "{}").get("address"),
            60,
            "the scheduler's address",
        )
        server = servers(on_shutdown="stop")
        client = server.client()
        # When it is attached with its certificate files, and observed with its worker
        cluster = client.attach(address, tls=credentials.to_dict())
        client.wait(cluster["id"], lambda c: c["status"] == "running" and c["workers"]["running"] == 1, timeout=60)
        # Then the server observes it over TLS without distributed (NumPy comes with it) nor cryptography
        libraries = mapped_libraries(server.process.pid)
        assert [m for m in ("numpy", "cryptography") if f"/{m}/" in libraries] == []
        client.delete(cluster["id"], wait=True, timeout=60)
    finally:
        for process in processes:
            stop_process(process)
