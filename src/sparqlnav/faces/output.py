"""How every CLI verb writes what it produced: the one `--format` choice (with `--json` as its shorthand) and the
writers for tables (people), SPARQL JSON, CSV, and Turtle / N-Triples for CONSTRUCT and DESCRIBE results."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any

import pyoxigraph as ox
import typer
from rich.console import Console
from rich.text import Text

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.results import ResultTable, Term, spreadsheet_safe
from sparqlnav.sparql.guard import QueryForm


class OutputFormat(StrEnum):
    """What a verb writes on stdout."""

    table = "table"  # for people: tables and sentences
    json = "json"
    csv = "csv"
    turtle = "turtle"  # CONSTRUCT / DESCRIBE results only
    ntriples = "ntriples"


class FormatError(SparqlnavError):
    """A format the verb (or this result) cannot be written in; the message names the ones it can."""


RDF_FORMATS = frozenset({OutputFormat.turtle, OutputFormat.ntriples})
EVERY_FORMAT = frozenset(OutputFormat)
TABLE_JSON_CSV = frozenset({OutputFormat.table, OutputFormat.json, OutputFormat.csv})
TABLE_JSON = frozenset({OutputFormat.table, OutputFormat.json})

FormatOpt = Annotated[
    OutputFormat | None,
    typer.Option(
        "--format", "-f", case_sensitive=False,
        help="table (for people), json, csv, or for CONSTRUCT/DESCRIBE results turtle or ntriples.",
    ),
]  # fmt: skip
JsonOpt = Annotated[bool, typer.Option("--json", help="Shorthand for --format json.")]


def chosen_format(
    format: OutputFormat | None, json_flag: bool, *, allowed: frozenset[OutputFormat] = EVERY_FORMAT, verb: str
) -> OutputFormat:
    """The verb's format from `--format` and `--json` (which must agree); FormatError for one it cannot write."""
    if json_flag and format not in (None, OutputFormat.json):
        raise FormatError(f"--json and --format {format} disagree: give one of them")
    chosen = OutputFormat.json if json_flag else format or OutputFormat.table
    if chosen not in allowed:
        names = ", ".join(f.value for f in OutputFormat if f in allowed)
        raise FormatError(f"`{verb}` cannot write {chosen.value}: its formats are {names}")
    return chosen


def write_json(data: Any) -> None:
    """One JSON object on one line of stdout."""
    emit(json.dumps(data, ensure_ascii=False, default=str) + "\n")


def records_csv(records: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """CSV of flat records with a header row (missing values empty; lists joined with '; ')."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(columns)
    for record in records:
        writer.writerow([_cell(record.get(c)) for c in columns])
    return buf.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return spreadsheet_safe("; ".join(_cell(v) for v in value))
    return spreadsheet_safe(str(value))


def write_records(records: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Flat records as CSV on stdout."""
    emit(records_csv(records, columns))


def is_graph(form: QueryForm | None) -> bool:
    """True for the query forms whose results are triples."""
    return form in ("CONSTRUCT", "DESCRIBE")


def rdf_text(table: ResultTable, fmt: OutputFormat, prefixes: Mapping[str, str] | None = None) -> str:
    """The triples of a CONSTRUCT/DESCRIBE result as Turtle (with `prefixes`) or N-Triples."""
    triples = [
        ox.Triple(_subject(row["subject"]), ox.NamedNode(row["predicate"].value), _object(row["object"]))
        for row in table.rows
    ]
    if fmt is OutputFormat.turtle:
        # Only prefixes the triples use: a Turtle header of forty unused prefixes hides the data.
        text = " ".join(t.value for row in table.rows for t in row.values())
        used = {p: ns for p, ns in (prefixes or {}).items() if p and ns and ns in text}
        return _serialized(triples, ox.RdfFormat.TURTLE, used)
    return _serialized(triples, ox.RdfFormat.N_TRIPLES, {})


def _serialized(triples: list[ox.Triple], fmt: ox.RdfFormat, prefixes: dict[str, str]) -> str:
    buf = io.BytesIO()  # with an output, serialize writes there and returns None
    ox.serialize(triples, buf, fmt, prefixes=prefixes or None)
    return buf.getvalue().decode()


def _subject(term: Term) -> ox.NamedNode | ox.BlankNode:
    return ox.BlankNode(term.value) if term.kind == "bnode" else ox.NamedNode(term.value)


def _object(term: Term) -> ox.NamedNode | ox.BlankNode | ox.Literal:
    if term.kind == "literal":
        if term.lang:
            return ox.Literal(term.value, language=term.lang)
        return ox.Literal(term.value, datatype=ox.NamedNode(term.datatype) if term.datatype else None)
    return _subject(term)


def check_form(fmt: OutputFormat, form: QueryForm | None) -> None:
    """FormatError when an RDF format is asked for a result that holds no triples."""
    if fmt in RDF_FORMATS and not is_graph(form):
        raise FormatError(f"{fmt.value} is for CONSTRUCT and DESCRIBE results; this query is a {form or 'non-query'}")


def write_result(
    table: ResultTable,
    fmt: OutputFormat,
    *,
    form: QueryForm | None,
    prefixes: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> None:
    """A query result in a machine format on stdout (json, csv, turtle, ntriples); tables for people are the
    verb's own, since they need the graph's labels. With `labels`, CSV gives IRIs their names beside them."""
    check_form(fmt, form)
    if fmt is OutputFormat.json:
        write_json(table.to_sparql_json())
    elif fmt is OutputFormat.csv:
        emit(table.to_csv(labels))
    elif fmt in RDF_FORMATS:
        emit(rdf_text(table, fmt, prefixes))
    else:
        raise FormatError("tables for people are drawn by the verb itself")


# What a terminal acts on rather than shows: C0 and C1 control characters (ESC sequences could clear or rewrite the
# screen) and the bidirectional controls that reorder what follows them (U+202E shows "exe.txt" for "txt.exe").
# Newline and tab are kept where text may have lines (cells, CSV), escaped where it may not (log lines).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str, *, lines: bool = True) -> str:
    """Text from data with what a terminal would act on written as escapes (ESC → \\x1b, U+202E → \\u202e), so it
    cannot drive a terminal; with `lines=False` newlines and tabs too (one log line stays one line)."""
    pattern = _CONTROL if lines else _CONTROL_OR_BREAK
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def emit(text: str) -> None:
    """Machine output (CSV, JSON, RDF) on stdout: as it is into a pipe or file, made terminal-safe on a terminal."""
    sys.stdout.write(terminal_safe(text) if sys.stdout.isatty() else text)


def cell(text: str) -> Text:
    """A table cell of data: shown as it is (no markup, no emoji codes), control characters escaped."""
    return Text(terminal_safe(text))


class DataConsole(Console):
    """A console for output that holds data: no emoji codes (`:label:` stays text), and text printed as a plain
    string has its control characters escaped. Markup is only read where a call asks for it."""

    def __init__(self, *, stderr: bool = False) -> None:
        super().__init__(stderr=stderr, soft_wrap=True, emoji=False)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(terminal_safe(o) if isinstance(o, str) else o for o in objects), **kwargs)
