"""Lookup tools over a knowledge graph: search names, read an entity's edges (with statement qualifiers),
show real examples of a property, and list the relations around an entity."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.names import STRONG_SCORE, NameHit
from sparqlnav.graph.results import Term, clip, show_term
from sparqlnav.graph.schema import META_NAMESPACES
from sparqlnav.graph.vocab import label_adds

DEFAULT_ENTITIES = 8
DEFAULT_PROPERTIES = 4
EDGE_LIMIT = 2000
CLASS_SECONDS = 5.0  # the one query naming the classes of search hits (a hint: skipped when slow)
INCOMING_LIMIT = 1000  # incoming edges read per entity page (a class or a country may have millions)
ABSENT_SECONDS = 5.0  # the one query asking which of a query's identifiers the graph lacks
CLOSE_TRIPLES = 5_000_000  # graphs up to this size (local stores) have their values scanned for close spellings
_TEXT_TYPES = ("http://www.w3.org/2001/XMLSchema#string", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString")
CLOSE_SAMPLE = 1000  # a property's stored values read to find those closest to a filtered one
CLOSE_ENOUGH = 0.5  # how close a stored value must be to be shown (1: the same letters; 0.9: one holds the other)
_WORD = re.compile(r"[^\W_]+")
_IRI_OK = re.compile(r"^[^<>\"{}|^`\\\x00-\x20]+$")  # SPARQL IRIREF characters


class LookupFailed(SparqlnavError):
    """A lookup that cannot be done (unknown identifier, engine failure); one-line message."""


@dataclass
class SearchResult:
    """Entities and properties matching a text, reported separately."""

    query: str
    entities: list[NameHit]
    properties: list[NameHit]
    note: str = ""  # e.g. that the endpoint has no text index and search is degraded
    entity_total: int | None = None  # matches found before the cut (None: not counted)
    property_total: int | None = None
    total_capped: bool = False  # the count stopped at the search's own limit: there may be more
    classes: dict[str, list[str]] = field(default_factory=dict)  # entity IRI → its classes (up to two)
    class_labels: dict[str, str] = field(default_factory=dict)  # names of those classes where the graph has them

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        data: dict[str, Any] = {
            "query": self.query,
            "entities": [asdict(h) for h in self.entities],
            "properties": [asdict(h) for h in self.properties],
        }
        if self.classes:
            data["classes"] = self.classes
        if self.note:
            data["note"] = self.note
        return data

    def to_text(self, kg: KnowledgeGraph) -> str:
        """Readable lines for a person or an LLM."""
        lines = [f"Entities matching {self.query!r}{self._count(len(self.entities), self.entity_total)}"
                 f"{_weak(self.entities, self.query)}:"]
        lines += [_hit_line(h, kg, self._class_note(h.iri, kg)) for h in self.entities] or ["  (none)"]
        lines.append(f"Properties matching {self.query!r}{self._count(len(self.properties), self.property_total)}"
                     f"{_weak(self.properties, self.query)}:")
        lines += [_hit_line(h, kg) for h in self.properties] or ["  (none)"]
        if self.note:
            lines.append(f"Note: {self.note}")
        return "\n".join(lines)

    def _class_note(self, iri: str, kg: KnowledgeGraph) -> str:
        """" (a pv:ProductCategory)": what kind of thing a hit is, so a category and a product named alike differ."""
        classes = self.classes.get(iri)
        if not classes:
            return ""
        named = []
        for c in classes:
            label = self.class_labels.get(c)
            named.append(kg.prefixes.compact(c) + (f" {label!r}" if label_adds(c, label) else ""))
        return f" (a {', '.join(named)})"

    def _count(self, shown: int, total: int | None) -> str:
        """" (8 of 23 matches)" when the list was cut; nothing when everything found is shown."""
        if total is None or total <= shown:
            return ""
        return f" ({shown} of {total}{'+' if self.total_capped else ''} matches)"


def _weak(hits: list[NameHit], query: str) -> str:
    """" — none close, the nearest" when no hit matches well: look-alikes ("salary" → "Salinas-Kelly") are no
    evidence that the graph holds the thing (relay models spent a step each time to find that out). A hit named by
    words of the query is close however the whole phrase scores ("cold resist" → `ontology:cold`)."""
    if not hits or max(h.score for h in hits) >= STRONG_SCORE:
        return ""
    words = set(_WORD.findall(query.lower()))
    named = any((parts := _WORD.findall(h.label.lower())) and set(parts) <= words for h in hits)
    return "" if named else " — none close, the nearest"


def _hit_line(h: NameHit, kg: KnowledgeGraph, kind: str = "") -> str:
    desc = f" — {clip(h.description, 100)}" if h.description else ""
    via = f" [matched {h.field} {h.matched!r}]" if h.matched != h.label else ""
    # How often a property is used tells near-duplicates apart (hasHPvalue 4,030 uses, hasHPValue 2).
    uses = f" ({h.degree:,} uses)" if h.kind == "property" and h.degree else ""
    return f"  {kg.prefixes.compact(h.iri)} {h.label!r}{kind}{uses}{desc}{via}"


def classes_of(kg: KnowledgeGraph, iris: Iterable[str], *, per_entity: int = 2) -> dict[str, list[str]]:
    """Up to `per_entity` classes of each entity, by one short query (empty when it fails: a hint, not a fact)."""
    wanted = [i for i in dict.fromkeys(iris) if _IRI_OK.match(i)]
    if not wanted:
        return {}
    values = " ".join(f"<{i}>" for i in wanted)
    query = f"SELECT ?s ?t WHERE {{ VALUES ?s {{ {values} }} ?s <{kg.vocab.type_predicate}> ?t }} LIMIT {len(wanted) * 10}"
    result = kg.endpoint.query(query, timeout_s=CLASS_SECONDS)
    found: dict[str, list[str]] = {}
    for row in result.table.rows if result.ok and result.table is not None else []:
        # owl:NamedIndividual and the like say nothing about what a thing is.
        if "s" in row and "t" in row and row["t"].kind == "uri" and not row["t"].value.startswith(META_NAMESPACES):
            got = found.setdefault(row["s"].value, [])
            if len(got) < per_entity and row["t"].value not in got:
                got.append(row["t"].value)
    return found


def search(
    kg: KnowledgeGraph,
    text: str,
    *,
    entities: int = DEFAULT_ENTITIES,
    properties: int = DEFAULT_PROPERTIES,
) -> SearchResult:
    """Entities (and classes) and properties whose names match `text`."""
    # One ranked pass over every kind (a second pass per kind would repeat the typo-tolerant search).
    limit = max(50, entities + properties)
    hits = kg.names.search(text, limit=limit)
    all_ents = [h for h in hits if h.kind in ("entity", "class")]
    all_props = [h for h in hits if h.kind == "property"]
    if len(all_props) < properties and len(text.split()) > 1:
        # Properties are often named by parts or abbreviations ("experience XP" → hasXPValue): try each word.
        for word in text.split():
            if len(word) < 2:
                continue
            for h in kg.names.search(word, limit=10, kinds=["property"]):
                if h.kind == "property" and all(h.iri != p.iri for p in all_props):
                    all_props.append(h)
    if len(all_props) < properties:
        for h in _abbreviated_properties(kg, text):
            if all(h.iri != p.iri for p in all_props):
                all_props.append(h)
    shown = all_ents[:entities]
    classes = classes_of(kg, [h.iri for h in shown if h.kind == "entity"])
    kinds = {c for cs in classes.values() for c in cs}
    return SearchResult(
        text,
        shown,
        all_props[:properties],
        entity_total=len(all_ents),
        property_total=len(all_props),
        total_capped=len(hits) >= limit,
        note=str(kg.extra.get("search_note", "")),
        classes=classes,
        class_labels=kg.names.labels_of(kinds) if kinds else {},
    )


def resolve(kg: KnowledgeGraph, ident: str) -> str:
    """Turn `<iri>`, `prefix:local`, a Wikibase id (Q42/P31) or a full IRI into an IRI."""
    ident = ident.strip()
    wb = kg.vocab.wikibase
    if wb and re.fullmatch(r"[QPL]\d+", ident):
        return wb.entity_iri(ident)
    iri = kg.prefixes.expand(ident)
    if iri is not None:
        if not _IRI_OK.match(iri):
            # It goes into queries as <iri>: anything else could change the query's meaning.
            raise LookupFailed(f"{ident!r} is not a valid IRI")
        return iri
    raise LookupFailed(
        f"cannot resolve {ident!r}: give an IRI, a prefixed name with a known prefix, or a Q/P id"
    )


def resolve_or_search(kg: KnowledgeGraph, ident: str) -> str:
    """Like `resolve`, but a plain name is looked up and its best match used, when the match is good."""
    return resolve_name(kg, ident)[0]


def resolve_name(kg: KnowledgeGraph, ident: str) -> tuple[str, NameHit | None]:
    """Like `resolve_or_search`, also returning the search hit when a name was looked up (so callers can say so)."""
    try:
        return resolve(kg, ident), None
    except LookupFailed:
        hits = kg.names.search(ident, limit=1)
        if not hits or hits[0].score < STRONG_SCORE:
            near = f" (closest: {hits[0].label!r}, {kg.prefixes.compact(hits[0].iri)})" if hits else ""
            raise LookupFailed(f"nothing in {kg.name} is called {ident!r}{near}") from None
        return hits[0].iri, hits[0]


def _abbreviated_properties(kg: KnowledgeGraph, text: str) -> list[NameHit]:
    """Properties whose names abbreviate the text's words: a word's start ("initiative" → hasInitValue) or the
    initials of two or three words ("hit points" → hasHPvalue). The abbreviation must be a part of the name."""
    words = [w for w in re.findall(r"[^\W\d_]+", text) if len(w) > 2]
    short: list[str] = []
    for w in words:
        if len(w) >= 6:
            short += [w[:4].lower(), w[:3].lower()]
    for n in (2, 3):
        short += ["".join(w[0] for w in words[i:i + n]).lower() for i in range(len(words) - n + 1)]
    found: list[NameHit] = []
    for term in dict.fromkeys(short):
        for h in kg.names.search(term, limit=10, kinds=["property"]):
            local = h.iri.rsplit("/", 1)[-1].rsplit("#", 1)[-1]
            if (h.kind == "property" and any(_is_part(term, n) for n in (h.label, h.matched, local))
                    and all(h.iri != f.iri for f in found)):
                found.append(h)
    return found


def _is_part(term: str, name: str) -> bool:
    """Whether `term` is one part of `name` as camel case or spaces cut it ("Init" in hasInitValue, "HP" in
    hasHPvalue), not the start of a longer word ("Int" in hasIntelligence)."""
    for m in re.finditer(re.escape(term), name, re.IGNORECASE):
        i, j = m.span()
        seg = name[i:j]
        starts = i == 0 or not name[i - 1].isalpha() or (name[i - 1].islower() and name[i].isupper())
        ends = j == len(name) or not name[j].isalpha() or seg.isupper() or (name[j].isupper() and not seg.isupper())
        if starts and ends:
            return True
    return False


def property_iri(kg: KnowledgeGraph, iri: str) -> str:
    """The predicate to use in triple patterns: a Wikibase property entity becomes its direct claim."""
    wb = kg.vocab.wikibase
    if wb:
        pid = wb.property_id(iri)
        if pid and iri == wb.entity_iri(pid):
            return wb.direct_iri(pid)
    return iri


@dataclass
class Qualifier:
    """A qualifier of a statement value."""

    property: str
    property_label: str | None
    value: Term
    value_label: str | None


@dataclass
class Value:
    """One value of a property, with its statement's qualifiers when the KG has statements."""

    term: Term
    label: str | None = None
    qualifiers: list[Qualifier] = field(default_factory=list)


