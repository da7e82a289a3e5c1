"""The schema of a knowledge graph: classes with instance counts; per class, predicates with triple counts and
their object classes (with counts) or datatypes; linksets to other datasets; prefixes.

Read it from a VoID description (file or endpoint) or compute it through any SPARQL endpoint, render it as
ShEx-like shapes for prompts and retrieval, and cache it as JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol

import pyoxigraph as ox

from sparqlnav.sparql.prefixes import WELL_KNOWN, PrefixMap

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
RDFS_SUBCLASS = "http://www.w3.org/2000/01/rdf-schema#subClassOf"
INCOMING_SHOWN = 5  # properties pointing at a class that its shape lists
VOID = "http://rdfs.org/ns/void#"
VOID_EXT = ("http://ldf.fi/void-ext#", "http://purl.org/query/voidext#")
SD = "http://www.w3.org/ns/sparql-service-description#"
SH = "http://www.w3.org/ns/shacl#"
SCHEMA_JSON_VERSION = 1
# Classes describing the vocabulary or the dataset itself, not the data a question is about.
META_NAMESPACES = (WELL_KNOWN["rdf"], WELL_KNOWN["rdfs"], WELL_KNOWN["owl"], VOID, SH, SD)


class QueryRunner(Protocol):
    """Anything that runs a SPARQL SELECT and returns rows of variable → lexical value or IRI."""

    def select(self, sparql: str) -> list[dict[str, str]]:
        """Rows of the query's solutions (unbound variables left out)."""
        ...


ProgressFn = Callable[[int, int, str], None]
"""progress(done, total, message)."""


@dataclass
class PredicateInfo:
    """A predicate as used on one class: how often, and what its objects are."""

    iri: str
    triples: int | None = None
    object_classes: dict[str, int | None] = field(default_factory=dict)
    datatypes: dict[str, int | None] = field(default_factory=dict)

    def objects_fully_typed(self) -> bool:
        """True when the object-class counts account for every triple (so the range is known)."""
        if not self.object_classes or self.datatypes or self.triples is None:
            return False
        counts = list(self.object_classes.values())
        if any(c is None for c in counts):
            return False
        return sum(c for c in counts if c is not None) >= self.triples

    def ranked_objects(self) -> list[str]:
        """Object classes then datatypes, most frequent first."""

        def order(d: dict[str, int | None]) -> list[str]:
            return sorted(d, key=lambda k: (-(d[k] or 0), k))

        return order(self.object_classes) + order(self.datatypes)


@dataclass
class ClassInfo:
    """A class: its instance count, named graphs, and predicates used on its instances."""

    iri: str
    instances: int | None = None
    predicates: dict[str, PredicateInfo] = field(default_factory=dict)
    graphs: list[str] = field(default_factory=list)

    def ranked_predicates(self) -> list[PredicateInfo]:
        """Predicates by triple count, most frequent first (rdf:type first)."""
        return sorted(
            self.predicates.values(),
            key=lambda p: (p.iri != RDF_TYPE, -(p.triples or 0), p.iri),
        )


@dataclass
class Linkset:
    """Triples with `predicate` linking subjects of one class (or dataset) to objects of another."""

    predicate: str
    subject_class: str | None = None
    object_class: str | None = None
    object_endpoint: str | None = None
    triples: int | None = None


