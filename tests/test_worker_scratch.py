"""Given a local cluster, each worker spills into a private folder of its own, and the folder goes with the cluster.

(distributed's shared ``dask-scratch-space`` makes every new worker try the lock of every other worker's folder.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from clustermgr_lab.backends.local.scratch import scratch_root

from .helpers import call, cluster_client, delete_and_wait, running_with, wait_for

TWO = {"groups": [{"name": "default", "count": 2, "threads": 1, "memory": "256 MiB"}]}


def _where_it_spills(dask_worker) -> tuple[str, str]:
    return dask_worker.name, dask_worker.local_directory


async def test_each_worker_spills_in_a_private_folder_of_its_own_removed_with_its_cluster(jp_fetch):
    # Given a running cluster of 2 local workers
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"spec": TWO}, expect=202)
    cluster = await wait_for(jp_fetch, cluster["id"], running_with(2), timeout=90, what="2 workers")
    folder = scratch_root() / cluster["id"]
    try:
        # When each worker is asked where it keeps spilled data
        async with cluster_client(cluster, asynchronous=True) as client:
            answers = await client.run(_where_it_spills)
        # Then it is inside its own folder, in the cluster's folder, which only this user may enter
        for name, directory in answers.values():
            assert Path(directory).is_relative_to(folder / name), (name, directory)
        assert sorted(p.name for p in folder.iterdir()) == sorted(name for name, _ in answers.values())
        info = folder.stat()
        assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
        assert stat.S_IMODE(scratch_root().stat().st_mode) == 0o700
    finally:
        await delete_and_wait(jp_fetch, cluster["id"])
    # And deleting the cluster removed its folder
    assert not folder.exists()
