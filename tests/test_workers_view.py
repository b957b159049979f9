"""Given a real local cluster of two workers, the workers view lists each with its name, group, address, host,
PID, memory and state, and a worker stopped by a scale-down is listed as closing, then gone."""

from __future__ import annotations

import psutil

from .helpers import SMALL, alive, call, create, delete_and_wait, running_with, until, wait_for

MiB = 2**20


async def workers_of(jp_fetch, cluster_id: str) -> list[dict]:
    _, answer = await call(jp_fetch, "GET", "clusters", cluster_id, "workers", expect=200)
    return answer["workers"]


async def test_the_workers_view_lists_each_worker_with_its_process_and_memory(jp_fetch):
    # Given a running cluster "keep-me" of two 256 MiB workers
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 2}]}, name="keep-me")
    try:
        await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers")

        # When its workers are listed
        workers = await workers_of(jp_fetch, cluster_id)

        # Then each is there by name, in its group, running, at its scheduler address on this host
        assert [(w["name"], w["group"], w["state"]) for w in workers] == [
            ("default-1", "default", "running"),
            ("default-2", "default", "running"),
        ]
        for worker in workers:
            assert worker["address"].startswith(("tls://127.0.0.1:", "tcp://127.0.0.1:")), worker
            assert worker["host"] == "127.0.0.1"
            assert worker["memory_limit"] == 256 * MiB and worker["threads"] == 1
            # And its memory in use is the real process's (tens of MiB, below its limit)
            assert 10 * MiB < worker["memory"] < 256 * MiB, worker
            # And its PID is a live process of this host whose tree holds the worker
            process = psutil.Process(worker["pid"])
            titles = [" ".join(p.cmdline()) for p in [process, *process.children(recursive=True)]]
            assert any(worker["address"] in title for title in titles), titles
        assert len({w["pid"] for w in workers}) == 2

        # When it is scaled down to one worker
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
        await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker")

        # Then one worker is still running and the other is listed as gone, with where it was
        workers = await workers_of(jp_fetch, cluster_id)
        assert [w["state"] for w in workers] == ["running", "gone"]
        gone = workers[1]
        assert gone["name"] in ("default-1", "default-2") and gone["group"] == "default"
        assert gone["address"] and gone["host"] == "127.0.0.1" and gone["memory"] is None
        # And its process has ended
        await until(lambda: not alive([gone["pid"]]), 15, "the gone worker's process to end")
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_the_workers_of_an_unknown_cluster_are_a_json_404(jp_fetch):
    # When the workers of a cluster that does not exist are asked for
    status, error = await call(jp_fetch, "GET", "clusters", "nope", "workers")
    # Then the answer is a JSON 404 that names it
    assert status == 404 and error["code"] == "not_found" and "nope" in error["message"]
