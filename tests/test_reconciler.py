"""The reconciler on its own: a fake backend and a fake scheduler link, no processes."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from clustermgr_lab.backends.base import Backend, SchedulerEndpoint
from clustermgr_lab.cluster import reconciler as reconciler_module
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

    async def retire_workers(self, addresses: list[str], close: bool = False) -> list[str]:
        self.calls.append(("retire", sorted(addresses)))
        retired = [a for a in addresses if a not in self.holding]
        if close:  # the workers close when told to: their processes end (addresses are tcp://w/<name>)
            for address in retired:
                asyncio.get_running_loop().call_soon(self.exited, address.rsplit("/", 1)[-1], 0)
        return retired


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
    link.exited = reconciler.worker_exited
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
    await reconciler.settled()
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
    await reconciler.settled()
    # Then the worker holding data is kept and the plan raised back to it
    assert sorted(reconciler.workers) == ["default-1"]
    assert reconciler.spec.group("default").count == 1
    assert ("down", ["default-2"]) in backend.calls


async def test_the_next_decision_does_not_wait_for_retired_workers_to_exit(tmp_path, monkeypatch):
    # Given three connected workers whose processes take long to exit once the scheduler retired them
    monkeypatch.setattr(reconciler_module, "RETIRED_EXIT_SECONDS", 3.0)  # longer than a decision may take below
    reconciler, backend, link, _ = make(tmp_path, count=3)
    await reconciler.reconcile()
    connect_all(reconciler)
    link.exited = lambda name, code: None  # told to close, still running
    backend.calls.clear()
    # When adaptive mode shrinks to two, and then at once to one
    reconciler.set_plan("default", 2, "idle", source="adaptive")
    await asyncio.wait_for(reconciler.reconcile(), 1.5)
    reconciler.set_plan("default", 1, "idle", source="adaptive")
    await asyncio.wait_for(reconciler.reconcile(), 1.5)
    # Then both workers were retired before either had exited, and are stopping, not live
    assert [c for c in backend.calls if c[0] == "retire"] == [
        ("retire", ["tcp://w/default-1"]),
        ("retire", ["tcp://w/default-2"]),
    ]
    assert not [c for c in backend.calls if c[0] == "down"]
    assert reconciler.worker_counts()["stopping"] == 2
    # And the backend stops them once their time to exit is up
    await reconciler.settled()
    assert sorted(c for c in backend.calls if c[0] == "down") == [("down", ["default-1"]), ("down", ["default-2"])]
    assert sorted(reconciler.workers) == ["default-3"]


async def test_stopping_the_loop_leaves_no_stop_behind(tmp_path, monkeypatch):
    # Given a retired worker that has not exited yet
    monkeypatch.setattr(reconciler_module, "RETIRED_EXIT_SECONDS", 60)
    reconciler, backend, link, _ = make(tmp_path, count=2)
    await reconciler.reconcile()
    connect_all(reconciler)
    link.exited = lambda name, code: None
    reconciler.set_plan("default", 1, "idle", source="adaptive")
    await reconciler.reconcile()
    assert reconciler.worker_counts()["stopping"] == 1
    # When the reconciler stops (the cluster's teardown closes the backend next)
    await asyncio.wait_for(reconciler.stop(), 5)
    # Then no task of it is left waiting
    assert not reconciler._stopping
    await reconciler.settled()


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


#: The plan and what is recorded with it: attributes only ``Reconciler._write_plan`` (and ``__init__``) may write.
PLAN_STATE = {"_spec", "plan_source", "plan_reason"}
PLAN_WRITERS = {("Reconciler", "__init__"), ("Reconciler", "_write_plan")}
MUTATORS = {"update", "pop", "clear", "setdefault", "popitem", "__setitem__", "__delitem__"}


def plan_writes(source: str, path: str) -> list[str]:
    """Every place in ``source`` that assigns or mutates the plan outside its one writer, as ``path:line``."""
    tree = ast.parse(source)
    found = []

    def visit(node: ast.AST, where: tuple[str | None, str | None]) -> None:
        if isinstance(node, ast.ClassDef):
            where = (node.name, None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = (where[0], node.name)
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and name.value in PLAN_STATE:
                found.append(f"{path}:{node.lineno}")
        for target in targets:
            while isinstance(target, ast.Subscript):  # plan_source[group] = ...
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr in PLAN_STATE and where not in PLAN_WRITERS:
                found.append(f"{path}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, (None, None))
    return found


def test_the_plan_has_one_writer_that_records_source_and_reason():
    # Given every module of the package
    package = Path(__file__).resolve().parents[1] / "clustermgr_lab"
    sources = [p for p in package.rglob("*.py") if "labextension" not in p.parts]
    # Then nothing but Reconciler._write_plan assigns the plan, its sources or its reasons
    writes = [w for p in sources for w in plan_writes(p.read_text(), str(p.relative_to(package.parent)))]
    assert writes == []


@pytest.mark.parametrize(
    "offence",
    [
        "class ManagedCluster:\n    def scale(self):\n        self.reconciler._spec = None",
        "class Reconciler:\n    def set_plan(self, group):\n        self._spec = self._spec.with_count(group, 1)",
        "def restore(cluster):\n    cluster.reconciler.plan_source['default'] = 'adaptive'",
        "def restore(cluster):\n    cluster.reconciler.plan_source.update({'default': 'adaptive'})",
        "def f(r):\n    setattr(r, '_spec', None)",
    ],
)
def test_a_write_of_the_plan_elsewhere_is_found(offence):
    # Given code that writes the plan outside its one writer
    # Then the check above finds it (it can fail)
    assert plan_writes(offence, "offence.py") == [f"offence.py:{offence.count(chr(10)) + 1}"]


def test_each_plan_change_records_its_source_and_reason(tmp_path):
    # Given a reconciler
    reconciler, _, _, _ = make(tmp_path)
    # When a person scales a group
    reconciler.set_plan("default", 3, "manual scale", source="manual")
    # Then the plan, its source and its reason say so, and a scale event was logged
    assert reconciler.spec.group("default").count == 3
    assert (reconciler.plan_source["default"], reconciler.plan_reason["default"]) == ("manual", "manual scale")
    assert [(e.kind, e.source, e.after) for e in reconciler.events][-1] == ("scale", "manual", 3)
    # And the plan cannot be assigned from outside
    with pytest.raises(AttributeError):
        reconciler.spec = reconciler.spec.with_count("default", 5)
