"""The Jupyter server extension: owns the ClusterManager for the server's lifetime."""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp

from .discovery import ClusterDiscovery
from .handlers import route_table
from .manager import ClusterManager


class ClusterManagerApp(ExtensionApp):
    """Registers the API routes and stops every cluster when the server stops."""

    name = "clustermgr_lab"
    load_other_extensions = True
    classes = [ClusterManager, ClusterDiscovery]

    def initialize_settings(self) -> None:
        self.manager = ClusterManager(parent=self.serverapp, base_url=self.serverapp.base_url, log=self.log)
        self.settings["clustermgr_manager"] = self.manager
        self.discovery = ClusterDiscovery(self.manager, parent=self.serverapp, log=self.log)
        self.serverapp.io_loop.add_callback(self.discovery.start)

    def initialize_handlers(self) -> None:
        self.handlers.extend(route_table())

    async def stop_extension(self) -> None:
        self.log.info("clustermgr_lab: stopping all clusters")
        await self.discovery.stop()
        await self.manager.close_all()
