"""What a retrieval index holds and returns: `Doc` (one retrievable item, of a `DocKind`), the documents made
from examples, class shapes and endpoint descriptions, and `IndexHit` (a document found, with its ranks)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sparqlnav.retrieval.bm25 import words_of
from sparqlnav.sparql.check import endpoint_key

if TYPE_CHECKING:
    from sparqlnav.graph.schema import Schema
    from sparqlnav.retrieval.examples import Example

DocKind = Literal["example", "shape", "endpoint", "passage", "table", "infobox"]
DOCUMENT_KINDS: tuple[DocKind, ...] = ("passage", "table", "infobox")  # from documents beside the graph


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



@dataclass(frozen=True)
class IndexHit:
    """A retrieved document, its fused score and its rank in each list (1-based; None when absent)."""

    doc: Doc
    score: float
    lexical_rank: int | None = None
    dense_rank: int | None = None



def doc_ids(hits: Iterable[IndexHit]) -> list[str]:
    """The ids of hits, in order."""
    return [h.doc.id for h in hits]

