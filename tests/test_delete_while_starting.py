"""A cluster deleted while it starts leaves no work folder behind, not even an empty one."""

from __future__ import annotations

import asyncio

from .helpers import call, wait_gone


async def test_a_cluster_deleted_while_it_starts_leaves_no_work_folder(jp_fetch, tmp_path):
    # Given a cluster with workers, just asked for (its scheduler and workers are still starting)
    root = tmp_path / "clustermgr"
    body = {
        "name": "short-lived",
        "spec": {"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "300 MiB"}]},
    }
    _, cluster = await call(jp_fetch, "POST", "clusters", body=body, expect=202)
    cluster_id = cluster["id"]
    # When it is deleted at once
    await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    # Then it leaves the list, and its work folder is gone, and stays gone (nothing made it again afterwards)
    assert await wait_gone(jp_fetch, cluster_id, 60) == 404
    for _ in range(10):
        await asyncio.sleep(0.3)
        left = [p for p in root.rglob("*") if cluster_id in p.name] if root.exists() else []
        assert left == [], [(str(q), sorted(str(x) for x in q.rglob("*"))) for q in left]
