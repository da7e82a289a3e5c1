"""Does a result fit what the question asks for: a number for "how many", a date for "when", the things
themselves (not a count of them) for "which", few rows for "the …". Read from the question's words and the
result alone; used by the cascade to distrust a stage and by the feedback module to send a query back."""

from __future__ import annotations

import re

from sparqlnav.graph.results import ResultTable, Term
from sparqlnav.question.intent import DATE_TYPES, Intent

_NUMERIC = ("integer", "decimal", "double", "float", "int", "long", "short", "nonNegativeInteger",
            "positiveInteger", "unsignedInt", "unsignedLong")
_DATE_TEXT = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?([T ].*)?$")
_ONE = re.compile(r"(?i)^\W*(?:in\s+|from\s+|for\s+)?(?:who|whom|what|which|where)\b(?:\s+\w+){0,2}?\s+(?:is|was)\b")
_MANY = re.compile(r"(?i)\b(?:all|every|each|per|list|top|everyone|directory)\b")
_COUNT = re.compile(r"(?i)\bCOUNT\s*\(")
# `(COUNT(…) AS ?n)`: the variables a query binds to a count (one level of nested brackets inside COUNT).
_COUNT_AS = re.compile(r"(?i)\(\s*COUNT\s*\((?:[^()]|\([^()]*\))*\)\s*AS\s*[?$](\w+)\s*\)")
# `(MAX(?n) AS ?most)` over a count is still a count.
_OVER_AS = re.compile(r"(?i)\(\s*(?:MAX|MIN|SUM|SAMPLE)\s*\(\s*(?:DISTINCT\s+)?[?$](\w+)\s*\)\s*AS\s*[?$](\w+)\s*\)")


def asks_for_one(question: str) -> bool:
    """Whether the question asks for one thing ("Who is the manager of …", "In which department is …")."""
    return bool(_ONE.search(question)) and not _MANY.search(question)


def projection_mismatch(
    intent: Intent, table: ResultTable, singular_rows: int, *, one: bool = False, query: str | None = None
) -> str | None:
    """Why a result does not fit the answer type the question asks for (None when it fits); `one`: the question
    asks for one thing, so more than `singular_rows` rows do not fit; `query`: the SPARQL that gave the result
    (a COUNT in it tells a count from a value such as a salary)."""
    wanted = intent.answer
    if wanted == "boolean":
        return None  # "Are there …?" is often answered by the rows themselves
    if table.boolean is not None:
        return f"a yes/no result for a question asking for a {_named(wanted)}"
    if wanted == "count":
        first = table.rows[0] if table.rows else {}
        if not any(is_number(t) for t in first.values()):
            return f"a 'how many' question, but the result has no number ({len(table.rows)} rows of names)"
        return None
    if wanted == "date":
        shown = [t for row in table.rows[:20] for t in row.values()]
        if not any(is_date(t) for t in shown):
            return "a 'when' question, but the result has no date"
        return None
    if wanted != "number" and query is not None and _counted(table, query):
        return (f"the question asks which {_named(wanted)}(s), the result is only a count "
                "(one number): return the things themselves, not how many there are")
    if one and len(table.rows) > singular_rows:
        return f"the question asks for one {_named(wanted)}, the result has {len(table.rows)} rows"
    return None


def _counted(table: ResultTable, query: str) -> bool:
    """One row holding only counts: every value bound to a variable the query's COUNT gives. A number beside it
    that COUNT does not give (a year, an id, a weight) is what the question asked about (`| 2016 | 158 |` for
    "which year had the most …" is a year and its count, not "only a count")."""
    if len(table.rows) != 1 or not table.rows[0] or not _COUNT.search(query):
        return False
    row = table.rows[0]
    counts = count_variables(query)
    if not counts:  # COUNT without a name (`SELECT COUNT(?x)`, an engine's extension): numbers are its counts
        return all(is_number(t) for t in row.values())
    return all(var in counts and is_number(t) for var, t in row.items())


def count_variables(query: str) -> frozenset[str]:
    """The variables a query binds to a COUNT, or to a MAX/MIN/SUM/SAMPLE of one."""
    found = {m.group(1) for m in _COUNT_AS.finditer(query)}
    over = [(m.group(1), m.group(2)) for m in _OVER_AS.finditer(query)]
    grew = True
    while grew:  # an aggregate of an aggregate of a count, to any depth the query has
        grew = False
        for inner, outer in over:
            if inner in found and outer not in found:
                found.add(outer)
                grew = True
    return frozenset(found)


def _named(answer_type: str) -> str:
    return {"person": "person", "place": "place", "count": "count", "date": "date", "number": "number"}.get(
        answer_type, "thing")


def is_number(term: Term) -> bool:
    """A literal that reads as a number (numeric datatype or numeric text)."""
    if term.kind != "literal":
        return False
    if term.datatype and any(term.datatype.endswith("#" + t) for t in _NUMERIC):
        return True
    try:
        float(term.value)
    except ValueError:
        return False
    return True


def is_date(term: Term) -> bool:
    """A literal that reads as a date (date datatype or ISO-like text)."""
    if term.kind != "literal":
        return False
    return (term.datatype or "") in DATE_TYPES or bool(_DATE_TEXT.match(term.value.strip()))
