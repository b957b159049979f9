"""Given a real Jupyter server, when clusters change, then every WebSocket client is told as it happens, unpolled."""

import asyncio
import contextlib
import statistics
import time

import pytest

from .helpers import call, running_with, strict_json, validate_stream_message

TWO_WORKERS = {"groups": [{"count": 2, "threads": 1, "memory": "256 MiB"}]}
# Tests check that changes are pushed, not how fast: speed is the benchmark's (`bench.py`: push p50/p99).
# A pushed message waits only for a CPU: on 2 cores at load average 15 this process is sometimes not
# scheduled for 100-200 ms (a median of 3 messages reached 139 ms there). A stream that is polled rather than
# pushed would be late by its polling period (dask-labextension: 5 s), so every message stays well below that.
WORST_UNDER_LOAD = 2.0  # measured 0.78 s at load average 30 on 2 cores; a 5 s poll still fails


class StreamClient:
    """One client of ``clustermgr/api/stream``: reads every message as it arrives and notes when."""

    def __init__(self, connection):
        self.connection = connection
        self.received: list[tuple[float, dict]] = []
        self._arrival = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, jp_ws_fetch) -> "StreamClient":
        return cls(await jp_ws_fetch("clustermgr", "api", "stream"))

    async def _read(self) -> None:
        while (text := await self.connection.read_message()) is not None:
            self.received.append((time.monotonic(), strict_json(text)))
            self._arrival.set()

    @property
    def messages(self) -> list[dict]:
        """Every message so far, each checked against the OpenAPI ``StreamMessage`` schema."""
        for _, message in self.received:
            validate_stream_message(message)
        return [message for _, message in self.received]

    async def wait_for(self, predicate, what: str, timeout: float = 90.0) -> dict:
        """The first message, in order, for which ``predicate`` holds; waits for it if need be."""
        deadline = time.monotonic() + timeout
        checked = 0
        while True:
            for message in self.messages[checked:]:
                if predicate(message):
                    return message
            checked = len(self.received)
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}; got {[(m['seq'], m['type']) for m in self.messages]}"
                )
            self._arrival.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._arrival.wait(), deadline - time.monotonic())

    def close(self) -> None:
        self.connection.close()
        self._reader.cancel()


class ChangeClock:
    """When the manager learnt of what each message carries: the start of that message's latency.

    For ``changed`` messages that is the first change of the cluster not yet sent (the manager
    gathers the changes of one event-loop turn into one message); for ``added`` and ``removed``,
    the moment the message was sent.
    """

    def __init__(self, manager, monkeypatch):
        self.manager = manager
        self.unsent: dict[str, float] = {}
        self.learnt: dict[int, float] = {}
        tell_manager = manager.feed.cluster_changed

        def changed(cluster):
            self.unsent.setdefault(cluster.id, time.monotonic())
            tell_manager(cluster)

        monkeypatch.setattr(manager.feed, "cluster_changed", changed)  # before any cluster binds it
        manager.feed.subscribe(self._sent)

    def _sent(self, message: dict) -> None:
        now = time.monotonic()
        changed = message["cluster"]["id"] if message["type"] == "changed" else None
        self.learnt[message["seq"]] = self.unsent.pop(changed, now) if changed else now

    def latencies(self, client: StreamClient) -> list[float]:
        """Seconds from the manager learning of each change to ``client`` having the message."""
        return [arrival - self.learnt[m["seq"]] for arrival, m in client.received if m["type"] != "snapshot"]


@pytest.fixture
def change_clock(jp_serverapp, monkeypatch):
    clock = ChangeClock(jp_serverapp.web_app.settings["clustermgr_manager"], monkeypatch)
    yield clock
    clock.manager.feed.unsubscribe(clock._sent)


def about(cluster_id, kind=None, predicate=lambda cluster: True):
    """A predicate on messages: a ``kind`` message about this cluster whose state satisfies ``predicate``."""

    def matches(message):
        if kind and message["type"] != kind:
            return False
        if message["type"] == "removed":
            return message["id"] == cluster_id
        return "cluster" in message and message["cluster"]["id"] == cluster_id and predicate(message["cluster"])

    return matches


def assert_consecutive(client: StreamClient) -> None:
    seqs = [m["seq"] for m in client.messages]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


def same_messages(one: StreamClient, other: StreamClient) -> bool:
    """Whether both clients got the same message for every ``seq`` both have seen after their snapshots."""
    numbered = [{m["seq"]: m for m in client.messages[1:]} for client in (one, other)]
    common = numbered[0].keys() & numbered[1].keys()
    return bool(common) and all(numbered[0][seq] == numbered[1][seq] for seq in common)


def report(label: str, seconds: list[float], what: str = "messages") -> None:
    median, worst = 1000 * statistics.median(seconds), 1000 * max(seconds)
    print(f"{label}: {len(seconds)} {what}, median {median:.1f} ms, max {worst:.1f} ms")


def assert_pushed_not_polled(latencies: list[float]) -> None:
    """No message later than a CPU-starved turn of the loop: pushed as the change happens, not at a poll."""
    assert latencies and max(latencies) < WORST_UNDER_LOAD, latencies


