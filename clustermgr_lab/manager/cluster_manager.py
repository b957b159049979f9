"""The cluster manager: the registry of clusters this server owns, its configuration, and its commands.

Requests arrive here already decoded from JSON (and are parsed by :mod:`.commands`); everything
returned is JSON-ready. No tornado. What changed goes out through :class:`~.change_feed.ChangeFeed`;
what is kept goes to the store through :class:`~.store_writer.StoreWriter`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

from dask.system import CPU_COUNT

from clustermgr_lab.backends import (
    ALL_BACKENDS,
    BACKENDS,
    Backend,
    BackendContext,
    Capabilities,
    StandbySchedulers,
    WarmLauncher,
)
from clustermgr_lab.cluster import record_codec
from clustermgr_lab.cluster.hosted_link import LinkHost
from clustermgr_lab.cluster.managed import (
    ATTACHED,
    DISCOVERED,
    FAILED,
    PENDING,
    RUNNING,
    STOPPED,
    STOPPING,
    ManagedCluster,
)
from clustermgr_lab.cluster.workers_view import list_workers
from clustermgr_lab.common import metrics
from clustermgr_lab.common.security import (
    PLAIN_WARNING,
    ClusterCredentials,
    UnsafePath,
    private_folder,
    private_paths,
)
from clustermgr_lab.domain.errors import Conflict, NotFound
from clustermgr_lab.domain.limits import Limits
from clustermgr_lab.domain.naming import next_default_name, unique_name
from clustermgr_lab.domain.spec import WorkerSpec, parse_size
from clustermgr_lab.domain.usage import MAX_DAYS, daily_summary
from clustermgr_lab.manager import commands
from clustermgr_lab.manager.attention import Attention
from clustermgr_lab.manager.availability import SUBMIT_TIMEOUT
from clustermgr_lab.manager.change_feed import ChangeFeed
from clustermgr_lab.manager.dashboard_keys import DashboardKeys
from clustermgr_lab.manager.foreign_clusters import ForeignClusters
from clustermgr_lab.manager.machine import detect_gpus, total_memory
from clustermgr_lab.manager.restored_clusters import RestoredClusters
from clustermgr_lab.manager.settings import ClusterManagerSettings
from clustermgr_lab.manager.store import ClusterStore, StoreHealth
from clustermgr_lab.manager.store_writer import StoreWriter, kept_in_store
from clustermgr_lab.manager.stored_clusters import (
    stored_backend_options,
    stored_records,
)
from clustermgr_lab.manager.template_probes import TemplateProbes
from clustermgr_lab.manager.warm_processes import WarmProcesses

#: Seconds a deleted cluster's work folder waits for its start, still running, to return (it writes there till then).
START_SETTLE_TIMEOUT = 120.0


class ClusterManager(RestoredClusters, ForeignClusters, ClusterManagerSettings):
    """Creates, scales and stops the Dask clusters of this Jupyter server."""

    def __init__(self, base_url: str = "/", **kwargs):
        super().__init__(**kwargs)
        self.base_url = base_url
        self._clusters: dict[str, ManagedCluster] = {}
        self._list_text: tuple[list[str], str] = ([], '{"clusters": []}')  # (the clusters' texts, list_json of them)
        self._tasks: set[asyncio.Task] = set()
        self.feed = ChangeFeed(self._clusters, self.describe, self.status, lambda c: self.writer.save(c), self.log)
        self.attention = Attention(lambda: self.feed.subscriber_count)  # the web layer tells it of each use
        self._templates = self.load_templates()
        self.parse = commands.RequestParser(
            self._templates,
            self.default_template,
            template_options=lambda backend: BACKENDS[backend].template_options,
            capabilities=lambda backend: BACKENDS[backend].capabilities,
            limits_for=self.limits_for,
            max_workers=self.max_workers,
            max_groups=self.max_groups,
            user_options_option=lambda backend: BACKENDS[backend].user_options_option,
            worker_shape=lambda backend: BACKENDS[backend].worker_shape,
        )
        self._private([Path(self.workdir)], store_folder=Path(self.store_path).parent)
        # scheduler links and TLS credentials, out of this process; kept while a cluster may need it
        self.link_host = LinkHost(busy=self._any_live, parent=self, log=self.log)
        self.launcher = WarmLauncher(Path(self.workdir), parent=self, log=self.log)
        self.standby = StandbySchedulers(
            Path(self.workdir),
            self.launcher,
            make_credentials=self.link_host.make_credentials,
            parent=self,
            log=self.log,
        )
        self.warm = WarmProcesses(self.launcher, self.standby, self._any_live, self.log)
        self._gpus = self.gpus if self.gpus is not None else detect_gpus()
        self._max_memory = parse_size(self.max_memory, "ClusterManager.max_memory")
        self.store = ClusterStore(self.store_path, log=self.log)
        self._private(files=[Path(f"{self.store_path}{suffix}") for suffix in ("", "-wal", "-shm", ".lock")])
        self.writer = StoreWriter(self.store, self._clusters, self._store_health_changed, self.log)
        # next to the store: keys stay valid across restarts, so restored dashboard tabs keep working
        self.dashboard_keys = DashboardKeys(Path(self.store_path).parent / "dashboard-secret", log=self.log)
        self.probes = TemplateProbes(
            self._templates, self.log, submit_commands=self.link_host.submit_commands, helper=self.link_host
        )
        self._stored: list[tuple[ManagedCluster, dict]] = []
        self._unrestorable: list[dict] = []
        for record in stored_records(self.store, Path(self.workdir), self.log):
            try:
                self._stored.append((self._restore(record), record))
            except Exception:  # one record this server cannot take must not keep it from serving
                self.log.exception(
                    "cluster %s: cannot restore it from the store; what still runs of it is stopped", record.get("id")
                )
                self._unrestorable.append(record)
        metrics.watch(self)  # its state at the server's /metrics

    def _private(self, folders: list[Path] = (), files: list[Path] = (), store_folder: Path | None = None) -> None:
        """Make the folders (and files that exist) this user's alone (see :func:`private_paths`); log a refusal."""
        try:
            private_paths(folders, files, store_folder)
        except UnsafePath as exc:
            self.log.error("clustermgr_lab is not loaded: %s", exc)
            raise

    def warm_up(self, backend: str | None = None) -> None:
        """First use (a create of ``backend``, the sidebar's templates or stream): start the scheduler links' process,
        and the warm launcher and standby schedulers if that backend (the sidebar: any template's) forks from them."""
        names = [backend] if backend is not None else {t.backend for t in self._templates.values()}
        if any(ALL_BACKENDS[name].uses_launcher for name in names):
            self.warm.first_use()
        self.link_host.warm_up()

    def _any_live(self) -> bool:
        """True while a listed cluster is neither stopped nor failed (the warm launcher and links' process stay for it)."""
        return any(c.lifecycle not in (STOPPED, FAILED) for c in self._clusters.values())

    def _cluster_changed(self, cluster: ManagedCluster) -> None:
        self.feed.cluster_changed(cluster)
        if cluster.lifecycle in (STOPPED, FAILED):
            self.warm.release_when_unused()
            self.link_host.release_when_unused()

    def _context(
        self,
        cluster_id: str,
        workdir: Path,
        idle_timeout: float | None,
        security: ClusterCredentials | None = None,
        name: str | None = None,
    ) -> BackendContext:
        """What a new backend receives: its folder, its idle timeout, its TLS credentials, the warm launcher, a
        way to refuse a scheduler another listed cluster has, the cluster's name (for its process titles) and
        the scheduler links' process, for backend work that needs distributed (``BackendContext.helper``)."""
        return BackendContext(
            Path(workdir),
            launcher=self.launcher if self.launcher.enabled else None,
            idle_timeout=idle_timeout,
            security=security,
            listed_as=partial(self._listed_as, cluster_id),
            name=name,
            helper=self.link_host,
        )

    def _listed_as(self, cluster_id: str, scheduler_id: str) -> str | None:
        """The name of another live cluster listed with scheduler ``scheduler_id``, or None."""
        live = (c for c in self._clusters.values() if c.id != cluster_id and c.lifecycle not in (STOPPED, FAILED))
        return next((c.name for c in live if c.endpoint and c.endpoint.scheduler_id == scheduler_id), None)

    def _backend_factory(
        self, backend_class: type[Backend], cluster_id: str, **kwargs: Any
    ) -> Callable[[BackendContext], Backend]:
        """Makes a backend of ``backend_class`` for a cluster, configured by this server's config (``c.SSHBackend...``)."""
        return partial(backend_class, cluster_id, parent=self, **kwargs)

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
        return list(ALL_BACKENDS)

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
        return self.probes.list_templates()

    async def check_backends(self) -> None:
        """Check, in a thread, whether the templates' backends can work here (see :class:`~.availability.Availability`),
        and ask the resource each template names (e.g. its gateway) whether it answers and what users may set."""
        self.warm_up()  # the sidebar opens: a create is likely to follow
        await self.probes.check_backends()

    async def probe_templates(self) -> None:
        """Ask each template's resource, at most every ``AVAILABILITY_TTL`` s (:class:`~.template_probes.TemplateProbes`)."""
        await self.probes.probe_templates()

    def found_sources(self) -> list[tuple[str, type[Backend], dict[str, Any]]]:
        """``(template name, backend class, template options)`` of each template: where clusters may be found."""
        return self.probes.found_sources()

    def status(self) -> dict[str, Any]:
        """The health of what the manager depends on: whether its store can be written now."""
        return {"store": {"writable": self.store.health.writable, "error": self.store.health.error}}

    async def limits(self) -> dict[str, Any]:
        """What editors check a plan against: the per-cluster worker limit and this machine's size."""
        return {
            "max_workers": self.max_workers,
            "max_clusters": self.max_clusters,
            "machine": {"cores": CPU_COUNT, "memory": await self.link_host.memory_limit()},
        }

    def events(self, cluster_id: str) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.get(cluster_id).events]

    async def workers(self, cluster_id: str) -> list[dict[str, Any]]:
        """Each worker of a cluster: name, group, address, host, PID (local ones), memory, state (:mod:`.workers_view`)."""
        cluster = self.get(cluster_id)
        return await list_workers(cluster.reconciler, cluster.link, cluster.backend.capabilities.runs_processes_here)

    # -- changing --------------------------------------------------------------------------------

    def create(self, body: Any, submitted: str | None = None) -> ManagedCluster:
        """Validate, register and start a cluster in the background; returns it ``pending``.

        A body ``{"attach": "tcp://host:port"}`` attaches a cluster started elsewhere instead (:meth:`attach`).
        Refused with :class:`StoreUnavailable` while the store cannot be written (see :meth:`ensure_store_writable`).
        ``submitted``: the address of the cluster its resource already took (:meth:`Backend.create_ahead`).
        """
        request = self.parse.create(body)
        if isinstance(request, commands.AttachCluster):
            return self.attach(request.address, request.name, tls=request.tls)
        self.writer.require_writable("create a cluster")
        if request.name is not None:
            self._require_unique_name(request.name)
        # A stopping cluster still has its processes: it counts until they are gone.
        self._check_cluster_limit()

        template = request.template
        self.warm_up(template.backend)
        # A standby scheduler (TLS, 127.0.0.1) fits the local backend as shipped; it brings its id, folder and credentials.
        fits = BACKENDS[template.backend].takes_standby and template.tls and not request.backend_options
        standby = self.standby.take() if fits and self.standby.enabled else None
        if standby is not None:
            cluster_id, workdir, credentials = standby.cluster_id, standby.workdir, standby.credentials
        else:
            cluster_id = uuid.uuid4().hex[:8]
            workdir = private_folder(Path(self.workdir) / cluster_id)
            credentials = ClusterCredentials.in_folder(workdir) if template.tls else None  # made as the cluster starts
        name = request.name or next_default_name({c.name for c in self._clusters.values()})
        context = self._context(cluster_id, workdir, request.idle_timeout, credentials, name)
        kwargs = {"standby": standby} if standby is not None else {}
        if submitted is not None:
            kwargs["address"] = submitted
        try:
            cluster = self._new_cluster(
                cluster_id,
                name,
                template.name,
                self._backend_factory(
                    BACKENDS[template.backend], cluster_id, options=request.backend_options, **kwargs
                ),
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
        if kept_in_store(old):
            self.writer.require_writable(f"restart cluster {old.name!r}")
        self._check_cluster_limit()
        self.warm_up(old.backend.name)
        backend_class = ALL_BACKENDS[old.backend.name]
        if backend_class.attaches:
            factory = self._backend_factory(backend_class, old.id, address=old.backend.address)
        else:
            options = stored_backend_options(self._templates, record_codec.to_record(old))
            factory = self._backend_factory(backend_class, old.id, options=options)
        context = self._context(old.id, old.backend.workdir, old.idle_timeout, name=old.name)
        cluster = self._new_cluster(old.id, old.name, old.template, factory, old.spec, context)
        cluster.options = dict(old.options)
        cluster.events.restore(list(old.events))
        cluster.events.lifecycle("restarted: same name, Worker Spec and options")
        if old.adapt is not None:
            cluster.adapt_to(old.adapt)
        self._clusters[cluster.id] = cluster
        self.writer.restored(cluster, written=0)
        self.writer.save(cluster)
        self.feed.replaced(cluster)

        async def start_when_released() -> None:
            await old.released()
            if self._clusters.get(cluster.id) is cluster and cluster.lifecycle == PENDING:
                await cluster.start()

        self._spawn(start_when_released())
        self.log.info("cluster %s (%s) restarted", cluster.id, cluster.name)
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
        self.writer.save(cluster)
        self.feed.added(cluster)
        self._spawn(cluster.start())

    def unique_name(self, base: str) -> str:
        """``base``, or ``base (2)``, ``base (3)``... whichever no cluster has yet."""
        return unique_name(base, {c.name for c in self._clusters.values()})

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
        if kept_in_store(cluster):
            self.writer.require_writable(f"change cluster {cluster.name!r}")
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
                # Deleted while it starts: its start writes into the work folder (credentials, scheduler file,
                # logs) until it sees the deletion and tears down; removed before that, the folder came back.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(cluster.start_ended(), START_SETTLE_TIMEOUT)
            finally:
                await self._forget_and_remove(cluster)

        cluster.lifecycle = STOPPING
        self.writer.save(cluster)  # a server that dies now leaves it to the next one to finish stopping
        self._spawn(close_and_forget())
        return cluster

    def _forget(self, cluster_id: str) -> Future:
        """Take a cluster off the list; returns the store's queued deletion (done after every write queued before)."""
        cluster = self._clusters.pop(cluster_id, None)
        deleted = self.writer.delete(cluster_id, cluster.backend.workdir if cluster else None)
        self.feed.removed(cluster_id)
        self.warm.release_when_unused()
        self.link_host.release_when_unused()
        return deleted

    async def _forget_and_remove(self, cluster: ManagedCluster) -> None:
        """Forget a stopped cluster, then delete its work folder once the store's writes queued before are done
        (a manifest save still queued would otherwise write into the folder as it is removed, and keep it)."""
        deleted = self._forget(cluster.id)
        await asyncio.gather(asyncio.wrap_future(deleted), return_exceptions=True)
        await self._remove_workdir(cluster)

    async def close_all(self) -> None:
        """At a clean server stop: keep every cluster running for the next server (``on_shutdown = "keep"``)
        or stop them all (``"stop"``); then write the last changes and release the store."""
        clusters = list(self._clusters.values())
        if self.on_shutdown == "stop":
            await asyncio.gather(*(c.close() for c in clusters), return_exceptions=True)
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for cluster in clusters:
                await self._forget_and_remove(cluster)
        else:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            # What cannot outlive this server is stopped, with the reason; the rest is left to the next one.
            # An attached cluster is not ours to re-adopt or end: the next server attaches it again.
            ending = [
                c
                for c in clusters
                if kept_in_store(c) and not c.backend.capabilities.readoptable and c.template != ATTACHED
            ]
            await asyncio.gather(*(c.end_with_server() for c in ending), return_exceptions=True)
            await asyncio.gather(*(c.detach() for c in clusters if c not in ending), return_exceptions=True)
            for cluster in clusters:
                self.writer.save(cluster)
            self.log.info("clustermgr_lab: left %d cluster(s) running for the next server to re-adopt", len(clusters))
        self._clusters.clear()
        metrics.unwatch(self)
        await self.warm.close()  # the launcher keeps running what was kept, and exits once it has nothing
        await self.link_host.close()  # every link is closed by now
        await self.writer.close()  # after the queued writes

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the store -------------------------------------------------------------------------------

    async def ensure_store_writable(self) -> None:
        """Check with a real write that the store can be written now (:class:`StoreUnavailable` if not)."""
        await self.writer.ensure_writable()

    async def create_durably(self, body: Any) -> ManagedCluster:
        """:meth:`create`, once a write has shown that the store can record the new cluster."""
        await self.ensure_store_writable()
        request = self.parse.create(body)  # a 400 before the resource is asked
        if isinstance(request, commands.AttachCluster):
            return self.create(body)
        if request.name is not None:
            self._require_unique_name(request.name)
        self._check_cluster_limit()
        backend_class = BACKENDS[request.template.backend]
        submitted = await backend_class.create_ahead(request.backend_options, SUBMIT_TIMEOUT, helper=self.link_host)
        try:
            return self.create(body, submitted)
        except BaseException:
            if submitted is not None:  # taken by the resource, refused here (e.g. a name taken meanwhile)
                withdraw = backend_class.withdraw_ahead(
                    request.backend_options, submitted, SUBMIT_TIMEOUT, self.link_host
                )
                self._spawn(withdraw)
            raise

    async def update_durably(self, cluster_id: str, body: Any) -> dict[str, Any]:
        """:meth:`update`, once a write has shown that the store can record the change.

        A change the cluster refuses anyway (unknown, stopping, attached) is refused first, without waiting.
        """
        cluster = self.get(cluster_id)
        if kept_in_store(cluster) and cluster.lifecycle in (PENDING, RUNNING):
            await self.ensure_store_writable()
        return self.update(cluster_id, body)

    def _store_health_changed(self, health: StoreHealth) -> None:
        """In the event loop: subscribers learn whether the store can be written."""
        self.feed.status_changed()

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