@dataclass
class Edge:
    """All values of one property of an entity."""

    property: str
    label: str | None
    values: list[Value]


@dataclass
class Incoming:
    """A property pointing at an entity: how many subjects use it (within the edges read) and a few of them."""

    property: str
    label: str | None
    count: int
    examples: list[Term]


@dataclass
class EntityPage:
    """An entity's outgoing edges, grouped by property, and the properties that point at it."""

    iri: str
    label: str | None
    description: str | None
    edges: list[Edge]
    truncated: bool = False
    incoming: list[Incoming] = field(default_factory=list)
    incoming_truncated: bool = False  # counts are over the first INCOMING_LIMIT incoming edges only

    def to_json(self) -> dict[str, Any]:
        """Plain data with SPARQL-JSON terms."""
        return {
            "iri": self.iri,
            "label": self.label,
            "description": self.description,
            "truncated": self.truncated,
            "edges": [
                {
                    "property": e.property,
                    "label": e.label,
                    "values": [
                        {
                            "value": v.term.to_json(),
                            "label": v.label,
                            "qualifiers": [
                                {
                                    "property": q.property,
                                    "label": q.property_label,
                                    "value": q.value.to_json(),
                                    "value_label": q.value_label,
                                }
                                for q in v.qualifiers
                            ],
                        }
                        for v in e.values
                    ],
                }
                for e in self.edges
            ],
            "incoming": [
                {"property": i.property, "label": i.label, "count": i.count,
                 "examples": [t.to_json() for t in i.examples]}
                for i in self.incoming
            ],
            "incoming_truncated": self.incoming_truncated,
        }

    def to_text(self, kg: KnowledgeGraph, *, max_values: int = 20) -> str:
        """An indented outline, values clipped per property."""
        p = kg.prefixes
        head = p.compact(self.iri) + (f" ({self.label})" if self.label else "")
        lines = [head + (f": {self.description}" if self.description else "")]
        for e in self.edges:
            name = f"  {p.compact(e.property)}{_label_part(e.property, e.label)}:"
            shown = [
                clip(show_term(v.term, p, {v.term.value: v.label} if v.label else None), 200)
                for v in e.values[:max_values]
            ]
            if len(e.values) == 1 and not e.values[0].qualifiers:
                lines.append(f"{name} {shown[0]}")  # one value on its property's line: pages are resent each step
                continue
            lines.append(name)
            for v, text in zip(e.values[:max_values], shown, strict=True):
                lines.append("    " + text)
                for q in v.qualifiers:
                    ql = f" ({q.property_label})" if q.property_label else ""
                    qv = show_term(
                        q.value, p, {q.value.value: q.value_label} if q.value_label else None
                    )
                    lines.append(f"      └ {p.compact(q.property)}{ql}: {clip(qv, 150)}")
            if len(e.values) > max_values:
                lines.append(f"    (showing {max_values} of {len(e.values)} values of {p.compact(e.property)})")
        if self.truncated:
            lines.append(f"  (the page is cut: only the first {EDGE_LIMIT} outgoing edges were read; there are more)")
        if not self.edges:
            lines.append("  (no outgoing edges)")
        if self.incoming:
            lines.append("  incoming (subject → property → this entity):")
            for i in self.incoming:
                ex = ", ".join(show_term(t, p) for t in i.examples)
                name = p.compact(i.property) + _label_part(i.property, i.label)
                lines.append(f"    ← {name} ×{i.count}" + (f", e.g. {ex}" if ex else ""))
            if self.incoming_truncated:
                lines.append(f"    (counted over the first {INCOMING_LIMIT} incoming edges; there are more)")
        return "\n".join(lines)


