"""SQL run read-only and bounded: the database's own read-only mode is the barrier, a time limit stops a long query,
and the row and byte caps cut a large result (`SqlResult.truncated`).

SQLite: the file opened by a `mode=ro` URI (as `graph.relational` reads it), `PRAGMA query_only`, an authorizer
that allows reading and nothing else (no ATTACH, no PRAGMA with a value, no function outside SQL's own), and a
progress handler that interrupts the statement at the deadline. PostgreSQL: a new connection per request, its
transaction READ ONLY (checked before the statement runs), `statement_timeout` set to what is left of the time
limit before each fetch, and the statement declared as a cursor through the extended protocol, which takes one
statement and no data-modifying WITH.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sparqlnav.errors import SparqlnavError

if TYPE_CHECKING:  # the spec's module pulls in the store; this one needs only its fields
    from sparqlnav.graph.relational import Database

CONNECT_TIMEOUT_S = 10
PROGRESS_EVERY = 1_000  # SQLite VM instructions between two looks at the clock (~tens of microseconds)
PG_FETCH_ROWS = 20  # PostgreSQL rows fetched at a time (SQLite's one by one): few rows are ever in memory past the cap
MIN_VALUE_BYTES = 1 << 20  # SQLite's length limit on any one value, or the byte cap when that is larger
TOO_MUCH_MEMORY = "the statement needed more memory than this server allows: refused"


class SqlError(SparqlnavError):
    """SQL that could not be run, or that failed: one line saying why."""


class SqlRefused(SqlError):
    """Not one read-only SELECT (or WITH … SELECT) statement, or it uses something with side effects."""


class SqlTimeout(SqlError):
    """The time limit stopped the statement."""


@dataclass(frozen=True)
class SqlResult:
    """A statement's columns and rows (Python values as the driver gives them), and whether a cap cut the rows."""

    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]
    truncated: bool


@dataclass(frozen=True)
class Caps:
    """The bounds of one statement: seconds, rows and bytes (the SPARQL side's `Limits`)."""

    timeout_s: float
    max_rows: int
    max_bytes: int


def value_bytes(value: object) -> int:
    """About how many bytes a value takes in a result: its text's UTF-8 length (a blob's own length)."""
    if value is None:
        return 4
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, (int, float, Decimal, bool, dt.date, dt.time, dt.timedelta)):
        return len(str(value))
    return len(str(value).encode("utf-8", "replace"))


