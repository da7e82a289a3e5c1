"""Read-only, bounded SQL (issue 25, item 3): `sparqlnav.sql.run_sql` on SQLite and on a real PostgreSQL refuses
every write form with the data unchanged, stops a slow query at its time limit, and cuts results at the caps."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from postgres import Postgres
from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.relational import Database, database_spec
from sparqlnav.sql import SqlError, SqlRefused, SqlResult, SqlTimeout, run_sql
from sparqlnav.sql.executor import Caps, execute
from sparqlnav.sql.guard import refusal

SCHEMA = """
CREATE TABLE cities (id INTEGER PRIMARY KEY, name TEXT NOT NULL, population INTEGER, area NUMERIC(8, 2));
CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, city_id INTEGER REFERENCES cities (id), "update" TEXT);
INSERT INTO cities VALUES (1, 'Lyon', 522000, 47.87), (2, 'Nantes', 320000, 65.19), (3, 'Brest', 139000, 49.51);
INSERT INTO people VALUES (1, 'Ana', 1, 'x'), (2, 'Bo', 1, NULL), (3, 'Cy', 2, NULL), (4, 'Di', NULL, 'y');
"""
LIMITS = {"timeout_s": 5.0, "max_rows": 1000, "max_bytes": 1_000_000}

# Every write form, for both databases; each must be refused by the check, and by the database without it.
WRITES_BOTH = [
    "INSERT INTO cities VALUES (9, 'Paris', 1, 1)",
    "UPDATE cities SET population = 0",
    "DELETE FROM people",
    "DROP TABLE people",
    "CREATE TABLE extra (a INTEGER)",
    "ALTER TABLE cities ADD COLUMN mayor TEXT",
    "WITH gone AS (DELETE FROM people RETURNING id) SELECT * FROM gone",
    "SELECT 1; DELETE FROM people",
    "SELECT * FROM cities; DROP TABLE cities",
]
WRITES_SQLITE = [
    *WRITES_BOTH,
    "REPLACE INTO cities VALUES (1, 'Lyon', 0, 0)",
    "ATTACH DATABASE '{folder}/other.db' AS other",
    "PRAGMA query_only = OFF",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode = WAL",
    "VACUUM INTO '{folder}/copy.db'",
    "CREATE TEMP TABLE scratch (a INTEGER)",
    "SELECT load_extension('/tmp/nothing.so')",
    "BEGIN IMMEDIATE",
]
WRITES_POSTGRES = [
    *WRITES_BOTH,
    "TRUNCATE people",
    "COPY cities TO STDOUT",
    "COPY cities FROM '/etc/hostname'",
    "SELECT * INTO copied FROM cities",
    "SELECT * FROM cities FOR UPDATE",
    "SELECT nextval('counter')",
    "SELECT setval('counter', 100)",
    "SELECT set_config('statement_timeout', '0', false)",
    "SELECT lo_import('/etc/hostname')",
    "SELECT pg_terminate_backend(pg_backend_pid())",
    "SELECT dblink('dbname=postgres', 'DROP TABLE people')",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT pg_advisory_lock(1)",
    "SELECT E'\\'', set_config('statement_timeout', '0', false) -- '",
]
# Of those, what a PostgreSQL READ ONLY transaction (as a superuser) still lets through: only the check stops them.
# Whatever they do ends with the transaction, which is rolled back (lo_import's object is gone afterwards).
PASS_READ_ONLY = {
    "SELECT set_config('statement_timeout', '0', false)",
    "SELECT lo_import('/etc/hostname')",
    "SELECT pg_terminate_backend(pg_backend_pid())",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT pg_advisory_lock(1)",
    "SELECT E'\\'', set_config('statement_timeout', '0', false) -- '",
}


# ---------------------------------------------------------------- SQLite


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Database:
    path = tmp_path / "towns.db"
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.commit()
    con.close()
    spec = database_spec(f"sqlite:///{path}")
    assert spec is not None
    return spec


def sqlite_state(db: Database) -> tuple[str, tuple[str, ...]]:
    """The file's bytes' checksum and the folder's files (no journal, WAL or attached file appears)."""
    return hashlib.sha256(db.path.read_bytes()).hexdigest(), tuple(sorted(os.listdir(db.path.parent)))


