"""Hardening, round two (issue 29, item 6): the entity-bomb check cannot be skipped. The red team hid the DTD from
the old scan with `<!-- <a -->` or `<?foo <a?>` before `<!DOCTYPE`, or `<!-- ] -->` inside the internal subset, and
the parser expanded the bomb (5.1 GB in 15 s). Each is refused now in one line, in a real CLI process capped at
2 GB; and the second barrier, RDF/XML parsed in a child process under a memory ceiling, stops a bomb on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparqlnav.graph.entities import (
    EntityExpansionError,
    as_ntriples_bounded,
    check_entity_expansion,
)
from test_store_hardening import NAMES, builds, error_lines, run

TRICKS = {
    "comment before the DOCTYPE": ("<!-- <a -->\n", ""),
    "processing instruction before the DOCTYPE": ("<?foo <a?>\n", ""),
    "comment holding ] inside the subset": ("", "<!-- ] -->\n"),
}


def bomb(path: Path, before: str = "", inside: str = "", levels: int = 10) -> Path:
    """A billion-laughs RDF/XML file (10**(levels-1) copies of 'lol'), with `before` ahead of its DOCTYPE and
    `inside` at the start of its internal subset."""
    entities = ['<!ENTITY a "lol">'] + [f'<!ENTITY {NAMES[i]} "{f"&{NAMES[i - 1]};" * 10}">' for i in range(1, levels)]
    path.write_text(
        f'<?xml version="1.0"?>\n{before}<!DOCTYPE rdf:RDF [\n{inside}' + "\n".join(entities) + "]>\n"
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://example.org/">\n'
        f'<rdf:Description rdf:about="http://example.org/x"><ex:p>&{NAMES[levels - 1]};</ex:p></rdf:Description>\n'
        "</rdf:RDF>\n"
    )
    return path


@pytest.mark.parametrize("trick", list(TRICKS))
def test_a_hidden_dtd_is_still_measured(trick: str, tmp_path: Path) -> None:
    before, inside = TRICKS[trick]
    small = bomb(tmp_path / "small.rdf", before, inside, levels=4)  # 1,000 × "lol": loads, and is measured
    assert check_entity_expansion(small) == 3000
    with pytest.raises(EntityExpansionError, match="entity expansion over 67108864 bytes"):
        check_entity_expansion(bomb(tmp_path / "laughs.rdf", before, inside))


@pytest.mark.parametrize("trick", list(TRICKS))
def test_the_cli_refuses_each_hidden_bomb_in_one_line(trick: str, tmp_path: Path) -> None:
    before, inside = TRICKS[trick]
    path = bomb(tmp_path / "laughs.rdf", before, inside)
    res = run("sparql", "ASK {}", "--kg", str(path), home=tmp_path / "home")
    lines = error_lines(res)
    assert res.returncode == 1 and len(lines) == 1, res.stderr[-2000:]
    assert "laughs.rdf" in lines[0] and "entity expansion over 67108864 bytes — refused" in lines[0]
    assert builds(tmp_path / "home") == []


def test_the_parser_runs_under_a_memory_ceiling_whatever_the_scan_said(tmp_path: Path) -> None:
    # Past the scan (called directly), the bomb meets the child's ceiling: 256 MiB against its 3 GB.
    with pytest.raises(EntityExpansionError, match=r"reading it needed more than 268,435,456 bytes of memory"):
        as_ntriples_bounded(bomb(tmp_path / "laughs.rdf"), tmp_path / "out.nt", base_iri="http://example.org/",
                            memory_bytes=256 * 1024 * 1024)  # fmt: skip
    fine = bomb(tmp_path / "small.rdf", levels=4)
    as_ntriples_bounded(fine, tmp_path / "small.nt", base_iri="http://example.org/", memory_bytes=256 * 1024 * 1024)
    assert '"' + "lol" * 1000 + '"' in (tmp_path / "small.nt").read_text()
