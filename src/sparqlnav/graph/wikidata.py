"""The Wikidata flavour: search through the MediaWiki `wbsearchentities` API and labels through
`wbgetentities`, fetched by us (the WDQS label SERVICE exists nowhere else)."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Literal

import httpx

from sparqlnav.graph.endpoint import RemoteEndpoint
from sparqlnav.graph.kg import KnowledgeGraph, wikidata_prefixes
from sparqlnav.graph.names import Kind, NameHit
from sparqlnav.graph.vocab import WIKIDATA, Vocabulary, Wikibase
from sparqlnav.settings import Settings
from sparqlnav.transport import guarded_transport

LABEL_CACHE_SIZE = 100_000
# An API answer (search hits, labels of 50 entities) is kilobytes; this bounds one counted after content decoding.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024


class WikidataNames:
    """Names from a MediaWiki Wikibase API (Wikidata by default), with an in-memory label cache."""

    def __init__(
        self,
        api_url: str,
        *,
        wikibase: Wikibase = WIKIDATA,
        user_agent: str = "",
        language: str = "en",
        timeout_s: float = 20.0,
    ) -> None:
        self.api_url = api_url
        self.wikibase = wikibase
        self.language = language
        self._client = httpx.Client(
            headers={"User-Agent": user_agent} if user_agent else {},
            timeout=timeout_s,
            transport=guarded_transport(max_response_bytes=MAX_RESPONSE_BYTES),
        )
        self._labels: OrderedDict[str, str] = OrderedDict()  # bounded: a long-running server asks about many

    def _remember(self, iri: str, label: str) -> None:
        self._labels[iri] = label
        self._labels.move_to_end(iri)
        while len(self._labels) > LABEL_CACHE_SIZE:
            self._labels.popitem(last=False)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def _get(self, params: dict[str, str]) -> dict[str, Any]:
        try:
            response = self._client.get(self.api_url, params={**params, "format": "json"})
        except httpx.TransportError as exc:
            # httpx names no host ("Name or service not known"); the same type keeps callers' handling.
            raise type(exc)(f"cannot reach {self.api_url}: {exc}", request=exc.request) from exc
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        if "error" in data:
            raise RuntimeError(f"Wikibase API error: {data['error'].get('info', data['error'])}")
        return data

    def _search_type(self, text: str, kind: Literal["item", "property"], limit: int) -> list[NameHit]:
        data = self._get(
            {
                "action": "wbsearchentities",
                "search": text,
                "language": self.language,
                "uselang": self.language,
                "type": kind,
                "limit": str(limit),
            }
        )
        hits: list[NameHit] = []
        n = len(data.get("search", []))
        for rank, entry in enumerate(data.get("search", [])):
            iri = entry.get("concepturi") or self.wikibase.entity_iri(entry["id"])
            label = entry.get("label") or entry.get("display", {}).get("label", {}).get(
                "value", entry["id"]
            )
            match = entry.get("match", {})
            self._remember(iri, label)
            hits.append(
                NameHit(
                    iri=iri,
                    kind="property" if kind == "property" else "entity",
                    label=label,
                    description=entry.get("description", ""),
                    matched=match.get("text", label),
                    field=match.get("type", "label"),
                    score=round(
                        1.0 - rank / max(n, 1) * 0.5, 4
                    ),  # the API's own order is its ranking
                    degree=0,
                )
            )
        return hits

    def search(
        self, text: str, *, limit: int = 8, kinds: Iterable[Kind] | None = None
    ) -> list[NameHit]:
        """Entities or properties in the API's ranking."""
        wanted = set(kinds or ("entity", "class", "property"))
        hits: list[NameHit] = []
        if wanted & {"entity", "class"}:
            hits += self._search_type(text, "item", limit)
        if "property" in wanted:
            hits += self._search_type(text, "property", limit)
        return hits[:limit]

    def labels_of(self, iris: Iterable[str]) -> dict[str, str]:
        """Labels via wbgetentities, 50 ids per request, cached."""
        wb = self.wikibase
        asked = list(iris)
        ids: dict[str, str] = {}  # local id -> one IRI form asked for it
        for iri in asked:
            if iri in self._labels:
                continue
            pid = wb.property_id(iri)
            local = pid or (iri[len(wb.entity) :] if iri.startswith(wb.entity) else "")
            if re.fullmatch(r"[QPL]\d+", local):
                ids.setdefault(local, iri)
        wanted = list(dict.fromkeys(ids))
        for i in range(0, len(wanted), 50):
            chunk = wanted[i : i + 50]
            data = self._get(
                {
                    "action": "wbgetentities",
                    "ids": "|".join(chunk),
                    "props": "labels",
                    "languages": self.language,
                }
            )
            for qid, ent in (data.get("entities") or {}).items():
                value = ((ent.get("labels") or {}).get(self.language) or {}).get("value")
                if value:
                    self._remember(wb.entity_iri(qid), value)
        out: dict[str, str] = {}
        for iri in asked:
            pid = wb.property_id(iri)
            key = wb.entity_iri(pid) if pid else iri
            if key in self._labels:
                out[iri] = self._labels[key]
        return out


def open_wikidata(settings: Settings) -> KnowledgeGraph:
    """Wikidata (or a mirror set by SPARQLNAV_WIKIDATA_SPARQL / SPARQLNAV_WIKIDATA_API)."""
    endpoint = RemoteEndpoint(
        settings.wikidata.sparql,
        name="wikidata",
        limits=settings.limits,
        http=settings.remote.http(),
        allowed_services=settings.remote.allowed_services,
    )
    names = WikidataNames(settings.wikidata.api, user_agent=settings.remote.user_agent)
    return KnowledgeGraph(
        name="wikidata",
        endpoint=endpoint,
        vocab=Vocabulary.for_wikibase(WIKIDATA),
        prefixes=wikidata_prefixes(),
        names=names,
        description="Wikidata",
    )
