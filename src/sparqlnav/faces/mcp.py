"""The MCP face of sparqlnav: the shared toolkit offered to any MCP client, over stdio or streamable HTTP.

Tool failures reach the client as MCP tool errors (`isError`) carrying the engine's own message, so an
agent on the other side can read what went wrong and fix its call. Tools backed by modules this build may
lack (validation, retrieval) are imported lazily and left out, with the reason, when missing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from sparqlnav import __version__
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.tools.toolkit import Observation, Toolkit
from sparqlnav.trace import Trace

if TYPE_CHECKING:
    from sparqlnav.answer import Strategy
    from sparqlnav.llm.client import LLMConfig
    from sparqlnav.retrieval.index import KGIndex

StrategyFactory = Callable[[str, "LLMConfig | None"], "Strategy"]

INSTRUCTIONS = (
    "Tools to explore an RDF knowledge graph and answer questions with SPARQL. Typical flow: `search` for "
    "the names in the question, `get_entity` to see how an entity is described, `get_property_examples` "
    "to see how a property is used, then `execute_sparql` small queries and grow the final one. "
    "`find_examples` shows example queries for similar questions, `get_class_shapes` the properties of "
    "classes, and `validate_sparql` checks a query against the schema before it runs."
)


class KGSource(Protocol):
    """Where tools get their knowledge graph from: one KG, or several by name."""

    def names(self) -> list[str]:
        """Names of the KGs on offer; the first is the default."""
        ...

    def get(self, name: str | None = None) -> KnowledgeGraph:
        """The KG called `name` (None: the default); raises KeyError with a message when unknown."""
        ...


@dataclass
class SingleKG:
    """A KGSource of exactly one open KG (the stdio server)."""

    kg: KnowledgeGraph

    def names(self) -> list[str]:
        """The one name."""
        return [self.kg.name]

    def get(self, name: str | None = None) -> KnowledgeGraph:
        """The KG, when `name` is its name or none."""
        if name not in (None, "", self.kg.name):
            raise KeyError(f"unknown KG {name!r}: this server has {self.kg.name!r}")
        return self.kg


@dataclass
class McpTools:
    """Which tools a server offers, and which optional ones were left out (with why)."""

    offered: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        """Release what the tools opened (retrieval indexes)."""
        for close in self.closers:
            close()


class Retrieval:
    """Each KG's retrieval index (example queries, class shapes, schemas): as `sparqlnav index` built it, else
    built on first use the way the retrieve strategy builds it. Thread-safe; one build per KG."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._lock = threading.Lock()
        self._contexts: dict[tuple[str, str], KGIndex] = {}

    def get(self, kg: KnowledgeGraph) -> KGIndex:
        """The KG's index and schemas; ToolError with the reason when they cannot be had."""
        from sparqlnav.retrieval.embed import EmbedderUnavailable, default_embedder
        from sparqlnav.retrieval.examples import ExamplesError
        from sparqlnav.retrieval.index import (
            IndexUnavailable,
            SchemaUnavailable,
            build_kg_index,
            open_kg_index,
        )

        key = (kg.name, kg.description)
        with self._lock:
            ctx = self._contexts.get(key)
            if ctx is None:
                try:
                    ctx = open_kg_index(kg, self.home, environ=os.environ)
                    if ctx is None:
                        embedder = default_embedder()
                        ctx, _ = build_kg_index(
                            kg, self.home, embedder=embedder, embedder_spec="minilm" if embedder else "none"
                        )
                except (IndexUnavailable, SchemaUnavailable, ExamplesError, EmbedderUnavailable, OSError) as exc:
                    raise ToolError(f"no retrieval index for {kg.name}: {exc}") from None
                self._contexts[key] = ctx
            return ctx

    def close(self) -> None:
        """Close the indexes."""
        with self._lock:
            for ctx in self._contexts.values():
                ctx.close()
            self._contexts.clear()


