"""The statement check before SQL runs: the text is parsed as the database would read it (sqlglot, in the SQLite or
PostgreSQL dialect) and runs only when it is exactly one read-only query — a SELECT, a set operation of SELECTs, or
VALUES, with WITH before it — that holds no writing clause and calls only functions on the dialect's allow-list.

Names are read as the database reads them: a quoted function name (`"pg_read_file"(…)`) and a schema-qualified one
(`pg_catalog.pg_read_file(…)`) are the function they name, so they are checked like the bare name; a PostgreSQL
name quoted in another case is another (unknown) function and is refused like any name not on the list. A text the
parser cannot read whole is refused (fail closed). The database's own read-only mode (`sql.executor`) stays the
barrier behind this check; the check gives a clear one-line reason first and refuses what a read-only transaction
still allows (`set_config` can lift the time limit, `pg_terminate_backend` ends other sessions, `pg_read_file`
reads the server's files, `zeroblob` fills memory).
"""

from __future__ import annotations

from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

Dialect = Literal["sqlite", "postgresql"]

MAX_STATEMENT_CHARS = 100_000  # a question's query is a few hundred characters; parsing stays cheap below this
_READ = {"sqlite": "sqlite", "postgresql": "postgres"}

# The queries that read: one of these at the top (WITH belongs to its query).
_QUERIES: tuple[type[exp.Expression], ...] = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Values,
                                               exp.Subquery)
# Clauses that write or lock anywhere inside (a data-modifying WITH, SELECT … INTO, FOR UPDATE) and statements the
# parser reads without a model of their own (exp.Command).
_WRITING: tuple[type[exp.Expression], ...] = tuple(
    kind for kind in (getattr(exp, name, None) for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "AlterTable", "TruncateTable", "Command",
        "Into", "Lock", "Pragma", "Copy", "Set", "Transaction", "Commit", "Rollback", "Attach", "Detach", "Grant",
        "Revoke", "Analyze", "Use", "LoadData",
    )) if isinstance(kind, type)
)

_NOTHING: tuple[type[exp.Expression], ...] = tuple(
    kind for kind in (getattr(exp, "Semicolon", None),) if isinstance(kind, type))

# Functions sqlglot does not model (parsed as `Anonymous`) that a read-only question may call, per dialect; every
# other such name is refused. Not printf/format: one call with a huge width ran seconds past the time limit (no
# progress handler runs inside it), and no question needs it; not zeroblob/randomblob: a value of any size. Functions sqlglot models (COUNT, LOWER, SUBSTR, STRFTIME, EXTRACT …) are standard
# ones of the language and run.
_COMMON_NAMES = """
    abs round ceil ceiling floor trunc sign sqrt power pow exp ln log log10 log2 mod pi degrees radians sin cos tan
    asin acos atan atan2 cot length char_length character_length octet_length bit_length lower upper trim ltrim
    rtrim btrim substr substring replace instr position strpos left right lpad rpad concat concat_ws coalesce
    ifnull nullif iif greatest least typeof date time datetime julianday strftime unixepoch now current_date
    current_time current_timestamp extract date_part date_trunc to_char to_date to_timestamp to_number age
    make_date make_time make_timestamp split_part regexp_replace regexp_match regexp_matches initcap reverse
    repeat hex char chr unicode ascii glob like row_number rank dense_rank ntile lag lead first_value last_value
    nth_value cume_dist percent_rank count sum avg min max total group_concat string_agg array_agg bool_and bool_or
    every stddev stddev_pop stddev_samp variance var_pop var_samp percentile_cont percentile_disc mode median
    random quote cast translate overlay soundex div gcd lcm factorial scale width_bucket cardinality
    array_length array_to_string string_to_array unnest json_extract json_array_length json_object json_array
    json_type json_valid json_each json_tree json_group_array json_group_object jsonb_array_length
    jsonb_extract_path_text json_extract_path_text to_json to_jsonb isfinite justify_days justify_hours
    date_diff datediff likely unlikely likelihood sign trim
"""
_COMMON = frozenset(_COMMON_NAMES.split())
ALLOWED_FUNCTIONS: dict[Dialect, frozenset[str]] = {
    "sqlite": _COMMON,
    # pg_typeof and pg_column_size read; pg_sleep waits, and the time limit stops it
    "postgresql": _COMMON | {"pg_typeof", "pg_column_size", "pg_sleep", "generate_series", "age", "timezone"},
}


def refusal(sql: str, dialect: Dialect = "sqlite") -> str | None:
    """Why the text is not one read-only query this check lets run (one line), or None when it is."""
    if "\x00" in sql:
        return "the statement holds a NUL character"
    if len(sql) > MAX_STATEMENT_CHARS:
        return f"the statement is longer than {MAX_STATEMENT_CHARS:,} characters"
    try:
        # a lone `;` or a comment after the last one is no statement
        parsed = [s for s in sqlglot.parse(sql, read=_READ[dialect]) if s is not None and not isinstance(s, _NOTHING)]
    except (ParseError, TokenError) as exc:
        return f"sparqlnav could not read this statement as {_name(dialect)} reads it: {_first_line(exc)}"
    except RecursionError:
        return "the statement nests too deeply to be read"
    if not parsed:
        return "no SQL statement given"
    if len(parsed) > 1:
        return f"one statement per request: this holds {len(parsed)} (separated by ';')"
    statement = parsed[0]
    if not isinstance(statement, _QUERIES):
        return f"only a read-only SELECT (or WITH … SELECT) runs, not {_kind(statement)}"
    for node in statement.walk():
        if isinstance(node, _WRITING):
            return f"{_kind(node)} is not allowed in a read-only query"
        if isinstance(node, exp.Anonymous):
            name = _function_name(node, dialect)
            if name not in ALLOWED_FUNCTIONS[dialect]:
                return (f"the function {name}() is not allowed: only functions that read run here (it may have side "
                        "effects or reach outside the database)")
    return None


def _function_name(node: exp.Anonymous, dialect: Dialect) -> str:
    """The name the database calls: unquoted names fold to lower case; a quoted PostgreSQL name keeps its case
    (so `"PG_READ_FILE"` is no function on the list); SQLite matches names in any case."""
    name = node.name
    quoted = isinstance(node.this, exp.Identifier) and node.this.quoted
    if dialect == "postgresql" and quoted:
        return name
    return name.lower()


def _kind(node: exp.Expr) -> str:
    """What a statement or clause is, in the words of SQL (`DELETE`, `SELECT … INTO`, `FOR UPDATE`)."""
    if isinstance(node, exp.Into):
        return "SELECT … INTO"
    if isinstance(node, exp.Lock):
        return "FOR UPDATE/SHARE"
    if isinstance(node, exp.Command):
        return str(node.this).upper() or "this command"
    return type(node).__name__.upper()


def _name(dialect: Dialect) -> str:
    return "SQLite" if dialect == "sqlite" else "PostgreSQL"


def _first_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:200] + ("…" if len(text) > 200 else "")
