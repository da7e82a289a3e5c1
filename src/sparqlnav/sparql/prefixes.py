"""Prefix maps: compact IRIs for display, expand prefixed names, declare prefixes in queries."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sparqlnav.sparql.guard import declared_prefixes, tokens

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
# SPARQL 1.1 PN_LOCAL, simplified: letters, digits, _ - . inside, and %HH escapes (CK25's "…Hoch%40company.org").
_LOCAL_OK = re.compile(r"^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:[A-Za-z0-9_\-.]|%[0-9A-Fa-f]{2})*$")
_DOT_RUNS = re.compile(r"\.+")
_PN_ESCAPE = re.compile(r"\\(.)")
_PREFIX_DECL = re.compile(r"(?im)^\s*(?:@prefix|PREFIX)\s+([A-Za-z][\w\-.]*)?:\s*<([^>]*)>")


def engine_reads(local: str) -> bool:
    """Whether Oxigraph 0.5 reads `prefix:local` whole: its local names hold one run of dots at most (`a.b` and
    `a..b` pass; `empl-Karen.Brant%40company.org` is read as `…Brant%40company` and a stray `.org`)."""
    return len(_DOT_RUNS.findall(local)) <= 1


def spell_out_names(query: str) -> str:
    """The query with every prefixed name the engine would misread (`engine_reads`) written as a full IRI, so a
    name copied from a correct SPARQL 1.1 text runs as written; anything else, and a query whose prefixes are not
    all declared, is left as it is (the guard then reads it as the engine would)."""
    toks = tokens(query)
    declared = declared_prefixes(toks)
    out: list[str] = []
    at = 0
    for i, t in enumerate(toks):
        if t.kind != "pname" or (i >= 1 and toks[i - 1].kind == "word" and toks[i - 1].text.upper() == "PREFIX"):
            continue
        prefix, _, local = t.text.partition(":")
        if engine_reads(local) or prefix not in declared:
            continue
        out.append(query[at : t.pos])
        plain = _PN_ESCAPE.sub(r"\1", local)  # `\'`-style escapes stand for the character itself in the IRI
        out.append(f"<{declared[prefix]}{plain}>")
        at = t.pos + len(t.text)
    return "".join(out) + query[at:] if out else query


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
                if local == "" or (_LOCAL_OK.match(local) and not local.endswith(".") and engine_reads(local)):
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

    def __contains__(self, prefix: object) -> bool:
        return prefix in self.mapping

    def items(self) -> Iterable[tuple[str, str]]:
        """Pairs of (prefix, namespace)."""
        return self.mapping.items()


def prefixes_in_text(text: str) -> dict[str, str]:
    """Prefix declarations found in Turtle or SPARQL text (`@prefix` or `PREFIX`)."""
    return {(m.group(1) or ""): m.group(2) for m in _PREFIX_DECL.finditer(text)}


def undeclared_prefixes(query: str) -> list[str]:
    """Prefixes the query's names use but its PREFIX lines do not declare, in order of first use."""
    toks = tokens(query)
    declared = declared_prefixes(toks)
    found = (t.text.partition(":")[0] for t in toks if t.kind == "pname")
    return list(dict.fromkeys(p for p in found if p not in declared))


@dataclass(frozen=True)
class PrefixRepair:
    """A query made runnable on its own, and what that took."""

    query: str
    added: tuple[str, ...] = ()  # prefixes given a PREFIX line, sorted
    written_out: tuple[str, ...] = ()  # %-escaped prefixed names written as <IRI>s, in order
    # What changed, so a place in `query` can be found in the text as typed: the characters of the PREFIX lines
    # put on top, and each name written out as (its start and end in the typed text, the length written instead).
    header_chars: int = 0
    edits: tuple[tuple[int, int, int], ...] = ()
    typed: str | None = None  # the text given, when it differs from `query`

    @property
    def changed(self) -> bool:
        """Whether the query differs from the one given."""
        return bool(self.added or self.written_out)

    def typed_place(self, line: int, column: int) -> tuple[int, int]:
        """A 1-based line and column of `query` as the line and column of the same spot in the text as typed."""
        if self.typed is None:
            return line, column
        lines = self.query.split("\n")
        offset = sum(len(t) + 1 for t in lines[: max(0, line - 1)]) + max(0, column - 1) - self.header_chars
        if offset < 0:
            return 1, 1  # inside an added PREFIX line: the spot nearest to it that the user typed
        shift = 0
        for start, end, written in self.edits:
            if offset < start + shift:
                break
            if offset < start + shift + written:
                offset, shift = start, 0  # inside a written-out name: its start as typed
                break
            shift += written - (end - start)
        offset = min(offset - shift, len(self.typed))
        before = self.typed[:offset]
        return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def declare_prefixes(query: str, known: Mapping[str, str]) -> PrefixRepair:
    """The query made runnable on its own: PREFIX lines for the `known` prefixes it uses but does not
    declare, and prefixed names with %-escapes written out as <IRI>s."""
    toks = tokens(query)
    declared = declared_prefixes(toks)
    namespaces = {**known, **declared}
    used: set[str] = set()
    written: list[str] = []
    edits: list[tuple[int, int, int]] = []
    out, last = [], 0
    for t in toks:
        if t.kind != "pname":
            continue
        name = t.text.rstrip(".")  # a trailing dot ends the triple, it is not part of the name
        prefix, _, local = name.partition(":")
        if "%" in local and prefix in namespaces:
            # Oxigraph rejects some valid escaped names (a dot before and after %40): use the IRI.
            iri = f"<{namespaces[prefix]}{local}>"
            out += [query[last : t.pos], iri]
            last = t.pos + len(name)
            written.append(name)
            edits.append((t.pos, last, len(iri)))
        elif prefix not in declared:
            used.add(prefix)
    added = tuple(p for p in sorted(used) if p in known)
    header = "".join(f"PREFIX {p}: <{known[p]}>\n" for p in added)
    repaired = header + "".join(out) + query[last:]
    typed = query if repaired != query else None
    return PrefixRepair(repaired, added, tuple(written), len(header), tuple(edits), typed)
