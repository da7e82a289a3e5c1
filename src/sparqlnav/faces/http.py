"""The HTTP face of sparqlnav: a JSON API with live streaming of every step, the TEXT2SPARQL endpoint, the
web UI, OpenAPI docs and MCP over streamable HTTP, all from one FastAPI app built by `create_app`.

Strategies are synchronous (LLM and SPARQL calls block), so each run happens in a worker thread; its trace
events cross into the event loop with `call_soon_threadsafe` and leave as server-sent events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import json
import logging
import math
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sparqlnav import __version__
from sparqlnav.answer import Answer, Strategy
from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.kg import KGError, KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.results import ResultTable
from sparqlnav.settings import Settings
from sparqlnav.trace import Event, Trace

if TYPE_CHECKING:
    from sparqlnav.faces.mcp import McpTools
    from sparqlnav.llm.client import LLMConfig

log = logging.getLogger("sparqlnav.faces.http")

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_RATE_LIMIT = 120.0  # requests per minute per client when serving beyond this machine
PING_S = 15.0  # keep-alive comment on quiet streams so proxies do not cut them
PROTECTED = ("/api/", "/mcp", "/text2sparql")  # what the token and the rate limit guard
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
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServeConfig:
        """Settings from SPARQLNAV_* variables; keyword overrides win; the rate limit is on by default off-host."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if env.get("SPARQLNAV_KG", "").strip():
            values["kgs"] = parse_kgs(env["SPARQLNAV_KG"].split())
        for key, var, conv in (
            ("host", "SPARQLNAV_HOST", str),
            ("strategy", "SPARQLNAV_STRATEGY", str),
            ("text2sparql_strategy", "SPARQLNAV_TEXT2SPARQL_STRATEGY", str),
            ("token", "SPARQLNAV_API_TOKEN", str),
            ("rate_limit", "SPARQLNAV_RATE_LIMIT", float),
            ("request_timeout_s", "SPARQLNAV_REQUEST_TIMEOUT", float),
            ("max_concurrent", "SPARQLNAV_MAX_CONCURRENT", int),
        ):
            if env.get(var, "").strip():
                values[key] = conv(env[var].strip())
        if env.get("SPARQLNAV_CORS_ORIGINS", "").strip():
            values["cors_origins"] = tuple(env["SPARQLNAV_CORS_ORIGINS"].split())
        if env.get("SPARQLNAV_TEXT2SPARQL_DATASETS", "").strip():
            values["datasets"] = parse_pairs(env["SPARQLNAV_TEXT2SPARQL_DATASETS"].split())
        values.update({k: v for k, v in overrides.items() if v is not None})
        if "rate_limit" not in values:
            host = values.get("host", cls.host)
            values["rate_limit"] = None if host in LOOPBACK else DEFAULT_RATE_LIMIT
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


class UnknownKG(KeyError):
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


class Saturated(Exception):
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


# -- request bodies --------------------------------------------------------------------------------


class AskRequest(BaseModel):
    """A question for the KG."""

    question: str = Field(description="The question, in plain language.", examples=["Who manages Heinrich Hoch?"])
    kg: str | None = Field(default=None, description="A KG name this server offers (default: the first).")
    strategy: str | None = Field(default=None, description="lexical, explore, … or auto (default: the server's).")


class SparqlRequest(BaseModel):
    """A read-only SPARQL query."""

    query: str = Field(description="SPARQL SELECT, ASK, CONSTRUCT or DESCRIBE.")
    kg: str | None = Field(default=None, description="A KG name this server offers (default: the first).")
    timeout: float | None = Field(default=None, gt=0, description="Time limit in seconds (capped by the server's).")


