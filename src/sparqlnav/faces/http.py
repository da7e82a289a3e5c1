"""The HTTP face of sparqlnav: a JSON API with live streaming of every step, the TEXT2SPARQL endpoint, the
web UI, OpenAPI docs and MCP over streamable HTTP, all from one FastAPI app built by `create_app` out of the
routers in `routes_ask` (questions), `routes_tools` (the registry's tools, queries, lookups) and `routes_meta`
(health, info, UI, docs), over the `Service` they share (`faces.service`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import math
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sparqlnav.faces.access import HostCheck, Networks, client_address, from_a_page, presented_token
from sparqlnav.faces.limits import MAX_BODY_BYTES, shown
from sparqlnav.faces.routes_ask import ask_routes, request_owner
from sparqlnav.faces.routes_meta import meta_routes, web_dir
from sparqlnav.faces.routes_tools import tool_routes
from sparqlnav.faces.service import (
    KGPool,
    ServeConfig,
    Service,
    StrategyFactory,
    Workers,
    kg_name,
    parse_kgs,
    parse_pairs,
    strategy_with_options,
)
from sparqlnav.faces.state import Limiter, RateLimiter, StateStore, StateUnavailable
from sparqlnav.faces.state_choice import open_state
from sparqlnav.faces.warm import warm
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.settings import Settings
from sparqlnav.version import __version__

if TYPE_CHECKING:
    from sparqlnav.llm import LLMConfig

__all__ = [
    "JsonFormatter",
    "RateLimiter",
    "RequestGuard",
    "ServeConfig",
    "app_factory",
    "background",
    "configure_logging",
    "create_app",
    "kg_name",
    "parse_kgs",
    "parse_pairs",
    "web_dir",
]

log = logging.getLogger("sparqlnav.faces.http")

PROTECTED = ("/api/", "/mcp", "/text2sparql")  # what the token and the rate limit guard
AUTH_FAILURES_PER_MINUTE = 10.0  # wrong tokens a client may send (bursts of 10, then one every 6 s)
# GET routes that start an LLM run: without a token, a browser page may reach them only with a header that no
# other site's page can send without a CORS preflight (an <img> pointing here started runs).
LLM_GETS = ("/text2sparql",)


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


def configure_logging(level: str = "INFO", stream: Any = None, formatter: logging.Formatter | None = None) -> None:
    """Send every log record (ours, uvicorn's, the MCP SDK's) to `stream` as JSON lines (or with `formatter`)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter or JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


# -- the guard: request ids, auth, rate limit, access log --------------------------------------------


class _BodyTooLarge(Exception):
    """A request body without a length ran past the limit while it was read."""


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"detail": f"the request body is too large (the limit is {limit:,} bytes)"},
        status_code=413,
        headers={"Connection": "close"},  # the rest of the body is not read
    )


