"""Names for things whose graph gives them none (issue 36, item 2). Relational data published as RDF often has no
`rdfs:label` (or skos/schema name) at all: a carrier's name sits in a property named after its class
(`ex:carrier "Air Lumen"`), a kind's in `kind_name`, and an answer read `uid=1`. For each class whose things mostly
lack a label, the property that names them is picked from the data: it holds text (words, not codes), nearly one
value per thing and most things have it, and its own name says it names (`name`, `title`, `label`, the class's own
name, `<class>_name`), never a key (`code`, `id`, `uid`, …). The direct mapping's name columns, generalised to any
graph; the name index then uses those values as the things' labels, so answers, handovers, search and the UI name
them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyoxigraph as ox

from sparqlnav.graph.vocab import RDF_TYPE, humanise, local_name, singular

__all__ = ["NameProperty", "name_properties", "named_by_properties"]

MAX_TRIPLES = 5_000_000  # above this the grouping queries cost more than the names are worth at build time
MIN_COVERAGE = 0.6  # of a class's things that have the property
MIN_DISTINCT = 0.3  # values per thing that has it: a category ("status") repeats far more
MIN_WORDY = 0.6  # of sampled values that read as words, not codes
MAX_MEAN_CHARS = 80  # longer values are descriptions
SAMPLE = 40
NAME_WORDS = {"name", "title", "label", "caption", "heading"}
KEY_WORDS = {"id", "uid", "uuid", "code", "key", "iso", "abbr", "abbreviation", "symbol", "number", "no", "num",
             "ref", "identifier", "sku", "isbn", "email", "url", "uri", "iri", "phone", "fax", "zip", "postcode"}
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_WORDY = re.compile(r"[^\W\d_]{2,}")


@dataclass(frozen=True)
class NameProperty:
    """The property that names the things of a class, with what was measured of it."""

    cls: str
    predicate: str
    coverage: float
    distinct: float
    wordy: float


def _words(iri: str) -> list[str]:
    """A local name's words in lower case: `kindName` and `kind_name` → ["kind", "name"]."""
    return humanise(local_name(iri)).lower().split()



def names_things(predicate: str, cls: str) -> bool:
    """Whether a property's own name says it names things of the class (and is no key)."""
    words = _words(predicate)
    if not words or set(words) & KEY_WORDS:
        return False
    if set(words) & NAME_WORDS:
        return True
    own = "_".join(singular(w) for w in _words(cls))
    return "_".join(singular(w) for w in words) in (own, own.rsplit("_", 1)[-1])


def _plain(predicate: str, cls: str) -> bool:
    """Whether a property is named just `name`/`title`/`label` or just its class's name."""
    words = [singular(w) for w in _words(predicate)]
    return len(words) == 1 and (words[0] in NAME_WORDS or words[0] == singular(_words(cls)[-1]))


def _rows(store: ox.Store, query: str) -> Iterator[Sequence[ox.NamedNode | ox.Literal | ox.BlankNode | None]]:
    found = store.query(query)
    assert isinstance(found, ox.QuerySolutions)
    for solution in found:
        yield [solution[v] for v in found.variables]


def _number(term: object) -> float:
    return float(term.value) if isinstance(term, ox.Literal) else 0.0


def name_properties(store: ox.Store, labels: Sequence[str]) -> list[NameProperty]:
    """For each class whose things mostly have none of `labels`, the property that names them (when one does)."""
    if len(store) > MAX_TRIPLES:
        return []
    label_values = " ".join(f"<{p}>" for p in labels)
    per_class = f"SELECT ?c (COUNT(DISTINCT ?s) AS ?n) WHERE {{ ?s <{RDF_TYPE}> ?c }} GROUP BY ?c"
    sizes = {c.value: _number(n) for c, n in _rows(store, per_class) if isinstance(c, ox.NamedNode)}
    with_label = (f"SELECT ?c (COUNT(DISTINCT ?s) AS ?n) WHERE {{ ?s <{RDF_TYPE}> ?c . ?s ?l ?x "
                  f"VALUES ?l {{ {label_values} }} }} GROUP BY ?c")
    labelled = ({c.value: _number(n) for c, n in _rows(store, with_label) if isinstance(c, ox.NamedNode)}
                if labels else {})
    bare = [c for c, n in sizes.items() if n and labelled.get(c, 0) < n / 2]
    if not bare:
        return []
    classes = " ".join(f"<{c}>" for c in bare)
    stats = _rows(store, (
        f"SELECT ?c ?p (COUNT(DISTINCT ?s) AS ?things) (COUNT(DISTINCT ?o) AS ?values) WHERE {{ "
        f"VALUES ?c {{ {classes} }} ?s <{RDF_TYPE}> ?c ; ?p ?o . "
        f"FILTER(isLiteral(?o) && (datatype(?o) = <{_XSD_STRING}> || lang(?o) != \"\")) }} GROUP BY ?c ?p"))
    best: dict[str, tuple[float, NameProperty]] = {}
    for c, p, things, values in stats:
        if not isinstance(c, ox.NamedNode) or not isinstance(p, ox.NamedNode) or not names_things(p.value, c.value):
            continue
        coverage, distinct = _number(things) / sizes[c.value], _number(values) / max(1.0, _number(things))
        if coverage < MIN_COVERAGE or distinct < MIN_DISTINCT:
            continue
        values_of = f"SELECT ?o WHERE {{ ?s <{RDF_TYPE}> <{c.value}> ; <{p.value}> ?o FILTER(isLiteral(?o)) }} LIMIT {SAMPLE}"
        sample = [str(o.value) for (o,) in _rows(store, values_of) if o is not None]
        if not sample or sum(map(len, sample)) / len(sample) > MAX_MEAN_CHARS:
            continue
        wordy = sum(bool(_WORDY.search(v)) and "@" not in v and "://" not in v for v in sample) / len(sample)
        if wordy < MIN_WORDY:
            continue
        found = NameProperty(c.value, p.value, coverage, distinct, wordy)
        # the plainest name first: the class's own name or `name` itself over `officialName`, `fullTitle`
        score = coverage + distinct + wordy + (1.0 if _plain(p.value, c.value) else 0.0)
        if c.value not in best or score > best[c.value][0]:
            best[c.value] = (score, found)
    return [found for _, found in sorted(best.values(), key=lambda b: b[1].cls)]


def named_by_properties(store: ox.Store, chosen: Sequence[NameProperty]) -> Iterator[tuple[str, str]]:
    """(thing, name) for the things of each class by its name property."""
    for found in chosen:
        query = (f"SELECT ?s ?o WHERE {{ ?s <{RDF_TYPE}> <{found.cls}> ; <{found.predicate}> ?o "
                 "FILTER(isIRI(?s) && isLiteral(?o)) }")
        for s, o in _rows(store, query):
            if s is not None and o is not None:
                yield str(s.value), str(o.value)
