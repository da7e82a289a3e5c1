"""A schema digest for prompts: the main classes of a graph with instance counts, and per class its most used
properties with their ranges, within a token budget; plus the prefixes that matter for the graph (namespaces
that occur in the data) and whether its names are real labels or humanised identifiers.

Any strategy can call `Digests.get(kg)`. The schema comes from the retrieval index when `sparqlnav index` stored
one (never built here), else it is computed for graphs small enough to profile in seconds, else read from the
endpoint's VoID; a graph too large for either gets an empty digest. Each KG's digest is made once per holder,
with what the data probes (`tools/probes.py`) found on small graphs; retrieve's shapes (`annotated_shape`) say the
same facts, with the instances of small classes.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import Term, clip, show_term
from sparqlnav.graph.schema import (
    META_NAMESPACES,
    PredicateInfo,
    Schema,
    compute_schema,
    namespace_of,
    read_void,
)
from sparqlnav.graph.vocab import label_adds
from sparqlnav.settings import Settings
from sparqlnav.sparql.prefixes import WELL_KNOWN, PrefixMap
from sparqlnav.tools.probes import Probes, one_line, probe

if TYPE_CHECKING:
    from sparqlnav.retrieval.indexes import KGIndexes

CHARS_PER_TOKEN = 4
ALWAYS = ("rdf", "rdfs", "xsd", "owl")  # prefixes every prompt keeps
# A property whose local name ends in name, title or label (`name`, `first_name`, `countryName`, and run together:
# `countryname`, `fullname`, which relational columns often are).
_NAME_LIKE = re.compile(r"(name|title|label)s?$", re.I)
_NAME_WORD = re.compile(r"(?:^|[^a-zA-Z]|(?<=[a-z])(?=[A-Z]))(?:[Nn]ame|[Tt]itle|[Ll]abel|NAME|TITLE|LABEL)S?s?$")
_PLAIN_LITERAL = re.compile(r"(\S+) → (xsd:\w+)")  # a property part with a bare datatype range
_STEM_ENDS = "-_/:#.="  # where a stem shared by members' names may end (a token boundary)


@dataclass(frozen=True)
class Digest:
    """What a prompt says about a graph's contents (`text` is empty when nothing is known)."""

    text: str = ""
    prefixes: Mapping[str, str] = field(default_factory=dict)  # the prefixes that matter, invented ones included
    invented: Mapping[str, str] = field(default_factory=dict)  # prefixes the graph does not declare
    labelled: bool | None = None  # whether a label property is in use (None: unknown)
    name_properties: tuple[str, ...] = ()  # literal properties holding names when there are no labels
    source: str = "none"  # index, computed, void or none
    probes: Probes = field(default_factory=Probes)  # what data probes found (small graphs only)

    def graph(self, kg: KnowledgeGraph) -> KnowledgeGraph:
        """`kg` with the invented prefixes added, so queries and tools may use them."""
        return dataclasses.replace(kg, prefixes=kg.prefixes.merged(self.invented)) if self.invented else kg

    def prefix_lines(self, kg: KnowledgeGraph) -> str:
        """The prefixes a prompt lists: those that matter (all of the graph's when nothing is known)."""
        # Only the namespaces the data uses (CK25's file declares ~90, most never used); Wikidata keeps its own.
        shown = self.prefixes or dict(kg.prefixes.items())
        return "\n".join(f"  {p}: <{ns}>" for p, ns in sorted(shown.items()) if p)

    def block(self) -> str:
        """The digest as a prompt paragraph (empty when nothing is known)."""
        return f"\n{self.text}\n" if self.text else ""


@dataclass(frozen=True)
class DigestOptions:
    """Bounds of a digest: its size in the prompt and what it may cost to make."""

    max_tokens: int = 700
    properties_per_class: int = 12  # with their ranges
    names_per_class: int = 30  # then names only
    profile_triples: int = 500_000  # local graphs up to this size are profiled when no index has a schema
    query_seconds: float = 10.0  # per profiling or sampling query
    few_values: int = 3  # a literal property with at most this many distinct values shows them
    listed_values: int = 12  # a text property with at most this many values, which repeat, lists them all
    members: int = 30  # a class with at most this many instances lists them where its shape is shown


