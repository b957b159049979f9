"""Given a real server, then an idle timeout too short to use the cluster (1e-300, 0.5 s) is refused with the field
named, on create and on change, and a running cluster keeps its timeout and keeps running."""

import pytest

from .helpers import call, wait_for

NO_WORKERS = {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "256 MiB"}]}


@pytest.mark.parametrize("too_short", [1e-300, 0.5, 5e-324])
async def test_an_idle_timeout_below_one_second_is_refused(jp_fetch, too_short):
    # When a cluster is created with it, Then 400 naming the field, and no cluster is made
    status, body = await call(jp_fetch, "POST", "clusters", body={"spec": NO_WORKERS, "idle_timeout": too_short})
    assert (status, body["code"], body["field"]) == (400, "invalid", "idle_timeout"), body
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []


async def test_a_running_cluster_refuses_a_tiny_idle_timeout_and_keeps_running(jp_fetch):
    # Given a running cluster with an idle timeout of an hour
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"spec": NO_WORKERS, "idle_timeout": 3600}, expect=202)
    await wait_for(jp_fetch, cluster["id"], lambda c: c["status"] == "running", what="running")
    try:
        # When it is changed to 1e-300 s
        status, body = await call(jp_fetch, "PATCH", "clusters", cluster["id"], body={"idle_timeout": 1e-300})
        # Then 400 naming the field; the cluster keeps its timeout and stays running
        assert (status, body["field"]) == (400, "idle_timeout"), body
        _, after = await call(jp_fetch, "GET", "clusters", cluster["id"], expect=200)
        assert (after["idle_timeout"], after["status"]) == (3600, "running")
        # And the smallest allowed timeout is accepted
        _, changed = await call(jp_fetch, "PATCH", "clusters", cluster["id"], body={"idle_timeout": 1}, expect=200)
        assert changed["idle_timeout"] == 1
    finally:
        await call(jp_fetch, "DELETE", "clusters", cluster["id"])