def absent(kg: KnowledgeGraph, iris: Iterable[str], *, timeout_s: float = ABSENT_SECONDS) -> list[str]:
    """Those of `iris` that occur nowhere in the graph (as subject, predicate or object), by one query; none when
    the query fails (the check is a hint, never a verdict on a slow endpoint)."""
    wanted = [i for i in dict.fromkeys(iris) if _IRI_OK.match(i)]
    if not wanted:
        return []
    values = " ".join(f"<{i}>" for i in wanted)
    query = (f"SELECT ?i WHERE {{ VALUES ?i {{ {values} }} "
             "FILTER NOT EXISTS { { ?i ?p ?o } UNION { ?s ?p ?i } UNION { ?s ?i ?o } } }")
    result = kg.endpoint.query(query, timeout_s=timeout_s)
    if not result.ok or result.table is None:
        return []
    found = {r["i"].value for r in result.table.rows if "i" in r}
    return [i for i in wanted if i in found]


def closest_values(kg: KnowledgeGraph, prop: str, text: str, *, k: int = 5,
                   timeout_s: float = ABSENT_SECONDS) -> list[str]:
    """The stored literal values of `prop` closest to `text`, as stored (a trailing space kept): the same letters in
    any case and spacing first ("NewYork" for "New York", "Lyon " for "Lyon"), then one holding the other, then the
    most alike. Empty when nothing is close or the queries fail (a hint, never a verdict), and on a graph not known
    to be small: a property's values are scanned, which on a large endpoint (Wikidata's labels) would time out."""
    triples = kg.extra.get("triples")
    if not _IRI_OK.match(prop) or not isinstance(triples, int) or triples > CLOSE_TRIPLES:
        return []
    want = _loose(text)
    if not want:
        return []
    literal = json.dumps(want, ensure_ascii=False)
    # The engine finds values holding the wanted letters among any number; a sample covers near misses.
    queries = [f'SELECT DISTINCT ?v WHERE {{ ?s <{prop}> ?v FILTER(isLiteral(?v) && CONTAINS(LCASE(REPLACE(STR(?v), '
               f'"[^A-Za-z0-9]", "")), {literal})) }} LIMIT 20',
               f"SELECT DISTINCT ?v WHERE {{ ?s <{prop}> ?v FILTER(isLiteral(?v)) }} LIMIT {CLOSE_SAMPLE}"]
    found: dict[str, None] = {}
    for query in queries:
        result = kg.endpoint.query(query, timeout_s=timeout_s)
        if result.ok and result.table is not None:
            found.update((r["v"].value, None) for r in result.table.rows if "v" in r)
    ranked = sorted(((_closeness(want, _loose(v)), v) for v in found), key=lambda sv: (-sv[0], sv[1]))
    return [v for score, v in ranked if score >= CLOSE_ENOUGH][:k]