def stored_digests(settings: Settings | None) -> Digests:
    """A digest holder that reads the schemas `sparqlnav index` stored under the settings' home."""
    from sparqlnav.retrieval.indexes import KGIndexes

    # The registry builds strategies without settings: read them once, as the entry points do.
    settings = settings or Settings.from_env()
    return Digests(KGIndexes(settings.paths.home, embedding=settings.embedding))


class Digests:
    """Each KG's digest and class samples, made once (thread-safe); `indexes` supplies stored schemas."""

    def __init__(self, indexes: KGIndexes | None = None, options: DigestOptions | None = None) -> None:
        self.indexes = indexes
        self.options = options or DigestOptions()
        self._lock = threading.Lock()
        self._digests: dict[tuple[str, str], Digest] = {}
        self._schemas: dict[tuple[str, str], tuple[Schema | None, str]] = {}
        self._samples: dict[tuple[str, str, str], dict[str, list[Term]]] = {}
        self._members: dict[tuple[str, str, str], list[tuple[Term, str | None]]] = {}

    def get(self, kg: KnowledgeGraph) -> Digest:
        """The digest of `kg` (empty for Wikibase-shaped graphs, which the prompt describes by their shape)."""
        key = (kg.name, kg.description)
        with self._lock:
            found = self._digests.get(key)
        if found is not None:
            return found
        made = Digest() if kg.vocab.wikibase else self._make(kg)
        with self._lock:
            return self._digests.setdefault(key, made)

    def schema(self, kg: KnowledgeGraph) -> tuple[Schema | None, str]:
        """The KG's schema and where it came from (index, computed, void), or (None, "none")."""
        key = (kg.name, kg.description)
        with self._lock:
            if key in self._schemas:
                return self._schemas[key]
        got = self._find_schema(kg)
        with self._lock:
            return self._schemas.setdefault(key, got)

    def samples(self, kg: KnowledgeGraph, class_iri: str) -> dict[str, list[Term]]:
        """Up to two real values per property of the class's instances (empty when the query fails)."""
        key = (kg.name, kg.description, class_iri)
        with self._lock:
            if key in self._samples:
                return self._samples[key]
        typing = kg.vocab.type_predicate
        query = (
            f"SELECT ?p ?o WHERE {{ {{ SELECT ?s WHERE {{ ?s <{typing}> <{class_iri}> }} LIMIT 50 }} ?s ?p ?o }} "
            "LIMIT 2000"
        )
        found: dict[str, list[Term]] = {}
        result = kg.endpoint.query(query, timeout_s=self.options.query_seconds)
        for row in result.table.rows if result.ok and result.table is not None else []:
            if "p" not in row or "o" not in row:
                continue
            values = found.setdefault(row["p"].value, [])
            if len(values) < 2 and row["o"] not in values and row["o"].kind != "bnode":
                values.append(row["o"])
        with self._lock:
            return self._samples.setdefault(key, found)

    def members(self, kg: KnowledgeGraph, class_iri: str) -> list[tuple[Term, str | None]]:
        """The instances of a small class with their labels (empty when it has more than `options.members`): relay
        models writing queries without tools guessed category and individual IRIs (`ontology:cold`)."""
        key = (kg.name, kg.description, "members:" + class_iri)
        with self._lock:
            if key in self._members:
                return self._members[key]
        cap = self.options.members
        labels = " ".join(f"<{p}>" for p in kg.vocab.labels[:2])
        named = f"OPTIONAL {{ VALUES ?lp {{ {labels} }} ?s ?lp ?l }}" if labels else ""
        query = (f"SELECT ?s (SAMPLE(?l) AS ?label) WHERE {{ ?s <{kg.vocab.type_predicate}> <{class_iri}> {named} }} "
                 f"GROUP BY ?s ORDER BY ?s LIMIT {cap + 1}")
        result = kg.endpoint.query(query, timeout_s=self.options.query_seconds)
        rows = result.table.rows if result.ok and result.table is not None else []
        found = [(r["s"], r["label"].value if "label" in r else None) for r in rows if "s" in r and r["s"].kind == "uri"]
        if len(rows) > cap:
            found = []  # not small: the shape's samples stand for its instances
        with self._lock:
            return self._members.setdefault(key, found)

    def _find_schema(self, kg: KnowledgeGraph) -> tuple[Schema | None, str]:
        if self.indexes is not None:
            stored = self.indexes.stored_schema(kg)
            if stored is not None and stored.classes:
                return stored, "index"
        from sparqlnav.retrieval.kg_index import EndpointRunner, SchemaUnavailable

        runner = EndpointRunner(kg.endpoint, timeout_s=self.options.query_seconds)
        typing = kg.vocab.type_predicate
        triples = kg.extra.get("triples")
        try:
            if isinstance(triples, int) and triples <= self.options.profile_triples:
                return compute_schema(runner, mode="full", type_predicate=typing), "computed"
            void = read_void(runner)  # a large graph: what its VoID offers, or nothing
            return (void, "void") if void.classes else (None, "none")
        except SchemaUnavailable:
            return None, "none"

    def _make(self, kg: KnowledgeGraph) -> Digest:
        schema, source = self.schema(kg)
        if schema is None:
            return Digest(prefixes=relevant_prefixes(kg.prefixes, [], {}))
        classes = main_classes(schema)
        instance_ns = self._instance_namespaces(kg, classes[:12])
        namespaces = [*schema.namespaces, *instance_ns]
        invented = invent_prefixes(kg.prefixes, namespaces)
        prefixes = relevant_prefixes(kg.prefixes, namespaces, invented)
        pmap = PrefixMap(dict(prefixes))
        labelled = any(p in schema.predicates for p in kg.vocab.labels)
        names = () if labelled else name_properties(schema)
        # Data probes (subclass typing, untyped values, links stored both ways …) scan the data: only on graphs
        # known to be small, so a big endpoint's first question never waits on them.
        triples = kg.extra.get("triples")
        small = isinstance(triples, int) and triples <= self.options.profile_triples
        # Example values may be in namespaces the schema does not use (CK25's pv:country → dbpedia:…): they are
        # written with any prefix the graph declares, and that prefix is then listed.
        every = {**dict(kg.prefixes.items()), **prefixes}
        probes = probe(kg, schema, classes[:12], PrefixMap(every), self.options) if small else Probes()
        text = render_digest(schema, pmap, classes, self.options, labelled=labelled, names=names, probes=probes)
        shown = shown_prefixes(every, text, instance_ns, invented)
        return Digest(text, shown, invented, labelled, names, source, probes)

    def _instance_namespaces(self, kg: KnowledgeGraph, classes: Iterable[str]) -> list[str]:
        """Namespaces of a sample instance of each class (entity IRIs need their prefix too)."""
        typing = kg.vocab.type_predicate
        values = " ".join(f"<{c}>" for c in classes)
        if not values:
            return []
        query = f"SELECT ?c (SAMPLE(?s) AS ?x) WHERE {{ VALUES ?c {{ {values} }} ?s <{typing}> ?c }} GROUP BY ?c"
        result = kg.endpoint.query(query, timeout_s=self.options.query_seconds)
        if not result.ok or result.table is None:
            return []
        return [namespace_of(r["x"].value) for r in result.table.rows if "x" in r and r["x"].kind == "uri"]


