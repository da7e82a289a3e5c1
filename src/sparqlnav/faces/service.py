"""What the HTTP face's routes share: the server's configuration, its knowledge graphs, the bounded worker
threads runs happen in, and the `Service` that ties them to the strategies and the tools."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
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
from sparqlnav.cancel import CancelSignal, bound
from sparqlnav.context import RunContext, Turn
from sparqlnav.conversation import Conversation, Conversations, ConversationStore
from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.limits import (
    MAX_BODY_BYTES,
    MAX_QUERY_CHARS,
    MAX_QUESTION_CHARS,
    InputLimits,
    InputRefused,
    shown,
)
from sparqlnav.faces.state import LocalSlots, LocalState, Slots, StateStore, StateUnavailable
from sparqlnav.graph.kg import KGError, KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.results import ResultTable
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.settings import Settings
from sparqlnav.tools.registry import TOOLKIT_TOOLS, Registry, Tool
from sparqlnav.tools.starters import StarterQuestions
from sparqlnav.trace import Event, Trace
from sparqlnav.urls import shown_url

if TYPE_CHECKING:
    from sparqlnav.faces.mcp import McpTools
    from sparqlnav.llm import LLMConfig

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
    strategy_options: Mapping[str, Any] = field(default_factory=dict)  # `serve -o KEY=VALUE`: the default strategy's
    text2sparql_strategy: str | None = None  # None: `strategy`
    datasets: Mapping[str, str] = field(default_factory=dict)  # TEXT2SPARQL dataset id -> KG name
    token: str | None = None  # bearer token for /api, /mcp, /text2sparql (None: open)
    rate_limit: float | None = None  # requests per minute per client (None: unlimited)
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()  # Host names answered without a token, besides loopback ones
    trusted_proxies: tuple[str, ...] = ()  # addresses or networks whose X-Forwarded-For is believed
    request_timeout_s: float = 300.0
    max_concurrent: int = 64
    max_question_chars: int = MAX_QUESTION_CHARS
    max_query_chars: int = MAX_QUERY_CHARS
    max_body_bytes: int = MAX_BODY_BYTES  # a request body over this is refused (413) before it is read
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
            "allowed_hosts": serve.allowed_hosts,
            "trusted_proxies": serve.trusted_proxies,
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

    @property
    def limits(self) -> InputLimits:
        """The input limits every face applies (HTTP routes, tool routes, MCP)."""
        return InputLimits(self.max_question_chars, self.max_query_chars)


def kg_name(spec: str) -> str:
    """The name `open_kg` gives a --kg value (demo, wikidata, the endpoint URL, the file or folder name), so
    the names clients pick match the names in messages and index folders."""
    spec = spec.strip()
    if spec in ("", "demo", "wikidata"):
        return spec or "demo"
    if spec.startswith(("http://", "https://")):
        return shown_url(spec)  # a name is shown everywhere: never with a password
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


def strategy_with_options(make: Callable[..., Strategy], settings: Settings, config: ServeConfig) -> StrategyFactory:
    """Strategies by name from `make` (make_strategy); the server's default one gets its `serve -o` options
    (`serve -s build -o target=sql` on a database)."""

    def made(name: str, llm: LLMConfig | None) -> Strategy:
        options = dict(config.strategy_options) if name == config.strategy else {}
        return make(name, llm, settings=settings, **options)

    return made


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


def _allowing_peers(settings: Settings, specs: Iterable[str]) -> Settings:
    """`settings` whose SERVICE allow-list also has the remote KGs this server offers (Wikidata among them),
    so a query over one of its graphs may federate with another of them, and with nothing else."""
    peers = []
    for spec in (s.strip() for s in specs):
        if spec == "wikidata":
            peers.append(settings.wikidata.sparql)
        elif spec.startswith(("http://", "https://")):
            peers.append(spec)
    if not peers:
        return settings
    remote = settings.remote.model_copy(update={"allowed_services": (*settings.remote.allowed_services, *peers)})
    return settings.model_copy(update={"remote": remote})


class KGPool:
    """The server's knowledge graphs by name, opened once (eagerly or on first use) and closed at shutdown."""

    def __init__(
        self,
        specs: Mapping[str, str],
        settings: Settings,
        *,
        opened: Mapping[str, KnowledgeGraph] | None = None,
    ) -> None:
        self.settings = _allowing_peers(settings, specs.values())
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
            raise UnknownKG(f"unknown KG {shown(name)}: this server offers {', '.join(self.names())}")
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

    def is_open(self, name: str) -> bool:
        """Whether the KG called `name` is open."""
        return name in self._open

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


