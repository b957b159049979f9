"""Given a real server, when WebSocket subscribers stop reading, then they are let go and the server's memory stays bounded."""

import asyncio
import base64
import json
import os
import socket

import psutil

from .helpers import call, strict_json

SILENT = 10
OFFERED_PER_SUBSCRIBER = 48 * 2**20  # bytes of messages each silent subscriber would have to hold
MiB = 2**20
# 16 groups (the most a spec may have) make each change message a few kB
WIDE = {"groups": [{"name": f"g{i}", "count": 0, "threads": 1, "memory": "256 MiB"} for i in range(16)]}


async def silent_subscriber(port: int, base_url: str, auth: dict) -> socket.socket:
    """A real client of the stream that completes the WebSocket handshake and then never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # little room in the kernel: the server must hold it
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {base_url}clustermgr/api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: {auth['Authorization']}\r\n\r\n"
    )
    await loop.sock_sendall(sock, request.encode())
    answer = await loop.sock_recv(sock, 1024)
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


class Reader:
    """A subscriber that reads everything, checking only that ``seq`` runs on without a gap."""

    def __init__(self, connection):
        self.connection = connection
        self.last: dict | None = None
        self.count = 0
        self.gaps: list[tuple[int, int]] = []
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while (text := await self.connection.read_message()) is not None:
            message = strict_json(text)
            if self.last is not None and message["seq"] != self.last["seq"] + 1:
                self.gaps.append((self.last["seq"], message["seq"]))
            self.last, self.count = message, self.count + 1


def bytes_waiting(manager) -> int:
    """The bytes the server holds for its subscribers: queued for their sockets, not yet written."""
    return sum(listener.__self__._budget.waiting for listener in list(manager.feed._listeners))


async def change_often(manager, cluster_id: str, reader: Reader, names: range, server: psutil.Process):
    """Rename the cluster once per name (one message each), until the reader has the last.

    Returns the peak RSS and the peak of :func:`bytes_waiting` seen.
    """
    peak, held = server.memory_info().rss, 0
    for i in names:
        manager.update(cluster_id, {"name": f"n{i}"})
        await asyncio.sleep(0)  # one message per change
        held = max(held, bytes_waiting(manager))
        if i % 500 == 0:
            peak = max(peak, server.memory_info().rss)
            await asyncio.sleep(0.01)  # let the reading subscriber read
    while reader.last is None or reader.last.get("cluster", {}).get("name") != f"n{names[-1]}":
        await asyncio.sleep(0.05)
    return max(peak, server.memory_info().rss), held


async def test_silent_subscribers_are_let_go_and_memory_stays_bounded(
    jp_fetch, jp_ws_fetch, jp_serverapp, jp_http_port, jp_base_url, jp_auth_header
):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    server = psutil.Process()  # pytest-jupyter runs the server in this process
    # Given a cluster whose every change is a message of a few kB
    _, created = await call(jp_fetch, "POST", "clusters", body={"name": "n0", "spec": WIDE}, expect=202)
    size = len(json.dumps({"type": "changed", "seq": 1, "cluster": manager.describe(manager.get(created["id"]))}))
    changes = OFFERED_PER_SUBSCRIBER // size
    # And one subscriber that reads everything
    reader = Reader(await jp_ws_fetch("clustermgr", "api", "stream"))
    # And ten subscribers that never read
    silent = [await silent_subscriber(jp_http_port, jp_base_url, jp_auth_header) for _ in range(SILENT)]
    assert len(manager.feed._listeners) == SILENT + 1
    before = server.memory_info().rss

    # When the cluster changes so often that each silent subscriber would have to hold 48 MiB
    peak, held = await change_often(manager, created["id"], reader, range(1, changes + 1), server)

    growth = (peak - before) / MiB
    print(
        f"{changes} messages of {size} B to {SILENT} silent subscribers: at most {held / MiB:.1f} MiB queued; "
        f"server RSS {before / MiB:.0f} MiB -> peak {peak / MiB:.0f} MiB (+{growth:.0f} MiB; "
        f"{SILENT * changes * size / MiB:.0f} MiB were offered)"
    )
    # Then the silent subscribers were let go, each once its limit was reached
    assert len(manager.feed._listeners) == 1, len(manager.feed._listeners)
    assert held <= (SILENT + 1) * manager.stream_buffer_limit, held
    # And the server's memory grew by a bounded amount: without the limit it grows by about the 480 MiB offered
    # (+864 MiB measured); with it, by the buffers and what the allocator keeps of them (+135 MiB in a fresh process)
    assert growth < 4 * SILENT * manager.stream_buffer_limit / MiB + 40, growth
    # While the reading subscriber got every change, in order, and is still subscribed
    assert reader.gaps == [] and reader.count >= changes + 1  # the snapshot, then one message per change
    await call(jp_fetch, "PATCH", "clusters", created["id"], body={"name": "still-here"}, expect=200)
    while reader.last["cluster"]["name"] != "still-here":
        await asyncio.sleep(0.05)
    for sock in silent:
        sock.close()
    reader.connection.close()
    await call(jp_fetch, "DELETE", "clusters", created["id"], expect=202)