def main_classes(schema: Schema) -> list[str]:
    """Classes of the data (not of the vocabulary, nor its authors), most instances first."""
    return [
        c
        for c in schema.class_names
        if c in schema.classes
        and not c.startswith(META_NAMESPACES)
        and (schema.classes[c].instances or 0) > 0
        and not schema.about_the_vocabulary(c)
    ]


def name_properties(schema: Schema) -> tuple[str, ...]:
    """Literal-valued properties whose names say they hold names (name, title, label; `countryname` too), most used
    first, those where it is a word of its own (`name`, `first_name`) before those run together (`fullname`)."""
    found = [
        p
        for p in schema.predicate_names
        if _NAME_LIKE.search(re.split(r"[/#]", p)[-1])
        and any(pi.datatypes for c in schema.classes.values() if (pi := c.predicates.get(p)) is not None)
    ]
    found.sort(key=lambda p: _NAME_WORD.search(re.split(r"[/#]", p)[-1]) is None)  # stable: use order kept
    return tuple(found[:3])


def invent_prefixes(known: PrefixMap, namespaces: Iterable[str]) -> dict[str, str]:
    """Prefixes for namespaces the graph uses but declares no prefix for (e.g. an ontology's own `…#`)."""
    declared = set(known.mapping.values())
    taken = set(known.mapping)
    out: dict[str, str] = {}
    counts: dict[str, int] = {}
    for ns in namespaces:
        if ns.startswith(("http://", "https://")) and ns not in declared:
            counts[ns] = counts.get(ns, 0) + 1
    for ns, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if known.compact(ns + "x") != f"<{ns}x>":
            continue  # a declared prefix already covers it
        words = [w for w in re.split(r"[^A-Za-z]+", ns.split("://", 1)[1]) if w]
        # Whole words: a name cut short (`performanc:` for …/performance#) reads as a misspelling.
        base = (words[-1].lower() if words else "ns")[:24] or "ns"
        name, i = base, 1
        while name in taken:
            i += 1
            name = f"{base}{i}"
        taken.add(name)
        out[name] = ns
    return out


