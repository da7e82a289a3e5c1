"""What the HTTP face's routes share: the server's configuration, its knowledge graphs, the bounded worker
threads runs happen in, and the `Service` that ties them to the strategies and the tools."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import HTTPException
from fastapi.responses import Response

from sparqlnav.answer import Answer, Strategy, run_question
from sparqlnav.context import RunContext, Turn
from sparqlnav.conversation import Conversation, ConversationStore
from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.kg import KGError, KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.results import ResultTable
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.settings import Settings
from sparqlnav.tools.registry import TOOLKIT_TOOLS, Registry
from sparqlnav.trace import Event, Trace

if TYPE_CHECKING:
    from sparqlnav.faces.mcp import McpTools
    from sparqlnav.llm.client import LLMConfig

log = logging.getLogger("sparqlnav.faces.http")  # one logger for the whole HTTP face

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_RATE_LIMIT = 120.0  # requests per minute per client when serving beyond this machine
StrategyFactory = Callable[[str, "LLMConfig | None"], Strategy]
T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z][\w.-]*$")


# -- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServeConfig:
    """What the server offers and how it protects itself."""

    kgs: Mapping[str, str] = field(default_factory=dict)  # name -> --kg spec; first = default; none: demo
    host: str = "127.0.0.1"
    strategy: str = "auto"
    text2sparql_strategy: str | None = None  # None: `strategy`
    datasets: Mapping[str, str] = field(default_factory=dict)  # TEXT2SPARQL dataset id -> KG name
    token: str | None = None  # bearer token for /api, /mcp, /text2sparql (None: open)
    rate_limit: float | None = None  # requests per minute per client (None: unlimited)
    cors_origins: tuple[str, ...] = ()
    request_timeout_s: float = 300.0
    max_concurrent: int = 64
    max_question_chars: int = 2000
    max_query_chars: int = 100_000
    mcp: bool = True
    eager: bool = True  # open every KG at start-up rather than on first use

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ServeConfig:
        """The server's part of the settings; keyword overrides (command-line options) win unless None; the
        rate limit is on by default off-host."""
        serve = settings.serve
        values: dict[str, Any] = {
            "host": serve.host,
            "strategy": serve.strategy,
            "text2sparql_strategy": serve.text2sparql_strategy,
            "token": serve.token.get_secret_value() if serve.token else None,
            "cors_origins": serve.cors_origins,
            "request_timeout_s": serve.request_timeout_s,
            "max_concurrent": serve.max_concurrent,
        }
        if serve.kgs:
            values["kgs"] = parse_kgs(serve.kgs)
        if serve.datasets:
            values["datasets"] = parse_pairs(serve.datasets)
        if serve.rate_limit is not None:
            values["rate_limit"] = serve.rate_limit
        values.update({k: v for k, v in overrides.items() if v is not None})
        if "rate_limit" not in values:
            values["rate_limit"] = None if values["host"] in LOOPBACK else DEFAULT_RATE_LIMIT
        elif values["rate_limit"] is not None and values["rate_limit"] <= 0:
            values["rate_limit"] = None
        return cls(**values)


def kg_name(spec: str) -> str:
    """The name `open_kg` gives a --kg value (demo, wikidata, the endpoint URL, the file or folder name), so
    the names clients pick match the names in messages and index folders."""
    spec = spec.strip()
    if spec in ("", "demo", "wikidata"):
        return spec or "demo"
    if spec.startswith(("http://", "https://")):
        return spec
    return Path(spec).expanduser().name or spec


def parse_kgs(values: Iterable[str]) -> dict[str, str]:
    """`--kg` values, each `spec` or `name=spec`, as an ordered name -> spec map (names made unique)."""
    out: dict[str, str] = {}
    for raw in values:
        name, sep, spec = raw.partition("=")
        if not (sep and _NAME.match(name) and spec):
            name, spec = kg_name(raw), raw
        base, n = name, 2
        while name in out:
            name, n = f"{base}-{n}", n + 1
        out[name] = spec
    return out


def parse_pairs(values: Iterable[str]) -> dict[str, str]:
    """`key=value` items (keys may contain '=' only before the last one, e.g. URLs with queries)."""
    out: dict[str, str] = {}
    for raw in values:
        key, sep, value = raw.rpartition("=")
        if not sep or not key or not value:
            raise ValueError(f"expected KEY=VALUE, got {raw!r}")
        out[key] = value
    return out


# -- knowledge graphs -----------------------------------------------------------------------------


class UnknownKG(SparqlnavError, KeyError):
    """A KG name this server does not offer."""

    def __str__(self) -> str:
        return str(self.args[0])


def _described(graph: KnowledgeGraph, paths: bool) -> str:
    """A KG's description; a local store's (which names its files) cut to its size when paths are hidden."""
    if paths or "triples" not in graph.extra:
        return graph.description
    return f"{graph.extra['triples']} triples"


class KGPool:
    """The server's knowledge graphs by name, opened once (eagerly or on first use) and closed at shutdown."""

    def __init__(
        self,
        specs: Mapping[str, str],
        settings: Settings,
        *,
        opened: Mapping[str, KnowledgeGraph] | None = None,
    ) -> None:
        self.settings = settings
        self._specs = dict(specs)
        self._given = dict(opened or {})  # owned by the caller: never closed here
        self._open: dict[str, KnowledgeGraph] = dict(self._given)
        self._locks = {name: threading.Lock() for name in [*self._given, *self._specs]}
        if not self._locks:
            raise ValueError("a server needs at least one knowledge graph")

    def names(self) -> list[str]:
        """Names on offer; the first is the default."""
        return list(self._locks)

    @property
    def default(self) -> str:
        """The default KG's name."""
        return self.names()[0]

    def resolve(self, name: str | None) -> str:
        """A valid name for `name` (None or empty: the default); raises UnknownKG."""
        if not name:
            return self.default
        if name not in self._locks:
            raise UnknownKG(f"unknown KG {name!r}: this server offers {', '.join(self.names())}")
        return name

    def get(self, name: str | None = None) -> KnowledgeGraph:
        """The open KG called `name`, opening it on first use."""
        name = self.resolve(name)
        graph = self._open.get(name)
        if graph is not None:
            return graph
        with self._locks[name]:
            graph = self._open.get(name)
            if graph is None:
                graph = open_kg(self._specs[name], self.settings)
                self._open[name] = graph
                log.info("kg opened", extra={"fields": {"kg": name, "description": graph.description}})
        return graph

    def describe(self, *, paths: bool = True) -> list[dict[str, Any]]:
        """Name and description of each KG (description once opened); without `paths`, local graphs are
        described without the files they came from (the server's file system is nobody else's business)."""
        return [
            {"name": n, "description": _described(g, paths) if (g := self._open.get(n)) else ""}
            for n in self.names()
        ]

    def close(self) -> None:
        """Close the KGs this pool opened."""
        for name, graph in list(self._open.items()):
            if name not in self._given:
                graph.close()
                del self._open[name]


