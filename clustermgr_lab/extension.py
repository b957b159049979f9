"""The Jupyter server extension: owns the ClusterManager for the server's lifetime."""

from __future__ import annotations

import asyncio

from jupyter_server.extension.application import ExtensionApp

from clustermgr_lab.backends.local.launcher import WarmLauncher
from clustermgr_lab.foreign.discovery import ClusterDiscovery
from clustermgr_lab.foreign.found import FoundClusters
from clustermgr_lab.manager.cluster_manager import ClusterManager
from clustermgr_lab.manager.gc_pauses import freeze_startup_objects
from clustermgr_lab.manager.initial_clusters import start_initial_clusters
from clustermgr_lab.web.generic_proxy import confine_generic_routes
from clustermgr_lab.web.kernel_dashboard_link import KernelDashboardLink
from clustermgr_lab.web.kernel_environment import KernelEnvironment
from clustermgr_lab.web.routes import route_table


class ClusterManagerApp(ExtensionApp):
    """Registers the API routes, re-adopts stored clusters at start, and keeps (or stops) them at a clean stop."""

    name = "clustermgr_lab"
    load_other_extensions = True
    classes = [ClusterManager, ClusterDiscovery, FoundClusters, KernelDashboardLink, WarmLauncher]
    _frozen = False  # the objects alive at start-up were left out of full collections

    def initialize_settings(self) -> None:
        try:
            self.manager = ClusterManager(parent=self.serverapp, base_url=self.serverapp.base_url, log=self.log)
        except ValueError as exc:  # a misconfigured template: say which, and do not load the extension
            self.log.error("clustermgr_lab is not loaded: %s", exc)
            raise
        self.settings["clustermgr_manager"] = self.manager
        # The event loop's first callback: re-adoption's process is spawned before any other start-up work.
        self.serverapp.io_loop.add_callback(self._at_first_turn)
        self.discovery = ClusterDiscovery(self.manager, parent=self.serverapp, log=self.log)
        self.serverapp.io_loop.add_callback(self.discovery.start)
        self.found = FoundClusters(self.manager, parent=self.serverapp, log=self.log)
        self.serverapp.io_loop.add_callback(self.found.start)
        self.kernel_dashboard_link = KernelDashboardLink(
            base_url=self.serverapp.base_url, parent=self.serverapp, log=self.log
        )
        # Only the kernels this server starts get their variables; the server's own environment is left alone.
        self.kernel_environment = KernelEnvironment(self.serverapp.kernel_manager)
        self.kernel_environment.add(self.discovery.kernel_variables)
        self.kernel_environment.add(self.kernel_dashboard_link.kernel_variables)
        self.kernel_environment.start()
        # At the event loop's first turn, before any request: every extension has added its routes by then.
        self.serverapp.io_loop.add_callback(self._confine_generic_proxy)

    async def _at_first_turn(self) -> None:
        """Spawn the scheduler links' process when stored clusters wait for re-adoption (its import of distributed
        then overlaps the rest of the start-up); with none, the garbage collector's start-up pass at once."""
        if not await self.manager.start_links_for_readoption():
            self._freeze_startup_objects()

    def _freeze_startup_objects(self) -> None:
        """:func:`freeze_startup_objects` (0.1-0.2 s holding the event loop) once, unless turned off; every extension
        has loaded by then."""
        if self.manager.freeze_startup_objects and not self._frozen:
            self._frozen = True
            freeze_startup_objects(self.log)

    def _confine_generic_proxy(self) -> None:
        """jupyter-server-proxy's generic ``/proxy/`` routes (when it is on) refuse this server's clusters."""
        if confine_generic_routes(self.serverapp.web_app, self.manager.clusters):
            self.log.info("clustermgr: jupyter-server-proxy's generic /proxy/ routes refuse this server's clusters")

    def initialize_handlers(self) -> None:
        self.handlers.extend(route_table())

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        if hasattr(self, "manager"):  # else it did not load (e.g. its store is locked by another server)
            self._readopt = asyncio.ensure_future(self._readopt_then_start_initial())

    async def _readopt_then_start_initial(self) -> None:
        """Re-adopt the stored clusters, then start dask-labextension's ``labextension.initial`` ones not listed."""
        await self.manager.readopt_all()
        self._freeze_startup_objects()  # after the re-adoption: neither it nor the API's first answers wait for it
        if self.manager.start_labextension_initial:
            await start_initial_clusters(self.manager, self.log)

    async def stop_extension(self) -> None:
        manager = getattr(self, "manager", None)
        if manager is None:  # never started (e.g. its store was locked by another server)
            return
        self.log.info("clustermgr_lab: %s the clusters", "keeping" if manager.on_shutdown == "keep" else "stopping")
        await self.discovery.stop()
        await self.found.stop()
        self.kernel_environment.stop()
        await manager.close_all()
