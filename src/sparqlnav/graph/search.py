"""Name search on the endpoint itself, for graphs too large to download names from: the engine's own text index
(Virtuoso `bif:contains`, QLever, Blazegraph `bds:search`, Jena `text:query`, Stardog `textMatch`), found once
by cheap probes, or, when it has none, a bounded `CONTAINS` scan that says it is degraded. Hits are ranked by
the same scorer as the local index (`names.name_score`)."""

from __future__ import annotations

import enum
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sparqlnav.graph.endpoint import Endpoint
from sparqlnav.graph.names import MIN_SCORE, STRONG_SCORE, Kind, NameHit, name_score, normalise
from sparqlnav.graph.vocab import Vocabulary, humanise, local_name

SEARCH_TIMEOUT_S = 10.0  # one name search; a search that takes longer is not worth waiting for
PROBE_TIMEOUT_S = 5.0
CANDIDATES = 200
LABEL_CACHE_SIZE = 100_000
_STRING = re.compile(r"[^\w\s]", re.UNICODE)

OWL = "http://www.w3.org/2002/07/owl#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_KIND_OF_TYPE: dict[str, Kind] = {
    OWL + "Class": "class",
    RDFS + "Class": "class",
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#Property": "property",
    OWL + "ObjectProperty": "property",
    OWL + "DatatypeProperty": "property",
}


class TextSearch(enum.StrEnum):
    """How an endpoint can be searched for names; `CONTAINS` is the degraded fallback every engine runs."""

    VIRTUOSO = "virtuoso"
    QLEVER = "qlever"
    BLAZEGRAPH = "blazegraph"
    JENA = "jena"
    STARDOG = "stardog"
    CONTAINS = "contains"

    @property
    def degraded(self) -> bool:
        """True when the endpoint has no text index and names are found by scanning literals."""
        return self is TextSearch.CONTAINS


# Probed in this order; CONTAINS is not probed (it is what is left).
PROBED = (TextSearch.VIRTUOSO, TextSearch.QLEVER, TextSearch.BLAZEGRAPH, TextSearch.JENA, TextSearch.STARDOG)


def _words(text: str) -> list[str]:
    return [w for w in _STRING.sub(" ", text).split() if w]


def _variants(word: str) -> list[str]:
    """The word and its adjacent transpositions within the first four letters ("Hienrich" → "Heinrich"):
    engines that allow prefix wildcards need four leading letters (Virtuoso), so a typo there must be guessed."""
    out = [word]
    for i in range(min(3, len(word) - 1)):
        swapped = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if swapped not in out:
            out.append(swapped)
    return out


def text_pattern(engine: TextSearch, words: list[str], *, fuzzy: bool) -> str:
    """The graph pattern that binds `?o` to literals matching `words` (`?s ?p ?o` is joined by the caller).

    Strict: every word. Fuzzy: any word, as a prefix, with guessed transpositions where the engine cannot
    match typos itself."""
    if engine is TextSearch.VIRTUOSO:
        if fuzzy:
            terms = [f'"{v[:4]}*"' if len(v) >= 4 else f'"{v}"' for w in words for v in _variants(w)]
            expr = " OR ".join(dict.fromkeys(terms))
        else:
            expr = " AND ".join(f'"{w}"' for w in words)
        return f"?o bif:contains '{expr}' ."
    if engine is TextSearch.QLEVER:
        ql = "<http://qlever.cs.uni-freiburg.de/builtin-functions/"
        text = " ".join(f"{w[:4]}*" if fuzzy and len(w) >= 4 else w for w in words)
        return f'?t {ql}contains-word> "{text}" ; {ql}contains-entity> ?o .'
    if engine is TextSearch.BLAZEGRAPH:
        bds = "<http://www.bigdata.com/rdf/search#"
        text = " ".join(f"{w[:3]}*" if fuzzy and len(w) >= 3 else w for w in words)
        return f'?o {bds}search> "{text}" ; {bds}matchAllTerms> "{"false" if fuzzy else "true"}" .'
    if engine is TextSearch.JENA:
        # Lucene query syntax: `~` is its own typo tolerance.
        text = (" OR ".join(f"{w}~" for w in words)) if fuzzy else " AND ".join(words)
        return f'?s <http://jena.apache.org/text#query> "{text}" .'
    if engine is TextSearch.STARDOG:
        text = " ".join(f"{w[:4]}*" if fuzzy and len(w) >= 4 else w for w in words)
        return f'?o <tag:stardog:api:property:textMatch> "{text}" .'
    parts = [v[:4] if fuzzy else v for w in words for v in (_variants(w) if fuzzy else [w])]
    tests = [f'CONTAINS(LCASE(STR(?o)), "{p.lower()}")' for p in dict.fromkeys(parts)]
    return f"FILTER({(' || ' if fuzzy else ' && ').join(tests)})"


