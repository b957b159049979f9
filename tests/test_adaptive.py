"""Given adaptive mode on real processes, the cluster follows the load through the one scale routine."""

import asyncio
import re
import time

from .helpers import SMALL, call, cluster_client, create, delete_and_wait, held_burst, running_with, wait_for

FAST = {"interval": 0.2, "wait_count": 3, "target_duration": 1}
CPU_AND_GPU = {
    "groups": [
        {"name": "cpu", "count": 0, "threads": 1, "memory": "256 MiB"},
        {"name": "gpu", "count": 0, "threads": 1, "memory": "256 MiB", "gpus": 1},
    ]
}


def slow(x, delay=0.5):
    time.sleep(delay)
    return x


async def events_of(jp_fetch, cluster_id):
    _, body = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    return body["events"]


async def test_grows_under_a_burst_and_shrinks_to_its_minimum_when_idle(jp_fetch):
    # Given an adaptive cluster between 1 and 4 workers whose interval is an hour: every decision
    # after the first comes from the scheduler's wake-ups (work arrived, workers ran dry)
    adapt = {"minimum": 1, "maximum": 4, "unit": "workers", "interval": 3600, "target_duration": 1}
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 0}]}, adapt=adapt)
    cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="the minimum of 1 worker")
    assert cluster["adapt"]["groups"] == [{"group": "default", "minimum": 1, "maximum": 4, "unit": "workers"}]
    try:
        async with cluster_client(cluster, asynchronous=True) as client:
            # When a burst of tasks arrives, held running until the growth is checked (a burst that ended first
            # would let workers that ran dry be retired before the last one connected, on a loaded machine)
            futures, release = held_burst(client, 40, f"release-{cluster_id}")
            # Then it grows to its maximum, and not beyond
            cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 4, what="4 workers")
            assert cluster["workers"]["requested"] == 4
            await release.set()
            assert await client.gather(futures) == list(range(40))
            del futures
        # And when the work is done and the cluster idles, it shrinks back to 1
        await wait_for(jp_fetch, cluster_id, running_with(1), timeout=60, what="back to 1 worker")
        events = await events_of(jp_fetch, cluster_id)
        reasons = [e["message"] for e in events if e["kind"] == "scale" and e["source"] == "adaptive"]
        assert any(re.search(r"\d+ tasks? queued", r) and "1 s target duration" in r for r in reasons), reasons
        # (workers are retired as they run dry: "1 worker idle, nothing queued," or "idle" at the end)
        assert any(re.search(r" for 1 interval \(\d+ s\)$", r) for r in reasons), reasons
        cluster = (await call(jp_fetch, "GET", "clusters", cluster_id))[1]
        assert cluster["last_decision"]["after"] == 1
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_a_manual_scale_after_adapt_turns_adaptive_off_and_sticks(jp_fetch):
    # Given an adaptive cluster idling at its minimum of 1
    adapt = {"minimum": 1, "maximum": 4, **FAST}
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 0}]}, adapt=adapt)
    await wait_for(jp_fetch, cluster_id, running_with(1))
    try:
        # When it is scaled by hand to 3
        _, cluster = await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 3}}, expect=200)
        # Then adaptive mode is off, and the state says why
        assert cluster["adapt"] is None
        assert cluster["last_decision"]["message"] == "manual scale (adaptive mode turned off)"
        await wait_for(jp_fetch, cluster_id, running_with(3), what="3 workers")
        # And 3 stays 3 for many adaptive intervals, although the cluster is idle
        await asyncio.sleep(15 * FAST["interval"])
        _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
        assert cluster["workers"]["requested"] == 3 and cluster["spec"]["groups"][0]["count"] == 3
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_tasks_that_need_a_gpu_grow_the_gpu_group_only(jp_fetch):
    # Given two adaptive groups, both at 0: plain workers and GPU workers
    cluster_id = await create(jp_fetch, spec=CPU_AND_GPU, adapt={"group": "cpu", "minimum": 0, "maximum": 2, **FAST})
    await call(
        jp_fetch,
        "PATCH",
        "clusters",
        cluster_id,
        body={"adapt": {"group": "gpu", "minimum": 0, "maximum": 2}},
        expect=200,
    )
    cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "running")
    try:
        async with cluster_client(cluster, asynchronous=True) as client:
            # When tasks arrive that need a GPU
            futures = client.map(slow, range(6), resources={"GPU": 1}, pure=False)
            seen_cpu = 0

            def gpu_running(c):
                nonlocal seen_cpu
                groups = {g["name"]: g for g in c["workers"]["groups"]}
                seen_cpu = max(seen_cpu, groups["cpu"]["requested"])
                return groups["gpu"]["running"] >= 1

            # Then the GPU group grows and runs them
            await wait_for(jp_fetch, cluster_id, gpu_running, what="a GPU worker")
            assert await client.gather(futures) == list(range(6))
            # And the plain group never grew
            _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id)
            gpu_running(cluster)
            assert seen_cpu == 0
        events = await events_of(jp_fetch, cluster_id)
        grew = [e for e in events if e["kind"] == "scale" and e["group"] == "gpu" and e["after"] > e["before"]]
        assert grew and grew[0]["message"] == "tasks need GPU"
        assert not [e for e in events if e["kind"] == "scale" and e["group"] == "cpu"]
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_adaptive_does_not_drop_data_a_client_holds_and_says_why(jp_fetch):
    # Given an adaptive cluster (0 to 2) that grew for a task whose result a client keeps
    cluster_id = await create(
        jp_fetch, spec={"groups": [{**SMALL, "count": 0}]}, adapt={"minimum": 0, "maximum": 2, **FAST}
    )
    cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "running")
    try:
        async with cluster_client(cluster, asynchronous=True) as client:
            future = client.submit(slow, b"x" * 10_000, 0.1)
            await future
            # When the cluster idles for many intervals
            why = "cannot shrink: workers hold data a client still references"
            cluster = await wait_for(
                jp_fetch, cluster_id, lambda c: (c["last_decision"] or {}).get("message") == why, what="the reason"
            )
            # Then it keeps the worker that holds the result, and the log says why
            assert cluster["workers"]["running"] == 1
            await asyncio.sleep(10 * FAST["interval"])
            _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id)
            assert cluster["workers"]["running"] == 1 and cluster["last_decision"]["message"] == why
            assert await future == b"x" * 10_000
            # And once the client lets go, the cluster shrinks to 0
            del future
        await wait_for(jp_fetch, cluster_id, running_with(0), what="0 workers")
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_adaptive_mode_can_be_turned_off_for_one_group(jp_fetch):
    # Given two groups, both adaptive
    cluster_id = await create(jp_fetch, spec=CPU_AND_GPU, adapt={"group": "cpu", "minimum": 0, "maximum": 2})
    await call(
        jp_fetch,
        "PATCH",
        "clusters",
        cluster_id,
        body={"adapt": {"group": "gpu", "minimum": 0, "maximum": 1}},
        expect=200,
    )
    try:
        # When bad requests to turn a group off arrive, they are refused and change nothing
        for body, field in [
            ({"adapt": {"enabled": False, "minimum": 1}}, "adapt.minimum"),
            ({"adapt": {"enabled": False}}, "adapt.group"),
            ({"adapt": {"enabled": "no", "group": "gpu", "minimum": 0, "maximum": 1}}, "adapt.enabled"),
            ({"adapt": {"enabled": False, "group": "tpu"}}, "adapt.group"),
        ]:
            status, error = await call(jp_fetch, "PATCH", "clusters", cluster_id, body=body)
            assert status == 400 and error["field"] == field, (body, error)
        _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id)
        assert [r["group"] for r in cluster["adapt"]["groups"]] == ["cpu", "gpu"]
        # When the GPU group is turned off
        _, cluster = await call(
            jp_fetch, "PATCH", "clusters", cluster_id, body={"adapt": {"group": "gpu", "enabled": False}}, expect=200
        )
        # Then only the CPU group stays adaptive, and the log says so
        assert [r["group"] for r in cluster["adapt"]["groups"]] == ["cpu"]
        # (the scheduler's own lifecycle events may land around it: the message is looked for, not taken as last)
        events = await events_of(jp_fetch, cluster_id)
        assert "adaptive mode turned off for group gpu" in [e["message"] for e in events]
        # And turning the last one off leaves adaptive mode off altogether
        _, cluster = await call(
            jp_fetch, "PATCH", "clusters", cluster_id, body={"adapt": {"group": "cpu", "enabled": False}}, expect=200
        )
        assert cluster["adapt"] is None
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


