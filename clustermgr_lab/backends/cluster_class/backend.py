"""The cluster-class backend, the server's side: a cluster run by an object of any ``distributed`` Cluster class.

A template names the class and its arguments (``{"backend": "cluster-class", "options": {"class":
"dask_jobqueue.SLURMCluster", "kwargs": {...}}}``); the server's own scale routine and adaptive policy
drive it by count, through ``cluster.scale(n)``. The Cluster object, and the scheduler it starts, live in the
server's scheduler links' process (:mod:`.objects`, asked through ``BackendContext.helper``), where distributed
is imported already: the server itself never imports distributed or the class's package for them, and a server
whose clusters are all gone lets that process go. What it cannot do is in :attr:`ClusterClassBackend.capabilities`:
one group only, its shape set by the class's arguments; the class picks which workers its ``scale(n)`` closes;
it cannot outlive the server.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import re
from collections.abc import Mapping
from typing import Any

from traitlets import Float

from clustermgr_lab.backends.base import (
    SCHEDULER_PROCESS,
    Backend,
    Capabilities,
    HelperProcess,
    SchedulerEndpoint,
    TemplateProbe,
)
from clustermgr_lab.backends.cluster_class.link import ClusterClassLink
from clustermgr_lab.domain.errors import BackendError, InvalidRequest
from clustermgr_lab.domain.options import BackendOption
from clustermgr_lab.domain.spec import WorkerGroup

CLASS_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Arguments the server sets itself: the Cluster object runs synchronously, on a loop of its own.
RESERVED_KWARGS = {"asynchronous", "loop"}
#: Seconds a ``scale`` may take where the object lives (the wait for retired workers to leave included).
SCALE_TIMEOUT = 60.0

NOT_READOPTABLE = (
    "its Cluster object lives in a process of the Jupyter server's (its scheduler links' process), so it cannot "
    "outlive a server restart"
)
CAPABILITY_REASONS = {
    "multiple_groups": "a Cluster class runs one kind of worker: one group, scaled by count",
    "editable_spec": "threads and memory per worker are set by the Cluster class's arguments in the template",
    "exact_retire": "the Cluster class's scale(n) picks which workers close (after the scheduler has retired "
    "the ones it would close, so their data moves)",
    "readoptable": NOT_READOPTABLE,
    "enforces_tls": "the server's TLS credentials are passed as security= when the class takes that argument; "
    "otherwise the class's own settings (its arguments, the Dask config) decide",
}

#: Why each class path asked about cannot be used here (None: it can), as the links' process answered: a class
#: imports or not for the life of a server.
_class_problems: dict[str, str | None] = {}
_topics = itertools.count(1)


def parse_class_path(value: Any, field_name: str) -> str:
    """``package.module.Class``, of a package installed in this server's Python.

    Nothing is imported here (the server never imports the class, nor distributed, for it): whether the class
    itself imports is asked of the links' process when the templates are listed (:meth:`ClusterClassBackend.probe`;
    a template whose class does not is unavailable, with the reason), and when a cluster is built.
    """
    if not isinstance(value, str) or not CLASS_PATH.fullmatch(value):
        raise InvalidRequest(f"must be a class path such as 'dask_jobqueue.SLURMCluster', not {value!r}", field_name)
    package = value.split(".", 1)[0]
    if importlib.util.find_spec(package) is None:  # a top-level name: found on the path, not imported
        raise InvalidRequest(f"{value!r}: the package {package!r} is not installed in this server's Python", field_name)
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


class _OwnProcess:
    """A :class:`HelperProcess` that is this process: the objects of a backend made without the server's helper."""

    def __init__(self) -> None:
        self._objects: dict[str, Any] = {}
        self._topics: dict[str, Any] = {}

    async def ask(self, message: dict[str, Any], timeout: float) -> Any:
        from clustermgr_lab.backends.cluster_class.objects import answer  # imports distributed

        return await answer(message, self._objects, self._news)

    def _news(self, message: dict[str, Any]) -> None:
        on_event = self._topics.get(message["to"])
        if on_event is not None:
            on_event(message["event"], message["args"])

    def subscribe(self, topic: str, on_event) -> None:
        self._topics[topic] = on_event

    def unsubscribe(self, topic: str) -> None:
        self._topics.pop(topic, None)


