"""The retrieval index in Qdrant (server, cloud, or qdrant-client's local mode): dense vectors and BM25 sparse
vectors, each build in a fresh collection that the alias then points to in one step."""

from __future__ import annotations

import time
import uuid
import zlib
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

from sparqlnav.retrieval.bm25 import BM25_B, BM25_K1, tokenize
from sparqlnav.retrieval.embed import Embedder
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
            ek = embed_key(name, d.text) if name else None
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
            matrix = embed_in_batches(self.embedder, [unique[i].text for i in todo], progress)
            vectors.update({i: matrix[n].tolist() for n, i in enumerate(todo)})
            stats.embedded = len(todo)
        tokens = {i: tokenize(lexical_text(d)) for i, d in unique.items()}
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
                payload = {**d.to_json(), "fingerprint": d.fingerprint(), "embed_key": embed_key(name, d.text) if name else None,
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
        depth = max(CANDIDATES, 5 * k)
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

