"""SSH backend: the scheduler runs next to the Jupyter server, each worker is started over SSH.

Workers are started by distributed's own SSH deployment (``distributed.deploy.ssh.Worker``, on
asyncssh): one SSH connection per worker, running ``python -m distributed.cli.dask_spec`` with a
Nanny on the remote host. The connection and its remote process are what tracks a worker: it is
stopped by a ``TERM`` (then ``KILL``) signal sent over its SSH channel, and it is gone once the
channel reports its exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from distributed.deploy.ssh import Worker as SSHWorker

from ..errors import BackendError
from ..spec import WorkerGroup
from .local import LocalBackend

log = logging.getLogger(__name__)

# What distributed.deploy.ssh logs from a worker's stderr while it starts, per starting task:
# the reason a worker did not start is in those lines.
_start_output: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("_start_output", default=None)


class _StartOutput(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        lines = _start_output.get()
        if lines is not None:
            lines.append(record.getMessage())


logging.getLogger("distributed.deploy.ssh").addHandler(_StartOutput())


@dataclass
class RemoteWorker:
    """One worker started over SSH: its host, distributed's SSH process object, and its watcher."""

    host: str
    process: SSHWorker
    watcher: asyncio.Task | None = field(default=None)


class SSHBackend(LocalBackend):
    """Each worker is a ``dask_spec`` Nanny started over SSH on one of ``hosts``.

    The scheduler is a local process (inherited from :class:`LocalBackend`): the server's scheduler
    link, the dashboard proxy and the clean-up of a dead server's scheduler work as for local
    clusters. Remote hosts must reach it, so across machines ``scheduler_host`` must be an address
    of this machine that they can reach (it is ``127.0.0.1`` by default: workers on this machine).

    Configure by class attributes, e.g. in ``jupyter_server_config.py``::

        from clustermgr_lab.backends import BACKENDS
        from clustermgr_lab.backends.ssh import SSHBackend

        class Lab(SSHBackend):
            name = "ssh-lab"
            hosts = ("node1", "node2")
            connect_options = {"username": "dask", "client_keys": ["~/.ssh/id_ed25519"]}
            remote_python = "/opt/conda/bin/python"
            scheduler_host = "10.0.0.5"  # this machine, as the nodes reach it
            interface = "eth0"

        BACKENDS[Lab.name] = Lab

    Workers go to the host that has the fewest workers of this cluster. A worker that ends on its
    own is reported through ``on_worker_exit`` with its remote exit status. A worker that cannot
    reach its scheduler for ``worker_death_timeout`` seconds exits by itself: that bounds what a
    server that died hard leaves on remote hosts (its local scheduler is stopped by :meth:`reap`).
    """

    name = "ssh"
    description = "Scheduler on this machine, each worker started over SSH (distributed's SSH deployment)"
    workers_before_scheduler = False  # a remote worker needs the scheduler's address

    hosts: ClassVar[tuple[str, ...]] = ("127.0.0.1",)  # where workers run
    connect_options: ClassVar[dict[str, Any]] = {}  # for asyncssh.connect: port, username, known_hosts, client_keys...
    remote_python: ClassVar[str | None] = None  # Python on the hosts; None: this server's sys.executable
    interface: ClassVar[str | None] = None  # the workers' network interface; None: the one routing to the scheduler
    worker_class: ClassVar[str] = "distributed.Nanny"
    worker_start_timeout = 60.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._remote: dict[str, RemoteWorker] = {}

    def worker_options(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        """Keyword arguments of the remote Nanny (and its worker) for one worker of ``group``."""
        options: dict[str, Any] = {
            "name": name,
            "nthreads": group.threads,
            "memory_limit": group.memory,
            "death_timeout": self.worker_death_timeout,
            "dashboard": False,
        }
        if group.worker_resources:
            options["resources"] = dict(group.worker_resources)
        if self.interface:
            options["interface"] = self.interface
        return options

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
            worker_class=self.worker_class,
            remote_python=self.remote_python or sys.executable,
            name=name,
        )
        self._remote[name] = RemoteWorker(host, process)
        output: list[str] = []
        _start_output.set(output)
        try:
            await asyncio.wait_for(process.start(), self.worker_start_timeout)
        except asyncio.CancelledError:
            await self._forget(name)
            raise
        except Exception as exc:
            await self._forget(name)
            status = process.proc.exit_status if process.proc is not None else None
            detail = "\n".join(output[-15:]) or f"{type(exc).__name__}: {exc}"
            if isinstance(exc, asyncio.TimeoutError):
                detail = f"no worker within {self.worker_start_timeout:g} s\n{detail}"
            raise BackendError(f"worker {name} did not start on {host} (remote exit status {status}): {detail}") from exc
        watcher = asyncio.ensure_future(self._watch_remote(name, process))
        self._remote[name].watcher = watcher
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
        await self._forget(name)
        log.warning("cluster %s: worker %s on %s ended on its own (%s)", self.cluster_id, name, remote.host, returncode)
        if self.on_worker_exit:
            self.on_worker_exit(name, returncode)

    async def _forget(self, name: str) -> None:
        """Close the worker's SSH connection (killing its process if still running) and untrack it."""
        remote = self._remote.pop(name, None)
        if remote is None:
            return
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

    async def _stop_remote(self, name: str) -> None:
        remote = self._remote.get(name)
        if remote is None:
            return
        self._stopping.add(name)
        try:
            for signal_name in ("TERM", "KILL"):
                if remote.watcher is None or remote.watcher.done():
                    break
                with contextlib.suppress(OSError):
                    remote.process.proc.send_signal(signal_name)
                try:
                    await asyncio.wait_for(asyncio.shield(remote.watcher), self.stop_timeout)
                except asyncio.TimeoutError:
                    log.warning("cluster %s: worker %s did not stop on %s", self.cluster_id, name, signal_name)
            await self._forget(name)
        finally:
            self._stopping.discard(name)

    async def scale_down(self, names: list[str]) -> None:
        """Signal the workers over their SSH channels; return once their remote processes have exited."""
        await asyncio.gather(*(self._stop_remote(name) for name in names))

    async def close(self) -> None:
        await self.scale_down(list(self._remote))
        await super().close()

    def hosts_of_workers(self) -> dict[str, str]:
        """The host of each worker started over SSH, by worker name."""
        return {name: remote.host for name, remote in self._remote.items()}
