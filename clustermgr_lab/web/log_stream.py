"""Follow mode of a log: ``clusters/{id}/logs/{name}/follow``, a WebSocket that sends the tail, then what is appended."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from tornado import websocket

from clustermgr_lab.cluster.logs import MAX_BYTES, log_file, parse_tail, read_from, tail
from clustermgr_lab.domain.errors import ClusterManagerError
from clustermgr_lab.web.send_budget import SendBudget
from clustermgr_lab.web.stream import StreamHandler

#: Seconds between two looks at a followed log's size.
FOLLOW_INTERVAL = 0.5


class LogFollowHandler(StreamHandler):
    """Sends ``{"type": "tail", ...}`` (the last ``?tail=N`` lines), then ``{"type": "append", ...}`` as the file grows.

    Authenticated, authorized and origin-checked exactly like the push feed (it is one). Each message has
    the text, ``start`` and ``offset`` (byte range in the file) and ``size``. A file that shrinks (rotated)
    is read again from its start; ``{"type": "gone"}`` and a normal close follow the cluster's removal.
    The file is looked at every 0.5 s (a ``stat`` in an executor), and one message carries at most 4 MiB.

    A follower that does not read is sent nothing more while a message still waits for its socket
    (its :class:`~clustermgr_lab.web.send_budget.SendBudget`, ``ClusterManager.stream_buffer_limit``
    bytes, also caps one message): the file is read on from the same offset once it has caught up, so
    the server holds at most one message per follower however fast the log grows, and nothing is lost.
    """

    def open(self, cluster_id: str, name: str) -> None:  # type: ignore[override]
        self._budget = SendBudget(self.manager.stream_buffer_limit)
        self._follower = asyncio.ensure_future(
            self._follow(cluster_id, name, self.get_query_argument("tail", None, strip=False))
        )

    async def _follow(self, cluster_id: str, name: str, lines: str | None) -> None:
        loop = asyncio.get_running_loop()
        try:
            cluster = self.manager.get(cluster_id)
            files = await loop.run_in_executor(None, cluster.backend.log_files)
            path = log_file(files, name, cluster_id)
            chunk = await loop.run_in_executor(None, tail, path, parse_tail(lines))
        except (ClusterManagerError, OSError) as exc:
            error = (
                exc.to_dict() if isinstance(exc, ClusterManagerError) else {"code": "not_found", "message": str(exc)}
            )
            self._write({"type": "error", **error})
            self.close(1000, error["message"][:120])
            return
        self._write({"type": "tail", **chunk.to_dict()})
        offset = chunk.end
        while self.ws_connection is not None:
            await asyncio.sleep(FOLLOW_INTERVAL)
            try:
                self.manager.get(cluster_id)
                if self._budget.waiting:  # it has not read the last message yet: read nothing more for it
                    continue
                chunk = await loop.run_in_executor(None, read_from, path, offset, self._piece())
            except (ClusterManagerError, OSError):
                self._write({"type": "gone"})
                self.close(1000, "the cluster or its log is gone")
                return
            if chunk.end != offset or chunk.start != offset:
                self._write({"type": "append", **chunk.to_dict()})
                offset = chunk.end

    def _piece(self) -> int:
        """The most bytes of the file one message may carry: 4 MiB, or the send budget when that is smaller."""
        return max(1, min(MAX_BYTES, self._budget.limit))

    def _write(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(websocket.WebSocketClosedError):
            self._budget.send(self.write_message, json.dumps(message))

    def on_close(self) -> None:
        follower = getattr(self, "_follower", None)
        if follower is not None:
            follower.cancel()
