"""The live database as a SQL writer needs to know it, read without copying anything: tables, columns, types, keys
and foreign keys (the database's catalogue, read by `graph.relational`'s readers), row counts (exact where a count
is cheap, PostgreSQL's statistics where it is not), and what the values look like, from bounded queries on a sample
of each table: a low-cardinality column's values, a few samples of the others, smallest and largest of numbers and
dates, and text stored with spaces around it. Kept per database under the home and read again while the database
is unchanged (SQLite: the file's stamp; PostgreSQL: its tables, columns and statistics)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sparqlnav.graph.direct_mapping import Table
from sparqlnav.graph.relational import Database, read_database, sqlite_fingerprint
from sparqlnav.sql.draft import quote_literal, quote_name
from sparqlnav.sql.executor import SqlError
from sparqlnav.sql.run import run_sql

__all__ = ["ColumnProfile", "DatabaseProfile", "TableProfile", "profile_database"]

PROFILE_VERSION = "3"  # 2: booleans as the dialect writes them; 3: empty (NULL) values counted
SAMPLE_ROWS = 5_000  # rows of a table its values are read from
LISTED = 12  # a column with at most this many values in the sample lists them all
SAMPLES = 3  # values shown of other text columns
EXACT_COUNT_UP_TO = 200_000  # PostgreSQL: past its statistics' estimate, a COUNT(*) costs a scan
PROBE_TIMEOUT_S = 5.0
_NUMERIC = re.compile(r"int|real|floa|doub|dec|num|money|serial", re.I)
_TEMPORAL = re.compile(r"date|time", re.I)
_BOOLEAN = re.compile(r"bool", re.I)


@dataclass(frozen=True)
class ColumnProfile:
    """One column: its declared type, where it points, and what its values look like in the sample."""

    name: str
    type: str
    references: str = ""  # "table.column" of a foreign key
    values: tuple[str, ...] = ()  # all the sample's values (a low-cardinality column), most frequent first
    samples: tuple[str, ...] = ()  # a few values of a column with many
    distinct: int = 0  # distinct values in the sample
    smallest: str = ""
    largest: str = ""
    spaced: int = 0  # sample values stored with spaces around them
    empty: int = 0  # sample rows where it is NULL ("still in hospital" is a NULL discharge date)

    @property
    def text(self) -> bool:
        """Whether it holds text (not numbers, dates or truth values)."""
        return not (_NUMERIC.search(self.type) or _TEMPORAL.search(self.type) or self.boolean)

    @property
    def boolean(self) -> bool:
        """Whether it holds truth values (SQLite keeps them as 0 and 1, PostgreSQL as true and false)."""
        return bool(_BOOLEAN.search(self.type))


@dataclass(frozen=True)
class TableProfile:
    """One table: its rows (exact or estimated), key and columns."""

    name: str
    rows: int | None
    exact: bool
    key: tuple[str, ...]
    columns: tuple[ColumnProfile, ...]


@dataclass(frozen=True)
class DatabaseProfile:
    """A database's tables as profiled, in its dialect."""

    dialect: str
    tables: tuple[TableProfile, ...]
    stamp: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def rows(self) -> int:
        """Rows in all tables (estimated where the counts are)."""
        return sum(t.rows or 0 for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        """The profile as JSON (what is kept on disk)."""
        return {"version": PROFILE_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DatabaseProfile:
        """A profile from its JSON."""
        tables = tuple(
            TableProfile(t["name"], t["rows"], t["exact"], tuple(t["key"]),
                         tuple(ColumnProfile(**{**c, "values": tuple(c["values"]), "samples": tuple(c["samples"])})
                               for c in t["columns"]))
            for t in data["tables"]
        )  # fmt: skip
        return cls(data["dialect"], tables, data.get("stamp", ""), tuple(data.get("notes", ())))


def profile_database(
    database: Database, folder: Path | None = None, tables: Sequence[Table] | None = None
) -> DatabaseProfile:
    """The database's profile: read from `folder` when one of its current state is kept there, else made by
    bounded queries (and kept there). `tables`: its tables when the caller has read them already."""
    if tables is None:
        with read_database(database) as reader:
            tables = reader.tables()
    stamp = _stamp(database, tables)
    path = folder / f"{hashlib.sha256((database.shown + stamp).encode()).hexdigest()[:24]}.json" if folder else None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") == PROFILE_VERSION and data.get("stamp") == stamp:
                return DatabaseProfile.from_json(data)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged profile is made again
    profile = DatabaseProfile(database.kind, tuple(_table(database, t) for t in tables), stamp)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = path.with_suffix(".part")
        partial.write_text(json.dumps(profile.to_json()), encoding="utf-8")
        partial.replace(path)
    return profile


def _stamp(database: Database, tables: Sequence[Table]) -> str:
    """What changes when the database does, cheaply: SQLite's file stamp; PostgreSQL's schema and statistics."""
    if database.kind == "sqlite":
        return sqlite_fingerprint(database.path)
    schema = json.dumps([(t.name, [(c.name, c.declared) for c in t.columns]) for t in tables])
    stats = _rows(database, "SELECT relname, reltuples::bigint, n_live_tup FROM pg_class JOIN pg_stat_user_tables "
                            "ON relid = pg_class.oid ORDER BY relname")
    return hashlib.sha256((schema + json.dumps(stats, default=str)).encode()).hexdigest()


def _rows(database: Database, sql: str) -> list[tuple[Any, ...]]:
    try:
        return [tuple(r) for r in run_sql(database, sql, timeout_s=PROBE_TIMEOUT_S, max_rows=1000,
                                          max_bytes=1_000_000).rows]
    except SqlError:
        return []


def _count(database: Database, table: Table) -> tuple[int | None, bool]:
    """The table's rows: exact when cheap; PostgreSQL's estimate for a big table."""
    if database.kind == "postgresql":
        found = _rows(database, f"SELECT reltuples::bigint FROM pg_class WHERE oid = {quote_literal(table.name)}::regclass")
        estimate = int(found[0][0]) if found and found[0][0] is not None else -1
        if estimate > EXACT_COUNT_UP_TO:
            return estimate, False
    found = _rows(database, f"SELECT COUNT(*) FROM {quote_name(table.name)}")
    return (int(found[0][0]), True) if found else (None, False)


def _table(database: Database, table: Table) -> TableProfile:
    rows, exact = _count(database, table)
    refs = {c: f"{fk.target}.{fk.referenced[i]}" for fk in table.foreign_keys for i, c in enumerate(fk.columns)}
    sample = f"(SELECT * FROM {quote_name(table.name)} LIMIT {SAMPLE_ROWS}) AS sample"
    columns = tuple(_column(database, sample, c.name, c.declared, refs.get(c.name, "")) for c in table.columns[:40])
    return TableProfile(table.name, rows, exact, table.key, columns)


def _column(database: Database, sample: str, name: str, kind: str, references: str) -> ColumnProfile:
    column = ColumnProfile(name, kind, references)
    q = quote_name(name)
    if column.boolean:  # no MIN/MAX of a PostgreSQL boolean: its values, as the dialect writes them
        found = _rows(database, f"SELECT {q} FROM {sample} WHERE {q} IS NOT NULL GROUP BY {q} ORDER BY {q}")
        truths = tuple(str(v[0]).lower() if isinstance(v[0], bool) else str(v[0]) for v in found)
        nulls = _rows(database, f"SELECT COUNT(*) - COUNT({q}) FROM {sample}")
        return ColumnProfile(name, kind, references, truths, (), len(truths), empty=int(nulls[0][0]) if nulls else 0)
    if not column.text:
        found = _rows(database, f"SELECT MIN({q}), MAX({q}), COUNT(DISTINCT {q}), COUNT(*) - COUNT({q}) FROM {sample}")
        if found:
            low, high, distinct, nulls = found[0]
            listed: tuple[str, ...] = ()
            if distinct and distinct <= LISTED and not references:
                listed = tuple(str(v[0]) for v in _rows(
                    database, f"SELECT {q} FROM {sample} WHERE {q} IS NOT NULL GROUP BY {q} ORDER BY {q}"))
            column = ColumnProfile(name, kind, references, listed, (), int(distinct or 0),
                                   "" if low is None else str(low), "" if high is None else str(high),
                                   empty=int(nulls or 0))
        return column
    found = _rows(database, f"SELECT {q}, COUNT(*) AS n FROM {sample} WHERE {q} IS NOT NULL GROUP BY {q} "
                            f"ORDER BY n DESC, {q} LIMIT {LISTED + 1}")
    values = [str(v) for v, _ in found]
    distinct_rows = _rows(database, f"SELECT COUNT(DISTINCT {q}), COUNT(*) - COUNT({q}) FROM {sample}")
    distinct = int(distinct_rows[0][0]) if distinct_rows else len(values)
    empty = int(distinct_rows[0][1] or 0) if distinct_rows else 0
    spaced_rows = _rows(database, f"SELECT COUNT(*) FROM {sample} WHERE {q} <> TRIM({q})")
    spaced = int(spaced_rows[0][0]) if spaced_rows else 0
    if len(values) <= LISTED and not references:
        return ColumnProfile(name, kind, references, tuple(values), (), distinct, spaced=spaced, empty=empty)
    return ColumnProfile(name, kind, references, (), tuple(v[:60] for v in values[:SAMPLES]), distinct, spaced=spaced,
                         empty=empty)
