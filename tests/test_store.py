"""Given the embedded cluster store, what is written survives a killed writer, stays bounded, and has one owner."""

import signal
import subprocess
import sys
import time

import pytest

from clustermgr_lab.manager.store import MAX_EVENTS_PER_CLUSTER, ClusterStore, StoreLocked

from .helpers import REPO, subprocess_env
from .test_orphans import stored_cluster

WRITER = """
import sys
from pathlib import Path
from clustermgr_lab.manager.store import ClusterStore
from tests.test_orphans import stored_cluster

store = ClusterStore(sys.argv[1])
n = 0
while True:  # write until killed
    n += 1
    record = stored_cluster(f"c{n % 50}", Path("/tmp"), {"default-1": {"pid": n, "create_time": 1.0}})
    store.save(record, [{"message": f"event {n}"}])
    if n == 1:
        print("ready", flush=True)  # one save committed: whenever it is killed, there is something to read
"""


def test_a_writer_killed_mid_write_leaves_a_readable_store(tmp_path):
    # Given a process writing clusters and events to a store as fast as it can
    path = tmp_path / "clusters.sqlite3"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, cwd=str(REPO), env=subprocess_env()
    )
    assert writer.stdout.readline().strip() == b"ready"
    time.sleep(1.0)
    # When it is killed with SIGKILL in the middle of its writes
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    # Then the next opener reads every cluster it had committed, and nothing is moved aside
    store = ClusterStore(path)
    try:
        assert store.moved_aside is None
        clusters = store.load()
        assert 0 < len(clusters) <= 50
        assert all(len(c["workers"]) == 1 and c["events"] for c in clusters)
    finally:
        store.close()


def test_events_are_bounded_and_the_store_has_one_owner(tmp_path):
    # Given a store with one cluster
    store = ClusterStore(tmp_path / "clusters.sqlite3")
    record = stored_cluster("c1", tmp_path, {"default-1": {"pid": 1, "create_time": 1.0}})
    # When more events than the bound are written, in several saves
    for start in range(0, MAX_EVENTS_PER_CLUSTER + 50, 50):
        store.save(record, [{"message": f"event {n}"} for n in range(start, start + 50)])
    # Then only the newest are kept, oldest first
    (loaded,) = store.load()
    assert len(loaded["events"]) == MAX_EVENTS_PER_CLUSTER
    assert loaded["events"][0] == {"message": "event 50"} and loaded["events"][-1] == {
        "message": f"event {MAX_EVENTS_PER_CLUSTER + 49}"
    }
    # And the record reads back as written
    assert loaded["workers"] == record["workers"] and loaded["spec"] == record["spec"]

    # When a second store is opened on the same file, then it is refused, naming the holder
    with pytest.raises(StoreLocked, match=r"in use by another Jupyter server \(pid \d+\)"):
        ClusterStore(tmp_path / "clusters.sqlite3")
    # And once the first is closed, it opens
    store.close()
    ClusterStore(tmp_path / "clusters.sqlite3").close()

    # When the cluster is deleted, then its workers and events go with it
    store = ClusterStore(tmp_path / "clusters.sqlite3")
    store.delete("c1")
    assert store.load() == []
    assert store._db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
    store.close()
