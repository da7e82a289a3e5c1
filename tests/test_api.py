"""The public Python API: `sparqlnav.ask`, the names `sparqlnav` exports, one exception tree, unique class names."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import sparqlnav

PACKAGE = Path(sparqlnav.__file__).parent


def public_classes(root: Path) -> dict[str, list[str]]:
    """Module-level public class names of every module under `root`, with the modules defining each."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(path.relative_to(root).as_posix())
    return found


def test_public_class_names_are_unique_across_the_package() -> None:
    classes = public_classes(PACKAGE)
    assert len(classes) > 100  # the walk really saw the package
    assert {"Answer", "Trace", "Usage", "LLMUsage", "NameHit", "IndexHit", "RequestGuard"} <= classes.keys()
    duplicates = {name: where for name, where in classes.items() if len(where) > 1}
    assert duplicates == {}
