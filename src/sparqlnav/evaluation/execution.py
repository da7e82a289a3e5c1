"""Execution accuracy, as the text-to-SQL literature measures it: a prediction is right when running it gives the
gold's result.

Both sides are results in SPARQL 1.1 JSON form (`evaluation.sql_runs` writes a SQL result so: its columns as
variables in their order, a NULL as an unbound cell), so one comparison serves an SQL answer against gold SQL and a
SPARQL answer against gold SPARQL. Two results are the same when:

* the *multisets* of rows are equal: a duplicate row counts (two equal rows are not one), order aside;
* column order is free and names play no part: a column is matched to a gold column by its values (every way of
  pairing columns whose value multisets agree is tried until one makes the rows agree), but the number of columns
  must be the same — an extra column is a different answer (row F1, reported beside, gives partial credit);
* numbers compare by value with a relative tolerance (`DEFAULT_TOLERANCE`, 1e-6, and an absolute floor of 1e-12
  for values near zero): ints, floats, decimals, numeric literals and numeric text ("3.50") alike; a boolean is
  the number 1 or 0 (SQLite stores TRUE as 1, PostgreSQL returns True); text with a leading zero ("007") stays
  text; everything else compares as its text (IRIs, dates, strings), datatypes and language tags aside;
* a NULL (unbound) equals only a NULL;
* a yes/no: the gold is a boolean (an ASK, or gold SQL ``SELECT EXISTS (...)`` whose one 0/1 cell `sql_runs`
  reads as a boolean); a prediction that is a boolean, or one row and one column holding 0/1 (true/false), or one
  row carrying exactly one xsd:boolean verdict (`metrics.verdict_of`), is read as its verdict; a table against a
  boolean gold, or a boolean against a table gold, is wrong;
* order counts only for a ranking: when the gold query ends in ORDER BY with LIMIT at its top level ("the three
  largest …"), rows must also come in the gold's order (`is_ranking`). Anywhere else ORDER BY only presents rows
  that are the same set either way. Ties at the cut of a ranking are the gold writer's to avoid.

Both sides empty is right; gold empty and prediction not (or the reverse) is wrong. No prediction is wrong.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparqlnav.evaluation.metrics import Results, bindings, is_boolean, verdict_of

DEFAULT_TOLERANCE = 1e-6
ABSOLUTE_FLOOR = 1e-12  # two numbers this close are equal whatever their size (0.0 against 1e-17)
# Beyond these the search gives up and says the results differ (never reached by real answers).
MAX_COLUMN_PAIRINGS = 5_000
MAX_MATCHED_ROWS = 500  # Kuhn's augmenting paths recurse up to this deep

XSD = "http://www.w3.org/2001/XMLSchema#"
_INTEGER_TYPES = frozenset(XSD + t for t in (
    "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger", "nonPositiveInteger",
    "negativeInteger", "unsignedInt", "unsignedLong", "unsignedShort", "unsignedByte"))  # fmt: skip
_NUMBER_TYPES = _INTEGER_TYPES | {XSD + "decimal", XSD + "double", XSD + "float"}
_BOOLEAN = XSD + "boolean"
_NUMBER_TEXT = re.compile(r"[+-]?(?:(?P<int>\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER_TEXT = re.compile(r"[+-]?\d+")

Cell = int | float | str | None
Row = tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class ExecutionMatch:
    """Whether a prediction's result is the gold's, and when not, why (one short phrase)."""

    correct: bool
    reason: str | None = None

    @property
    def score(self) -> float:
        """1.0 when correct, else 0.0."""
        return 1.0 if self.correct else 0.0


@dataclass(frozen=True, slots=True)
class ValueTable:
    """A result as typed cells: its columns (in order) and rows."""

    columns: tuple[str, ...]
    rows: tuple[Row, ...]


# --------------------------------------------------------------------------- reading results


def cell(term: Mapping[str, Any] | None) -> Cell:
    """One cell of a SPARQL JSON binding as the comparison reads it: None, a number, or text."""
    if term is None:
        return None
    value = term.get("value")
    text = value if isinstance(value, str) else repr(value)
    datatype = term.get("datatype")
    if term.get("type") in ("uri", "bnode"):
        return text
    if datatype == _BOOLEAN and text in ("true", "false", "1", "0"):
        return 1 if text in ("true", "1") else 0
    if datatype in _NUMBER_TYPES:
        number = _number(text, special=True)
        return text if number is None else number
    number = _number(text, special=False)
    return text if number is None else number


def _number(text: str, *, special: bool) -> int | float | None:
    """A number written as text, or None; `special` (a typed literal) also reads INF, -INF and NaN."""
    stripped = text.strip()
    if special and stripped in ("INF", "+INF", "-INF", "NaN"):
        return float(stripped.replace("INF", "inf").replace("NaN", "nan"))
    found = _NUMBER_TEXT.fullmatch(stripped)
    if found is None:
        return None
    digits = found.group("int")
    if digits is not None and len(digits) > 1 and digits.startswith("0"):
        return None  # "007" is a code, not seven
    if _INTEGER_TEXT.fullmatch(stripped):
        return int(stripped)
    return float(stripped)


def table(results: Results) -> ValueTable:
    """The rows of a SELECT result as typed cells, columns in the head's order (then any others found)."""
    declared = (results.get("head") or {}).get("vars") or []
    columns = [str(v) for v in declared]
    rows = bindings(results)
    for row in rows:
        for var in row:
            if var not in columns:
                columns.append(var)
    return ValueTable(tuple(columns), tuple(tuple(cell(row.get(var)) for var in columns) for row in rows))


