"""SSH backend: the scheduler runs next to the Jupyter server, each worker is started over SSH.

Workers are started by distributed's own SSH deployment (``distributed.deploy.ssh.Worker``, on
asyncssh): one SSH connection per worker, running ``python -m distributed.cli.dask_spec`` with a
Nanny on the remote host. A worker is tracked by its SSH channel (it has ended when the channel
reports an exit status) and by its remote process group, which the Nanny reports as it starts:
stopping a worker is ``kill -TERM`` (then ``-KILL``) of that group, run over the worker's
connection. SSH's own signal requests are not used: OpenSSH refuses them for root logins.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask.config
from distributed.deploy.ssh import Worker as SSHWorker
from traitlets import Dict, Float, List, Unicode

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, Backend, Capabilities, SchedulerEndpoint
from clustermgr_lab.backends.local.backend import WORKER_PRELOAD_ENV, worker_preload_environment
from clustermgr_lab.backends.local.processes import LocalProcesses, exit_reason
from clustermgr_lab.backends.local.scheduler import LocalScheduler
from clustermgr_lab.domain.errors import BackendError
from clustermgr_lab.domain.spec import WorkerGroup

log = logging.getLogger(__name__)

SECRET_CONNECT_OPTIONS = {"password", "passphrase"}  # never stored
PROCESS_GROUP_MARK = "clustermgr-lab remote process group"
# Runs in the remote Nanny as it starts (distributed runs preload text as a script). No single
# quote: distributed.deploy.ssh puts the worker's options in single quotes on the remote command line.
REPORT_PROCESS_GROUP = f'import os, sys; print("{PROCESS_GROUP_MARK}", os.getpgid(0), file=sys.stderr, flush=True)'

# distributed.deploy.ssh logs each line the remote worker writes to stderr while it starts (at
# INFO); those lines carry the process group it reports and, when it fails, the reason.
_start_output: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("_start_output", default=None)


class _StartOutput(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        lines = _start_output.get()
        if lines is not None:
            lines.append(record.getMessage())


_ssh_deploy_log = logging.getLogger("distributed.deploy.ssh")
_ssh_deploy_log.addHandler(_StartOutput())
if not _ssh_deploy_log.isEnabledFor(logging.INFO):
    _ssh_deploy_log.setLevel(logging.INFO)


def _stop_group_command(process_group: int, signal_name: str, wait: float) -> str:
    """Signal a worker's process group, then wait up to ``wait`` seconds for all of it to end (exit 0) or not (1)."""
    group, steps = int(process_group), int(wait * 10)
    script = (
        f"kill -{signal_name} -{group} 2>/dev/null; i=0; "
        f"while kill -0 -{group} 2>/dev/null; do [ $i -ge {steps} ] && exit 1; sleep 0.1; i=$((i+1)); done"
    )
    return f"sh -c '{script}'"  # sh whatever the remote user's login shell is; dash's kill takes no "--"


def _wait_until_gone(groups: str) -> str:
    """sh: wait (10 s at most) until the process groups ``groups`` (words) are gone, so that the caller can count on it."""
    return f"i=0; for g in {groups}; do while kill -0 -$g 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; done"


def _kill_group_command(process_group: int) -> str:
    """Kill a worker's process group on its host, only if its leader still is a dask_spec process."""
    group = int(process_group)
    wait = _wait_until_gone(str(group))
    return f"sh -c 'ps -o args= -p {group} | grep -q distributed.cli.dask_spec && kill -KILL -{group} && {{ {wait}; }}'"


def _literal_pattern(text: str) -> str:
    """``text`` as an extended regular expression that matches it literally, safe inside sh's double quotes."""
    return "".join(c if c.isalnum() or c in "/:_-@" else f"[{c}]" for c in text)


def _kill_unreported_command(scheduler_address: str, name: str) -> str:
    """Kill the process groups of worker ``name`` of ``scheduler_address`` found by command line, then wait for them.

    For a worker whose start was given up before its Nanny reported its process group. The remote command line
    is ``... distributed.cli.dask_spec <scheduler> --spec '{..."name": "<name>"...}'``, and sshd starts each
    command in a session (a process group) of its own. ``[.]`` keeps the pattern from matching this command itself.
    """
    address, worker = _literal_pattern(scheduler_address), _literal_pattern(name)
    pattern = f"distributed[.]cli[.]dask_spec {address} .*name.: .{worker}[^A-Za-z0-9_.-]"
    kill = (
        f'gs=""; for p in $(pgrep -f "{pattern}"); do g=$(ps -o pgid= -p $p | tr -d " "); '
        '[ -n "$g" ] && kill -KILL -$g && gs="$gs $g"; done'
    )
    return f"sh -c '{kill}; {_wait_until_gone('$gs')}; true'"


