"""SQL of an evaluation, run against the database: gold SQL and an answer's final SQL to results the metrics read.

Queries go through `sparqlnav.sql.run_sql` (read-only, one statement, time, row and byte caps), the same bounded
path every face uses. A result becomes SPARQL 1.1 JSON results, so the row metrics, reports and `score` read it as
they read a SPARQL result: columns are variables in their order (a repeated name gets `_2`, `_3`), a NULL is an
unbound cell, and values keep their type as an XSD datatype (int → xsd:integer, float → xsd:double, Decimal →
xsd:decimal, bool → xsd:boolean, dates → xsd:date/dateTime/time, bytes → xsd:hexBinary, text plain). A query that
is ``SELECT EXISTS (…)`` at its top level and gives one 0/1 (or true/false) cell is a yes/no: ``{"boolean": …}``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, Protocol

from sparqlnav.evaluation.execution import top_level
from sparqlnav.graph.relational import Database
from sparqlnav.sql import SqlError, SqlRefused, SqlTimeout, run_sql

XSD = "http://www.w3.org/2001/XMLSchema#"
SqlOutcome = Literal["ok", "empty", "refused", "timeout", "syntax_error", "engine_error"]
_EXISTS = re.compile(r"\s*select\s+exists\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SqlRun:
    """What running one SQL query gave: its results (SPARQL JSON form) or why there are none."""

    results: dict[str, Any] | None
    outcome: SqlOutcome
    error: str | None = None
    truncated: bool = False


class SqlRunner(Protocol):
    """Runs one SQL query against the evaluation's database, never raising for the query's own faults."""

    def __call__(self, sql: str) -> SqlRun:
        """Run `sql` under the runner's limits."""
        ...


@dataclass(frozen=True)
class DatabaseSql:
    """A `SqlRunner` over one database through `sparqlnav.sql.run_sql`, with the run's limits."""

    database: Database
    timeout_s: float
    max_rows: int
    max_bytes: int

    def __call__(self, sql: str) -> SqlRun:
        """Run one query read-only and bounded; a refusal, a timeout or an engine error becomes the outcome."""
        try:
            result = run_sql(self.database, sql, timeout_s=self.timeout_s, max_rows=self.max_rows,
                             max_bytes=self.max_bytes)
        except SqlRefused as exc:
            return SqlRun(None, "refused", _one_line(exc))
        except SqlTimeout as exc:
            return SqlRun(None, "timeout", _one_line(exc))
        except SqlError as exc:
            message = _one_line(exc)
            return SqlRun(None, "syntax_error" if "syntax error" in message.lower() else "engine_error", message)
        results = sql_results(result.columns, result.rows, sql)
        empty = "boolean" not in results and not results["results"]["bindings"]
        return SqlRun(results, "empty" if empty else "ok", truncated=result.truncated)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def is_exists_query(sql: str) -> bool:
    """True for ``SELECT EXISTS (…) …`` at the query's top level: the yes/no form of a SQL dataset's gold."""
    return _EXISTS.match(top_level(sql)) is not None


def sql_results(columns: Sequence[str], rows: Sequence[Sequence[object]], sql: str | None = None) -> dict[str, Any]:
    """A SQL result as SPARQL 1.1 JSON results; a ``SELECT EXISTS`` query's one 0/1 cell as a boolean."""
    if sql is not None and is_exists_query(sql) and len(rows) == 1 and len(rows[0]) == 1:
        only = rows[0][0]
        if isinstance(only, bool) or only in (0, 1):
            return {"head": {}, "boolean": bool(only)}
    names = variable_names(columns)
    bindings = []
    for row in rows:
        binding = {}
        for name, value in zip(names, row, strict=False):
            term = sql_term(value)
            if term is not None:
                binding[name] = term
        bindings.append(binding)
    return {"head": {"vars": names}, "results": {"bindings": bindings}}


def variable_names(columns: Sequence[str]) -> list[str]:
    """Unique variable names for a result's columns: a repeated name gets `_2`, `_3`; an empty one `column_N`."""
    names: list[str] = []
    for number, column in enumerate(columns, start=1):
        base = str(column) or f"column_{number}"
        name, suffix = base, 2
        while name in names:
            name, suffix = f"{base}_{suffix}", suffix + 1
        names.append(name)
    return names


def sql_term(value: object) -> dict[str, str] | None:
    """One SQL value as a SPARQL JSON term with its XSD datatype (None for NULL)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return _typed("true" if value else "false", "boolean")
    if isinstance(value, int):
        return _typed(str(value), "integer")
    if isinstance(value, float):
        text = "NaN" if math.isnan(value) else ("INF" if value > 0 else "-INF") if math.isinf(value) else repr(value)
        return _typed(text, "double")
    if isinstance(value, Decimal):
        return _typed(str(value), "decimal") if value.is_finite() else _typed("NaN", "double")
    if isinstance(value, dt.datetime):
        return _typed(value.isoformat(), "dateTime")
    if isinstance(value, dt.date):
        return _typed(value.isoformat(), "date")
    if isinstance(value, dt.time):
        return _typed(value.isoformat(), "time")
    if isinstance(value, bytes | bytearray | memoryview):
        return _typed(bytes(value).hex().upper(), "hexBinary")
    return {"type": "literal", "value": str(value)}


def _typed(text: str, datatype: str) -> dict[str, str]:
    return {"type": "literal", "value": text, "datatype": XSD + datatype}
