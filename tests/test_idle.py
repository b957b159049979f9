"""Given a real server, a cluster's idle timeout comes from its template or the API, and the scheduler enforces it."""

import pytest

from .helpers import alive, call, running_with, wait_for, wait_gone

NO_WORKERS = {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "256 MiB"}]}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [
        {
            "name": "short-lived",
            "description": "idle 1 hour",
            "backend": "local",
            "spec": NO_WORKERS,
            "idle_timeout": 3600,
        }
    ]
    return jp_server_config


async def test_bad_idle_timeouts_are_refused_with_the_field_named(jp_fetch):
    for bad in (-1, 0, "10 minutes", True, 10**9):
        status, body = await call(jp_fetch, "POST", "clusters", body={"spec": NO_WORKERS, "idle_timeout": bad})
        assert (status, body["code"], body["field"]) == (400, "invalid", "idle_timeout"), bad
    _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listing["clusters"] == []


async def test_a_cluster_shuts_down_after_its_idle_timeout_and_says_why(jp_fetch, jp_serverapp):
    # Given a cluster from a template with an idle timeout of an hour
    _, templates = await call(jp_fetch, "GET", "templates", expect=200)
    assert next(t for t in templates["templates"] if t["name"] == "short-lived")["idle_timeout"] == 3600
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "short-lived"}, expect=202)
    assert cluster["idle_timeout"] == 3600
    cluster_id = cluster["id"]
    await wait_for(jp_fetch, cluster_id, running_with(0), what="the scheduler")
    scheduler_pid = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).pids()["scheduler"]
    status, body = await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"idle_timeout": -5})
    assert (status, body["field"]) == (400, "idle_timeout")

    # When its idle timeout is set to 2 s
    _, changed = await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"idle_timeout": 2}, expect=200)
    assert changed["idle_timeout"] == 2
    # Then the scheduler shuts itself down, and the cluster is stopped, with an event saying why
    stopped = await wait_for(jp_fetch, cluster_id, lambda c: c["status"] == "stopped", timeout=60, what="idle shutdown")
    assert stopped["dashboard_url"] is None
    _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    assert "shut down: idle (no tasks and no client) for 2 s" in events["events"][-1]["message"]
    assert alive([scheduler_pid]) == []
    # And a stopped cluster cannot be scaled, but can be deleted
    status, _ = await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 1}})
    assert status == 409
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    assert await wait_gone(jp_fetch, cluster_id) == 404
