"""`run_sql`: the statement check, then the database's read-only, bounded run."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sparqlnav.sql.executor import Caps, SqlError, SqlRefused, SqlResult, execute
from sparqlnav.sql.guard import refusal
from sparqlnav.trace import Trace

if TYPE_CHECKING:
    from sparqlnav.graph.relational import Database


def run_sql(database: Database, sql: str, *, timeout_s: float, max_rows: int, max_bytes: int) -> SqlResult:
    """Run one read-only SELECT on the database within `timeout_s` seconds, keeping at most `max_rows` rows and
    `max_bytes` bytes (SqlRefused, SqlTimeout, SqlError: one line each)."""
    if not timeout_s > 0 or max_rows < 1 or max_bytes < 1:
        raise ValueError("timeout_s, max_rows and max_bytes must be positive")
    reason = refusal(sql, database.kind)
    if reason is not None:
        raise SqlRefused(reason)
    return execute(database, sql, Caps(timeout_s, max_rows, max_bytes))


def run_traced(database: Database, sql: str, caps: Caps, trace: Trace, *, purpose: str) -> tuple[SqlResult | None, str | None]:
    """`run_sql` recorded as a `sql` trace event (query, ok, rows or error, ms, purpose); the result, or the error's
    one line. Every strategy that runs SQL for a question records it this way."""
    started = time.monotonic()
    try:
        result = run_sql(database, sql, timeout_s=caps.timeout_s, max_rows=caps.max_rows, max_bytes=caps.max_bytes)
    except SqlError as exc:
        trace.emit("sql", query=sql, ok=False, error=str(exc), purpose=purpose,
                   ms=round((time.monotonic() - started) * 1000, 1))
        return None, str(exc)
    trace.emit("sql", query=sql, ok=True, rows=len(result.rows), truncated=result.truncated, purpose=purpose,
               ms=round((time.monotonic() - started) * 1000, 1))
    return result, None
