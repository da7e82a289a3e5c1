"""The W3C Direct Mapping of relational tables to RDF (https://www.w3.org/TR/rdb-direct-mapping/), with literals
typed by R2RML's natural mapping of SQL values (https://www.w3.org/TR/r2rml/#natural-mapping).

For a base IRI `B` (ending in `/`) and a table `T`:
- the table is the class `<B/T>`, and every row is typed with it;
- a row of a table with a primary key is `<B/T/k1=v1;k2=v2>`: the key's columns in key order, each value in the
  canonical lexical form of its natural literal; names and values are percent-encoded as R2RML's IRI-safe strings;
- a non-NULL value of column `C` is `<B/T#C>` with its natural literal (INTEGER → xsd:integer, REAL → xsd:double,
  NUMERIC/DECIMAL → xsd:decimal, BOOLEAN → xsd:boolean, DATE → xsd:date, TIME → xsd:time, TIMESTAMP → xsd:dateTime,
  binary → xsd:hexBinary, text and anything else → a plain literal);
- a foreign key on `(C1, C2)` whose values are all non-NULL is `<B/T#ref-C1;C2>`, pointing at the referenced row.

Two departures, both for sparqlnav's lookups (search, entity pages, follow-ups name things by IRI):
- a row of a table without a primary key is `<B/T/_row=N>` instead of a blank node: a blank node cannot be named in
  a query or an entity page, the name index skips it, and it is new on every rebuild. `N` is the row's place (from 1)
  when the table's rows are sorted by their values, so the same rows get the same IRIs whatever their order on
  disk (after a VACUUM, in SQLite and in PostgreSQL alike); identical rows get consecutive numbers and stay apart;
- labels (`rdfs:label`), so name search finds things by the words a question uses: a row's from a name-like column
  (`label_columns`), a table's class its singular (`employees` → "employee", as classes are named in RDF), and a
  foreign key's property the link's name (`link_label`: `manager_id` → "manager", `dept_id` to departments →
  "department").
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

import pyoxigraph as ox

from sparqlnav.graph.vocab import singular

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
KEYLESS_ROW = "_row"  # the pseudo-column naming the rows of a table without a primary key

ValueKind = Literal["integer", "decimal", "double", "boolean", "date", "time", "datetime", "string", "binary", "untyped"]
Row = tuple[object, ...]

# A row's label: the first of these columns it has, else `<table>_name`, else a person's two name parts, else any
# other `*_name` column.
NAME_COLUMNS = ("name", "label", "title", "full_name", "display_name")
NAME_PAIRS = (("first_name", "last_name"), ("given_name", "family_name"), ("firstname", "lastname"),
              ("forename", "surname"))


@dataclass(frozen=True)
class Column:
    """A column and the kind of value its declared SQL type calls for."""

    name: str
    declared: str  # the SQL type as the database declares it ("" when SQLite declares none)

    @property
    def kind(self) -> ValueKind:
        """What the declared type says its values are."""
        return column_kind(self.declared)


@dataclass(frozen=True)
class ForeignKey:
    """Columns of a table that refer to columns of another (or the same) table, pairwise."""

    columns: tuple[str, ...]
    target: str
    referenced: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table as the mapping needs it: its columns, primary key (empty when none) and foreign keys."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    foreign_keys: tuple[ForeignKey, ...] = ()
    hidden: bool = False  # it also has columns `SELECT *` reads that are not stored (SQLite's generated columns)

    def position(self, column: str) -> int:
        """The index of a column in the table's rows."""
        return next(i for i, c in enumerate(self.columns) if c.name == column)

    def column(self, name: str) -> Column:
        """The column called `name`."""
        return self.columns[self.position(name)]


def column_kind(declared: str) -> ValueKind:
    """The kind of value a declared SQL type names: the standard's names first (BOOLEAN, DATE, TIMESTAMP, TIME),
    then SQLite's affinity rules (INT, CHAR/CLOB/TEXT, BLOB or nothing, REAL/FLOA/DOUB, else numeric)."""
    t = declared.upper().strip()
    head = re.sub(r"\s*\(.*", "", t)
    if not t:
        return "untyped"
    if "BOOL" in t:
        return "boolean"
    if "INTERVAL" in t:
        return "string"  # R2RML leaves INTERVAL without a natural datatype (and "INT" is in its name)
    if head == "DATE":
        return "date"
    if head.startswith(("TIMESTAMP", "DATETIME")):
        return "datetime"
    if head.startswith("TIME"):
        return "time"
    if "INT" in t:
        return "integer"
    if any(w in t for w in ("CHAR", "CLOB", "TEXT", "UUID", "JSON", "XML")):
        return "string"
    if any(w in t for w in ("BLOB", "BINARY", "BYTEA")):
        return "binary"
    if any(w in t for w in ("REAL", "FLOA", "DOUB")):
        return "double"
    if any(w in t for w in ("NUMERIC", "DECIMAL")):
        return "decimal"
    return "untyped"


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"(\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?")
_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?")


