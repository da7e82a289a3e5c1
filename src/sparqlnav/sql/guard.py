"""The statement check before SQL runs: exactly one read-only SELECT (or WITH … SELECT) statement, with no word of a
writing statement and no function with side effects outside strings, quoted names and comments.

The database's own read-only mode (`sql.executor`) is the real barrier; this check gives a clear one-line reason
first, and refuses what a read-only transaction still allows (`set_config` can lift the time limit,
`pg_terminate_backend` ends other sessions, `pg_read_file` reads the server's files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["sqlite", "postgresql"]

# Words only writing statements use inside a SELECT: a data-modifying WITH (PostgreSQL), SELECT … INTO a new table,
# FOR UPDATE; and the statements SQLite or PostgreSQL would run if a second one slipped in. A column named so is
# written in double quotes ("update"), which this check reads as a name. Kept short: every word here is one a
# question's column may not be called unquoted.
WRITING_WORDS = frozenset({
    "insert", "update", "delete", "merge", "upsert", "into", "drop", "create", "alter", "truncate", "attach",
    "detach", "pragma", "copy", "vacuum", "reindex", "grant", "revoke",
})
# Functions with side effects, or that run SQL this check cannot see (query_to_xml), by name.
SIDE_EFFECT_FUNCTIONS = frozenset({
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",  # SQLite (and its shell's)
    "set_config", "nextval", "setval", "currval", "lastval", "txid_current", "dblink", "query_to_xml",
    "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml", "cursor_to_xmlschema", "table_to_xml",
    "table_to_xmlschema", "table_to_xml_and_xmlschema", "schema_to_xml", "schema_to_xmlschema",
    "schema_to_xml_and_xmlschema", "database_to_xml", "database_to_xmlschema", "database_to_xml_and_xmlschema",
})
# Function name prefixes with side effects: PostgreSQL's administration (pg_terminate_backend, pg_read_file,
# pg_advisory_lock, pg_reload_conf …), large objects (lo_import …), dblink_* and adminpack's file functions.
SIDE_EFFECT_PREFIXES = ("pg_", "lo_", "dblink", "file_")
# pg_ functions that only read or only wait (the time limit stops a long sleep).
HARMLESS_PG = frozenset({"pg_typeof", "pg_sleep", "pg_column_size"})

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<line_comment>--[^\n]*)
  | (?P<block_comment>/\*.*?(?:\*/|\Z))
  | (?P<escape_string>[Ee]'(?:[^'\\]|\\.|'')*(?:'|\Z))
  | (?P<string>[XxBbNn]?'(?:[^']|'')*(?:'|\Z))
  | (?P<dollar>\$(?P<tag>[A-Za-z_][A-Za-z_0-9]*)?\$)
  | (?P<quoted>"(?:[^"]|"")*(?:"|\Z))
  | (?P<sqlite_quoted>`(?:[^`]|``)*(?:`|\Z)|\[[^\]]*(?:\]|\Z))
  | (?P<word>[A-Za-z_][A-Za-z_0-9$]*)
  | (?P<semicolon>;)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_ONE = re.compile(".", re.DOTALL)


@dataclass(frozen=True)
class Word:
    """A bare word of the statement (lower-cased) and whether a `(` follows it: a function call."""

    text: str
    called: bool


def words(sql: str, dialect: Dialect = "sqlite") -> tuple[list[Word], int]:
    """The statement's bare words (outside strings, quoted names and comments) and how many statements it holds
    (text after the last `;` that is only space or comments does not count). SQLite also quotes names in `…`
    and [ ]; PostgreSQL has $tag$ strings (and [ ] index arrays, so their insides are read)."""
    found: list[Word] = []
    statements, pending = 0, False
    pos = 0
    tokens: list[tuple[str, str]] = []
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if m is None:  # pragma: no cover - `other` matches any character
            break
        kind = m.lastgroup or "other"
        if kind == "tag":
            kind = "dollar"
        if kind == "sqlite_quoted":
            if dialect != "sqlite":
                kind, m = "other", _ONE.match(sql, pos)
                assert m is not None
            else:
                kind = "quoted"
        if kind == "escape_string":  # PostgreSQL's E'…' reads backslash escapes (\' inside); SQLite has none
            kind = "string" if dialect == "postgresql" else "word"
            if kind == "word":
                m = re.compile(r"[Ee]").match(sql, pos)
                assert m is not None
        if kind == "dollar" and dialect != "postgresql":
            kind, m = "other", _ONE.match(sql, pos)
            assert m is not None
        if kind == "dollar":  # a PostgreSQL dollar-quoted string runs to the same tag
            end = sql.find(m.group(0), m.end())
            pos = len(sql) if end < 0 else end + len(m.group(0))
            tokens.append(("string", ""))
            pending = True
            continue
        tokens.append((kind, m.group(0)))
        pos = m.end()
        if kind == "semicolon":
            statements += pending
            pending = False
        elif kind not in ("space", "line_comment", "block_comment"):
            pending = True
    statements += pending
    meaningful = [(k, t) for k, t in tokens if k not in ("space", "line_comment", "block_comment")]
    for i, (kind, text) in enumerate(meaningful):
        if kind == "word":
            called = i + 1 < len(meaningful) and meaningful[i + 1][1] == "("
            found.append(Word(text.lower(), called))
    return found, statements


def refusal(sql: str, dialect: Dialect = "sqlite") -> str | None:
    """Why the text is not one read-only SELECT statement (one line), or None when it is."""
    if "\x00" in sql:
        return "the statement holds a NUL character"
    found, statements = words(sql, dialect)
    if statements == 0:
        return "no SQL statement given"
    if statements > 1:
        return f"one statement per request: this holds {statements} (separated by ';')"
    first = found[0].text if found else ""
    if first not in ("select", "with", "values"):
        shown = first.upper() or sql.strip()[:20]
        return f"only a read-only SELECT (or WITH … SELECT) runs, not {shown}"
    for w in found:
        if w.called and _side_effect(w.text):
            return f"the function {w.text}() is not allowed: it has side effects or reaches outside the database"
        if w.text in WRITING_WORDS and not w.called:
            return f"{w.text.upper()} is not allowed in a read-only query (quote a column of that name: \"{w.text}\")"
    return None


def _side_effect(name: str) -> bool:
    if name in SIDE_EFFECT_FUNCTIONS:
        return True
    return name.startswith(SIDE_EFFECT_PREFIXES) and name not in HARMLESS_PG
