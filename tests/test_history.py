"""Given real clusters, every change appears in History with what was asked and what it became: a scale by memory
or by cores (and why it was rounded up), a Worker Spec edit (what changed, how many workers were replaced, and why
workers are pending meanwhile); a repeated event is one line with a count, pushed and stored as such; and only
conditions a user must act on are warnings; a killed worker's departure says what is recomputed because of it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket

from clustermgr_lab.cluster.events import EventLog
from clustermgr_lab.manager.store import ClusterStore

from .helpers import SMALL, call, cluster_client, create, delete_and_wait, running_with, until, wait_for
from .test_orphans import stored_cluster
from .test_stream import StreamClient

MiB = 2**20


async def events_of(jp_fetch, cluster_id: str) -> list[dict]:
    _, body = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    return body["events"]


async def test_a_scale_by_memory_or_cores_says_what_was_asked_and_what_it_became(jp_fetch):
    # Given a running cluster of one worker of 2 cores and 256 MiB
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "threads": 2}]})
    try:
        await wait_for(jp_fetch, cluster_id, running_with(1))

        # When it is scaled to 512 MiB
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"memory": "512 MiB"}}, expect=200)
        # Then History says what was asked and what it became
        last = (await events_of(jp_fetch, cluster_id))[-1]
        assert (last["kind"], last["before"], last["after"], last["source"]) == ("scale", 1, 2, "manual")
        assert last["asked"] == "512 MiB"
        assert last["message"] == "manual scale"
        await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers")

        # When it is scaled to 3 cores, which whole workers of 2 cores cannot give exactly
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"cores": 3}}, expect=200)
        # Then History says it became 4 cores, and why
        last = (await events_of(jp_fetch, cluster_id))[-1]
        assert last["asked"] == "3 cores" and (last["before"], last["after"]) == (2, 2)
        assert last["message"] == "manual scale: rounded up to whole workers of 2 cores (4 cores in all)"
        # And none of these ordinary events is a warning, and none counted twice
        events = await events_of(jp_fetch, cluster_id)
        assert all("level" not in e and "count" not in e for e in events), events
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_a_spec_edit_says_what_changed_how_many_workers_it_replaced_and_why_workers_pend(jp_fetch):
    # Given a running cluster of two 256 MiB workers
    spec = {"groups": [{**SMALL, "count": 2}]}
    cluster_id = await create(jp_fetch, spec=spec)
    try:
        await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers")

        # When its Worker Spec is edited to 320 MiB workers
        edited = {"groups": [{**SMALL, "count": 2, "memory": "320 MiB"}]}
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"spec": edited}, expect=200)

        # Then its new workers pend with the edit as their reason until they connect
        reasons: set[str] = set()

        async def replaced() -> bool:
            _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
            reasons.update(cluster["workers"]["pending_reasons"])
            return running_with(2)(cluster) and cluster["resources"]["memory"] == 640 * MiB

        await until(replaced, 60, "2 workers of 320 MiB", step=0.02)
        assert reasons == {"starting: worker spec edited, 2 workers replaced"}
        # And History has one line for the edit: what changed, and how many workers it replaced
        edits = [e for e in await events_of(jp_fetch, cluster_id) if e["source"] == "spec"]
        assert [(e["message"], e["asked"], e["before"], e["after"]) for e in edits] == [
            (
                "worker spec edited, 2 workers replaced",
                "spec edited: default memory 256 MiB → 320 MiB",
                2,
                2,
            )
        ]
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_a_repeated_event_is_one_line_with_a_count_pushed_and_stored(jp_fetch, jp_ws_fetch, jp_serverapp):
    # Given a running cluster and a client of the push stream
    cluster_id = await create(jp_fetch)
    stream = await StreamClient.connect(jp_ws_fetch)
    try:
        await wait_for(jp_fetch, cluster_id, running_with(1))

        # When the same change is made three times
        for _ in range(3):
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"idle_timeout": 600}, expect=200)

        # Then History has it once, with a count of 3
        events = await events_of(jp_fetch, cluster_id)
        repeated = [e for e in events if e["message"] == "idle timeout set to 600 s"]
        assert len(repeated) == 1 and repeated[0]["count"] == 3 and events[-1] == repeated[0]

        # And the stream sent the counted event as it rose, ending at 3
        def counted(message) -> bool:
            return message.get("cluster", {}).get("id") == cluster_id and any(
                e["message"] == "idle timeout set to 600 s" and e.get("count") == 3 for e in message.get("events", [])
            )

        await stream.wait_for(counted, "the event counted 3 times")
        # And the store keeps it as one event with its count
        manager = jp_serverapp.web_app.settings["clustermgr_manager"]

        def stored():
            (record,) = [r for r in manager.store.load() if r["id"] == cluster_id]
            return [e for e in record["events"] if e["message"] == "idle timeout set to 600 s"]

        await until(lambda: stored() == repeated, 10, "the store holding the counted event")
    finally:
        stream.close()
        await delete_and_wait(jp_fetch, cluster_id)


def test_a_counted_event_replaces_its_stored_row_and_is_sent_again(tmp_path):
    # Given an event log and a store that has written its events so far
    log, store = EventLog(), ClusterStore(tmp_path / "clusters.sqlite3")
    record = stored_cluster("c1", tmp_path, {})
    log.lifecycle("started")
    log.note("default", "cannot shrink yet", source="adaptive")
    store.save(record, [e.to_dict() for e in log.since(0)])
    written = log.appended
    # When the last note repeats twice
    log.note("default", "cannot shrink yet", source="adaptive")
    log.note("default", "cannot shrink yet", source="adaptive")
    # Then only that note is new since the store's mark, counted 3 times, and the earlier event is not resent
    changed = log.since(written)
    assert [(e.message, e.count) for e in changed] == [("cannot shrink yet", 3)]
    # And once saved, the store has two events, the second counted 3 times
    store.save(record, [e.to_dict() for e in changed])
    (loaded,) = store.load()
    assert [(e["message"], e.get("count", 1)) for e in loaded["events"]] == [("started", 1), ("cannot shrink yet", 3)]
    store.close()


async def test_only_what_a_user_must_act_on_is_a_warning(jp_fetch):
    # Given an address where nothing listens
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    # When a cluster is attached there
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"attach": address}, expect=202)
    try:
        failed = await wait_for(jp_fetch, cluster["id"], lambda c: c["status"] == "failed", what="the attach to fail")
        # Then History's line for the failure is a warning, and the lines before it are not
        events = await events_of(jp_fetch, cluster["id"])
        assert events[-1]["message"] == failed["error"] and events[-1]["level"] == "warning"
        assert all("level" not in e for e in events[:-1]), events
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster["id"])
        await asyncio.sleep(0)


async def test_a_recomputation_after_a_killed_worker_is_linked_to_the_kill(jp_fetch):
    # Given a cluster of two workers, and a client holding results computed on both
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 2}]})
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers")
        async with cluster_client(cluster, asynchronous=True) as client:
            futures = client.map(lambda i: i * 2, range(20), pure=False)
            await client.gather(futures)
            held = {w for workers in (await client.who_has(futures)).values() for w in workers}
            assert len(held) == 2
            # When one worker's processes are killed
            _, body = await call(jp_fetch, "GET", "clusters", cluster_id, "workers", expect=200)
            victim = next(w for w in body["workers"] if w["state"] == "running")
            os.killpg(victim["pid"], signal.SIGKILL)

            # Then History's line for its departure says which of its computed tasks are recomputed elsewhere
            async def departure():
                events = await events_of(jp_fetch, cluster_id)
                return next((e for e in events if e.get("cause", {}).get("worker") == victim["name"]), None)

            event = await until(departure, 30, "the killed worker's departure event")
            assert re.search(r"; \d+ tasks? it had computed (is|are) recomputed elsewhere$", event["message"]), event
            # And the results are all still there, recomputed
            assert await client.gather(futures) == [i * 2 for i in range(20)]
    finally:
        await delete_and_wait(jp_fetch, cluster_id)
