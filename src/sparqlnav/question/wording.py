"""Values as people read them in an answer, by what the question asks and the literal's datatype: "In what
year…" gets "1774", not "1774-08-01T00:00:00Z"; a date at midnight reads "1 August 1774"; a number keeps its
unit when its datatype is one; a boolean reads "Yes"/"No". Only the words change: results keep raw values."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparqlnav.graph.results import XSD, Term
from sparqlnav.graph.vocab import humanise, local_name

if TYPE_CHECKING:
    from sparqlnav.graph.names import Names

DATE_TYPES = frozenset(XSD + t for t in ("date", "dateTime", "dateTimeStamp"))
YEAR_TYPES = frozenset(XSD + t for t in ("gYear", "gYearMonth"))
NUMBER_TYPES = frozenset(
    XSD + t
    for t in (
        "integer", "decimal", "double", "float", "int", "long", "short", "byte", "nonNegativeInteger",
        "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong",
        "unsignedShort", "unsignedByte",
    )
)  # fmt: skip
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip
_DATE = re.compile(r"^(-?\d{1,})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$")
_ASKS_YEAR = re.compile(r"\b(?:what|which)\s+year\b|\byear\s+(?:did|was|were|is)\b", re.IGNORECASE)
_ASKS_YES_NO = re.compile(
    r"^\s*(?:is|are|was|were|does|do|did|has|have|had|can|could|will|would|should)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Asked:
    """What the words of the question say about the form of its answer."""

    year: bool = False  # "In what year…", "Which year…"
    yes_no: bool = False

    @classmethod
    def of(cls, question: str) -> Asked:
        """Read from the question's words."""
        return cls(year=bool(_ASKS_YEAR.search(question)), yes_no=bool(_ASKS_YES_NO.match(question)))


def yes_no(value: bool) -> str:
    """A boolean answer as a person says it."""
    return "Yes" if value else "No"


def for_people(term: Term, asked: Asked, labels: Mapping[str, str] | None = None) -> str:
    """One literal as a person should read it in the answer; IRIs and other terms by their value."""
    if term.kind != "literal" or term.lang:
        return term.value
    datatype = term.datatype or ""
    if datatype in DATE_TYPES or datatype in YEAR_TYPES:
        return _date(term.value, year_only=asked.year or datatype in YEAR_TYPES)
    if datatype == XSD + "boolean":
        return yes_no(term.value in ("true", "1")) if asked.yes_no else term.value
    if datatype in NUMBER_TYPES or not datatype or datatype.startswith(XSD):
        return term.value
    # A datatype outside XSD on a number is its unit (e.g. cdt:kilogram, a QUDT unit IRI): keep it.
    unit = (labels or {}).get(datatype) or humanise(local_name(datatype))
    return f"{term.value} {unit}" if unit else term.value


def unit_labels(terms: Iterable[Term], names: Names) -> dict[str, str]:
    """The labels of the units (datatypes outside XSD) of these literals, as the graph names them."""
    units = {t.datatype for t in terms if t.kind == "literal" and t.datatype and not t.datatype.startswith(XSD)}
    return names.labels_of(sorted(units)) if units else {}


def _date(value: str, *, year_only: bool) -> str:
    """ "1774-08-01T00:00:00Z" → "1774" (a year is asked) or "1 August 1774"; 1 January at midnight → the year;
    a time other than midnight stays."""
    m = _DATE.match(value.strip())
    if m is None:
        year = re.match(r"^(-?\d{1,})", value.strip())
        return _year(year.group(1)) if year and year_only else value
    y, month, day, hh, mm, ss, _ = m.groups()
    # A timestamp on 1 January at midnight is how year-precision values are stored (Wikidata writes 1868 as
    # 1868-01-01T00:00:00Z): without a stated precision, it reads as the year, not as "1 January 1868".
    if year_only or ((month, day) == ("01", "01") and (hh, mm, ss) == ("00", "00", "00")):
        return _year(y)
    if not 1 <= int(month) <= 12:
        return value
    shown = f"{int(day)} {MONTHS[int(month) - 1]} {_year(y)}"
    if hh is not None and (hh, mm, ss) != ("00", "00", "00"):
        shown += f", {hh}:{mm}"
    return shown


def _year(text: str) -> str:
    """A year without leading zeros; years before 1 are BCE (xsd: -0043 is 44 BC, as year 0 is 1 BC)."""
    n = int(text)
    return str(n) if n > 0 else f"{1 - n} BC"
