"""The SSH backend: the scheduler runs next to the Jupyter server, each worker is started over SSH.

Workers are started by distributed's own SSH deployment (``distributed.deploy.ssh.Worker``, on
asyncssh): one SSH connection per worker, running ``python -m distributed.cli.dask_spec`` with a
Nanny on the remote host. The connections are held by the server's scheduler links' process
(:mod:`.sessions`, driven through :mod:`.hosted`), not by the server, which imports neither. A worker is
tracked by its SSH channel (it has ended when the channel reports an exit status) and by its remote
process group, which the Nanny reports as it starts: stopping a worker is ``kill -TERM`` (then
``-KILL``) of that group (:mod:`.commands`), run over the worker's connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.config
from traitlets import Dict, Float, List, Unicode

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, Backend, Capabilities, SchedulerEndpoint
from clustermgr_lab.backends.local.backend import WORKER_PRELOAD_ENV, worker_preload_environment
from clustermgr_lab.backends.local.processes import LocalProcesses, exit_reason
from clustermgr_lab.backends.local.scheduler import LocalScheduler
from clustermgr_lab.backends.ssh.commands import REPORT_PROCESS_GROUP, kill_group_command
from clustermgr_lab.backends.ssh.messages import StartFailed, WorkerStart
from clustermgr_lab.domain.errors import BackendError
from clustermgr_lab.domain.spec import WorkerGroup

log = logging.getLogger(__name__)

SECRET_CONNECT_OPTIONS = {"password", "passphrase"}  # never stored
#: The variable by which distributed's SSH deployment hands a worker its dask configuration.
INHERIT_CONFIG_ENV = "DASK_INTERNAL_INHERIT_CONFIG"
_topics = itertools.count(1)


@dataclass
class RemoteWorker:
    """One worker started over SSH, as the server knows it: its host and, once started, its process group."""

    host: str
    process_group: int | None = None


class SSHBackend(Backend):
    """Each worker is a ``dask_spec`` Nanny started over SSH on one of ``hosts``.

    The scheduler is a local process (:class:`~.local_scheduler.LocalScheduler`): the server's
    scheduler link, the dashboard proxy and the clean-up of a dead server's scheduler work as for
    local clusters. Remote hosts must reach it, so across machines ``scheduler_host`` must be an
    address of this machine that they can reach (it is ``127.0.0.1`` by default: workers on this machine).

    Configure it in ``jupyter_server_config.py``::

        c.SSHBackend.hosts = ["node1", "node2"]
        c.SSHBackend.connect_options = {"username": "dask", "client_keys": ["~/.ssh/id_ed25519"]}
        c.SSHBackend.remote_python = "/opt/conda/bin/python"
        c.SSHBackend.scheduler_host = "10.0.0.5"  # this machine, as the nodes reach it
        c.SSHBackend.interface = "eth0"

    Workers go to the host that has the fewest workers of this cluster. A worker that ends on its
    own is reported through ``on_worker_exit`` with its remote exit status; one whose connection
    is lost has its process group killed over a new connection, then is reported. Hosts and process
    groups are in :meth:`process_records` (stored with the cluster), so that the next server kills
    the workers a previous one left (:meth:`adopt`); and a worker that cannot reach its scheduler
    for ``worker_death_timeout`` seconds exits by itself.
    """

    name = "ssh"
    description = "Scheduler on this machine, each worker started over SSH (distributed's SSH deployment)"
    workers_before_scheduler = False  # a remote worker needs the scheduler's address
    capabilities = Capabilities(runs_processes_here=False)  # workers run on the hosts

    hosts = List(
        Unicode(), ["127.0.0.1"], config=True, help="The hosts workers are started on (the least loaded first)."
    )
    connect_options = Dict(
        {}, config=True, help="Keyword arguments of asyncssh.connect: port, username, known_hosts, client_keys..."
    )
    remote_python = Unicode(
        None, allow_none=True, config=True, help="The Python on the hosts; None: this server's sys.executable."
    )
    interface = Unicode(
        None,
        allow_none=True,
        config=True,
        help="The workers' network interface; None: the one routing to the scheduler.",
    )
    scheduler_host = Unicode(
        "127.0.0.1",
        config=True,
        help="The address the scheduler listens on: one of this machine's that the hosts reach.",
    )
    scheduler_interface = Unicode(
        None,
        allow_none=True,
        config=True,
        help="Or the network interface the scheduler listens on (wins over the host).",
    )
    worker_start_timeout = Float(60.0, config=True, help="Seconds a worker gets to start over SSH.")
    command_timeout = Float(30.0, config=True, help="Seconds an SSH command (kill of a process group) may take.")
    stop_timeout = Float(10.0, config=True, help="Seconds a stopped worker or the scheduler gets before it is killed.")
    scheduler_start_timeout = Float(60.0, config=True, help="Seconds the scheduler gets to write its address.")
    worker_death_timeout = Float(
        60.0, config=True, help="Seconds a worker that cannot reach its scheduler waits before exiting."
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.processes = LocalProcesses(self.workdir, self.launcher, on_change=self._notify_change)
        self.scheduler = LocalScheduler(self.processes, self.security)
        self._stopping: set[str] = set()
        self._remote: dict[str, RemoteWorker] = {}
        self._sessions = None

    async def start_scheduler(self) -> SchedulerEndpoint:
        endpoint = await self.scheduler.start_for(self)
        self.address = endpoint.address
        return endpoint

    def stopped_for_idleness(self) -> bool:
        return self.scheduler.stopped_for_idleness(self.idle_timeout)

    def pids(self) -> dict[str, int]:
        return self.processes.pids()

    def log_tail(self, name: str, lines: int = 15) -> str:
        return self.processes.log_tail(name, lines)

    async def detach(self) -> None:
        await self.processes.detach()

    def worker_log(self, name: str) -> Path | None:
        """The file the output of worker ``name`` is copied to."""
        return self.processes.log_path(name)

    def exit_reason(self, name: str) -> str | None:
        return exit_reason(self.worker_log(name))

    def worker_options(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        """Keyword arguments of the remote Nanny (and its worker) for one worker of ``group``."""
        options: dict[str, Any] = {
            "name": name,
            "nthreads": group.threads,
            "memory_limit": group.memory,
            "death_timeout": self.worker_death_timeout,
            "dashboard": False,
            "dashboard_address": "127.0.0.1:0",  # its HTTP routes (/health, /metrics) on the host's loopback only
            # a default: distributed, which brings its defaults into dask.config, is not imported by the server
            "preload_nanny": [REPORT_PROCESS_GROUP, *dask.config.get("distributed.nanny.preload", default=[])],
        }
        if group.worker_resources:
            options["resources"] = dict(group.worker_resources)
        options["env"] = self.title_environment()  # the worker's environment (the Nanny's env)
        if not group.gpus:  # CUDA shows it no device of the host
            options["env"]["CUDA_VISIBLE_DEVICES"] = ""
        if self.interface:
            options["interface"] = self.interface
        return options

    def remote_command(self) -> str:
        """The remote Python, preceded (``env K=V ...``) by this server's dask configuration and the cluster's
        TLS settings when it has them.

        distributed's SSH deployment hands a worker the dask configuration of the process that starts it (the
        helper process); this server's, set later on the same command line, wins: a worker is configured as if
        the server had started it. The TLS settings name the files (the work folder must be shared with the
        hosts), never their contents: the remote command line can be read by every user of that host.
        """
        python = self.remote_python or sys.executable
        environment = {INHERIT_CONFIG_ENV: dask.config.serialize(dask.config.global_config)}
        if self.security is not None:
            # The worker's HTTP routes over HTTPS, to holders of the cluster's certificate only (the worker preload).
            environment.update(
                {
                    **self.security.worker_environment(),
                    **self.security.dashboard_environment(),
                    **worker_preload_environment(os.environ.get(WORKER_PRELOAD_ENV)),
                }
            )
        settings = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items())
        return f"env {settings} {python}"

    def _next_host(self) -> str:
        if not self.hosts:
            raise BackendError(f"the {self.name} backend has no hosts configured")
        load = {host: 0 for host in self.hosts}
        for worker in self._remote.values():
            if worker.host in load:
                load[worker.host] += 1
        return min(self.hosts, key=load.__getitem__)

    # -- starting and stopping workers ---------------------------------------------------------------

    @property
    def sessions(self):
        """The workers' SSH connections: held by the server's helper process (:class:`~.hosted.HostedSSHSessions`),
        or, for a backend made without one, by this process (:class:`~.sessions.SSHSessions`)."""
        if self._sessions is None:
            helper = self.context.helper
            if helper is not None:
                from clustermgr_lab.backends.ssh.hosted import HostedSSHSessions

                topic = f"ssh/{self.cluster_id}/{next(_topics)}"
                self._sessions = HostedSSHSessions(helper, topic, on_ended=self._ended)
            else:
                from clustermgr_lab.backends.ssh.sessions import SSHSessions  # imports distributed and asyncssh

                self._sessions = SSHSessions(on_ended=self._ended)
        return self._sessions

    def _worker_start(self, group: WorkerGroup, name: str, host: str, remote_python: str) -> WorkerStart:
        return WorkerStart(
            name=name,
            host=host,
            scheduler=self.address,
            connect_options=dict(self.connect_options),
            kwargs=self.worker_options(group, name),
            remote_python=remote_python,
            log_path=str(self.worker_log(name)),
            timeout=self.worker_start_timeout,
            command_timeout=self.command_timeout,
            stop_timeout=self.stop_timeout,
        )

    async def _start_worker(self, group: WorkerGroup, name: str, remote_python: str) -> None:
        host = self._next_host()
        remote = self._remote[name] = RemoteWorker(host)
        try:
            remote.process_group = await self.sessions.start(self._worker_start(group, name, host, remote_python))
        except StartFailed as exc:
            self._forget(name, remote)
            raise BackendError(str(exc)) from None
        except BaseException:
            self._forget(name, remote)
            raise
        self._notify_change()
        log.info("cluster %s: worker %s started over SSH on %s", self.cluster_id, name, host)

    def _forget(self, name: str, remote: RemoteWorker) -> None:
        if self._remote.get(name) is remote:
            del self._remote[name]
            self._notify_change()

    def _ended(self, name: str, returncode: int | None) -> None:
        """A worker ended on its own (``returncode`` None: its connection was lost, its process group killed)."""
        remote = self._remote.get(name)
        if remote is None or name in self._stopping:
            return
        self._forget(name, remote)
        log.warning("cluster %s: worker %s on %s ended (%s)", self.cluster_id, name, remote.host, returncode)
        self._report_exit(name, returncode)

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        """Start the workers in parallel; if any fails, those that started are stopped again."""
        if self.address is None:
            raise BackendError("the scheduler is not running")
        remote_python = self.remote_command()  # the server's dask configuration, serialized once for all of them
        starts = (self._start_worker(group, name, remote_python) for name in names)
        results = await asyncio.gather(*starts, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.scale_down(names)
            raise errors[0]

    async def _stop_remote(self, name: str) -> None:
        remote = self._remote.get(name)
        if remote is None:
            return
        self._stopping.add(name)
        try:
            await self.sessions.stop(name)
            self._forget(name, remote)
        finally:
            self._stopping.discard(name)

    async def scale_down(self, names: list[str]) -> None:
        """Kill the workers' remote process groups (TERM, then KILL); return once no process of them is left."""
        await asyncio.gather(*(self._stop_remote(name) for name in names))

    async def close(self) -> None:
        await self.scale_down(list(self._remote))
        if self._sessions is not None:
            await self._sessions.close()
        await self.processes.stop_all(self.stop_timeout)
        self.address = None

    def started(self) -> set[str]:
        """Names of the workers started over SSH and not yet stopped."""
        return set(self._remote)

    def hosts_of_workers(self) -> dict[str, str]:
        """The host of each worker started over SSH, by worker name."""
        return {name: remote.host for name, remote in self._remote.items()}

    # -- what a restarted server finds ---------------------------------------------------------------

    def _recordable_connect_options(self) -> dict[str, Any]:
        """The connect options that may be stored: no secrets, only what JSON can hold."""
        recordable = {}
        for key, value in self.connect_options.items():
            with contextlib.suppress(TypeError, ValueError):
                if key not in SECRET_CONNECT_OPTIONS and json.loads(json.dumps(value)) == value:
                    recordable[key] = value
        return recordable

    def process_records(self) -> dict[str, dict[str, Any]]:
        """The scheduler's PID, and each worker's host, process group and connect options."""
        records = self.scheduler.record()
        connect = self._recordable_connect_options()
        for name, remote in self._remote.items():
            if remote.process_group is not None:
                records[name] = {"host": remote.host, "process_group": remote.process_group, "connect_options": connect}
        return records

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        """Adopt the scheduler process; kill the recorded workers' process groups over SSH instead of adopting them.

        A worker's SSH channel (how its exit is noticed) does not outlive the server that opened it,
        so its workers are not taken over: the scale routine starts new ones. The recorded connect
        options (the cluster's) win over this class's.
        """
        self.address = endpoint.address
        self.scheduler.adopt(endpoint, {n: r for n, r in records.items() if n == SCHEDULER_PROCESS and "pid" in r})
        kills = [
            self.sessions.kill(
                str(record["host"]),
                {**self.connect_options, **(record.get("connect_options") or {})},
                kill_group_command(int(record["process_group"])),
                f"process group {record['process_group']}",
                self.command_timeout,
            )
            for record in records.values()
            if record.get("host") and record.get("process_group") is not None
        ]
        await asyncio.gather(*kills)
        return set()