class RunTimedOut(SparqlnavError):
    """A run did not finish within the request time limit (it was cancelled and its slot freed)."""


@dataclass
class Job:
    """A run in a worker thread: its live trace, its future, and the signal that stops it."""

    trace: Trace
    future: concurrent.futures.Future[Answer]
    signal: CancelSignal
    workers: Workers

    def cancel(self) -> None:
        """Stop the run (at its next step or socket read) and free its worker slot now."""
        self.signal.cancel()
        self.workers.abandon(self.future)


class Workers:
    """A bounded pool of worker threads: a call beyond the bound is refused at once (Saturated), not queued.

    `slots` count the runs some request still waits for: in this process, or across every worker of the server
    when the state store is shared (SPARQLNAV_STATE_URL), so `max_concurrent` bounds the server, not each
    process. A request that gives up frees its slot at once (`abandon`) and cancels its run, which stops at its
    next step or socket read; a call that cannot be interrupted (a local index lookup) may keep its thread a
    moment longer. `finishing` counts those; they run on `spare` extra threads so they delay nobody, and only when
    the spare is used up too are calls refused.
    """

    def __init__(self, size: int, spare: int | None = None, *, slots: Slots | None = None) -> None:
        self.size = size
        self.spare = size if spare is None else spare
        self.slots: Slots = slots if slots is not None else LocalSlots(size)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=size + self.spare, thread_name_prefix="sparqlnav-run"
        )
        self._lock = threading.Lock()
        self._held: dict[concurrent.futures.Future[Any], str] = {}  # this process's runs -> their slot tickets
        self._finishing: set[concurrent.futures.Future[Any]] = set()

    @property
    def active(self) -> int:
        """Runs a request is waiting for (the slots in use: the whole server's when they are shared)."""
        return self.slots.in_use()

    @property
    def local_active(self) -> int:
        """Runs a request is waiting for in this process."""
        return len(self._held)

    @property
    def finishing(self) -> int:
        """Runs given up on whose threads have not returned yet."""
        return len(self._finishing)

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `fn` in a worker; raise Saturated when all slots are busy."""
        with self._lock:
            if len(self._held) + len(self._finishing) >= self.size + self.spare:
                raise Saturated(f"the server is busy ({len(self._finishing)} cancelled runs still finishing); try again shortly")
            ticket = self.slots.acquire()
            if ticket is None:
                raise Saturated(f"the server is busy ({self.slots.size} runs in progress); try again shortly")
            try:
                future = self._pool.submit(fn)
            except BaseException:
                self.slots.release(ticket)
                raise
            self._held[future] = ticket
        future.add_done_callback(self._release)
        return future

    def abandon(self, future: concurrent.futures.Future[Any]) -> None:
        """The request gave up on this run: its slot is free from now on, whenever its thread returns."""
        with self._lock:
            ticket = self._held.pop(future, None) if not future.done() else None
            if ticket is not None:
                self._finishing.add(future)
        if ticket is not None:
            with contextlib.suppress(StateUnavailable):  # the store takes the ticket back after its hold time
                self.slots.release(ticket)

    def _release(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            ticket = self._held.pop(future, None)
            self._finishing.discard(future)
        if ticket is not None:
            with contextlib.suppress(StateUnavailable):  # the store takes the ticket back after its hold time
                self.slots.release(ticket)

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
    conversations: Conversations = field(default_factory=ConversationStore)  # shared with MCP
    starters: StarterQuestions | None = None  # example questions per KG (None: made from `indexes` on first use)
    state: StateStore = field(default_factory=LocalState)  # where conversations, counters and slots live

    strategies: dict[str, Strategy] = field(default_factory=dict)
    streams: set[asyncio.Queue[tuple[str, Any]]] = field(default_factory=set)  # open /api/ask/stream responses
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
        from sparqlnav.strategies import StrategyUnavailable, available

        chosen = (name or self.config.strategy).strip()
        if len(chosen) > 100:  # no strategy has such a name, and its message would repeat all of it
            raise HTTPException(400, f"unknown strategy {shown(chosen)} (choose from {', '.join(available())})")
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

    def end_streams(self) -> None:
        """This worker is stopping: each open stream stops its run and ends with an error event (on the event
        loop), so its client asks again, on another worker, rather than wait for a cut connection."""
        for queue in list(self.streams):
            queue.put_nowait(("stopping", None))

    def starter_questions(self) -> StarterQuestions:
        """The example questions of each KG, found once per server."""
        if self.starters is None:
            self.starters = StarterQuestions(self.indexes)
        return self.starters

    def kg(self, name: str | None) -> str:
        """A KG name this server offers; HTTP 400 otherwise."""
        try:
            return self.pool.resolve(name)
        except UnknownKG as exc:
            raise HTTPException(400, str(exc)) from None

    @property
    def limits(self) -> InputLimits:
        """The input limits (the same MCP's tools apply)."""
        return self.config.limits

    def check_question(self, question: str) -> str:
        """The question, stripped; HTTP 422 when empty, over-long or not text."""
        try:
            return self.limits.question(question)
        except InputRefused as exc:
            raise HTTPException(422, str(exc)) from None

    def check_query(self, query: str, what: str = "query", *, text: bool = True) -> str:
        """A SPARQL query as given; HTTP 422 when over-long or (with `text`) not text."""
        try:
            if not text:
                return self.limits.size(query, what, self.limits.max_query_chars)
            return self.limits.query(query, what)
        except InputRefused as exc:
            raise HTTPException(422, str(exc)) from None

    def check_arguments(self, declared: Tool, arguments: dict[str, Any]) -> None:
        """A tool's arguments from a client, within the limits; HTTP 422 otherwise."""
        try:
            self.limits.arguments(declared, arguments)
        except InputRefused as exc:
            raise HTTPException(422, str(exc)) from None

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
        signal = CancelSignal()
        for listener in listeners:
            trace.subscribe(listener)
        trace.subscribe(lambda _: signal.check())  # every step of the run is a place to stop

        def work() -> Answer:
            graph = self.pool.get(kg_name)
            with bound(signal):
                answer = run_question(strategy, question, graph, trace, context)
            if conversation is not None:
                number = self.conversations.add_turn(conversation, Turn.of(answer, graph))
                answer.extra["conversation"] = {"id": conversation.id, "turn": number}
                note = self.conversations.note(conversation)
                if note:  # its oldest turns were dropped: the client is told with the answer
                    answer.extra["conversation"]["note"] = note
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
        except (Saturated, StateUnavailable) as exc:
            raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
        return Job(trace, future, signal, self.workers)

    async def run(self, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """Run blocking work in a worker under the request time limit, as every face's calls do (the API's
        routes and MCP's tools): Saturated when every slot is busy, RunTimedOut when late, and a late or
        abandoned call is cancelled and frees its slot at once."""
        signal = CancelSignal()

        def work() -> T:
            with bound(signal):
                return fn()

        future = self.workers.submit(work)
        limit = timeout_s or self.config.request_timeout_s
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), limit)
        except TimeoutError:
            raise RunTimedOut(f"no answer within the time limit of {limit:g} s") from None
        finally:
            if not future.done():
                signal.cancel()
                self.workers.abandon(future)

    async def call(self, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """`run` for the API's routes: HTTP 503 when busy, 504 when late."""
        try:
            return await self.run(fn, timeout_s)
        except (Saturated, StateUnavailable) as exc:
            raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
        except RunTimedOut as exc:
            raise HTTPException(504, str(exc)) from None

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
    from sparqlnav.llm import LLMError

    if isinstance(exc, LLMError):
        return HTTPException(502, f"the LLM failed: {one_line(exc)}")
    if isinstance(exc, StateUnavailable):
        return HTTPException(503, one_line(exc))
    log.error("run failed", exc_info=exc)
    return HTTPException(500, f"the run failed: {one_line(exc)}")
