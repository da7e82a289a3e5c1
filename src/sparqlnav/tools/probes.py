"""Data probes: what a small graph's data says that its schema does not — subclasses whose instances lack the
superclass's type, a real value for untyped ranges, links stored both ways, literal properties with few values, how
many values of a link one instance may have, and the properties declared to group others (`rdfs:subPropertyOf`). A
few cheap queries per main class; the digest runs them only on graphs known to be small, and prompts (explore's
digest, retrieve's shapes) say what they found.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import Row, Term, clip, show_term
from sparqlnav.graph.schema import META_NAMESPACES, Schema
from sparqlnav.sparql.prefixes import PrefixMap

RDFS_SUBPROPERTY = "http://www.w3.org/2000/01/rdf-schema#subPropertyOf"
XSD = "http://www.w3.org/2001/XMLSchema#"
TEXT_TYPES = (XSD + "string", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString")
NUMERIC_TYPES = ("integer", "decimal", "double", "float", "int", "long", "short", "byte", "nonNegativeInteger",
                 "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong")
LISTED_CHARS = 40  # a value longer than this is prose or a name, not a category: the values are not listed
# A value that is a number, or a text that reads as one ("165", " -2.5e3").
_NUMBER = r'(isNumeric(?o) || REGEX(STR(?o), "^\\s*[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?\\s*$"))'
GROUP_ROWS = 500  # sub-property declarations read (an ontology's own hierarchy, not a whole upper ontology)


class ProbeBounds(Protocol):
    """What bounds the probes (the digest's options carry these)."""

    @property
    def query_seconds(self) -> float:
        """Time limit of one probing query."""

    @property
    def properties_per_class(self) -> int:
        """Properties probed per class, the most used first."""

    @property
    def few_values(self) -> int:
        """At most this many distinct values count as few."""

    @property
    def listed_values(self) -> int:
        """A text property with at most this many distinct values, which repeat, lists them all."""


@dataclass(frozen=True)
class Probes:
    """What data probes found on a small graph, which a schema alone does not say (empty on other graphs)."""

    untyped: frozenset[str] = frozenset()  # subclasses whose instances lack their superclass's type
    unknown: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (class, property) → "IRI, e.g. …"
    both_ways: frozenset[str] = frozenset()  # properties whose every link is stored in both directions
    few: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (class, property) → 'only "EUR"'
    mixed: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (class, property) → 'not all numbers: …'
    several: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (class, link) → most values per instance
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # property → its declared sub-properties


def probe(
    kg: KnowledgeGraph, schema: Schema, classes: list[str], prefixes: PrefixMap, options: ProbeBounds
) -> Probes:
    """What the data says that a schema does not, for the main `classes` of a small graph (a few queries each)."""
    unknown = _unknown_ranges(kg, schema, classes, prefixes, options)
    few, mixed = _few_values(kg, schema, classes, options)
    return Probes(
        untyped=frozenset(_untyped_subclasses(kg, schema, classes, options)),
        unknown=unknown,
        both_ways=frozenset(_both_ways(kg, schema, classes, options)),
        few=few,
        mixed=mixed,
        several=_several_values(kg, schema, classes, unknown, options),
        groups=_property_groups(kg, options),
    )


def _property_groups(kg: KnowledgeGraph, options: ProbeBounds) -> dict[str, tuple[str, ...]]:
    """Properties declared to group others (`rdfs:subPropertyOf`: BESTIARY's defValues over hasACvalue,
    hasFortValue …), which a question about "defensive attributes" needs and a class's shape does not show."""
    query = (f"SELECT ?sub ?group WHERE {{ ?sub <{RDFS_SUBPROPERTY}> ?group FILTER(?sub != ?group) }} "
             f"ORDER BY ?group ?sub LIMIT {GROUP_ROWS}")
    result = kg.endpoint.query(query, timeout_s=options.query_seconds)
    found: dict[str, list[str]] = {}
    for row in result.table.rows if result.ok and result.table is not None else []:
        if "sub" in row and "group" in row and row["group"].kind == "uri" and row["sub"].kind == "uri" \
                and not row["group"].value.startswith(META_NAMESPACES):  # owl:topObjectProperty groups everything
            found.setdefault(row["group"].value, []).append(row["sub"].value)
    return {group: tuple(subs) for group, subs in found.items()}


def _several_values(
    kg: KnowledgeGraph,
    schema: Schema,
    classes: Iterable[str],
    unknown: Mapping[tuple[str, str], str],
    options: ProbeBounds,
) -> dict[tuple[str, str], int]:
    """Links of which one instance may have several, with the most one has (CK25's products have up to three
    categories, named from words of the product's name): relay models spent a step finding out, or not."""
    typing = kg.vocab.type_predicate
    found: dict[tuple[str, str], int] = {}
    for c in classes:
        info = schema.classes.get(c)
        for p in (info.ranked_predicates() if info else [])[: options.properties_per_class]:
            linked = p.object_classes or unknown.get((c, p.iri), "").startswith("IRI")
            if p.iri in schema.type_predicates or not linked:
                continue
            query = (f"SELECT (MAX(?n) AS ?most) WHERE {{ SELECT ?s (COUNT(?o) AS ?n) WHERE {{ "
                     f"?s <{typing}> <{c}> ; <{p.iri}> ?o }} GROUP BY ?s }}")
            result = kg.endpoint.query(query, timeout_s=options.query_seconds)
            rows = result.table.rows if result.ok and result.table is not None else []
            most = _int_or_none(rows[0]["most"].value) if rows and "most" in rows[0] else None
            if most is not None and most > 1:
                found[(c, p.iri)] = most
    return found


def _unknown_ranges(
    kg: KnowledgeGraph, schema: Schema, classes: Iterable[str], prefixes: PrefixMap, options: ProbeBounds
) -> dict[tuple[str, str], str]:
    """For properties whose values the schema does not type, one real value ("IRI, e.g. dbpedia:France"): a
    `?` hid from a relay model that CK25's pv:country points at DBpedia IRIs."""
    typing = kg.vocab.type_predicate
    found: dict[tuple[str, str], str] = {}
    for c in classes:
        info = schema.classes.get(c)
        preds = [p for p in (info.ranked_predicates() if info else []) if p.iri not in schema.type_predicates]
        for p in preds[: options.properties_per_class]:
            if p.ranked_objects():
                continue
            query = f"SELECT ?o WHERE {{ ?s <{typing}> <{c}> ; <{p.iri}> ?o }} LIMIT 1"
            result = kg.endpoint.query(query, timeout_s=options.query_seconds)
            if result.ok and result.table is not None and result.table.rows and "o" in result.table.rows[0]:
                term = result.table.rows[0]["o"]
                kind = "IRI" if term.kind == "uri" else "literal"
                shown = show_term(term, prefixes) if term.kind == "uri" else clip(one_line(show_term(term, prefixes)), 40)
                found[(c, p.iri)] = f"{kind}, e.g. {shown}"
    return found


def _few_values(
    kg: KnowledgeGraph, schema: Schema, classes: Iterable[str], options: ProbeBounds
) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """What one counting query per literal property says of its values: all of them when there are few (CK25's
    pv:currency is always "EUR", and relay models spent a query per "cheapest" question finding that out; a text
    column with up to `listed_values` values that repeat, quoted as stored, so a category is spelled right), and
    whether they are not all numbers or not all of one type (a column of "165", "67" … and "null" broke a MIN)."""
    typing = kg.vocab.type_predicate
    few: dict[tuple[str, str], str] = {}
    mixed: dict[tuple[str, str], str] = {}
    for c in classes:
        info = schema.classes.get(c)
        if info is None:
            continue
        for p in info.ranked_predicates()[: options.properties_per_class]:
            if p.iri in schema.type_predicates or not p.datatypes:
                continue
            where = f"?s <{typing}> <{c}> ; <{p.iri}> ?o FILTER(isLiteral(?o))"
            numeric = all(d.removeprefix(XSD) in NUMERIC_TYPES for d in p.datatypes)  # the schema counted them
            if len(p.datatypes) > 1 and not numeric and (note := _types_note(kg, where, options)) is not None:
                mixed[(c, p.iri)] = note
            if not any(d in TEXT_TYPES for d in p.datatypes):
                # Numbers, dates, booleans: only whether there are few, by one cheap query (the counting one
                # below, a regular expression over every value, tripled the probes' time on BESTIARY's integers).
                if (info.instances or 0) >= 10:
                    rows = _rows(kg, f"SELECT DISTINCT ?o WHERE {{ {where} }} LIMIT {options.few_values + 1}", options)
                    if 0 < len(rows) <= options.few_values and (values := _values(kg, where, len(rows), options)):
                        few[(c, p.iri)] = ("only " if len(values) == 1 else "values ") + ", ".join(values)
                continue
            query = (f"SELECT (COUNT(?o) AS ?all) (COUNT(DISTINCT ?o) AS ?distinct) "
                     f"(SUM(IF({_NUMBER}, 1, 0)) AS ?numbers) WHERE {{ {where} }}")
            stats = _first_row(kg, query, options)
            every, distinct, numbers = (_int_or_none(stats.get(k, "")) or 0 for k in ("all", "distinct", "numbers"))
            if not every:
                continue
            # Text that mostly reads as numbers is a measure, not a category: its values are not listed.
            text = all(d in TEXT_TYPES for d in p.datatypes) and numbers * 2 < every
            listed = (distinct <= options.few_values and (info.instances or 0) >= 10) or (
                text and distinct <= options.listed_values and distinct < every)
            if listed and (values := _values(kg, where, distinct, options)) is not None:
                few[(c, p.iri)] = ("only " if len(values) == 1 else "values ") + ", ".join(values)
            if (c, p.iri) not in mixed and 0 < numbers < every and numbers * 2 >= every:
                others = _rows(kg, f"SELECT ?o (COUNT(?o) AS ?n) WHERE {{ {where} FILTER(!({_NUMBER})) }} "
                                   "GROUP BY ?o ORDER BY DESC(?n) ?o LIMIT 3", options)
                mixed[(c, p.iri)] = "not all numbers: also " + ", ".join(quoted(r["o"].value) for r in others if "o" in r)
    return few, mixed


def _values(kg: KnowledgeGraph, where: str, distinct: int, options: ProbeBounds) -> list[str] | None:
    """The distinct values as stored: texts in quotes (so spaces around them show), numbers and booleans bare (a
    model could not tell 0 from "0"); a note after them when some text has spaces around it. None when one is too
    long to list whole."""
    rows = _rows(kg, f"SELECT DISTINCT ?o WHERE {{ {where} }} ORDER BY ?o LIMIT {distinct}", options)
    terms = [r["o"] for r in rows if "o" in r]
    texts = [t.value for t in terms]
    if distinct > options.few_values and not (texts and max(map(len, texts)) <= LISTED_CHARS):
        return None
    short = distinct <= options.few_values  # a few values are always said, a long one clipped (as before)
    shown = [_shown_value(t, 30 if short else None) for t in terms]
    spaced = sum(1 for t in texts if t != t.strip())
    if spaced:  # said in words: relay players copied "Lyon" from a list that showed "Lyon " and matched nothing
        shown[-1] += f" ({spaced} stored with spaces around {'it' if spaced == 1 else 'them'}: match the quoted text)"
    return shown


def _shown_value(term: Term, limit: int | None) -> str:
    """One listed value: a number or boolean as it is, a text quoted (and clipped to `limit`)."""
    kind = (term.datatype or "").removeprefix(XSD)
    if kind in NUMERIC_TYPES or kind == "boolean":
        return term.value
    if limit is not None and len(term.value) > limit:
        return quoted(clip(term.value, limit))
    return quoted(term.value)


def _types_note(kg: KnowledgeGraph, where: str, options: ProbeBounds) -> str | None:
    """`not all of one type: 158 xsd:integer, 2 xsd:string (e.g. "null")`: a SQLite column may hold both (None when
    every type is a number's: integers beside decimals compare as numbers)."""
    rows = _rows(kg, f"SELECT ?t (COUNT(?o) AS ?n) (SAMPLE(?o) AS ?e) WHERE {{ {where} BIND(DATATYPE(?o) AS ?t) }} "
                     "GROUP BY ?t ORDER BY DESC(?n)", options)
    rows = [r for r in rows if "t" in r and "n" in r and "e" in r]
    if all(r["t"].value.removeprefix(XSD) in NUMERIC_TYPES for r in rows):
        return None
    parts = [f"{r['n'].value} {_xsd(r['t'].value)}" + (f" (e.g. {quoted(r['e'].value)})" if i else "")
             for i, r in enumerate(rows)]
    return "not all of one type: " + ", ".join(parts[:4])


def _xsd(iri: str) -> str:
    return "xsd:" + iri.removeprefix(XSD) if iri.startswith(XSD) else f"<{iri}>"


def one_line(text: str) -> str:
    """A sample value on a comment line: a newline in it would end the comment and read as schema."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def quoted(text: str) -> str:
    """A value in double quotes, as stored (leading and trailing spaces show: `"Lyon "`)."""
    return json.dumps(text, ensure_ascii=False)


def _rows(kg: KnowledgeGraph, query: str, options: ProbeBounds) -> list[Row]:
    result = kg.endpoint.query(query, timeout_s=options.query_seconds)
    return result.table.rows if result.ok and result.table is not None else []


def _first_row(kg: KnowledgeGraph, query: str, options: ProbeBounds) -> dict[str, str]:
    rows = _rows(kg, query, options)
    return {k: t.value for k, t in rows[0].items()} if rows else {}


def _both_ways(kg: KnowledgeGraph, schema: Schema, classes: Iterable[str], options: ProbeBounds) -> set[str]:
    """Properties from a class to itself whose every link is stored in both directions (CK25's
    pv:compatibleProduct): a model otherwise spends a query to find out, or a UNION that doubles rows."""
    found: set[str] = set()
    for c in classes:
        info = schema.classes.get(c)
        for p in (info.ranked_predicates() if info else [])[: options.properties_per_class]:
            if c not in p.object_classes or p.iri in found:
                continue
            query = f"ASK {{ ?a <{p.iri}> ?b . FILTER NOT EXISTS {{ ?b <{p.iri}> ?a }} }}"
            result = kg.endpoint.query(query, timeout_s=options.query_seconds)
            if result.ok and result.table is not None and result.table.boolean is False:
                found.add(p.iri)
    return found


def _untyped_subclasses(
    kg: KnowledgeGraph, schema: Schema, classes: Iterable[str], options: ProbeBounds
) -> set[str]:
    """Main classes whose instances do not also carry their superclass's type (no inference in the data)."""
    typing = kg.vocab.type_predicate
    found: set[str] = set()
    for c in classes:
        supers = [x for x in schema.superclasses.get(c, []) if not x.startswith(META_NAMESPACES)][:1]
        if not supers:
            continue
        query = f"ASK {{ ?s <{typing}> <{c}> , <{supers[0]}> }}"
        result = kg.endpoint.query(query, timeout_s=options.query_seconds)
        if result.ok and result.table is not None and result.table.boolean is False:
            found.add(c)
    return found


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
