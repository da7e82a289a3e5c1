"""docs/design.md's module map names every module of the package, and no folder that is gone.

The map is the table under "The package, one folder per part…" and the "Top level:" paragraph after it. A
module `a/x.py` is named `x` (in backticks) in the row of `a/`; a module of a subfolder, `a/b/x.py`, is named
inside the parentheses that follow `b/` in that row; a top-level module in the "Top level:" paragraph.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "sparqlnav"
DESIGN = ROOT / "docs" / "design.md"


def module_map() -> tuple[dict[str, str], str]:
    """The map's rows by folder (`sparql/` → the row's text) and its top-level paragraph."""
    text = DESIGN.read_text(encoding="utf-8")
    start = text.index("The package, one folder per part")
    section = text[start : text.index("\n## ", start)]
    rows = {}
    for line in section.splitlines():
        found = re.match(r"\|\s*`([a-z_]+/)`\s*\|(.*)", line)
        if found:
            rows[found.group(1)] = found.group(2)
    top = section[section.index("Top level:") :]
    return rows, top


def modules() -> list[Path]:
    """Every Python module of the package, relative to it (package faces, `__init__.py`, stand for their folder)."""
    found = [p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(p for p in found if p.name != "__init__.py")


def inside(row: str, folder: str) -> str:
    """The text in the parentheses after `folder/` in a row ('' when the row does not name the folder)."""
    at = row.find(f"`{folder}/` (")
    if at < 0:
        return ""
    start = row.index("(", at)
    depth = 0
    for i in range(start, len(row)):
        depth += {"(": 1, ")": -1}.get(row[i], 0)
        if depth == 0:
            return row[start : i + 1]
    return row[start:]


def named(module: Path, rows: dict[str, str], top: str) -> bool:
    """Whether the map names `module` where it belongs."""
    name = f"`{module.stem}`"
    parts = module.parts[:-1]
    if not parts:
        return name in top
    row = rows.get(f"{parts[0]}/", "")
    for folder in parts[1:]:
        row = inside(row, folder)
    return name in row


def test_the_map_reads_as_a_map() -> None:
    rows, top = module_map()
    # Sure of the parse before trusting it: the folders everyone knows, and a module of a subfolder.
    assert {"sparql/", "graph/", "llm/", "retrieval/", "strategies/", "faces/"} <= set(rows)
    assert "`answer`" in top
    assert named(Path("strategies/lexical/scoring.py"), rows, top)
    assert not named(Path("strategies/lexical/nothing_here.py"), rows, top)
    assert not named(Path("graph/scoring.py"), rows, top)


@pytest.mark.parametrize("module", modules(), ids=str)
def test_every_module_is_in_the_map(module: Path) -> None:
    rows, top = module_map()
    where = f"the row of `{module.parts[0]}/`" if len(module.parts) > 1 else "the 'Top level:' paragraph"
    assert named(module, rows, top), f"docs/design.md's module map does not name {module} ({where})"


def test_every_folder_the_map_names_exists() -> None:
    rows, _ = module_map()
    for folder, row in rows.items():
        assert (PACKAGE / folder).is_dir(), f"the map has a row for {folder}, which is not in the package"
        for sub in re.findall(r"`([a-z_]+)/` \(", row):
            assert (PACKAGE / folder / sub).is_dir(), f"the map names {folder}{sub}/, which is not in the package"
