"""Deterministic Turtle writing for the graph builders: terms escaped by hand, subjects and lines sorted."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path

XSD = "http://www.w3.org/2001/XMLSchema#"


def iri(value: str) -> str:
    """An IRI term."""
    return f"<{value}>"


def literal(
    value: str | int | float | bool | Decimal, lang: str | None = None, datatype: str | None = None
) -> str:
    """A literal term: strings escaped, numbers and booleans typed as Turtle reads them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | Decimal):
        # xsd:decimal, written plainly (no exponent) so the file is the same on every platform
        text = format(Decimal(str(value)).normalize(), "f")
        return f'"{text}"^^<{XSD}decimal>'
    escaped = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    if lang:
        return f'"{escaped}"@{lang}'
    if datatype:
        return f'"{escaped}"^^<{datatype}>'
    return f'"{escaped}"'


def write(path: Path, prefixes: dict[str, str], triples: Iterable[tuple[str, str, str]]) -> Path:
    """Write triples (terms already rendered) as Turtle, one statement a line, sorted, without duplicates."""
    lines = sorted({f"{s} {p} {o} ." for s, p, o in triples})
    header = [f"@prefix {name}: <{ns}> ." for name, ns in sorted(prefixes.items())]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*header, "", *lines]) + "\n", encoding="utf-8")
    return path