def _verdict(results: Results, gold: Results) -> bool | None:
    """A prediction read as a yes/no when the gold is one: a boolean, or a single 0/1 (true/false) cell."""
    results = verdict_of(gold, results) or results
    if is_boolean(results):
        return bool(results["boolean"])
    shown = table(results)
    if len(shown.rows) != 1 or len(shown.columns) != 1:
        return None
    value = shown.rows[0][0]
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.lower())
    if value in (0, 1):
        return bool(value)
    return None


# --------------------------------------------------------------------------- ranking


_SKIPPED = re.compile(
    r"""'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.)*"|<[^<>"{}|^`\\\s]*>|--[^\n]*|\#[^\n]*""",
    re.DOTALL,
)
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
_LIMIT = re.compile(r"\blimit\s+\S|\bfetch\s+(?:first|next)\b", re.IGNORECASE)


def top_level(query: str) -> str:
    """The text of a query outside strings, IRIs, comments and brackets (what its outermost clauses say)."""
    text = _SKIPPED.sub(" ", query)
    kept: list[str] = []
    depth = 0
    for char in text:
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth = max(0, depth - 1)
        elif depth == 0:
            kept.append(char)
    return "".join(kept)


def is_ranking(query: str | None) -> bool:
    """True when a (SQL or SPARQL) query ends in ORDER BY … LIMIT at its top level: its rows' order is the answer."""
    if not query:
        return False
    outer = top_level(query)
    order = _ORDER_BY.search(outer)
    return order is not None and _LIMIT.search(outer, order.end()) is not None


# --------------------------------------------------------------------------- comparing