def test_sqlite_reads_with_driver_values(sqlite_db: Database) -> None:
    result = run_sql(sqlite_db, "SELECT name, population FROM cities WHERE name LIKE '%t%' ORDER BY population DESC",
                     **LIMITS)
    assert result == SqlResult(("name", "population"), (("Nantes", 320000), ("Brest", 139000)), False)
    quoted = run_sql(sqlite_db, 'SELECT name, "update" FROM people WHERE "update" IS NOT NULL -- DELETE', **LIMITS)
    assert quoted.rows == (("Ana", "x"), ("Di", "y"))


@pytest.mark.parametrize("sql", WRITES_SQLITE)
def test_sqlite_write_forms_are_refused_and_change_nothing(sqlite_db: Database, sql: str) -> None:
    sql = sql.format(folder=sqlite_db.path.parent)
    before = sqlite_state(sqlite_db)
    with pytest.raises(SqlRefused) as refused:
        run_sql(sqlite_db, sql, **LIMITS)
    assert "\n" not in str(refused.value) and isinstance(refused.value, SparqlnavError)
    # The database's own read-only mode holds without the check: the statement fails there too.
    with pytest.raises(SqlError):
        execute(sqlite_db, sql, Caps(**LIMITS))
    assert sqlite_state(sqlite_db) == before


def test_sqlite_slow_query_is_stopped_at_the_limit(sqlite_db: Database) -> None:
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    started = time.monotonic()
    with pytest.raises(SqlTimeout, match=r"time limit \(0.5 s\)"):
        run_sql(sqlite_db, endless, timeout_s=0.5, max_rows=10, max_bytes=10_000)
    assert 0.5 <= time.monotonic() - started < 1.5


def test_sqlite_caps_cut_rows_and_bytes(sqlite_db: Database) -> None:
    many = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) SELECT i FROM n"
    cut = run_sql(sqlite_db, many, timeout_s=5, max_rows=1200, max_bytes=1_000_000)
    assert cut.truncated and len(cut.rows) == 1200 and cut.rows[-1] == (1200,)
    whole = run_sql(sqlite_db, many, timeout_s=5, max_rows=5000, max_bytes=1_000_000)
    assert not whole.truncated and len(whole.rows) == 5000  # exactly the cap: nothing was cut
    wide = f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT '{'x' * 1000}' FROM n"
    by_bytes = run_sql(sqlite_db, wide, timeout_s=5, max_rows=1000, max_bytes=10_000)
    assert by_bytes.truncated and len(by_bytes.rows) == 9  # 1,001 bytes a row


def test_sqlite_errors_are_one_line(sqlite_db: Database, tmp_path: Path) -> None:
    with pytest.raises(SqlError, match=r"^no such column: nope$"):
        run_sql(sqlite_db, "SELECT nope FROM cities", **LIMITS)
    with pytest.raises(SqlError, match="no such SQLite database"):
        run_sql(Database("sqlite", str(tmp_path / "absent.db"), "sqlite:///absent.db"), "SELECT 1", **LIMITS)
    with pytest.raises(SqlRefused, match="no SQL statement"):
        run_sql(sqlite_db, " -- nothing\n ;", **LIMITS)


# ---------------------------------------------------------------- the statement check


@pytest.mark.parametrize(("sql", "dialect", "refused"), [
    ("SELECT 'DELETE FROM t; DROP' AS words", "sqlite", False),
    ('SELECT "delete", [insert], `drop` FROM t', "sqlite", False),
    ("SELECT replace(name, 'a', 'b') FROM t;  -- one statement and a comment", "sqlite", False),
    ("SELECT 1 /* ; DROP TABLE t */", "sqlite", False),
    ("SELECT $$; DROP TABLE t$$", "postgresql", False),
    ("SELECT $x$ ' $x$, set_config('a', 'b', false)", "postgresql", True),  # the set_config is outside the string
    ("SELECT E'\\'', nextval('s') -- '", "postgresql", True),  # E'\'' is one quote; nextval is outside it
    ("SELECT (ARRAY[1])[set_config('a', 'b', false)::int]", "postgresql", True),  # [ ] is no quote in PostgreSQL
    ("EXPLAIN ANALYZE DELETE FROM t", "postgresql", True),
    ("SELECT pg_sleep(1), pg_typeof(1)", "postgresql", False),
])
def test_the_check_reads_strings_names_and_comments(sql: str, dialect: str, refused: bool) -> None:
    assert (refusal(sql, dialect) is not None) == refused  # type: ignore[arg-type]


# ---------------------------------------------------------------- a real PostgreSQL