def _available(*modules: str) -> str:
    """Why a tool cannot be offered ('' when every module it needs imports)."""
    for module in modules:
        try:
            import_module(module)
        except ImportError as exc:
            return f"{module} is not available ({exc})"
    return ""


def _observed(obs: Observation) -> str:
    """The observation's text, or a tool error carrying it."""
    if not obs.ok:
        raise ToolError(obs.text)
    return obs.text


def _cached(factory: StrategyFactory) -> StrategyFactory:
    """One strategy instance per name (strategies keep their LLM connections between questions)."""
    made: dict[str, Strategy] = {}
    lock = threading.Lock()

    def get(name: str, llm: LLMConfig | None) -> Strategy:
        with lock:
            if name not in made:
                made[name] = factory(name, llm)
            return made[name]

    return get


def create_mcp_server(
    source: KGSource,
    *,
    home: Path | None = None,
    llm: LLMConfig | None = None,
    strategy_factory: StrategyFactory | None = None,
    default_strategy: str = "auto",
    log_level: str = "WARNING",
) -> tuple[MCPServer, McpTools]:
    """An MCP server offering the toolkit over `source` (indexes kept under `home`, default the sparqlnav
    home); `ask` is offered only when an LLM is configured."""
    server: MCPServer = MCPServer(
        "sparqlnav", instructions=INSTRUCTIONS, version=__version__, log_level=log_level  # type: ignore[arg-type]
    )
    tools = McpTools()
    names = source.names()
    kg_doc = f" `kg` picks the knowledge graph ({', '.join(names)}; default {names[0]})." if len(names) > 1 else ""

    def kg_of(name: str | None) -> KnowledgeGraph:
        try:
            return source.get(name)
        except KeyError as exc:
            raise ToolError(str(exc.args[0] if exc.args else exc)) from None

    def toolkit(name: str | None) -> Toolkit:
        return Toolkit(kg_of(name), Trace())

    def add(fn: Callable[..., Any], name: str, description: str) -> None:
        server.add_tool(fn, name=name, description=description + kg_doc, structured_output=False)
        tools.offered.append(name)

    def search(query: str, kg: str | None = None) -> str:
        return _observed(toolkit(kg).search(query))

    def get_entity(id: str, kg: str | None = None) -> str:
        return _observed(toolkit(kg).get_entity_by_name(id))

    def get_property_examples(id: str, kg: str | None = None) -> str:
        return _observed(toolkit(kg).get_property_examples(id))

    def execute_sparql(query: str, kg: str | None = None) -> str:
        return _observed(toolkit(kg).execute_sparql(query))

    add(search, "search", "Find entities, classes and properties whose label, alias or description matches a name (typos tolerated).")
    add(get_entity, "get_entity", "Show an entity's outgoing edges (with statement qualifiers where the KG has them). `id`: IRI, prefixed name, Q/P id, or a name to look up.")
    add(get_property_examples, "get_property_examples", "Show a few real subject–object pairs that use a property. `id`: IRI, prefixed name or P id.")
    add(execute_sparql, "execute_sparql", "Run a read-only SPARQL query under a time limit; returns a compact table, or the engine's error message.")

    if home is None:
        from sparqlnav.settings import Settings

        home = Settings.from_env().home
    retrieval = Retrieval(home)
    tools.closers.append(retrieval.close)
    needs_index = _available("sparqlnav.retrieval.index", "sparqlnav.graph.schema", "sparqlnav.retrieval.embed", "sparqlnav.retrieval.examples")

    why = _available("sparqlnav.sparql.check") or needs_index
    if not why:

        def validate_sparql(query: str, kg: str | None = None) -> str:
            from sparqlnav.sparql.check import validate

            graph = kg_of(kg)
            # Wikidata is too large to describe: syntax, prefixes and read-only only.
            ctx = None if graph.name == "wikidata" else retrieval.get(graph)
            report = validate(
                query,
                ctx.schema if ctx else None,
                prefixes={k: v for k, v in graph.prefixes.items() if k},
                schemas_by_endpoint=ctx.schemas if ctx else None,
            )
            text = report.text()
            if report.repaired:
                text += "\n\nrepaired query:\n" + report.query
            return text

        add(validate_sparql, "validate_sparql", "Check a SPARQL query without running it: syntax, prefixes (missing ones repaired), classes and predicates against the KG's schema; lists the issues with hints.")
    else:
        tools.missing["validate_sparql"] = why

    if not needs_index:

        def find_examples(question: str, k: int = 5, kg: str | None = None) -> str:
            from sparqlnav.retrieval.index import search_all

            ctx = retrieval.get(kg_of(kg))
            hits = search_all(ctx.index, [question], k=max(1, min(k, 20)), kinds=["example"])
            if not hits:
                return "No example queries are indexed for this KG (add some with `sparqlnav index --examples`)."
            blocks = []
            for h in hits:
                where = f"# endpoint: {h.doc.endpoint}\n" if h.doc.endpoint else ""
                blocks.append(f"- {h.doc.title or h.doc.text}\n{where}{h.doc.content.strip()}")
            return "\n\n".join(blocks)

        def get_class_shapes(classes: list[str], kg: str | None = None) -> str:
            from sparqlnav.retrieval.index import search_all

            graph = kg_of(kg)
            ctx = retrieval.get(graph)
            out: list[str] = []
            for name in classes[:20]:
                iri = graph.prefixes.expand(name)
                if iri is not None and ctx.schema is not None and iri in ctx.schema.classes:
                    out.append(ctx.schema.shape(iri))
                    continue
                hits = search_all(ctx.index, [name], k=1, kinds=["shape"])  # a word naming a class
                out.append(hits[0].doc.content.strip() if hits else f"# no class matches {name!r}")
            return "\n\n".join(out) or "Name at least one class."

        add(find_examples, "find_examples", "Example question–query pairs whose questions resemble `question` (from the KG's own examples and any added with `sparqlnav index`).")
        add(get_class_shapes, "get_class_shapes", "The shapes of classes (ShEx-like: each property with the classes or datatypes of its values, most used first). `classes`: IRIs, prefixed names or words naming classes.")
    else:
        tools.missing["find_examples"] = tools.missing["get_class_shapes"] = needs_index

    if llm is not None:
        from sparqlnav.strategies import StrategyUnavailable, make_strategy

        factory = strategy_factory or _cached(make_strategy)
        llm_config = llm

        def ask(question: str, strategy: str = default_strategy, kg: str | None = None) -> str:
            graph = kg_of(kg)
            try:
                chosen = factory(strategy, llm_config)
            except StrategyUnavailable as exc:
                raise ToolError(str(exc)) from None
            trace = Trace()
            answer = chosen.run(question, graph, trace)
            trace.finish()
            if answer.status == "error":
                raise ToolError(answer.error or answer.answer or "the strategy failed")
            parts = [answer.answer]
            if answer.sparql:
                parts.append("SPARQL:\n" + answer.sparql.strip())
            if answer.results is not None:
                table = answer.results
                shown = table.rows[:5] + table.rows[-5:]  # what the markdown shows
                labels = graph.names.labels_of([t.value for row in shown for t in row.values() if t.kind == "uri"])
                parts.append(table.to_markdown(graph.prefixes, labels))
            return "\n\n".join(p for p in parts if p)

        add(ask, "ask", "Answer a question in plain language: an agent explores the KG, writes and runs SPARQL, and explains the result.")
    else:
        tools.missing["ask"] = "no LLM configured"
    return server, tools


def run_stdio(kg: KnowledgeGraph, *, home: Path | None = None, llm: LLMConfig | None = None) -> None:
    """Serve the tools over one KG on stdin/stdout until the client hangs up."""
    server, tools = create_mcp_server(SingleKG(kg), home=home, llm=llm)
    try:
        server.run("stdio")
    finally:
        tools.close()
