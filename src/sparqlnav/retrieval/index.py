"""The retrieval index: the protocol every backend keeps (`RetrievalIndex`: build, search, list), what a build
did, and what backends share when they build (batched embedding, the text BM25 reads).

`local.LocalIndex` is the embedded default: one SQLite file (or memory), searched in memory, no server.
`qdrant.QdrantIndex` keeps the same documents in Qdrant for deployments that outgrow one machine.
Builds are incremental (a document whose text is unchanged keeps its vector) and crash-safe (the new
contents replace the old in one transaction, or one alias switch, after every vector is computed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from sparqlnav.errors import SparqlnavError
from sparqlnav.retrieval.embed import Embedder, Matrix
from sparqlnav.retrieval.records import Doc, DocKind, IndexHit

Mode = Literal["lexical", "dense", "hybrid"]
ProgressFn = Callable[[str, int, int], None]
"""progress(message, done, total)."""

INDEX_FORMAT = 1
EMBED_BATCH = 512


class IndexUnavailable(SparqlnavError):
    """An index that cannot be used as asked (missing, built with another embedder, no vectors)."""


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


def embed_in_batches(embedder: Embedder, texts: Sequence[str], progress: ProgressFn | None) -> Matrix:
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


def embed_key(embedder_name: str, text: str) -> str:
    """What a stored vector was made from: the embedder and the text (a vector is reused while both hold)."""
    return hashlib.sha256(f"{embedder_name}\0{text}".encode()).hexdigest()[:32]


def lexical_text(doc: Doc) -> str:
    """What BM25 reads of a document: its text and its keywords."""
    keywords = " ".join(str(k) for k in doc.meta.get("keywords", ()) or ())
    return f"{doc.text} {keywords}".strip()