def value_datatype(kg: KnowledgeGraph, prop: str, *, timeout_s: float = ABSENT_SECONDS) -> str | None:
    """The one datatype of `prop`'s stored literal values when it is not text (xsd:date, xsd:integer, …): a plain
    text compared with them matches none. None for text values, mixed or no values, failed queries, and on a graph
    not known to be small (as `closest_values`)."""
    triples = kg.extra.get("triples")
    if not _IRI_OK.match(prop) or not isinstance(triples, int) or triples > CLOSE_TRIPLES:
        return None
    result = kg.endpoint.query(f"SELECT DISTINCT (DATATYPE(?v) AS ?t) WHERE {{ ?s <{prop}> ?v FILTER(isLiteral(?v)) }} "
                               "LIMIT 2", timeout_s=timeout_s)
    if not result.ok or result.table is None:
        return None
    found = [r["t"].value for r in result.table.rows if "t" in r]
    return found[0] if len(found) == 1 and found[0] not in _TEXT_TYPES else None


def _loose(text: str) -> str:
    """Letters and digits only, in lower case ("New York " → "newyork")."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


def _closeness(want: str, stored: str) -> float:
    """1 for the same letters, 0.9 when one holds the other, else how alike they are (0–0.8)."""
    if not stored:
        return 0.0
    if stored == want:
        return 1.0
    if want in stored or stored in want:
        return 0.9
    return 0.8 * difflib.SequenceMatcher(None, want, stored).ratio()


def _label_part(iri: str, label: str | None) -> str:
    """` (label)` when the label says more than the property's own name (`wdt:P31 (instance of)`)."""
    return f" ({label})" if label_adds(iri, label) else ""


