"""Given real scheduler and worker processes, scaling by workers, cores and memory does what it says."""

import asyncio

from .helpers import SMALL, call, cluster_client, create, delete_and_wait, running_with, until, wait_for

MiB = 2**20


def launched(jp_serverapp, cluster_id, group="default"):
    """How many worker processes the backend was ever asked to start (one log file each)."""
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    return len(list(manager.get(cluster_id).backend.workdir.glob(f"{group}-*.log")))


async def test_scale_by_memory_and_by_cores_round_up_to_whole_workers(jp_fetch):
    # Given a cluster of 256 MiB, 1-thread workers
    cluster_id = await create(jp_fetch)
    await wait_for(jp_fetch, cluster_id, running_with(1))
    try:
        # When it is scaled to 1 GiB of memory
        _, answer = await call(
            jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"memory": "1GiB"}}, expect=200
        )
        # Then that resolves to 4 workers and says so
        assert answer["resolved"] == {"group": "default", "workers": 4, "cores": 4, "memory": 1024 * MiB, "gpus": 0}
        cluster = await wait_for(jp_fetch, cluster_id, running_with(4), what="4 workers")
        assert cluster["resources"] == {"cores": 4, "memory": 1024 * MiB, "gpus": 0}

        # When it is scaled to 2 cores (a byte count works as well as a size string)
        _, answer = await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"cores": 2}}, expect=200)
        assert answer["resolved"]["workers"] == 2
        cluster = await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers")
        assert cluster["resources"]["cores"] == 2

        # And 300 MiB rounds up to 2 whole workers
        _, answer = await call(
            jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"memory": 300 * MiB}}, expect=200
        )
        assert answer["resolved"]["workers"] == 2
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_scale_down_keeps_data_that_a_client_holds(jp_fetch):
    # Given a cluster of 3 workers and a client holding results spread over them
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 3}]})
    cluster = await wait_for(jp_fetch, cluster_id, running_with(3))
    try:
        async with cluster_client(cluster, asynchronous=True) as client:
            futures = client.map(lambda i: bytes(1000) * i, range(30), pure=False)
            await client.gather(futures)
            who_has = await client.who_has(futures)
            assert len({w for workers in who_has.values() for w in workers}) == 3

            # When it is scaled down to one worker
            await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}}, expect=200)
            await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker")

            # Then every result is still there
            results = await client.gather(futures)
            assert [len(r) for r in results] == [1000 * i for i in range(30)]
            # And the events say why workers went
            _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
            decisions = [e for e in events["events"] if e["kind"] == "scale"]
            assert decisions[-1]["before"] == 3 and decisions[-1]["after"] == 1
            assert decisions[-1]["message"] == "manual scale" and decisions[-1]["asked"] == "1 worker"
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_two_groups_show_up_with_their_shapes_in_the_scheduler(jp_fetch):
    # Given a spec with a small group and a bigger GPU group
    spec = {
        "groups": [
            {"name": "small", "count": 2, "threads": 1, "memory": "256 MiB"},
            {"name": "gpu", "count": 1, "threads": 2, "memory": "512 MiB", "gpus": 1, "resources": {"fast": 1}},
        ]
    }
    cluster_id = await create(jp_fetch, spec=spec)
    try:
        cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 3, what="3 workers")
        # Then the cluster's totals add the groups up
        assert cluster["resources"] == {"cores": 4, "memory": 1024 * MiB, "gpus": 1}
        assert {g["name"]: g["running"] for g in cluster["workers"]["groups"]} == {"small": 2, "gpu": 1}
        # And the scheduler sees each worker with its group's shape
        async with cluster_client(cluster, asynchronous=True) as client:
            workers = (await client.scheduler.identity(n_workers=-1))["workers"].values()
            shapes = sorted(
                (w["name"].rsplit("-", 1)[0], w["nthreads"], w["memory_limit"], w["resources"]) for w in workers
            )
            assert shapes == [
                ("gpu", 2, 512 * MiB, {"GPU": 1, "fast": 1}),
                ("small", 1, 256 * MiB, {}),
                ("small", 1, 256 * MiB, {}),
            ]
            # And the GPU worker was started with CUDA_VISIBLE_DEVICES set, and the others see no GPU at all
            env = await client.run(lambda: __import__("os").environ.get("CUDA_VISIBLE_DEVICES"))
            assert sorted(map(str, env.values())) == ["", "", "0"]
        # And scaling a cluster of several groups needs a group name
        status, error = await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}})
        assert status == 400 and error["field"] == "scale.group"
        _, answer = await call(
            jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"cores": 4, "group": "gpu"}}, expect=200
        )
        assert answer["resolved"] == {"group": "gpu", "workers": 2, "cores": 4, "memory": 1024 * MiB, "gpus": 2}
        await wait_for(jp_fetch, cluster_id, running_with(2, group="gpu"), what="2 GPU workers")
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_concurrent_scale_calls_do_not_overshoot(jp_fetch, jp_serverapp):
    # Given a running cluster of one worker
    cluster_id = await create(jp_fetch)
    await wait_for(jp_fetch, cluster_id, running_with(1))
    try:
        # When five identical scale calls arrive at once
        calls = [call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 3}}) for _ in range(5)]
        answers = await asyncio.gather(*calls)
        assert {status for status, _ in answers} == {200}
        # Then exactly two more workers are started, not ten
        await wait_for(jp_fetch, cluster_id, running_with(3), what="3 workers")
        assert launched(jp_serverapp, cluster_id) == 3

        # When calls that go up and down race, whichever is handled last is the plan, and the
        # cluster settles on exactly that
        calls = [call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": n}}) for n in (4, 2, 4, 4)]
        await asyncio.gather(*calls)
        _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
        plan = cluster["spec"]["groups"][0]["count"]
        assert plan in (2, 4)
        await wait_for(jp_fetch, cluster_id, running_with(plan), what=f"{plan} workers")
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_a_worker_that_dies_is_replaced(jp_fetch, jp_serverapp):
    # Given a cluster of 2 workers
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 2}]})
    await wait_for(jp_fetch, cluster_id, running_with(2))
    try:
        # When one worker's process group is killed from outside
        import os
        import signal

        manager = jp_serverapp.web_app.settings["clustermgr_manager"]
        pids = manager.get(cluster_id).pids()
        victim = next(name for name in pids if name != "scheduler")
        os.killpg(pids[victim], signal.SIGKILL)

        # Then the cluster notices, says why, and gets back to 2 workers
        async def noticed():
            _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events")
            return any(victim in e["message"] and "replacing" in e["message"] for e in events["events"])

        await until(noticed, 60, "the death of a worker to be noticed", step=0.2)
        await wait_for(jp_fetch, cluster_id, running_with(2), what="2 workers again")
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_a_worker_that_cannot_start_is_not_restarted_in_a_loop(jp_fetch, jp_serverapp):
    # Given a running cluster
    cluster_id = await create(jp_fetch, spec={"groups": [{**SMALL, "count": 1}]})
    await wait_for(jp_fetch, cluster_id, running_with(1))
    backend = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).backend
    try:
        # When the next worker cannot reach its scheduler, so that its process gives up and exits
        backend.address, backend.worker_death_timeout = "tcp://127.0.0.1:1", 1
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)
        # Then the cluster says why and settles back on the plan it can keep, without a restart loop
        settled = await wait_for(
            jp_fetch,
            cluster_id,
            lambda c: c["error"] and c["spec"]["groups"][0]["count"] == 1,
            what="the failure noted",
        )
        assert "before it connected" in settled["error"]
        assert settled["last_decision"]["message"].startswith("not replacing default-")
        await asyncio.sleep(2)
        assert launched(jp_serverapp, cluster_id) == 2
    finally:
        await delete_and_wait(jp_fetch, cluster_id)


async def test_workers_see_only_their_own_gpus_of_those_the_server_was_given(jp_fetch, monkeypatch):
    # Given a server that was given GPUs 2 and 3 of its machine (its own CUDA_VISIBLE_DEVICES)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    # And a cluster with a group without GPUs and a group of one GPU per worker
    spec = {
        "groups": [
            {"name": "cpu", "count": 1, "threads": 1, "memory": "256 MiB", "gpus": 0},
            {"name": "gpu", "count": 2, "threads": 1, "memory": "256 MiB", "gpus": 1},
        ]
    }
    cluster_id = await create(jp_fetch, spec=spec)
    try:
        # When its workers run
        cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 3, what="3 workers")
        async with cluster_client(cluster, asynchronous=True) as client:
            seen = await client.run(
                lambda dask_worker: (dask_worker.name, __import__("os").environ.get("CUDA_VISIBLE_DEVICES"))
            )
        # Then the worker without GPUs sees none, and each GPU worker exactly one of the server's, not the same
        by_group = sorted((name.rsplit("-", 1)[0], devices) for name, devices in seen.values())
        assert by_group == [("cpu", ""), ("gpu", "2"), ("gpu", "3")], by_group
    finally:
        await delete_and_wait(jp_fetch, cluster_id)
