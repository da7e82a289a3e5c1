"""A persistent full-text index of names: labels, aliases, descriptions and local names of a graph's
entities, classes and properties, in SQLite FTS5 (words, plus trigrams for typos), reranked with fuzzy
matching and popularity."""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import pyoxigraph as ox
from rapidfuzz import fuzz
from rapidfuzz import utils as fuzz_utils

from sparqlnav.graph.name_properties import name_properties, named_by_properties
from sparqlnav.graph.vocab import RDF_TYPE, Vocabulary, Wikibase, humanise, local_name

Kind = Literal["entity", "property", "class"]
# 6: things without a label named by their class's name property; a direct property by its entity's label
INDEX_VERSION = 7

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS items (
  id INTEGER PRIMARY KEY, iri TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,
  label TEXT, description TEXT, degree INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS names (
  id INTEGER PRIMARY KEY, item INTEGER NOT NULL, text TEXT NOT NULL, field TEXT NOT NULL,
  kind TEXT NOT NULL, norm TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS names_words USING fts5(
  text, content='names', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS names_tri USING fts5(
  text, content='names', content_rowid='id', tokenize='trigram');
CREATE VIRTUAL TABLE IF NOT EXISTS names_tri_vocab USING fts5vocab(names_tri, 'row');
CREATE TABLE IF NOT EXISTS trigram_df (term TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID;
"""
# Built after the bulk insert (faster than maintaining them row by row).
_INDEXES = """
CREATE INDEX IF NOT EXISTS names_item ON names(item);
CREATE INDEX IF NOT EXISTS names_norm ON names(norm);
"""

OWL = "http://www.w3.org/2002/07/owl#"
PROPERTY_TYPES = frozenset(
    {
        "http://www.w3.org/1999/02/22-rdf-syntax-ns#Property",
        OWL + "ObjectProperty",
        OWL + "DatatypeProperty",
        OWL + "AnnotationProperty",
        OWL + "FunctionalProperty",
        "http://wikiba.se/ontology#Property",
    }
)
CLASS_TYPES = frozenset({OWL + "Class", "http://www.w3.org/2000/01/rdf-schema#Class"})
MIN_SCORE = 0.5  # below this a "match" shares only scattered letters with the query
STRONG_SCORE = 0.8  # a match this good needs no typo-tolerant second look
WORD_CANDIDATES = 100
TRIGRAM_POSTINGS = 5_000  # bound on the posting lists the typo search may scan
FIELD_WEIGHT = {"label": 1.0, "alias": 0.95, "local": 0.85, "description": 0.6}


@dataclass(frozen=True)
class NameHit:
    """One search result: the thing, the name that matched, and a score in [0, ~1.1]."""

    iri: str
    kind: Kind
    label: str
    description: str
    matched: str
    field: str
    score: float
    degree: int


@dataclass
class _Item:
    kind: Kind
    degree: int = 0
    label: str | None = None
    description: str | None = None


class _Collector:
    """Gathers names and statistics while streaming over a graph's triples."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.items: dict[str, _Item] = {}
        self.names: list[tuple[str, str, str]] = []  # (iri, text, field)
        self._labels = set(vocab.labels)
        self._aliases = set(vocab.aliases)
        self._descriptions = set(vocab.descriptions)
        self._types = set(vocab.types)
        self.predicate_counts: Counter[str] = Counter()

    def _item(self, iri: str, kind: Kind = "entity") -> _Item:
        item = self.items.get(iri)
        if item is None:
            item = self.items[iri] = _Item(kind)
        elif kind != "entity" and item.kind == "entity":
            item.kind = kind
        return item

    def add(self, s: str, p: str, o: str, o_is_iri: bool, lang: str | None) -> None:
        self.predicate_counts[p] += 1
        subject = self._item(s)
        subject.degree += 1
        if o_is_iri:
            if p in self._types:
                self._item(o, "class").degree += 1
                if o in PROPERTY_TYPES:
                    subject.kind = "property"
                elif o in CLASS_TYPES and subject.kind == "entity":
                    subject.kind = "class"
            else:
                self._item(o).degree += 1
            return
        if not (p in self._labels or p in self._aliases or p in self._descriptions):
            return
        if not self.vocab.accepts_language(lang):
            return
        if p in self._labels:
            self.names.append((s, o, "label"))
            if subject.label is None or lang == "en":
                subject.label = o
        elif p in self._aliases:
            self.names.append((s, o, "alias"))
        else:
            self.names.append((s, o[:300], "description"))
            if subject.description is None or lang == "en":
                subject.description = o[:300]

    def add_name(self, iri: str, text: str) -> None:
        """A thing's name from its class's name property, for a thing no label names."""
        item = self.items.get(iri)
        if item is None or item.label is not None:  # before `finish`, only a label predicate sets a label
            return
        self.names.append((iri, text, "label"))
        item.label = text

    def finish(self) -> None:
        wb = self.vocab.wikibase
        for p in self.predicate_counts:
            pid = wb.property_id(p) if wb else None
            if pid and wb:
                # Wikibase: wdt:/p:/ps:/pq: IRIs are all forms of one property entity; index the entity.
                self._item(wb.entity_iri(pid), "property").degree += self.predicate_counts[p]
            else:
                self._item(p, "property").degree += self.predicate_counts[p]
        if wb:
            for iri, item in self.items.items():
                if iri.startswith(wb.entity) and re.fullmatch(r"P\d+", iri[len(wb.entity) :]):
                    item.kind = "property"
        named = {iri for iri, _, f in self.names if f in ("label", "alias")}
        # A file in Wikidata's layout without `wikibase:directClaim` declarations still labels its properties on
        # their entities (wd:P31 "instance of"): wdt:P31 reads as that, not as "P31".
        for p in self.predicate_counts if wb is None else ():  # a declared Wikibase indexes the entity itself
            entity = self.items.get(Wikibase.property_entity(p) or "") if p not in named else None
            if entity is not None and entity.label and p in self.items:
                self.names.append((p, entity.label, "label"))
                self.items[p].label = entity.label
                named.add(p)
        for iri, item in self.items.items():
            if iri not in named and not iri.startswith("_:"):
                text = humanise(local_name(iri))
                if text:
                    self.names.append((iri, text, "local"))
                    if item.label is None:
                        item.label = text


def _literal_parts(term: object) -> tuple[str, bool, str | None]:
    if isinstance(term, ox.Literal):
        return term.value, False, term.language
    if isinstance(term, ox.NamedNode):
        return term.value, True, None
    return str(term), False, None  # blank nodes and triples: not names


class LabelIndex:
    """Search names of a graph; the SQLite file is built once and reused."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    # -- building ---------------------------------------------------------------------------
    @staticmethod
    def exists(path: Path) -> bool:
        """True when a finished index of the current version is at `path`."""
        if not path.exists():
            return False
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
                row = con.execute("SELECT value FROM meta WHERE key='version'").fetchone()
        except sqlite3.Error:
            return False
        return row is not None and row[0] == str(INDEX_VERSION)

    @classmethod
    def build_from_store(
        cls,
        store: ox.Store,
        path: Path,
        vocab: Vocabulary,
        progress: Callable[[int], None] | None = None,
    ) -> LabelIndex:
        """Index every name in a pyoxigraph store (one pass over its triples)."""
        collector = _Collector(vocab)
        for i, quad in enumerate(store.quads_for_pattern(None, None, None)):
            if not isinstance(quad.subject, ox.NamedNode):
                continue
            value, is_iri, lang = _literal_parts(quad.object)
            if not is_iri and not isinstance(quad.object, ox.Literal):
                continue
            collector.add(quad.subject.value, quad.predicate.value, value, is_iri, lang)
            if progress and i % 10_000 == 0:
                progress(i)
        if progress:
            progress(len(store))  # every triple read; what remains is writing the index
        for iri, text in named_by_properties(store, name_properties(store, vocab.labels)):
            collector.add_name(iri, text)
        collector.finish()
        return cls._write(path, collector)

    @classmethod
    def build_from_triples(
        cls,
        triples: Iterable[tuple[str, str, str, bool, str | None]],
        path: Path,
        vocab: Vocabulary,
        predicate_counts: Mapping[str, int] | None = None,
    ) -> LabelIndex:
        """Index names from (subject, predicate, object, object_is_iri, language) tuples (remote graphs)."""
        collector = _Collector(vocab)
        for s, p, o, is_iri, lang in triples:
            collector.add(s, p, o, is_iri, lang)
        collector.predicate_counts.update(predicate_counts or {})
        collector.finish()
        return cls._write(path, collector)

    @classmethod
    def _write(cls, path: Path, collector: _Collector) -> LabelIndex:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{threading.get_ident()}")
        tmp.unlink(missing_ok=True)
        con = sqlite3.connect(tmp)
        try:
            con.executescript(_SCHEMA)
            ids: dict[str, int] = {}
            rows = []
            for n, (iri, item) in enumerate(collector.items.items(), start=1):
                ids[iri] = n
                rows.append((n, iri, item.kind, item.label, item.description, item.degree))
            con.executemany("INSERT INTO items VALUES (?,?,?,?,?,?)", rows)
            # Insertion order is search order: an unranked FTS LIMIT returns the first rows, so properties
            # and classes come first, then the most connected things, and labels before other names.
            kind_rank = {"property": 0, "class": 1, "entity": 2}
            field_rank = {"label": 0, "alias": 1, "local": 2, "description": 3}
            seen: set[tuple[int, str, str]] = set()
            names = []
            for iri, text, field in collector.names:
                key = (ids[iri], text, field)
                if key not in seen and text.strip():
                    seen.add(key)
                    item = collector.items[iri]
                    names.append((kind_rank[item.kind], -item.degree, field_rank[field], ids[iri], text, field, item.kind))
            names.sort(key=lambda r: r[:4])
            con.executemany(
                "INSERT INTO names(item, text, field, kind, norm) VALUES (?,?,?,?,?)",
                ((r[3], r[4], r[5], r[6], fuzz_utils.default_process(r[4])) for r in names),
            )
            con.executescript(_INDEXES)
            con.execute("INSERT INTO names_words(names_words) VALUES ('rebuild')")
            con.execute("INSERT INTO names_tri(names_tri) VALUES ('rebuild')")
            # fts5vocab answers by scanning; a keyed copy makes document frequencies a B-tree lookup.
            con.execute("INSERT INTO trigram_df SELECT term, doc FROM names_tri_vocab")
            con.execute("INSERT INTO meta VALUES ('version', ?)", (str(INDEX_VERSION),))
            con.commit()
        finally:
            con.close()
        tmp.replace(path)  # atomic: readers see the old index or the new one, never half of one
        return cls(path)

    # -- searching --------------------------------------------------------------------------
    def _con(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._local.con = con
        return con

    def close(self) -> None:
        """Close this thread's connection."""
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    def label_of(self, iri: str) -> str | None:
        """The best name of an IRI, when the index knows it."""
        row = self._con().execute("SELECT label FROM items WHERE iri=?", (iri,)).fetchone()
        return row[0] if row else None

    def labels_of(self, iris: Iterable[str]) -> dict[str, str]:
        """Names for many IRIs at once (unknown ones are left out)."""
        wanted = list(dict.fromkeys(iris))
        out: dict[str, str] = {}
        con = self._con()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for iri, label in con.execute(
                f"SELECT iri, label FROM items WHERE iri IN ({marks})", chunk
            ):
                if label:
                    out[iri] = label
        return out

    def item(self, iri: str) -> NameHit | None:
        """The index's record of one IRI."""
        row = (
            self._con()
            .execute("SELECT iri, kind, label, description, degree FROM items WHERE iri=?", (iri,))
            .fetchone()
        )
        if row is None:
            return None
        return NameHit(row[0], row[1], row[2] or "", row[3] or "", row[2] or "", "label", 1.0, row[4])

    def aliases_of(self, iri: str) -> list[str]:
        """Aliases (and extra labels) of an IRI."""
        rows = self._con().execute(
            "SELECT n.text FROM names n JOIN items i ON i.id=n.item WHERE i.iri=? AND n.field IN ('alias','label')",
            (iri,),
        )
        return [r[0] for r in rows]

    def count(self, kind: Kind | None = None) -> int:
        """Number of indexed items (of one kind)."""
        if kind:
            return int(
                self._con()
                .execute("SELECT COUNT(*) FROM items WHERE kind=?", (kind,))
                .fetchone()[0]
            )
        return int(self._con().execute("SELECT COUNT(*) FROM items").fetchone()[0])

    def search(self, text: str, *, limit: int = 8, kinds: Iterable[Kind] | None = None) -> list[NameHit]:
        """Ranked hits for `text`: exact, partial and misspelt names; popular things first among equals."""
        query = text.strip()
        if not query:
            return []
        wanted = set(kinds) if kinds else None
        candidates = self._exact(query, wanted)
        candidates.update(self._words(query, wanted))
        ranked = self._rank(query, candidates, limit, wanted)
        if not ranked or ranked[0].score < STRONG_SCORE:
            # Few good matches: the query may be misspelt, so look again by shared rare trigrams.
            candidates.update(self._trigram_candidates(query, wanted))
            ranked = self._rank(query, candidates, limit, wanted)
        return ranked

    @staticmethod
    def _kind_filter(wanted: set[Kind] | None) -> tuple[str, list[str]]:
        if not wanted:
            return "", []
        return f" AND n.kind IN ({','.join('?' * len(wanted))})", sorted(wanted)

    def _exact(self, query: str, wanted: set[Kind] | None) -> dict[int, tuple[str, str]]:
        """Names equal to the query after normalisation (case, punctuation)."""
        clause, args = self._kind_filter(wanted)
        rows = self._con().execute(
            f"SELECT n.id, n.text, n.field FROM names n WHERE n.norm = ?{clause} LIMIT 50",
            [fuzz_utils.default_process(query), *args],
        )
        return {rid: (t, f) for rid, t, f in rows}

    def _words(self, query: str, wanted: set[Kind] | None) -> dict[int, tuple[str, str]]:
        """Names containing every word of the query (as prefixes), in popularity order."""
        words = re.findall(r"\w+", query.lower())
        if not words:
            return {}
        clause, args = self._kind_filter(wanted)
        # Whole words, and the last one as a prefix too (a name being typed: "Heinrich Ho"); a plural
        # also matches its singular ("elements" finds "element").
        terms = [_word_term(w) for w in words[:-1]] + [_word_term(words[-1], prefix=True)]
        expr = " AND ".join(terms)
        rows = self._con().execute(
            "SELECT n.id, n.text, n.field FROM names_words w JOIN names n ON n.id = w.rowid "
            f"WHERE names_words MATCH ?{clause} LIMIT ?",
            [expr, *args, WORD_CANDIDATES],
        )
        return {rid: (t, f) for rid, t, f in rows}

    def _trigram_candidates(self, query: str, wanted: set[Kind] | None) -> dict[int, tuple[str, str]]:
        """Names sharing the query's rarest trigrams (robust to a typo, which spoils only a few trigrams)."""
        grams = _trigrams(query)
        if not grams:
            return {}
        con = self._con()
        marks = ",".join("?" * len(grams))
        freq = dict(con.execute(f"SELECT term, doc FROM trigram_df WHERE term IN ({marks})", grams).fetchall())
        chosen: list[str] = []
        postings = 0
        for g in sorted((g for g in grams if freq.get(g)), key=lambda g: freq[g]):
            if len(chosen) >= 2 and postings + freq[g] > TRIGRAM_POSTINGS:
                break
            chosen.append(g)
            postings += freq[g]
        if not chosen:
            return {}
        clause, args = self._kind_filter(wanted)
        # Ranking scores every posting; past the bound, take the first (most popular) matches instead.
        order = "ORDER BY rank " if postings <= TRIGRAM_POSTINGS else ""
        rows = con.execute(
            "SELECT n.id, n.text, n.field FROM names_tri w JOIN names n ON n.id = w.rowid "
            f"WHERE names_tri MATCH ?{clause} {order}LIMIT 300",
            [" OR ".join(f'"{g}"' for g in chosen), *args],
        )
        return {rid: (t, f) for rid, t, f in rows}

    def _rank(
        self,
        query: str,
        candidates: dict[int, tuple[str, str]],
        limit: int,
        wanted: set[Kind] | None,
    ) -> list[NameHit]:
        if not candidates:
            return []
        con = self._con()
        ids = list(candidates)
        marks = ",".join("?" * len(ids))
        meta = {
            r[0]: r[1:]
            for r in con.execute(
                f"SELECT n.id, i.iri, i.kind, i.label, i.description, i.degree FROM names n "
                f"JOIN items i ON i.id = n.item WHERE n.id IN ({marks})",
                ids,
            )
        }
        q = fuzz_utils.default_process(query)
        best: dict[str, tuple[float, int, str]] = {}  # iri -> (score, name id, normalised text)
        for rid, (text, field) in candidates.items():
            iri, kind, _label, _description, degree = meta[rid]
            if wanted and kind not in wanted:
                continue
            t = fuzz_utils.default_process(text)
            score = name_score(q, t, field, degree)
            if score >= MIN_SCORE and (iri not in best or score > best[iri][0]):
                best[iri] = (score, rid, t)
        top = sorted(best.items(), key=lambda kv: (-kv[1][0], -meta[kv[1][1]][4], kv[0]))[:limit]
        hits = []
        for iri, (score, rid, _) in top:
            _, kind, label, description, degree = meta[rid]
            text, field = candidates[rid]
            hits.append(NameHit(iri, kind, label or text, description or "", text, field, score, degree))
        return hits


def name_score(q: str, t: str, field: str, degree: int) -> float:
    """How well a name matches a query, both normalised by `normalise`: the one scorer of local and endpoint search."""
    plain = fuzz.ratio(q, t)
    if field == "description":
        sim = fuzz.token_set_ratio(q, t) / 100 if len(q) > 3 else 0.0
    else:
        # partial matches count only when the query is part of the name ("Hoch" → "Heinrich Hoch"),
        # not when a short name happens to sit inside the query.
        partial = 0.9 * fuzz.partial_ratio(q, t) if len(t) >= len(q) else 0.0
        best_fit = max(plain, 0.95 * fuzz.token_set_ratio(q, t), partial)
        # A little plain similarity on top, so "manager" prefers "has manager" to "has product manager".
        sim = (0.85 * best_fit + 0.15 * plain) / 100
    exact = 0.08 if q == t else 0.0
    popularity = 0.04 * min(1.0, math.log1p(degree) / 10)
    return round(sim * FIELD_WEIGHT.get(field, 0.8) + exact + popularity, 4)


def normalise(text: str) -> str:
    """A name as the scorer compares it (case and punctuation folded)."""
    return str(fuzz_utils.default_process(text))


def _word_term(word: str, *, prefix: bool = False) -> str:
    """An FTS5 term for one query word; English plurals also match their singular."""
    star = "*" if prefix else ""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        stem = word[:-2] if word.endswith("es") and word[-3:-2] in ("s", "x", "z", "h") else word[:-1]
        return f'("{word}"{star} OR "{stem}"{star})'
    return f'"{word}"{star}'


def _trigrams(text: str) -> list[str]:
    """Distinct lowercase trigrams of the words of `text` (FTS5 trigram syntax)."""
    grams: list[str] = []
    for word in re.findall(r"\w+", text.lower()):
        for i in range(max(1, len(word) - 2)):
            g = word[i : i + 3]
            if len(g) == 3 and g not in grams:
                grams.append(g)
    return grams[:40]


def iter_store_triples(store: ox.Store) -> Iterator[tuple[str, str, str, bool, str | None]]:
    """(s, p, o, o_is_iri, lang) for the named-subject triples of a store."""
    for quad in store.quads_for_pattern(None, None, None):
        if isinstance(quad.subject, ox.NamedNode):
            value, is_iri, lang = _literal_parts(quad.object)
            yield quad.subject.value, quad.predicate.value, value, is_iri, lang


__all__ = ["RDF_TYPE", "LabelIndex", "NameHit", "Names", "iter_store_triples", "name_score", "normalise"]


class Names(Protocol):
    """Where names come from: a local full-text index, or a service such as Wikidata's API."""

    def search(
        self, text: str, *, limit: int = 8, kinds: Iterable[Kind] | None = None
    ) -> list[NameHit]:
        """Ranked matches for a name."""
        ...

    def labels_of(self, iris: Iterable[str]) -> dict[str, str]:
        """Labels of many IRIs (unknown ones left out)."""
        ...