def same_cell(a: Cell, b: Cell, tolerance: float = DEFAULT_TOLERANCE) -> bool:
    """Two cells are equal: NULL only to NULL, numbers within the relative tolerance, text exactly."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=ABSOLUTE_FLOOR)


def _key(value: Cell) -> tuple[int, float, str]:
    """A total order on cells that puts numbers within the tolerance next to each other."""
    if value is None:
        return (0, 0.0, "")
    if isinstance(value, str):
        return (3, 0.0, value)
    if math.isnan(value):
        return (2, 0.0, "")
    return (1, float(value), "")


def _row_key(row: Row) -> tuple[tuple[int, float, str], ...]:
    return tuple(_key(v) for v in row)


def _same_rows_in_order(gold: Sequence[Row], predicted: Sequence[Row], tolerance: float) -> bool:
    return len(gold) == len(predicted) and all(
        all(same_cell(a, b, tolerance) for a, b in zip(g, p, strict=True))
        for g, p in zip(gold, predicted, strict=True)
    )


def _same_multiset(gold: Sequence[Row], predicted: Sequence[Row], tolerance: float) -> bool:
    """Equal row multisets: sorted rows pairwise, else (numbers near each other sorting apart) a matching."""
    if len(gold) != len(predicted):
        return False
    if _same_rows_in_order(sorted(gold, key=_row_key), sorted(predicted, key=_row_key), tolerance):
        return True
    # Sorting pairs one-number rows exactly; with two or more numbers a near-tie in one column can sort rows
    # apart, so rows that share their text and NULLs are matched as a bipartite graph.
    groups: dict[tuple[Any, ...], tuple[list[Row], list[Row]]] = {}
    for side, rows in enumerate((gold, predicted)):
        for row in rows:
            shape = tuple(v if v is None or isinstance(v, str) else "#" for v in row)
            groups.setdefault(shape, ([], []))[side].append(row)
    for left, right in groups.values():
        if len(left) != len(right):
            return False
        if _same_rows_in_order(sorted(left, key=_row_key), sorted(right, key=_row_key), tolerance):
            continue
        if len(left) > MAX_MATCHED_ROWS or not _perfect_matching(left, right, tolerance):
            return False
    return True


def _perfect_matching(left: Sequence[Row], right: Sequence[Row], tolerance: float) -> bool:
    """Whether every left row can be paired with its own equal right row (Kuhn's augmenting paths). The rows share
    their shape (`_same_multiset` groups them so), so candidates are found by their first number, sorted."""
    column = next((k for k, v in enumerate(left[0]) if isinstance(v, int | float)), None) if left else None
    if column is None:
        return _same_rows_in_order(sorted(left, key=_row_key), sorted(right, key=_row_key), tolerance)
    by_value = sorted((_number_of(r[column]), j) for j, r in enumerate(right))
    values = [v for v, _ in by_value]
    edges = []
    for row in left:
        value = _number_of(row[column])
        # A window wider than same_cell's test, never narrower; NaN and infinite rows meet every such row.
        spread = 2 * tolerance * abs(value) + 2 * ABSOLUTE_FLOOR if math.isfinite(value) else 0.0
        lo, hi = bisect.bisect_left(values, value - spread), bisect.bisect_right(values, value + spread)
        edges.append([j for _, j in by_value[lo:hi]
                      if all(same_cell(a, b, tolerance) for a, b in zip(row, right[j], strict=True))])
    owner: list[int | None] = [None] * len(right)

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            holder = owner[j]
            if holder is None or augment(holder, seen):
                owner[j] = i
                return True
        return False

    return all(augment(i, set()) for i in range(len(left)))


def _number_of(value: Cell) -> float:
    """A number cell as a float to sort by; NaN as infinity (bisect needs an order, same_cell tells them apart)."""
    number = float(value) if isinstance(value, int | float) else math.inf
    return math.inf if math.isnan(number) else number


def _same_values(gold: Iterable[Cell], predicted: Iterable[Cell], tolerance: float) -> bool:
    """Two columns hold the same multiset of values (sorted, then pairwise: exact for one value per row)."""
    a = sorted(gold, key=_key)
    b = sorted(predicted, key=_key)
    return len(a) == len(b) and all(same_cell(x, y, tolerance) for x, y in zip(a, b, strict=True))


def same_table(gold: ValueTable, predicted: ValueTable, *, ordered: bool = False,
               tolerance: float = DEFAULT_TOLERANCE) -> ExecutionMatch:
    """Compare two tables: row multisets (or sequences, `ordered`) equal under some pairing of their columns."""
    if len(gold.rows) != len(predicted.rows):
        return ExecutionMatch(False, f"{len(predicted.rows)} row(s), the gold has {len(gold.rows)}")
    if not gold.rows:
        return ExecutionMatch(True)
    width = len(gold.columns)
    if len(predicted.columns) != width:
        return ExecutionMatch(False, f"{len(predicted.columns)} column(s), the gold has {width}")
    gold_columns = [[row[j] for row in gold.rows] for j in range(width)]
    predicted_columns = [[row[i] for row in predicted.rows] for i in range(width)]
    candidates = [[i for i in range(width) if _same_values(gold_columns[j], predicted_columns[i], tolerance)]
                  for j in range(width)]
    unmatched = [gold.columns[j] for j in range(width) if not candidates[j]]
    if unmatched:
        return ExecutionMatch(False, f"no column holds the gold's values of {', '.join(unmatched[:3])}")
    order = sorted(range(width), key=lambda j: len(candidates[j]))
    # Predicted columns equal cell by cell (two all-NULL columns) are interchangeable: only the first unused one of
    # them is tried, or the search would try every order of them, each time with the same rows.
    first_equal = [next(k for k in range(i + 1) if predicted_columns[k] == predicted_columns[i]) for i in range(width)]
    tried = 0
    unordered_match = False

    def rows_under(pairing: Sequence[int]) -> list[Row]:
        return [tuple(row[pairing[j]] for j in range(width)) for row in predicted.rows]

    def search(position: int, chosen: dict[int, int]) -> bool:
        nonlocal tried, unordered_match
        if tried >= MAX_COLUMN_PAIRINGS:
            return False
        if position == width:
            tried += 1
            rows = rows_under([chosen[j] for j in range(width)])
            if ordered and _same_rows_in_order(gold.rows, rows, tolerance):
                return True
            if _same_multiset(gold.rows, rows, tolerance):
                unordered_match = True
                return not ordered
            return False
        j = order[position]
        taken = set(chosen.values())
        for i in candidates[j]:
            if i in taken or any(first_equal[k] == first_equal[i] and k not in taken for k in range(i)):
                continue
            chosen[j] = i
            if search(position + 1, chosen):
                return True
            del chosen[j]
        return False

    if search(0, {}):
        return ExecutionMatch(True)
    if unordered_match:
        return ExecutionMatch(False, "the gold's rows in another order (a ranking)")
    return ExecutionMatch(False, "the rows differ")


def execution_match(gold: Results, predicted: Results | None, *, ordered: bool = False,
                    tolerance: float = DEFAULT_TOLERANCE) -> ExecutionMatch:
    """Execution accuracy of one prediction (SPARQL JSON results; None: no prediction) against its gold."""
    if predicted is None:
        return ExecutionMatch(False, "no result")
    if is_boolean(gold):
        verdict = _verdict(predicted, gold)
        if verdict is None:
            return ExecutionMatch(False, "a table, the gold is a yes/no")
        return ExecutionMatch(verdict == bool(gold["boolean"]), None if verdict == gold["boolean"] else "the other verdict")
    if is_boolean(predicted):
        return ExecutionMatch(False, "a yes/no, the gold is a table")
    return same_table(table(gold), table(predicted), ordered=ordered, tolerance=tolerance)
