"""One KG's retrieval index on disk: its folder under the sparqlnav home, the schemas kept beside it and the
manifest that names them; built from examples, shapes and descriptions, and opened again as `sparqlnav index`
left it. Also the KG's schema, read from VoID or computed through an `EndpointRunner`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.endpoint import Endpoint, rows_as_dicts
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.schema import Schema, compute_schema, read_void, schema_from_void_file
from sparqlnav.retrieval.embed import Embedder
from sparqlnav.retrieval.examples import Example, ExamplesError, examples_from_endpoint
from sparqlnav.retrieval.index import (
    INDEX_FORMAT,
    BuildStats,
    IndexUnavailable,
    ProgressFn,
    RetrievalIndex,
)
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.qdrant import QdrantIndex
from sparqlnav.retrieval.records import DOCUMENT_KINDS, endpoint_doc, example_doc, shape_docs
from sparqlnav.sparql.check import endpoint_key

if TYPE_CHECKING:
    from sparqlnav.settings import EmbeddingSettings

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

