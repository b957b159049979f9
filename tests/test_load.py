"""Given a real server, when many clients send mixed requests over several clusters while subscribers watch,
then no request gets a 5xx, every subscriber's final view equals GET, the server's memory stays bounded, and
its Prometheus endpoint (/metrics, scraped all along) agrees with GET clusters.

CI runs a reduced load (bounded in time); ``CLUSTERMGR_LOAD=full`` runs the issue's figures
(50 clients x 100 requests over 10 clusters, 20 subscribers).
"""

import asyncio
import json
import os
import random
import time

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tornado.httpclient import AsyncHTTPClient

from .helpers import call, strict_json

FULL = os.environ.get("CLUSTERMGR_LOAD") == "full"
CLUSTERS, CLIENTS, REQUESTS, SUBSCRIBERS = (10, 50, 100, 20) if FULL else (4, 50, 20, 20)
MiB = 2**20
NO_WORKERS = {"groups": [{"count": 0, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def jp_server_config(jp_server_config):
    return {**jp_server_config, "ClusterManager": {**jp_server_config["ClusterManager"], "max_clusters": CLUSTERS}}


class View:
    """What one subscriber knows: the snapshot, with every later message applied in order."""

    def __init__(self, connection):
        self.connection = connection
        self.clusters: dict[str, dict] = {}
        self.seq = -1
        self.gaps = 0
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while (text := await self.connection.read_message()) is not None:
            message = strict_json(text)
            if message["type"] == "snapshot":
                self.clusters = {c["id"]: c for c in message["clusters"]}
            elif message["type"] == "removed":
                self.clusters.pop(message["id"], None)
            else:
                self.clusters[message["cluster"]["id"]] = message["cluster"]
            self.gaps += self.seq >= 0 and message["seq"] != self.seq + 1
            self.seq = message["seq"]


async def scrape(jp_fetch) -> dict[str, list]:
    """The server's /metrics (authenticated like any page): metric name -> its samples."""
    response = await jp_fetch("metrics", method="GET")
    assert response.code == 200
    families = text_string_to_metric_families(response.body.decode())
    return {family.name: family.samples for family in families}


def value(metrics: dict[str, list], sample: str, **labels: str) -> float:
    """The sum of the samples called ``sample`` whose labels include ``labels``."""
    family = sample.removesuffix("_total").removesuffix("_count")
    return sum(
        s.value
        for s in metrics.get(family, [])
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    )


def metrics_view(metrics: dict[str, list], ids: list[str]) -> dict:
    """What /metrics says about the clusters ``ids``, in the shape :func:`listing_view` makes of GET clusters."""
    clusters = {(s.labels["status"], s.labels["backend"]): s.value for s in metrics["clustermgr_clusters"] if s.value}
    workers = {
        (s.labels["cluster"], s.labels["group"], s.labels["state"]): s.value
        for s in metrics["clustermgr_workers"]
        if s.labels["cluster"] in ids
    }
    resources = {
        (s.labels["cluster"], s.labels["resource"]): s.value
        for s in metrics["clustermgr_cluster_resources"]
        if s.labels["cluster"] in ids
    }
    return {"clusters": clusters, "workers": workers, "resources": resources}


def listing_view(listing: list[dict]) -> dict:
    clusters: dict[tuple[str, str], int] = {}
    workers, resources = {}, {}
    for c in listing:
        clusters[(c["status"], c["backend"])] = clusters.get((c["status"], c["backend"]), 0) + 1
        for g in c["workers"]["groups"]:
            workers[(c["id"], g["name"], "running")] = g["running"]
            workers[(c["id"], g["name"], "pending")] = g["pending"]
        for resource, amount in c["resources"].items():
            resources[(c["id"], resource)] = amount
    # the listing counts stopping workers per cluster: here every group's must be 0, as GET says
    for c in listing:
        assert c["workers"]["stopping"] == 0
        for g in c["workers"]["groups"]:
            workers[(c["id"], g["name"], "stopping")] = 0
    return {"clusters": clusters, "workers": workers, "resources": resources}


def mixed_request(rng: random.Random, ids: list[str], client: int, i: int) -> tuple[str, str, dict | None]:
    """One request of a browser or a script: mostly reads, some changes, a few bad ones."""
    cluster = rng.choice(ids)
    kind = rng.choices(
        ["list", "get", "events", "templates", "rename", "scale", "adapt", "adapt-off", "bad", "unknown"],
        weights=[20, 20, 10, 5, 15, 5, 5, 5, 10, 5],
    )[0]
    return {
        "list": ("GET", "clusters", None),
        "get": ("GET", f"clusters/{cluster}", None),
        "events": ("GET", f"clusters/{cluster}/events", None),
        "templates": ("GET", "templates", None),
        "rename": ("PATCH", f"clusters/{cluster}", {"name": f"c{client}-{i}"}),
        "scale": ("PATCH", f"clusters/{cluster}", {"scale": {"workers": rng.choice([0, 0, 1])}}),
        "adapt": ("PATCH", f"clusters/{cluster}", {"adapt": {"minimum": 0, "maximum": 1, "interval": 0.5}}),
        "adapt-off": ("PATCH", f"clusters/{cluster}", {"adapt": None}),
        "bad": (
            "PATCH",
            f"clusters/{cluster}",
            rng.choice([{"scale": {"workers": -1}}, {"spec": {"groups": []}}, {"name": ""}]),
        ),
        "unknown": ("GET", "clusters/no-such-cluster", None),
    }[kind]


async def test_many_clients_and_subscribers(
    jp_fetch, jp_ws_fetch, jp_serverapp, jp_http_port, jp_base_url, jp_auth_header
):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    server = psutil.Process()  # pytest-jupyter runs the server in this process
    # Given clusters with no workers yet, and subscribers watching
    ids = []
    for n in range(CLUSTERS):
        _, created = await call(
            jp_fetch, "POST", "clusters", body={"name": f"load-{n}", "spec": NO_WORKERS}, expect=202
        )
        ids.append(created["id"])
    views = [View(await jp_ws_fetch("clustermgr", "api", "stream")) for _ in range(SUBSCRIBERS)]
    metrics_before = await scrape(jp_fetch)
    before = server.memory_info().rss
    peak = before

    # When clients send mixed requests, all at once
    http = AsyncHTTPClient(force_instance=True, max_clients=CLIENTS)
    api = f"http://127.0.0.1:{jp_http_port}{jp_base_url}clustermgr/api/"
    statuses: dict[int, int] = {}
    problems: list[str] = []
    scales_done = [0]
    scrapes: list[dict] = []

    async def client(number: int) -> None:
        rng = random.Random(number)
        for i in range(REQUESTS):
            method, path, body = mixed_request(rng, ids, number, i)
            response = await http.fetch(
                api + path, method=method, headers={**jp_auth_header, "Content-Type": "application/json"},
                body=None if method == "GET" else json.dumps(body), raise_error=False, request_timeout=120,
            )  # fmt: skip
            statuses[response.code] = statuses.get(response.code, 0) + 1
            scales_done[0] += response.code == 200 and "scale" in (body or {})
            if response.code >= 500 or response.headers.get("Content-Type", "").split(";")[0] != "application/json":
                problems.append(f"{method} {path} {body} -> {response.code} {response.body[:300]!r}")

    async def sample_memory() -> None:
        nonlocal peak
        while True:
            peak = max(peak, server.memory_info().rss)
            await asyncio.sleep(0.2)

    async def scrape_all_along() -> None:
        while True:
            scrapes.append(await scrape(jp_fetch))
            await asyncio.sleep(0.5)

    sampler = asyncio.ensure_future(sample_memory())
    scraper = asyncio.ensure_future(scrape_all_along())
    start = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    elapsed = time.monotonic() - start
    scraper.cancel()
    # Then no request got a 5xx or an answer that is not JSON
    assert problems == [], problems[:10]
    # And every scrape during the load counted every cluster once, every subscriber, and no negative workers
    assert len(scrapes) >= 2
    for metrics in scrapes:
        assert sum(s.value for s in metrics["clustermgr_clusters"]) == CLUSTERS
        assert value(metrics, "clustermgr_stream_subscribers") == SUBSCRIBERS
        assert all(s.value >= 0 for s in metrics["clustermgr_workers"])

    # When the load is over and the clusters settle (adaptive off, no workers)
    for cluster_id in ids:
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"adapt": None}, expect=200)
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 0}}, expect=200)
        scales_done[0] += 1
    deadline = time.monotonic() + 120
    while not all(manager.get(i).status == "running" and manager.get(i).worker_counts()["stopping"] == 0 for i in ids):
        assert time.monotonic() < deadline, [manager.describe(manager.get(i))["workers"] for i in ids]
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.5)
    while any(view.seq != manager.feed.seq for view in views):
        assert time.monotonic() < deadline, [view.seq for view in views]
        await asyncio.sleep(0.1)
    sampler.cancel()

    # Then every subscriber's view is exactly what GET answers, with no message missed
    _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
    expected = {c["id"]: c for c in listing["clusters"]}
    for view in views:
        assert view.gaps == 0
        assert view.clusters == expected
    # And /metrics says what GET says: clusters by status and backend, workers by group and state, resources
    metrics = await scrape(jp_fetch)
    _, listing_again = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listing_again == listing, "the clusters changed while being compared"
    assert metrics_view(metrics, ids) == listing_view(listing["clusters"])
    # And every manual scale that was accepted was counted once, as a manual decision
    manual = {"kind": "scale", "source": "manual", "reason": "manual"}
    counted = value(metrics, "clustermgr_decisions_total", **manual)
    assert counted - value(metrics_before, "clustermgr_decisions_total", **manual) == scales_done[0]
    started = value(metrics, "clustermgr_cluster_start_seconds_count", backend="local")
    assert started - value(metrics_before, "clustermgr_cluster_start_seconds_count", backend="local") >= 0
    assert started >= CLUSTERS
    growth = (peak - before) / MiB
    print(
        f"{CLIENTS} clients x {REQUESTS} requests over {CLUSTERS} clusters, {SUBSCRIBERS} subscribers: {elapsed:.1f} s, "
        f"statuses {dict(sorted(statuses.items()))}, {manager.feed.seq} stream messages; server RSS "
        f"{before / MiB:.0f} -> peak {peak / MiB:.0f} MiB (+{growth:.0f} MiB); {len(scrapes)} scrapes of /metrics"
    )
    # And the server's memory stayed bounded
    assert growth < 200, growth
    for view in views:
        view.connection.close()
    http.close()
    for cluster_id in ids:
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
