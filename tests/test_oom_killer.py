"""Given a local cluster whose worker process the kernel's OOM killer kills (its own memory cgroup, a small limit),
the departure's cause says "oom-killer", from the kernel log's line that names that process; a neighbour's OOM kill
is never blamed on a worker. Around it: the kernel log's lines (real ones) parsed, and the reconciler's choice
(the kernel log by PID; a cgroup's OOM-kill count only when the kernel log cannot be read) with a fake backend.

The end-to-end test needs to make a memory cgroup (cgroup v1 or v2, root or a delegated subtree) and to read
/dev/kmsg; where the machine cannot, it is skipped with the reason, except under CI, where it fails with it.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path

import pytest

from clustermgr_lab.backends.base import Backend, Capabilities, SchedulerEndpoint
from clustermgr_lab.cluster import departure_watch as departure_module
from clustermgr_lab.cluster.events import EventLog
from clustermgr_lab.cluster.reconciler import Reconciler
from clustermgr_lab.domain.departures import (
    MemoryCgroup,
    dead_worker_pids,
    kernel_oom_kills,
    memory_cgroup,
    oom_kill_of,
    read_kernel_log,
)
from clustermgr_lab.domain.spec import parse_spec

from .helpers import call, cluster_client, create, delete_and_wait, until, wait_for

MiB = 2**20
CGROUP_LIMIT = 200 * MiB
ALLOCATION = 600 * MiB  # well past the cgroup's limit, far below the worker's Dask memory limit

# Records as /dev/kmsg gives them (kernel 6.18, cgroup v1): a worker's OOM kill told in two lines (its process name
# is set by setproctitle: "dask worker [tls://...]", cut to 15 bytes), another process's kill in another cgroup,
# and the machine's own OOM (a neighbour's).
WORKER_KILLED = [
    "6,660,22746550380,-;[  16837]     0 16837   268089    70817    66332     4485         0   696320        0"
    "             0 dask worker [tl",
    "6,661,22746550395,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    "oom_memcg=/process_api/157b/clustermgr-oom-test-0f21af33,task_memcg=/process_api/157b/clustermgr-oom-test-0f21af33,"
    "task=dask worker [tl,pid=16837,uid=0",
    "3,662,22746550423,-;Memory cgroup out of memory: Killed process 16837 (dask worker [tl) total-vm:1072356kB, "
    "anon-rss:265328kB, file-rss:17940kB, shmem-rss:0kB, UID:0 pgtables:680kB oom_score_adj:0",
]
NEIGHBOURS_KILLED = [
    "6,502,22475361513,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    "oom_memcg=/process_api/157b/oomprobe,task_memcg=/process_api/157b/oomprobe,task=python3,pid=11906,uid=0",
    "3,503,22475361532,-;Memory cgroup out of memory: Killed process 11906 (python3) total-vm:221448kB, "
    "anon-rss:211200kB, file-rss:6620kB, shmem-rss:0kB, UID:0 pgtables:468kB oom_score_adj:0",
    "6,710,22790000100,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/user.slice/user-1000.slice/session-2.scope,task=stress,pid=777,uid=1000",
    "3,711,22790000120,-;Out of memory: Killed process 777 (stress) total-vm:8388608kB, anon-rss:8000000kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:16000kB oom_score_adj:0",
]
# Kernels before 5.0: "Kill process ... or sacrifice child", then "Killed process ..." (no oom-kill: line).
OLD_KERNEL = [
    "3,90,1000000,-;Memory cgroup out of memory: Kill process 4242 (python) score 1000 or sacrifice child",
    "3,91,1000200,-;Killed process 4242 (python) total-vm:2097152kB, anon-rss:1048576kB, file-rss:0kB, shmem-rss:0kB",
]


def test_the_kernel_logs_oom_kills_are_read_per_process_and_never_blamed_on_a_neighbour():
    # Given the kernel log of a worker's OOM kill among unrelated lines and its neighbours' OOM kills
    records = ["6,1,100,-;Linux version 6.18.44", *NEIGHBOURS_KILLED[:2], *WORKER_KILLED, *NEIGHBOURS_KILLED[2:]]
    # When the kernel log is asked about the worker's process, since the worker connected
    kill = oom_kill_of(records, {16837}, since=22700.0)
    # Then both lines of its kill are merged: which cgroup was full, the process, what it held
    assert (kill.pid, kill.process, kill.memcg) == (
        16837,
        "dask worker [tl",
        "/process_api/157b/clustermgr-oom-test-0f21af33",
    )
    assert kill.describe() == (
        "killed by the kernel's OOM killer (SIGKILL): its memory cgroup /process_api/157b/clustermgr-oom-test-0f21af33 "
        'was at its limit (process 16837 "dask worker [tl", holding 259.11 MiB)'
    )
    # And neighbours' kills are not the worker's, nor is a kill before the worker connected (an earlier holder of its PID)
    assert oom_kill_of(records, {16838, 4242}, since=0) is None
    assert oom_kill_of(records, {11906}, since=22700.0) is None
    assert oom_kill_of(records, {16837}, since=22900.0) is None
    # When the machine itself ran out of memory, the detail says so
    assert kernel_oom_kills(records)[777].describe() == (
        'killed by the kernel\'s OOM killer (SIGKILL): the machine was out of memory (process 777 "stress", holding 7.63 GiB)'
    )
    # And an older kernel's two lines tell the same
    assert oom_kill_of(OLD_KERNEL, {4242}, since=0).describe() == (
        'killed by the kernel\'s OOM killer (SIGKILL): its memory cgroup was at its limit (process 4242 "python", holding 1.00 GiB)'
    )
    # And a kernel log that cannot be read is "unknown" (None), not "no kill"
    assert read_kernel_log("/nonexistent/kmsg") is None


def test_the_nanny_names_the_worker_processes_it_saw_die_since_the_worker_started():
    address = "tcp://127.0.0.1:40001"
    text = (
        "distributed.nanny - INFO - Worker process 11 was killed by signal 9\n"
        f"distributed.worker - INFO - Start worker at: {address}\n"
        "distributed.nanny - INFO - Worker process 12 was killed by signal 9\n"
    )
    assert dead_worker_pids(text, address) == {12}


def test_a_memory_cgroups_oom_kill_count_is_read_from_v1_and_v2_files(tmp_path):
    # Given the files as cgroup v1 (memory.oom_control) and v2 (memory.events) write them
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
    # Then each count is read; a cgroup without the file counts nothing (None), not zero
    assert MemoryCgroup(1, tmp_path / "v1").oom_kills() == 3
    assert MemoryCgroup(2, tmp_path / "v2").oom_kills() == 2
    assert MemoryCgroup(2, tmp_path / "none").oom_kills() is None


class NannyBackend(Backend):
    """A backend of one worker, ``default-1``, run here by process 4242, whose nanny logged the death of its worker
    process 4243; starts nothing (the reconciler's side of a departure, without processes)."""

    name = "nanny-fake"
    departure_grace = 0.0

    async def start_scheduler(self):
        return SchedulerEndpoint("tcp://fake:1", None)

    async def scale_up(self, group, names):
        pass

    async def scale_down(self, names):
        pass

    async def close(self):
        pass

    def pids(self):
        return {"default-1": 4242}

    def worker_log(self, name):
        log = self.workdir / f"{name}.log"
        log.write_text(
            "distributed.worker - INFO - Start worker at: tcp://w/1\n"
            "distributed.nanny - INFO - Worker process 4243 was killed by signal 9\n"
        )
        return log


def kill_record(pid: int, seq: int) -> list[str]:
    """The kernel's two lines of an OOM kill of ``pid`` in cgroup /jobs/7, stamped now (the kernel's clock)."""
    usec = int(time.monotonic() * 1e6)
    return [
        f"6,{seq},{usec},-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
        f"oom_memcg=/jobs/7,task_memcg=/jobs/7,task=dask worker [tc,pid={pid},uid=1000",
        f"3,{seq + 1},{usec + 20},-;Memory cgroup out of memory: Killed process {pid} (dask worker [tc) "
        "total-vm:2097152kB, anon-rss:1048576kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:680kB oom_score_adj:0",
    ]


@pytest.mark.parametrize(
    ("kernel_log", "count_rises", "here", "kind", "said"),
    [
        ("worker", False, True, "oom-killer", "its memory cgroup /jobs/7 was at its limit (process 4243 "),
        ("neighbour", True, True, "signal", "killed by signal 9 (SIGKILL)"),
        ("unreadable", True, True, "oom-killer", "as the OOM-kill count of this server's memory cgroup rose"),
        ("unreadable", False, True, "signal", "killed by signal 9 (SIGKILL)"),
        ("worker", True, False, "signal", "killed by signal 9 (SIGKILL)"),
    ],
    ids=["its-pid-in-kernel-log", "neighbours-kill", "no-kernel-log-count-rose", "no-kernel-log-no-rise", "remote"],
)
async def test_a_sigkilled_worker_is_the_oom_killers_only_on_evidence_of_its_own_process(
    tmp_path, monkeypatch, kernel_log, count_rises, here, kind, said
):
    # Given a connected worker whose nanny then logs its worker process's death by SIGKILL, and a kernel log that
    # names that process, or only a neighbour, or cannot be read; and the server's cgroup OOM-kill count
    counts = iter([5, 6 if count_rises else 5])
    monkeypatch.setattr(departure_module, "oom_kills", lambda: next(counts))
    backend = NannyBackend("c1", tmp_path)
    if not here:  # a worker on another host: this kernel's log and cgroup are not its
        monkeypatch.setattr(backend, "capabilities", Capabilities(runs_processes_here=False))
    reconciler = Reconciler(
        "c1", parse_spec({"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "4 GiB"}]}), backend,
        EventLog(), link=lambda: None, is_running=lambda: True, on_change=lambda: None, on_error=lambda _: None,
    )  # fmt: skip
    await reconciler.reconcile()
    reconciler.worker_added("tcp://w/1", {"name": "default-1", "memory_limit": 4 * 2**30})
    records = {
        "worker": ["6,1,1,-;an old line", *kill_record(999, 2), *kill_record(4243, 4)],
        "neighbour": kill_record(999, 2),
        "unreadable": None,
    }[kernel_log]
    monkeypatch.setattr(departure_module, "read_kernel_log", lambda: records)
    # When the scheduler loses it
    reconciler.worker_removed("tcp://w/1")
    # Then its departure's cause is the OOM killer only on evidence of its own process
    event = await until(lambda: reconciler.events.last_departure, 10, "a departure")
    assert (event.cause["kind"], event.cause["worker"]) == (kind, "default-1")
    assert said in event.cause["detail"], event.cause["detail"]
    assert event.message == f"worker default-1 went away: {event.cause['detail']}; its nanny restarts it"


class CannotLimitMemory(Exception):
    """This machine (or this user) cannot make a memory cgroup: the reason."""


@asynccontextmanager
async def memory_limited(pid: int, limit: int):
    """Move process ``pid`` into a fresh memory cgroup (v1 or v2, as the machine has) of ``limit`` bytes, swap
    included; yield it as a :class:`MemoryCgroup`. On the way out, what is left in it goes back and it is removed.

    v1: a child of the process's own memory cgroup (so whatever limits it had still hold). v2: a sibling of it
    (a v2 cgroup that has processes cannot enable controllers for its children).
    """
    home = memory_cgroup(pid)
    if home is None:
        raise CannotLimitMemory(f"no memory cgroup (v1 memory controller or v2 memory.events) is readable for {pid}")
    name = f"clustermgr-oom-test-{uuid.uuid4().hex[:8]}"
    made = MemoryCgroup(home.version, (home.path if home.version == 1 else home.path.parent) / name)
    try:
        made.path.mkdir()
    except OSError as exc:
        raise CannotLimitMemory(f"cannot make memory cgroup {made.path}: {exc}") from exc
    try:
        try:
            if made.version == 1:
                (made.path / "memory.limit_in_bytes").write_text(str(limit))
                if (made.path / "memory.memsw.limit_in_bytes").exists():  # else swap could take the excess
                    (made.path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            else:
                (made.path / "memory.max").write_text(str(limit))
                if (made.path / "memory.swap.max").exists():
                    (made.path / "memory.swap.max").write_text("0")
            (made.path / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            raise CannotLimitMemory(f"cannot limit memory cgroup {made.path} or move {pid} into it: {exc}") from exc
        yield made
    finally:
        await remove_cgroup(made.path, home.path)


async def remove_cgroup(path: Path, home: Path, timeout: float = 30) -> None:
    """Move what is still in cgroup ``path`` back to ``home`` and remove it (a killed process may take a moment to go)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            for pid in (path / "cgroup.procs").read_text().split():
                with suppress(ProcessLookupError):  # gone meanwhile
                    (home / "cgroup.procs").write_text(pid)
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


def cannot_run(reason: str):
    message = f"the OOM killer cannot be made to act here: {reason}"
    if os.environ.get("CI"):
        pytest.fail(message)  # CI machines must be able to run it
    pytest.skip(message)


def allocate(size: int) -> int:
    block = b"x" * size  # written, so resident (charged to the cgroup)
    return len(block)


async def oom_departures(jp_fetch, cluster_id: str) -> list[dict]:
    _, body = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    return [e for e in body["events"] if (e.get("cause") or {}).get("kind") == "oom-killer"]


async def test_a_worker_the_kernels_oom_killer_kills_is_said_to_be_so_and_is_replaced(jp_fetch):
    if read_kernel_log() is None:
        cannot_run("the kernel log /dev/kmsg cannot be read (it needs root or kernel.dmesg_restrict = 0)")
    # Given a cluster of one worker whose Dask memory limit is far above what it will use (its nanny does not act)
    spec = {"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "4 GiB"}]}
    cluster_id = await create(jp_fetch, spec=spec)
    try:
        cluster = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 1, 120, "1 worker")
        async with cluster_client(cluster, asynchronous=True) as client:
            ((_, pid),) = (await client.run(os.getpid)).items()
            name = Path(f"/proc/{pid}/comm").read_text().strip()  # as the kernel will name it
            async with AsyncExitStack() as stack:
                # When its worker process is moved into a memory cgroup of 200 MiB, and a task allocates 600 MiB
                try:
                    cgroup = await stack.enter_async_context(memory_limited(pid, CGROUP_LIMIT))
                except CannotLimitMemory as exc:
                    cannot_run(str(exc))
                task = client.submit(allocate, ALLOCATION, pure=False)
                # Then the kernel kills it, and the departure's cause says it was the OOM killer, naming the process
                (event,) = await until(lambda: oom_departures(jp_fetch, cluster_id), 120, "an oom-killer departure")
                assert cgroup.oom_kills() == 1  # the kernel's own count agrees
            cause, detail = event["cause"], event["cause"]["detail"]
            assert (cause["worker"], cause["group"]) == ("default-1", "default")
            assert detail.startswith("killed by the kernel's OOM killer (SIGKILL): its memory cgroup /"), detail
            assert f'/{cgroup.path.name} was at its limit (process {pid} "{name}", holding ' in detail, detail
            assert event["message"] == f"worker default-1 went away: {detail}; its nanny restarts it"
            # And the cluster replaces the worker process: the task runs again on the new one and completes
            assert await asyncio.wait_for(task, 120) == ALLOCATION
            ((_, new_pid),) = (await client.run(os.getpid)).items()
            assert new_pid != pid
        # And the card's last departure is this one
        shown = await wait_for(jp_fetch, cluster_id, lambda c: c["workers"]["running"] == 1, 60, "1 worker again")
        assert shown["last_departure"]["cause"] == cause
    finally:
        await delete_and_wait(jp_fetch, cluster_id, 60)