class _Collector:
    """Rows gathered under the row and byte caps."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.rows: list[tuple[object, ...]] = []
        self.size = 0
        self.truncated = False

    def take(self, batch: Iterable[Any]) -> bool:
        """Add rows; False once a cap is met (the rest is not wanted)."""
        for row in batch:
            if len(self.rows) >= self.caps.max_rows:
                self.truncated = True
                return False
            row = tuple(row)
            size = sum(value_bytes(v) for v in row) + len(row)
            if self.size + size > self.caps.max_bytes:
                self.truncated = True
                return False
            self.rows.append(row)
            self.size += size
        return True


def execute(database: Database, sql: str, caps: Caps) -> SqlResult:
    """Run one statement on the database under its read-only mode and the caps, with no statement check of ours:
    what this refuses, the database refuses (`run_sql` checks the statement first)."""
    if database.kind == "sqlite":
        return _sqlite(database, sql, caps)
    return _postgresql(database, sql, caps)


# ------------------------------------------------------------------------------------------------ SQLite

# What a read-only SELECT is allowed to do, as SQLite's authorizer names it (sqlite3.SQLITE_*).
_SQLITE_READ_ACTIONS = frozenset({
    sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE,
})
# Functions SQLite has that reach outside the statement (the first is disabled in Python unless enabled).
_SQLITE_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})


def _sqlite_authorizer(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    """Reading only: SELECT, reading columns, functions but those that reach outside, recursive CTEs. No PRAGMA,
    not even a table-valued `pragma_table_info(…)`: declaring its table asks to update sqlite_master's columns,
    which no reading statement should be allowed."""
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _SQLITE_DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action in _SQLITE_READ_ACTIONS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _sqlite(database: Database, sql: str, caps: Caps) -> SqlResult:
    # Here, not at the top: the spec's module pulls in the store, which only a SQLite run needs this for.
    from sparqlnav.graph.relational import read_only_uri

    path = database.path
    if not path.is_file():
        raise SqlError(f"no such SQLite database: {path}")
    deadline = time.monotonic() + caps.timeout_s
    try:
        con = sqlite3.connect(read_only_uri(path), uri=True, isolation_level=None, check_same_thread=False,
                              timeout=min(caps.timeout_s, CONNECT_TIMEOUT_S))
    except (sqlite3.Error, OSError) as exc:
        raise SqlError(f"cannot open {path} as a SQLite database: {exc}") from None
    timed_out = False

    def over_time() -> int:
        nonlocal timed_out
        timed_out = time.monotonic() > deadline
        return 1 if timed_out else 0  # nonzero interrupts the statement

    try:
        con.text_factory = lambda b: b.decode("utf-8", "replace")  # text that is no UTF-8 still reads
        con.execute("PRAGMA query_only = ON")
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        # No value longer than the result may be: one function call (printf('%.*c', 999999999, 'x')) runs past
        # the progress handler, but not past SQLite's own length check, which stops it at once.
        longest = max(MIN_VALUE_BYTES, caps.max_bytes)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, longest)
        con.set_authorizer(_sqlite_authorizer)
        con.set_progress_handler(over_time, PROGRESS_EVERY)
        collector = _Collector(caps)
        try:
            cursor = con.execute(sql)
            columns = tuple(d[0] for d in cursor.description or ())
            # Row by row under the byte budget: a batch fetched before the cap was looked at held 4 GB (issue 39).
            collector.take(iter(cursor.fetchone, None))
        except (sqlite3.Warning, sqlite3.ProgrammingError) as exc:  # "You can only execute one statement at a time."
            raise SqlRefused(f"one statement per request: {_one_line(exc)}") from None
        except MemoryError:
            raise SqlRefused(TOO_MUCH_MEMORY) from None
        except sqlite3.Error as exc:
            if timed_out:
                raise SqlTimeout(f"the query ran past its time limit ({caps.timeout_s:g} s) and was stopped") from None
            message = _one_line(exc)
            if "too big" in message:
                raise SqlRefused(f"a value would be longer than {longest:,} bytes: refused") from None
            if any(why in message for why in ("not authorized", "authorization denied", "readonly", "read-only",
                                              "prohibited")):
                raise SqlRefused(f"refused by the database's read-only mode: {message}") from None
            raise SqlError(message) from None
    finally:
        con.close()
    return SqlResult(columns, tuple(collector.rows), collector.truncated)


# ------------------------------------------------------------------------------------------------ PostgreSQL

def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise SqlError("running SQL on PostgreSQL needs the psycopg driver: pip install 'sparqlnav[postgres]'") from None
    return psycopg


@contextlib.contextmanager
def _pg_connection(database: Database, caps: Caps) -> Iterator[Any]:
    psycopg = _psycopg()
    ms = max(1, int(caps.timeout_s * 1000))
    # Read-only by default for the whole session, and standard strings (a backslash is no escape outside E'…'), as
    # the statement check reads them.
    options = f"-c default_transaction_read_only=on -c statement_timeout={ms} -c standard_conforming_strings=on"
    try:
        given = psycopg.conninfo.conninfo_to_dict(database.target)
    except psycopg.ProgrammingError as exc:
        raise SqlError(f"bad PostgreSQL URL {database.shown}: {_one_line(exc)}") from None
    extra: dict[str, Any] = {"application_name": "sparqlnav", "options": options}
    if "connect_timeout" not in given:
        extra["connect_timeout"] = CONNECT_TIMEOUT_S
    try:
        con = psycopg.connect(database.target, autocommit=False, **extra)
    except psycopg.Error as exc:
        raise SqlError(f"cannot connect to PostgreSQL at {database.shown}: {_one_line(exc)}") from None
    try:
        con.read_only = True
        yield con
    finally:
        with contextlib.suppress(psycopg.Error):
            con.rollback()
        con.close()


def _postgresql(database: Database, sql: str, caps: Caps) -> SqlResult:
    psycopg = _psycopg()
    deadline = time.monotonic() + caps.timeout_s
    collector = _Collector(caps)
    with _pg_connection(database, caps) as con:
        try:
            found = con.execute("SHOW transaction_read_only").fetchone()
            if not found or found[0] != "on":
                raise SqlRefused(f"PostgreSQL at {database.shown} did not start a read-only transaction; nothing ran")
            with con.cursor(name="sparqlnav_sql") as cursor:
                # Parameters (none) send the statement by the extended protocol: one statement only. `%` is then
                # psycopg's placeholder mark, so each is doubled to mean itself.
                cursor.execute(sql.replace("%", "%%"), ())
                columns = tuple(d.name for d in cursor.description or ())
                while True:
                    left = _time_left(deadline, caps)
                    con.execute(f"SET LOCAL statement_timeout = {max(1, int(left * 1000))}")
                    batch = cursor.fetchmany(PG_FETCH_ROWS)
                    if not batch or not collector.take(batch):
                        break
        except MemoryError:
            raise SqlRefused(TOO_MUCH_MEMORY) from None
        except psycopg.errors.QueryCanceled:
            raise SqlTimeout(f"the query ran past its time limit ({caps.timeout_s:g} s) and was stopped") from None
        except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege) as exc:
            raise SqlRefused(f"refused by the database's read-only mode: {_one_line(exc)}") from None
        except psycopg.errors.FeatureNotSupported as exc:  # e.g. a data-modifying WITH in a cursor
            raise SqlRefused(f"refused by the database: {_one_line(exc)}") from None
        except psycopg.ProgrammingError as exc:
            if "multiple commands" in str(exc):
                raise SqlRefused(f"one statement per request: {_one_line(exc)}") from None
            raise SqlError(_one_line(exc)) from None
        except psycopg.Error as exc:
            raise SqlError(_one_line(exc)) from None
    return SqlResult(columns, tuple(collector.rows), collector.truncated)


# Roles whose members read or write the server's files or run programs there: with them, the check before a
# statement is all that stands between a question and the server (issue 39).
_POWERFUL_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")


def role_warning(database: Database, timeout_s: float = 5.0) -> str | None:
    """One line when sparqlnav connects to PostgreSQL with more rights than reading needs (a superuser, or a member
    of a role that reaches the server's files); None when the role can only do what was granted, or for SQLite."""
    if database.kind != "postgresql":
        return None
    with _pg_connection(database, Caps(timeout_s, 1, 1_000)) as con:
        row = con.execute(
            "SELECT current_user, rolsuper, " + ", ".join("pg_has_role(current_user, %s, 'MEMBER')" for _ in _POWERFUL_ROLES)
            + " FROM pg_roles WHERE rolname = current_user", _POWERFUL_ROLES,
        ).fetchone()
    if row is None:
        return None
    user, superuser, *members = row
    powers = ["a superuser"] if superuser else []
    powers += [f"a member of {r}" for r, member in zip(_POWERFUL_ROLES, members, strict=True) if member]
    if not powers:
        return None
    return (f"sparqlnav connects to PostgreSQL at {database.shown} as {user}, {' and '.join(powers)}: give it a role "
            "that can only read the tables it answers from (see the README's database section)")


def _time_left(deadline: float, caps: Caps) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise SqlTimeout(f"the query ran past its time limit ({caps.timeout_s:g} s) and was stopped")
    return left


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__