def _run(kg: KnowledgeGraph, sparql: str, bound: tuple[str, ...] = ()) -> tuple[list[dict[str, Term]], bool]:
    """Rows of a lookup query that bind every variable in `bound` (the query always binds them: a row without one
    comes from a broken endpoint and is skipped), and whether a cap cut them."""
    res = kg.endpoint.query(sparql)
    if res.outcome not in (Outcome.OK, Outcome.EMPTY):
        raise LookupFailed(f"{res.outcome.value}: {res.message}")
    if res.table is None:
        return [], False
    return [r for r in res.table.rows if all(v in r for v in bound)], res.table.truncated


def entity(kg: KnowledgeGraph, iri: str) -> EntityPage:
    """Outgoing edges of an entity grouped by property; Wikibase statements carry their qualifiers."""
    rows, cut = _run(kg, f"SELECT ?p ?o WHERE {{ <{iri}> ?p ?o }} LIMIT {EDGE_LIMIT + 1}", ("p", "o"))
    truncated = cut or len(rows) > EDGE_LIMIT
    rows = rows[:EDGE_LIMIT]
    wb = kg.vocab.wikibase
    label: str | None = None
    description: str | None = None
    grouped: dict[str, list[Value]] = {}
    label_preds, desc_preds = set(kg.vocab.labels), set(kg.vocab.descriptions)
    for row in rows:
        p, o = row["p"].value, row["o"]
        if p in label_preds and o.kind == "literal" and (label is None or o.lang in ("en", None)):
            label = o.value
        if (
            p in desc_preds
            and o.kind == "literal"
            and (description is None or o.lang in ("en", None))
        ):
            description = o.value
        if (
            wb
            and p.startswith(wb.claim)
            and not p.startswith((wb.direct, wb.statement, wb.qualifier))
        ):
            continue  # statement nodes are shown as qualifiers under the direct values below
        if o.kind == "literal" and o.lang and o.lang not in kg.vocab.languages:
            continue
        grouped.setdefault(p, []).append(Value(o))
    if wb:
        truncated = _attach_qualifiers(kg, iri, grouped) or truncated
    iris = {
        iri,
        *grouped,
        *(v.term.value for vs in grouped.values() for v in vs if v.term.kind == "uri"),
    }
    iris |= {q.property for vs in grouped.values() for v in vs for q in v.qualifiers}
    iris |= {
        q.value.value
        for vs in grouped.values()
        for v in vs
        for q in v.qualifiers
        if q.value.kind == "uri"
    }
    labels = _labels(kg, iris)
    edges: list[Edge] = []
    for p, values in grouped.items():
        for v in values:
            v.label = labels.get(v.term.value) if v.term.kind == "uri" else None
            for q in v.qualifiers:
                q.property_label = labels.get(q.property)
                q.value_label = labels.get(q.value.value) if q.value.kind == "uri" else None
        edges.append(Edge(p, labels.get(p), values))
    edges.sort(
        key=lambda e: (e.property not in label_preds | desc_preds, kg.prefixes.compact(e.property))
    )
    incoming, incoming_cut = _incoming(kg, iri)
    return EntityPage(iri, label or labels.get(iri), description, edges, truncated, incoming, incoming_cut)