@dataclass
class Schema:
    """What a knowledge graph contains, class by class."""

    classes: dict[str, ClassInfo] = field(default_factory=dict)
    predicates: dict[str, int | None] = field(default_factory=dict)
    prefixes: dict[str, str] = field(default_factory=dict)
    linksets: list[Linkset] = field(default_factory=list)
    endpoint: str | None = None
    linked_endpoints: list[str] = field(default_factory=list)
    type_predicates: list[str] = field(default_factory=lambda: [RDF_TYPE])
    labels: dict[str, str] = field(default_factory=dict)
    superclasses: dict[str, list[str]] = field(default_factory=dict)  # rdfs:subClassOf in the data
    source: str = ""
    sampled: bool = False

    # -- look-ups
    @cached_property
    def prefix_map(self) -> PrefixMap:
        """Well-known prefixes plus the schema's own (which win)."""
        return PrefixMap.default({k: v for k, v in self.prefixes.items() if k})

    def compact(self, iri: str) -> str:
        """`prefix:local` where a prefix matches, else `<iri>`."""
        return self.prefix_map.compact(iri)

    @cached_property
    def object_only_classes(self) -> set[str]:
        """Classes known only as objects of predicates (no class partition of their own)."""
        found = {
            oc
            for c in self.classes.values()
            for p in c.predicates.values()
            for oc in p.object_classes
            if oc not in self.classes
        }
        found |= {
            ls.object_class
            for ls in self.linksets
            if ls.object_class and ls.object_class not in self.classes
        }
        found |= {
            ls.subject_class
            for ls in self.linksets
            if ls.subject_class and ls.subject_class not in self.classes
        }
        return found

    def has_class(self, iri: str) -> bool:
        """Whether `iri` is a class of this graph (with or without statistics of its own)."""
        return iri in self.classes or iri in self.object_only_classes

    def has_predicate(self, iri: str) -> bool:
        """Whether `iri` is used as a predicate anywhere in this graph."""
        return iri in self.predicates

    @cached_property
    def sole_domains(self) -> dict[str, str]:
        """Predicate → the one class all its subjects belong to, where the counts prove it.

        True when a single class uses the predicate and that class accounts for every triple of it: a
        subject with another type as well would put the predicate in that class's statistics too."""
        users: dict[str, list[ClassInfo]] = {}
        for c in self.classes.values():
            for p in c.predicates:
                users.setdefault(p, []).append(c)
        found: dict[str, str] = {}
        for p, classes in users.items():
            total = self.predicates.get(p)
            if len(classes) != 1 or total is None:
                continue
            own = classes[0].predicates[p].triples
            if own is not None and own >= total and classes[0].iri not in self.type_predicates:
                found[p] = classes[0].iri
        return found

    @cached_property
    def subclasses(self) -> dict[str, list[str]]:
        """Class → its direct subclasses (the inverse of `superclasses`)."""
        out: dict[str, list[str]] = {}
        for sub, supers in sorted(self.superclasses.items()):
            for sup in supers:
                out.setdefault(sup, []).append(sub)
        return out

    @cached_property
    def incoming(self) -> dict[str, list[tuple[int, str, str]]]:
        """Class → (triples, predicate, subject class) of the properties whose values are of that class, most
        used first."""
        out: dict[str, list[tuple[int, str, str]]] = {}
        for c in self.classes.values():
            for p in c.predicates.values():
                for oc, n in p.object_classes.items():
                    out.setdefault(oc, []).append((n or 0, p.iri, c.iri))
        return {oc: sorted(edges, key=lambda e: (-e[0], e[1], e[2])) for oc, edges in out.items()}

    def about_the_vocabulary(self, class_iri: str) -> bool:
        """Whether a class's instances are pointed at only from the vocabulary's own bookkeeping (CK25's foaf:Person
        ← dcterms:creator from owl:Ontology: the ontology's authors), so they are metadata, not the data asked about."""
        sources = [s for _n, _p, s in self.incoming.get(class_iri, [])]
        return bool(sources) and all(s.startswith(META_NAMESPACES) for s in sources)

    @cached_property
    def namespaces(self) -> dict[str, int]:
        """Namespace → number of classes and predicates in it (where the schema is authoritative)."""
        counts: dict[str, int] = {}
        for iri in [*self.classes, *self.object_only_classes, *self.predicates]:
            ns = namespace_of(iri)
            counts[ns] = counts.get(ns, 0) + 1
        return counts

    @cached_property
    def class_names(self) -> list[str]:
        """All class IRIs, most instances first."""
        ranked = sorted(self.classes.values(), key=lambda c: (-(c.instances or 0), c.iri))
        return [c.iri for c in ranked] + sorted(self.object_only_classes)

    @cached_property
    def predicate_names(self) -> list[str]:
        """All predicate IRIs, most triples first."""
        return sorted(self.predicates, key=lambda p: (-(self.predicates[p] or 0), p))

    # -- shapes
    def shape(
        self,
        class_iri: str,
        *,
        top_fraction: float = 1.0,
        max_objects: int = 5,
        counts: bool = False,
        incoming: bool = False,
    ) -> str:
        """A ShEx-like shape of one class: its predicates (most frequent first) with object classes or datatypes,
        its super- and subclasses in the header.

        `top_fraction` keeps only the most frequent share of predicates (at least one); `incoming` adds, as
        comments, the properties whose values are of this class (`← p from C`), so each direction is evident."""
        info = self.classes.get(class_iri)
        name = self.compact(class_iri)
        typing = self.type_predicates[0] if self.type_predicates else RDF_TYPE
        verb = "a" if typing == RDF_TYPE else self.compact(typing)
        entries: list[tuple[str, str]] = [(f"{verb} [ {name} ]", "")]
        ranked = [
            p
            for p in (info.ranked_predicates() if info else [])
            if p.iri not in self.type_predicates
        ]
        if ranked and top_fraction < 1.0:
            ranked = ranked[: max(1, math.ceil(len(ranked) * top_fraction))]
        for pred in ranked:
            objects = pred.ranked_objects()
            shown = " ".join(self.compact(o) for o in objects[:max_objects])
            if len(objects) > max_objects:
                shown += f" …+{len(objects) - max_objects}"
            if not objects:
                value = "."  # ShEx's "anything": the source says nothing about the objects
            elif not pred.object_classes and len(pred.datatypes) == 1:
                value = shown
            else:
                value = f"[ {shown} ]"
            entries.append(
                (
                    f"{self.compact(pred.iri)} {value}",
                    f"  # {pred.triples:,}" if counts and pred.triples else "",
                )
            )
        notes = [self.labels[class_iri]] if class_iri in self.labels else []
        if counts and info and info.instances:
            notes.append(f"{info.instances:,} instances")
        if self.superclasses.get(class_iri):
            notes.append("subclass of " + ", ".join(self.compact(c) for c in self.superclasses[class_iri]))
        if self.subclasses.get(class_iri):
            notes.append("subclasses: " + ", ".join(self.compact(c) for c in self.subclasses[class_iri]))
        header = f"{name} {{" + (f"  # {'; '.join(notes)}" if notes else "")
        body = [
            f"  {text}{' ;' if i < len(entries) - 1 else ''}{note}"
            for i, (text, note) in enumerate(entries)
        ]
        if incoming:
            body += self._incoming_lines(class_iri, {p.iri for p in ranked})
        return "\n".join([header, *body, "}"])

    def _incoming_lines(self, class_iri: str, outgoing: set[str]) -> list[str]:
        """Comment lines naming the properties that point at the class (and which of them it uses itself too)."""
        edges = [e for e in self.incoming.get(class_iri, []) if e[1] not in self.type_predicates]
        lines = []
        for _n, pred, subject in edges[:INCOMING_SHOWN]:
            both = " (the same property also points from this class, above)" if pred in outgoing else ""
            lines.append(f"  # ← {self.compact(pred)} from {self.compact(subject)}{both}")
        if len(edges) > INCOMING_SHOWN:
            lines.append(f"  # ← … and {len(edges) - INCOMING_SHOWN} more")
        return lines

    def shapes(
        self,
        classes: Iterable[str] | None = None,
        *,
        top_fraction: float = 1.0,
        max_objects: int = 5,
        counts: bool = False,
    ) -> dict[str, str]:
        """Shapes of many classes (all by default, most instances first): class IRI → shape text."""
        chosen = (
            list(classes)
            if classes is not None
            else [c for c in self.class_names if c in self.classes]
        )
        return {
            c: self.shape(c, top_fraction=top_fraction, max_objects=max_objects, counts=counts)
            for c in chosen
        }

    # -- JSON
    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (see `from_json`)."""
        return {
            "version": SCHEMA_JSON_VERSION,
            "source": self.source,
            "sampled": self.sampled,
            "endpoint": self.endpoint,
            "linked_endpoints": self.linked_endpoints,
            "type_predicates": self.type_predicates,
            "labels": self.labels,
            "superclasses": self.superclasses,
            "prefixes": self.prefixes,
            "predicates": self.predicates,
            "classes": {
                c.iri: {
                    "instances": c.instances,
                    "graphs": c.graphs,
                    "predicates": {
                        p.iri: {
                            "triples": p.triples,
                            "object_classes": p.object_classes,
                            "datatypes": p.datatypes,
                        }
                        for p in c.predicates.values()
                    },
                }
                for c in self.classes.values()
            },
            "linksets": [vars(ls) for ls in self.linksets],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schema:
        """Rebuild a schema written by `to_json`."""
        if data.get("version") != SCHEMA_JSON_VERSION:
            raise ValueError(f"unsupported schema cache version {data.get('version')!r}")
        classes = {
            iri: ClassInfo(
                iri=iri,
                instances=c.get("instances"),
                graphs=list(c.get("graphs", [])),
                predicates={
                    p: PredicateInfo(
                        p,
                        v.get("triples"),
                        dict(v.get("object_classes", {})),
                        dict(v.get("datatypes", {})),
                    )
                    for p, v in c.get("predicates", {}).items()
                },
            )
            for iri, c in data.get("classes", {}).items()
        }
        return cls(
            classes=classes,
            predicates=dict(data.get("predicates", {})),
            prefixes=dict(data.get("prefixes", {})),
            linksets=[Linkset(**ls) for ls in data.get("linksets", [])],
            endpoint=data.get("endpoint"),
            linked_endpoints=list(data.get("linked_endpoints", [])),
            type_predicates=list(data.get("type_predicates", [RDF_TYPE])),
            labels=dict(data.get("labels", {})),
            superclasses={c: list(v) for c, v in data.get("superclasses", {}).items()},
            source=data.get("source", ""),
            sampled=bool(data.get("sampled", False)),
        )

    def save(self, path: Path) -> None:
        """Write the schema as JSON."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True), encoding="utf-8"
        )

    @classmethod
    def load(cls, path: Path) -> Schema:
        """Read a schema written by `save`."""
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


