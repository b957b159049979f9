"""Given a real local cluster of three workers, an ordinary scale-down to one leaves no warning in the scheduler's log."""

from __future__ import annotations

from .helpers import SMALL, call, create, delete_and_wait, running_with, wait_for


async def scheduler_log(jp_fetch, cluster_id: str) -> str:
    _, chunk = await call(jp_fetch, "GET", "clusters", cluster_id, "logs", "scheduler", expect=200)
    return chunk["text"]


async def test_an_ordinary_scale_down_leaves_no_warning_in_the_scheduler_log(jp_fetch):
    # Given a running cluster of three workers, and its scheduler's log so far
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 3}]})
    try:
        await wait_for(jp_fetch, cluster_id, running_with(3), what="3 workers")
        before = len((await scheduler_log(jp_fetch, cluster_id)).splitlines())

        # When it is scaled down to one worker
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
        await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker")

        # Then the scheduler logged the two workers' retirement, and no warning or error
        lines = (await scheduler_log(jp_fetch, cluster_id)).splitlines()[before:]
        assert sum("Remove worker" in line for line in lines) == 2, lines
        noisy = [line for line in lines if " - WARNING - " in line or " - ERROR - " in line]
        assert noisy == [], "\n".join(lines)
        # And the two retired workers closed when the scheduler told them to, before any signal
        _, logs = await call(jp_fetch, "GET", "clusters", cluster_id, "logs", expect=200)
        gone = [entry["name"] for entry in logs["logs"] if entry["state"] == "gone"]
        assert len(gone) == 2, logs
        for name in gone:
            _, chunk = await call(jp_fetch, "GET", "clusters", cluster_id, "logs", name, expect=200)
            assert "signal" not in chunk["text"].lower(), chunk["text"]
    finally:
        await delete_and_wait(jp_fetch, cluster_id)
