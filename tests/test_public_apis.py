"""Issue 38, item 2: the package uses its libraries through their public APIs only. `serve --workers` broke on a
fresh install because it drove uvicorn's internal `supervisors.Multiprocess`, whose signature changed in a release
inside pyproject's range; a private name can change in any release. Read from the source (every module's syntax
tree): no import of a library's `_private` module or name, nor of a module known to be internal, and no
`obj._name` reaching into an object unless the package itself defines `_name` (its own objects' collaboration)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "sparqlnav"
INTERNAL_MODULES = {"uvicorn.supervisors", "uvicorn.workers"}  # uvicorn's process manager; its gunicorn worker moved
ALLOWED = {"os._exit"}  # documented in the standard library despite the underscore


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_names(trees: list[ast.Module]) -> set[str]:
    """Every private name the package defines: functions, classes, its objects' attributes, globals, arguments."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):  # fmt: skip
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {n for n in names if _private(n)}


def _third_party(module: str | None, level: int) -> bool:
    return level == 0 and module is not None and module.split(".")[0] != "sparqlnav"


def test_no_private_or_internal_imports_of_libraries() -> None:
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _third_party(node.module, node.level):
                assert node.module is not None
                names = [a.name for a in node.names]
                if any(_private(p) for p in node.module.split(".")) or node.module in INTERNAL_MODULES \
                        or any(_private(n) for n in names):  # fmt: skip
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} from {node.module} import {', '.join(names)}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _third_party(alias.name, 0) and (
                        any(_private(p) for p in alias.name.split(".")) or alias.name in INTERNAL_MODULES
                    ):
                        found.append(f"{path.relative_to(SRC)}:{node.lineno} import {alias.name}")
    assert found == []


def test_no_reaching_into_a_librarys_private_attributes() -> None:
    modules = list(_modules())
    own = _own_names([tree for _, tree in modules])
    assert {"_query", "_settings"} <= own  # the package's own private names are known to the check
    found = []
    for path, tree in modules:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)) or node.attr in own:
                continue
            if isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in ALLOWED:
                continue
            found.append(f"{path.relative_to(SRC)}:{node.lineno} {ast.unparse(node)}")
    assert found == []