def namespace_of(iri: str) -> str:
    """The IRI up to and including its last '#', '/' or (for URNs) ':'."""
    cut = max(iri.rfind("#"), iri.rfind("/"))
    if cut < 0:
        cut = iri.rfind(":")
    return iri[: cut + 1]


# ------------------------------------------------------------------------------------------ building


class _Builder:
    """Accumulates statistics (summing counts over named graphs) and makes a Schema."""

    def __init__(self) -> None:
        self.classes: dict[str, ClassInfo] = {}
        self.predicates: dict[str, int | None] = {}

    def cls(self, iri: str) -> ClassInfo:
        return self.classes.setdefault(iri, ClassInfo(iri))

    def pred(self, class_iri: str, pred_iri: str) -> PredicateInfo:
        return self.cls(class_iri).predicates.setdefault(pred_iri, PredicateInfo(pred_iri))

    def add_instances(self, class_iri: str, n: int | None, graph: str | None = None) -> None:
        info = self.cls(class_iri)
        info.instances = _add(info.instances, n)
        if graph and graph not in info.graphs:
            info.graphs.append(graph)

    def add_triples(self, class_iri: str, pred_iri: str, n: int | None) -> None:
        p = self.pred(class_iri, pred_iri)
        p.triples = _add(p.triples, n)

    def add_object_class(
        self, class_iri: str, pred_iri: str, object_class: str, n: int | None
    ) -> None:
        p = self.pred(class_iri, pred_iri)
        p.object_classes[object_class] = _add(p.object_classes.get(object_class), n)

    def add_datatype(self, class_iri: str, pred_iri: str, datatype: str, n: int | None) -> None:
        p = self.pred(class_iri, pred_iri)
        p.datatypes[datatype] = _add(p.datatypes.get(datatype), n)

    def add_predicate(self, pred_iri: str, n: int | None) -> None:
        self.predicates[pred_iri] = (
            _add(self.predicates.get(pred_iri), n) if pred_iri in self.predicates else n
        )

    def finish(self, **kwargs: Any) -> Schema:
        for c in self.classes.values():
            for p in c.predicates.values():
                if p.iri not in self.predicates:
                    self.predicates[p.iri] = None
        # A predicate seen only through classes gets the sum of its per-class counts.
        for pred_iri, n in list(self.predicates.items()):
            if n is None:
                counts = [
                    c.predicates[pred_iri].triples
                    for c in self.classes.values()
                    if pred_iri in c.predicates
                ]
                known = [x for x in counts if x is not None]
                self.predicates[pred_iri] = sum(known) if known else None
        return Schema(classes=self.classes, predicates=self.predicates, **kwargs)


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------- VoID