def natural_literal(value: object, kind: ValueKind) -> tuple[str, str | None]:
    """(lexical form, XSD datatype or None for a plain literal) of a non-NULL SQL value by R2RML's natural mapping.
    The column's kind decides what SQLite's storage class cannot say (booleans stored as 0/1, dates as text); a
    value that does not fit its column's type (SQLite stores anything anywhere) is typed by what it is."""
    if isinstance(value, bool):
        return ("true" if value else "false"), XSD + "boolean"
    if isinstance(value, int):
        if kind == "boolean" and value in (0, 1):
            return ("true" if value else "false"), XSD + "boolean"
        if kind == "decimal":
            return canonical_decimal(Decimal(value)), XSD + "decimal"
        if kind == "double":
            return canonical_double(float(value)), XSD + "double"
        return str(value), XSD + "integer"
    if isinstance(value, float):
        if kind == "decimal" and math.isfinite(value):
            return canonical_decimal(Decimal(repr(value))), XSD + "decimal"
        return canonical_double(value), XSD + "double"
    if isinstance(value, Decimal):
        return (canonical_decimal(value), XSD + "decimal") if value.is_finite() else (str(value), None)
    if isinstance(value, datetime.datetime):  # before date: a datetime is a date too
        return value.isoformat(), XSD + "dateTime"
    if isinstance(value, datetime.date):
        return value.isoformat(), XSD + "date"
    if isinstance(value, datetime.time):
        return value.isoformat(), XSD + "time"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex().upper(), XSD + "hexBinary"
    if isinstance(value, str):
        return _typed_text(value, kind) or (value, None)
    return str(value), None


def _typed_text(text: str, kind: ValueKind) -> tuple[str, str] | None:
    """A text value of a date, time, timestamp or boolean column in its XSD form, when it is a valid one."""
    try:
        if kind == "date" and _DATE.fullmatch(text):
            datetime.date.fromisoformat(text)
            return text, XSD + "date"
        if kind == "time" and (m := _TIME.fullmatch(text)):
            lexical = m.group(1) + (m.group(2) or ":00")
            datetime.time.fromisoformat(lexical)
            return lexical, XSD + "time"
        if kind == "datetime" and (m := _DATETIME.fullmatch(text)):
            zone = m.group(4) or ""
            lexical = f"{m.group(1)}T{m.group(2)}{m.group(3) or ':00'}{zone}"
            datetime.datetime.fromisoformat(lexical.replace("Z", "+00:00"))
            return lexical, XSD + "dateTime"
    except ValueError:
        return None  # looks like one but is no real date (2023-02-30)
    if kind == "boolean" and text.lower() in ("true", "false"):
        return text.lower(), XSD + "boolean"
    return None


def canonical_double(x: float) -> str:
    """XML Schema's canonical form of a double: one digit before the point, the shortest digits, an exponent."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "INF" if x > 0 else "-INF"
    if x == 0:
        return "-0.0E0" if math.copysign(1, x) < 0 else "0.0E0"
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    kept = list(digits)
    assert isinstance(exponent, int)  # finite
    while len(kept) > 1 and kept[-1] == 0:
        kept.pop()
        exponent += 1
    power = exponent + len(kept) - 1
    mantissa = f"{kept[0]}." + ("".join(map(str, kept[1:])) or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def canonical_decimal(d: Decimal) -> str:
    """XML Schema's canonical form of a decimal: no exponent, no needless zeros, at least one digit after the point."""
    text = format(d.normalize(), "f")
    if "." not in text:
        text += ".0"
    return "0.0" if text == "-0.0" else text


def _iunreserved(ch: str) -> bool:
    o = ord(ch)
    if o < 0x80:
        return ch.isalnum() or ch in "-._~"
    return (0xA0 <= o <= 0xD7FF or 0xF900 <= o <= 0xFDCF or 0xFDF0 <= o <= 0xFFEF
            or (0x10000 <= o <= 0xEFFFD and (o & 0xFFFF) <= 0xFFFD))


