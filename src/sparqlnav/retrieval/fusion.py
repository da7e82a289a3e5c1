"""Rank fusion: several ranked lists made one (reciprocal rank fusion), and a search with several texts fused
into one list of distinct hits."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from sparqlnav.retrieval.records import DocKind, IndexHit

if TYPE_CHECKING:
    from sparqlnav.retrieval.index import Mode, RetrievalIndex

RRF_K = 60  # the usual reciprocal-rank-fusion constant: damps the head of each list
CANDIDATES = 100  # per-list depth fused in hybrid mode


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

