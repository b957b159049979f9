"""The push feed: ``clustermgr/api/stream``, a WebSocket that sends a snapshot of all clusters, then every change."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import web, websocket

from clustermgr_lab.web.base import JSONErrorMixin, ManagerMixin, ReadAccessMixin
from clustermgr_lab.web.send_budget import SendBudget

SLOW_SUBSCRIBER = 1013  # WebSocket close code "try again later"


class StreamHandler(
    JSONErrorMixin, ReadAccessMixin, ManagerMixin, WebSocketMixin, websocket.WebSocketHandler, JupyterHandler
):
    """Pushes a snapshot of all clusters, then one message per change, each with a ``seq``.

    Only same-origin connections (or origins allowed by ``ServerApp.allow_origin`` /
    ``allow_origin_pat``) are accepted, token or not. A request that cannot become a WebSocket is
    answered with a JSON error, like every other clustermgr route.
    """

    async def pre_get(self) -> None:
        await self.authorize_read(
            self.request.headers.get("Origin") or self.request.headers.get("Sec-Websocket-Origin")
        )
        # tornado answers these in plain text; refused here first, they are JSON errors
        if self.request.headers.get("Upgrade", "").lower() != "websocket":
            raise web.HTTPError(400, 'Can "Upgrade" only to "WebSocket".')
        connection = [part.strip().lower() for part in self.request.headers.get("Connection", "").split(",")]
        if "upgrade" not in connection:
            raise web.HTTPError(400, '"Connection" must be "Upgrade".')

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        result = super().get(*args, **kwargs)
        if result is not None:
            await result

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open(*args, **kwargs)
        self._budget = SendBudget(self.manager.stream_buffer_limit)
        self.manager.warm_up()  # the sidebar opens: a create is likely to follow
        self.manager.attention.noticed()
        self._send(self.manager.feed.subscribe(self._send))

    def _send(self, message: dict) -> None:
        try:
            if self._budget.send(self.write_message, json.dumps(message)):
                return
        except websocket.WebSocketClosedError:
            self.manager.feed.unsubscribe(self._send)
            return
        # It does not read: let it go rather than hold every change for it (it gets a snapshot when it reconnects).
        self.manager.feed.unsubscribe(self._send)
        self.log.warning("clustermgr stream: closing a subscriber that is %d bytes behind", self._budget.waiting)
        self.close(SLOW_SUBSCRIBER, "too slow to keep up; reconnect for a fresh snapshot")

    def on_message(self, message: str | bytes) -> None:
        """The stream is one-way; anything a client sends is ignored."""

    def on_close(self) -> None:
        self.manager.feed.unsubscribe(self._send)
