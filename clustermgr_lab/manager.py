"""The cluster manager: the registry of clusters this server owns, its configuration, and change events.

Requests arrive here already decoded from JSON; everything returned is JSON-ready. No tornado.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping

from dask.system import CPU_COUNT
from distributed.system import MEMORY_LIMIT
from jupyter_core.paths import jupyter_data_dir, jupyter_runtime_dir
from traitlets import Bool, Dict, Enum, Int, List, Unicode, default
from traitlets.config import LoggingConfigurable

from .adaptive import AdaptSettings, parse_adapt
from .backends import BACKENDS, LocalBackend
from .backends.external import ExternalBackend, parse_scheduler_address
from .backends.launcher import WarmLauncher
from .cluster import FAILED, STOPPED, STOPPING, ManagedCluster
from .errors import Conflict, InvalidRequest, NotFound
from .idle import parse_idle_timeout
from .limits import Limits
from .machine import detect_gpus, total_memory
from .options import parse_backend_options, resolve_user_options
from .spec import WorkerSpec, parse_size, parse_spec, parse_target, resolve_target
from .dashboard_keys import DashboardKeys
from .store import ClusterStore
from .templates import Template, builtin_templates, parse_template

Listener = Callable[[dict], None]


def _only_fields(body: Any, allowed: set[str], what: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise InvalidRequest(f"the request body must be a JSON object, not {type(body).__name__}", None)
    for key in body:
        if key not in allowed:
            raise InvalidRequest(f"unknown field {key!r} in {what}; expected: {', '.join(sorted(allowed))}", key)
    return body


def _parse_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 80:
        shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else f"{len(value)} characters"
        raise InvalidRequest(f"must be a non-empty string of at most 80 characters, not {shown}", "name")
    # str.isprintable refuses control and format characters (bidi overrides), line breaks and lone surrogates.
    unprintable = next((c for c in value if not c.isprintable()), None)
    if unprintable is not None:
        raise InvalidRequest(
            "must be printable: no control characters, line breaks, lone surrogates or other unprintable "
            f"characters (found U+{ord(unprintable):04X})",
            "name",
        )
    return value.strip()


class ClusterManager(LoggingConfigurable):
    """Creates, scales and stops the Dask clusters of this Jupyter server."""

    max_workers = Int(
        32,
        config=True,
        help="Most workers one cluster may have, in all its groups together. Larger plans, "
        "scale targets and adaptive maxima are refused with a 400.",
    )
    max_clusters = Int(
        8,
        config=True,
        help="Most clusters this server lists at once: those it runs (still stopping included) and those "
        "attached or discovered in notebooks.",
    )
    stream_buffer_limit = Int(
        4 * 2**20,
        config=True,
        help="Most bytes of stream messages the server holds for one WebSocket subscriber that does not read "
        "them fast enough; past it the subscriber is disconnected (close code 1013) and gets a fresh snapshot "
        "when it reconnects.",
    )
    max_groups = Int(16, config=True, help="Most worker groups one Worker Spec may have.")
    max_cores = Int(
        1024,
        config=True,
        help="Most cores (threads of all planned workers, all groups together) one cluster may have. "
        "Larger plans, scale targets and adaptive maxima are refused with a 400.",
    )
    max_memory = Unicode(
        "16 TiB",
        config=True,
        help="Most memory (memory limits of all planned workers together) one cluster may have, as a "
        "size dask.utils.parse_bytes reads. Larger plans, scale targets and adaptive maxima are refused with a 400.",
    )
    gpus = Int(
        None,
        allow_none=True,
        config=True,
        help="GPUs one worker can have: those of this machine for the local backend, of a compute node for "
        "batch backends. None (default): the NVIDIA GPUs detected on this machine at start (pynvml, "
        "nvidia-smi or /proc/driver/nvidia). Groups asking a worker for more are refused with a 400.",
    )
    templates = List(
        Dict(),
        config=True,
        help="Extra cluster templates: dicts with name, description, backend and spec "
        "(and optionally adapt, the backend's options, and user_options a user may set in "
        "New Cluster), offered next to the built-in ones. Checked at start; see docs/hpc.md.",
    )
    include_builtin_templates = Bool(True, config=True, help="Offer the built-in 'local' templates.")
    default_template = Unicode("local", config=True, help="Template used when a request names none.")
    workdir = Unicode(config=True, help="Folder for scheduler files and process logs of the clusters (one folder each).")
    store_path = Unicode(
        config=True,
        help="The SQLite file where clusters are kept, so that a restarted server re-adopts them. "
        "One server uses a store at a time. Default: clustermgr/clusters.sqlite3 in Jupyter's data dir.",
    )
    on_shutdown = Enum(
        ["keep", "stop"],
        default_value="keep",
        config=True,
        help="What a clean server stop (e.g. SIGTERM, Ctrl-C) does to the clusters: 'keep' leaves them "
        "running for the next server on the same store to re-adopt; 'stop' stops them all.",
    )

    @default("workdir")
    def _default_workdir(self) -> str:
        return str(Path(jupyter_runtime_dir()) / "clustermgr")

    @default("store_path")
    def _default_store_path(self) -> str:
        return str(Path(jupyter_data_dir()) / "clustermgr" / "clusters.sqlite3")

    def __init__(self, base_url: str = "/", **kwargs):
        super().__init__(**kwargs)
        self.base_url = base_url
        self._clusters: dict[str, ManagedCluster] = {}
        self._tasks: set[asyncio.Task] = set()
        self._listeners: set[Listener] = set()
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self.seq = 0
        self._templates = self._load_templates()
        self.launcher = WarmLauncher(Path(self.workdir), parent=self, log=self.log)
        self._gpus = self.gpus if self.gpus is not None else detect_gpus()
        self._max_memory = parse_size(self.max_memory, "ClusterManager.max_memory")
        self.store = ClusterStore(self.store_path, log=self.log)
        # next to the store: keys stay valid across restarts, so restored dashboard tabs keep working
        self.dashboard_keys = DashboardKeys(Path(self.store_path).parent / "dashboard-secret", log=self.log)
        # One thread writes the store, in order; the event loop only hands it snapshots.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clustermgr-store")
        self._events_written: dict[str, int] = {}
        self._stored: list[tuple[ManagedCluster, dict]] = []
        for record in self.store.load():
            try:
                self._stored.append((self._restore(record), record))
            except Exception:  # one record this server cannot take must not keep it from serving
                self.log.exception("cluster %s: cannot restore it from the store; left out", record.get("id"))

    def warm_up(self) -> None:
        """Start (or connect to) the warm launcher in the background, so the first cluster starts fast."""
        if self.launcher.enabled:
            self._spawn(self.launcher.warm_up())

    def _with_launcher(self, backend):
        """A local backend forks its processes from the warm launcher (unless that is turned off)."""
        if isinstance(backend, LocalBackend) and self.launcher.enabled:
            backend.launcher = self.launcher
        return backend

    def _stored_backend_options(self, record: dict) -> dict[str, Any]:
        """The backend options of a stored cluster: its template's as configured now, with its user options."""
        template = self._templates.get(record["template"])
        if template is None or template.backend != record["backend"]:
            return {}
        declared = BACKENDS[template.backend].template_options
        try:
            return {**template.options, **parse_backend_options(record.get("options") or {}, declared, "options")}
        except InvalidRequest:  # the site has changed that option since: the template's own value
            return dict(template.options)

    def _restore(self, record: dict) -> ManagedCluster:
        """A stored cluster, registered as it was stored; :meth:`readopt_all` then re-adopts it."""
        backend_class = {**BACKENDS, ExternalBackend.name: ExternalBackend}.get(record["backend"])
        if backend_class is None:  # a backend this server no longer has: listed as failed
            record = {**record, "status": FAILED, "error": f"unknown backend {record['backend']!r}"}
            backend_class = BACKENDS["local"]
        # An attached cluster's backend is its scheduler's address; it is re-attached if that scheduler (same id) answers.
        extra = {"address": record["scheduler_address"]} if issubclass(backend_class, ExternalBackend) else {}
        cluster = ManagedCluster(
            record["id"],
            record["name"],
            record["template"],
            self._with_launcher(
                backend_class(record["id"], Path(record["workdir"]), options=self._stored_backend_options(record), **extra)
            ),
            parse_spec(record["spec"]),
            on_change=self._cluster_changed,
            max_workers=self.max_workers,
            idle_timeout=record.get("idle_timeout"),
        )
        cluster.restore(record)
        self._events_written[cluster.id] = cluster.events.appended
        self._clusters[cluster.id] = cluster
        return cluster

    async def readopt_all(self) -> None:
        """Re-adopt every stored cluster (at start-up, once the event loop runs); concurrently."""
        stored, self._stored = self._stored, []

        async def readopt(cluster: ManagedCluster, record: dict) -> None:
            try:
                await cluster.readopt(record)
            except Exception:
                self.log.exception("cluster %s: re-adoption failed", cluster.id)
                return
            if record["status"] == STOPPING:  # was being deleted when the last server stopped
                self._forget(cluster.id)
                await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, cluster.backend.workdir, True)
            else:
                self.log.info("cluster %s (%s): %s", cluster.id, cluster.name, cluster.status)

        await asyncio.gather(*(readopt(c, r) for c, r in stored))

    def _load_templates(self) -> dict[str, Template]:
        builtin = builtin_templates() if self.include_builtin_templates else []
        configured = [(f"builtin_templates[{i}]", t) for i, t in enumerate(builtin)]
        configured += [(f"templates[{i}]", t) for i, t in enumerate(self.templates)]
        templates = {}
        for where, data in configured:
            try:
                template = parse_template(data, BACKENDS, where)
            except InvalidRequest as exc:  # refuse to start, naming the template and the option
                name = data.get("name") if isinstance(data, Mapping) else None
                raise ValueError(f"ClusterManager.templates: template {name!r}: {exc.field}: {exc.message}") from None
            templates[template.name] = template
        if self.default_template not in templates:
            raise ValueError(f"ClusterManager.default_template {self.default_template!r} is not a template")
        return templates

    # -- reading -------------------------------------------------------------------------------

    def get(self, cluster_id: str) -> ManagedCluster:
        try:
            return self._clusters[cluster_id]
        except KeyError:
            raise NotFound(f"no cluster with id {cluster_id!r}") from None

    def describe(self, cluster: ManagedCluster) -> dict[str, Any]:
        return cluster.to_dict(self.base_url, dashboard_key=self.dashboard_keys.segment(cluster.id))

    def list(self) -> list[dict[str, Any]]:
        return [self.describe(c) for c in self._clusters.values()]

    def list_templates(self) -> list[dict[str, Any]]:
        return [t.to_dict() for t in self._templates.values()]

    def limits(self) -> dict[str, Any]:
        """What editors check a plan against: the per-cluster worker limit and this machine's size."""
        return {
            "max_workers": self.max_workers,
            "max_clusters": self.max_clusters,
            "machine": {"cores": CPU_COUNT, "memory": MEMORY_LIMIT},
        }

    def events(self, cluster_id: str) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.get(cluster_id).events]

    # -- changing --------------------------------------------------------------------------------

    def create(self, body: Any) -> ManagedCluster:
        """Validate, register and start a cluster in the background; returns it ``pending``.

        A body ``{"attach": "tcp://host:port"}`` attaches a cluster started elsewhere instead (:meth:`attach`).
        """
        if isinstance(body, Mapping) and "attach" in body:
            body = _only_fields(body, {"attach", "name"}, "an attached cluster")
            name = _parse_name(body["name"]) if body.get("name") is not None else None
            return self.attach(parse_scheduler_address(body["attach"]), name)
        body = _only_fields(body, {"template", "name", "spec", "adapt", "idle_timeout", "options"}, "a new cluster")
        template_name = body.get("template", self.default_template)
        if template_name is None:
            template_name = self.default_template
        if not isinstance(template_name, str) or template_name not in self._templates:
            raise InvalidRequest(
                f"unknown template {template_name!r}; templates are: {', '.join(self._templates)}", "template"
            )
        template = self._templates[template_name]
        spec = template.spec
        limits = self.limits_for(template.backend)
        if body.get("spec") is not None:
            spec = parse_spec(body["spec"], max_workers=self.max_workers, max_groups=self.max_groups)
            limits.check(spec, "spec.groups", groups_field="spec.groups")
        elif spec.total_workers > self.max_workers:
            raise InvalidRequest(f"template asks for more than {self.max_workers} workers", "template")
        else:
            limits.check(spec, "template")
        adapt_data = body["adapt"] if "adapt" in body else template.adapt
        adapt = parse_adapt(adapt_data, spec, max_workers=self.max_workers) if adapt_data is not None else None
        if adapt is not None:
            self._check_adapt(spec, adapt, limits)
        idle_timeout = (
            parse_idle_timeout(body["idle_timeout"]) if "idle_timeout" in body else template.idle_timeout
        )
        declared = BACKENDS[template.backend].template_options
        user_values = resolve_user_options(body.get("options"), template.user_options, declared)
        backend_options = {**template.options, **parse_backend_options(user_values, declared, "options")}
        name = _parse_name(body["name"]) if body.get("name") is not None else None
        if name is not None:
            self._require_unique_name(name)
        # A stopping cluster still has its processes: it counts until they are gone.
        self._check_cluster_limit()

        cluster_id = uuid.uuid4().hex[:8]
        workdir = Path(self.workdir) / cluster_id
        workdir.mkdir(parents=True, exist_ok=True)
        backend = self._with_launcher(BACKENDS[template.backend](cluster_id, workdir, options=backend_options))
        cluster = ManagedCluster(
            cluster_id,
            name or self._next_name(),
            template.name,
            backend,
            spec,
            on_change=self._cluster_changed,
            max_workers=self.max_workers,
            idle_timeout=idle_timeout,
        )
        cluster.options = user_values
        if adapt is not None:
            cluster.adapt_to(adapt_data)
        self._register(cluster)
        self.log.info("cluster %s (%s) created from template %s", cluster_id, cluster.name, template.name)
        return cluster

    def attach(self, address: str, name: str | None = None, origin: str = "attached") -> ManagedCluster:
        """List a cluster started elsewhere (backend ``external``); returns it ``pending`` while its scheduler is reached.

        Its workers are observed, never started or stopped; deleting it detaches.
        ``origin`` (``"attached"`` or ``"discovered"``) becomes its ``template``.
        """
        for other in self._clusters.values():
            if address in (getattr(other.backend, "address", None), other.endpoint and other.endpoint.address):
                raise Conflict(f"the scheduler at {address} is listed already, as {other.name!r}", "attach")
        if name is not None:
            self._require_unique_name(name)
        else:
            name = self.unique_name(f"{origin.capitalize()} {address.removeprefix('tcp://')}")
        self._check_cluster_limit()
        cluster_id = uuid.uuid4().hex[:8]
        backend = ExternalBackend(cluster_id, Path(self.workdir) / cluster_id, address=address)
        backend.listed_as = lambda scheduler_id: next(
            (
                c.name
                for c in self._clusters.values()
                if c.id != cluster_id and c.endpoint and c.endpoint.scheduler_id == scheduler_id
                and c.lifecycle not in (STOPPED, FAILED)
            ),
            None,
        )
        cluster = ManagedCluster(
            cluster_id, name, origin, backend, WorkerSpec(()), on_change=self._cluster_changed, max_workers=self.max_workers
        )
        self._register(cluster)
        self.log.info("cluster %s (%s) %s: scheduler %s", cluster_id, name, origin, address)
        return cluster

    def _check_cluster_limit(self) -> None:
        """Refuse a new cluster past ``max_clusters``: attached and discovered ones count too, stopping ones until gone."""
        live = [c for c in self._clusters.values() if c.lifecycle not in (STOPPED, FAILED)]
        if len(live) >= self.max_clusters:
            stopping = sum(1 for c in live if c.lifecycle == STOPPING)
            still = f" ({stopping} of them still stopping)" if stopping else ""
            raise Conflict(f"this server already lists {len(live)} clusters{still}, the most it allows")

    def _register(self, cluster: ManagedCluster) -> None:
        self._clusters[cluster.id] = cluster
        self._persist(cluster)
        self._emit({"type": "added", "cluster": self.describe(cluster)})
        self._spawn(cluster.start())

    def unique_name(self, base: str) -> str:
        """``base``, or ``base (2)``, ``base (3)``... whichever no cluster has yet."""
        taken = {c.name for c in self._clusters.values()}
        n = 2
        name = base
        while name in taken:
            name = f"{base} ({n})"
            n += 1
        return name[:80]

    def _next_name(self) -> str:
        taken = {c.name for c in self._clusters.values()}
        n = 1
        while f"Cluster {n}" in taken:
            n += 1
        return f"Cluster {n}"

    def update(self, cluster_id: str, body: Any) -> dict[str, Any]:
        """Apply one change: ``scale``, ``spec``, ``adapt``, ``idle_timeout`` or ``name``. Returns extra details."""
        cluster = self.get(cluster_id)
        body = _only_fields(body, {"scale", "spec", "adapt", "idle_timeout", "name"}, "a cluster change")
        if len(body) != 1:
            raise InvalidRequest("give exactly one of 'scale', 'spec', 'adapt', 'idle_timeout' or 'name'", None)
        (key, value), = body.items()
        if key != "name" and not cluster.backend.can_scale:
            raise Conflict(
                f"cannot change the {key} of cluster {cluster.name!r}: it was started elsewhere and is only "
                f"attached here ({cluster.backend.name} backend); its workers are started and stopped where it was started",
                key,
            )
        limits = self.limits_for(cluster.backend.name)
        if key == "scale":
            target = parse_target(value)
            planned = resolve_target(cluster.spec, target, max_workers=self.max_workers)
            limits.check(cluster.spec.with_count(planned.group, planned.workers), f"scale.{target.unit}")
            resolution = cluster.scale(target)
            return {"resolved": resolution.to_dict()}
        if key == "spec":
            spec = parse_spec(value, max_workers=self.max_workers, max_groups=self.max_groups)
            limits.check(spec, "spec.groups", groups_field="spec.groups")
            cluster.set_spec(spec)
        elif key == "adapt":
            if isinstance(value, Mapping) and value.get("enabled", True) is True:
                settings = parse_adapt(value, cluster.spec, cluster.adapt, max_workers=self.max_workers)
                self._check_adapt(cluster.spec, settings, limits)
            cluster.adapt_to(value)
        elif key == "idle_timeout":
            cluster.set_idle_timeout(parse_idle_timeout(value))
        else:
            name = _parse_name(value)
            if name != cluster.name:
                self._require_unique_name(name)
            cluster.rename(name)
        return {}

    def limits_for(self, backend: str) -> Limits:
        """The caps a cluster of ``backend`` is checked against: this server's, and the machine's for local workers."""
        local = backend == "local"
        return Limits(
            max_cores=self.max_cores,
            max_memory=self._max_memory,
            gpus_per_worker=self._gpus,
            max_gpus=self._gpus if local else None,  # local workers share this machine's GPUs
            memory_per_worker=total_memory() if local else None,
            where="this machine" if local else "a compute node",
        )

    @staticmethod
    def _check_adapt(spec: WorkerSpec, settings: AdaptSettings, limits: Limits) -> None:
        """Adaptive mode may grow every adaptive group to its maximum: that plan must be within the caps too."""
        largest = spec
        for adapt_range in settings.ranges:
            largest = largest.with_count(adapt_range.group, adapt_range.worker_bounds(spec.group(adapt_range.group))[1])
        limits.check(largest, "adapt.maximum")

    def _require_unique_name(self, name: str) -> None:
        if any(c.name == name for c in self._clusters.values()):
            raise Conflict(f"a cluster called {name!r} exists already", "name")

    def delete(self, cluster_id: str) -> ManagedCluster:
        """Start stopping a cluster; it leaves the list once its processes are gone."""
        cluster = self.get(cluster_id)
        if cluster.lifecycle == STOPPING:
            return cluster

        async def close_and_forget():
            try:
                await cluster.close()
            finally:
                self._forget(cluster_id)
                await asyncio.get_running_loop().run_in_executor(
                    None, shutil.rmtree, cluster.backend.workdir, True
                )

        cluster.lifecycle = STOPPING
        self._persist(cluster)  # a server that dies now leaves it to the next one to finish stopping
        self._spawn(close_and_forget())
        return cluster

    def _forget(self, cluster_id: str) -> None:
        self._clusters.pop(cluster_id, None)
        self._dirty.discard(cluster_id)
        self._events_written.pop(cluster_id, None)
        self._write(self.store.delete, cluster_id)
        self._emit({"type": "removed", "id": cluster_id})

    async def close_all(self) -> None:
        """At a clean server stop: keep every cluster running for the next server (``on_shutdown = "keep"``)
        or stop them all (``"stop"``); then write the last changes and release the store."""
        clusters = list(self._clusters.values())
        if self.on_shutdown == "stop":
            await asyncio.gather(*(c.close() for c in clusters), return_exceptions=True)
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for cluster in clusters:
                self._forget(cluster.id)
                shutil.rmtree(cluster.backend.workdir, ignore_errors=True)
        else:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await asyncio.gather(*(c.detach() for c in clusters), return_exceptions=True)
            for cluster in clusters:
                self._persist(cluster)
            self.log.info("clustermgr_lab: left %d cluster(s) running for the next server to re-adopt", len(clusters))
        self._clusters.clear()
        await self.launcher.close()  # it keeps running what was kept, and exits once it has nothing
        await asyncio.get_running_loop().run_in_executor(None, self._writer.shutdown)
        self.store.close()

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- push ------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> dict:
        """Register a listener and return the snapshot it starts from."""
        self._flush()
        self._listeners.add(listener)
        return {"type": "snapshot", "seq": self.seq, "clusters": self.list()}

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def _cluster_changed(self, cluster: ManagedCluster) -> None:
        # Changes that happen in one turn of the event loop go out as one message per cluster.
        self._dirty.add(cluster.id)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_event_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        for cluster_id in dirty:
            if cluster_id in self._clusters:
                self._persist(self._clusters[cluster_id])
                self._emit({"type": "changed", "cluster": self.describe(self._clusters[cluster_id])}, flush=False)

    # -- the store -------------------------------------------------------------------------------

    def _persist(self, cluster: ManagedCluster) -> None:
        """Hand a snapshot of the cluster (and its new events) to the store's writer thread.

        Clusters only attached here (started elsewhere) are not stored: they are not ours to re-adopt.
        """
        if not cluster.backend.can_scale:
            return
        written = self._events_written.get(cluster.id, 0)
        events = [e.to_dict() for e in cluster.events.since(written)]
        self._events_written[cluster.id] = cluster.events.appended
        self._write(self.store.save, cluster.to_record(), events)

    def _write(self, operation: Callable, *args: Any) -> None:
        future = self._writer.submit(operation, *args)
        future.add_done_callback(self._written)

    def _written(self, future: Future) -> None:
        if future.exception() is not None:
            self.log.error("could not write the cluster store %s: %s", self.store.path, future.exception())

    def _emit(self, message: dict, flush: bool = True) -> None:
        if flush:
            self._flush()
        self.seq += 1
        message = {**message, "seq": self.seq}
        for listener in list(self._listeners):
            try:
                listener(message)
            except Exception:
                self.log.exception("stream listener failed")