_VOID_PREFIXES = f"PREFIX void: <{VOID}>\nPREFIX sd: <{SD}>\nPREFIX sh: <{SH}>\n"
_EXT_VALUES = " ".join(f"(<{ns}datatypePartition> <{ns}datatype>)" for ns in VOID_EXT)

VOID_QUERIES = {
    # Class partitions of a dataset or graph (not the object-class partitions nested in property partitions).
    "classes": """SELECT ?cp ?class ?entities ?graph WHERE {
  ?parent void:classPartition ?cp . ?cp void:class ?class .
  FILTER NOT EXISTS { ?parent void:property ?anyProperty }
  OPTIONAL { ?cp void:entities ?entities }
  OPTIONAL { ?graphDescription sd:graph ?parent ; sd:name ?graph }
}""",
    "class_predicates": """SELECT ?class ?pp ?prop ?triples WHERE {
  ?cp void:class ?class ; void:propertyPartition ?pp . ?pp void:property ?prop .
  OPTIONAL { ?pp void:triples ?triples }
}""",
    "object_classes": """SELECT ?class ?ocp ?prop ?objectClass ?triples WHERE {
  ?cp void:class ?class ; void:propertyPartition ?pp .
  ?pp void:property ?prop ; void:classPartition ?ocp . ?ocp void:class ?objectClass .
  OPTIONAL { ?ocp void:triples ?triples }
}""",
    "datatypes": f"""SELECT ?class ?dp ?prop ?datatype ?triples WHERE {{
  VALUES (?partition ?datatypeProperty) {{ {_EXT_VALUES} }}
  ?cp void:class ?class ; void:propertyPartition ?pp .
  ?pp void:property ?prop ; ?partition ?dp . ?dp ?datatypeProperty ?datatype .
  OPTIONAL {{ ?dp void:triples ?triples }}
}}""",
    # Predicates described for a whole dataset or graph (also those of untyped subjects).
    "graph_predicates": """SELECT ?pp ?prop ?triples WHERE {
  ?parent void:propertyPartition ?pp . ?pp void:property ?prop .
  FILTER NOT EXISTS { ?parent void:class ?anyClass }
  OPTIONAL { ?pp void:triples ?triples }
}""",
    "linksets": """SELECT ?ls ?prop ?subjectClass ?objectClass ?objectEndpoint ?triples WHERE {
  ?ls a void:Linkset ; void:linkPredicate ?prop .
  OPTIONAL { ?ls void:subjectsTarget ?st . ?st void:class ?subjectClass }
  OPTIONAL { ?ls void:objectsTarget ?ot . OPTIONAL { ?ot void:class ?objectClass }
             OPTIONAL { ?ot void:sparqlEndpoint ?objectEndpoint } }
  OPTIONAL { ?ls void:triples ?triples }
}""",
    "endpoints": """SELECT DISTINCT ?endpoint WHERE {
  { ?service sd:endpoint ?endpoint } UNION { ?dataset void:sparqlEndpoint ?endpoint
    FILTER NOT EXISTS { ?linkset void:objectsTarget ?dataset } }
}""",
    "prefixes": "SELECT DISTINCT ?prefix ?namespace WHERE { ?declaration sh:prefix ?prefix ; sh:namespace ?namespace }",
}


