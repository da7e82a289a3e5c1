"""Data probes: what a small graph's data says that its schema does not — subclasses whose instances lack the
superclass's type, a real value for untyped ranges, links stored both ways, literal properties with few values, how
many values of a link one instance may have, and the properties declared to group others (`rdfs:subPropertyOf`). A
few cheap queries per main class; the digest runs them only on graphs known to be small, and prompts (explore's
digest, retrieve's shapes) say what they found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import clip, show_term
from sparqlnav.graph.schema import META_NAMESPACES, Schema
from sparqlnav.sparql.prefixes import PrefixMap

RDFS_SUBPROPERTY = "http://www.w3.org/2000/01/rdf-schema#subPropertyOf"
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


@dataclass(frozen=True)
class Probes:
    """What data probes found on a small graph, which a schema alone does not say (empty on other graphs)."""

    untyped: frozenset[str] = frozenset()  # subclasses whose instances lack their superclass's type
    unknown: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (class, property) → "IRI, e.g. …"
    both_ways: frozenset[str] = frozenset()  # properties whose every link is stored in both directions
    few: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (class, property) → 'only "EUR"'
    several: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (class, link) → most values per instance
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # property → its declared sub-properties


def probe(
    kg: KnowledgeGraph, schema: Schema, classes: list[str], prefixes: PrefixMap, options: ProbeBounds
) -> Probes:
    """What the data says that a schema does not, for the main `classes` of a small graph (a few queries each)."""
    unknown = _unknown_ranges(kg, schema, classes, prefixes, options)
    return Probes(
        untyped=frozenset(_untyped_subclasses(kg, schema, classes, options)),
        unknown=unknown,
        both_ways=frozenset(_both_ways(kg, schema, classes, options)),
        few=_few_values(kg, schema, classes, options),
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
                shown = show_term(term, prefixes) if term.kind == "uri" else clip(show_term(term, prefixes), 40)
                found[(c, p.iri)] = f"{kind}, e.g. {shown}"
    return found


def _few_values(
    kg: KnowledgeGraph, schema: Schema, classes: Iterable[str], options: ProbeBounds
) -> dict[tuple[str, str], str]:
    """Literal properties with at most `few_values` distinct values over a class of many instances (CK25's
    pv:currency is always "EUR"): relay models spent a query per "cheapest" question finding that out."""
    typing = kg.vocab.type_predicate
    cap = options.few_values
    found: dict[tuple[str, str], str] = {}
    for c in classes:
        info = schema.classes.get(c)
        if info is None or (info.instances or 0) < 10:
            continue  # a handful of instances has a handful of values anyway
        for p in info.ranked_predicates()[: options.properties_per_class]:
            if p.iri in schema.type_predicates or not p.datatypes:
                continue
            query = f"SELECT DISTINCT ?o WHERE {{ ?s <{typing}> <{c}> ; <{p.iri}> ?o }} LIMIT {cap + 1}"
            result = kg.endpoint.query(query, timeout_s=options.query_seconds)
            if not (result.ok and result.table is not None) or not 0 < len(result.table.rows) <= cap:
                continue
            values = [f'"{clip(r["o"].value, 30)}"' for r in result.table.rows if "o" in r]
            found[(c, p.iri)] = ("only " if len(values) == 1 else "values ") + ", ".join(values)
    return found


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
