"""The cluster-class backend: any distributed ``Cluster`` class (e.g. ``dask_jobqueue.SLURMCluster``) runs the cluster.

A template names the class and its arguments (``{"backend": "cluster-class", "options": {"class":
"dask_jobqueue.SLURMCluster", "kwargs": {...}}}``); the server's own scale routine and adaptive policy
drive it by count, through ``cluster.scale(n)``. The Cluster object lives in this server's process
(its scheduler too), built and closed in a thread of its own so that the event loop never waits on it.
What it cannot do is in :attr:`ClusterClassBackend.capabilities`: one group only, its shape set by the
class's arguments; the class picks which workers its ``scale(n)`` closes; it cannot outlive the server.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import inspect
import re
import shlex
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from distributed.comm import parse_address, parse_host_port, unparse_host_port
from distributed.scheduler import Scheduler, WorkerStatusPlugin
from traitlets import Float

from clustermgr_lab.backends.base import SCHEDULER_PROCESS, Backend, Capabilities, SchedulerEndpoint
from clustermgr_lab.cluster.scheduler_link import SchedulerLink
from clustermgr_lab.domain.errors import BackendError, InvalidRequest
from clustermgr_lab.domain.options import BackendOption
from clustermgr_lab.domain.spec import WorkerGroup
from clustermgr_lab.preloads.scheduler import dask_setup

CLASS_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Arguments the server sets itself: the Cluster object runs synchronously, on a loop of its own.
RESERVED_KWARGS = {"asynchronous", "loop"}
RECORDS_POLL_SECONDS = 1.0
RETIRED_GONE_SECONDS = 10.0

NOT_READOPTABLE = "its Cluster object lives inside the Jupyter server's process, so it cannot outlive a server restart"
CAPABILITY_REASONS = {
    "multiple_groups": "a Cluster class runs one kind of worker: one group, scaled by count",
    "editable_spec": "threads and memory per worker are set by the Cluster class's arguments in the template",
    "exact_retire": "the Cluster class's scale(n) picks which workers close (after the scheduler has retired "
    "the ones it would close, so their data moves)",
    "readoptable": NOT_READOPTABLE,
    "enforces_tls": "the server's TLS credentials are passed as security= when the class takes that argument; "
    "otherwise the class's own settings (its arguments, the Dask config) decide",
}


def parse_class_path(value: Any, field_name: str) -> str:
    """``package.module.Class``, a class this server's Python can import.

    Imported here, when the server reads its templates (in the main thread, before it serves): some
    modules can only be imported there (dask_jobqueue sets a signal handler at import), and a wrong
    name is found at start rather than by the first cluster.
    """
    if not isinstance(value, str) or not CLASS_PATH.fullmatch(value):
        raise InvalidRequest(f"must be a class path such as 'dask_jobqueue.SLURMCluster', not {value!r}", field_name)
    package = value.split(".", 1)[0]
    if importlib.util.find_spec(package) is None:
        raise InvalidRequest(f"{value!r}: the package {package!r} is not installed in this server's Python", field_name)
    try:
        cls = import_class(value)
    except BackendError as exc:
        raise InvalidRequest(exc.message, field_name) from None
    if not isinstance(cls, type):
        raise InvalidRequest(f"{value!r} is not a class", field_name)
    return value


def parse_args(value: Any, field_name: str) -> tuple:
    """Positional arguments: a list of JSON values."""
    if not isinstance(value, (list, tuple)):
        raise InvalidRequest(f"must be a list of positional arguments, not {value!r}", field_name)
    return tuple(value)


def parse_kwargs(value: Any, field_name: str) -> dict[str, Any]:
    """Keyword arguments: an object of JSON values, without the ones the server sets itself."""
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InvalidRequest(f"must be an object of keyword arguments, not {value!r}", field_name)
    for key in RESERVED_KWARGS & set(value):
        raise InvalidRequest(
            "is set by the server (the Cluster object runs on a loop of its own)", f"{field_name}.{key}"
        )
    return dict(value)


def import_class(path: str) -> type:
    """The class at ``path`` (``module.Class``, or ``package.module.Class``).

    The process's SIGINT handler is put back if the import replaced it (dask_jobqueue's does).
    """
    module_name, _, class_name = path.rpartition(".")
    in_main_thread = threading.current_thread() is threading.main_thread()
    sigint = signal.getsignal(signal.SIGINT) if in_main_thread else None
    try:
        module = importlib.import_module(module_name)
        return getattr(module, class_name)
    except (ImportError, AttributeError, ValueError) as exc:  # ValueError: a signal set outside the main thread
        raise BackendError(f"cannot import the Cluster class {path!r}: {exc}") from None
    finally:
        if sigint is not None and signal.getsignal(signal.SIGINT) is not sigint:
            signal.signal(signal.SIGINT, sigint)


def accepts_argument(cls: type, name: str) -> bool:
    """Whether ``cls(...)`` takes the keyword argument ``name`` by that name."""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters


#: The handler through which the server's link subscribes to the worker stream (see :class:`ServerWorkerStatus`).
SUBSCRIBE_OP = "clustermgr_subscribe_worker_status"


class ServerWorkerStatus(WorkerStatusPlugin):
    """The server's worker stream, as a scheduler plugin of its own name.

    ``subscribe_worker_status`` registers its plugin under a fixed name, so a second subscriber takes
    the stream away from the Cluster object (its ``scheduler_info`` would go stale, and its ``scale``
    close the wrong workers).
    """

    name = "clustermgr-worker-status"


def subscribe_beside(scheduler: Scheduler, comm) -> dict[str, Any]:
    """``Scheduler.subscribe_worker_status``, under :class:`ServerWorkerStatus`'s name."""
    ServerWorkerStatus(scheduler, comm)
    identity = scheduler.identity()
    for worker in identity["workers"].values():
        worker.pop("metrics", None)
        worker.pop("last_seen", None)
    return identity


