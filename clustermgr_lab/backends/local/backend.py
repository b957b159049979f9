"""The embedded default backend: scheduler and workers as local processes on 127.0.0.1."""

from __future__ import annotations

import ast
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import dask.config
from traitlets import Bool, Dict, Float, TraitError, validate

from clustermgr_lab.backends.base import SCHEDULER_PROCESS as SCHEDULER
from clustermgr_lab.backends.base import Backend, Capabilities, SchedulerEndpoint
from clustermgr_lab.backends.local.processes import PROCESS_DEFAULTS, LocalProcesses, TrackedProcess, exit_reason
from clustermgr_lab.backends.local.scheduler import PRELOAD, LocalScheduler, scheduler_command
from clustermgr_lab.backends.local.scratch import cluster_scratch, remove_cluster_scratch
from clustermgr_lab.backends.local.standby import Standby
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.domain import options as opt
from clustermgr_lab.domain.errors import BackendError, InvalidRequest
from clustermgr_lab.domain.spec import WorkerGroup

__all__ = [
    "PRELOAD", "PROCESS_DEFAULTS", "SCHEDULER", "LocalBackend", "TrackedProcess", "scheduler_command", "worker_command",
]  # fmt: skip


def worker_command(
    scheduler: str | Path,
    group: WorkerGroup,
    name: str,
    death_timeout: float = 60,
    credentials: ClusterCredentials | None = None,
    nanny: bool = True,
    local_directory: Path | None = None,
) -> list[str]:
    """The ``dask worker`` command line for one worker of ``group``; any backend may reuse it.

    ``scheduler`` is the scheduler's address, or the path of its scheduler file (the worker then
    waits for the file, so it can start before the scheduler has). With ``credentials`` it speaks
    TLS (and needs :meth:`~clustermgr_lab.common.security.ClusterCredentials.environment` too). Without
    ``nanny`` the worker is the process itself (``--no-nanny``): half the processes, but nothing
    restarts it or stops it at its memory limit. ``local_directory``: where it spills (see :mod:`.scratch`).
    """
    target = ["--scheduler-file", str(scheduler)] if isinstance(scheduler, Path) else [scheduler]
    command = [
        sys.executable, "-m", "distributed.cli.dask_worker", *target,
        "--name", name,
        "--nthreads", str(group.threads),
        "--memory-limit", str(group.memory),
        "--host", "127.0.0.1",
        "--no-dashboard",
        # its HTTP routes (/health, /metrics) still listen: on loopback, not on every interface
        "--dashboard-address", "127.0.0.1:0",
        "--death-timeout", str(death_timeout),
    ]  # fmt: skip
    if not nanny:
        command.append("--no-nanny")
    if local_directory is not None:
        command += ["--local-directory", str(local_directory)]
    if group.worker_resources:
        command += ["--resources", " ".join(f"{k}={v}" for k, v in group.worker_resources.items())]
    if credentials is not None:
        command += credentials.cli_arguments()  # and WORKER_PRELOAD through worker_preload_environment
    return command


#: With TLS, a worker's HTTP routes ask for the cluster's certificate too (see :mod:`clustermgr_lab.preloads.worker`).
WORKER_PRELOAD = "clustermgr_lab.preloads.worker"
WORKER_PRELOAD_ENV = "DASK_DISTRIBUTED__WORKER__PRELOAD"


def worker_preload_environment(value: str | None) -> dict[str, str]:
    """``DASK_DISTRIBUTED__WORKER__PRELOAD`` with :data:`WORKER_PRELOAD` added to the worker preloads already set.

    ``value``: that variable as the worker would get it otherwise (a template's ``worker_config``, else
    the server's environment); unset, the user's Dask config files say. A ``--preload`` on the command
    line would replace them all; the variable takes precedence over the files, so they are carried over.

    >>> worker_preload_environment("['site_preload']")
    {'DASK_DISTRIBUTED__WORKER__PRELOAD': "['site_preload', 'clustermgr_lab.preloads.worker']"}
    """
    if value:
        try:  # Dask reads its environment variables as Python literals
            configured = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            configured = value
    else:
        paths = dask.config._get_paths() if hasattr(dask.config, "_get_paths") else dask.config.paths
        configured = dask.config.get("distributed.worker.preload", None, config=dask.config.collect(paths, env={}))
    preloads = [configured] if isinstance(configured, str) else [str(p) for p in configured or ()]
    return {WORKER_PRELOAD_ENV: repr([*preloads, WORKER_PRELOAD])}