def _incoming(kg: KnowledgeGraph, iri: str, examples: int = 2) -> tuple[list[Incoming], bool]:
    """Properties pointing at `iri` with their counts (over a bounded read) and a couple of subjects each."""
    rows, cut = _run(kg, f"SELECT ?s ?p WHERE {{ ?s ?p <{iri}> }} LIMIT {INCOMING_LIMIT + 1}", ("s", "p"))
    cut = cut or len(rows) > INCOMING_LIMIT
    found: dict[str, Incoming] = {}
    wb = kg.vocab.wikibase
    for row in rows[:INCOMING_LIMIT]:
        if "p" not in row or "s" not in row:
            continue
        p = row["p"].value
        if wb and p.startswith((wb.statement, wb.qualifier)):
            continue  # statement nodes: their item shows the same edge as a direct claim
        entry = found.setdefault(p, Incoming(p, None, 0, []))
        entry.count += 1
        if len(entry.examples) < examples:
            entry.examples.append(row["s"])
    labels = _labels(kg, found)
    for entry in found.values():
        entry.label = labels.get(entry.property)
    return sorted(found.values(), key=lambda i: (-i.count, i.property)), cut


def _attach_qualifiers(kg: KnowledgeGraph, iri: str, grouped: dict[str, list[Value]]) -> bool:
    """Add statement qualifiers (and non-best-rank values); True when the statements were cut short."""
    wb = kg.vocab.wikibase
    assert wb is not None
    rows, cut = _run(
        kg,
        f"SELECT ?claim ?st ?v ?q ?qv WHERE {{ <{iri}> ?claim ?st . ?st ?ps ?v . "
        f'FILTER(STRSTARTS(STR(?ps), "{wb.statement}")) '
        f'OPTIONAL {{ ?st ?q ?qv . FILTER(STRSTARTS(STR(?q), "{wb.qualifier}")) }} }} LIMIT {EDGE_LIMIT * 4}',
        ("claim", "st", "v"),
    )
    by_value: dict[tuple[str, Term], dict[str, list[Qualifier]]] = {}
    for row in rows:
        pid = wb.property_id(row["claim"].value)
        if not pid:
            continue
        quals = by_value.setdefault((wb.direct_iri(pid), row["v"]), {})
        bucket = quals.setdefault(row["st"].value, [])
        if "q" in row and "qv" in row:
            bucket.append(Qualifier(row["q"].value, None, row["qv"], None))
    for (direct, value), statements in by_value.items():
        values = grouped.setdefault(direct, [])
        match = next((v for v in values if v.term == value), None)
        if (
            match is None
        ):  # a non-best-rank statement: shown too, it may be what the question is about
            match = Value(value)
            values.append(match)
        for statement_quals in statements.values():
            match.qualifiers.extend(statement_quals)
    return cut or len(rows) >= EDGE_LIMIT * 4