@pytest.fixture(scope="module")
def postgres() -> Iterator[Database]:
    """A private PostgreSQL holding the towns database (a sequence too); yields its spec."""
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.importorskip("psycopg", reason="no psycopg (pip install -e '.[dev]')")
    import psycopg

    with Postgres() as server:
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute("CREATE DATABASE towns")
        with psycopg.connect(server.url("towns"), autocommit=True) as con:
            con.execute(SCHEMA + "CREATE SEQUENCE counter;")  # type: ignore[call-overload]  # a literal script
        spec = database_spec(server.url("towns"))
        assert spec is not None
        yield spec


def postgres_state(db: Database) -> str:
    """Every table's rows, the sequence, the large objects and the relations, as one checksum."""
    import psycopg

    with psycopg.connect(db.target, autocommit=True) as con:
        parts = [
            con.execute("SELECT string_agg(relname::text || relkind::text, ',' ORDER BY relname) FROM pg_class "
                        "WHERE relnamespace = 'public'::regnamespace").fetchone(),
            con.execute("SELECT string_agg(c::text, ',' ORDER BY id) FROM cities c").fetchone(),
            con.execute("SELECT string_agg(p::text, ',' ORDER BY id) FROM people p").fetchone(),
            con.execute("SELECT last_value, is_called FROM counter").fetchone(),
            con.execute("SELECT count(*) FROM pg_largeobject_metadata").fetchone(),
        ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@pytest.mark.slow
def test_postgresql_reads_with_driver_values(postgres: Database) -> None:
    result = run_sql(postgres, "SELECT name, area FROM cities WHERE name LIKE 'L%' OR population < 200000 ORDER BY id",
                     **LIMITS)
    assert result == SqlResult(("name", "area"), (("Lyon", Decimal("47.87")), ("Brest", Decimal("49.51"))), False)


@pytest.mark.slow
@pytest.mark.parametrize("sql", WRITES_POSTGRES)
def test_postgresql_write_forms_are_refused_and_change_nothing(postgres: Database, sql: str) -> None:
    before = postgres_state(postgres)
    with pytest.raises(SqlRefused) as refused:
        run_sql(postgres, sql, **LIMITS)
    assert "\n" not in str(refused.value)
    if sql in PASS_READ_ONLY:
        with contextlib.suppress(SqlError):  # what READ ONLY lets through ends with the rolled-back transaction
            execute(postgres, sql, Caps(**LIMITS))
    else:
        with pytest.raises(SqlError):  # the READ ONLY transaction (or the one-statement cursor) refuses it alone
            execute(postgres, sql, Caps(**LIMITS))
    assert postgres_state(postgres) == before


@pytest.mark.slow
def test_postgresql_sleep_is_stopped_at_the_limit(postgres: Database) -> None:
    started = time.monotonic()
    with pytest.raises(SqlTimeout, match=r"time limit \(0.5 s\)"):
        run_sql(postgres, "SELECT pg_sleep(10)", timeout_s=0.5, max_rows=10, max_bytes=10_000)
    assert 0.5 <= time.monotonic() - started < 1.5
    started = time.monotonic()  # a slow query whose rows come slowly is stopped as a whole, not per fetch
    with pytest.raises(SqlTimeout):
        run_sql(postgres, "SELECT i, pg_sleep(0.002) FROM generate_series(1, 5000) AS i", timeout_s=1.0,
                max_rows=10_000, max_bytes=10_000_000)
    assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_postgresql_caps_cut_rows_and_bytes(postgres: Database) -> None:
    cut = run_sql(postgres, "SELECT i FROM generate_series(1, 5000) AS i", timeout_s=5, max_rows=1200,
                  max_bytes=1_000_000)
    assert cut.truncated and len(cut.rows) == 1200 and cut.rows[-1] == (1200,)
    whole = run_sql(postgres, "SELECT i FROM generate_series(1, 5000) AS i", timeout_s=5, max_rows=5000,
                    max_bytes=1_000_000)
    assert not whole.truncated and len(whole.rows) == 5000
    wide = run_sql(postgres, "SELECT repeat('x', 1000) FROM generate_series(1, 100)", timeout_s=5, max_rows=1000,
                   max_bytes=10_000)
    assert wide.truncated and len(wide.rows) == 9


@pytest.mark.slow
def test_postgresql_errors_are_one_line(postgres: Database) -> None:
    with pytest.raises(SqlError, match=r'^column "nope" does not exist$'):
        run_sql(postgres, "SELECT nope FROM cities", **LIMITS)
    with pytest.raises(SqlError, match="operator does not exist: text > integer"):
        run_sql(postgres, "SELECT name FROM cities WHERE name > 3", **LIMITS)
