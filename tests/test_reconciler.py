"""The reconciler on its own: a fake backend and a fake scheduler link, no processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clustermgr_lab.backends.base import Backend, SchedulerEndpoint
from clustermgr_lab.cluster.events import EventLog
from clustermgr_lab.cluster.reconciler import Reconciler
from clustermgr_lab.domain.errors import BackendError
from clustermgr_lab.domain.spec import parse_spec


class FakeBackend(Backend):
    """Records what it is asked; starts nothing. ``refuse`` makes scale_up fail like a batch system refusing jobs."""

    name = "fake"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, list[str]]] = []
        self.running: set[str] = set()
        self.refuse: str | None = None

    async def start_scheduler(self) -> SchedulerEndpoint:
        return SchedulerEndpoint("tcp://fake:1", None)

    async def scale_up(self, group, names):
        self.calls.append(("up", list(names)))
        if self.refuse:
            raise BackendError(self.refuse)
        self.running.update(names)

    async def scale_down(self, names):
        self.calls.append(("down", list(names)))
        self.running.difference_update(names)

    async def close(self):
        self.running.clear()

    def started(self) -> set[str]:
        return set(self.running)


class FakeLink:
    """A scheduler that closes the workers it is offered first, and retires all but those in ``holding``."""

    def __init__(self, calls: list):
        self.calls = calls
        self.holding: set[str] = set()

    async def workers_to_close(self, candidates: list[str], n: int) -> list[str]:
        self.calls.append(("to_close", sorted(candidates), n))
        return sorted(candidates)[:n]

    async def retire_workers(self, addresses: list[str]) -> list[str]:
        self.calls.append(("retire", sorted(addresses)))
        return [a for a in addresses if a not in self.holding]


def make(tmp_path: Path, count: int = 2):
    backend = FakeBackend("c1", tmp_path)
    link = FakeLink(backend.calls)
    errors: list[str | None] = []
    reconciler = Reconciler(
        "c1",
        parse_spec({"groups": [{"name": "default", "count": count, "threads": 1, "memory": "1 GiB"}]}),
        backend,
        EventLog(),
        link=lambda: link,
        is_running=lambda: True,
        on_change=lambda: None,
        on_error=errors.append,
    )
    return reconciler, backend, link, errors


def connect_all(reconciler: Reconciler) -> None:
    """The scheduler reports every requested worker as connected, at ``tcp://w/<name>``."""
    for record in list(reconciler.workers.values()):
        reconciler.worker_added(f"tcp://w/{record.name}", {"name": record.name, "nthreads": 1, "memory_limit": 2**30})


async def test_missing_workers_are_requested_once(tmp_path):
    # Given a plan of two workers and none requested
    reconciler, backend, _, _ = make(tmp_path, count=2)
    # When it reconciles twice
    await reconciler.reconcile()
    await reconciler.reconcile()
    # Then the backend was asked for two named workers, once
    assert backend.calls == [("up", ["default-1", "default-2"])]
    assert reconciler.worker_counts()["requested"] == 2
    assert reconciler.worker_counts()["running"] == 0


async def test_shrinking_asks_the_scheduler_retires_then_stops(tmp_path):
    # Given three connected workers
    reconciler, backend, _, _ = make(tmp_path, count=3)
    await reconciler.reconcile()
    connect_all(reconciler)
    backend.calls.clear()
    # When a person lowers the plan to one
    reconciler.set_plan("default", 1, "manual scale", source="manual")
    await reconciler.reconcile()
    # Then the scheduler chose two, they were retired, and only then stopped
    assert backend.calls == [
        ("to_close", ["tcp://w/default-1", "tcp://w/default-2", "tcp://w/default-3"], 2),
        ("retire", ["tcp://w/default-1", "tcp://w/default-2"]),
        ("down", ["default-1", "default-2"]),
    ]
    assert reconciler.spec.group("default").count == 1
    assert sorted(reconciler.workers) == ["default-3"]


async def test_adaptive_shrink_keeps_a_worker_whose_data_cannot_move(tmp_path):
    # Given two connected workers, one holding data the scheduler cannot move
    reconciler, backend, link, _ = make(tmp_path, count=2)
    await reconciler.reconcile()
    connect_all(reconciler)
    link.holding = {"tcp://w/default-1"}
    # When adaptive mode lowers the plan to zero
    reconciler.set_plan("default", 0, "idle", source="adaptive")
    await reconciler.reconcile()
    # Then the worker holding data is kept and the plan raised back to it
    assert sorted(reconciler.workers) == ["default-1"]
    assert reconciler.spec.group("default").count == 1
    assert ("down", ["default-2"]) in backend.calls


async def test_workers_the_backend_refuses_drop_out_of_the_plan_with_the_reason(tmp_path):
    # Given a backend that refuses jobs
    reconciler, backend, _, errors = make(tmp_path, count=2)
    backend.refuse = "sbatch: invalid partition"
    # When it reconciles
    await reconciler.reconcile()
    # Then the plan drops to what started, the group says why, and the cluster's error is set
    assert reconciler.spec.group("default").count == 0
    assert reconciler.group_errors == {"default": "sbatch: invalid partition"}
    assert errors[-1] == "sbatch: invalid partition"
    assert reconciler.workers == {}


async def test_a_worker_that_exits_before_connecting_is_not_replaced(tmp_path):
    # Given two requested workers, neither connected
    reconciler, backend, _, errors = make(tmp_path, count=2)
    await reconciler.reconcile()
    # When one exits on its own
    reconciler.worker_exited("default-1", 1)
    await reconciler.reconcile()
    # Then it is not replaced: the plan drops by one, with the reason
    assert reconciler.spec.group("default").count == 1
    assert "worker default-1 exited with code 1 before it connected" in errors[-1]
    assert backend.calls == [("up", ["default-1", "default-2"])]


async def test_a_connected_worker_that_exits_is_replaced_by_the_loop(tmp_path):
    # Given a running reconcile loop and two connected workers
    reconciler, backend, _, _ = make(tmp_path, count=2)
    reconciler.start()
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while len(backend.running) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        connect_all(reconciler)
        # When one of them exits
        reconciler.worker_exited("default-1", 0)
        while len(backend.calls) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        # Then a new worker is requested in its place
        assert backend.calls[-1] == ("up", ["default-3"])
        assert reconciler.spec.group("default").count == 2
    finally:
        await reconciler.stop()


def test_the_plan_is_written_only_through_the_reconciler(tmp_path):
    # Given a reconciler
    reconciler, _, _, _ = make(tmp_path)
    # When something tries to assign the plan directly
    # Then it cannot: set_plan and replace_spec are the only writers
    with pytest.raises(AttributeError):
        reconciler.spec = reconciler.spec.with_count("default", 5)