class LocalBackend(Backend):
    """Runs ``dask scheduler`` and ``dask worker`` processes on this machine.

    Processes are tracked by :class:`~.processes.LocalProcesses` (a session of their own each,
    output to a log file, exits noticed through a pidfd each rather than by waiting on a child, so
    that processes adopted from a previous server are watched the same way) and forked from the warm launcher when the
    context has one (see :mod:`.launcher`), else started as fresh interpreters.
    """

    name = "local"
    description = "Scheduler and workers as processes on this machine"
    workers_before_scheduler = True
    capabilities = Capabilities()
    template_options = {
        "nanny": opt.BackendOption(opt.boolean, "false: each worker one process, without a nanny", kind="boolean"),
        "worker_config": opt.BackendOption(
            opt.dask_config, "dask configuration of the workers, e.g. {'distributed.admin.tick.interval': '1s'}"
        ),
    }

    nanny = Bool(
        True,
        config=True,
        help="Start each worker under a nanny, which restarts it when it dies and stops it past its memory limit. "
        "False: each worker is one process (--no-nanny), half the processes and memory: for many small workers.",
    )
    worker_config = Dict(
        config=True,
        help="dask configuration the workers start with, as dotted keys, e.g. "
        "{'distributed.admin.tick.interval': '1s', 'distributed.worker.profile.enabled': False} "
        "for many workers that mostly sleep. Passed as DASK_* variables; they win over the server's own.",
    )

    @validate("worker_config")
    def _check_worker_config(self, proposal):
        try:
            return opt.dask_config(proposal["value"], "LocalBackend.worker_config")
        except InvalidRequest as exc:
            raise TraitError(str(exc)) from None

    stop_timeout = Float(10.0, config=True, help="Seconds a stopped process gets after SIGTERM before SIGKILL.")
    scheduler_start_timeout = Float(
        60.0, config=True, help="Seconds the scheduler gets to write its address before it is stopped."
    )
    worker_death_timeout = Float(
        60.0, config=True, help="Seconds a worker that cannot reach its scheduler waits before exiting."
    )
    scheduler_host = "127.0.0.1"  # where the scheduler listens (its dashboard stays on 127.0.0.1)
    scheduler_interface: str | None = None  # or: the network interface it listens on (wins over the host)

    takes_standby = True

    def __init__(self, *args, standby: Standby | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.processes = LocalProcesses(self.workdir, self.launcher, self._process_exited, self._notify_change)
        self.scheduler = LocalScheduler(self.processes, self.security, self.title_environment())
        self._gpu_slots: dict[str, list[int]] = {}
        if standby is not None:  # at once: a delete before start_scheduler() must stop it too
            self.scheduler.take_over(standby.processes, standby.endpoint)
            self.address = self.scheduler.address

    @property
    def idle_timeout_to_push(self) -> float | None:
        """The idle timeout its scheduler must be told once linked: a standby one was started without it."""
        return self.idle_timeout if self.scheduler.from_standby else None

    def _process_exited(self, name: str, code: int | None) -> None:
        self._gpu_slots.pop(name, None)
        if name != SCHEDULER:
            self._report_exit(name, code)

    def log_tail(self, name: str, lines: int = 15, max_bytes: int = 16384) -> str:
        return self.processes.log_tail(name, lines, max_bytes)

    def exit_reason(self, name: str) -> str | None:
        return exit_reason(self.worker_log(name))

    def worker_log(self, name: str) -> Path | None:
        """The file worker ``name`` writes its output to."""
        return self.processes.log_path(name)

    @property
    def scheduler_file(self) -> Path:
        return self.scheduler.scheduler_file

    def stopped_for_idleness(self) -> bool:
        return self.scheduler.stopped_for_idleness(self.idle_timeout)

    async def start_scheduler(self) -> SchedulerEndpoint:
        endpoint = await self.scheduler.start_for(self)
        self.address = endpoint.address
        return endpoint

    def _gpu_env(self, group: WorkerGroup, name: str) -> dict[str, str]:
        """``CUDA_VISIBLE_DEVICES`` of a worker: its own GPUs (slots no other worker of the cluster has), or none.

        A worker of a group without GPUs gets the empty list: CUDA then shows it no device at all (left
        unset, it would see, and could use, every GPU of the machine). Slots are positions in the
        server's own ``CUDA_VISIBLE_DEVICES`` when it has one (a site that gave it GPUs 2 and 3 hands
        out 2 and 3); a slot beyond that list is no device.
        """
        if not group.gpus:
            return {"CUDA_VISIBLE_DEVICES": ""}
        taken = {slot for slots in self._gpu_slots.values() for slot in slots}
        slots, candidate = [], 0
        while len(slots) < group.gpus:
            if candidate not in taken:
                slots.append(candidate)
            candidate += 1
        self._gpu_slots[name] = slots
        own = os.environ.get("CUDA_VISIBLE_DEVICES")
        if own is None:
            return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, slots))}
        devices = [device.strip() for device in own.split(",") if device.strip()]
        return {"CUDA_VISIBLE_DEVICES": ",".join(devices[slot] for slot in slots if slot < len(devices))}

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        await self.scheduler.spawned.wait()
        if not self.scheduler.running():
            raise BackendError("the scheduler is not running")
        scheduler = self.address or self.scheduler_file  # before it answers, workers wait for its file
        shared_env = {
            **opt.dask_config_environment(self.worker_config),
            **(self.security.environment() if self.security else {}),
            **self.title_environment(),
        }
        # The worker preload: HTTPS routes for certificate holders only (with TLS), and the process title.
        shared_env.update(
            worker_preload_environment(shared_env.get(WORKER_PRELOAD_ENV) or os.environ.get(WORKER_PRELOAD_ENV))
        )
        scratch = await asyncio.to_thread(cluster_scratch, self.cluster_id)
        starts = []
        for name in names:
            command = worker_command(
                scheduler, group, name, self.worker_death_timeout, self.security, self.nanny,
                local_directory=scratch / name if scratch else None,
            )  # fmt: skip
            starts.append(self.processes.spawn(name, command, {**shared_env, **self._gpu_env(group, name)}))
        # All asked of the launcher at once (it answers in turn): no round trip to wait for between two forks.
        errors = [r for r in await asyncio.gather(*starts, return_exceptions=True) if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _stop(self, name: str) -> None:
        await self.processes.stop(name, self.stop_timeout)
        self._gpu_slots.pop(name, None)

    async def scale_down(self, names: list[str]) -> None:
        await asyncio.gather(*(self._stop(name) for name in names))

    async def close(self) -> None:
        # The workers first, while their scheduler still answers: a worker without a nanny that gets SIGTERM just as
        # its scheduler's connection breaks can hang in its close until SIGKILL (stop_timeout, 10 s; benchmarks/growth.py).
        workers = [name for name in self.processes.names() if name != SCHEDULER]
        await asyncio.gather(*(self.processes.stop(name, self.stop_timeout) for name in workers))
        await self.processes.stop_all(self.stop_timeout)
        await asyncio.to_thread(remove_cluster_scratch, self.cluster_id)
        self._gpu_slots.clear()
        self.address = None

    async def detach(self) -> None:
        await self.processes.detach()

    def pids(self) -> dict[str, int]:
        return self.processes.pids()

    def process_records(self) -> dict[str, dict[str, Any]]:
        return {
            name: {**record, **({"gpus": self._gpu_slots[name]} if name in self._gpu_slots else {})}
            for name, record in self.processes.records().items()
        }

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        self.address = endpoint.address
        for name in self.processes.adopt(records):
            if records[name].get("gpus"):
                self._gpu_slots[name] = list(records[name]["gpus"])
        self.scheduler.adopt(endpoint, {})
        return set(self.processes.names()) - {SCHEDULER}