def kept(i, event_name):
    """Held running until the event is set; logs that it ran (a second run shows as a repeat), returns 10 kB."""
    from distributed import Event, get_worker

    Event(event_name).wait(600)
    get_worker().log_event("kept-ran", i)
    return bytes([i]) * 10_000


async def test_idle_workers_retire_down_to_the_one_the_held_data_needs_and_nothing_is_lost(jp_fetch):
    # Given an adaptive cluster (0 to 3) that grew to 3 workers for tasks whose results a client keeps
    from distributed import Event

    cluster_id = await create(
        jp_fetch, spec={"groups": [{**SMALL, "count": 0}]}, adapt={"minimum": 0, "maximum": 3, **FAST}
    )
    cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "running")
    try:
        async with cluster_client(cluster, asynchronous=True) as client:
            release = Event(f"kept-{cluster_id}", client=client)
            futures = client.map(kept, range(9), event_name=release.name, pure=False)
            await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 3, what="3 workers")
            await release.set()
            await client.gather(futures)
            # When the cluster idles with the results held (90 kB: one worker of 256 MiB holds them twice over)
            # Then it retires the idle workers down to the one the held data needs
            await wait_for(jp_fetch, cluster_id, running_with(1), timeout=60, what="down to 1 worker")
            # And no result was lost or computed again: each task ran once, each future still has its value
            ran = sorted(i for _, i in await client.get_events("kept-ran"))
            assert ran == list(range(9))
            assert [f.status for f in futures] == ["finished"] * 9
            assert await client.gather(futures) == [bytes([i]) * 10_000 for i in range(9)]
            del futures
        # And once the client lets go, the cluster shrinks to 0
        await wait_for(jp_fetch, cluster_id, running_with(0), what="0 workers")
    finally:
        await delete_and_wait(jp_fetch, cluster_id)
