"""The tools every strategy, the MCP server and the HTTP API share: typed functions over one KG whose
SPARQL runs are all recorded in the trace, and whose text observations are written for an LLM to read."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from sparqlnav.graph.endpoint import Endpoint, EndpointWrapper, QueryResult
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import shown_labels
from sparqlnav.sparql.prefixes import declare_prefixes
from sparqlnav.tools.lookup import (
    DEFAULT_ENTITIES,
    DEFAULT_PROPERTIES,
    EntityPage,
    LookupFailed,
    PropertyExamples,
    SearchResult,
    absent,
    closest_values,
    entity,
    property_examples,
    resolve,
    resolve_name,
    search,
    value_datatype,
)
from sparqlnav.trace import Trace

if TYPE_CHECKING:
    from sparqlnav.retrieval.indexes import KGIndexes
    from sparqlnav.retrieval.kg_index import KGIndex


class TracedEndpoint(EndpointWrapper):
    """An endpoint that records every query it runs as a `sparql` event."""

    def __init__(self, inner: Endpoint, trace: Trace, *, purpose: str | None = None) -> None:
        super().__init__(inner)
        self.trace = trace
        self.purpose = purpose  # e.g. "lookup": a query a strategy runs for itself, not one a model wrote

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Run and record."""
        result = self.inner.query(sparql, timeout_s=timeout_s)
        rows = len(result.table) if result.table is not None and not result.table.is_boolean else None
        extra = {"purpose": self.purpose} if self.purpose else {}
        self.trace.emit(
            "sparql",
            query=sparql,
            endpoint=result.endpoint,
            outcome=result.outcome.value,
            seconds=round(result.seconds, 4),
            rows=rows,
            message=result.message,
            **extra,
        )
        return result


@dataclass
class Observation:
    """What a tool returns: text for an LLM, plus the structured value for code."""

    text: str
    value: Any = None
    ok: bool = True


# What a name service (the SQLite index, a MediaWiki API) may raise; tools report it, runs go on.
NAME_SERVICE_ERRORS = (httpx.HTTPError, sqlite3.Error, RuntimeError, OSError, ValueError)


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