async def _install_handlers(scheduler: Scheduler) -> None:
    """On the scheduler's loop: the handlers a server-started scheduler gets from its preload, and the stream."""
    dask_setup(scheduler)
    scheduler.handlers[SUBSCRIBE_OP] = lambda comm: subscribe_beside(scheduler, comm)


class ClusterClassLink(SchedulerLink):
    """The link to a Cluster object's scheduler: subscribed beside the object's own subscription."""

    subscribe_op = SUBSCRIBE_OP


class ClusterClassBackend(Backend):
    """A cluster run by an object of any ``distributed`` Cluster class, scaled by count with ``scale(n)``.

    The requested workers are names the server gives (``default-1``...); the class names its workers
    itself, so each worker that connects is claimed by the oldest requested name not yet claimed
    (:meth:`claim_worker`). The scheduler must run in this process (it does for ``LocalCluster`` and
    every dask-jobqueue class): the server adds its handlers (:mod:`clustermgr_lab.preloads.scheduler`)
    to it once the object is built.

    Parameters
    ----------
    class : str
        The Cluster class (template option ``class``).
    args, kwargs
        Its positional and keyword arguments (template options ``args``, ``kwargs``).
    """

    name = "cluster-class"
    description = "Any distributed Cluster class (e.g. dask_jobqueue.SLURMCluster), scaled by count"
    capabilities = Capabilities(
        multiple_groups=False,
        readoptable=False,
        runs_processes_here=False,
        exact_retire=False,
        editable_spec=False,
        enforces_tls=False,
        reasons=CAPABILITY_REASONS,
    )
    scheduler_link = ClusterClassLink
    template_options = {
        # a free value would let a request import a module of its choice: a user may only pick among choices
        "class": BackendOption(
            parse_class_path, "The Cluster class, e.g. 'dask_jobqueue.SLURMCluster'.", free_form=True
        ),
        "args": BackendOption(parse_args, "Its positional arguments (a list)."),
        "kwargs": BackendOption(parse_kwargs, "Its keyword arguments (an object), e.g. cores, memory, queue."),
    }
    start_timeout = Float(
        300.0, config=True, help="Seconds the Cluster class may take to build its object (and start its scheduler)."
    )
    close_timeout = Float(
        60.0, config=True, help="Seconds the Cluster object may take to close (its workers and jobs, its scheduler)."
    )

    def __init__(self, *args: Any, **kwargs: Any):
        options = dict(kwargs.get("options") or {})
        kwargs["options"] = {}
        super().__init__(*args, **kwargs)
        self.class_path: str | None = options.get("class")
        self.class_args: tuple = tuple(options.get("args") or ())
        self.class_kwargs: dict[str, Any] = dict(options.get("kwargs") or {})
        # One thread per cluster: every call on the Cluster object, in order, off the event loop.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"clustermgr-{self.cluster_id}")
        self._cluster: Any = None
        self._requested: list[str] = []  # the names the reconciler asked for, oldest first
        self._claimed: dict[str, str] = {}  # the class's worker name -> the requested name it fills
        self._records: dict[str, dict[str, Any]] = {}
        self._watch: asyncio.Task | None = None
        self._closed = False

    # -- the Cluster object, always in the backend's own thread ---------------------------------------

    async def _call(self, function, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        call = asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(function, *args, **kwargs))
        return await (asyncio.wait_for(call, timeout) if timeout else call)

    def cluster_arguments(self, cls: type) -> tuple[tuple, dict[str, Any]]:
        """The positional and keyword arguments the class is built with: the one place they are assembled.

        The template's, plus the cluster's TLS credentials as ``security=`` when the server has some
        for it and the class takes that argument (a foreign class cannot be made to use TLS otherwise).
        """
        kwargs = dict(self.class_kwargs)
        security = self.security
        if security is not None and accepts_argument(cls, "security"):
            kwargs.setdefault("security", security.security())  # a distributed.Security
        return self.class_args, kwargs

    def _build(self) -> SchedulerEndpoint:
        """In the backend's thread: import the class, build the object, add the server's handlers to its scheduler."""
        if self.class_path is None:
            raise BackendError("the template names no Cluster class (option 'class')")
        cls = import_class(self.class_path)
        args, kwargs = self.cluster_arguments(cls)
        try:
            cluster = cls(*args, **kwargs)
        except Exception as exc:
            raise BackendError(f"{self.class_path}(...) failed: {type(exc).__name__}: {exc}") from None
        self._cluster = cluster
        cluster.scale(0)  # from none: the server's plan asks for every worker (by count) from here on
        scheduler = getattr(cluster, "scheduler", None)
        if not isinstance(scheduler, Scheduler):
            raise BackendError(
                f"the scheduler of {self.class_path} does not run in this server's process, so the server "
                "cannot give it the handlers its scale routine and adaptive mode use"
            )
        cluster.sync(_install_handlers, scheduler)
        host = parse_host_port(parse_address(scheduler.address)[1])[0]
        port = scheduler.http_server.port if getattr(scheduler, "http_server", None) else None
        return SchedulerEndpoint(scheduler.address, unparse_host_port(host, port) if port else None, scheduler.id)

    def _close_object(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close(timeout=self.close_timeout)

    def _scale_object(self, n: int, retired: set[str]) -> None:
        """``cluster.scale(n)``, once the class no longer lists the retired workers as connected.

        The class closes workers it does not see connected first, so it closes the retired ones.
        """
        cluster = self._cluster
        if cluster is None:
            return
        deadline = time.monotonic() + RETIRED_GONE_SECONDS
        while retired and time.monotonic() < deadline:
            connected = {str(w.get("name")) for w in dict(cluster.scheduler_info.get("workers", {})).values()}
            if not retired & connected:
                break
            time.sleep(0.05)  # in the backend's thread, polling the class's view with a deadline
        cluster.scale(n)

    # -- the backend contract -----------------------------------------------------------------------

    async def start_scheduler(self) -> SchedulerEndpoint:
        try:
            endpoint = await self._call(self._build, timeout=self.start_timeout)
        except asyncio.TimeoutError:
            raise BackendError(f"{self.class_path}(...) did not start within {self.start_timeout:g} s") from None
        self.address = endpoint.address
        self._watch = asyncio.ensure_future(self._watch_records())
        self._notify_change()
        return endpoint

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        self._requested += names
        try:
            await self._call(self._scale_object, len(self._requested), set())
        except Exception as exc:  # not started: they must not count as requested (see started())
            self._requested = [name for name in self._requested if name not in names]
            raise BackendError(f"{self.class_path}.scale() failed: {type(exc).__name__}: {exc}") from None
        self._notify_change()

    async def scale_down(self, names: list[str]) -> None:
        dropped = set(names)
        self._requested = [name for name in self._requested if name not in dropped]
        retired = {theirs for theirs, ours in self._claimed.items() if ours in dropped}
        for theirs in retired:
            del self._claimed[theirs]
        await self._call(self._scale_object, len(self._requested), retired)
        self._notify_change()

    async def close(self) -> None:
        """Close the Cluster object (its workers, jobs and scheduler); once."""
        if self._closed:
            return
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        try:
            await self._call(self._close_object, timeout=self.close_timeout + 10)
        except asyncio.TimeoutError:
            self.log.error(
                "cluster %s: %s did not close within %g s", self.cluster_id, self.class_path, self.close_timeout
            )
        self._requested.clear()
        self._claimed.clear()
        self._records = {}
        self.address = None
        self._notify_change()
        self._executor.shutdown(wait=False)

    async def detach(self) -> None:
        """Nothing can be left running for the next server (it could not adopt it): closes everything."""
        await self.close()

    def claim_worker(self, info: Mapping[str, Any]) -> str:
        theirs = str(info.get("name"))
        if theirs not in self._claimed:
            taken = set(self._claimed.values())
            free = next((name for name in self._requested if name not in taken), None)
            if free is None:
                return theirs
            self._claimed[theirs] = free
        return self._claimed[theirs]

    def started(self) -> set[str]:
        return set(self._requested)

    # -- what the store keeps, and what a restarted server does with it -------------------------------

    def _read_records(self) -> dict[str, dict[str, Any]]:
        """The batch job of each of the class's workers that has one (dask-jobqueue's ``job_id``)."""
        cluster = self._cluster
        if cluster is None:
            return {}
        ours = {theirs: mine for theirs, mine in self._claimed.items()}
        records: dict[str, dict[str, Any]] = {SCHEDULER_PROCESS: {"cluster_class": self.class_path}}
        for theirs, worker in dict(getattr(cluster, "workers", {}) or {}).items():
            job_id = getattr(worker, "job_id", None)
            if job_id:
                records[ours.get(str(theirs), f"{self.class_path}:{theirs}")] = {"job_id": str(job_id)}
        return records

    async def _watch_records(self) -> None:
        """Job ids appear after ``scale`` returns (submitted on the class's loop): store them once they do."""
        while True:
            records = self._read_records()
            if records != self._records:
                self._records = records
                self._notify_change()
            await asyncio.sleep(RECORDS_POLL_SECONDS)

    def process_records(self) -> dict[str, dict[str, Any]]:
        return dict(self._records)

    async def adopt(self, endpoint: SchedulerEndpoint, records: dict[str, dict[str, Any]]) -> set[str]:
        """Never adopts: cancels the batch jobs the last server's Cluster object left, then says why it failed."""
        if not records:
            return set()
        jobs = sorted({r["job_id"] for r in records.values() if isinstance(r, Mapping) and r.get("job_id")})
        done = "nothing of it was left to stop"
        if jobs:
            done = await self._cancel_jobs(jobs)
        raise BackendError(f"not re-adopted: {NOT_READOPTABLE}; {done}")

    async def _cancel_jobs(self, jobs: list[str]) -> str:
        """Cancel leftover jobs with the class's own cancel command (dask-jobqueue's ``job_cls.cancel_command``)."""
        try:
            cls = await asyncio.to_thread(import_class, self.class_path or "")
        except BackendError as exc:
            return f"its jobs {', '.join(jobs)} could not be cancelled ({exc.message})"
        cancel = getattr(getattr(cls, "job_cls", None), "cancel_command", None)
        if not cancel:
            return f"its jobs {', '.join(jobs)} could not be cancelled: {self.class_path} has no cancel command"
        command = [*shlex.split(cancel), *jobs]
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, stderr = await process.communicate()
        if process.returncode != 0:
            return f"{shlex.join(command)} failed: {stderr.decode(errors='replace').strip()}"
        return f"its leftover jobs were cancelled ({shlex.join(command)})"
