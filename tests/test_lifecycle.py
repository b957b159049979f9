"""Given a real Jupyter server, when clusters are created and deleted, then processes follow."""

from .helpers import alive, call, running_with, tree, wait_for, wait_gone


def cluster_pids(jp_serverapp, cluster_id):
    manager = jp_serverapp.web_app.settings["clustermgr_manager"]
    pids = manager.get(cluster_id).pids()
    return [p for pid in pids.values() for p in tree(pid)]


async def test_create_goes_pending_then_running_and_delete_leaves_no_process(jp_fetch, jp_serverapp):
    # Given a new cluster from the default template
    status, cluster = await call(jp_fetch, "POST", "clusters", body={"name": "first"}, expect=202)
    # Then the answer comes at once, pending
    assert cluster["status"] == "pending"
    assert cluster["name"] == "first"
    cluster_id = cluster["id"]

    # When it has started
    cluster = await wait_for(jp_fetch, cluster_id, running_with(2), what="2 running workers")
    # Then the scheduler listens on loopback and the workers' resources add up
    assert cluster["scheduler_address"].startswith("tls://127.0.0.1:")
    group = cluster["spec"]["groups"][0]
    assert cluster["resources"]["cores"] == 2 * group["threads"]
    assert cluster["resources"]["memory"] == 2 * group["memory"]

    # And the scheduler and workers run in processes of their own
    pids = cluster_pids(jp_serverapp, cluster_id)
    import os

    assert os.getpid() not in pids
    assert len(alive(pids)) >= 3  # scheduler + 2 workers (each a nanny and its worker)

    # And the listing shows it
    _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
    assert [c["id"] for c in listing["clusters"]] == [cluster_id]

    # When it is deleted
    _, stopping = await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    assert stopping["status"] == "stopping"
    # Then it leaves the list and no process of it is left
    assert await wait_gone(jp_fetch, cluster_id) == 404
    assert alive(pids) == []


async def test_unknown_cluster_is_404_with_json(jp_fetch):
    for method in ("GET", "DELETE", "PATCH"):
        status, body = await call(
            jp_fetch, method, "clusters", "nope", body={"name": "x"} if method == "PATCH" else None
        )
        assert status == 404
        assert body["code"] == "not_found" and "nope" in body["message"]


async def test_unauthenticated_requests_are_refused(jp_fetch):
    status, _ = await call_without_token(jp_fetch)
    assert status == 403


async def call_without_token(jp_fetch):
    from tornado.httpclient import HTTPClientError

    try:
        response = await jp_fetch("clustermgr", "api", "clusters", headers={"Authorization": ""})
        return response.code, response.body
    except HTTPClientError as exc:
        return exc.code, None