class Toolkit:
    """The tools over one KG, traced: lookups and queries, and (given the KGs' retrieval indexes) example
    queries, class shapes and validation. `tools.registry` declares which of them models and faces see."""

    def __init__(
        self,
        kg: KnowledgeGraph,
        trace: Trace,
        *,
        entities: int = DEFAULT_ENTITIES,
        properties: int = DEFAULT_PROPERTIES,
        indexes: KGIndexes | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.trace = trace
        self.kg = dataclasses.replace(kg, endpoint=TracedEndpoint(kg.endpoint, trace))
        self.entities = entities
        self.properties = properties
        self.indexes = indexes
        self.timeout_s = timeout_s  # None: the endpoint's own limit

    def search(self, query: str) -> Observation:
        """Entities and properties whose names match `query`."""
        try:
            found: SearchResult = search(self.kg, query, entities=self.entities, properties=self.properties)
        except NAME_SERVICE_ERRORS as exc:
            return Observation(f"search failed: {_one_line(exc)}", None, ok=False)
        return Observation(found.to_text(self.kg), found)

    def get_entity(
        self, ident: str, *, prune: Callable[[EntityPage], EntityPage] | None = None
    ) -> Observation:
        """An entity's page: outgoing edges (with qualifiers) and incoming properties; `ident` may also be a name,
        looked up by search (the chosen IRI is stated); `prune` may drop edges irrelevant to the task."""
        try:
            iri, hit = resolve_name(self.kg, ident)
        except LookupFailed as exc:
            try:
                resolve(self.kg, ident)
            except LookupFailed as why:  # why it is no identifier either (e.g. an unknown prefix)
                return Observation(f"{why}; {exc}", None, ok=False)
            return Observation(str(exc), None, ok=False)
        except NAME_SERVICE_ERRORS as exc:
            return Observation(f"get_entity failed: {_one_line(exc)}", None, ok=False)
        try:
            page: EntityPage = entity(self.kg, iri)
        except LookupFailed as exc:
            return Observation(str(exc), None, ok=False)
        except NAME_SERVICE_ERRORS as exc:
            return Observation(f"get_entity failed: {_one_line(exc)}", None, ok=False)
        chosen = (
            f"{ident!r} resolved to {self.kg.prefixes.compact(iri)} ({hit.label}) by name search\n" if hit else ""
        )
        if prune is None:
            return Observation(chosen + page.to_text(self.kg), page)
        kept = prune(page)
        text = kept.to_text(self.kg)
        left_out = len(page.edges) - len(kept.edges)
        if left_out > 0:
            text += f"\n  ({left_out} of {len(page.edges)} properties left out as irrelevant to the question)"
        return Observation(chosen + text, kept)

    def get_property_examples(self, ident: str) -> Observation:
        """A few subject–object pairs of a property."""
        try:
            ex: PropertyExamples = property_examples(self.kg, resolve(self.kg, ident))
        except LookupFailed as exc:
            return Observation(str(exc), None, ok=False)
        except NAME_SERVICE_ERRORS as exc:
            return Observation(f"get_property_examples failed: {_one_line(exc)}", None, ok=False)
        return Observation(ex.to_text(self.kg), ex)

    def execute_sparql(self, query: str) -> Observation:
        """Run a query; the text shows a compact table or the engine's message. Prefixes the graph knows may be
        used undeclared, on every face alike (the CLI, the API, MCP and the agents share this path)."""
        repaired = declare_prefixes(query, self.kg.prefixes.mapping)
        result = self.kg.endpoint.query(repaired.query, timeout_s=self.timeout_s)
        if not result.ok or result.table is None:
            return Observation(f"The query failed — {result.describe()}", result, ok=False)
        try:
            labels = shown_labels(result.table, self.kg.names)
        except NAME_SERVICE_ERRORS:
            labels = {}  # labels are a courtesy: the rows stand without them
        return Observation(result.table.to_markdown(self.kg.prefixes, labels), result)

    def absent(self, iris: Sequence[str]) -> list[str]:
        """Those of `iris` that occur nowhere in the graph (one traced query; none when it fails)."""
        return absent(self.kg, iris)

    def closest_values(self, prop: str, text: str) -> list[str]:
        """The stored values of `prop` closest to `text`, as stored (none when nothing is close)."""
        return closest_values(self.kg, prop, text)

    def value_datatype(self, prop: str) -> str | None:
        """The one non-text datatype of `prop`'s stored values, if they have one."""
        return value_datatype(self.kg, prop)

    def _index(self) -> KGIndex | Observation:
        """The KG's retrieval index, or a failed observation saying why there is none."""
        from sparqlnav.retrieval.indexes import index_errors

        if self.indexes is None:
            return Observation("no retrieval index is available here (this toolkit was given none)", None, ok=False)
        try:
            return self.indexes.get(self.kg)
        except index_errors() as exc:
            return Observation(f"no retrieval index for {self.kg.name}: {_one_line(exc)}", None, ok=False)

    def find_examples(self, question: str, k: int = 5) -> Observation:
        """Indexed example question–query pairs whose questions resemble `question`."""
        from sparqlnav.retrieval.fusion import search_all

        ctx = self._index()
        if isinstance(ctx, Observation):
            return ctx
        hits = search_all(ctx.index, [question], k=max(1, min(k, 20)), kinds=["example"])
        if not hits:
            return Observation("No example queries are indexed for this KG (add some with `sparqlnav index --examples`).", [])
        blocks = []
        for h in hits:
            where = f"# endpoint: {h.doc.endpoint}\n" if h.doc.endpoint else ""
            blocks.append(f"- {h.doc.title or h.doc.text}\n{where}{h.doc.content.strip()}")
        return Observation("\n\n".join(blocks), hits)

    def get_class_shapes(self, classes: list[str]) -> Observation:
        """The shapes of classes named by IRI, prefixed name or a word naming the class."""
        from sparqlnav.retrieval.fusion import search_all

        ctx = self._index()
        if isinstance(ctx, Observation):
            return ctx
        out: list[str] = []
        for name in classes[:20]:
            iri = self.kg.prefixes.expand(name)
            if iri is not None and ctx.schema is not None and iri in ctx.schema.classes:
                out.append(ctx.schema.shape(iri))
                continue
            hits = search_all(ctx.index, [name], k=1, kinds=["shape"])  # a word naming a class
            out.append(hits[0].doc.content.strip() if hits else f"# no class matches {name!r}")
        return Observation("\n\n".join(out) or "Name at least one class.", out)

    def validate_sparql(self, query: str) -> Observation:
        """Check a query without running it; the text lists the issues, and the repaired query if any."""
        from sparqlnav.sparql.check import validate

        ctx = None
        if self.kg.name != "wikidata":  # too large to describe: syntax, prefixes and read-only only
            found = self._index()
            if isinstance(found, Observation):
                return found
            ctx = found
        report = validate(
            query,
            ctx.schema if ctx else None,
            prefixes={k: v for k, v in self.kg.prefixes.items() if k},
            schemas_by_endpoint=ctx.schemas if ctx else None,
        )
        text = report.text()
        if report.repaired:
            text += "\n\nrepaired query:\n" + report.query
        return Observation(text, report)