# -- structured logs -------------------------------------------------------------------------------


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message and the record's `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record."""
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: str = "INFO", stream: Any = None) -> None:
    """Send every log record (ours, uvicorn's, the MCP SDK's) to `stream` as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


# -- the guard: request ids, auth, rate limit, access log --------------------------------------------


class RateLimiter:
    """A token bucket per client: `per_minute` requests a minute, bursts up to that many."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, per_minute)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, client: str) -> float:
        """0 when the request may go ahead, else the seconds to wait."""
        now = self.clock()
        if len(self._buckets) > 10_000:  # forget clients that have refilled completely
            self._buckets = {
                k: v for k, v in self._buckets.items() if v[0] + (now - v[1]) * self.rate < self.capacity
            }
        tokens, last = self._buckets.get(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self._buckets[client] = (tokens, now)
            return (1.0 - tokens) / self.rate
        self._buckets[client] = (tokens - 1.0, now)
        return 0.0


class Guard:
    """ASGI middleware: a request id on every response, bearer-token auth and a rate limit on the API,
    and one structured log line per request (written when a stream ends, with its real duration)."""

    def __init__(self, app: ASGIApp, *, token: str | None, limiter: RateLimiter | None) -> None:
        self.app = app
        self.token = token
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = uuid.uuid4().hex[:16]
        path: str = scope.get("path", "")
        client = (scope.get("client") or ("?", 0))[0]
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            refusal = self._refuse(scope, path, client)
            if refusal is not None:
                await refusal(scope, receive, send_with_id)
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            log.info(
                "request",
                extra={
                    "fields": {
                        "request_id": rid,
                        "method": scope.get("method"),
                        "path": path,
                        "status": status,
                        "ms": round((time.perf_counter() - started) * 1000, 1),
                        "client": client,
                    }
                },
            )

    def _refuse(self, scope: Scope, path: str, client: str) -> Response | None:
        if scope.get("method") == "OPTIONS" or not path.startswith(PROTECTED):
            return None
        if self.token is not None:
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"").decode("latin-1")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip(), self.token):
                return JSONResponse(
                    {"detail": "missing or wrong bearer token (send 'Authorization: Bearer <token>')"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        if self.limiter is not None:
            wait = self.limiter.take(client)
            if wait > 0:
                return JSONResponse(
                    {"detail": f"rate limit reached; retry in {math.ceil(wait)} s"},
                    status_code=429,
                    headers={"Retry-After": str(math.ceil(wait))},
                )
        return None


# -- the app -----------------------------------------------------------------------------------------


def web_dir() -> Path:
    """The bundled static web UI."""
    return Path(str(resources.files(__package__) / "web"))


def _json(data: Any, status: int = 200) -> Response:
    """JSON that tolerates values the standard encoder does not know (shown as strings)."""
    body = json.dumps(data, ensure_ascii=False, default=str)
    return Response(body, status_code=status, media_type="application/json")


def _sse(event: str, data: Any, ident: int | None = None) -> str:
    """One server-sent event; the JSON payload has no raw newlines, so one data line suffices."""
    head = f"event: {event}\n" + (f"id: {ident}\n" if ident is not None else "")
    return head + "data: " + json.dumps(data, ensure_ascii=False, default=str) + "\n\n"


def _one_line(exc: BaseException) -> str:
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
    mcp_tools: McpTools | None = None

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
        """Close the strategies that hold connections, and the MCP tools' indexes."""
        if self.mcp_tools is not None:
            self.mcp_tools.close()
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
        self, question: str, kg_name: str, strategy: Strategy, listeners: Iterable[Callable[[Event], None]] = ()
    ) -> Job:
        """Start a run in a worker; HTTP 503 when all workers are busy."""
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
            answer = strategy.run(question, graph, trace)
            trace.finish()
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
            raise HTTPException(503, _one_line(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the HTTP boundary: any failure of a run becomes a 5xx
            raise _run_failure(exc) from None


def _run_failure(exc: BaseException) -> HTTPException:
    """An HTTP error for a run that raised: upstream LLM trouble is 502, anything else 500."""
    from sparqlnav.llm.client import LLMError

    if isinstance(exc, LLMError):
        return HTTPException(502, f"the LLM failed: {_one_line(exc)}")
    log.error("run failed", exc_info=exc)
    return HTTPException(500, f"the run failed: {_one_line(exc)}")


def create_app(
    settings: Settings,
    config: ServeConfig | None = None,
    *,
    llm: LLMConfig | None = None,
    kgs: Mapping[str, KnowledgeGraph] | None = None,
    strategy_factory: StrategyFactory | None = None,
) -> FastAPI:
    """The whole server: API, streaming, TEXT2SPARQL, web UI, docs and MCP. `kgs` are already-open graphs
    (their owner closes them); `config.kgs` are opened by the app and closed at shutdown."""
    from sparqlnav.strategies import make_strategy

    config = config or ServeConfig()
    specs = dict(config.kgs) if (config.kgs or kgs) else {"demo": "demo"}
    pool = KGPool({k: v for k, v in specs.items() if k not in (kgs or {})}, settings, opened=kgs)
    service = Service(
        config=config,
        settings=settings,
        pool=pool,
        llm=llm,
        factory=strategy_factory or make_strategy,
        workers=Workers(config.max_concurrent),
    )
    mcp_server = None
    if config.mcp:
        from sparqlnav.faces.mcp import create_mcp_server

        mcp_server, service.mcp_tools = create_mcp_server(
            pool, home=settings.home, llm=llm, strategy_factory=service.shared_strategy, default_strategy=config.strategy
        )
        mcp_app = mcp_server.streamable_http_app(streamable_http_path="/mcp", host=config.host)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(pool.close)
            stack.callback(service.close)
            stack.callback(service.workers.close)
            if config.eager:
                for name in pool.names():
                    await asyncio.to_thread(pool.get, name)
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            log.info(
                "ready",
                extra={"fields": {"kgs": pool.names(), "llm": llm is not None, "version": __version__}},
            )
            yield

    app = FastAPI(
        title="sparqlnav",
        version=__version__,
        summary="Ask knowledge graphs questions in plain language; sparqlnav writes, checks and runs SPARQL and shows its work.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    if mcp_server is not None:
        app.router.routes.extend(mcp_app.routes)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for e in exc.errors():
            where = ".".join(str(p) for p in e.get("loc", ()) if p not in ("body", "query"))
            parts.append(f"{where}: {e.get('msg')}" if where else str(e.get("msg")))
        return JSONResponse({"detail": "; ".join(parts) or "invalid request"}, status_code=422)

    # -- API

    @app.get("/health", tags=["meta"])
    async def health() -> dict[str, Any]:
        """Liveness and load."""
        return {
            "status": "ok",
            "version": __version__,
            "active_runs": service.workers.active,
            "max_concurrent": service.workers.size,
        }

    @app.get("/api/info", tags=["meta"])
    async def info() -> dict[str, Any]:
        """What this server offers: KGs, strategies, whether an LLM is configured, MCP tools."""
        from sparqlnav.strategies import REGISTRY, available

        usable = [
            s for s in available() if s == "auto" or llm is not None or not REGISTRY.get(s, ("", True))[1]
        ]
        return {
            "version": __version__,
            "kgs": pool.describe(paths=config.host in LOOPBACK),
            "default_kg": pool.default,
            "strategies": usable,
            "default_strategy": config.strategy,
            "llm": llm is not None,
            "mcp_tools": service.mcp_tools.offered if service.mcp_tools else [],
            "limits": {
                "max_question_chars": config.max_question_chars,
                "request_timeout_s": config.request_timeout_s,
                "sparql_timeout_s": settings.limits.timeout_s,
            },
        }

    @app.post("/api/ask", tags=["ask"])
    async def ask(body: AskRequest) -> Response:
        """Answer a question: the `ask --json` object (question, strategy, sparql, results, answer, trace, usage)."""
        question = service.check_question(body.question)
        kg_name = service.kg(body.kg)
        _, strategy = service.strategy(body.strategy)
        job = service.start(question, kg_name, strategy)
        answer = await service.finish(job)
        return _json(answer.to_json())

    @app.post(
        "/api/ask/stream",
        tags=["ask"],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "`trace` events, then one `answer` (or `error`)."}},
    )
    async def ask_stream(body: AskRequest) -> StreamingResponse:
        """The same run as server-sent events: `event: trace` for each step as it happens, then `event: answer`
        with the `ask --json` object (or `event: error` with `{status, detail}`)."""
        question = service.check_question(body.question)
        kg_name = service.kg(body.kg)
        _, strategy = service.strategy(body.strategy)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def forward(event: Event) -> None:  # runs in the worker thread
            loop.call_soon_threadsafe(queue.put_nowait, ("trace", event.to_json()))

        job = service.start(question, kg_name, strategy, listeners=[forward])
        # Queued after every event the worker forwarded, so the answer always comes last.
        job.future.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, ("done", None)))
        return StreamingResponse(
            _stream(service, job, queue, loop),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.post("/api/sparql", tags=["sparql"])
    async def sparql(body: SparqlRequest) -> Response:
        """Run a read-only query: SPARQL 1.1 JSON `results`, plus labels and prefixed names for display."""
        text = body.query.strip()
        if not text:
            raise HTTPException(422, "query is empty")
        if len(text) > config.max_query_chars:
            raise HTTPException(422, f"query is too long (the limit is {config.max_query_chars} characters)")
        kg_name = service.kg(body.kg)
        limit = min(body.timeout or settings.limits.timeout_s, settings.limits.timeout_s)

        def run() -> Response:
            graph = pool.get(kg_name)
            result = graph.endpoint.query(text, timeout_s=limit)
            if not result.ok or result.table is None:
                status = {
                    Outcome.SYNTAX_ERROR: 400,
                    Outcome.REFUSED: 400,
                    Outcome.TIMEOUT: 504,
                    Outcome.UNREACHABLE: 502,
                }.get(result.outcome, 422)
                return _json({"detail": result.describe(), "outcome": result.outcome.value}, status)
            return _json(
                {
                    "kg": kg_name,
                    "outcome": result.outcome.value,
                    "seconds": round(result.seconds, 4),
                    "truncated": result.table.truncated,
                    "results": result.table.to_sparql_json(),
                    "display": display(graph, result.table),
                }
            )

        return await service.call(run, limit + 5)

    @app.get("/api/search", tags=["lookup"])
    async def search(
        q: str = Query(min_length=1, max_length=500, description="A name, possibly partial or misspelt."),
        kg: str | None = None,
        limit: int = Query(8, ge=1, le=100),
    ) -> Response:
        """Entities and properties whose label, alias or description matches `q`."""
        from sparqlnav.tools.lookup import search as do_search

        kg_name = service.kg(kg)

        def run() -> Response:
            graph = pool.get(kg_name)
            found = do_search(graph, q, entities=limit, properties=max(1, limit // 2))
            data = found.to_json()
            data["compact"] = {h.iri: graph.prefixes.compact(h.iri) for h in [*found.entities, *found.properties]}
            return _json(data)

        return await service.call(run)

    @app.get("/api/entity", tags=["lookup"])
    async def entity(
        id: str = Query(min_length=1, max_length=2000, description="IRI, prefixed name, Q/P id, or a name."),
        kg: str | None = None,
    ) -> Response:
        """An entity's outgoing edges (with qualifiers where the KG has them)."""
        from sparqlnav.tools.lookup import LookupFailed, resolve_or_search
        from sparqlnav.tools.lookup import entity as do_entity

        kg_name = service.kg(kg)

        def run() -> Response:
            graph = pool.get(kg_name)
            try:
                page = do_entity(graph, resolve_or_search(graph, id))
            except LookupFailed as exc:
                return _json({"detail": str(exc)}, 404)
            data = page.to_json()
            iris = {page.iri} | {e["property"] for e in data["edges"]}
            iris |= {v["value"]["value"] for e in data["edges"] for v in e["values"] if v["value"]["type"] == "uri"}
            data["compact"] = {iri: graph.prefixes.compact(iri) for iri in iris}
            return _json(data)

        return await service.call(run)

    # -- TEXT2SPARQL

    @app.get("/text2sparql", tags=["text2sparql"])
    async def text2sparql(
        question: str = Query(description="The question."),
        dataset: str = Query(description="The dataset id, e.g. https://text2sparql.aksw.org/2025/corporate/"),
    ) -> dict[str, str]:
        """The TEXT2SPARQL challenge API: the SPARQL query that answers `question` over `dataset`."""
        text = service.check_question(question)
        if config.datasets:
            if dataset not in config.datasets:
                raise HTTPException(404, f"unknown dataset {dataset!r}: this server answers for {', '.join(config.datasets)}")
            kg_name = service.kg(config.datasets[dataset])
        elif len(pool.names()) == 1:
            kg_name = pool.default
        elif dataset in pool.names():
            kg_name = dataset
        else:
            raise HTTPException(404, f"unknown dataset {dataset!r}: name one of {', '.join(pool.names())}")
        _, strategy = service.strategy(config.text2sparql_strategy or config.strategy)
        job = service.start(text, kg_name, strategy)
        answer = await service.finish(job)
        return {"dataset": dataset, "question": question, "query": answer.sparql or ""}

    # -- web UI and docs

    root = web_dir()

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        # Only our own files may load: the UI works offline and never reaches a CDN.
        return FileResponse(
            root / "index.html",
            headers={
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                "script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'",
                "Cache-Control": "no-cache",
            },
        )

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="sparqlnav API",
            swagger_js_url="/static/vendor/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
            swagger_ui_parameters={"validatorUrl": None},
        )

    app.mount("/static", StaticFiles(directory=root), name="static")

    guard_token = config.token or None
    limiter = RateLimiter(config.rate_limit) if config.rate_limit else None
    app.add_middleware(Guard, token=guard_token, limiter=limiter)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID"],
            expose_headers=["X-Request-ID", "Mcp-Session-Id"],
        )
    return app


async def _stream(
    service: Service, job: Job, queue: asyncio.Queue[tuple[str, Any]], loop: asyncio.AbstractEventLoop
) -> AsyncIterator[str]:
    """Trace events as they happen, then the answer; a quiet stream gets keep-alive comments."""
    deadline = loop.time() + service.config.request_timeout_s
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                job.cancel()
                limit = service.config.request_timeout_s
                yield _sse("error", {"status": 504, "detail": f"no answer within the time limit of {limit:g} s"})
                return
            try:
                kind, payload = await asyncio.wait_for(queue.get(), min(remaining, PING_S))
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if kind == "trace":
                yield _sse("trace", payload, payload.get("seq"))
                continue
            exc = job.future.exception()
            if exc is None:
                yield _sse("answer", job.future.result().to_json())
            elif isinstance(exc, KGError):
                yield _sse("error", {"status": 503, "detail": _one_line(exc)})
            elif isinstance(exc, Exception):
                failure = _run_failure(exc)
                yield _sse("error", {"status": failure.status_code, "detail": failure.detail})
            else:
                yield _sse("error", {"status": 499, "detail": "the run was cancelled"})
            return
    finally:
        job.cancel()  # the client went away or the stream ended: stop the run at its next step


@contextlib.contextmanager
def background(app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, timeout_s: float = 60.0) -> Iterator[str]:
    """Serve `app` with uvicorn in a background thread (tests, benchmarks, notebooks); yields its base URL."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app, host=host, port=port, log_config=None, access_log=False, ws="none", timeout_graceful_shutdown=2
        )
    )
    thread = threading.Thread(target=server.run, name="sparqlnav-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the server did not start (see the log)")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()
    try:
        yield f"http://{host}:{bound[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def app_factory() -> FastAPI:
    """For `uvicorn --factory sparqlnav.faces.http:app_factory`: everything from the environment."""
    from sparqlnav.llm.client import LLMConfig

    configure_logging(os.environ.get("SPARQLNAV_LOG_LEVEL", "INFO"))
    return create_app(Settings.from_env(), ServeConfig.from_env(), llm=LLMConfig.from_env(os.environ))
