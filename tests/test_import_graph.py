"""The package's import graph, read from the source (ast): no cycles, and the core never reaches into a specific backend."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "clustermgr_lab"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
CORE = {f"{PACKAGE}.{name}" for name in ("cluster", "manager", "reconciler", "adaptive_controller")}
#: What the core may import from the backends: the registry (the package) and the contract.
BACKEND_CONTRACT = {f"{PACKAGE}.backends", f"{PACKAGE}.backends.base"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py") if "labextension" not in p.parts}


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports, anywhere in it (functions too), except under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = f"{base}.{node.module}" if node.level and node.module else (base if node.level else node.module)
            for alias in node.names:  # `from . import requests`: the submodule
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return {m for m in found if m in known}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_reader_sees_the_imports_it_must():
    # Given the package's graph
    edges = graph()
    # Then it finds imports of each form (relative, from a package, inside a function) — the checks below can fail
    assert f"{PACKAGE}.reconciler" in edges[f"{PACKAGE}.cluster"]
    assert f"{PACKAGE}.backends.base" in edges[f"{PACKAGE}.cluster"]
    assert f"{PACKAGE}.backends.local" in edges[f"{PACKAGE}.backends"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_package_has_no_import_cycle():
    # Given every module's imports
    # Then no module reaches itself
    assert find_cycle(graph()) is None


def test_the_core_imports_backends_only_through_the_registry_and_the_contract():
    # Given the modules that manage clusters
    edges = graph()
    # Then none imports a specific backend module
    reaching = {
        core: sorted(m for m in edges[core] if m.startswith(f"{PACKAGE}.backends") and m not in BACKEND_CONTRACT)
        for core in CORE
    }
    assert reaching == {core: [] for core in CORE}
