"""Prefix maps: compact IRIs for display, expand prefixed names, declare prefixes in queries."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

WELL_KNOWN: dict[str, str] = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "schema": "http://schema.org/",
    "dcterms": "http://purl.org/dc/terms/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "foaf": "http://xmlns.com/foaf/0.1/",
    "void": "http://rdfs.org/ns/void#",
    "sh": "http://www.w3.org/ns/shacl#",
    "wikibase": "http://wikiba.se/ontology#",
}

WIKIDATA: dict[str, str] = {
    "wd": "http://www.wikidata.org/entity/",
    "wdt": "http://www.wikidata.org/prop/direct/",
    "p": "http://www.wikidata.org/prop/",
    "ps": "http://www.wikidata.org/prop/statement/",
    "pq": "http://www.wikidata.org/prop/qualifier/",
    "wds": "http://www.wikidata.org/entity/statement/",
}

# No %-escapes: Oxigraph rejects some valid escaped local names (e.g. `a.b%40c.org`), and people copy what they see.
_LOCAL_OK = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-.]*$")
_PREFIX_DECL = re.compile(r"(?im)^\s*(?:@prefix|PREFIX)\s+([A-Za-z][\w\-.]*)?:\s*<([^>]*)>")


@dataclass
class PrefixMap:
    """Prefix name → namespace IRI, with the longest namespace winning when compacting."""

    mapping: dict[str, str] = field(default_factory=dict)

    @classmethod
    def default(cls, extra: Mapping[str, str] | None = None) -> PrefixMap:
        """Well-known vocabularies plus `extra` (which wins on clashes)."""
        return cls({**WELL_KNOWN, **(extra or {})})

    def merged(self, other: Mapping[str, str]) -> PrefixMap:
        """A new map with `other` added (other wins on clashes)."""
        return PrefixMap({**self.mapping, **other})

    def compact(self, iri: str) -> str:
        """`prefix:local` when a namespace matches and the local part is safe, else `<iri>`."""
        best: tuple[str, str] | None = None
        for name, ns in self.mapping.items():
            if iri.startswith(ns) and (best is None or len(ns) > len(best[1])):
                local = iri[len(ns) :]
                if local == "" or (_LOCAL_OK.match(local) and not local.endswith(".")):
                    best = (name, ns)
        if best is None:
            return f"<{iri}>"
        return f"{best[0]}:{iri[len(best[1]) :]}"

    def expand(self, name: str) -> str | None:
        """The IRI for `prefix:local`, `<iri>` or a bare IRI; None when the prefix is unknown."""
        name = name.strip()
        if name.startswith("<") and name.endswith(">"):
            return name[1:-1]
        if name.startswith(("http://", "https://", "urn:")):
            return name
        prefix, sep, local = name.partition(":")
        if not sep or prefix not in self.mapping:
            return None
        return self.mapping[prefix] + local

    def sparql_header(self, used_in: str | None = None) -> str:
        """PREFIX lines, only for prefixes that `used_in` mentions when given."""
        names = sorted(self.mapping)
        if used_in is not None:
            names = [n for n in names if re.search(rf"(?<![\w\-.]){re.escape(n)}:", used_in)]
        return "".join(f"PREFIX {n}: <{self.mapping[n]}>\n" for n in names)

    def __contains__(self, prefix: object) -> bool:
        return prefix in self.mapping

    def items(self) -> Iterable[tuple[str, str]]:
        """Pairs of (prefix, namespace)."""
        return self.mapping.items()


def prefixes_in_text(text: str) -> dict[str, str]:
    """Prefix declarations found in Turtle or SPARQL text (`@prefix` or `PREFIX`)."""
    return {(m.group(1) or ""): m.group(2) for m in _PREFIX_DECL.finditer(text)}