def relevant_prefixes(known: PrefixMap, namespaces: Iterable[str], invented: Mapping[str, str]) -> dict[str, str]:
    """The graph's prefixes whose namespace occurs in `namespaces`, the invented ones, and rdf/rdfs/xsd/owl."""
    used = list(namespaces)
    out = {p: WELL_KNOWN[p] for p in ALWAYS}
    # One name per namespace: the well-known one when there is one (CK25 declares dcterms: twice, as ns2: too).
    ranked = sorted(known.items(), key=lambda kv: (kv[0] not in WELL_KNOWN, kv[0]))
    for p, ns in ranked:
        if p and ns not in out.values() and any(u == ns or u.startswith(ns) for u in used):
            out[p] = ns
    out.update(invented)
    return dict(sorted(out.items()))


def shown_prefixes(
    prefixes: Mapping[str, str], text: str, instance_ns: Iterable[str], invented: Mapping[str, str]
) -> dict[str, str]:
    """Of the data's prefixes, those a prompt lists: rdf/rdfs/xsd/owl, those the digest text uses, those of entity
    IRIs and the invented ones (CK25's data also uses creativecommons:, vann: and void: in its header, which no
    question needs, and the list is resent on every step)."""
    entities = list(instance_ns)
    return {
        p: ns
        for p, ns in prefixes.items()
        if p in ALWAYS
        or p in invented
        or any(u.startswith(ns) for u in entities)
        or re.search(rf"(?<![\w.-]){re.escape(p)}:", text)
    }


