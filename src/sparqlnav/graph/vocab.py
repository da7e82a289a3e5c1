"""What a graph's vocabulary looks like: which predicates carry labels, aliases, descriptions and types,
and, for Wikibase-shaped graphs (Wikidata and its kin), the namespaces of entities and statements."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
SCHEMA = "http://schema.org/"
WIKIBASE = "http://wikiba.se/ontology#"


@dataclass(frozen=True)
class Wikibase:
    """Namespaces of a Wikibase-shaped graph (entity, direct claim, statement, qualifier)."""

    entity: str
    direct: str
    claim: str
    statement: str
    qualifier: str

    @classmethod
    def from_base(cls, base: str) -> Wikibase:
        """Namespaces following Wikidata's layout under `base` (e.g. http://www.wikidata.org/)."""
        return cls(
            entity=base + "entity/",
            direct=base + "prop/direct/",
            claim=base + "prop/",
            statement=base + "prop/statement/",
            qualifier=base + "prop/qualifier/",
        )

    def property_id(self, iri: str) -> str | None:
        """`P31` for any IRI form of a property (entity, direct, claim, statement, qualifier)."""
        for ns in (self.direct, self.statement, self.qualifier, self.claim, self.entity):
            if iri.startswith(ns):
                local = iri[len(ns) :]
                if re.fullmatch(r"P\d+", local):
                    return local
        return None

    @classmethod
    def property_entity(cls, iri: str) -> str | None:
        """The property entity (`…/entity/P31`) a property IRI in Wikidata's layout stands for (`…/prop/direct/P31`,
        `…/prop/P31`, `…/prop/statement/P31`, `…/prop/qualifier/P31`), whether or not the graph declares it."""
        m = re.fullmatch(r"(.+/)prop/(?:direct/|statement/|qualifier/)?(P\d+)", iri)
        return cls.from_base(m.group(1)).entity_iri(m.group(2)) if m else None

    def entity_iri(self, local_id: str) -> str:
        """The entity IRI of `Q42` or `P31`."""
        return self.entity + local_id

    def direct_iri(self, pid: str) -> str:
        """The direct-claim (wdt:) IRI of property `pid`."""
        return self.direct + pid

    def prefixes(self) -> dict[str, str]:
        """The usual prefix names for these namespaces."""
        return {
            "wd": self.entity,
            "wdt": self.direct,
            "p": self.claim,
            "ps": self.statement,
            "pq": self.qualifier,
            "wikibase": WIKIBASE,
        }


WIKIDATA = Wikibase.from_base("http://www.wikidata.org/")


@dataclass(frozen=True)
class Vocabulary:
    """Which predicates name, alias, describe and type things in a graph."""

    labels: tuple[str, ...] = (
        RDFS + "label",
        SKOS + "prefLabel",
        SCHEMA + "name",
        "http://xmlns.com/foaf/0.1/name",
        "http://purl.org/dc/terms/title",
        "http://purl.org/dc/elements/1.1/title",
    )
    aliases: tuple[str, ...] = (SKOS + "altLabel",)
    descriptions: tuple[str, ...] = (
        SCHEMA + "description",
        RDFS + "comment",
        "http://purl.org/dc/terms/description",
        SKOS + "definition",
    )
    types: tuple[str, ...] = (RDF_TYPE,)
    wikibase: Wikibase | None = None
    languages: tuple[str, ...] = field(default=("en", ""))

    @property
    def type_predicate(self) -> str:
        """The predicate a query types things with (P31 on Wikibase graphs, else rdf:type)."""
        return self.types[0] if self.types else RDF_TYPE

    @classmethod
    def for_wikibase(cls, wb: Wikibase) -> Vocabulary:
        """A Wikibase graph: labels, aliases and descriptions as Wikidata has them, P31 as the type."""
        return cls(
            labels=(RDFS + "label",),
            aliases=(SKOS + "altLabel",),
            descriptions=(SCHEMA + "description",),
            types=(wb.direct_iri("P31"), RDF_TYPE),
            wikibase=wb,
        )

    @property
    def text_predicates(self) -> tuple[str, ...]:
        """Every predicate whose values are names or descriptions."""
        return self.labels + self.aliases + self.descriptions

    def accepts_language(self, lang: str | None) -> bool:
        """Whether a literal in this language should be indexed."""
        lang = (lang or "").lower()
        return lang in self.languages or lang.split("-")[0] in self.languages


_NOT_ALNUM = re.compile(r"[^0-9a-z]")


def local_name(iri: str) -> str:
    """The last segment of an IRI (after #, / or :), URL-decoded where safe."""
    from urllib.parse import unquote

    tail = re.split(r"[#/:]", iri.rstrip("/#"))[-1]
    return unquote(tail)


def label_adds(iri: str, label: str | None) -> bool:
    """Whether a label says more than the IRI's own name (`wdt:P31` "instance of": yes; `pv:hasCategory` "has
    category" or `prodi:prod-cat-Sensor` "Sensor": no), so prompts show it only then."""
    if not label:
        return False
    return _NOT_ALNUM.sub("", label.lower()) not in _NOT_ALNUM.sub("", local_name(iri).lower())


def humanise(name: str) -> str:
    """`hasManager` → `has manager`, `member_of` → `member of`, `empl-Karen.Brant@x` → `empl Karen Brant@x`."""
    out: list[str] = []
    for part in re.split(r"[_\-.\s]+", name):
        camel = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", part).split()
        # In a lowerCamel name (a property's) the capitals only mark where words start: `altLabel` reads "alt label".
        # An UpperCamel name (a class's or a thing's: `RedDragon`), "CRValue" and a name's own capitals stay.
        lower = bool(camel) and camel[0][:1].islower()
        out += camel[:1] + [w.lower() if lower and w[:1].isupper() and w[1:].islower() else w for w in camel[1:]]
    return " ".join(out).strip()


def singular(word: str) -> str:
    """A plural noun in the singular, by its ending (`categories` → `category`, `boxes` → `box`, `status` stays)."""
    lower = word.lower()
    if lower.endswith("ies") and len(word) > 3:
        return word[:-3] + "y"
    if lower.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    return word[:-1] if lower.endswith("s") and not lower.endswith(("ss", "us", "is")) else word
