"""Given a real server and a cluster of real workers in two groups (one with a GPU), then what it used is counted
per group from the workers' lifetimes and shapes (cluster JSON, the per-day summary, the store), and its timeline
of workers, memory and CPU in use is served and bounded."""

import datetime
import json
import sqlite3
import time

import pytest
from tornado.httpclient import HTTPClientError

from clustermgr_lab.domain.timeline import Timeline
from clustermgr_lab.domain.usage import UsageMeter

from .helpers import call, strict_json, until, validate_response, wait_for

MiB = 2**20
SPEC = {
    "groups": [
        {"name": "cpu", "count": 1, "threads": 2, "memory": "256 MiB"},
        {"name": "gpu", "count": 1, "threads": 1, "memory": "256 MiB", "gpus": 1},
    ]
}


@pytest.fixture
def jp_server_config(jp_server_config):
    return {**jp_server_config, "ClusterManager": {**jp_server_config["ClusterManager"], "timeline_interval": 0.25}}


async def usage_days(jp_fetch, days: str) -> tuple[int, dict]:
    try:
        response = await jp_fetch("clustermgr", "api", "usage", params={"days": days}, method="GET")
        status, payload, headers = response.code, response.body, response.headers
    except HTTPClientError as exc:
        status, payload, headers = exc.code, exc.response.body, exc.response.headers
    data = strict_json(payload)
    validate_response("GET", ("usage",), status, headers.get("Content-Type"), data)
    return status, data


def group(usage: dict, name: str) -> dict:
    return next(g for g in usage["groups"] if g["name"] == name)


async def test_usage_is_counted_per_group_and_day_and_the_timeline_shows_memory_and_cpu(jp_fetch, jp_serverapp):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    # Given a cluster whose two workers run: 2 cores + 256 MiB, and 1 core + 1 GPU + 256 MiB
    _, created = await call(jp_fetch, "POST", "clusters", body={"name": "metered", "spec": SPEC}, expect=202)
    cluster_id = created["id"]
    assert created["usage"]["core_seconds"] == 0
    running = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 2, 90, "two workers")
    # Then the cluster says what its workers use per second, per group
    assert running["usage"]["rate"] == {"cores": 3.0, "gpus": 1.0, "memory": 512.0 * MiB}
    assert group(running["usage"], "gpu")["rate"] == {"cores": 1.0, "gpus": 1.0, "memory": 256.0 * MiB}
    connected = time.time()

    # When the cpu group has run a while and is scaled to nothing
    await until(lambda: time.time() - connected > 1.5, 5, "a second and a half")
    await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"group": "cpu", "workers": 0}}, expect=200)
    gone = await wait_for(
        jp_fetch, cluster_id, lambda c: group(c["usage"], "cpu")["rate"]["cores"] == 0, 60, "the cpu worker gone"
    )
    # Then its core-, and memory-seconds are its lifetime times its shape, and it uses nothing more
    cpu = group(gone["usage"], "cpu")
    lifetime = cpu["core_seconds"] / 2
    assert 1.5 <= lifetime <= time.time() - created_time(created), cpu
    assert cpu["memory_seconds"] == pytest.approx(lifetime * 256 * MiB, rel=1e-3)  # amounts are rounded to ms
    assert cpu["gpu_seconds"] == 0
    # And the GPU worker, still running, has counted one GPU-second per core-second
    gpu = group(gone["usage"], "gpu")
    assert gpu["gpu_seconds"] == pytest.approx(gpu["core_seconds"]) and gpu["gpu_seconds"] > 1
    assert gone["usage"]["core_seconds"] == pytest.approx(cpu["core_seconds"] + gpu["core_seconds"], abs=0.01)

    # And the per-day summary lists it today (UTC), with what it used up to now
    status, summary = await usage_days(jp_fetch, "2")
    assert status == 200 and len(summary["days"]) == 2
    today = summary["days"][0]
    assert today["date"] == datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    (row,) = [c for c in today["clusters"] if c["id"] == cluster_id]
    assert row["name"] == "metered" and {g["name"] for g in row["groups"]} == {"cpu", "gpu"}
    assert row["core_seconds"] >= gone["usage"]["core_seconds"]  # the GPU worker ran on since
    assert today["core_seconds"] >= row["core_seconds"]
    # And a bad number of days is refused, naming the field
    for bad in ("0", "lots", "401"):
        status, error = await usage_days(jp_fetch, bad)
        assert (status, error["field"]) == (400, "days"), error

    # And the store keeps what it used (a restarted server starts from it)
    store = manager.store.path

    def stored() -> dict | None:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            (usage,) = db.execute("SELECT usage FROM clusters WHERE id = ?", (cluster_id,)).fetchone()
        return UsageMeter.from_record(json.loads(usage)).to_dict()

    async def stored_is_current() -> bool:
        # compared with the cluster as it is at each try: a later change (its usage moves on) is saved too
        _, now = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
        return stored() == now["usage"]

    await until(stored_is_current, 10, "the stored usage to be the cluster's")

    # And its timeline has the workers, their memory in use and limit, and CPU, sampled from the scheduler
    # (sampled periodically: the sample after the scale-down may come a moment after the API shows it)
    sampled: dict = {}

    async def sampled_after_the_scale_down() -> bool:
        _, sampled["timeline"] = await call(jp_fetch, "GET", "clusters", cluster_id, "timeline", expect=200)
        return sampled["timeline"]["points"][-1]["workers"] == 1

    await until(sampled_after_the_scale_down, 30, "a timeline sample with the one worker left")
    points = sampled["timeline"]["points"]
    assert max(p["workers"] for p in points) == 2
    assert all(p["memory"] > 0 for p in points if p["workers"] >= 1)
    assert max(p["memory_limit"] for p in points) == 512 * MiB
    assert all(p["cpu"] >= 0 for p in points)
    status, _ = await call(jp_fetch, "GET", "clusters", "nope", "timeline")
    assert status == 404
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)


