"""`run_sql`: the statement check, then the database's read-only, bounded run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparqlnav.sql.executor import Caps, SqlRefused, SqlResult, execute
from sparqlnav.sql.guard import refusal

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
