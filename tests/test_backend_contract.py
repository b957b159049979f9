"""The backend contract without processes: context at construction, capabilities, configuration by traitlets, composition."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

from traitlets.config import Config

from clustermgr_lab.backends import (
    BACKENDS,
    Backend,
    BackendContext,
    BatchBackend,
    Capabilities,
    ExternalBackend,
    SSHBackend,
)
from clustermgr_lab.backends.local.backend import LocalBackend
from clustermgr_lab.manager.cluster_manager import ClusterManager

CAPABILITY_KEYS = {
    "can_scale", "can_stop", "multiple_groups", "readoptable", "runs_processes_here", "exact_retire", "editable_spec",
    "enforces_tls",
}  # fmt: skip


def manager(tmp_path, config: Config | None = None) -> ClusterManager:
    return ClusterManager(
        config=config or Config(), workdir=str(tmp_path / "work"), store_path=str(tmp_path / "s.sqlite3")
    )


def test_a_backend_gets_its_folder_callbacks_and_launcher_from_its_context(tmp_path):
    # Given a context with callbacks
    exits, changes = [], []
    context = BackendContext(
        tmp_path / "c1", on_worker_exit=lambda *e: exits.append(e), on_change=lambda: changes.append(1), idle_timeout=30
    )
    # When a backend is made with it
    backend = LocalBackend("c1", context)
    backend._report_exit("default-1", 3)
    backend._notify_change()
    # Then it reads everything from the context: nothing has to be set on it from outside
    assert backend.workdir == tmp_path / "c1"
    assert backend.launcher is None
    assert backend.idle_timeout == 30
    assert exits == [("default-1", 3)] and changes == [1]


def test_backends_are_configured_by_traitlets(tmp_path):
    # Given a server config for the SSH and SLURM backends
    config = Config()
    config.SSHBackend.hosts = ["node1", "node2"]
    config.SlurmBackend.command_timeout = 7.5
    config.SchedulerLink.call_timeout = 3.0
    server = manager(tmp_path, config)
    try:
        # When the server makes backends for clusters
        ssh = server._backend_factory(BACKENDS["ssh"], "c1")(BackendContext(tmp_path / "c1"))
        slurm = server._backend_factory(BACKENDS["slurm"], "c2")(BackendContext(tmp_path / "c2"))
        sge = server._backend_factory(BACKENDS["sge"], "c3")(BackendContext(tmp_path / "c3"))
        # Then each took its class's settings, and only those
        assert ssh.hosts == ["node1", "node2"]
        assert slurm.command_timeout == 7.5
        assert sge.command_timeout == BatchBackend.command_timeout.default_value
        # And every setting explains itself
        for cls in (SSHBackend, BatchBackend, LocalBackend, ExternalBackend):
            for name, trait in cls.class_traits(config=True).items():
                assert trait.help, f"{cls.__name__}.{name} has no help"
    finally:
        server.store.close()


def test_no_backend_reuses_another_backend_by_inheritance():
    # Given every backend class
    classes = set(BACKENDS.values()) | {ExternalBackend}
    for cls in classes:
        # Then the only backends in its ancestry are the contract and, for batch systems, the batch engine
        ancestors = [c for c in cls.__mro__[1:] if issubclass(c, Backend) and c is not Backend]
        assert ancestors in ([], [BatchBackend]), (cls.__name__, ancestors)
    assert not issubclass(SSHBackend, LocalBackend) and not issubclass(BatchBackend, LocalBackend)


def test_capabilities_are_in_the_templates_and_say_what_the_backend_can_do(tmp_path):
    # Given a server with the built-in templates
    server = manager(tmp_path)
    try:
        # When it lists them
        templates = server.list_templates()
        # Then each carries the capabilities of its backend
        for template in templates:
            assert set(template["capabilities"]) == CAPABILITY_KEYS | {"reasons"}
            assert template["capabilities"] == BACKENDS[template["backend"]].capabilities.to_dict()
    finally:
        server.store.close()
    # And an attached cluster's backend can do none of it
    assert ExternalBackend.capabilities.to_dict() == {**dict.fromkeys(CAPABILITY_KEYS, False), "reasons": {}}


def test_limits_follow_where_the_processes_run_not_the_backend_name(tmp_path):
    # Given a server
    server = manager(tmp_path)
    try:
        # When it chooses the caps for processes on this machine, and elsewhere
        here = server.limits_for(Capabilities())
        elsewhere = server.limits_for(Capabilities(runs_processes_here=False))
        # Then only those on this machine are held to this machine's memory
        assert here.memory_per_worker is not None and here.where == "this machine"
        assert elsewhere.memory_per_worker is None and elsewhere.where == "a compute node"
        assert server.limits_for(LocalBackend.capabilities).where == "this machine"
        assert server.limits_for(BACKENDS["slurm"].capabilities).where == "a compute node"
    finally:
        server.store.close()


def backend_reaches(source: str) -> tuple[set[str], list[str]]:
    """What ``source`` reads of a backend (``x.backend.NAME``, ``backend.NAME``, ``BACKENDS[...].NAME``,
    ``backend_class.NAME``), and its duck-typed reaches: ``getattr`` on a backend, ``isinstance`` of a backend class."""
    tree = ast.parse(source)
    members, duck = set(), []

    def is_backend(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr in ("backend", "backend_class")
        if isinstance(node, ast.Name):
            return node.id in ("backend", "backend_class")
        return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and "BACKENDS" in node.value.id

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_backend(node.value):
            members.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id in ("getattr", "hasattr") and is_backend(node.args[0]):
                duck.append(f"line {node.lineno}: {ast.unparse(node)}")
            classes = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if node.func.id in ("isinstance", "issubclass") and "Backend" in classes:
                duck.append(f"line {node.lineno}: {ast.unparse(node)}")
    return members, duck


def declared_members() -> set[str]:
    """What ``Backend`` declares: its class members, and the attributes its ``__init__`` sets."""
    init = ast.parse(textwrap.dedent(inspect.getsource(Backend.__init__)))
    targets = [t for n in ast.walk(init) if isinstance(n, ast.Assign) for t in n.targets]
    targets += [n.target for n in ast.walk(init) if isinstance(n, ast.AnnAssign)]
    assigned = {t.attr for t in targets if isinstance(t, ast.Attribute)}
    return set(dir(Backend)) | set(Backend.__annotations__) | assigned


def test_the_core_reaches_a_backend_only_through_the_declared_and_documented_contract():
    # Given every module outside backends/
    package = Path(__file__).resolve().parents[1] / "clustermgr_lab"
    core = [p for p in package.rglob("*.py") if "backends" not in p.parts and "labextension" not in p.parts]
    reaches = {p.relative_to(package).as_posix(): backend_reaches(p.read_text()) for p in core}
    used = set().union(*(members for members, _ in reaches.values()))
    docs = (package.parent / "docs" / "backends.md").read_text()
    # Then every member they use is declared on Backend and named in docs/backends.md, and none is private
    assert "capabilities" in used and "attaches" in used  # the reader sees what it must
    assert sorted(m for m in used if m not in declared_members()) == []
    assert sorted(m for m in used if m.startswith("_")) == []
    assert sorted(m for m in used if f"`{m}" not in docs) == []
    # And none reaches a backend by getattr, or asks which backend class it is
    assert {path: duck for path, (_, duck) in reaches.items() if duck} == {}


def test_a_duck_typed_reach_is_found():
    # Given code that reaches into a backend by getattr, and asks for a concrete class
    source = "def f(c):\n    getattr(c.backend, 'scheduler_link', None)\n    isinstance(c.backend, ExternalBackend)\n"
    # Then both are found
    assert backend_reaches(source)[1] == [
        "line 2: getattr(c.backend, 'scheduler_link', None)",
        "line 3: isinstance(c.backend, ExternalBackend)",
    ]


async def test_a_local_cluster_stops_its_workers_before_its_scheduler(tmp_path):
    # Given a local backend with a scheduler and two workers (recorded stops instead of processes)
    backend = LocalBackend("c1", BackendContext(tmp_path / "c1"))
    order: list[tuple[str, str]] = []

    class Processes:
        def names(self) -> list[str]:
            return ["scheduler", "default-1", "default-2"]

        async def stop(self, name: str, timeout: float) -> None:
            order.append(("stop", name))

        async def stop_all(self, timeout: float) -> None:
            order.append(("stop_all", "scheduler"))

    backend.processes = Processes()
    # When it closes
    await backend.close()
    # Then every worker is stopped before the scheduler: a worker without a nanny that gets SIGTERM while its
    # scheduler's connection breaks can hang until SIGKILL
    assert sorted(order[:2]) == [("stop", "default-1"), ("stop", "default-2")]
    assert order[2:] == [("stop_all", "scheduler")]