# -- runs in worker threads --------------------------------------------------------------------------


class Saturated(SparqlnavError):
    """Every worker slot is busy."""


class RunCancelled(BaseException):
    """Raised inside a run (at its next trace event) to stop it; a BaseException so strategies' `except
    Exception` handlers do not swallow it."""


@dataclass
class Job:
    """A run in a worker thread: its live trace, its future, and a flag that stops it at the next step."""

    trace: Trace
    future: concurrent.futures.Future[Answer]
    stop: threading.Event

    def cancel(self) -> None:
        """Ask the run to stop at its next step (a blocking LLM or SPARQL call finishes first)."""
        self.stop.set()


class Workers:
    """A bounded pool of worker threads: a call beyond the bound is refused at once (Saturated), not queued."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=size, thread_name_prefix="sparqlnav-run")
        self._lock = threading.Lock()
        self.active = 0

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `fn` in a worker; raise Saturated when all are busy."""
        with self._lock:
            if self.active >= self.size:
                raise Saturated(f"the server is busy ({self.size} runs in progress); try again shortly")
            self.active += 1
        try:
            future = self._pool.submit(fn)
        except RuntimeError:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        return future

    def _release(self, _: object) -> None:
        with self._lock:
            self.active -= 1

    def close(self) -> None:
        """Stop taking work; running calls finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def display(kg: KnowledgeGraph, table: ResultTable | None, *, rows: int = 1000) -> dict[str, dict[str, str]]:
    """Labels and prefixed forms of the IRIs in (the first rows of) a result, for people."""
    iris: dict[str, None] = {}
    if table is not None:
        for row in table.rows[:rows]:
            for term in row.values():
                if term.kind == "uri":
                    iris[term.value] = None
                elif term.datatype:
                    iris[term.datatype] = None
    return {
        "labels": kg.names.labels_of(list(iris)),
        "compact": {iri: kg.prefixes.compact(iri) for iri in iris},
    }


def json_response(data: Any, status: int = 200) -> Response:
    """JSON that tolerates values the standard encoder does not know (shown as strings)."""
    body = json.dumps(data, ensure_ascii=False, default=str)
    return Response(body, status_code=status, media_type="application/json")


def one_line(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:500]


@dataclass
class Service:
    """What the routes share: the KGs, the LLM, the strategies and the workers."""

    config: ServeConfig
    settings: Settings
    pool: KGPool
    llm: LLMConfig | None
    factory: StrategyFactory
    workers: Workers
    indexes: KGIndexes  # the KGs' retrieval indexes, shared by the tool routes and MCP
    tools: Registry = TOOLKIT_TOOLS  # what the tool routes and MCP offer
    mcp_tools: McpTools | None = None
    conversations: ConversationStore = field(default_factory=ConversationStore)  # shared with MCP

    strategies: dict[str, Strategy] = field(default_factory=dict)
    _strategy_lock: threading.Lock = field(default_factory=threading.Lock)

    def shared_strategy(self, name: str, llm: LLMConfig | None) -> Strategy:
        """One instance per strategy name, shared by all runs: strategies keep their LLM connections, which
        cost tens of milliseconds each to set up. Raises StrategyUnavailable."""
        with self._strategy_lock:
            strategy = self.strategies.get(name)
            if strategy is None:
                strategy = self.strategies[name] = self.factory(name, llm)
            return strategy

    def strategy(self, name: str | None) -> tuple[str, Strategy]:
        """The strategy called `name` (None: the server's default); HTTP 400 with the reason when it cannot run."""
        from sparqlnav.strategies import StrategyUnavailable

        chosen = (name or self.config.strategy).strip()
        try:
            return chosen, self.shared_strategy(chosen, self.llm)
        except StrategyUnavailable as exc:
            raise HTTPException(400, str(exc)) from None

    def close(self) -> None:
        """Close the strategies that hold connections, and the retrieval indexes."""
        if self.mcp_tools is not None:
            self.mcp_tools.close()
        self.indexes.close()
        with self._strategy_lock:
            for strategy in self.strategies.values():
                close = getattr(strategy, "close", None)
                if callable(close):
                    close()
            self.strategies.clear()

    def kg(self, name: str | None) -> str:
        """A KG name this server offers; HTTP 400 otherwise."""
        try:
            return self.pool.resolve(name)
        except UnknownKG as exc:
            raise HTTPException(400, str(exc)) from None

    def check_question(self, question: str) -> str:
        """The question, stripped; HTTP 422 when empty or over-long."""
        text = question.strip()
        if not text:
            raise HTTPException(422, "question is empty")
        if len(text) > self.config.max_question_chars:
            raise HTTPException(
                422,
                f"question is too long ({len(text)} characters; the limit is {self.config.max_question_chars})",
            )
        return text

    def start(
        self,
        question: str,
        kg_name: str,
        strategy: Strategy,
        listeners: Iterable[Callable[[Event], None]] = (),
        conversation: Conversation | None = None,
        context: RunContext | None = None,
    ) -> Job:
        """Start a run in a worker (a follow-up in `conversation`, with `context` before the question, adds its
        turn there); HTTP 503 when all workers are busy."""
        trace = Trace()
        stop = threading.Event()
        for listener in listeners:
            trace.subscribe(listener)

        def stop_if_asked(_: Event) -> None:
            if stop.is_set():
                raise RunCancelled()

        trace.subscribe(stop_if_asked)

        def work() -> Answer:
            graph = self.pool.get(kg_name)
            answer = run_question(strategy, question, graph, trace, context)
            if conversation is not None:
                number = self.conversations.add_turn(conversation, Turn.of(answer, graph))
                answer.extra["conversation"] = {"id": conversation.id, "turn": number}
            answer.extra.setdefault("kg", kg_name)
            answer.extra["display"] = display(graph, answer.results)
            u = trace.usage
            log.info(
                "ask",
                extra={
                    "fields": {
                        "kg": kg_name,
                        "strategy": answer.strategy,
                        "status": answer.status,
                        "seconds": u.seconds,
                        "llm_calls": u.llm_calls,
                        "sparql_queries": u.sparql_queries,
                        "input_tokens": u.input_tokens,
                        "output_tokens": u.output_tokens,
                    }
                },
            )
            return answer

        try:
            future = self.workers.submit(work)
        except Saturated as exc:
            raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
        return Job(trace, future, stop)

    async def call(self, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """Run blocking work in a worker under the request time limit (HTTP 503 when busy, 504 when late)."""
        try:
            future = self.workers.submit(fn)
        except Saturated as exc:
            raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
        limit = timeout_s or self.config.request_timeout_s
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), limit)
        except TimeoutError:
            raise HTTPException(504, f"no answer within the time limit of {limit:g} s") from None

    async def finish(self, job: Job) -> Answer:
        """Wait for a run under the request time limit; errors become HTTP errors with one-line messages."""
        limit = self.config.request_timeout_s
        try:
            return await asyncio.wait_for(asyncio.wrap_future(job.future), limit)
        except TimeoutError:
            job.cancel()
            raise HTTPException(504, f"no answer within the time limit of {limit:g} s") from None
        except asyncio.CancelledError:
            job.cancel()
            raise
        except KGError as exc:
            raise HTTPException(503, one_line(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the HTTP boundary: any failure of a run becomes a 5xx
            raise run_failure(exc) from None


def run_failure(exc: BaseException) -> HTTPException:
    """An HTTP error for a run that raised: upstream LLM trouble is 502, anything else 500."""
    from sparqlnav.llm.client import LLMError

    if isinstance(exc, LLMError):
        return HTTPException(502, f"the LLM failed: {one_line(exc)}")
    log.error("run failed", exc_info=exc)
    return HTTPException(500, f"the run failed: {one_line(exc)}")