async def test_every_client_gets_a_snapshot_then_each_change_as_it_happens(jp_fetch, jp_ws_fetch, change_clock):
    # Given two clients connected to the stream
    first, second = await StreamClient.connect(jp_ws_fetch), await StreamClient.connect(jp_ws_fetch)
    for client in (first, second):
        snapshot = await client.wait_for(lambda m: True, "the snapshot")
        assert snapshot["type"] == "snapshot" and snapshot["clusters"] == []

    # When a cluster of two workers is created through the REST API
    _, created = await call(jp_fetch, "POST", "clusters", body={"name": "streamed", "spec": TWO_WORKERS}, expect=202)
    cluster_id = created["id"]

    # Then each client is told it was added, pending, and then of each change until both workers run
    for client in (first, second):
        await client.wait_for(about(cluster_id, "changed", running_with(2)), "both workers running")
        updates = client.messages[1:]
        assert updates[0]["type"] == "added" and updates[0]["cluster"]["status"] == "pending"
        assert all(m["type"] == "changed" for m in updates[1:])
        running = [m["cluster"]["workers"]["running"] for m in updates]
        assert running == sorted(running) and running[-1] == 2, running  # workers join, one message per change
        assert_consecutive(client)
    # And both clients got the same messages
    assert same_messages(first, second)

    # When a client reconnects
    first.close()
    third = await StreamClient.connect(jp_ws_fetch)
    # Then it gets a fresh snapshot: the cluster as the last change before it described it
    snapshot = await third.wait_for(lambda m: True, "the snapshot")
    assert snapshot["type"] == "snapshot"
    await second.wait_for(lambda m: m["seq"] >= snapshot["seq"], "the changes up to the snapshot")
    latest = [m["cluster"] for m in second.messages if "cluster" in m and m["seq"] <= snapshot["seq"]][-1]
    assert snapshot["clusters"] == [latest]

    # When the cluster is deleted
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    # Then the connected clients see it stopping, then removed, in the same numbering
    for client in (second, third):
        await client.wait_for(about(cluster_id, "changed", lambda c: c["status"] == "stopping"), "stopping")
        removed = await client.wait_for(about(cluster_id, "removed"), "removed")
        assert removed == {"type": "removed", "seq": client.messages[-1]["seq"], "id": cluster_id}
        assert_consecutive(client)
    assert same_messages(second, third)

    # And the messages reached every client as the manager learnt of their change, not at a later poll
    for label, client in (("first client", first), ("second client", second), ("reconnected client", third)):
        latencies = change_clock.latencies(client)
        report(label, latencies)
        assert_pushed_not_polled(latencies)
    second.close()
    third.close()


async def test_adaptive_decisions_are_pushed(jp_fetch, jp_ws_fetch, change_clock):
    # Given a client of the stream and a cluster with no workers
    client = await StreamClient.connect(jp_ws_fetch)
    spec = {"groups": [{"count": 0, "threads": 1, "memory": "256 MiB"}]}
    _, created = await call(jp_fetch, "POST", "clusters", body={"spec": spec}, expect=202)
    cluster_id = created["id"]
    await client.wait_for(about(cluster_id, "changed", lambda c: c["status"] == "running"), "running")

    # When adaptive mode is turned on with a minimum of one worker
    adapt = {"minimum": 1, "maximum": 2, "interval": 0.1}
    await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"adapt": adapt}, expect=200)

    # Then the client is told of the adaptive decision, and then of the worker it started
    decided = await client.wait_for(
        about(cluster_id, "changed", lambda c: (c["last_decision"] or {}).get("source") == "adaptive"), "the decision"
    )
    assert decided["cluster"]["last_decision"]["after"] == 1
    await client.wait_for(about(cluster_id, "changed", running_with(1)), "the worker running")
    assert_consecutive(client)
    latencies = change_clock.latencies(client)
    report("adaptive", latencies)
    assert_pushed_not_polled(latencies)
    client.close()


async def test_the_server_keeps_answering_while_clusters_start(jp_fetch, jp_serverapp):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    # When two clusters are being created
    ids = []
    for name in ("one", "two"):
        _, cluster = await call(jp_fetch, "POST", "clusters", body={"name": name, "spec": TWO_WORKERS}, expect=202)
        ids.append(cluster["id"])

    def all_running():
        return all(running_with(2)(manager.describe(manager.get(cluster_id))) for cluster_id in ids)

    # Then Jupyter's own API answers every request promptly until they run
    timings, deadline = [], time.monotonic() + 120
    while not all_running():
        assert time.monotonic() < deadline, "the clusters did not start within 120 s"
        start = time.monotonic()
        response = await jp_fetch("api", "status")
        timings.append(time.monotonic() - start)
        assert response.code == 200
        await asyncio.sleep(0.02)
    report("GET /api/status while 2 clusters start", timings, "requests")
    assert len(timings) >= 10, "the clusters started too fast to measure anything"
    # A start that held the event loop would hold a request at each of the two starts (or one request
    # for both); a busy machine delays one request now and then by a CPU's worth (0.62 s seen once under
    # stress-ng, 0.78 s at load average 30). So at most one request may take half a second, and none a second.
    slow = [t for t in timings if t >= 0.5]
    assert len(slow) <= 1 and max(timings) < 1.0, sorted(timings)[-5:]