def _labels(kg: KnowledgeGraph, iris: Iterable[str]) -> dict[str, str]:
    iris = list(iris)
    labels = dict(kg.names.labels_of(iris))
    wb = kg.vocab.wikibase
    if wb:
        # wdt:/ps:/pq: forms take the label of their property entity.
        # (their own index entries, if any, only carry a local name such as "P31").
        forms = {i: wb.property_id(i) for i in iris}
        ents = {i: wb.entity_iri(pid) for i, pid in forms.items() if pid and i != wb.entity_iri(pid)}
        found = kg.names.labels_of(ents.values())
        labels.update({i: found[e] for i, e in ents.items() if e in found})
    return labels


@dataclass
class PropertyExamples:
    """A few real subject–object pairs of a property."""

    property: str
    label: str | None
    pairs: list[tuple[Term, Term]]
    labels: dict[str, str]

    def to_text(self, kg: KnowledgeGraph) -> str:
        """One pair a line."""
        p = kg.prefixes
        head = (
            f"Examples of {p.compact(self.property)}"
            + (f" ({self.label})" if self.label else "")
            + ":"
        )
        if not self.pairs:
            return head + "\n  (no triples use this property)"
        return "\n".join(
            [head]
            + [
                f"  {show_term(s, p, self.labels)} → {clip(show_term(o, p, self.labels), 150)}"
                for s, o in self.pairs
            ]
        )

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "property": self.property,
            "label": self.label,
            "examples": [{"subject": s.to_json(), "object": o.to_json()} for s, o in self.pairs],
            "labels": self.labels,
        }


def property_examples(kg: KnowledgeGraph, prop: str, *, limit: int = 5) -> PropertyExamples:
    """Up to `limit` subject–object pairs that use a property (Wikibase property entities via their direct claim)."""
    pred = property_iri(kg, prop)
    rows, _ = _run(kg, f"SELECT ?s ?o WHERE {{ ?s <{pred}> ?o }} LIMIT {limit}")
    pairs = [(r["s"], r["o"]) for r in rows if "s" in r and "o" in r]
    labels = _labels(
        kg, [pred, prop, *(t.value for pair in pairs for t in pair if t.kind == "uri")]
    )
    return PropertyExamples(pred, labels.get(prop) or labels.get(pred), pairs, labels)


@dataclass
class Relations:
    """Properties around an entity: outgoing and incoming, with how many triples use each."""

    iri: str
    outgoing: list[tuple[str, int]]
    incoming: list[tuple[str, int]]
    labels: dict[str, str]

    def to_text(self, kg: KnowledgeGraph) -> str:
        """Two lists."""
        p = kg.prefixes

        def fmt(items: list[tuple[str, int]]) -> list[str]:
            return [
                f"  {p.compact(i)}"
                + (f" ({self.labels[i]})" if i in self.labels else "")
                + f" ×{n}"
                for i, n in items
            ] or ["  (none)"]

        return "\n".join(
            [
                f"Outgoing from {p.compact(self.iri)}:",
                *fmt(self.outgoing),
                "Incoming:",
                *fmt(self.incoming),
            ]
        )


def relations(kg: KnowledgeGraph, iri: str) -> Relations:
    """Forward and backward properties of an entity."""
    out_rows, _ = _run(
        kg,
        f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ <{iri}> ?p ?o }} GROUP BY ?p ORDER BY DESC(?n) LIMIT 200",
        ("p", "n"),
    )
    in_rows, _ = _run(
        kg,
        f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ ?s ?p <{iri}> }} GROUP BY ?p ORDER BY DESC(?n) LIMIT 200",
        ("p", "n"),
    )
    # A count that is no number comes from a broken endpoint too.
    outgoing = [(r["p"].value, int(r["n"].value)) for r in out_rows if r["n"].value.isdigit()]
    incoming = [(r["p"].value, int(r["n"].value)) for r in in_rows if r["n"].value.isdigit()]
    labels = _labels(kg, [p for p, _ in outgoing + incoming])
    return Relations(iri, outgoing, incoming, labels)
