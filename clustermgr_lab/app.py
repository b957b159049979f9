"""The Jupyter server extension: owns the ClusterManager for the server's lifetime."""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp

from .handlers import route_table
from .manager import ClusterManager


class ClusterManagerApp(ExtensionApp):
    """Registers the API routes and stops every cluster when the server stops."""

    name = "clustermgr_lab"
    load_other_extensions = True
    classes = [ClusterManager]

    manager: ClusterManager | None = None

    def initialize_settings(self) -> None:
        try:
            self.manager = ClusterManager(parent=self.serverapp, base_url=self.serverapp.base_url, log=self.log)
        except ValueError as exc:  # a misconfigured template: say which, and do not load the extension
            self.log.error("clustermgr_lab is not loaded: %s", exc)
            raise
        self.settings["clustermgr_manager"] = self.manager

    def initialize_handlers(self) -> None:
        self.handlers.extend(route_table())

    async def stop_extension(self) -> None:
        if self.manager is None:  # it never started (its configuration was refused)
            return
        self.log.info("clustermgr_lab: stopping all clusters")
        await self.manager.close_all()
