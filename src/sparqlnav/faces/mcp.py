"""The MCP face of sparqlnav: the shared toolkit offered to any MCP client, over stdio or streamable HTTP.

The tools, their descriptions and arguments come from the tool registry (`tools.registry`), as explore's and
the HTTP API's do; each takes one more argument, `kg`. Tool failures reach the client as MCP tool errors
(`isError`) carrying the engine's own message, so an agent on the other side can read what went wrong and fix
its call.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from sparqlnav.cancel import check as check_cancelled
from sparqlnav.context import Turn
from sparqlnav.conversation import ConversationError, Conversations, ConversationStore
from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.limits import InputLimits, InputRefused, shown
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import shown_labels
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.tools.registry import TOOLKIT_TOOLS, Registry, Tool
from sparqlnav.tools.toolkit import Observation, Toolkit
from sparqlnav.trace import Trace
from sparqlnav.version import __version__

if TYPE_CHECKING:
    from sparqlnav.answer import Strategy
    from sparqlnav.llm import LLMConfig
    from sparqlnav.settings import Settings

StrategyFactory = Callable[[str, "LLMConfig | None"], "Strategy"]
# Runs a tool's blocking work: in the HTTP server, its bounded workers under its time limit (`Service.run`).
Runner = Callable[[Callable[[], str]], Awaitable[str]]

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
            raise KeyError(f"unknown KG {shown(name)}: this server has {self.kg.name!r}")
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


def _observed(obs: Observation) -> str:
    """The observation's text, or a tool error carrying it."""
    if not obs.ok:
        raise ToolError(obs.text)
    return obs.text


async def _ran(runner: Runner, work: Callable[[], str]) -> str:
    """`work` run by `runner`; the runner's refusals (busy, too late) reach the client as tool errors."""
    try:
        return await runner(work)
    except SparqlnavError as exc:
        raise ToolError(str(exc)) from None