class ClusterClassBackend(Backend):
    """A cluster run by an object of any ``distributed`` Cluster class, scaled by count with ``scale(n)``.

    The requested workers are names the server gives (``default-1``...); the class names its workers
    itself, so each worker that connects is claimed by the oldest requested name not yet claimed
    (:meth:`claim_worker`). The object is built where the server's helper process holds it (:mod:`.objects`),
    and its scheduler must run in that process (it does for ``LocalCluster`` and every dask-jobqueue class):
    the handlers of :mod:`clustermgr_lab.preloads.scheduler` are added to it once the object is built.

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
    hosted_link_kind = "cluster-class"
    uses_launcher = False  # the Cluster object starts its scheduler and workers
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
        self._helper: HelperProcess = self.context.helper or _OwnProcess()
        self._topic = f"cluster-class/{self.cluster_id}/{next(_topics)}"
        self._held = False  # the helper holds (or builds) the object: from the build until it is closed or lost
        self._requested: list[str] = []  # the names the reconciler asked for, oldest first
        self._claimed: dict[str, str] = {}  # the class's worker name -> the requested name it fills
        #: The object's workers by the class's names, each with its batch job id or None, as it last told.
        self.object_workers: dict[str, str | None] = {}
        self._closed = False

    async def _ask(self, op: str, timeout: float, **fields: Any) -> Any:
        message = {"op": op, "topic": self._topic, "timeout": timeout, **fields}
        return await self._helper.ask(message, timeout + 5)

    def _news(self, event: str, args: list[Any]) -> None:
        if event == "workers":
            self.object_workers = dict(args[0])
            self._notify_change()  # the server stores the job ids (see process_records)
        elif event == "lost" and self._held:  # the helper exited, and the object with it: its jobs may run on
            self._held = False
            self.log.warning("cluster %s: the process that held its %s object exited", self.cluster_id, self.class_path)
            jobs = sorted({job for job in self.object_workers.values() if job})
            if jobs:
                asyncio.ensure_future(self._cancel_jobs(jobs))

    # -- the backend contract -----------------------------------------------------------------------

    @classmethod
    async def probe(
        cls, options: Mapping[str, Any], timeout: float, helper: HelperProcess | None = None
    ) -> TemplateProbe | None:
        """Whether the template's class imports (and is a class), asked of the helper once per class path.

        Until it has answered (it may be starting), or when it cannot, the template stays available: building a
        cluster says what is wrong.
        """
        path = options.get("class")
        if helper is None or not isinstance(path, str):
            return None
        if path not in _class_problems:
            try:
                _class_problems[path] = await helper.ask({"op": "class_check", "class": path}, timeout)
            except (OSError, asyncio.TimeoutError):
                return None
        problem = _class_problems[path]
        return TemplateProbe(problem) if problem else None

    def _arguments(self) -> dict[str, Any]:
        """The class, its arguments and the cluster's TLS files (passed as ``security=`` if the class takes it)."""
        tls = self.security.to_dict() if self.security is not None else None
        return {"class": self.class_path, "args": list(self.class_args), "kwargs": self.class_kwargs, "tls": tls}

    async def start_scheduler(self) -> SchedulerEndpoint:
        if self.class_path is None:
            raise BackendError("the template names no Cluster class (option 'class')")
        self._helper.subscribe(self._topic, self._news)
        self._held = True
        try:
            endpoint = await self._ask("class_build", self.start_timeout, **self._arguments())
        except asyncio.CancelledError:
            asyncio.ensure_future(self._close_object())
            raise
        except (OSError, asyncio.TimeoutError, RuntimeError, ValueError) as exc:  # closed there already
            self._held = False
            self._helper.unsubscribe(self._topic)
            raise BackendError(str(exc) or f"{self.class_path}(...) did not start") from None
        self.address = endpoint["address"]
        self._notify_change()
        return SchedulerEndpoint(endpoint["address"], endpoint["dashboard_address"], endpoint["scheduler_id"])

    async def _scale_object(self, retired: set[str]) -> None:
        await self._ask("class_scale", SCALE_TIMEOUT, n=len(self._requested), retired=sorted(retired))

    async def scale_up(self, group: WorkerGroup, names: list[str]) -> None:
        self._requested += names
        try:
            await self._scale_object(set())
        except Exception as exc:  # not started: they must not count as requested (see started())
            self._requested = [name for name in self._requested if name not in names]
            raise BackendError(f"{self.class_path}.scale() failed: {exc}") from None
        self._notify_change()

    async def scale_down(self, names: list[str]) -> None:
        dropped = set(names)
        self._requested = [name for name in self._requested if name not in dropped]
        retired = {theirs for theirs, ours in self._claimed.items() if ours in dropped}
        for theirs in retired:
            del self._claimed[theirs]
        await self._scale_object(retired)
        self._notify_change()

    async def _close_object(self) -> None:
        if not self._held:
            return
        try:
            await self._ask("class_close", self.close_timeout)
        except (OSError, asyncio.TimeoutError, RuntimeError, ValueError) as exc:
            self.log.error("cluster %s: %s did not close: %s", self.cluster_id, self.class_path, exc)
        finally:
            self._held = False
            self._helper.unsubscribe(self._topic)

    async def close(self) -> None:
        """Close the Cluster object (its workers, jobs and scheduler); once."""
        if self._closed:
            return
        self._closed = True
        await self._close_object()
        self._requested.clear()
        self._claimed.clear()
        self.object_workers = {}
        self.address = None
        self._notify_change()

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

    def process_records(self) -> dict[str, dict[str, Any]]:
        """The batch job of each of the class's workers that has one (dask-jobqueue's ``job_id``)."""
        if not self._held:
            return {}
        records: dict[str, dict[str, Any]] = {SCHEDULER_PROCESS: {"cluster_class": self.class_path}}
        for theirs, job_id in self.object_workers.items():
            if job_id:
                records[self._claimed.get(theirs, f"{self.class_path}:{theirs}")] = {"job_id": job_id}
        return records

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
        """Cancel leftover jobs with the class's own cancel command, where the class is imported; in words."""
        message = {"op": "class_cancel_jobs", "class": self.class_path or "", "jobs": jobs}
        try:
            done = await self._helper.ask(message, self.close_timeout)
        except (OSError, asyncio.TimeoutError, RuntimeError, ValueError) as exc:
            done = f"its jobs {', '.join(jobs)} could not be cancelled: {exc}"
        self.log.warning("cluster %s: %s", self.cluster_id, done)
        return done
