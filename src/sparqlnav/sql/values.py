"""Where a text is stored in a database: the text columns that hold it, compared without case and surrounding
spaces, with the value as stored (a town's name with a trailing space). The SQL writer resolves what a question
names with it; the SQL builder, after a condition on a text matched nothing, says which other column holds the text
("Young" is a doctor's last name, not a patient's). Bounded: tables up to `SCANNED_ROWS` rows, one small query a
column, a time cap each; a query that fails is skipped (a hint, never a verdict)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sparqlnav.graph.relational import Database
from sparqlnav.sql.draft import quote_literal, quote_name
from sparqlnav.sql.executor import SqlError
from sparqlnav.sql.run import run_sql

__all__ = ["SCANNED_ROWS", "Place", "TextColumn", "stored_in"]

SCANNED_ROWS = 200_000  # tables up to this size are searched; bigger ones only by values a profile listed
PROBE_SECONDS = 3.0


@dataclass(frozen=True)
class TextColumn:
    """A text column that may hold a value, with its table's rows (None: unknown)."""

    table: str
    column: str
    rows: int | None = None


@dataclass(frozen=True)
class Place:
    """A column that holds a text, and the text as stored there."""

    table: str
    column: str
    stored: str

    @property
    def shown(self) -> str:
        """`table.column`."""
        return f"{self.table}.{self.column}"


def stored_in(database: Database, columns: Iterable[TextColumn], text: str, *, limit: int = 3,
              within: bool = False) -> list[Place]:
    """The columns (at most `limit`) whose values include `text`, ignoring case and surrounding spaces (`within`:
    a value that contains it, as a part of a longer text, with its first such value)."""
    found: list[Place] = []
    wanted = text.strip().lower()
    if within:
        pattern = "%" + wanted.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        test = f"LOWER({{column}}) LIKE {quote_literal(pattern)} ESCAPE '\\'"
    else:
        test = f"LOWER(TRIM({{column}})) = {quote_literal(wanted)}"
    for c in columns:
        if len(found) >= limit:
            break
        if c.rows is not None and c.rows > SCANNED_ROWS:
            continue
        sql = (f"SELECT DISTINCT {quote_name(c.column)} FROM {quote_name(c.table)} WHERE "
               f"{test.replace('{column}', quote_name(c.column))} LIMIT 1")
        try:
            rows = run_sql(database, sql, timeout_s=PROBE_SECONDS, max_rows=1, max_bytes=10_000).rows
        except SqlError:
            continue
        found += [Place(c.table, c.column, str(r[0])) for r in rows[:1]]
    return found
