"""How similar short texts (relation names) are to a question: cosine of embeddings when an embedder is at
hand, BM25 over the texts otherwise (queryagent.txt B.3 ranks relation candidates this way)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from sparqlnav.retrieval.bm25 import BM25_B, BM25_K1, tokenize
from sparqlnav.retrieval.embed import Embedder, normalize


def similarities(question: str, texts: Sequence[str], embedder: Embedder | None = None) -> list[float]:
    """One score per text, higher is more similar to `question` (cosine, or BM25 without an embedder)."""
    if not texts:
        return []
    if embedder is not None:
        vectors = normalize(np.asarray(embedder.embed([question, *texts]), dtype=np.float32))
        return [float(x) for x in vectors[1:] @ vectors[0]]
    return bm25_scores(question, texts)


def bm25_scores(question: str, texts: Sequence[str]) -> list[float]:
    """BM25 of each text (as a document) for the question's words, over `texts` as the collection."""
    docs = [Counter(tokenize(t)) for t in texts]
    avgdl = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    scores = []
    for d in docs:
        length = sum(d.values())
        score = 0.0
        for w in set(tokenize(question)):
            tf = d.get(w, 0)
            if not tf:
                continue
            idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
            score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl))
        scores.append(score)
    return scores


def top_similar(question: str, texts: Sequence[str], k: int, embedder: Embedder | None = None) -> list[int]:
    """Indexes of the `k` texts most similar to the question, best first (ties keep the given order)."""
    scores = similarities(question, texts, embedder)
    return sorted(range(len(texts)), key=lambda i: -scores[i])[:k]
