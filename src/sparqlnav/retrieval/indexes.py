"""The one owner of "open or build a KG's retrieval index": as `sparqlnav index` built it, else built now
(schema plus the endpoint's own examples). Strategies and faces hold a `KGIndexes` that does this once per KG.

The heavy retrieval modules (numpy, scipy) are imported on first use, so holding a `KGIndexes` costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import EmbeddingSettings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sparqlnav.graph.schema import Schema
    from sparqlnav.retrieval.documents import CorpusStats
    from sparqlnav.retrieval.index import BuildStats, ProgressFn
    from sparqlnav.retrieval.kg_index import KGIndex
    from sparqlnav.retrieval.records import Doc, DocKind

CORPUS_FILE = "documents.json"


def index_errors() -> tuple[type[Exception], ...]:
    """What opening or building an index may raise when it cannot be had (each with a one-line reason)."""
    from sparqlnav.retrieval.documents import DocumentsError
    from sparqlnav.retrieval.embed import EmbedderUnavailable
    from sparqlnav.retrieval.examples import ExamplesError
    from sparqlnav.retrieval.index import IndexUnavailable
    from sparqlnav.retrieval.kg_index import SchemaUnavailable

    return (IndexUnavailable, SchemaUnavailable, ExamplesError, EmbedderUnavailable, DocumentsError, OSError)


def open_or_build_kg_index(
    kg: KnowledgeGraph,
    home: Path,
    *,
    embedding: EmbeddingSettings | None = None,
    on_build: Callable[[str], None] | None = None,
) -> KGIndex:
    """The KG's index and schemas under `home`: the stored one, else one built now with the default embedder
    (`on_build` hears why a build starts). Raises one of `index_errors()`."""
    from sparqlnav.retrieval.embed import default_embedder
    from sparqlnav.retrieval.kg_index import build_kg_index, open_kg_index

    ctx = open_kg_index(kg, home, embedding=embedding)
    if ctx is not None:
        return ctx
    if on_build is not None:
        on_build(
            f"no retrieval index for {kg.name} yet: building one (schema and the endpoint's own examples; "
            "add more with `sparqlnav index --examples`)"
        )
    embedder = default_embedder()
    ctx, _stats = build_kg_index(kg, home, embedder=embedder, embedder_spec="minilm" if embedder else "none")
    return ctx


def index_documents(
    ctx: KGIndex,
    kg: KnowledgeGraph,
    home: Path,
    paths: Sequence[Path],
    *,
    replace: bool = True,
    progress: ProgressFn | None = None,
) -> tuple[CorpusStats, BuildStats]:
    """Put the documents under `paths` into the KG's index next to its examples and shapes: only new or changed
    files are read, only new or changed texts embedded; with `replace`, documents of files not given go."""
    from sparqlnav.retrieval.documents import DocumentCorpus
    from sparqlnav.retrieval.kg_index import kg_index_dir
    from sparqlnav.retrieval.records import DOCUMENT_KINDS

    corpus = DocumentCorpus(kg_index_dir(kg, home) / CORPUS_FILE)
    corpus_stats = corpus.update(paths, replace=replace, progress=progress)
    kept = [d for d in ctx.index.documents() if d.kind not in DOCUMENT_KINDS]
    build_stats = ctx.index.build([*kept, *corpus.documents()], progress=progress)
    return corpus_stats, build_stats


class KGIndexes:
    """Each KG's index, opened or built once (keyed like the index folder: name and description); thread-safe."""

    def __init__(self, home: Path, *, embedding: EmbeddingSettings | None = None) -> None:
        self.home = home
        self.embedding = embedding
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str], KGIndex] = {}

    def get(self, kg: KnowledgeGraph, *, on_build: Callable[[str], None] | None = None) -> KGIndex:
        """The KG's index; raises one of `index_errors()` when it cannot be had."""
        key = (kg.name, kg.description)
        with self._lock:  # one build at a time: a second caller waits for the first's index
            ctx = self._open.get(key)
            if ctx is None:
                ctx = self._open[key] = open_or_build_kg_index(kg, self.home, embedding=self.embedding, on_build=on_build)
            return ctx

    def stored_schema(self, kg: KnowledgeGraph) -> Schema | None:
        """The KG's schema from an index already open or stored, never building one (None when there is none)."""
        from sparqlnav.retrieval.kg_index import stored_schema

        with self._lock:
            ctx = self._open.get((kg.name, kg.description))
        return ctx.schema if ctx is not None else stored_schema(kg, self.home)

    def stored_documents(self, kg: KnowledgeGraph, kinds: Sequence[DocKind]) -> list[Doc]:
        """The documents of these kinds in the KG's index when one is open or stored, never building one (search
        is not needed, so a stored index is opened without its embedder)."""
        from sparqlnav.retrieval.kg_index import open_kg_index

        with self._lock:
            ctx = self._open.get((kg.name, kg.description))
        if ctx is not None:
            return ctx.index.documents(kinds)
        stored = open_kg_index(kg, self.home, embedder=None)
        if stored is None:
            return []
        try:
            return stored.index.documents(kinds)
        finally:
            stored.close()

    def close(self) -> None:
        """Close the indexes."""
        with self._lock:
            for ctx in self._open.values():
                ctx.close()
            self._open.clear()
