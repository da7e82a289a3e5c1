"""Typed SPARQL result tables and their renderings for machines, people and LLMs."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

import pyoxigraph as ox

from sparqlnav.sparql.prefixes import PrefixMap

if TYPE_CHECKING:
    from sparqlnav.graph.names import Names

TermKind = Literal["uri", "literal", "bnode", "triple"]

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
# How many first and last rows a long table shows (to_markdown, and the labels fetched for it).
SHOWN_HEAD = 5
SHOWN_TAIL = 5
# A table of at most this many rows is shown whole: a model reading "the first 5 and last 5" of 19 rows
# answered from the 10 it saw (issue 14).
SHOWN_WHOLE = 25
# Characters of cell text a rendering spends before it cuts cells; a cell gets at least SHORT_CELL_CHARS and at
# most LONG_CELL_CHARS, so the text of a small table (an abstract, a description) is shown whole.
CELL_BUDGET_CHARS = 4000
SHORT_CELL_CHARS = 120
LONG_CELL_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Term:
    """One RDF term as in SPARQL 1.1 JSON results."""

    kind: TermKind
    value: str
    datatype: str | None = None
    lang: str | None = None

    @classmethod
    def uri(cls, value: str) -> Term:
        """An IRI term."""
        return cls("uri", value)

    @classmethod
    def literal(cls, value: str, datatype: str | None = None, lang: str | None = None) -> Term:
        """A literal; plain xsd:string is stored without a datatype, as SPARQL JSON does."""
        if datatype in (XSD + "string", RDF_LANG_STRING):
            datatype = None
        return cls("literal", value, datatype, lang)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Term:
        """Build from a SPARQL JSON binding value."""
        kind = data.get("type")
        if kind == "typed-literal":  # SPARQL 1.0-era JSON, still sent by some endpoints
            kind = "literal"
        if kind not in ("uri", "literal", "bnode", "triple"):
            raise ValueError(f"unknown SPARQL JSON term type {kind!r}")
        if kind == "triple":
            return cls("triple", json.dumps(data.get("value"), sort_keys=True))
        return (
            cls.literal(str(data["value"]), data.get("datatype"), data.get("xml:lang"))
            if kind == "literal"
            else cls(kind, str(data["value"]))
        )

    @classmethod
    def from_oxigraph(cls, term: Any) -> Term:
        """Build from a pyoxigraph term."""
        if isinstance(term, ox.NamedNode):
            return cls.uri(term.value)
        if isinstance(term, ox.BlankNode):
            return cls("bnode", term.value)
        if isinstance(term, ox.Literal):
            return cls.literal(term.value, term.datatype.value, term.language)
        if isinstance(term, ox.Triple):
            return cls("triple", str(term))
        raise TypeError(f"not an RDF term: {term!r}")

    def to_json(self) -> dict[str, str]:
        """SPARQL JSON binding value."""
        out: dict[str, str] = {"type": self.kind, "value": self.value}
        if self.datatype:
            out["datatype"] = self.datatype
        if self.lang:
            out["xml:lang"] = self.lang
        return out

    def n3(self) -> str:
        """N-Triples-like syntax (used in SPARQL VALUES and prompts)."""
        if self.kind == "uri":
            return f"<{self.value}>"
        if self.kind == "bnode":
            return f"_:{self.value}"
        if self.kind == "triple":
            return self.value
        text = json.dumps(self.value, ensure_ascii=False)
        if self.lang:
            return f"{text}@{self.lang}"
        if self.datatype:
            return f"{text}^^<{self.datatype}>"
        return text


Row = dict[str, Term]



# A spreadsheet reads a cell starting with one of these as a formula (OWASP's CSV injection advice).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_safe(value: str) -> str:
    """A CSV cell a spreadsheet will not run: a leading =, +, -, @, tab or CR gets a ' before it (numbers stay)."""
    if value.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