class RequestGuard:
    """ASGI middleware: a request id on every response, a bound on request bodies, bearer-token auth and a rate
    limit on the API, LLM routes out of reach of other sites' pages, and one structured log line per request
    (written when a stream ends, with its real duration)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        limiter: Limiter | None,
        hosts: HostCheck | None = None,
        proxies: Networks | None = None,
        auth_failures: Limiter | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.token = token
        self.limiter = limiter
        self.hosts = hosts  # None: any Host (a token protects the server)
        self.proxies = proxies or Networks()
        self.auth_failures = auth_failures  # wrong tokens allowed per client, as a rate
        self.max_body_bytes = max_body_bytes
        # Which process answered: with several workers behind one port, logs and clients can tell them apart.
        self.worker = str(os.getpid()).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = uuid.uuid4().hex[:16]
        path: str = scope.get("path", "")
        headers = dict(scope.get("headers") or [])
        peer = (scope.get("client") or ("?", 0))[0]
        forwarded = headers.get(b"x-forwarded-for")
        client = client_address(peer, forwarded.decode("latin-1") if forwarded else None, self.proxies)
        scope.setdefault("state", {})["client"] = client  # request.state.client: whose conversations a run keeps
        status = 0
        cut = False  # the body ran past the limit: whatever the app says, the answer is 413

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if cut:
                return
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"], (b"x-request-id", rid.encode()), (b"x-sparqlnav-worker", self.worker)
                ]
            await send(message)

        read = 0
        limit = self.max_body_bytes

        async def receive_within_limit() -> Message:
            # Counted as it arrives, so a body without a length is cut at the limit, never held whole.
            nonlocal read, cut
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit:
                    cut = status == 0  # a response already under way cannot be replaced
                    raise _BodyTooLarge()
            return message

        try:
            try:
                if path.startswith(PROTECTED) and (self.limiter is not None or self.token is not None):
                    # The counters may live in Redis: a slow one holds a thread here, not the event loop.
                    refusal = await asyncio.to_thread(self._refuse, scope, headers, path, client)
                else:
                    refusal = self._refuse(scope, headers, path, client)
            except StateUnavailable as exc:  # the shared counters cannot be read: refuse rather than count nothing
                refusal = JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "5"})
            if refusal is not None:
                await refusal(scope, receive, send_with_id)
            else:
                try:
                    await self.app(scope, receive_within_limit, send_with_id)
                except Exception:  # after a cut, the app failed on the cut body: the 413 below says why
                    if not cut:
                        raise
                if cut:
                    cut = False
                    await _too_large(limit)(scope, receive, send_with_id)
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
                        "worker": os.getpid(),
                    }
                },
            )

    def _refuse(self, scope: Scope, headers: dict[bytes, bytes], path: str, client: str) -> Response | None:
        host = headers.get(b"host", b"").decode("latin-1")
        if self.hosts is not None and not self.hosts.allows(host):
            return JSONResponse(
                {
                    "detail": f"this server does not answer to the host name {shown(host)} (DNS-rebinding "
                    "protection): use localhost or 127.0.0.1, add the name with --allowed-host "
                    "(SPARQLNAV_ALLOWED_HOSTS), or require a token"
                },
                status_code=421,
            )
        length = headers.get(b"content-length", b"").strip()
        if length.isdigit() and int(length) > self.max_body_bytes:
            return _too_large(self.max_body_bytes)  # refused before a byte of the body is read
        method = scope.get("method")
        if method == "OPTIONS" or not path.startswith(PROTECTED):
            return None
        if method == "POST" and path.startswith("/api/") and not _json_type(headers.get(b"content-type", b"")):
            # A body that does not say it is JSON is what another site's page can send without asking (a form, a
            # Blob): FastAPI would still read it as JSON when the type is missing.
            return JSONResponse(
                {"detail": "send the body as JSON, with 'Content-Type: application/json'"}, status_code=415
            )
        if self.token is None and method == "GET" and path in LLM_GETS and from_a_page(headers):
            return JSONResponse(
                {
                    "detail": f"{path} runs the LLM: from a browser, send an X-Requested-With header (which no other "
                    "site's page can send unasked), or give the server a token"
                },
                status_code=403,
            )
        if self.token is not None:
            # Refused before comparing: a client that keeps guessing gets no answer about its guesses.
            locked = self.auth_failures.wait(client) if self.auth_failures is not None else 0.0
            if locked > 0:
                return JSONResponse(
                    {"detail": f"too many wrong tokens from this client; retry in {math.ceil(locked)} s"},
                    status_code=429,
                    headers={"Retry-After": str(math.ceil(locked))},
                )
            given = presented_token(headers.get(b"authorization", b"").decode("latin-1"))
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                if self.auth_failures is not None:
                    self.auth_failures.take(client)
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


def _json_type(value: bytes) -> bool:
    """Whether a Content-Type names JSON (application/json, or a +json type)."""
    kind = value.split(b";", 1)[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))


# -- the app -----------------------------------------------------------------------------------------


def create_app(
    settings: Settings,
    config: ServeConfig | None = None,
    *,
    llm: LLMConfig | None = None,
    kgs: Mapping[str, KnowledgeGraph] | None = None,
    strategy_factory: StrategyFactory | None = None,
    state: StateStore | None = None,
) -> FastAPI:
    """The whole server: API, streaming, TEXT2SPARQL, web UI, docs and MCP. `kgs` are already-open graphs
    (their owner closes them); `config.kgs` are opened by the app and closed at shutdown. `state` keeps
    conversations, rate-limit counters and run slots (None: the one the settings name, closed at shutdown)."""
    from sparqlnav.strategies import make_strategy

    config = config or ServeConfig()
    owned_state = state is None
    state = open_state(settings) if state is None else state
    specs = dict(config.kgs) if (config.kgs or kgs) else {"demo": "demo"}
    pool = KGPool({k: v for k, v in specs.items() if k not in (kgs or {})}, settings, opened=kgs)
    service = Service(
        config=config,
        settings=settings,
        pool=pool,
        llm=llm,
        factory=strategy_factory or strategy_with_options(make_strategy, settings, config),
        # A slot left by a worker that died is taken back after the longest a request may wait for its run.
        workers=Workers(config.max_concurrent, slots=state.slots(config.max_concurrent, config.request_timeout_s + 30)),
        indexes=KGIndexes(settings.paths.home, embedding=settings.embedding),
        conversations=state.conversations(settings),
        state=state,
    )
    mcp_server = None
    if config.mcp:
        from sparqlnav.faces.mcp import create_mcp_server

        mcp_server, service.mcp_tools = create_mcp_server(
            pool,
            settings=settings,
            indexes=service.indexes,
            registry=service.tools,
            llm=llm,
            strategy_factory=service.shared_strategy,
            default_strategy=config.strategy,
            runner=service.run,  # the API's slots, time limit and accounting
            conversations=service.conversations,
            owner_of_request=functools.partial(request_owner, service),
            limits=config.limits,
        )
        mcp_app = mcp_server.streamable_http_app(
            streamable_http_path="/mcp", host=config.host, transport_security=mcp_security(config)
        )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if owned_state:
                stack.callback(state.close)
            stack.callback(pool.close)
            stack.callback(service.close)
            stack.callback(service.workers.close)
            if threading.current_thread() is threading.main_thread():  # signals reach only the main thread
                stack.enter_context(ending_streams_on_exit(service, asyncio.get_running_loop()))
            if config.eager:
                warming = not pool.is_open(pool.default)  # graphs handed in opened were warmed by their owner
                for name in pool.names():
                    await asyncio.to_thread(pool.get, name)
                if warming:  # so the first question costs what the second does (faces/warm)
                    await asyncio.to_thread(
                        warm, pool.get, lambda: service.shared_strategy(config.strategy, llm), llm=llm
                    )
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            log.info(
                "ready",
                extra={
                    "fields": {
                        "kgs": pool.names(), "llm": llm is not None, "version": __version__,
                        "state": state.description, "worker": os.getpid(),
                    }
                },
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

    @app.exception_handler(StateUnavailable)
    async def state_unavailable(_: Request, exc: StateUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "5"})

    app.include_router(meta_routes(service, openapi_url=app.openapi_url or "/openapi.json"))
    app.include_router(ask_routes(service))
    app.include_router(tool_routes(service))
    app.mount("/static", StaticFiles(directory=web_dir()), name="static")

    guard_token = config.token or None
    limiter = state.limiter("rate", config.rate_limit) if config.rate_limit else None
    app.add_middleware(
        RequestGuard,
        token=guard_token,
        limiter=limiter,
        hosts=None if guard_token else HostCheck((config.host, *config.allowed_hosts)),
        proxies=Networks(config.trusted_proxies),
        auth_failures=state.limiter("auth", AUTH_FAILURES_PER_MINUTE),
        max_body_bytes=config.max_body_bytes,
    )
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=[
                "Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID",
                "X-Requested-With",
            ],
            expose_headers=["X-Request-ID", "Mcp-Session-Id"],
        )
    return app


@contextlib.contextmanager
def ending_streams_on_exit(service: Service, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """On SIGTERM or SIGINT (a process manager stopping this worker, a rolling restart), end this process's open
    streams with an error event, then hand the signal on to the server's own handler, whose graceful shutdown
    would otherwise wait for each stream's run and cut it without a word when its time is up."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handler(sig: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(service.end_streams)
        before = previous[signal.Signals(sig)]
        if callable(before):
            before(sig, frame)
        else:  # nobody had taken it: what it does by default
            signal.signal(sig, before or signal.SIG_DFL)
            signal.raise_signal(sig)

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, before in previous.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, before if before is not None else signal.SIG_DFL)


def mcp_security(config: ServeConfig) -> TransportSecuritySettings | None:
    """The MCP transport's own Host and Origin check, widened to the configured host names (None: the SDK's
    default, loopback names only when listening on loopback)."""
    if not config.allowed_hosts:
        return None
    names = [f"[{h}]" if ":" in h else h for h in ("127.0.0.1", "localhost", "::1", *config.allowed_hosts)]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[p for n in names for p in (n, f"{n}:*")],
        allowed_origins=[p for n in names for s in ("http", "https") for p in (f"{s}://{n}", f"{s}://{n}:*")]
        + list(config.cors_origins),
    )


@contextlib.contextmanager
def background(app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, timeout_s: float = 60.0) -> Iterator[str]:
    """Serve `app` with uvicorn in a background thread (tests, benchmarks, notebooks); yields its base URL."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            ws="none",
            timeout_graceful_shutdown=2,
            proxy_headers=False,  # the RequestGuard reads X-Forwarded-For, from trusted proxies only
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
    settings = Settings.from_env()
    configure_logging(settings.serve.log_level)
    return create_app(settings, ServeConfig.from_settings(settings), llm=settings.llm)