@dataclass(frozen=True)
class SchemaTerm:
    """A property or class known without scanning (VoID, or a small endpoint's own count) and its name."""

    iri: str
    kind: Kind
    label: str = ""


class EndpointNames:
    """`Names` answered by small, time-limited queries against the endpoint's own indexes."""

    def __init__(
        self,
        endpoint: Endpoint,
        vocab: Vocabulary,
        engine: TextSearch,
        *,
        schema_terms: Iterable[SchemaTerm] = (),
        timeout_s: float = SEARCH_TIMEOUT_S,
    ) -> None:
        self.endpoint = endpoint
        self.vocab = vocab
        self.engine = engine
        self.timeout_s = timeout_s
        self.terms = {t.iri: t for t in schema_terms}
        self._labels: OrderedDict[str, str] = OrderedDict()
        self.problems: list[str] = []  # searches the endpoint did not answer (timeouts, errors), newest last

    @property
    def note(self) -> str:
        """What a user should know about this search ("" when it is the engine's own text index)."""
        if self.engine.degraded:
            return (
                f"search is degraded: {self.endpoint.name} has no text index sparqlnav knows, so names are found by "
                f"a CONTAINS scan limited to {self.timeout_s:g} s and {CANDIDATES} matches, which may miss some"
            )
        return ""

    def _remember(self, iri: str, label: str) -> None:
        self._labels[iri] = label
        self._labels.move_to_end(iri)
        while len(self._labels) > LABEL_CACHE_SIZE:
            self._labels.popitem(last=False)

    def _query(self, pattern: str) -> list[tuple[str, str, str, Kind]]:
        """(subject, predicate, name, kind) for labels and aliases matching a text pattern."""
        preds = " ".join(f"<{p}>" for p in (*self.vocab.labels, *self.vocab.aliases))
        types = ", ".join(f"<{t}>" for t in _KIND_OF_TYPE)
        typing = self.vocab.types[0]
        # The text pattern first for engines whose search binds the subject or must lead the group.
        lead = self.engine in (TextSearch.JENA, TextSearch.BLAZEGRAPH, TextSearch.QLEVER)
        body = f"VALUES ?p {{ {preds} }} ?s ?p ?o ."
        body = f"{pattern} {body}" if lead else f"{body} {pattern}"
        sparql = (
            f"SELECT ?s ?p ?o ?t WHERE {{ {{ SELECT ?s ?p ?o WHERE {{ {body} FILTER(isIRI(?s)) }} LIMIT {CANDIDATES} }} "
            f"OPTIONAL {{ ?s <{typing}> ?t FILTER(?t IN ({types})) }} }}"
        )
        res = self.endpoint.query(sparql, timeout_s=self.timeout_s)
        if not res.ok or res.table is None:
            self.problems.append(res.describe())
            return []
        out: list[tuple[str, str, str, Kind]] = []
        for row in res.table.rows:
            if not {"s", "p", "o"} <= row.keys():
                continue
            t = row.get("t")
            kind: Kind = _KIND_OF_TYPE.get(t.value, "entity") if t else "entity"
            if row["o"].lang is not None and not self.vocab.accepts_language(row["o"].lang):
                continue
            out.append((row["s"].value, row["p"].value, row["o"].value, kind))
        return out

    def _rank(
        self, query: str, rows: Iterable[tuple[str, str, str, Kind]], wanted: set[Kind] | None, limit: int
    ) -> list[NameHit]:
        q = normalise(query)
        aliases = set(self.vocab.aliases)
        best: dict[str, NameHit] = {}
        labels: dict[str, str] = {}
        for s, p, text, kind in rows:
            field = "alias" if p in aliases else "label"
            if field == "label":
                labels.setdefault(s, text)
            if wanted and kind not in wanted:
                continue
            score = name_score(q, normalise(text), field, 0)
            if score >= MIN_SCORE and (s not in best or score > best[s].score):
                best[s] = NameHit(s, kind, text, "", text, field, score, 0)
        for iri, label in labels.items():
            self._remember(iri, label)
        hits = [
            NameHit(h.iri, h.kind, labels.get(h.iri, h.label), "", h.matched, h.field, h.score, 0)
            for h in best.values()
        ]
        return sorted(hits, key=lambda h: (-h.score, h.iri))[:limit]

    def _schema_hits(self, query: str, wanted: set[Kind] | None) -> list[NameHit]:
        """Properties and classes known without scanning, matched by label or humanised local name."""
        q = normalise(query)
        hits = []
        for term in self.terms.values():
            if wanted and term.kind not in wanted:
                continue
            for text, field in ((term.label, "label"), (humanise(local_name(term.iri)), "local")):
                if not text:
                    continue
                score = name_score(q, normalise(text), field, 0)
                if score >= MIN_SCORE:
                    hits.append(NameHit(term.iri, term.kind, term.label or text, "", text, field, score, 0))
                    break
        return hits

    def search(self, text: str, *, limit: int = 8, kinds: Iterable[Kind] | None = None) -> list[NameHit]:
        """Ranked matches: every word first; when nothing matches well, any word as a prefix (typos)."""
        words = _words(text)
        if not words:
            return []
        wanted = set(kinds) if kinds else None
        rows = self._query(text_pattern(self.engine, words, fuzzy=False))
        found = self._merge(self._rank(text, rows, wanted, limit), self._schema_hits(text, wanted), limit)
        if not found or found[0].score < STRONG_SCORE:
            rows += self._query(text_pattern(self.engine, words, fuzzy=True))
            found = self._merge(self._rank(text, rows, wanted, limit), self._schema_hits(text, wanted), limit)
        return found

    @staticmethod
    def _merge(a: list[NameHit], b: list[NameHit], limit: int) -> list[NameHit]:
        best: dict[str, NameHit] = {}
        for h in (*a, *b):
            if h.iri not in best or h.score > best[h.iri].score:
                best[h.iri] = h
        return sorted(best.values(), key=lambda h: (-h.score, h.iri))[:limit]

    def labels_of(self, iris: Iterable[str]) -> dict[str, str]:
        """Labels of many IRIs, 100 per query, cached; schema terms' own labels first."""
        asked = list(dict.fromkeys(iris))
        out = {i: self.terms[i].label for i in asked if i in self.terms and self.terms[i].label}
        missing = [i for i in asked if i not in out and i not in self._labels and _plain_iri(i)]
        preds = " ".join(f"<{p}>" for p in self.vocab.labels)
        for start in range(0, len(missing), 100):
            chunk = missing[start : start + 100]
            values = " ".join(f"<{i}>" for i in chunk)
            res = self.endpoint.query(
                f"SELECT ?s ?o WHERE {{ VALUES ?s {{ {values} }} VALUES ?p {{ {preds} }} ?s ?p ?o }}",
                timeout_s=self.timeout_s,
            )
            got: dict[str, str] = {}
            for row in res.table.rows if res.ok and res.table else []:
                usable = "s" in row and "o" in row and self.vocab.accepts_language(row["o"].lang)
                if usable and (row["s"].value not in got or row["o"].lang == "en"):
                    got[row["s"].value] = row["o"].value
            for iri, label in got.items():
                self._remember(iri, label)
        out.update({i: self._labels[i] for i in asked if i not in out and i in self._labels})
        return out