class StoreRunner:
    """A QueryRunner over an in-memory pyoxigraph store, for our own queries on local RDF (no SERVICE)."""

    def __init__(self, store: ox.Store) -> None:
        self.store = store

    def select(self, sparql: str) -> list[dict[str, str]]:
        """Rows of variable → lexical value."""
        solutions = self.store.query(sparql)
        if not isinstance(solutions, ox.QuerySolutions):
            raise ValueError("StoreRunner.select needs a SELECT query")
        names = [v.value for v in solutions.variables]
        rows: list[dict[str, str]] = []
        for solution in solutions:
            row: dict[str, str] = {}
            for name in names:
                term = solution[name]
                if term is not None and not isinstance(term, ox.Triple):
                    row[name] = term.value
            rows.append(row)
        return rows


def read_void(
    runner: QueryRunner,
    *,
    endpoint: str | None = None,
    prefixes: Mapping[str, str] | None = None,
    source: str = "void",
) -> Schema:
    """Read a schema from VoID statistics reachable through `runner` (an endpoint or a loaded file)."""
    b = _Builder()

    def rows(name: str, *needed: str) -> list[dict[str, str]]:
        return _binding(runner.select(_VOID_PREFIXES + VOID_QUERIES[name]), *needed)

    # Partitions are counted once each (a row per named graph or per OPTIONAL match would repeat them).
    for r in _unique(rows("classes", "class"), "cp", "class"):
        b.add_instances(r["class"], _int(r.get("entities")), r.get("graph"))
    for r in _unique(rows("class_predicates", "class", "prop"), "pp", "class"):
        b.add_triples(r["class"], r["prop"], _int(r.get("triples")))
    for r in _unique(rows("object_classes", "class", "prop", "objectClass"), "ocp", "class"):
        b.add_object_class(r["class"], r["prop"], r["objectClass"], _int(r.get("triples")))
    for r in _unique(rows("datatypes", "class", "prop", "datatype"), "dp", "class"):
        b.add_datatype(r["class"], r["prop"], r["datatype"], _int(r.get("triples")))
    graph_preds: dict[str, int | None] = {}
    for r in _unique(rows("graph_predicates", "prop"), "pp"):
        graph_preds[r["prop"]] = _add(graph_preds.get(r["prop"]), _int(r.get("triples")))
    for pred_iri, n in graph_preds.items():
        b.add_predicate(pred_iri, n)
    linksets: list[Linkset] = []
    linked: list[str] = []
    for r in rows("linksets", "prop"):
        ls = Linkset(
            r["prop"],
            r.get("subjectClass"),
            r.get("objectClass"),
            r.get("objectEndpoint"),
            _int(r.get("triples")),
        )
        linksets.append(ls)
        if ls.object_endpoint and ls.object_endpoint not in linked:
            linked.append(ls.object_endpoint)
        if ls.subject_class:
            pred = b.pred(ls.subject_class, ls.predicate)
            if ls.object_class and ls.object_class not in pred.object_classes:
                pred.object_classes[ls.object_class] = ls.triples
        elif ls.predicate not in b.predicates:
            b.add_predicate(ls.predicate, None)
    endpoints = [r["endpoint"] for r in rows("endpoints", "endpoint")]
    found_prefixes = {r["prefix"]: r["namespace"] for r in rows("prefixes", "prefix", "namespace")}
    found_prefixes.update(prefixes or {})
    return b.finish(
        prefixes=found_prefixes,
        linksets=linksets,
        endpoint=endpoint or (endpoints[0] if endpoints else None),
        linked_endpoints=[
            e
            for e in linked + endpoints[1:]
            if e != (endpoint or (endpoints[0] if endpoints else None))
        ],
        source=source,
    )