def _bound(
    declared: Tool,
    toolkit: Callable[[str | None], Toolkit],
    kg: inspect.Parameter,
    runner: Runner,
    limits: InputLimits,
) -> Callable[..., Awaitable[str]]:
    """The tool as a function of its own arguments plus `kg`, with that signature (the SDK derives the schema);
    arguments over the faces' input limits are refused before any work starts."""

    async def call(**arguments: Any) -> str:
        graph = arguments.pop("kg", None)
        given = {k: v for k, v in arguments.items() if v is not None}
        try:
            limits.arguments(declared, given)
        except InputRefused as exc:
            raise ToolError(str(exc)) from None
        return await _ran(runner, lambda: _observed(declared(toolkit(graph), given)))

    call.__name__ = declared.name
    call.__signature__ = declared.signature(kg)  # type: ignore[attr-defined]
    return call


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
    settings: Settings,
    indexes: KGIndexes | None = None,
    registry: Registry = TOOLKIT_TOOLS,
    llm: LLMConfig | None = None,
    strategy_factory: StrategyFactory | None = None,
    default_strategy: str = "auto",
    log_level: str = "WARNING",
    runner: Runner | None = None,
    conversations: Conversations | None = None,
    owner_of_request: Callable[[Any], str | None] | None = None,
    limits: InputLimits | None = None,
) -> tuple[MCPServer, McpTools]:
    """An MCP server offering the tools of `registry` over `source` (retrieval indexes from `indexes`, else
    opened under the settings' home); `ask` is offered only when an LLM is configured. Every call's work is
    done by `runner` (default: a thread of the SDK's own pool); `ask` keeps its conversations in
    `conversations` (else a store of its own, as the settings describe), owned by whom `owner_of_request` says
    sent the HTTP request (the HTTP face's rule, so one client's conversation continues on either face).
    Arguments are held to `limits` (default: the server's defaults), as the HTTP API's are."""
    bounds = limits or InputLimits()
    run_in: Runner = runner or anyio.to_thread.run_sync
    server: MCPServer = MCPServer(
        "sparqlnav", instructions=INSTRUCTIONS, version=__version__, log_level=log_level  # type: ignore[arg-type]
    )
    tools = McpTools()
    names = source.names()
    kg_doc = f"the knowledge graph: {', '.join(names)} (default {names[0]})"

    if indexes is None:
        indexes = KGIndexes(settings.paths.home, embedding=settings.embedding)
        tools.closers.append(indexes.close)

    def kg_of(name: str | None) -> KnowledgeGraph:
        try:
            return source.get(name)
        except KeyError as exc:
            raise ToolError(str(exc.args[0] if exc.args else exc)) from None

    def toolkit(name: str | None) -> Toolkit:
        return Toolkit(kg_of(name), Trace(), indexes=indexes)

    def add(fn: Callable[..., Any], name: str, description: str) -> None:
        server.add_tool(fn, name=name, description=description, structured_output=False)
        tools.offered.append(name)

    kg_param = inspect.Parameter(
        "kg", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[str | None, Field(description=kg_doc)], default=None
    )
    for declared in registry:
        add(_bound(declared, toolkit, kg_param, run_in, bounds), declared.name, declared.description)

    if llm is not None:
        from sparqlnav.answer import run_question
        from sparqlnav.strategies import StrategyUnavailable, make_strategy

        factory = strategy_factory or _cached(functools.partial(make_strategy, settings=settings))
        llm_config = llm
        store = conversations if conversations is not None else ConversationStore.from_settings(settings)

        async def ask(
            question: str,
            strategy: str = default_strategy,
            kg: str | None = None,
            conversation: Annotated[
                str | None,
                Field(description="The id of the conversation this question follows up (from an earlier answer); "
                      "absent: a new one is started."),
            ] = None,
            ctx: Context | None = None,
        ) -> str:
            try:
                text = bounds.question(question)
                bounds.text(strategy, "strategy", 100)
                if conversation is not None:
                    bounds.text(conversation, "conversation", 100)
            except InputRefused as exc:
                raise ToolError(str(exc)) from None
            request = ctx.request_context.request if ctx is not None else None  # None over stdio
            owner = owner_of_request(request) if owner_of_request is not None and request is not None else None
            return await _ran(run_in, lambda: answered(text, strategy, kg, conversation, owner))

        def answered(
            question: str, strategy: str, kg: str | None, conversation: str | None, owner: str | None
        ) -> str:
            graph = kg_of(kg)
            try:
                chosen = factory(strategy, llm_config)
            except StrategyUnavailable as exc:
                raise ToolError(str(exc)) from None
            try:
                talk = store.get(conversation, owner) if conversation else store.begin(owner)
            except ConversationError as exc:
                raise ToolError(str(exc)) from None
            trace = Trace()
            trace.subscribe(lambda _: check_cancelled())  # every step of the run is a place to stop
            answer = run_question(chosen, question, graph, trace, talk.context())
            number = store.add_turn(talk, Turn.of(answer, graph))
            note = store.note(talk)
            if answer.status == "error":
                raise ToolError(answer.error or answer.text or "the strategy failed")
            parts = [answer.text]
            if answer.query:  # SPARQL, or SQL from the build strategy's SQL target
                parts.append(f"{answer.query_language}:\n" + answer.query.strip())
            if answer.results is not None:
                table = answer.results
                parts.append(table.to_markdown(graph.prefixes, shown_labels(table, graph.names)))
            parts.append(f"Conversation: {talk.id} (turn {number}; pass it as `conversation` to follow up)")
            if note:
                parts.append(f"Note: {note}.")
            return "\n\n".join(p for p in parts if p)

        add(
            ask,
            "ask",
            "Answer a question in plain language: an agent explores the KG, writes and runs SPARQL, and explains the "
            "result. Pass the `conversation` id of an earlier answer to ask a follow-up that builds on it."
            + (f" `kg` picks {kg_doc}." if len(names) > 1 else ""),
        )
    else:
        tools.missing["ask"] = "no LLM configured"
    return server, tools


def run_stdio(kg: KnowledgeGraph, *, settings: Settings, llm: LLMConfig | None = None) -> None:
    """Serve the tools over one KG on stdin/stdout until the client hangs up."""
    server, tools = create_mcp_server(SingleKG(kg), settings=settings, llm=llm)
    try:
        server.run("stdio")
    finally:
        tools.close()
