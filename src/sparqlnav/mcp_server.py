"""The MCP face of sparqlnav: the shared toolkit offered to any MCP client, over stdio or streamable HTTP.

Tool failures reach the client as MCP tool errors (`isError`) carrying the engine's own message, so an
agent on the other side can read what went wrong and fix its call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from sparqlnav import __version__
from sparqlnav.kg import KnowledgeGraph
from sparqlnav.toolkit import Observation, Toolkit
from sparqlnav.trace import Trace

if TYPE_CHECKING:
    from sparqlnav.answer import Strategy
    from sparqlnav.llm import LLMConfig

StrategyFactory = Callable[[str, "LLMConfig | None"], "Strategy"]

INSTRUCTIONS = (
    "Tools to explore an RDF knowledge graph and answer questions with SPARQL. Typical flow: `search` for "
    "the names in the question, `get_entity` to see how an entity is described, `get_property_examples` "
    "to see how a property is used, then `execute_sparql` small queries and grow the final one. "
    "`find_examples` and `get_class_shapes` (when offered) show example queries and the schema; "
    "`validate_sparql` (when offered) checks a query before running it."
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
        """The KG, whatever name is asked for that matches (or none)."""
        if name not in (None, "", self.kg.name):
            raise KeyError(f"unknown KG {name!r}: this server has {self.kg.name!r}")
        return self.kg


@dataclass
class McpTools:
    """Which tools a server offers, and which optional ones were left out (with why)."""

    offered: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)


class SchemaCache:
    """Each KG's schema, computed once on first use: full statistics for local graphs, the endpoint's VoID
    (else a sample) for remote ones, none for Wikidata (too large to describe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schemas: dict[str, Any] = {}

    def get(self, kg: KnowledgeGraph) -> Any:
        """The schema of `kg`, or None when it cannot be had."""
        key = f"{kg.name}|{kg.description}"
        with self._lock:
            if key not in self._schemas:
                self._schemas[key] = self._compute(kg)
            return self._schemas[key]

    @staticmethod
    def _compute(kg: KnowledgeGraph) -> Any:
        # TODO(lead): the CLI's `validate` computes and caches schemas too; share one cache beside the KG layer.
        from sparqlnav.graph import rows_as_dicts
        from sparqlnav.schema import compute_schema, read_void
        from sparqlnav.store import LocalGraph

        if kg.vocab.wikibase is not None and kg.name == "wikidata":
            return None
        prefixes = {k: v for k, v in kg.prefixes.items() if k}

        class Runner:
            def select(self, sparql: str) -> list[dict[str, str]]:
                result = kg.endpoint.query(sparql)
                if not result.ok:
                    raise ToolError(f"cannot compute the schema of {kg.name}: {result.describe()}")
                return rows_as_dicts(result)

        remote = not isinstance(kg.endpoint, LocalGraph)
        schema = read_void(Runner(), endpoint=kg.endpoint.url) if remote else None
        if schema is None or not schema.classes:
            schema = compute_schema(
                Runner(),
                mode="sampled" if remote else "full",
                type_predicate=kg.vocab.types[0],
                prefixes=prefixes,
                endpoint=kg.endpoint.url if remote else None,
            )
        return schema


def _optional(module: str, attr: str) -> tuple[Callable[..., Any] | None, str]:
    """A function from a module that may not exist yet in this build (imported lazily)."""
    try:
        mod = import_module(module)
    except ImportError as exc:
        return None, f"{module} is not available ({exc})"
    fn = getattr(mod, attr, None)
    if fn is None or not callable(fn):
        return None, f"{module} has no {attr}()"
    return fn, ""


def _text(value: Any) -> str:
    """Render a structured value from another module as text for an MCP client."""
    if isinstance(value, str):
        return value
    for method in ("to_text", "render", "to_markdown"):
        fn = getattr(value, method, None)
        if callable(fn):
            try:
                return str(fn())
            except TypeError:  # needs arguments we do not have: fall through to JSON
                continue
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return "\n\n".join(_text(v) for v in value) or "(nothing found)"
    to_json = getattr(value, "to_json", None)
    data = to_json() if callable(to_json) else value
    return json.dumps(data, ensure_ascii=False, indent=1, default=str)


def _text_tool(
    fn: Callable[..., Any], kg_of: Callable[[str | None], KnowledgeGraph]
) -> Callable[..., str]:
    """A tool `(text, kg)` over a library function `fn(kg, text)` whose result is rendered as text."""

    def tool(text: str, kg: str | None = None) -> str:
        return _text(fn(kg_of(kg), text))

    return tool


def _observed(obs: Observation) -> str:
    """The observation's text, or a tool error carrying it."""
    if not obs.ok:
        raise ToolError(obs.text)
    return obs.text


def create_mcp_server(
    source: KGSource,
    *,
    llm: LLMConfig | None = None,
    strategy_factory: StrategyFactory | None = None,
    default_strategy: str = "auto",
    log_level: str = "WARNING",
) -> tuple[MCPServer, McpTools]:
    """An MCP server offering the toolkit over `source`; `ask` is offered only when an LLM is configured."""
    server: MCPServer = MCPServer(
        "sparqlnav", instructions=INSTRUCTIONS, version=__version__, log_level=log_level  # type: ignore[arg-type]
    )
    tools = McpTools()
    several = len(source.names()) > 1
    kg_doc = (
        f" `kg` picks the knowledge graph ({', '.join(source.names())}; default {source.names()[0]})."
        if several
        else ""
    )

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
        return _observed(toolkit(kg).get_entity(id))

    def get_property_examples(id: str, kg: str | None = None) -> str:
        return _observed(toolkit(kg).get_property_examples(id))

    def execute_sparql(query: str, kg: str | None = None) -> str:
        return _observed(toolkit(kg).execute_sparql(query))

    add(search, "search", "Find entities, classes and properties whose label, alias or description matches a name (typos tolerated).")
    add(get_entity, "get_entity", "Show an entity's outgoing edges (with statement qualifiers where the KG has them). `id`: IRI, prefixed name or Q/P id.")
    add(get_property_examples, "get_property_examples", "Show a few real subject–object pairs that use a property. `id`: IRI, prefixed name or P id.")
    add(execute_sparql, "execute_sparql", "Run a read-only SPARQL query under a time limit; returns a compact table, or the engine's error message.")

    validate, why = _optional("sparqlnav.check", "validate")
    if validate is not None:
        check = validate
        schemas = SchemaCache()

        def validate_sparql(query: str, kg: str | None = None) -> str:
            graph = kg_of(kg)
            report = check(query, schemas.get(graph), prefixes={k: v for k, v in graph.prefixes.items() if k})
            text = report.text()
            if report.repaired:
                text += "\n\nrepaired query:\n" + report.query
            return str(text)

        add(validate_sparql, "validate_sparql", "Check a SPARQL query without running it: syntax, prefixes (missing ones repaired), read-only, classes and predicates against the KG's schema; lists issues with hints.")
    else:
        tools.missing["validate_sparql"] = why

    for name, module, attr, doc in (
        ("find_examples", "sparqlnav.examples", "find_examples", "Example question–query pairs similar to a question."),
        ("get_class_shapes", "sparqlnav.schema", "get_class_shapes", "The shapes (properties and their ranges) of classes of the KG."),
    ):
        fn, why = _optional(module, attr)
        if fn is None:
            tools.missing[name] = why
        else:
            add(_text_tool(fn, kg_of), name, doc)

    if llm is not None:
        from sparqlnav.strategies import StrategyUnavailable, make_strategy

        factory = strategy_factory or make_strategy
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

        add(ask, "ask", "Answer a question in plain language: the agent explores the KG, writes and runs SPARQL, and explains the result.")
    else:
        tools.missing["ask"] = "no LLM configured"
    return server, tools


def run_stdio(kg: KnowledgeGraph, *, llm: LLMConfig | None = None) -> None:
    """Serve the tools over one KG on stdin/stdout until the client hangs up."""
    server, _ = create_mcp_server(SingleKG(kg), llm=llm)
    server.run("stdio")
