"""Given a real local cluster of two workers, the workers view lists each with its name, group, address, host,
PID, memory and state, each process's title names its cluster and worker, and a worker stopped by a scale-down
is listed as gone."""

from __future__ import annotations

from clustermgr_lab.backends.base import SCHEDULER_PROCESS

from .helpers import SMALL, alive, call, create, delete_and_wait, running_with, tree, until, wait_for

MiB = 2**20


async def workers_of(jp_fetch, cluster_id: str) -> list[dict]:
    _, answer = await call(jp_fetch, "GET", "clusters", cluster_id, "workers", expect=200)
    return answer["workers"]


def cmdline(pid: int) -> str:
    """A process's title as ``ps`` shows it: its ``/proc/PID/cmdline``, arguments joined by spaces."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().rstrip(b"\0").replace(b"\0", b" ").decode()


async def test_the_workers_view_lists_each_worker_with_its_process_and_memory(jp_fetch, jp_serverapp):
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
            # And its PID is a live process of this host whose tree holds the worker, titled with its cluster's
            # name and its own (as ps and /proc/PID/cmdline show it)
            titles = [cmdline(pid) for pid in tree(worker["pid"])]
            assert f"dask worker keep-me/{worker['name']} [{worker['address']}]" in titles, titles
        assert len({w["pid"] for w in workers}) == 2
        # And the scheduler's process is titled with the cluster's name
        cluster = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id)
        assert cmdline(cluster.pids()[SCHEDULER_PROCESS]) == f"dask scheduler keep-me [{cluster.endpoint.address}]"

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