def created_time(cluster: dict) -> float:
    return datetime.datetime.fromisoformat(cluster["created"]).timestamp()


def test_a_timeline_covers_a_long_life_in_bounded_points():
    # Given a timeline of 240 points sampled every minute, when a month of samples goes in
    timeline = Timeline(resolution=60, capacity=240)
    start = 1_700_000_000
    for n in range(30 * 24 * 60):
        t = start + 60 * n
        timeline.add(t, workers=n % 4, memory=MiB, memory_limit=4 * MiB, cpu=0.5)
    # Then it holds at most 240 points covering the whole month, each the mean of its samples
    data = timeline.to_dict()
    assert len(data["points"]) <= 240 and data["resolution"] >= 30 * 24 * 3600 / 240
    first = datetime.datetime.fromisoformat(data["points"][0]["time"]).timestamp()
    assert first <= start and first + data["resolution"] > start
    assert all(p["workers"] == pytest.approx(1.5) and p["memory"] == MiB for p in data["points"][1:-1])  # whole buckets


def test_usage_is_split_at_midnight_utc():
    # Given a meter that saw 4 cores from 23:00 to 01:00 UTC
    midnight = datetime.datetime(2026, 12, 2, tzinfo=datetime.timezone.utc).timestamp()
    meter = UsageMeter()
    meter.update({"default": (4, 0, 0)}, now=midnight - 3600)
    meter.update({}, now=midnight + 3600)
    # Then each day has an hour of it, and the total two
    assert {day: g["default"]["core_seconds"] for day, g in meter.days.items()} == {
        "2026-12-01": 4 * 3600.0,
        "2026-12-02": 4 * 3600.0,
    }
    assert meter.totals(midnight + 7200)["default"]["core_seconds"] == 8 * 3600.0
