"""A query's syntax error as people read it: one line with its line and column, from our own parser, so an editor
can mark the spot. The engine's own message (Oxigraph lists every Unicode range it expected) is only a fallback,
translated to "unexpected 'x' at line L, column C" when our parser accepts what the engine refused."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparqlnav.sparql.parser import SparqlSyntaxError, parse_query
from sparqlnav.sparql.prefixes import PrefixRepair

# Oxigraph: "error at 3:17: expected one of …"; line and column are 1-based.
_ENGINE_POSITION = re.compile(r"error at (\d+):(\d+)")


@dataclass(frozen=True)
class SyntaxProblem:
    """Where a query stops being SPARQL (1-based line and column) and why, in a few words."""

    line: int
    column: int
    message: str

    def text(self) -> str:
        """One line: `line L, column C: message`."""
        return f"line {self.line}, column {self.column}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (with `text`, the one-line form)."""
        return {"line": self.line, "column": self.column, "message": self.message, "text": self.text()}


def syntax_problem(query: str, engine_message: str | None = None) -> SyntaxProblem | None:
    """The first syntax problem of `query` (an undeclared prefix counts), or the engine's message translated;
    None when neither finds one."""
    try:
        parsed = parse_query(query, collect_undefined_prefixes=True)
    except SparqlSyntaxError as exc:
        return SyntaxProblem(exc.line, exc.column, exc.reason)
    if parsed.undefined_prefixes:
        prefix, (line, column) = next(iter(parsed.undefined_prefixes.items()))
        return SyntaxProblem(line, column, f"the prefix '{prefix}:' is not declared (add a PREFIX line)")
    return engine_problem(query, engine_message) if engine_message else None


def typed_syntax_problem(repair: PrefixRepair, engine_message: str | None = None) -> SyntaxProblem | None:
    """The first syntax problem of a query a face repaired, at its place in the text as typed, or the engine's
    `engine_message` (its places already as typed, see `placed_as_typed`) read there; None when neither finds one.
    The repaired text is the one read, so a prefix the face declared is not reported as undeclared."""
    found = syntax_problem(repair.query)
    if found is not None:
        line, column = repair.typed_place(found.line, found.column)
        return SyntaxProblem(line, column, found.message)
    typed = repair.typed if repair.typed is not None else repair.query
    return engine_problem(typed, engine_message) if engine_message else None


def placed_as_typed(message: str, repair: PrefixRepair) -> str:
    """`message` about the repaired query with each "error at L:C" moved to the same spot of the text as typed: the
    PREFIX lines a face added are not the user's, so their lines are not counted (every face reports one place)."""
    if repair.typed is None:
        return message

    def moved(found: re.Match[str]) -> str:
        line, column = repair.typed_place(int(found.group(1)), int(found.group(2)))
        return f"error at {line}:{column}"

    return _ENGINE_POSITION.sub(moved, message)


def engine_problem(query: str, engine_message: str) -> SyntaxProblem | None:
    """The engine's "error at L:C: expected one of …" as "unexpected 'x'" at that place (None without a position)."""
    found = _ENGINE_POSITION.search(engine_message)
    if found is None:
        return None
    line, column = int(found.group(1)), int(found.group(2))
    lines = query.split("\n")
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    rest = text[column - 1 :].strip() if column >= 1 else ""
    if not rest and line >= len(lines):
        return SyntaxProblem(line, column, "unexpected end of the query")
    word = re.match(r"\w+|\S", rest)
    what = f"'{word.group()}'" if word else "end of line"
    return SyntaxProblem(line, column, f"unexpected {what}")


__all__ = ["SyntaxProblem", "engine_problem", "placed_as_typed", "syntax_problem", "typed_syntax_problem"]