def _binding(rows: list[dict[str, str]], *needed: str) -> list[dict[str, str]]:
    """The rows that bind every variable in `needed`: the queries always bind them, so a row without one comes
    from a broken endpoint and is left out (rather than failing the whole schema on a KeyError)."""
    return [r for r in rows if all(k in r for k in needed)]


def _unique(rows: list[dict[str, str]], *keys: str) -> list[dict[str, str]]:
    seen: set[tuple[str, ...]] = set()
    out: list[dict[str, str]] = []
    for r in rows:
        key = tuple(r.get(k, "") for k in keys)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def schema_from_void_file(path: Path, *, endpoint: str | None = None) -> Schema:
    """Read a schema from a VoID file (Turtle, N-Triples, RDF/XML, … by extension)."""
    parser = ox.parse(path=str(path))
    store = ox.Store()
    store.extend(parser)
    file_prefixes = {k: v for k, v in parser.prefixes.items() if k}
    return read_void(
        StoreRunner(store), endpoint=endpoint, prefixes=file_prefixes, source=f"void:{path.name}"
    )


# ------------------------------------------------------------------------------------- computing


def compute_schema(
    runner: QueryRunner,
    *,
    mode: Literal["full", "sampled"] = "full",
    type_predicate: str = RDF_TYPE,
    classes: Iterable[str] | None = None,
    type_sample: int = 100_000,
    per_class_sample: int = 1_000,
    max_classes: int = 200,
    prefixes: Mapping[str, str] | None = None,
    endpoint: str | None = None,
    progress: ProgressFn | None = None,
) -> Schema:
    """Compute class → predicate → object class / datatype statistics through SPARQL.

    `full` runs GROUP BY queries over the whole graph (exact counts; fine for local and mid-sized graphs).
    `sampled` is for huge endpoints: class counts come from the first `type_sample` typing triples (or the
    given `classes`), and each of the `max_classes` largest classes is described from `per_class_sample`
    instances, so counts are sample counts."""
    t = f"<{type_predicate}>"
    b = _Builder()
    report = progress or (lambda done, total, message: None)
    if mode == "full":
        steps: list[tuple[str, str]] = [
            (
                "classes",
                f"SELECT ?class (COUNT(DISTINCT ?s) AS ?count) WHERE {{ ?s {t} ?class }} GROUP BY ?class",
            ),
            (
                "predicates per class",
                f"SELECT ?class ?p (COUNT(*) AS ?count) WHERE {{ ?s {t} ?class ; ?p ?o }} GROUP BY ?class ?p",
            ),
            (
                "object classes",
                f"SELECT ?class ?p ?oclass (COUNT(*) AS ?count) WHERE {{ ?s {t} ?class ; ?p ?o . ?o {t} ?oclass }} "
                "GROUP BY ?class ?p ?oclass",
            ),
            (
                "datatypes",
                f"SELECT ?class ?p ?datatype (COUNT(*) AS ?count) WHERE {{ ?s {t} ?class ; ?p ?o . "
                "FILTER(isLiteral(?o)) BIND(DATATYPE(?o) AS ?datatype) } GROUP BY ?class ?p ?datatype",
            ),
            ("all predicates", "SELECT ?p (COUNT(*) AS ?count) WHERE { ?s ?p ?o } GROUP BY ?p"),
        ]
        total = len(steps) + 1
        for i, (label, query) in enumerate(steps):
            report(i, total, f"computing {label}")
            needed = {"classes": ("class",), "all predicates": ("p",)}.get(label, ("class", "p"))
            for r in _binding(runner.select(query), *needed):
                n = _int(r.get("count"))
                if label == "classes":
                    b.add_instances(r["class"], n)
                elif label == "predicates per class":
                    b.add_triples(r["class"], r["p"], n)
                elif label == "object classes" and "oclass" in r:
                    b.add_object_class(r["class"], r["p"], r["oclass"], n)
                elif label == "datatypes" and "datatype" in r:
                    b.add_datatype(r["class"], r["p"], r["datatype"], n)
                elif label == "all predicates":
                    b.add_predicate(r["p"], n)
        report(len(steps), total, "fetching class labels")
        labels = _class_labels(runner, b, max_classes)
    else:
        if classes is None:
            report(0, 1, f"sampling {type_sample:,} typing triples")
            query = (
                f"SELECT ?class (COUNT(?s) AS ?count) WHERE {{ {{ SELECT ?s ?class WHERE {{ ?s {t} ?class }} "
                f"LIMIT {type_sample} }} }} GROUP BY ?class"
            )
            for r in _binding(runner.select(query), "class"):
                b.add_instances(r["class"], _int(r.get("count")))
        else:
            for c in classes:
                b.cls(c)
        chosen = sorted(b.classes.values(), key=lambda c: (-(c.instances or 0), c.iri))[
            :max_classes
        ]
        total = len(chosen) + 1
        for i, info in enumerate(chosen):
            report(i, total, f"sampling {info.iri}")
            sample = f"{{ SELECT ?s WHERE {{ ?s {t} <{info.iri}> }} LIMIT {per_class_sample} }}"
            for r in _binding(
                runner.select(f"SELECT ?p (COUNT(*) AS ?count) WHERE {{ {sample} ?s ?p ?o }} GROUP BY ?p"), "p"
            ):
                b.add_triples(info.iri, r["p"], _int(r.get("count")))
            query = (
                f"SELECT ?p ?oclass ?datatype (COUNT(*) AS ?count) WHERE {{ {sample} ?s ?p ?o . "
                f"OPTIONAL {{ ?o {t} ?oclass }} BIND(IF(isLiteral(?o), DATATYPE(?o), ?none) AS ?datatype) }} "
                "GROUP BY ?p ?oclass ?datatype"
            )
            for r in _binding(runner.select(query), "p"):
                n = _int(r.get("count"))
                if "oclass" in r:
                    b.add_object_class(info.iri, r["p"], r["oclass"], n)
                elif "datatype" in r:
                    b.add_datatype(info.iri, r["p"], r["datatype"], n)
        report(len(chosen), total, "fetching class labels")
        labels = _class_labels(runner, b, max_classes)
    superclasses = _superclasses(runner, b, max_classes)
    report(total, total, "done")
    type_predicates = [type_predicate] if type_predicate == RDF_TYPE else [type_predicate, RDF_TYPE]
    return b.finish(
        labels=labels,
        superclasses=superclasses,
        prefixes=dict(prefixes or {}),
        endpoint=endpoint,
        type_predicates=type_predicates,
        source=f"computed:{mode}",
        sampled=mode == "sampled",
    )