@dataclass
class ResultTable:
    """Rows of bindings (SELECT), triples (CONSTRUCT/DESCRIBE) or a boolean (ASK).

    `truncated` says a cap cut the result; `cap` names which cap and its size, so the cut is never silent.
    """

    vars: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    boolean: bool | None = None
    truncated: bool = False
    cap: str | None = None
    language: Literal["SPARQL", "SQL"] = "SPARQL"  # a SQL result's columns show without `?`, its NULLs as NULL

    @property
    def is_boolean(self) -> bool:
        """True for an ASK result."""
        return self.boolean is not None

    @property
    def is_empty(self) -> bool:
        """No rows (a boolean result is never empty)."""
        return self.boolean is None and not self.rows

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, var: str) -> list[Term]:
        """All bound values of one variable, in row order."""
        return [row[var] for row in self.rows if var in row]

    def values(self) -> list[Term]:
        """Every bound value, row-major (for set-based metrics)."""
        return [row[v] for row in self.rows for v in self.vars if v in row]

    # -- machines -------------------------------------------------------------------------
    def to_sparql_json(self) -> dict[str, Any]:
        """SPARQL 1.1 JSON results (with a non-standard `sparqlnav` note when truncated)."""
        if self.boolean is not None:
            return {"head": {}, "boolean": self.boolean}
        out: dict[str, Any] = {
            "head": {"vars": list(self.vars)},
            "results": {
                "bindings": [{k: t.to_json() for k, t in row.items()} for row in self.rows]
            },
        }
        if self.truncated:
            out["sparqlnav"] = {"truncated": True, "cap": self.cap}
        return out

    @classmethod
    def from_sparql_json(cls, data: Mapping[str, Any]) -> ResultTable:
        """Parse SPARQL 1.1 JSON results."""
        if "boolean" in data:
            return cls(boolean=bool(data["boolean"]))
        head = data.get("head") or {}
        bindings = (data.get("results") or {}).get("bindings") or []
        rows = [{k: Term.from_json(v) for k, v in b.items()} for b in bindings]
        return cls(vars=list(head.get("vars") or []), rows=rows)

    def to_csv(self, labels: Mapping[str, str] | None = None) -> str:
        """SPARQL 1.1 CSV results (plain values; a value a spreadsheet would read as a formula gets a leading ');
        with `labels`, a column of IRIs is followed by `<name>_label`, their names (an IRI alone says little)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\r\n")
        if self.boolean is not None:
            writer.writerow(["boolean"])
            writer.writerow(["true" if self.boolean else "false"])
            return buf.getvalue()
        named = {v for v in self.vars if labels and any(v in r and r[v].kind == "uri" for r in self.rows)}
        writer.writerow([h for v in self.vars for h in ((v, f"{v}_label") if v in named else (v,))])
        for row in self.rows:
            line: list[str] = []
            for v in self.vars:
                line.append(spreadsheet_safe(row[v].value) if v in row else "")
                if v in named:
                    term = row.get(v)
                    label = (labels or {}).get(term.value, "") if term is not None and term.kind == "uri" else ""
                    line.append(spreadsheet_safe(label))
            writer.writerow(line)
        return buf.getvalue()

    # -- people and LLMs ------------------------------------------------------------------
    def display_rows(
        self, prefixes: PrefixMap | None = None, labels: Mapping[str, str] | None = None, *, for_people: bool = False
    ) -> list[list[str]]:
        """Rows as display strings: compact IRIs with labels, literals with their datatype when not obvious
        (`for_people`: see `show_term`)."""
        # An unbound SPARQL variable is nothing; a SQL NULL is a value a reader must see as such.
        null = "NULL" if self.language == "SQL" else ""
        return [[show_term(row.get(v), prefixes, labels, for_people=for_people) if v in row else null
                 for v in self.vars] for row in self.rows]

    def shown_rows(self, head: int = SHOWN_HEAD, tail: int = SHOWN_TAIL, whole: int = SHOWN_WHOLE) -> list[Row]:
        """The rows a rendering shows: all of them up to `whole` (or `head + tail`) rows, else the first `head`
        and the last `tail`."""
        if len(self.rows) <= max(whole, head + tail):
            return list(self.rows)
        return self.rows[:head] + self.rows[len(self.rows) - tail :]

    def to_markdown(
        self,
        prefixes: PrefixMap | None = None,
        labels: Mapping[str, str] | None = None,
        *,
        head: int = SHOWN_HEAD,
        tail: int = SHOWN_TAIL,
        whole: int = SHOWN_WHOLE,
        max_cell: int | None = None,
        others: str = "a FILTER or LIMIT/OFFSET shows others",
    ) -> str:
        """A markdown table for an LLM: whole up to `whole` rows, else first and last rows; cells cut only past
        their share of the budget (or `max_cell`); every cut stated (`others`: how the reader may see the rest)."""
        if self.boolean is not None:
            return f"ASK result: {'true' if self.boolean else 'false'}"
        if not self.rows:
            return "The query returned no rows."
        kept = self.shown_rows(head, tail, whole)
        cut = len(kept) < len(self.rows)
        shown = ResultTable(self.vars, kept, language=self.language).display_rows(prefixes, labels)
        limit = max_cell if max_cell is not None else cell_limit(len(shown), len(self.vars))
        cells = [[clip(c, limit) for c in r] for r in shown]
        clipped = sum(len(c) > limit for r in shown for c in r)
        lines = [
            "| " + " | ".join(("?" if self.language == "SPARQL" else "") + v for v in self.vars) + " |",
            "|" + "---|" * len(self.vars),
        ]
        body = [*cells[:head], ["…"] * len(self.vars), *cells[head:]] if cut else cells
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body]
        total = f"{len(self.rows)} row{'s' if len(self.rows) != 1 else ''}"
        if cut:
            total += f" in total; the first {head} and last {tail} are shown; {others}"
        if self.truncated:
            total += f"; the result was cut at a cap ({self.cap}), more rows exist"
        if clipped:
            total += f"; {clipped} cell{'s' if clipped != 1 else ''} cut at {limit:,} characters (…)"
        lines.append(f"({total}.)")
        return "\n".join(lines)


def cell_limit(rows: int, columns: int) -> int:
    """Characters a cell may show in a table of `rows` × `columns` shown cells: the budget shared out."""
    share = CELL_BUDGET_CHARS // max(1, rows * columns)
    return max(SHORT_CELL_CHARS, min(LONG_CELL_CHARS, share))


def shown_labels(
    table: ResultTable, names: Names, *, head: int = SHOWN_HEAD, tail: int = SHOWN_TAIL, whole: int = SHOWN_WHOLE
) -> dict[str, str]:
    """The labels of the IRIs in the rows a rendering of `table` with `head`, `tail` and `whole` shows."""
    iris = [t.value for row in table.shown_rows(head, tail, whole) for t in row.values() if t.kind == "uri"]
    return names.labels_of(iris) if iris else {}


def clip(text: str, limit: int) -> str:
    """Shorten text to at most `limit` characters, marking the cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def show_term(
    term: Term | None,
    prefixes: PrefixMap | None = None,
    labels: Mapping[str, str] | None = None,
    *,
    for_people: bool = False,
) -> str:
    """How a person should see one term: `wd:Q42 (Douglas Adams)`, `"12"^^xsd:integer` shown as `12`. `for_people`
    (a table nobody copies names from): an IRI no prefix shortens shows its name alone, as a database's row
    (`<http://sparqlnav.local/db/library/authors/id=2>`) is read as "Jorge Luis Borges"."""
    if term is None:
        return ""
    if term.kind == "uri":
        short = prefixes.compact(term.value) if prefixes else f"<{term.value}>"
        label = labels.get(term.value) if labels else None
        if label and for_people and short.startswith("<"):
            return label
        return f"{short} ({label})" if label else short
    if term.kind == "literal":
        # A value with outer spaces ("Lyon ") is quoted so they show: unquoted, a model copied "Lyon" and matched
        # nothing.
        value = json.dumps(term.value, ensure_ascii=False) if term.value != term.value.strip() else term.value
        if term.lang:
            return f"{value} @{term.lang}"
        if term.datatype and not term.datatype.startswith(XSD):
            dt = prefixes.compact(term.datatype) if prefixes else f"<{term.datatype}>"
            return f"{value} ^^{dt}"
        if term.datatype in (XSD + "double", XSD + "float"):
            return plain_number(term.value)
        return value
    return f"_:{term.value}" if term.kind == "bnode" else term.value


def plain_number(text: str) -> str:
    """A double as a person writes it: 18.2, not 1.8200000000000003E1 (12 significant digits, no exponent)."""
    try:
        number = float(text)
    except ValueError:
        return text
    if number != number or number in (float("inf"), float("-inf")):
        return text  # NaN, INF: as the engine wrote them
    shown = f"{number:.12g}"
    if "e" in shown:  # very large or small: written out in full
        shown = format(Decimal(shown), "f")
    return shown


def table_from_rows(vars: Iterable[str], rows: Iterable[Mapping[str, Term]]) -> ResultTable:
    """Build a table from plain mappings."""
    return ResultTable(vars=list(vars), rows=[dict(r) for r in rows])