def render_digest(
    schema: Schema,
    prefixes: PrefixMap,
    classes: list[str],
    options: DigestOptions,
    *,
    labelled: bool,
    names: tuple[str, ...] = (),
    probes: Probes | None = None,
) -> str:
    """Lines for a prompt, one block per class, as many classes as fit in `options.max_tokens`."""
    budget = options.max_tokens * CHARS_PER_TOKEN
    rows = [_class_row(schema, prefixes, c, options, probes or Probes()) for c in classes]
    # Which classes fit: the first pass decides, so what is factored out below is said of exactly those.
    size, count = 0, 0
    for row in rows:
        block = row.block(())
        if size + len(block) > budget and count:
            break
        size += len(block) + 1
        count += 1
    rows = rows[:count]
    # A property every shown class has alike (CK25's `rdfs:label → xsd:string`) is said once, not per class: the
    # system prompt is resent on every step, and relay runs showed it is most of what a step costs.
    # A class or two without it (a dataset's own foaf:Organization) are named as exceptions.
    seen: dict[str, int] = {}
    for row in rows:
        for part in row.parts:
            seen[part] = seen.get(part, 0) + 1
    common = [part for part, n in seen.items() if len(rows) >= 3 and n >= len(rows) - min(2, len(rows) // 4)]
    # An incoming edge from a shown class is already its `→` line; only edges from elsewhere add anything.
    said = {(r.iri, pred, target) for r in rows for pred, target in r.ranges}
    main = set(classes)
    lines = ["Main classes (instances) with their most used properties; `→` gives what a property's values are"]
    for row in rows:
        into = [
            (n, p, s)
            for n, p, s in schema.incoming.get(row.iri, [])
            if s in main and (s, p, row.iri) not in said
        ]
        lines.append(row.block(common, sorted(into, reverse=True)[:3], prefixes))
    pointing = any("\n  ← " in line for line in lines)
    lines[0] += ", `←` which properties of other classes point at the class:" if pointing else ":"
    for part in common:
        without = [prefixes.compact(r.iri) for r in rows if part not in r.parts]
        lines.append(f"Every class above also has {part}" + (f" (except {', '.join(without)})." if without else "."))
    if count < len(classes):
        lines.append(f"- … and {len(classes) - count} more classes (search finds them)")
    if not labelled:
        lines.append(no_label_note(names, prefixes))
    return "\n".join(lines)


def no_label_note(names: Sequence[str], prefixes: PrefixMap) -> str:
    """The sentence saying a graph has no label property, and which properties hold names if any."""
    held = ", ".join(prefixes.compact(p) for p in names)
    return ("This graph has no label property (no rdfs:label): names shown in parentheses next to identifiers "
            "are humanised identifiers, not data"
            + (f"; names are held by {held}." if held else "; match things by their identifiers."))


def graph_notes(digest: Digest, prefixes: PrefixMap, properties: Iterable[str] = ()) -> list[str]:
    """What the digest knows of the whole graph, as lines for a prompt that shows classes one by one (retrieve's):
    that it has no label property, and the groups of sub-properties that `properties` belong to."""
    notes = [f"- {no_label_note(digest.name_properties, prefixes)}"] if digest.labelled is False else []
    shown = set(properties)
    groups = [f"{prefixes.compact(group)} = " + ", ".join(_in_prefix_of(group, m, prefixes) for m in members)
              for group, members in digest.probes.groups.items() if group in shown or shown & set(members)]
    if groups:
        # Members are written in their group's prefix: BESTIARY's five groups cost 300 tokens spelled out.
        notes.append("- Property groups (rdfs:subPropertyOf; a member without a prefix is in its group's): "
                     + "; ".join(groups))
    return notes


def _in_prefix_of(group: str, member: str, prefixes: PrefixMap) -> str:
    """`hasACvalue` for ontology:hasACvalue in ontology:defValues; other members keep their prefix."""
    name, own = prefixes.compact(member), prefixes.compact(group)
    head = own.split(":", 1)[0] + ":" if ":" in own and not own.startswith("<") else None
    return name.removeprefix(head) if head and name.startswith(head) else name


@dataclass(frozen=True)
class _ClassRow:
    """One class of a digest: its head, its properties with ranges, and the names of the rest."""

    iri: str
    head: str
    parts: tuple[str, ...]
    ranges: tuple[tuple[str, str], ...]  # (property, class) pairs the parts show
    tail: str

    def block(
        self,
        common: Iterable[str],
        into: Iterable[tuple[int, str, str]] = (),
        prefixes: PrefixMap | None = None,
    ) -> str:
        """The class's lines, without the parts said once for all classes."""
        skip = set(common)
        body = "; ".join(_grouped(p for p in self.parts if p not in skip)) + self.tail
        text = f"{self.head}: {body.removeprefix('; ')}" if body else self.head
        edges = list(into)
        if edges and prefixes is not None:
            text += "\n  ← " + "; ".join(f"{prefixes.compact(p)} from {prefixes.compact(s)}" for _n, p, s in edges)
        return text


def _grouped(parts: Iterable[str]) -> list[str]:
    """Properties with the same plain datatype said once, where the first of them stood: `pv:id, pv:name →
    xsd:string` (the digest is resent on every step; CK25 spelled `→ xsd:string` twenty times)."""
    out: list[str] = []
    groups: dict[str, list[str]] = {}
    for part in parts:
        plain = _PLAIN_LITERAL.fullmatch(part)
        if plain is None:
            out.append(part)
            continue
        name, datatype = plain.groups()
        if datatype not in groups:
            groups[datatype] = []
            out.append(datatype)  # a placeholder, filled below
        groups[datatype].append(name)
    return [f"{', '.join(groups[p])} → {p}" if p in groups else p for p in out]


def _class_row(
    schema: Schema,
    prefixes: PrefixMap,
    c: str,
    options: DigestOptions,
    probes: Probes,
) -> _ClassRow:
    info = schema.classes[c]
    preds = [p for p in info.ranked_predicates() if p.iri not in schema.type_predicates]
    preds, spelled = _case_variants(preds, prefixes)
    parts, ranges = [], []
    for p in preds[: options.properties_per_class]:
        objects = _data_ranges(p)[:2]
        ranges += [(p.iri, o) for o in objects]
        rng = " | ".join(prefixes.compact(o) for o in objects) or probes.unknown.get((c, p.iri), "?")
        rng += _sparse(p, info.instances)
        if (c, p.iri) in probes.few:
            rng += f" ({probes.few[(c, p.iri)]})"
        if (c, p.iri) in probes.mixed:
            rng += f" ({probes.mixed[(c, p.iri)]})"
        if (c, p.iri) in probes.several:
            rng += f" (up to {probes.several[(c, p.iri)]} per instance)"
        if p.iri in probes.both_ways:
            rng += " (every link stored in both directions: query one direction only)"
        parts.append(f"{prefixes.compact(p.iri)} → {rng}{spelled.get(p.iri, '')}")
    more = len(preds) - options.properties_per_class
    # A subclass whose instances are typed only by it (CK25's pv:Manager) is missed by a query on the
    # superclass: saying so spares a model the step that finds it out.
    supers = [x for x in schema.superclasses.get(c, []) if not x.startswith(META_NAMESPACES)]  # not owl:Thing
    kind = f"; subclass of {', '.join(prefixes.compact(x) for x in supers[:2])}" if supers else ""
    if supers and c in probes.untyped:
        kind += f", not typed {prefixes.compact(supers[0])} too"
    # Past the first properties, their names with their main range, alike ones together (BESTIARY's str, dex,
    # hasSpeedValue … cost a search each; with no type, a step each to learn they are numbers).
    rest = preds[options.properties_per_class:][:options.names_per_class]
    by_range: dict[str, list[str]] = {}
    for p in rest:
        main = (_data_ranges(p) or [""])[0]
        if main in schema.classes:
            ranges.append((p.iri, main))
        by_range.setdefault(prefixes.compact(main) if main else "", []).append(
            prefixes.compact(p.iri) + spelled.get(p.iri, "") + _sparse(p, info.instances))
    groups = [", ".join(names) + (f" → {rng}" if rng else "") for rng, names in by_range.items()]
    tail = f"; also {'; '.join(groups)}" if rest else ""
    more -= len(rest)
    tail += f"; …+{more}" if more > 0 else ""
    head = f"- {prefixes.compact(c)} ({info.instances or 0}{kind})"
    return _ClassRow(c, head, tuple(parts), tuple(ranges), tail)


def _sparse(p: PredicateInfo, instances: int | None) -> str:
    """" (only 4 uses)" for a property fewer than half of the class's instances can have: a query on it finds few,
    which a relay model otherwise spent two steps confirming (BESTIARY's hasResists on 4 of 4,071 beasts)."""
    if p.triples is None or not instances or p.triples * 2 >= instances:
        return ""
    return f" (only {p.triples} use{'' if p.triples == 1 else 's'})"


def _data_ranges(p: PredicateInfo) -> list[str]:
    """A property's ranges without owl:NamedIndividual and the like beside a real class (BESTIARY's languages are
    typed both; "→ ontology:Language | owl:NamedIndividual" read as two kinds of value)."""
    ranked = p.ranked_objects()
    kept = [o for o in ranked if not o.startswith(META_NAMESPACES)]
    return kept if any(o in p.object_classes for o in kept) or not p.object_classes else ranked


def _members_line(members: Sequence[tuple[Term, str | None]], prefixes: PrefixMap) -> str:
    """`# all 26 instances: prodi:prod-cat-X for X = Breaker, Capacitor, …`, in natural order (1, 2, 10): a stem the
    names share is said once (26 category IRIs cost ~600 characters written out, in a prompt whose budget is 3k
    tokens), but only when it ends at a token boundary; otherwise the names are written whole. A direct-mapped
    table's `<…/person/person_id=1>` was cut mid-token, with a `>` after every value (`person_X for X = id=1>`)."""
    listed = sorted(((prefixes.compact(t.value), label if label_adds(t.value, label) else None)
                     for t, label in members), key=lambda pair: natural_key(pair[0]))
    whole = [name.startswith("<") and name.endswith(">") for name, _ in listed]
    bracketed = all(whole)
    # The stem is found inside the brackets, so it and every value are clean parts of the IRI.
    names = [name[1:-1] if bracketed else name for name, _ in listed]
    stem = _common_start(names) if len(names) >= 4 and (bracketed or not any(whole)) else ""
    stem = stem[: max(stem.rfind(sep) for sep in _STEM_ENDS) + 1]
    cut = len(stem) if len(stem) >= 6 and all(len(n) > len(stem) for n in names) else 0
    parts = []
    for name, (_full, label) in zip(names, listed, strict=True):
        own = name[cut:] if cut else (f"<{name}>" if bracketed else name)
        if label and label.startswith(own):  # CK25's services: "D215-3449390 - Manual Inspection"
            label = label[len(own):].lstrip(" -–:") or None
        parts.append(own + (f" ({label})" if label else ""))
    shown = ", ".join(parts)
    pattern = f"<{stem}X>" if bracketed else f"{stem}X"
    return f"  # all {len(members)} instances: " + (f"{pattern} for X = {shown}" if cut else shown)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the numbers inside names by value (person_id=2 before person_id=10)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def _common_start(names: Sequence[str]) -> str:
    """The characters every name starts with."""
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def _case_variants(preds: list[PredicateInfo], prefixes: PrefixMap) -> tuple[list[PredicateInfo], dict[str, str]]:
    """Properties whose names differ only in case (BESTIARY's hasHPvalue and hasHPValue) said as one, the most used
    first: a relay model spent a query finding out which to use, and a query with one spelling misses the other's."""
    first: dict[str, PredicateInfo] = {}
    variants: dict[str, list[PredicateInfo]] = {}
    kept: list[PredicateInfo] = []
    for p in preds:  # most used first
        main = first.setdefault(p.iri.lower(), p)
        if main is p:
            kept.append(p)
        else:
            variants.setdefault(main.iri, []).append(p)
    notes = {
        iri: " (also spelled " + "; ".join(
            prefixes.compact(v.iri) + (f", {v.triples} uses" if v.triples is not None else "") for v in vs
        ) + ")"
        for iri, vs in variants.items()
    }
    return kept, notes


def annotated_shape(
    schema: Schema,
    class_iri: str,
    samples: Mapping[str, list[Term]],
    probes: Probes | None = None,
    members: Sequence[tuple[Term, str | None]] = (),
) -> str:
    """A class's shape (in the schema's prefixes) with its size, one or two real sample values per property (or the
    only values there are), what the digest knows of each property (few uses, another spelling, several values per
    instance, links stored both ways), a superclass type missing and, for a small class, its instances."""
    prefixes = schema.prefix_map
    probes = probes or Probes()
    info = schema.classes.get(class_iri)
    preds = {p.iri: p for p in info.ranked_predicates()} if info else {}
    spellings = _spellings(list(preds.values()), prefixes)
    lines = schema.shape(class_iri, counts=False, incoming=True).splitlines()
    supers = [x for x in schema.superclasses.get(class_iri, []) if not x.startswith(META_NAMESPACES)]
    if lines and supers and class_iri in probes.untyped:
        lines[0] += f"; instances not typed {prefixes.compact(supers[0])} too"
    if lines and info is not None and info.instances:
        lines[0] = _noted(lines[0], f"{info.instances:,} instance{'' if info.instances == 1 else 's'}")
    if lines and members:
        lines.insert(1, _members_line(members, prefixes))
    out = []
    for line in lines:
        body = line.strip().rstrip(" ;")
        if _bookkeeping(body, prefixes):
            continue
        head = body.split(" ", 1)[0]
        named = head and head not in ("a", "}", "#") and not head.endswith("{")
        iri = prefixes.expand(head) if named else None
        values = samples.get(iri or "", []) if iri else []
        p = preds.get(iri or "")
        if p is not None:
            line = _plain_range(line, p, prefixes)
        few = probes.few.get((class_iri, iri or ""))
        if few:
            line = _noted(line, few)  # 'only "EUR"' says more than two examples of it
        elif values:
            # An IRI cut short tells nothing (`<http://ld.company.org/prod-instances/e…`): IRIs are shown whole.
            shown = ", ".join(show_term(v, prefixes) if v.kind == "uri" else clip(one_line(show_term(v, prefixes)), 40)
                              for v in values)
            line = _noted(line, f"e.g. {shown}")
        if iri and (class_iri, iri) in probes.mixed:
            line = _noted(line, probes.mixed[(class_iri, iri)])
        if iri and iri in spellings:
            line = _noted(line, spellings[iri])
        if p is not None and (sparse := _sparse(p, info.instances if info else None)):
            line = _noted(line, sparse.strip(" ()"))
        if iri and (class_iri, iri) in probes.several:
            line = _noted(line, f"up to {probes.several[(class_iri, iri)]} per instance")
        if iri and iri in probes.both_ways:
            line = _noted(line, "every link stored in both directions: query one direction only")
        out.append(line)
    return "\n".join(out)


def _bookkeeping(body: str, prefixes: PrefixMap) -> bool:
    """An incoming line from the vocabulary's bookkeeping (`# ← owl:hasValue from owl:Restriction`, `from
    owl:NamedIndividual`): the digest leaves these out, and BESTIARY's shapes spent a line on each."""
    found = re.fullmatch(r"# ← (\S+) from (\S+)", body)
    return found is not None and any(
        (prefixes.expand(name) or name).startswith(META_NAMESPACES) for name in found.groups())


def _noted(line: str, note: str) -> str:
    """A shape line with one more note in its comment."""
    return line + ("; " if "  # " in line else "  # ") + note


def _plain_range(line: str, p: PredicateInfo, prefixes: PrefixMap) -> str:
    """The line without owl:NamedIndividual beside a real class in the range, as the digest says it."""
    for o in set(p.ranked_objects()) - set(_data_ranges(p)):
        name = prefixes.compact(o)
        line = line.replace(f" {name} ]", " ]").replace(f"[ {name} ", "[ ")
    return line


def _spellings(preds: list[PredicateInfo], prefixes: PrefixMap) -> dict[str, str]:
    """For properties spelled two ways (BESTIARY's hasHPvalue and hasHPValue), a note on each: the most used says its
    other spellings with their uses, the others which spelling they are another of."""
    _kept, notes = _case_variants(sorted(preds, key=lambda p: -(p.triples or 0)), prefixes)
    out = {iri: note.strip(" ()") for iri, note in notes.items()}
    by_name: dict[str, str] = {}
    for p in sorted(preds, key=lambda p: -(p.triples or 0)):
        main = by_name.setdefault(p.iri.lower(), p.iri)
        if main != p.iri:
            out[p.iri] = f"another spelling of {prefixes.compact(main)}"
    return out