async def _run_remote_kill(host: str, connect_options: dict[str, Any], command: str, what: str, timeout: float) -> bool:
    """Over a new SSH connection, run a kill ``command`` for ``what``; True if it exited 0."""
    import asyncssh  # on first use, as distributed.deploy.ssh does: it adds to the server's start-up time

    async def run():
        async with asyncssh.connect(host, **connect_options) as connection:
            return await connection.run(command)

    try:
        done = await asyncio.wait_for(run(), timeout)
    except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
        log.warning("could not kill %s on %s: %s", what, host, exc)
        return False
    return done.exit_status == 0


async def _kill_remote_group(host: str, connect_options: dict[str, Any], process_group: int, timeout: float) -> bool:
    """Over a new SSH connection, kill a worker's process group if it still runs; True if it was killed."""
    command = _kill_group_command(process_group)
    return await _run_remote_kill(host, connect_options, command, f"process group {process_group}", timeout)


def _reported_process_group(output: list[str]) -> int | None:
    """The process group a starting worker printed (see ``REPORT_PROCESS_GROUP``), if it did."""
    for line in output:
        match = re.search(re.escape(PROCESS_GROUP_MARK) + r" (\d+)", line)
        if match:
            return int(match.group(1))
    return None


@dataclass
class RemoteWorker:
    """One worker started over SSH: its host, distributed's SSH process object, its process group, its watcher."""

    host: str
    process: SSHWorker
    process_group: int | None = None
    watcher: asyncio.Task | None = field(default=None)


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

    async def start_scheduler(self) -> SchedulerEndpoint:
        endpoint = await self.scheduler.start(
            host=self.scheduler_host,
            interface=self.scheduler_interface,
            idle_timeout=self.idle_timeout,
            timeout=self.scheduler_start_timeout,
            stop_timeout=self.stop_timeout,
        )
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
            "preload_nanny": [REPORT_PROCESS_GROUP, *dask.config.get("distributed.nanny.preload")],
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
        """The remote Python, preceded (``env K=V ...``) by the cluster's TLS settings when it has them.

        They name the files (the work folder must be shared with the hosts), never their contents:
        the remote command line can be read by every user of that host.
        """
        python = self.remote_python or sys.executable
        if self.security is None:
            return python
        # The worker's HTTP routes over HTTPS, to holders of the cluster's certificate only (the worker preload).
        environment = {
            **self.security.worker_environment(),
            **self.security.dashboard_environment(),
            **worker_preload_environment(os.environ.get(WORKER_PRELOAD_ENV)),
        }
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

    async def _start_worker(self, group: WorkerGroup, name: str) -> None:
        host = self._next_host()
        process = SSHWorker(
            self.address,
            host,
            connect_options=dict(self.connect_options),
            kwargs=self.worker_options(group, name),
            remote_python=self.remote_command(),
            name=name,
        )
        self._remote[name] = RemoteWorker(host, process)
        output: list[str] = []
        _start_output.set(output)
        try:
            await asyncio.wait_for(process.start(), self.worker_start_timeout)
        except asyncio.CancelledError:
            await self._abandon(name, output, ended=False)
            raise
        except Exception as exc:
            await self._abandon(name, output, ended=not isinstance(exc, asyncio.TimeoutError))
            status = process.proc.exit_status if process.proc is not None else None
            detail = "\n".join(output[-15:]) or f"{type(exc).__name__}: {exc}"
            if isinstance(exc, asyncio.TimeoutError):
                detail = f"no worker within {self.worker_start_timeout:g} s\n{detail}"
            raise BackendError(
                f"worker {name} did not start on {host} (remote exit status {status}): {detail}"
            ) from exc
        self._remote[name].process_group = _reported_process_group(output)
        self._remote[name].watcher = asyncio.ensure_future(self._watch_remote(name, process))
        self._notify_change()
        log.info("cluster %s: worker %s started over SSH on %s", self.cluster_id, name, host)

    async def _watch_remote(self, name: str, process: SSHWorker) -> None:
        """Copy the worker's output into its log, then report its exit unless we stopped it."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / f"{name}.log", "a", errors="replace") as log_file:

            async def copy(stream) -> None:
                async for line in stream:
                    log_file.write(line)
                    log_file.flush()

            await asyncio.gather(copy(process.proc.stdout), copy(process.proc.stderr), return_exceptions=True)
        await process.proc.wait_closed()
        returncode = process.proc.returncode
        remote = self._remote.get(name)
        if remote is None or remote.process is not process or name in self._stopping:
            return
        await self._close_connection(name)
        if returncode is None and remote.process_group is not None:
            # No exit status: the connection was lost, not the worker; it must not run on untracked.
            killed = await _kill_remote_group(
                remote.host, self.connect_options, remote.process_group, self.command_timeout
            )
            outcome = "killed it" if killed else "it was not running any more, or could not be reached"
            log.warning(
                "cluster %s: lost the SSH connection of worker %s on %s; %s",
                self.cluster_id,
                name,
                remote.host,
                outcome,
            )
        else:
            log.warning(
                "cluster %s: worker %s on %s ended on its own (%s)", self.cluster_id, name, remote.host, returncode
            )
        self._report_exit(name, returncode)

    async def _abandon(self, name: str, output: list[str], ended: bool) -> None:
        """Forget a worker that did not start, killing its remote process group if it got that far.

        ``ended``: its output has ended, so its exit status is on the way and worth waiting for.
        """
        remote = self._remote[name]
        group = _reported_process_group(output)
        if group is not None:
            await _kill_remote_group(remote.host, self.connect_options, group, self.command_timeout)
        elif self.address is not None:  # it may be running without having said its group yet: find it by name
            command = _kill_unreported_command(self.address, name)
            await _run_remote_kill(remote.host, self.connect_options, command, f"worker {name}", self.command_timeout)
        proc = remote.process.proc
        if proc is not None and (ended or group is not None):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait_closed(), self.stop_timeout)
        await self._close_connection(name)

    async def _close_connection(self, name: str) -> None:
        """Untrack the worker and close its SSH connection (which, alone, does not stop a remote process)."""
        remote = self._remote.pop(name, None)
        if remote is None:
            return
        self._notify_change()
        with contextlib.suppress(OSError):
            await remote.process.close()

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        """Start the workers in parallel; if any fails, those that started are stopped again."""
        if self.address is None:
            raise BackendError("the scheduler is not running")
        results = await asyncio.gather(*(self._start_worker(group, name) for name in names), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.scale_down(names)
            raise errors[0]

    async def _signal_group(self, remote: RemoteWorker, signal_name: str) -> bool:
        """Signal the worker's process group on its host over its own connection; True once the group is gone."""
        import asyncssh  # on first use (see _kill_remote_group)

        if remote.process_group is None:
            log.warning("cluster %s: a worker on %s did not report its process group", self.cluster_id, remote.host)
            return False
        command = _stop_group_command(remote.process_group, signal_name, self.stop_timeout)
        try:
            done = await asyncio.wait_for(
                remote.process.connection.run(command), self.stop_timeout + self.command_timeout
            )
        except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
            log.warning(
                "cluster %s: kill -%s of a worker on %s failed: %s", self.cluster_id, signal_name, remote.host, exc
            )
            return False
        return done.exit_status == 0

    async def _stop_remote(self, name: str) -> None:
        remote = self._remote.get(name)
        if remote is None:
            return
        self._stopping.add(name)
        try:
            for signal_name in ("TERM", "KILL"):
                if await self._signal_group(remote, signal_name):
                    break
                log.warning(
                    "cluster %s: worker %s was still running after kill -%s", self.cluster_id, name, signal_name
                )
            await self._close_connection(name)
        finally:
            self._stopping.discard(name)

    async def scale_down(self, names: list[str]) -> None:
        """Kill the workers' remote process groups (TERM, then KILL); return once no process of them is left."""
        await asyncio.gather(*(self._stop_remote(name) for name in names))

    async def close(self) -> None:
        await self.scale_down(list(self._remote))
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
            _kill_remote_group(
                str(record["host"]),
                {**self.connect_options, **(record.get("connect_options") or {})},
                int(record["process_group"]),
                self.command_timeout,
            )
            for record in records.values()
            if record.get("host") and record.get("process_group") is not None
        ]
        await asyncio.gather(*kills)
        return set()
