"""Given the package's source, every third-party package it imports is declared in pyproject.toml's dependencies.

The imports are read from the syntax tree of every module of ``clustermgr_lab/`` (the standard library and the
package itself left out); each is mapped to the distribution that provides it (``importlib.metadata``) and looked
up in ``[project] dependencies``. An import guarded by ``except ImportError`` (an optional package, e.g. pynvml
for GPU detection) may be undeclared; :data:`OPTIONAL` names those, and each must really be guarded.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "clustermgr_lab"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {
        normalized(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]) for requirement in project["dependencies"]
    }


def guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether an import sits in a ``try`` whose handlers catch ImportError (or a broader error)."""
    while node in parents:
        node, child = parents[node], node
        if isinstance(node, ast.Try) and child in node.body:
            for handler in node.handlers:
                names = {n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)} if handler.type else {""}
                if names & {"ImportError", "ModuleNotFoundError", "Exception", ""}:
                    return True
    return False


def third_party_imports() -> dict[str, tuple[bool, list[str]]]:
    """Top-level module -> (every import of it is guarded, where it is imported)."""
    found: dict[str, tuple[bool, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "labextension" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("clustermgr_lab", "__future__"):
                    continue
                was_guarded, where = found.get(top, (True, []))
                found[top] = (
                    was_guarded and guarded(node, parents),
                    [*where, f"{path.relative_to(REPO)}:{node.lineno}"],
                )
    return found


#: Imported only under ``except ImportError``: used when installed, not required.
OPTIONAL = {"pynvml", "dask_ctl", "tomli"}


def test_every_imported_package_is_declared():
    # Given every third-party import of the package, and the distributions that provide each module
    providers = importlib.metadata.packages_distributions()
    dependencies = declared()
    undeclared = []
    for module, (is_guarded, where) in sorted(third_party_imports().items()):
        distributions = {normalized(d) for d in providers.get(module, [module])}
        if distributions & dependencies:
            continue
        if module in OPTIONAL and is_guarded:
            continue
        undeclared.append(f"{module} ({', '.join(sorted(distributions))}) imported at {', '.join(where[:3])}")
    # Then each is declared in pyproject.toml (or is optional and guarded)
    assert not undeclared, "imported but not declared in pyproject.toml's dependencies:\n" + "\n".join(undeclared)


def test_the_check_sees_imports_and_their_guards():
    # Given the package's own imports, then the ones it must see are there: a plain one and a guarded one
    imports = third_party_imports()
    assert imports["tornado"][0] is False and imports["dask"][0] is False
    assert "cryptography" in imports
    assert all(imports[module][0] for module in OPTIONAL if module in imports), "an optional import is not guarded"
