"""A SELECT query under construction (QueryAgent's PyQL-style state): triple patterns, filters, one
aggregation and the answer variable, edited one step at a time and rendered to SPARQL after each step.

Terms are kept as SPARQL text: `?var`, `<iri>`, or a literal (`"text"`, `"x"@en`, `"5"^^<dt>`, `12.5`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from sparqlnav.sparql.prefixes import PrefixMap, declare_prefixes

Aggregation = Literal["count", "max", "min"]
TermKind = Literal["var", "iri", "literal"]
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

_VAR = re.compile(r"^[?$][A-Za-z_][A-Za-z0-9_]*$")
_IRI = re.compile(r"^<[^<>\"{}|^`\\\s]*>$")
_PNAME = re.compile(r"^([A-Za-z][\w.-]*)?:[^\s]*$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_STRING = re.compile(r"^(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')(@[A-Za-z]+(-[A-Za-z0-9]+)*|\^\^(<[^>]*>|[A-Za-z][\w.-]*:\S*))?$")


@dataclass(frozen=True)
class DraftTerm:
    """One SPARQL term as written in a query, and what kind it is."""

    text: str
    kind: TermKind


def parse_term(text: str, prefixes: PrefixMap) -> DraftTerm | None:
    """A variable, an IRI (`<…>` or a prefixed name the graph knows, expanded) or a literal; None otherwise."""
    text = text.strip()
    if text == "a":  # SPARQL's own shorthand
        return DraftTerm(f"<{RDF_TYPE}>", "iri")
    if _VAR.match(text):
        return DraftTerm("?" + text[1:], "var")
    if _IRI.match(text):
        return DraftTerm(text, "iri")
    if _NUMBER.match(text) or text in ("true", "false"):
        return DraftTerm(text, "literal")
    m = _STRING.match(text)
    if m:
        dt = m.group(4)
        if dt and not dt.startswith("<"):
            full = prefixes.expand(dt)
            if full is None:
                return None
            text = text[: len(text) - len(dt)] + f"<{full}>"
        return DraftTerm(text, "literal")
    if _PNAME.match(text) or text.startswith(("http://", "https://")):
        full = prefixes.expand(text)
        return DraftTerm(f"<{full}>", "iri") if full else None
    return None


def iri_of(term: DraftTerm) -> str | None:
    """The IRI of an IRI term."""
    return term.text[1:-1] if term.kind == "iri" else None


@dataclass(frozen=True)
class Fact:
    """A triple pattern."""

    head: DraftTerm
    relation: DraftTerm
    tail: DraftTerm


@dataclass(frozen=True)
class Condition:
    """A comparison FILTER."""

    left: DraftTerm
    op: str
    right: DraftTerm


@dataclass(frozen=True)
class Draft:
    """The query so far; every edit returns a new draft."""

    facts: tuple[Fact, ...] = ()
    filters: tuple[Condition, ...] = ()
    aggregate: tuple[Aggregation, str] | None = None  # (kind, variable)
    answer: str | None = None  # the variable the query returns

    def variables(self) -> list[str]:
        """Variables of the triple patterns, in order of first use."""
        out: dict[str, None] = {}
        for f in self.facts:
            for t in (f.head, f.relation, f.tail):
                if t.kind == "var":
                    out.setdefault(t.text, None)
        return list(out)

    def add_fact(self, fact: Fact) -> Draft:
        """The draft with one more triple pattern."""
        return replace(self, facts=(*self.facts, fact))

    def add_filter(self, condition: Condition) -> Draft:
        """The draft with one more comparison."""
        return replace(self, filters=(*self.filters, condition))

    def set_aggregate(self, kind: Aggregation, var: str) -> Draft:
        """The draft counting a variable, or keeping only the row with its largest or smallest value."""
        return replace(self, aggregate=(kind, var))

    def set_answer(self, var: str) -> Draft:
        """The draft returning `var`."""
        return replace(self, answer=var)

    def projected(self) -> list[str]:
        """What the query selects (before any COUNT): the answer, else every variable."""
        return [self.answer] if self.answer else self.variables()

    def where(self, prefixes: PrefixMap | None = None) -> str:
        """The group graph pattern's lines (IRIs compacted with `prefixes` when given, else in full)."""

        def show(t: DraftTerm) -> str:
            iri = iri_of(t)
            return t.text if iri is None or prefixes is None else prefixes.compact(iri)

        lines = [f"  {show(f.head)} {show(f.relation)} {show(f.tail)} ." for f in self.facts]
        lines += [f"  FILTER({show(c.left)} {c.op} {show(c.right)})" for c in self.filters]
        return "\n".join(lines)

    def render(self, prefixes: PrefixMap) -> str:
        """The draft as a runnable SPARQL query (prefixed names for known namespaces, declared)."""
        tail = ""
        if self.aggregate and self.aggregate[0] == "count":
            head = f"SELECT (COUNT(DISTINCT {self.aggregate[1]}) AS ?count)"
        else:
            head = "SELECT DISTINCT " + (" ".join(self.projected()) or "*")
            if self.aggregate:
                kind, var = self.aggregate
                tail = f"\nORDER BY {'DESC' if kind == 'max' else 'ASC'}({var})\nLIMIT 1"
        query = f"{head}\nWHERE {{\n{self.where(prefixes)}\n}}{tail}"
        return declare_prefixes(query, prefixes.mapping).query
