"""The Jupyter server extension: owns the ClusterManager for the server's lifetime."""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp

from .backends.launcher import WarmLauncher
from .handlers import route_table
from .manager import ClusterManager


class ClusterManagerApp(ExtensionApp):
    """Registers the API routes and stops every cluster when the server stops."""

    name = "clustermgr_lab"
    load_other_extensions = True
    classes = [ClusterManager, WarmLauncher]

    def initialize_settings(self) -> None:
        self.manager = ClusterManager(parent=self.serverapp, base_url=self.serverapp.base_url, log=self.log)
        self.settings["clustermgr_manager"] = self.manager

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        self.manager.warm_up()

    def initialize_handlers(self) -> None:
        self.handlers.extend(route_table())

    async def stop_extension(self) -> None:
        self.log.info("clustermgr_lab: stopping all clusters")
        await self.manager.close_all()
