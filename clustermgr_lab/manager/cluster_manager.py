"""The cluster manager: the registry of clusters this server owns, its configuration, and change events.

Requests arrive here already decoded from JSON; everything returned is JSON-ready. No tornado.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from dask.system import CPU_COUNT
from distributed.system import MEMORY_LIMIT
from jupyter_core.paths import jupyter_data_dir, jupyter_runtime_dir
from traitlets import Bool, Dict, Enum, Float, Int, List, Type, Unicode, default
from traitlets.config import LoggingConfigurable

from clustermgr_lab.backends import (
    BACKENDS,
    Backend,
    BackendContext,
    Capabilities,
    ExternalBackend,
    LocalBackend,
    StandbySchedulers,
    WarmLauncher,
)
from clustermgr_lab.backends.base import SCHEDULER_PROCESS, SchedulerEndpoint
from clustermgr_lab.cluster.managed import FAILED, PENDING, RUNNING, STOPPED, STOPPING, ManagedCluster
from clustermgr_lab.common import metrics
from clustermgr_lab.common.security import PLAIN_WARNING, ClusterCredentials, UnsafePath, private_file, private_folder
from clustermgr_lab.domain.adaptive import AdaptivePolicy
from clustermgr_lab.domain.errors import Conflict, InvalidRequest, NotFound, StoreUnavailable
from clustermgr_lab.domain.limits import Limits
from clustermgr_lab.domain.options import parse_backend_options
from clustermgr_lab.domain.record import read_manifests
from clustermgr_lab.domain.spec import WorkerSpec, parse_size, parse_spec
from clustermgr_lab.domain.templates import Template, builtin_templates, labextension_template, parse_template
from clustermgr_lab.domain.usage import MAX_DAYS, daily_summary
from clustermgr_lab.manager import commands
from clustermgr_lab.manager.availability import submit_command, unavailable_reason
from clustermgr_lab.manager.dashboard_keys import DashboardKeys
from clustermgr_lab.manager.machine import detect_gpus, total_memory
from clustermgr_lab.manager.store import ClusterStore, StoreHealth

Listener = Callable[[dict], None]
ATTACHED = "attached"  # the template of clusters attached by their scheduler's address
DISCOVERED = "discovered"  # the template of clusters found in a kernel of this server
STORE_RETRY_SECONDS = 2.0
AVAILABILITY_TTL = 10.0  # seconds a check of the backends' commands and controllers is reused


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
    labextension_factory = Bool(
        True,
        config=True,
        help="Offer dask-labextension's Cluster factory (labextension.factory in the Dask config, with "
        "labextension.default's workers and adapt) as the template 'labextension' (backend cluster-class), "
        "when the Dask config has one. One that cannot be used is left out, with a warning.",
    )
    workdir = Unicode(
        config=True, help="Folder for scheduler files and process logs of the clusters (one folder each)."
    )
    store_path = Unicode(
        config=True,
        help="The SQLite file where clusters are kept, so that a restarted server re-adopts them. "
        "One server uses a store at a time. Default: clustermgr/clusters.sqlite3 in Jupyter's data dir.",
    )
    adaptive_policy = Type(
        AdaptivePolicy,
        klass=AdaptivePolicy,
        config=True,
        help="The policy adaptive mode follows: a class made from a cluster's adaptive settings, whose "
        "propose(spec, load, members) returns new group counts. clustermgr_lab.domain.adaptive.AdaptivePolicy grows at "
        "once and shrinks after wait_count quiet intervals; clustermgr_lab.domain.adaptive.GradualPolicy grows by one "
        "worker per interval.",
    )
    freeze_startup_objects = Bool(
        True,
        config=True,
        help="Once the server has started, leave the objects alive then (modules, classes, the server's state) out "
        "of the garbage collector's full collections (gc.freeze). Such a collection holds the event loop: 166 ms "
        "with 100 clusters on a 2-core machine, 16 ms after this. False: the collector as Python has it.",
    )
    on_shutdown = Enum(
        ["keep", "stop"],
        default_value="keep",
        config=True,
        help="What a clean server stop (e.g. SIGTERM, Ctrl-C) does to the clusters: 'keep' leaves them "
        "running for the next server on the same store to re-adopt; 'stop' stops them all.",
    )

    timeline_interval = Float(
        5.0,
        config=True,
        help="Seconds between two samples of a running cluster's workers, memory and CPU in use (one call to "
        "its scheduler), for the chart of GET clustermgr/api/clusters/{id}/timeline. The timeline covers "
        "the cluster's whole life in at most 240 points, coarser as it grows.",
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
        self._list_text: tuple[list[str], str] = ([], '{"clusters": []}')  # (the clusters' texts, list_json of them)
        self._tasks: set[asyncio.Task] = set()
        self._listeners: set[Listener] = set()
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self.seq = 0
        self._templates = self._load_templates()
        self.parse = commands.RequestParser(
            self._templates,
            self.default_template,
            template_options=lambda backend: BACKENDS[backend].template_options,
            capabilities=lambda backend: BACKENDS[backend].capabilities,
            limits_for=self.limits_for,
            max_workers=self.max_workers,
            max_groups=self.max_groups,
        )
        self._private([Path(self.workdir)], store_folder=Path(self.store_path).parent)
        self.launcher = WarmLauncher(Path(self.workdir), parent=self, log=self.log)
        self.standby = StandbySchedulers(Path(self.workdir), self.launcher, parent=self, log=self.log)
        self._gpus = self.gpus if self.gpus is not None else detect_gpus()
        self._max_memory = parse_size(self.max_memory, "ClusterManager.max_memory")
        self.store = ClusterStore(self.store_path, log=self.log)
        self._private(files=[Path(f"{self.store_path}{suffix}") for suffix in ("", "-wal", "-shm", ".lock")])
        self.store.on_health = self._store_health_changed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._store_watch: asyncio.TimerHandle | None = None
        # next to the store: keys stay valid across restarts, so restored dashboard tabs keep working
        self.dashboard_keys = DashboardKeys(Path(self.store_path).parent / "dashboard-secret", log=self.log)
        self._events_written: dict[str, int] = {}
        self._unavailable: dict[str, str | None] = {}  # backend -> why it cannot work here (None: it can)
        self._availability_checked = 0.0
        self._events_pushed: dict[str, int] = {}  # per cluster: events appended when its last message went out
        self._stored: list[tuple[ManagedCluster, dict]] = []
        self._unrestorable: list[dict] = []
        self._unforgotten: dict[str, Path | None] = {}  # deleted clusters the store could not forget yet
        for record in self._stored_records():
            try:
                self._stored.append((self._restore(record), record))
            except Exception:  # one record this server cannot take must not keep it from serving
                self.log.exception(
                    "cluster %s: cannot restore it from the store; what still runs of it is stopped", record.get("id")
                )
                self._unrestorable.append(record)
        metrics.watch(self)  # its state at the server's /metrics

    def _private(self, folders: list[Path] = (), files: list[Path] = (), store_folder: Path | None = None) -> None:
        """Make the folders (and files that exist) this user's alone; refuse, with a log line, any others own or write.

        The store's folder may be one the site chose: left as it is when no one else can write there.
        """
        try:
            for folder in folders:
                private_folder(folder)
            if store_folder is not None:
                private_folder(store_folder, narrow=False)
            for path in files:
                if path.exists():
                    private_file(path)
        except UnsafePath as exc:
            self.log.error("clustermgr_lab is not loaded: %s", exc)
            raise

    def _stored_records(self) -> list[dict]:
        """The records of the store; of a damaged store, what could be read; and the clusters only their manifests know."""
        records = {r["id"]: r for r in self.store.salvaged}
        for record in self.store.salvaged:
            self.log.warning("cluster %s (%s): recovered from the unreadable store", record["id"], record["name"])
        records.update({r["id"]: r for r in self.store.load()})
        for record in read_manifests(Path(self.workdir), self.store.path):
            if record["id"] not in records:
                self.log.warning(
                    "cluster %s (%s): not in the store %s; recovered from its manifest in %s",
                    record["id"], record["name"], self.store.path, record["workdir"],
                )  # fmt: skip
                records[record["id"]] = record
        return sorted(records.values(), key=lambda r: r["created"])

    def warm_up(self) -> None:
        """Start (or connect to) the warm launcher in the background, so the first cluster starts fast."""
        if self.launcher.enabled:
            self._spawn(self._warm_up())

    async def _warm_up(self) -> None:
        await self.launcher.warm_up()
        self.standby.fill()

    def _context(
        self, workdir: Path, idle_timeout: float | None, security: ClusterCredentials | None = None
    ) -> BackendContext:
        """What a new backend receives: its folder, its idle timeout, its TLS credentials, and the warm launcher."""
        return BackendContext(
            Path(workdir),
            launcher=self.launcher if self.launcher.enabled else None,
            idle_timeout=idle_timeout,
            security=security,
        )

    def _backend_factory(
        self, backend_class: type[Backend], cluster_id: str, **kwargs: Any
    ) -> Callable[[BackendContext], Backend]:
        """Makes a backend of ``backend_class`` for a cluster, configured by this server's config (``c.SSHBackend...``)."""

        def make(context: BackendContext) -> Backend:
            return backend_class(cluster_id, context, parent=self, **kwargs)

        return make

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

    def _stored_credentials(self, record: dict) -> ClusterCredentials | None:
        """The TLS files a stored cluster uses (None: it has none); a cluster of ours has them in its work folder."""
        paths = (record.get("backend_state") or {}).get("tls")
        if record["backend"] == ExternalBackend.name:  # an attached tls:// scheduler: the files it was attached with
            return ClusterCredentials.from_paths(paths) if paths else None
        if str(record.get("scheduler_address") or "").startswith("tcp://"):
            return None
        return ClusterCredentials.find(Path(record["workdir"]))

    def _restore(self, record: dict) -> ManagedCluster:
        """A stored cluster, registered as it was stored; :meth:`readopt_all` then re-adopts it."""
        backend_class = {**BACKENDS, ExternalBackend.name: ExternalBackend}.get(record["backend"])
        if backend_class is None:  # a backend this server no longer has: listed as failed
            record = {**record, "status": FAILED, "error": f"unknown backend {record['backend']!r}"}
            backend_class = BACKENDS["local"]
        # An attached cluster's backend is its scheduler's address; it is re-attached if that scheduler (same id) answers.
        external = issubclass(backend_class, ExternalBackend)
        extra = {"address": record["scheduler_address"]} if external else {}
        cluster = self._new_cluster(
            record["id"],
            record["name"],
            record["template"],
            self._backend_factory(backend_class, record["id"], options=self._stored_backend_options(record), **extra),
            WorkerSpec(()) if external else parse_spec(record["spec"]),  # an external one's workers are not ours
            self._context(Path(record["workdir"]), record.get("idle_timeout"), self._stored_credentials(record)),
        )
        cluster.restore(record)
        if isinstance(cluster.backend, ExternalBackend):
            self._watch_duplicates(cluster)
        self._events_written[cluster.id] = cluster.events.appended
        self._clusters[cluster.id] = cluster
        return cluster

    async def readopt_all(self) -> None:
        """Re-adopt every stored cluster (at start-up, once the event loop runs); concurrently."""
        stored, self._stored = self._stored, []
        unrestorable, self._unrestorable = self._unrestorable, []

        async def readopt(cluster: ManagedCluster, record: dict) -> None:
            try:
                if isinstance(cluster.backend, ExternalBackend):
                    await cluster.reattach()
                else:
                    await cluster.readopt(record)
            except Exception:
                self.log.exception("cluster %s: re-adoption failed", cluster.id)
                return
            if record["status"] == STOPPING:  # was being deleted when the last server stopped
                self._forget(cluster.id)
                await self._remove_workdir(cluster)
            else:
                self.log.info("cluster %s (%s): %s", cluster.id, cluster.name, cluster.status)

        await asyncio.gather(*(readopt(c, r) for c, r in stored), *(self._stop_leftovers(r) for r in unrestorable))

    async def _stop_leftovers(self, record: dict) -> None:
        """Stop the recorded processes or jobs of a cluster that cannot be restored (never leave them running unseen)."""
        processes = {w["name"]: w["process"] for w in record.get("workers") or [] if w.get("process")}
        scheduler = (record.get("backend_state") or {}).get(SCHEDULER_PROCESS)
        if scheduler:
            processes[SCHEDULER_PROCESS] = scheduler
        try:
            make = self._backend_factory(BACKENDS[record["backend"]], record["id"])
            backend = make(self._context(Path(record["workdir"]), None, self._stored_credentials(record)))
            await backend.adopt(SchedulerEndpoint(record.get("scheduler_address") or "", None), processes)
            running = sorted(backend.started() | set(backend.pids()))
            await backend.close()
        except Exception as exc:
            self.log.error(
                "cluster %s: could not stop what may still run of it (%s): %s", record.get("id"), exc, processes
            )
            return
        self.log.warning(
            "cluster %s: not restored; stopped what still ran of it: %s", record["id"], running or "nothing"
        )

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
        for data in labextension_template(self.max_workers) if self.labextension_factory else []:
            if data["name"] in templates:
                self.log.info("labextension.factory: a configured template is called %r already", data["name"])
                continue
            try:
                templates[data["name"]] = parse_template(data, BACKENDS, "labextension.factory")
            except InvalidRequest as exc:  # someone else's config: not a reason to refuse to start
                self.log.warning("labextension.factory is not offered as a template: %s: %s", exc.field, exc.message)
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
        """The cluster as the API shows it (shared with the next caller until it changes: do not modify)."""
        return self._description(cluster)[0]

    def list(self) -> list[dict[str, Any]]:
        return [self.describe(c) for c in self._clusters.values()]

    def list_json(self) -> str:
        """``{"clusters": list()}`` as JSON, from each cluster's kept text (the GET that is asked for most).

        While no cluster changed, the same ``str`` object is returned again: the web layer keeps what it
        derives from it (the ETag) by its identity.
        """
        texts = [self._description(c)[1] for c in self._clusters.values()]
        kept_texts, kept = self._list_text
        if len(texts) != len(kept_texts) or any(a is not b for a, b in zip(texts, kept_texts)):
            kept = '{"clusters": [' + ", ".join(texts) + "]}"
            self._list_text = (texts, kept)
        return kept

    def _description(self, cluster: ManagedCluster) -> tuple[dict[str, Any], str]:
        return cluster.describe(self.base_url, self.dashboard_keys.segment(cluster.id))

    def clusters(self) -> list[ManagedCluster]:
        """The clusters this server lists (what :meth:`list` describes)."""
        return list(self._clusters.values())

    def backend_names(self) -> list[str]:
        return [*BACKENDS, ExternalBackend.name]

    @property
    def subscriber_count(self) -> int:
        """How many listeners (WebSocket subscribers of the stream) are registered."""
        return len(self._listeners)

    def usage_summary(self, days: Any = 7) -> dict[str, Any]:
        """Core-, GPU- and memory-seconds per UTC day over all clusters listed, the last ``days`` days (newest first)."""
        days = commands.parse_days(days, MAX_DAYS)
        clusters = [(c.id, c.name, c.usage) for c in self._clusters.values()]
        return {"days": daily_summary(clusters, days)}

    def timeline(self, cluster_id: str) -> dict[str, Any]:
        """A cluster's workers, memory and CPU in use over its life (see :class:`~.timeline.Timeline`)."""
        return self.get(cluster_id).timeline.to_dict()

    def list_templates(self) -> list[dict[str, Any]]:
        """The templates, each with its backend's capabilities and whether it can work here (as last checked)."""
        return [
            {
                **t.to_dict(),
                "capabilities": BACKENDS[t.backend].capabilities.to_dict(),
                "available": self._unavailable.get(t.backend) is None,
                "unavailable_reason": self._unavailable.get(t.backend),
            }
            for t in self._templates.values()
        ]

    async def check_backends(self) -> None:
        """Check, in a thread, whether the templates' backends can work here; at most every ``AVAILABILITY_TTL`` s."""
        loop = asyncio.get_running_loop()
        if self._availability_checked and loop.time() - self._availability_checked < AVAILABILITY_TTL:
            return
        submits = {t.backend: submit_command(BACKENDS[t.backend]) for t in self._templates.values()}

        def check() -> dict[str, str | None]:
            return {name: unavailable_reason(name, submit) for name, submit in submits.items()}

        self._unavailable = await loop.run_in_executor(None, check)
        self._availability_checked = loop.time()

    def status(self) -> dict[str, Any]:
        """The health of what the manager depends on: whether its store can be written now."""
        return {"store": {"writable": self.store.health.writable, "error": self.store.health.error}}

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
        Refused with :class:`StoreUnavailable` while the store cannot be written (see :meth:`ensure_store_writable`).
        """
        request = self.parse.create(body)
        if isinstance(request, commands.AttachCluster):
            return self.attach(request.address, request.name, tls=request.tls)
        self._require_writable_store("create a cluster")
        if request.name is not None:
            self._require_unique_name(request.name)
        # A stopping cluster still has its processes: it counts until they are gone.
        self._check_cluster_limit()

        template = request.template
        # A standby scheduler (TLS, 127.0.0.1) fits the local backend as shipped; it brings its id, folder and credentials.
        fits = BACKENDS[template.backend] is LocalBackend and template.tls and not request.backend_options
        standby = self.standby.take() if fits and self.standby.enabled else None
        if standby is not None:
            cluster_id, workdir, credentials = standby.cluster_id, standby.workdir, standby.credentials
        else:
            cluster_id = uuid.uuid4().hex[:8]
            workdir = private_folder(Path(self.workdir) / cluster_id)
            credentials = ClusterCredentials.in_folder(workdir) if template.tls else None  # made as the cluster starts
        context = replace(self._context(workdir, request.idle_timeout, credentials), standby=standby)
        try:
            cluster = self._new_cluster(
                cluster_id,
                request.name or self._next_name(),
                template.name,
                self._backend_factory(BACKENDS[template.backend], cluster_id, options=request.backend_options),
                request.spec,
                context,
            )
        except BaseException:
            if standby is not None:
                self.standby.discard(standby)
            raise
        if credentials is None:
            self.log.warning("cluster %s (template %s): %s", cluster_id, template.name, PLAIN_WARNING)
            cluster.events.lifecycle(PLAIN_WARNING)
        cluster.options = request.user_options
        if request.adapt is not None:
            cluster.adapt_to(request.adapt)
        self._register(cluster)
        self.log.info("cluster %s (%s) created from template %s", cluster_id, cluster.name, template.name)
        return cluster

    def _new_cluster(
        self, cluster_id: str, name: str, template: str, backend, spec: WorkerSpec, context: BackendContext
    ) -> ManagedCluster:
        return ManagedCluster(
            cluster_id,
            name,
            template,
            backend,
            spec,
            on_change=self._cluster_changed,
            max_workers=self.max_workers,
            context=context,
            policy_class=self.adaptive_policy,
            config_parent=self,
            sample_interval=self.timeline_interval,
        )

    def attach(
        self, address: str, name: str | None = None, origin: str = ATTACHED, tls: ClusterCredentials | None = None
    ) -> ManagedCluster:
        """List a cluster started elsewhere (backend ``external``); returns it ``pending`` while its scheduler is reached.

        Its workers are observed, never started or stopped; deleting it detaches.
        ``origin`` (``"attached"`` or ``"discovered"``) becomes its ``template``; ``tls``: the certificate
        files that reach a ``tls://`` scheduler.
        """
        for other in self._clusters.values():
            if other.template == DISCOVERED and other.lifecycle in (STOPPED, FAILED):
                continue  # a notebook's cluster that ended: its scheduler is gone, its port may be another's now
            if address in (getattr(other.backend, "address", None), other.endpoint and other.endpoint.address):
                raise Conflict(f"the scheduler at {address} is listed already, as {other.name!r}", "attach")
        if name is not None:
            self._require_unique_name(name)
        else:
            name = self.unique_name(f"{origin.capitalize()} {address.split('://', 1)[-1]}")
        self._check_cluster_limit()
        cluster_id = uuid.uuid4().hex[:8]
        cluster = self._new_cluster(
            cluster_id,
            name,
            origin,
            self._backend_factory(ExternalBackend, cluster_id, address=address),
            WorkerSpec(()),
            BackendContext(Path(self.workdir) / cluster_id, security=tls),
        )
        self._watch_duplicates(cluster)
        self._register(cluster)
        self.log.info("cluster %s (%s) %s: scheduler %s", cluster_id, name, origin, address)
        return cluster

    def restart(self, cluster_id: str) -> ManagedCluster:
        """Start a failed or stopped cluster again: same id, name, template, Worker Spec, options and adaptive
        settings, its history kept. An attached cluster is attached again at the same address.

        Returns the new cluster, ``pending``; it starts in the background once what was left of the old one is stopped.
        """
        old = self.get(cluster_id)
        if old.lifecycle not in (FAILED, STOPPED):
            raise Conflict(f"cannot restart cluster {old.name!r}: it is {old.status}, not failed or stopped", "status")
        if old.template == DISCOVERED:
            raise Conflict(
                f"cannot restart cluster {old.name!r}: it was started in a notebook; it is listed again when that "
                "notebook starts it",
                "status",
            )
        if self._kept_in_store(old):
            self._require_writable_store(f"restart cluster {old.name!r}")
        self._check_cluster_limit()
        if isinstance(old.backend, ExternalBackend):
            factory = self._backend_factory(ExternalBackend, old.id, address=old.backend.address)
        else:
            record = old.to_record()
            factory = self._backend_factory(
                BACKENDS[old.backend.name], old.id, options=self._stored_backend_options(record)
            )
        cluster = self._new_cluster(
            old.id, old.name, old.template, factory, old.spec, self._context(old.backend.workdir, old.idle_timeout)
        )
        if isinstance(old.backend, ExternalBackend):
            self._watch_duplicates(cluster)
        cluster.options = dict(old.options)
        cluster.events.restore(list(old.events))
        cluster.events.lifecycle("restarted: same name, Worker Spec and options")
        if old.adapt is not None:
            cluster.adapt_to(old.adapt)
        self._clusters[cluster.id] = cluster
        self._events_written[cluster.id] = 0
        self._events_pushed[cluster.id] = 0
        self._persist(cluster)
        self._emit(self._cluster_message("changed", cluster))

        async def start_when_released() -> None:
            await old.released()
            if self._clusters.get(cluster.id) is cluster and cluster.lifecycle == PENDING:
                await cluster.start()

        self._spawn(start_when_released())
        self.log.info("cluster %s (%s) restarted", cluster.id, cluster.name)
        return cluster

    def _watch_duplicates(self, cluster: ManagedCluster) -> None:
        """Let an external cluster's backend refuse a scheduler that another listed cluster already has."""
        cluster.backend.listed_as = lambda scheduler_id: next(
            (
                c.name
                for c in self._clusters.values()
                if c.id != cluster.id
                and c.endpoint
                and c.endpoint.scheduler_id == scheduler_id
                and c.lifecycle not in (STOPPED, FAILED)
            ),
            None,
        )

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
        self._emit(self._cluster_message("added", cluster))
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
        change = self.parse.change(
            body,
            name=cluster.name,
            spec=cluster.spec,
            adapt=cluster.adapt,
            backend=cluster.backend.name,
            capabilities=cluster.backend.capabilities,
        )
        if self._kept_in_store(cluster):
            self._require_writable_store(f"change cluster {cluster.name!r}")
        if isinstance(change, commands.Scale):
            return {"resolved": cluster.scale(change.resolution).to_dict()}
        if isinstance(change, commands.ReplaceSpec):
            cluster.set_spec(change.spec)
        elif isinstance(change, commands.ChangeAdapt):
            cluster.adapt_to(change.change)
        elif isinstance(change, commands.SetIdleTimeout):
            cluster.set_idle_timeout(change.seconds)
        else:
            if change.name != cluster.name:
                self._require_unique_name(change.name)
            cluster.rename(change.name)
        return {}

    def limits_for(self, capabilities: Capabilities) -> Limits:
        """The caps a cluster is checked against: this server's, and the machine's when its processes run here."""
        local = capabilities.runs_processes_here
        return Limits(
            max_cores=self.max_cores,
            max_memory=self._max_memory,
            gpus_per_worker=self._gpus,
            max_gpus=self._gpus if local else None,  # local workers share this machine's GPUs
            memory_per_worker=total_memory() if local else None,
            where="this machine" if local else "a compute node",
        )

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
                await self._remove_workdir(cluster)

        cluster.lifecycle = STOPPING
        self._persist(cluster)  # a server that dies now leaves it to the next one to finish stopping
        self._spawn(close_and_forget())
        return cluster

    def _forget(self, cluster_id: str) -> None:
        cluster = self._clusters.pop(cluster_id, None)
        self._dirty.discard(cluster_id)
        self._events_written.pop(cluster_id, None)
        self._events_pushed.pop(cluster_id, None)
        self._write_delete(cluster_id, cluster.backend.workdir if cluster else None)
        self._emit({"type": "removed", "id": cluster_id})

    def _write_delete(self, cluster_id: str, workdir: Path | None) -> None:
        """Have the store forget a cluster; if it cannot now, it does once it can be written again."""
        self._unforgotten.pop(cluster_id, None)
        self._write(
            self.store.delete_later(cluster_id, workdir), lambda: self._unforgotten.setdefault(cluster_id, workdir)
        )

    async def close_all(self) -> None:
        """At a clean server stop: keep every cluster running for the next server (``on_shutdown = "keep"``)
        or stop them all (``"stop"``); then write the last changes and release the store."""
        clusters = list(self._clusters.values())
        if self.on_shutdown == "stop":
            await asyncio.gather(*(c.close() for c in clusters), return_exceptions=True)
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for cluster in clusters:
                self._forget(cluster.id)
                await self._remove_workdir(cluster)
        else:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            # What cannot outlive this server is stopped, with the reason; the rest is left to the next one.
            # An attached cluster is not ours to re-adopt or end: the next server attaches it again.
            ending = [
                c
                for c in clusters
                if self._kept_in_store(c) and not c.backend.capabilities.readoptable and c.template != ATTACHED
            ]
            await asyncio.gather(*(c.end_with_server() for c in ending), return_exceptions=True)
            await asyncio.gather(*(c.detach() for c in clusters if c not in ending), return_exceptions=True)
            for cluster in clusters:
                self._persist(cluster)
            self.log.info("clustermgr_lab: left %d cluster(s) running for the next server to re-adopt", len(clusters))
        self._clusters.clear()
        metrics.unwatch(self)
        await self.standby.close()
        await self.launcher.close()  # it keeps running what was kept, and exits once it has nothing
        if self._store_watch is not None:
            self._store_watch.cancel()
        await asyncio.get_running_loop().run_in_executor(None, self.store.close)  # after the queued writes

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- push ------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> dict:
        """Register a listener and return the snapshot it starts from."""
        self._flush()
        self._listeners.add(listener)
        return {"type": "snapshot", "seq": self.seq, "clusters": self.list(), "status": self.status()}

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
                self._emit(self._cluster_message("changed", self._clusters[cluster_id]), flush=False)

    def _cluster_message(self, kind: str, cluster: ManagedCluster) -> dict[str, Any]:
        """An ``added`` or ``changed`` stream message: the cluster, and its events since its previous message."""
        message: dict[str, Any] = {"type": kind, "cluster": self.describe(cluster)}
        events = cluster.events.since(self._events_pushed.get(cluster.id, 0))
        self._events_pushed[cluster.id] = cluster.events.appended
        if events:
            message["events"] = [e.to_dict() for e in events]
        return message

    # -- the store -------------------------------------------------------------------------------

    def _persist(self, cluster: ManagedCluster) -> None:
        """Hand a snapshot of the cluster (and its new events) to the store's writer thread.

        Clusters discovered in a kernel are not stored (they leave with their kernel); attached ones are,
        so that a restarted server attaches them again.
        """
        if not self._kept_in_store(cluster):
            return
        written = self._events_written.get(cluster.id, 0)
        events = [e.to_dict() for e in cluster.events.since(written)]
        self._events_written[cluster.id] = cluster.events.appended
        future = self.store.save_later(cluster.to_record(), events)
        self._write(future, lambda: self._events_unwritten(cluster.id, written))

    @staticmethod
    def _kept_in_store(cluster: ManagedCluster) -> bool:
        """Whether the store keeps the cluster: every cluster whose processes are ours to stop, and those attached.

        Those a restarted server cannot re-adopt are kept too, so that it says why they ended and
        stops what is left of them; clusters attached by address are attached again.
        """
        return cluster.backend.capabilities.can_stop or cluster.template == ATTACHED

    def _events_unwritten(self, cluster_id: str, written: int) -> None:
        """A save failed: its events go with the next save (e.g. once the store can be written again)."""
        if cluster_id in self._events_written:
            self._events_written[cluster_id] = min(self._events_written[cluster_id], written)

    def _write(self, future: Future, on_failure: Callable[[], None] | None = None) -> None:
        """Follow a queued store write; a failure is logged by the store and shown by :meth:`status`."""
        self._loop = self._loop or asyncio.get_event_loop()

        def written(future: Future) -> None:
            if future.exception() is not None and on_failure is not None:
                self._call_in_loop(on_failure)

        future.add_done_callback(written)

    def _call_in_loop(self, callback: Callable[[], None]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(callback)

    def _require_writable_store(self, action: str) -> None:
        health = self.store.health
        if not health.writable:
            raise StoreUnavailable(f"cannot {action} now: {health.error}; try again once it can be written")

    async def ensure_store_writable(self) -> None:
        """Check with a real write (on the store's writer thread) that the store can be written now.

        Called before anything whose record must be durable (creating a cluster, changing it).

        Raises
        ------
        StoreUnavailable
            When it cannot: the request fails before anything is started.
        """
        self._loop = self._loop or asyncio.get_running_loop()
        await asyncio.wrap_future(self.store.check_later())

    async def create_durably(self, body: Any) -> ManagedCluster:
        """:meth:`create`, once a write has shown that the store can record the new cluster."""
        await self.ensure_store_writable()
        return self.create(body)

    async def update_durably(self, cluster_id: str, body: Any) -> dict[str, Any]:
        """:meth:`update`, once a write has shown that the store can record the change.

        A change the cluster refuses anyway (unknown, stopping, attached) is refused first, without waiting.
        """
        cluster = self.get(cluster_id)
        if self._kept_in_store(cluster) and cluster.lifecycle in (PENDING, RUNNING):
            await self.ensure_store_writable()
        return self.update(cluster_id, body)

    def _store_health_changed(self, health: StoreHealth) -> None:
        """On the writer thread: hand the change to the event loop."""
        self._call_in_loop(lambda: self._on_store_health(health))

    def _on_store_health(self, health: StoreHealth) -> None:
        self._emit({"type": "status", "status": self.status()})
        if health.writable:
            for cluster in list(self._clusters.values()):  # what could not be written meanwhile
                self._persist(cluster)
            for cluster_id, workdir in list(self._unforgotten.items()):
                if cluster_id not in self._clusters:
                    self._write_delete(cluster_id, workdir)
        elif self._store_watch is None:
            self._watch_store()

    def _watch_store(self) -> None:
        """While the store cannot be written, try a write every few seconds, so that recovery shows by itself."""
        self._store_watch = None
        if self.store.health.writable:
            return
        self._write(self.store.check_later())
        self._store_watch = self._loop.call_later(STORE_RETRY_SECONDS, self._watch_store)

    async def _remove_workdir(self, cluster: ManagedCluster) -> None:
        """Delete a cluster's work folder: only ever one inside the configured work folder."""
        root = Path(self.workdir).resolve()
        target = Path(cluster.backend.workdir).resolve()
        if root not in target.parents:
            self.log.error(
                "cluster %s: its recorded work folder %s is not inside the work folder %s: not deleted",
                cluster.id, target, root,
            )  # fmt: skip
            return
        await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, target, True)

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