def _largest_classes(b: _Builder, limit: int) -> str:
    """The `limit` classes with most instances, as the IRIs of a VALUES block ("" when there are none)."""
    chosen = sorted(b.classes.values(), key=lambda c: (-(c.instances or 0), c.iri))[:limit]
    return " ".join(f"<{c.iri}>" for c in chosen)


def _superclasses(runner: QueryRunner, b: _Builder, limit: int) -> dict[str, list[str]]:
    """The direct superclasses (rdfs:subClassOf in the data) of the largest classes."""
    values = _largest_classes(b, limit)
    if not values:
        return {}
    query = (
        f"SELECT ?class ?super WHERE {{ VALUES ?class {{ {values} }} ?class <{RDFS_SUBCLASS}> ?super "
        "FILTER(isIRI(?super) && ?super != ?class) }"
    )
    out: dict[str, list[str]] = {}
    for r in _binding(runner.select(query), "class", "super"):
        out.setdefault(r["class"], []).append(r["super"])
    return {c: sorted(set(v)) for c, v in sorted(out.items())}


def _class_labels(runner: QueryRunner, b: _Builder, limit: int) -> dict[str, str]:
    """English (or language-less) rdfs:label of the largest classes."""
    values = _largest_classes(b, limit)
    if not values:
        return {}
    query = (
        f"SELECT ?class (SAMPLE(?l) AS ?label) WHERE {{ VALUES ?class {{ {values} }} ?class <{RDFS_LABEL}> ?l "
        'FILTER(LANG(?l) = "" || LANGMATCHES(LANG(?l), "en")) } GROUP BY ?class'
    )
    return {r["class"]: r["label"] for r in _binding(runner.select(query), "class", "label")}