def iri_safe(text: str) -> str:
    """R2RML's IRI-safe form: every character outside RFC 3987's `iunreserved` percent-encoded as UTF-8."""
    return "".join(
        ch if _iunreserved(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")) for ch in text
    )


@dataclass(frozen=True)
class Naming:
    """The IRIs of one database's tables, columns, foreign keys and rows under its base IRI."""

    base: str  # ends with "/"

    def table(self, table: str) -> str:
        """The class of a table's rows."""
        return self.base + iri_safe(table)

    def column(self, table: str, column: str) -> str:
        """The property of a column's values."""
        return f"{self.base}{iri_safe(table)}#{iri_safe(column)}"

    def reference(self, table: str, fk: ForeignKey) -> str:
        """The property linking a row to the row its foreign key refers to."""
        return f"{self.base}{iri_safe(table)}#ref-" + ";".join(iri_safe(c) for c in fk.columns)

    def row(self, table: str, key: Sequence[tuple[str, str]]) -> str:
        """A row by its key's (column, lexical value) pairs, in key order."""
        return f"{self.base}{iri_safe(table)}/" + ";".join(f"{iri_safe(c)}={iri_safe(v)}" for c, v in key)

    def keyless_row(self, table: str, number: int) -> str:
        """The `number`th row (from 1, in value order) of a table without a primary key."""
        return self.row(table, [(KEYLESS_ROW, str(number))])


def label_columns(table: Table) -> tuple[str, ...]:
    """The columns a row's label comes from (joined by a space), or none: `name`, `label`, `title`, `full_name`,
    `display_name`; else `<table>_name` (or its singular's); else a person's first and last name; else the first
    other `*_name` column. Only columns whose type may hold text count."""
    texts = {_snake(c.name): c.name for c in table.columns if c.kind in ("string", "untyped")}
    for wanted in NAME_COLUMNS:
        if wanted in texts:
            return (texts[wanted],)
    plain = _snake(table.name.rsplit(".", 1)[-1])
    for stem in (plain, singular(plain)):
        if f"{stem}_name" in texts:
            return (texts[f"{stem}_name"],)
    for first, last in NAME_PAIRS:
        if first in texts and last in texts:
            return (texts[first], texts[last])
    for first, last in (*NAME_PAIRS, ("fname", "lname")):
        # a prefix the table puts on every column ("cust_first_name", "cust_fname" beside "cust_lname")
        for lower, name in texts.items():
            prefix = lower.removesuffix(first)
            if prefix != lower and prefix.endswith("_") and prefix + last in texts:
                return (name, texts[prefix + last])
    others = [name for lower, name in texts.items() if lower.endswith("_name")]
    return (others[0],) if others else ()


def _snake(name: str) -> str:
    """A column or table name in lower snake case, so `ClubName` reads as `club_name` and `FirstName` as
    `first_name`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def table_label(table: str) -> str:
    """What one row of a table is called: the table's name in the singular, in words (`order_items` → "order item")."""
    return singular(_snake(table.rsplit(".", 1)[-1])).replace("_", " ").strip() or table


def link_label(fk: ForeignKey) -> str:
    """What a foreign key's link is called: its one column without `_id` ("manager"), or the referenced table's
    singular when that column only abbreviates it (`dept_id` to departments → "department") or there are several."""
    target = singular(_snake(fk.target.rsplit(".", 1)[-1]))
    if len(fk.columns) != 1:
        return target.replace("_", " ")
    stem = re.sub(r"(?i:_id)$|(?<=[a-z])I[dD]$", "", fk.columns[0]).strip("_") or target  # not "paid" → "pa"
    if stem.lower() == "id" or (stem.lower() != target and _abbreviates(stem.lower(), target)):
        stem = target  # a table extending another by its key (`managers.id`), or an abbreviation
    return _snake(stem).replace("_", " ")


def _abbreviates(short: str, word: str) -> bool:
    """Whether `short` is `word` with letters left out, from its first letter on ("dept" of "department")."""
    if not short or short[0] != word[:1]:
        return False
    rest = iter(word)
    return all(ch in rest for ch in short)


RowSource = Callable[[Table], Iterable[Row]]


class DirectMapping:
    """The triples of a database's tables: rows read through `rows(table)`, each table read once more for a
    foreign key that refers to anything other than its target's primary key, and rows of keyless tables held in
    memory to be numbered."""

    def __init__(self, naming: Naming, tables: Sequence[Table], rows: RowSource) -> None:
        self.naming = naming
        self.tables = {t.name: t for t in tables}
        self.rows = rows
        self._lookups: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], str]] = {}

    def nodes(self, table: Table) -> Iterator[tuple[str, Row]]:
        """(row IRI, row) for each row of a table."""
        if not table.key:
            ordered = sorted(self.rows(table), key=lambda row: _sort_key(table, row))
            for number, row in enumerate(ordered, start=1):
                yield self.naming.keyless_row(table.name, number), row
            return
        at = [(c, table.position(c), table.column(c).kind) for c in table.key]
        for row in self.rows(table):
            yield self.naming.row(table.name, [(c, natural_literal(row[i], kind)[0]) for c, i, kind in at]), row

    def schema_labels(self) -> Iterator[ox.Quad]:
        """An `rdfs:label` for each table's class and each foreign key's property."""
        for table in self.tables.values():
            yield ox.Quad(ox.NamedNode(self.naming.table(table.name)), ox.NamedNode(RDFS_LABEL),
                          ox.Literal(table_label(table.name)))
            for fk in table.foreign_keys:
                if fk.target in self.tables:
                    prop = ox.NamedNode(self.naming.reference(table.name, fk))
                    yield ox.Quad(prop, ox.NamedNode(RDFS_LABEL), ox.Literal(link_label(fk)))

    def quads(self, table: Table) -> Iterator[ox.Quad]:
        """The triples of one table: types, values, links and labels."""
        cls = ox.NamedNode(self.naming.table(table.name))
        rdf_type, rdfs_label = ox.NamedNode(RDF_TYPE), ox.NamedNode(RDFS_LABEL)
        columns = [(i, c.kind, ox.NamedNode(self.naming.column(table.name, c.name))) for i, c in enumerate(table.columns)]
        links = [(fk, [table.position(c) for c in fk.columns], ox.NamedNode(self.naming.reference(table.name, fk)))
                 for fk in table.foreign_keys if fk.target in self.tables]
        named = [table.position(c) for c in label_columns(table)]
        for iri, row in self.nodes(table):
            node = ox.NamedNode(iri)
            yield ox.Quad(node, rdf_type, cls)
            for i, kind, prop in columns:
                if row[i] is not None:
                    yield ox.Quad(node, prop, _literal(*natural_literal(row[i], kind)))
            for fk, at, prop in links:
                values = [row[i] for i in at]
                if all(v is not None for v in values):
                    target = self._target(fk, values)
                    if target is not None:
                        yield ox.Quad(node, prop, ox.NamedNode(target))
            label = " ".join(part for i in named if isinstance(row[i], str) and (part := str(row[i]).strip()))
            if label:
                yield ox.Quad(node, rdfs_label, ox.Literal(label))

    def _target(self, fk: ForeignKey, values: list[object]) -> str | None:
        """The IRI of the row a foreign key's values refer to: computed when they are its target's primary key (a
        dangling key, which SQLite allows unless told otherwise, then names a row that has no triples), else
        looked up among the target's rows (None when no row has them)."""
        target = self.tables[fk.target]
        by_column = dict(zip(fk.referenced, values, strict=True))
        lexical = {c: natural_literal(v, target.column(c).kind)[0] for c, v in by_column.items()}
        if target.key and set(target.key) == set(fk.referenced):
            return self.naming.row(target.name, [(c, lexical[c]) for c in target.key])
        return self._lookup(target, fk.referenced).get(tuple(lexical[c] for c in fk.referenced))

    def _lookup(self, target: Table, columns: tuple[str, ...]) -> dict[tuple[str, ...], str]:
        found = self._lookups.get((target.name, columns))
        if found is None:
            at = [(target.position(c), target.column(c).kind) for c in columns]
            found = {}
            for iri, row in self.nodes(target):
                if all(row[i] is not None for i, _ in at):
                    found.setdefault(tuple(natural_literal(row[i], kind)[0] for i, kind in at), iri)
            self._lookups[(target.name, columns)] = found
        return found


def _literal(lexical: str, datatype: str | None) -> ox.Literal:
    return ox.Literal(lexical) if datatype is None else ox.Literal(lexical, datatype=ox.NamedNode(datatype))


def _sort_key(table: Table, row: Row) -> tuple[tuple[int, str, str], ...]:
    """A row's values as its literals say them, NULLs first: the same order whatever database holds the rows."""
    out = []
    for value, column in zip(row, table.columns, strict=True):
        if value is None:
            out.append((0, "", ""))
        else:
            lexical, datatype = natural_literal(value, column.kind)
            out.append((1, datatype or "", lexical))
    return tuple(out)
