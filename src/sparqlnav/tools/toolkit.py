"""The tools every strategy, the MCP server and the HTTP API share: typed functions over one KG whose
SPARQL runs are all recorded in the trace, and whose text observations are written for an LLM to read."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from sparqlnav.graph.endpoint import Endpoint, EndpointWrapper, QueryResult
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm.client import ToolSpec
from sparqlnav.tools.lookup import (
    DEFAULT_ENTITIES,
    DEFAULT_PROPERTIES,
    EntityPage,
    LookupFailed,
    PropertyExamples,
    SearchResult,
    entity,
    property_examples,
    resolve,
    resolve_name,
    search,
)
from sparqlnav.trace import Trace


class TracedEndpoint(EndpointWrapper):
    """An endpoint that records every query it runs as a `sparql` event."""

    def __init__(self, inner: Endpoint, trace: Trace) -> None:
        super().__init__(inner)
        self.trace = trace

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Run and record."""
        result = self.inner.query(sparql, timeout_s=timeout_s)
        rows = len(result.table) if result.table is not None and not result.table.is_boolean else None
        self.trace.emit(
            "sparql",
            query=sparql,
            endpoint=result.endpoint,
            outcome=result.outcome.value,
            seconds=round(result.seconds, 4),
            rows=rows,
            message=result.message,
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
    """search, get_entity, get_property_examples and execute_sparql over one KG, traced."""

    def __init__(self, kg: KnowledgeGraph, trace: Trace, *, entities: int = DEFAULT_ENTITIES, properties: int = DEFAULT_PROPERTIES) -> None:
        self.trace = trace
        self.kg = dataclasses.replace(kg, endpoint=TracedEndpoint(kg.endpoint, trace))
        self.entities = entities
        self.properties = properties

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
        """The outgoing edges of an entity (with qualifiers); `prune` may drop edges irrelevant to the task."""
        try:
            page: EntityPage = entity(self.kg, resolve(self.kg, ident))
        except LookupFailed as exc:
            return Observation(str(exc), None, ok=False)
        except NAME_SERVICE_ERRORS as exc:
            return Observation(f"get_entity failed: {_one_line(exc)}", None, ok=False)
        if prune is None:
            return Observation(page.to_text(self.kg), page)
        kept = prune(page)
        text = kept.to_text(self.kg)
        left_out = len(page.edges) - len(kept.edges)
        if left_out > 0:
            text += f"\n  ({left_out} of {len(page.edges)} properties left out as irrelevant to the question)"
        return Observation(text, kept)

    def get_entity_by_name(self, ident: str) -> Observation:
        """Like `get_entity`, but a name is looked up first (as the CLI `entity` does) and the chosen IRI stated."""
        try:
            iri, hit = resolve_name(self.kg, ident)
        except LookupFailed as exc:
            as_id = self.get_entity(ident)  # why it is no identifier either (e.g. an unknown prefix)
            return Observation(f"{as_id.text}; {exc}", None, ok=False)
        except NAME_SERVICE_ERRORS as exc:
            return Observation(f"get_entity failed: {_one_line(exc)}", None, ok=False)
        found = self.get_entity(iri)
        if hit is None or not found.ok:
            return found
        chosen = f"{ident!r} resolved to {self.kg.prefixes.compact(iri)} ({hit.label}) by name search\n"
        return dataclasses.replace(found, text=chosen + found.text)

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
        """Run a query; the text shows a compact table or the engine's message."""
        result = self.kg.endpoint.query(query)
        if not result.ok or result.table is None:
            return Observation(f"The query failed — {result.describe()}", result, ok=False)
        shown = result.table.rows[:10] + result.table.rows[-10:]  # what the markdown rendering shows
        iris = [t.value for row in shown for t in row.values() if t.kind == "uri"]
        try:
            labels = self.kg.names.labels_of(iris)
        except NAME_SERVICE_ERRORS:
            labels = {}  # labels are a courtesy: the rows stand without them
        return Observation(result.table.to_markdown(self.kg.prefixes, labels), result)


# The tools of the explore strategy (and of MCP), as the LLM sees them. Argument names are part of
# the contract in DESIGN.md: search(query), get_entity(id), get_property_examples(id),
# execute_sparql(query), stop().
EXPLORE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="search",
        description=(
            "Find entities, classes and properties whose label, alias or description matches a text. "
            "Returns up to 8 entities and 4 properties with their identifiers."
        ),
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "words to look for, e.g. a name"}},
            "required": ["query"],
        },
    ),
    ToolSpec(
        name="get_entity",
        description=(
            "Show the outgoing edges of one entity: each property with its values (and statement "
            "qualifiers where the graph has them). Large entities are cut to what matters for the question."
        ),
        parameters={
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "a prefixed name or <IRI> an observation showed"}
            },
            "required": ["id"],
        },
    ),
    ToolSpec(
        name="get_property_examples",
        description="Show a few subject-object pairs that use a property, to see how it is used and in which direction.",
        parameters={
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "the property, as a prefixed name or <IRI>"}
            },
            "required": ["id"],
        },
    ),
    ToolSpec(
        name="execute_sparql",
        description=(
            "Run a read-only SPARQL query on the graph. Shows the rows (the first and last ones when "
            "there are many), the boolean of an ASK, or the engine's error message."
        ),
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "the SPARQL query"}},
            "required": ["query"],
        },
    ),
    ToolSpec(
        name="stop",
        description="Finish: the last query you ran becomes the final answer. Call it only after that query returned the answer.",
        parameters={"type": "object", "properties": {}},
    ),
)
