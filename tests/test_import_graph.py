"""The package's import graph, read from the source (ast): no cycles, and each layer imports only what it may.

Every import counts: at module level, inside functions, and under ``if TYPE_CHECKING`` (a type-only
import is a dependency too: it is what a reader has to understand first). The layers are the
package's folders (see docs/architecture.md):

- ``domain/`` imports nothing of the package outside ``domain/``;
- ``web/`` never imports ``backends/``;
- ``client/`` (kernels, terminals) and ``preloads/`` (other processes) import only what they need,
  never the server side;
- ``backends/base.py``, the contract, imports no backend;
- ``cluster/`` and ``manager/`` import backends only through the registry and the contract.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "clustermgr_lab"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
BACKEND_CONTRACT = {f"{PACKAGE}.backends", f"{PACKAGE}.backends.base"}

#: Layer rules: (modules the rule is about, whether a module may import a package module, why).
RULES = [
    (
        lambda m: m.startswith(f"{PACKAGE}.domain."),
        lambda target: target.startswith(f"{PACKAGE}.domain") or target == PACKAGE,
        "the domain imports nothing of the package outside domain/",
    ),
    (
        lambda m: m.startswith(f"{PACKAGE}.web."),
        lambda target: not target.startswith(f"{PACKAGE}.backends"),
        "the web layer never imports a backend",
    ),
    (
        lambda m: m.startswith(f"{PACKAGE}.client"),
        lambda target: target.startswith(f"{PACKAGE}.client") or target in (PACKAGE, f"{PACKAGE}.common.security"),
        "the kernel-side client imports only itself and the TLS credentials, never the server",
    ),
    (
        lambda m: m == f"{PACKAGE}.preloads.scheduler",
        lambda target: (
            target in (PACKAGE, f"{PACKAGE}.preloads", f"{PACKAGE}.common.security", f"{PACKAGE}.common.proctitle")
        ),
        "the scheduler preload imports only the TLS credentials and process titles, never the server",
    ),
    (
        lambda m: m == f"{PACKAGE}.preloads.worker",
        lambda target: (
            target in (PACKAGE, f"{PACKAGE}.preloads", f"{PACKAGE}.common.security", f"{PACKAGE}.common.proctitle")
        ),
        "the worker preload imports only the TLS credentials and process titles, never the server",
    ),
    (
        lambda m: m == f"{PACKAGE}.preloads.discovery",
        lambda target: False,
        "the discovery preload is loaded by file path into kernels' schedulers: it imports nothing of the package",
    ),
    (
        lambda m: m == f"{PACKAGE}.backends.base",
        lambda target: not target.startswith(f"{PACKAGE}.backends.") or target == f"{PACKAGE}.backends.base",
        "the backend contract imports no backend",
    ),
    (
        lambda m: m.startswith((f"{PACKAGE}.cluster.", f"{PACKAGE}.manager.")),
        lambda target: not target.startswith(f"{PACKAGE}.backends") or target in BACKEND_CONTRACT,
        "the core imports backends only through the registry and the contract",
    ),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py") if "labextension" not in p.parts}


def imports_in(source: str, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The package modules ``source`` (module ``name``) imports anywhere: in functions and type-only too."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = f"{base}.{node.module}" if node.level and node.module else (base if node.level else node.module)
            for alias in node.names:  # `from . import commands`: the submodule
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return {m for m in found if m in known}


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_in(p.read_text(), name, p.name == "__init__.py", known) for name, p in found.items()}


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


def broken_rules(edges: dict[str, set[str]]) -> list[str]:
    """Every import a layer rule forbids, as ``module -> target (rule)``."""
    return [
        f"{module} -> {target} ({why})"
        for module, targets in sorted(edges.items())
        for applies, allowed, why in RULES
        if applies(module)
        for target in sorted(targets)
        if target != module and not allowed(target)
    ]


def test_the_reader_sees_the_imports_it_must():
    # Given the package's graph
    edges = graph()
    # Then it finds imports of each form: absolute, from a package, inside a function, and type-only
    assert f"{PACKAGE}.cluster.reconciler" in edges[f"{PACKAGE}.cluster.managed"]
    assert f"{PACKAGE}.backends.base" in edges[f"{PACKAGE}.cluster.managed"]
    assert f"{PACKAGE}.backends.local.backend" in edges[f"{PACKAGE}.backends"]
    assert f"{PACKAGE}.common.metrics" in edges[f"{PACKAGE}.backends.local.launcher"]  # inside a function
    assert f"{PACKAGE}.common.security" in edges[f"{PACKAGE}.backends.base"]  # under TYPE_CHECKING
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_package_has_no_import_cycle():
    # Given every module's imports, type-only and function-level ones included
    # Then no module reaches itself
    assert find_cycle(graph()) is None


def test_every_layer_imports_only_what_it_may():
    # Given every module's imports
    # Then none breaks a layer rule
    assert broken_rules(graph()) == []


@pytest.mark.parametrize(
    ("module", "source", "rule"),
    [
        (f"{PACKAGE}.domain.spec", "from clustermgr_lab.cluster.events import EventLog", "the domain imports nothing"),
        (f"{PACKAGE}.web.routes", "from clustermgr_lab.backends.local import backend", "the web layer never"),
        (f"{PACKAGE}.client.api", "import clustermgr_lab.manager.cluster_manager", "the kernel-side client"),
        (f"{PACKAGE}.preloads.scheduler", "from clustermgr_lab.domain.spec import WorkerSpec", "the scheduler preload"),
        (
            f"{PACKAGE}.backends.base",
            "from clustermgr_lab.backends.ssh.backend import SSHBackend",
            "the backend contract",
        ),
        (
            f"{PACKAGE}.cluster.managed",
            "def f():\n    from clustermgr_lab.backends.ssh.backend import SSHBackend",
            "the core",
        ),
        (
            f"{PACKAGE}.manager.settings",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from clustermgr_lab.backends.batch import slurm",
            "the core",
        ),
    ],
)
def test_a_forbidden_import_is_found(module, source, rule):
    # Given the package's graph, and one module that also has a forbidden import
    edges = graph()
    edges[module] = edges[module] | imports_in(source, module, False, set(modules()))
    # Then the rules name it
    assert any(line.startswith(f"{module} -> ") and rule in line for line in broken_rules(edges)), broken_rules(edges)


def test_a_type_only_import_closes_a_cycle():
    # Given the contract importing, for a type only, a module that imports the contract
    edges = graph()
    type_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from clustermgr_lab.cluster.managed import X"
    edges[f"{PACKAGE}.backends.base"] |= imports_in(type_only, f"{PACKAGE}.backends.base", False, set(modules()))
    # Then the cycle is found
    assert find_cycle(edges) is not None
