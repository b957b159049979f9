"""The Cluster objects of cluster-class clusters, held where distributed is imported: the scheduler links' process.

Each cluster-class backend (:mod:`.backend`, in the server) has its object here under a topic of its own,
built, scaled and closed by :func:`answer` (operation ``class_*`` of :mod:`clustermgr_lab.cluster.link_host`)
in a thread of that object's own, so that calls on it run one after another and this process's event loop
never waits on them. The object's scheduler runs here too, with the handlers a server-started scheduler gets
from its preload. What the object does on its own, it tells the backend as news on its topic
(``{"to": topic, "event": "workers", "args": [{name: job_id}]}``): the workers it runs and the batch job of
each that has one (dask-jobqueue's ``job_id``), which the server stores so that a later server can cancel them.

Operations (``topic``: the backend's):

- ``{"op": "class_check", "class"}`` → None, or why the class cannot be used here (a template's probe);
- ``{"op": "class_build", "topic", "class", "args", "kwargs", "tls", "timeout"}`` → the scheduler's
  ``{"address", "dashboard_address", "scheduler_id"}``;
- ``{"op": "class_scale", "topic", "n", "retired", "timeout"}``: ``cluster.scale(n)``, once the class no longer
  lists the ``retired`` workers (its names) as connected;
- ``{"op": "class_close", "topic", "timeout"}``: close the object (its workers, jobs and scheduler);
- ``{"op": "class_cancel_jobs", "class", "jobs"}`` → what was done, in words: batch jobs a Cluster object left
  (its process ended without closing it), cancelled with the class's own command.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import shlex
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from distributed.comm import parse_address, parse_host_port, unparse_host_port
from distributed.scheduler import Scheduler, WorkerStatusPlugin

from clustermgr_lab.backends.cluster_class.link import SUBSCRIBE_OP
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.domain.errors import BackendError
from clustermgr_lab.preloads.scheduler import dask_setup

#: Seconds between two looks at the object's workers (their job ids appear after ``scale`` returns).
WORKERS_POLL_SECONDS = 1.0
#: Seconds ``scale`` waits for the class to stop listing the workers the scheduler retired.
RETIRED_GONE_SECONDS = 10.0
#: Seconds the objects still held when this process ends may take to close, all together.
CLOSE_AT_EXIT_SECONDS = 8.0


def import_class(path: str) -> type:
    """The class at ``path`` (``module.Class``, or ``package.module.Class``).

    Called on the process's main thread (dask_jobqueue sets a SIGINT handler at import, which only the main
    thread may); the SIGINT handler is put back if the import replaced it.
    """
    module_name, _, class_name = path.rpartition(".")
    in_main_thread = threading.current_thread() is threading.main_thread()
    sigint = signal.getsignal(signal.SIGINT) if in_main_thread else None
    try:
        module = importlib.import_module(module_name)
        return getattr(module, class_name)
    except Exception as exc:  # ImportError, AttributeError, whatever the module raises as it is imported
        raise BackendError(f"cannot import the Cluster class {path!r}: {type(exc).__name__}: {exc}") from None
    finally:
        if sigint is not None and signal.getsignal(signal.SIGINT) is not sigint:
            signal.signal(signal.SIGINT, sigint)


def class_problem(path: str) -> str | None:
    """Why the class at ``path`` cannot run a cluster here (it does not import, or is no class); None: it can.

    Examples
    --------
    >>> class_problem("distributed.LocalCluster") is None
    True
    >>> class_problem("distributed.NoSuchCluster")
    "cannot import the Cluster class 'distributed.NoSuchCluster': AttributeError: module 'distributed' has no attribute 'NoSuchCluster'"
    >>> class_problem("distributed.comm.parse_address")
    "'distributed.comm.parse_address' is not a class"
    """
    try:
        cls = import_class(path)
    except BackendError as exc:
        return exc.message
    return None if isinstance(cls, type) else f"{path!r} is not a class"


def accepts_argument(cls: type, name: str) -> bool:
    """Whether ``cls(...)`` takes the keyword argument ``name`` by that name."""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters


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


class ClusterObject:
    """One cluster's Cluster object: every call on it in a thread of its own, in the order asked.

    Parameters
    ----------
    topic : str
        Its backend's topic.
    tell : callable
        Sends ``(event, args)`` to the backend.
    """

    def __init__(self, topic: str, tell: Callable[[str, list[Any]], None]):
        self.topic = topic
        self._tell = tell
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"clustermgr-{topic}")
        self._cluster: Any = None
        self._watch: asyncio.Task | None = None
        self._workers: dict[str, str | None] | None = None  # as last told
        self._closing = False

    async def _call(self, function, *args: Any, timeout: float | None = None) -> Any:
        call = asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(function, *args))
        return await (asyncio.wait_for(call, timeout) if timeout else call)

    async def build(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Build the object (the class imported on this thread, the main one), scaled to none; its scheduler's endpoint."""
        path = message["class"]
        cls = import_class(path)
        kwargs = dict(message.get("kwargs") or {})
        if message.get("tls") and accepts_argument(cls, "security"):  # a foreign class cannot be made to use TLS else
            kwargs.setdefault("security", ClusterCredentials.from_paths(message["tls"]).security())
        args = tuple(message.get("args") or ())
        try:
            endpoint = await self._call(self._build, cls, path, args, kwargs, timeout=message["timeout"])
        except asyncio.TimeoutError:
            raise BackendError(f"{path}(...) did not start within {message['timeout']:g} s") from None
        if not self._closing:  # closed while it was built: nothing to watch
            self._watch = asyncio.ensure_future(self._watch_workers())
        return endpoint

    def _build(self, cls: type, path: str, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            cluster = cls(*args, **kwargs)
        except Exception as exc:
            raise BackendError(f"{path}(...) failed: {type(exc).__name__}: {exc}") from None
        self._cluster = cluster
        cluster.scale(0)  # from none: the server's plan asks for every worker (by count) from here on
        scheduler = getattr(cluster, "scheduler", None)
        if not isinstance(scheduler, Scheduler):
            raise BackendError(
                f"the scheduler of {path} does not run in the process that holds the Cluster object, so the "
                "server cannot give it the handlers its scale routine and adaptive mode use"
            )
        cluster.sync(_install_handlers, scheduler)
        host = parse_host_port(parse_address(scheduler.address)[1])[0]
        port = scheduler.http_server.port if getattr(scheduler, "http_server", None) else None
        return {
            "address": scheduler.address,
            "dashboard_address": unparse_host_port(host, port) if port else None,
            "scheduler_id": scheduler.id,
        }

    async def scale(self, n: int, retired: set[str], timeout: float) -> None:
        await self._call(self._scale, n, retired, timeout=timeout)
        self._tell_workers()

    def _scale(self, n: int, retired: set[str]) -> None:
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
            time.sleep(0.05)  # in the object's thread, polling the class's view with a deadline
        cluster.scale(n)

    async def close(self, timeout: float) -> None:
        """Close the object (its workers, jobs and scheduler); its thread ends after."""
        self._closing = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        try:
            await self._call(self._close, timeout, timeout=timeout + 5)
        finally:
            self._executor.shutdown(wait=False)

    def _close(self, timeout: float) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close(timeout=timeout)

    def workers(self) -> dict[str, str | None]:
        """The object's workers by its names, each with its batch job's id (dask-jobqueue's ``job_id``) or None."""
        cluster = self._cluster
        if cluster is None:
            return {}
        found = dict(getattr(cluster, "workers", {}) or {})
        return {str(name): (str(getattr(w, "job_id", "") or "") or None) for name, w in found.items()}

    def _tell_workers(self) -> None:
        workers = self.workers()
        if workers != self._workers:
            self._workers = workers
            self._tell("workers", [workers])

    async def _watch_workers(self) -> None:
        """Job ids appear after ``scale`` returns (submitted on the class's loop): tell them once they do."""
        while True:
            self._tell_workers()
            await asyncio.sleep(WORKERS_POLL_SECONDS)


async def cancel_jobs(path: str, jobs: list[str]) -> str:
    """Cancel batch jobs with the class's own cancel command (dask-jobqueue's ``job_cls.cancel_command``); in words."""
    try:
        cls = import_class(path)
    except BackendError as exc:
        return f"its jobs {', '.join(jobs)} could not be cancelled ({exc.message})"
    cancel = getattr(getattr(cls, "job_cls", None), "cancel_command", None)
    if not cancel:
        return f"its jobs {', '.join(jobs)} could not be cancelled: {path} has no cancel command"
    command = [*shlex.split(cancel), *jobs]
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await process.communicate()
    if process.returncode != 0:
        return f"{shlex.join(command)} failed: {stderr.decode(errors='replace').strip()}"
    return f"its leftover jobs were cancelled ({shlex.join(command)})"


async def answer(message: dict[str, Any], by_topic: dict[str, ClusterObject], send: Callable[[dict], None]) -> Any:
    """Serve a ``class_*`` operation (see the module's docstring); each topic (a backend) has its :class:`ClusterObject`."""
    op = message["op"]
    if op == "class_check":
        return class_problem(message["class"])
    if op == "class_cancel_jobs":
        return await cancel_jobs(message["class"], list(message["jobs"]))
    topic = message["topic"]
    if op == "class_build":
        if topic in by_topic:
            raise ValueError(f"{topic} has a Cluster object already")

        def tell(event: str, args: list[Any]) -> None:
            send({"to": topic, "event": event, "args": args})

        held = by_topic[topic] = ClusterObject(topic, tell)
        try:
            return await held.build(message)
        except BaseException:  # closed here: nothing of it is left for the backend to close
            del by_topic[topic]
            closing = asyncio.ensure_future(held.close(message["timeout"]))
            closing.add_done_callback(lambda done: done.cancelled() or done.exception())  # its error is not news
            raise
    held = by_topic.get(topic)
    if op == "class_scale":
        if held is None:
            raise ValueError(f"{topic} has no Cluster object (closed, or this process started after it was built)")
        return await held.scale(int(message["n"]), set(message.get("retired") or ()), message["timeout"])
    if op == "class_close":
        if held is not None:
            del by_topic[topic]
            await held.close(message["timeout"])
        return None
    raise ValueError(f"no operation {op!r}")


async def close_all(by_topic: dict[str, ClusterObject]) -> None:
    """Close every object still held (this process is ending), within :data:`CLOSE_AT_EXIT_SECONDS` together."""
    held = list(by_topic.values())
    by_topic.clear()
    if held:
        closing = (h.close(CLOSE_AT_EXIT_SECONDS - 2) for h in held)
        await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), CLOSE_AT_EXIT_SECONDS)


class ClusterObjects:
    """How the links' process reaches this module: through the backends' registry, as the import-graph rule wants."""

    answer = staticmethod(answer)
    close_all = staticmethod(close_all)
