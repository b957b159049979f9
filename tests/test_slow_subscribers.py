"""Given a real server, when WebSocket subscribers (of the push stream, of a followed log) stop reading, then the
server's memory stays bounded: stream subscribers are let go, log followers are sent nothing more until they read."""

import asyncio
import base64
import json
import os
import socket

import psutil

from .helpers import SMALL, call, create, strict_json, wait_for

SILENT = 10
OFFERED_PER_SUBSCRIBER = 48 * 2**20  # bytes of messages each silent subscriber would have to hold
MiB = 2**20
# 16 groups (the most a spec may have) make each change message a few kB
WIDE = {"groups": [{"name": f"g{i}", "count": 0, "threads": 1, "memory": "256 MiB"} for i in range(16)]}


async def silent_subscriber(port: int, base_url: str, auth: dict, route: str = "stream") -> socket.socket:
    """A real client of the stream (or of another WebSocket ``route``) that completes the handshake, then never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # little room in the kernel: the server must hold it
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {base_url}clustermgr/api/{route} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
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


async def test_log_followers_that_never_read_are_sent_nothing_more_and_memory_stays_bounded(
    jp_fetch, jp_ws_fetch, jp_serverapp, jp_http_port, jp_base_url, jp_auth_header
):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    server = psutil.Process()  # pytest-jupyter runs the server in this process
    # Given a running cluster (a real scheduler, no workers) whose scheduler log is followed by one reader
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 0}]})
    await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "running", 120, "running")
    log = manager.get(cluster_id).backend.log_files()["scheduler"]
    route = f"clusters/{cluster_id}/logs/scheduler/follow"
    reader = await jp_ws_fetch("clustermgr", "api", *route.split("/"), params={"tail": 1})
    offset = strict_json(await reader.read_message())["offset"]
    # And ten followers that never read
    silent = [await silent_subscriber(jp_http_port, jp_base_url, jp_auth_header, route) for _ in range(SILENT)]
    await asyncio.sleep(1)  # each has its tail
    before = server.memory_info().rss

    # When the log grows by 48 MiB at about 10 MiB/s (a 4 MiB message per follower every half second)
    line = b"x" * 1023 + b"\n"
    peak, received, gaps = before, 0, []

    async def read_all(until_size: int) -> None:
        nonlocal offset, received
        while offset < until_size:
            message = strict_json(await asyncio.wait_for(reader.read_message(), 60))
            if message["start"] != offset:
                gaps.append((offset, message["start"]))
            offset, received = message["offset"], received + len(message["text"])

    reading = asyncio.ensure_future(read_all(log.stat().st_size + OFFERED_PER_SUBSCRIBER))
    with open(log, "ab") as out:
        for _ in range(OFFERED_PER_SUBSCRIBER // MiB):
            out.write(line * 1024)
            out.flush()
            await asyncio.sleep(0.1)
            peak = max(peak, server.memory_info().rss)
    while not reading.done():
        await asyncio.sleep(0.2)
        peak = max(peak, server.memory_info().rss)
    await reading

    growth = (peak - before) / MiB
    print(
        f"log grown by {OFFERED_PER_SUBSCRIBER / MiB:.0f} MiB, followed by {SILENT} followers that never read and "
        f"one that reads: server RSS {before / MiB:.0f} MiB -> peak {peak / MiB:.0f} MiB (+{growth:.0f} MiB)"
    )
    # Then the reading follower got every byte, in order, without a gap
    assert gaps == [] and received >= OFFERED_PER_SUBSCRIBER, (gaps, received)
    # And the server's memory grew by a bounded amount: one message at most waits for each silent follower
    # (without the bound, each would hold the whole 48 MiB: +480 MiB and more)
    assert growth < 4 * SILENT * manager.stream_buffer_limit / MiB + 40, growth
    for sock in silent:
        sock.close()
    reader.close()
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
