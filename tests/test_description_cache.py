"""Given a real Jupyter server, when a cluster changes in any way, then the list and the cluster's GET say so at once.

The server keeps each cluster's description (and its JSON) until the cluster changes: these tests
fail if a change is missed, by comparing every answer with a description made afresh.
"""

import asyncio
import hashlib
import json

from .helpers import API_PREFIX, SMALL, call, create, running_with, wait_for, wait_gone


def manager_of(jp_serverapp):
    return jp_serverapp.web_app.settings["clustermgr_manager"]


def fresh(manager, cluster_id: str) -> dict:
    """The cluster's description made now, not the one kept."""
    cluster = manager.get(cluster_id)
    return json.loads(json.dumps(cluster.to_dict(manager.base_url, manager.dashboard_keys.segment(cluster_id))))


def differences(answer: dict, expected: dict) -> dict:
    """The fields in which ``answer`` differs from ``expected``: (answered, expected)."""
    return {key: (answer.get(key), value) for key, value in expected.items() if answer.get(key) != value}


async def assert_answers_are_fresh(jp_fetch, manager, cluster_id: str, attempts: int = 20) -> dict:
    """The GET of the list and of the cluster both answer what a description made now says.

    Descriptions are made just before and just after the GETs. The cluster may change on its own
    meanwhile (a worker arriving, its usage with it), then an answer may be either; and when it changed
    more than once in between, the GETs are asked again. A kept description that missed a change made
    before the GETs is neither, however often it is asked.
    """
    for _ in range(attempts):
        before = fresh(manager, cluster_id)
        _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
        _, one = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
        after = fresh(manager, cluster_id)
        (listed,) = [c for c in listing["clusters"] if c["id"] == cluster_id]
        if before == after or all(answer in (before, after) for answer in (listed, one)):
            for answer in (listed, one):
                assert answer in (before, after), f"stale: {differences(answer, after)}"
            return one
        await asyncio.sleep(0.05)  # changed more than once during the GETs: ask again
    raise AssertionError(f"the cluster changed during every one of {attempts} pairs of GETs")


async def test_every_change_is_in_the_next_answer(jp_fetch, jp_serverapp):
    manager = manager_of(jp_serverapp)
    # Given a running cluster of one worker
    cluster_id = await create(jp_fetch, {"groups": [{"count": 1, "threads": 1, "memory": "256 MiB"}]})
    try:
        await wait_for(jp_fetch, cluster_id, running_with(1), what="1 running worker")
        await assert_answers_are_fresh(jp_fetch, manager, cluster_id)

        # When it is renamed, Then the next answers have the new name
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"name": "renamed"}, expect=200)
        assert (await assert_answers_are_fresh(jp_fetch, manager, cluster_id))["name"] == "renamed"

        # When it is scaled, Then the plan shows at once, and the new worker once it runs
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"scale": {"workers": 2}}, expect=200)
        answer = await assert_answers_are_fresh(jp_fetch, manager, cluster_id)
        assert answer["spec"]["groups"][0]["count"] == 2
        await wait_for(jp_fetch, cluster_id, running_with(2), what="2 running workers")
        await assert_answers_are_fresh(jp_fetch, manager, cluster_id)

        # When adaptive mode is set, and its idle timeout, Then both show at once
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"adapt": {"minimum": 2, "maximum": 3}}, expect=200)
        assert (await assert_answers_are_fresh(jp_fetch, manager, cluster_id))["adapt"] is not None
        await call(jp_fetch, "PATCH", "clusters", cluster_id, body={"idle_timeout": 3600}, expect=200)
        assert (await assert_answers_are_fresh(jp_fetch, manager, cluster_id))["idle_timeout"] == 3600

        # And when nothing changed, the kept text is answered again, not made anew
        cluster = manager.get(cluster_id)
        segment = manager.dashboard_keys.segment(cluster_id)
        assert cluster.describe(manager.base_url, segment)[1] is cluster.describe(manager.base_url, segment)[1]
        assert json.loads(manager.list_json()) == {"clusters": manager.list()}
    finally:
        # When it is deleted, Then the answer says stopping, as a fresh description does
        _, stopping = await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        assert stopping["status"] == "stopping"
        assert await wait_gone(jp_fetch, cluster_id) == 404


async def test_the_list_etag_changes_with_the_list(jp_fetch):
    # Given the list as answered, with its ETag
    first = await jp_fetch(*API_PREFIX, "clusters", method="GET")
    etag = first.headers["Etag"]
    assert etag == f'"{hashlib.sha1(first.body).hexdigest()}"'  # the body's hash, as tornado's own ETag

    # When it is asked for again with that ETag, Then nothing changed: 304, no body
    again = await jp_fetch(*API_PREFIX, "clusters", method="GET", headers={"If-None-Match": etag}, raise_error=False)
    assert (again.code, again.body) == (304, b"")

    # When a cluster is created, Then the same question gets the new list, under a new ETag
    cluster_id = await create(jp_fetch, {"groups": [{**SMALL, "count": 0}]})
    try:
        changed = await jp_fetch(*API_PREFIX, "clusters", method="GET", headers={"If-None-Match": etag})
        assert changed.code == 200 and changed.headers["Etag"] != etag
        assert cluster_id in [c["id"] for c in json.loads(changed.body)["clusters"]]
        assert changed.headers["Etag"] == f'"{hashlib.sha1(changed.body).hexdigest()}"'
    finally:
        assert (await call(jp_fetch, "DELETE", "clusters", cluster_id))[0] == 202
        assert await wait_gone(jp_fetch, cluster_id) == 404