def _plain_iri(iri: str) -> bool:
    return bool(iri) and not re.search(r"[<>\"{}|^`\\\s]", iri)


def detect_search(endpoint: Endpoint, vocab: Vocabulary) -> TextSearch:
    """Which text index the endpoint answers, by cheap probes: a word taken from one of its own labels is
    looked up through each engine's search; the first that finds it wins (an engine that ignores a foreign
    extension returns nothing rather than an error, so only a hit counts)."""
    preds = " ".join(f"<{p}>" for p in vocab.labels)
    sample = endpoint.query(
        f"SELECT ?o WHERE {{ VALUES ?p {{ {preds} }} ?s ?p ?o FILTER(isLiteral(?o)) }} LIMIT 50",
        timeout_s=PROBE_TIMEOUT_S,
    )
    word = _probe_word(r["o"].value for r in (sample.table.rows if sample.ok and sample.table else []) if "o" in r)
    if word is None:
        return TextSearch.CONTAINS
    probe = EndpointNames(endpoint, vocab, TextSearch.CONTAINS, timeout_s=PROBE_TIMEOUT_S)
    for engine in PROBED:
        probe.engine = engine
        if probe._query(text_pattern(engine, [word], fuzzy=False)):
            return engine
    return TextSearch.CONTAINS


def _probe_word(labels: Iterable[str]) -> str | None:
    """A distinctive word (letters only, 5 to 20 of them) from real labels, so a text index surely holds it."""
    for label in labels:
        for w in _words(label):
            if w.isalpha() and 5 <= len(w) <= 20:
                return w
    return None


def schema_terms_from(predicates: Mapping[str, int], classes: Iterable[str], labels: Mapping[str, str]) -> list[SchemaTerm]:
    """Schema terms from predicate and class lists (VoID partitions or a small endpoint's counts)."""
    terms = [SchemaTerm(p, "property", labels.get(p, "")) for p in predicates]
    terms += [SchemaTerm(c, "class", labels.get(c, "")) for c in classes if c not in predicates]
    return terms


__all__ = ["EndpointNames", "SchemaTerm", "TextSearch", "detect_search", "schema_terms_from", "text_pattern"]
