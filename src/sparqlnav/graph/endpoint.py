"""Endpoints: run read-only SPARQL with a real time limit and get a typed outcome back.

`RemoteEndpoint` speaks the SPARQL 1.1 protocol over HTTP. The local store (`sparqlnav.graph.store`) runs an
Oxigraph server process and reuses it, so local and remote data share one code path.
"""

from __future__ import annotations

import contextlib
import enum
import heapq
import io
import json
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

import httpx
import pyoxigraph as ox
from pydantic import Field, field_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from sparqlnav.graph.results import ResultTable, Term
from sparqlnav.redirects import OffOrigin, OriginGuard
from sparqlnav.retry import GaveUp, Retryable, RetryPolicy, retry_after, with_retries
from sparqlnav.sparql.guard import QueryForm, Refused, Unreadable, check_query, tokens
from sparqlnav.transport import guarded_transport
from sparqlnav.urls import shown_url
from sparqlnav.version import __version__

DEFAULT_TIMEOUT_S = 60.0
# A local engine left running this long after its last query serves the next CLI call at once (0: it ends with
# the process that started it).
DEFAULT_ENGINE_IDLE_S = 300.0
DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_ROW_BYTES = 1024 * 1024
ENGINE_MEMORY_FLOOR = 256 * 1024 * 1024


def default_engine_memory() -> int:
    """A local engine's memory ceiling for this machine: a quarter of its memory, at least 1 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 * 1024**3
    return max(1024**3, total // 4)
# JSON bodies up to this size are parsed whole by the json module (fast); longer ones term by term by
# pyoxigraph, so memory stays near this size plus one row whatever the endpoint sends.
WHOLE_JSON_BYTES = 4 * 1024 * 1024
_ROW_SLACK = 256 * 1024  # read-ahead of the parser's buffers: a row is measured this loosely
USER_AGENT = f"sparqlnav/{__version__} (+https://github.com/sparqlnav/sparqlnav)"


class Outcome(enum.StrEnum):
    """How a query ended; strategies' feedback is built on these."""

    OK = "ok"
    EMPTY = "empty"
    SYNTAX_ERROR = "syntax_error"
    TIMEOUT = "timeout"
    REFUSED = "refused"
    CUT = "cut"  # a cap cut the result before its first complete row: it ran, but nothing usable came back
    ENGINE_ERROR = "engine_error"
    UNREACHABLE = "unreachable"


@dataclass
class QueryResult:
    """What running one query produced: an outcome, a table when there is one, and a message otherwise."""

    query: str
    outcome: Outcome
    table: ResultTable | None = None
    message: str = ""
    seconds: float = 0.0
    endpoint: str = ""

    @property
    def ok(self) -> bool:
        """True when the query ran (with or without rows)."""
        return self.outcome in (Outcome.OK, Outcome.EMPTY)

    def describe(self) -> str:
        """One line a person or an LLM can act on."""
        if self.outcome is Outcome.OK:
            n = (
                "true/false"
                if self.table and self.table.is_boolean
                else f"{len(self.table or [])} row{'' if len(self.table or []) == 1 else 's'}"
            )
            return f"ok ({n}, {self.seconds:.2f} s)"
        if self.outcome is Outcome.EMPTY:
            return "the query ran and returned no rows"
        return f"{self.outcome.value}: {self.message}"


@pydantic_dataclass(frozen=True)
class Limits:
    """Caps on one query: time, rows and bytes (validated: a NaN, zero or negative cap is refused)."""

    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, allow_inf_nan=False)
    max_rows: int = Field(default=DEFAULT_MAX_ROWS, ge=1)
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1)
    max_row_bytes: int = Field(default=DEFAULT_MAX_ROW_BYTES, ge=1)  # one row (or triple): a huge literal
    # A local engine process's heap: one small query can build gigabytes (doubling CONCATs), which no row cap sees.
    engine_memory_bytes: int = Field(default_factory=default_engine_memory, ge=ENGINE_MEMORY_FLOOR)
    # Seconds a local engine stays up unused after the processes using it have gone (graph/keeper); 0: not kept.
    engine_idle_s: float = Field(default=DEFAULT_ENGINE_IDLE_S, ge=0, allow_inf_nan=False)

    @field_validator("engine_memory_bytes", mode="before")
    @classmethod
    def _with_unit(cls, value: Any) -> Any:
        """'4G', '512M', '2GiB' as well as a number of bytes."""
        if isinstance(value, str):
            text = value.strip().upper().removesuffix("IB").removesuffix("B")
            scale = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}.get(text[-1:], 1)
            return int(float(text[:-1] if scale > 1 else text) * scale)
        return value


@runtime_checkable
class Endpoint(Protocol):
    """Anything that runs read-only SPARQL queries under limits."""

    @property
    def name(self) -> str:
        """A short name for messages and traces."""
        ...

    @property
    def url(self) -> str:
        """The SPARQL endpoint URL."""
        ...

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Run one query; never raises for query-level problems."""
        ...

    def close(self) -> None:
        """Release processes and connections."""
        ...


class EndpointWrapper:
    """Base for endpoints that wrap another one (tracing, budgets): forwards its name and URL and does not
    own it, so closing the wrapper leaves the wrapped endpoint open."""

    def __init__(self, inner: Endpoint) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        """The wrapped endpoint's name."""
        return self.inner.name

    @property
    def url(self) -> str:
        """The wrapped endpoint's URL."""
        return self.inner.url

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Pass the query through."""
        return self.inner.query(sparql, timeout_s=timeout_s)

    def close(self) -> None:
        """The wrapper owns nothing: closing is the wrapped endpoint's owner's job."""


@dataclass
class HttpOptions:
    """How to talk to a SPARQL endpoint over HTTP."""

    headers: dict[str, str] = field(default_factory=dict)
    user_agent: str = USER_AGENT
    method: str = "auto"  # auto: GET for short queries, POST for long ones
    retries: int = 3
    backoff_s: float = 0.5  # the first wait when the server gives no Retry-After; doubles per retry
    max_backoff_s: float = 30.0
    # Origins (scheme://host[:port]) a redirect may lead to besides the endpoint's own; never from https to http.
    allowed_redirects: tuple[str, ...] = ()


class _Deadline(Exception):
    pass


class _CappedReader(io.RawIOBase):
    """File-like view of a streamed HTTP body that stops at a byte cap, at a deadline, and when one row runs
    past the row cap (the parser says where rows start by setting `row_start` to `handed`)."""

    def __init__(self, chunks: Iterable[bytes], max_bytes: int, deadline: float, max_row_bytes: int | None = None) -> None:
        self._chunks = iter(chunks)
        self._buffer = b""
        self._max = max_bytes
        self._deadline = deadline
        self._max_row = max_row_bytes
        self.read_bytes = 0  # taken from the body
        self.handed = 0  # given to the parser
        self.row_start = 0
        self.hit_cap = False
        self.hit_row_cap = False
        self.ended = False  # the body ended before any cap
        self.last = b""  # the tail of the body, to recognise an error written after a 200 status

    def readable(self) -> bool:
        return True

    def _next(self) -> bytes:
        """The next chunk within the cap; b"" at the end or the cap."""
        if time.monotonic() > self._deadline:
            raise _Deadline()
        if self.read_bytes >= self._max:
            self.hit_cap = True
            return b""
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self.ended = True
            return b""
        room = self._max - self.read_bytes
        if len(chunk) > room:
            chunk = chunk[:room]
        self.read_bytes += len(chunk)
        self.last = (self.last + chunk)[-2048:]
        return chunk

    def read_all(self, limit: int | None = None) -> bytes:
        """Everything up to the cap, the end, or about `limit` bytes, checking the deadline between chunks;
        what it returns is not seen again by `readinto` unless given back with `unread`."""
        parts = [self._buffer]
        size = len(self._buffer)
        self._buffer = b""
        while limit is None or size < limit:
            chunk = self._next()
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)

    def unread(self, data: bytes) -> None:
        """Put bytes taken by `read_all` back in front of the rest."""
        self._buffer = data + self._buffer

    def readinto(self, b: Any) -> int:
        if self._max_row is not None and self.handed - self.row_start > self._max_row + _ROW_SLACK:
            self.hit_row_cap = True  # one row is longer than the row cap: end the body here
            return 0
        while not self._buffer:
            chunk = self._next()
            if not chunk:
                return 0
            self._buffer = chunk
        n = min(len(b), len(self._buffer))
        b[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        self.handed += n
        return n


def _looks_like_syntax_error(status: int, text: str) -> bool:
    lowered = text.lower()
    return status == 400 and any(
        s in lowered for s in ("parse", "syntax", "error at ", "expected", "lexical", "encountered")
    )


def _looks_like_timeout(text: str) -> bool:
    lowered = text.lower()
    return any(
        s in lowered
        for s in (
            "timeout", "timed out", "cancelled", "canceled", "time limit",
            # Virtuoso refuses a query whose estimated cost exceeds MaxQueryCostEstimationTime up front.
            "estimated execution time",
        )
    )


# The base a query sent to a private (local) engine gets when it sets none: Oxigraph resolves relative IRIs against
# the request's URL and sends that base with every SERVICE call, which put the engine's loopback port in results and
# in what other endpoints received. `.invalid` is reserved: the base names nothing.
NEUTRAL_BASE = "http://sparqlnav.invalid/"
_ENGINE_POSITION = re.compile(r"error at (\d+):(\d+)")


def _has_base(sparql: str) -> bool:
    """Whether the query sets its own BASE (a keyword outside strings, IRIs and comments)."""
    return any(t.kind == "word" and t.text.upper() == "BASE" for t in tokens(sparql))


def _engine_message(text: str) -> str:
    """An engine's error text on one line, without the copy of the query Virtuoso appends ("SPARQL query: …")."""
    flat = " ".join(text.split())
    return flat.split(" SPARQL query:", 1)[0].strip()


def _engine_cuts(result: QueryResult, headers: httpx.Headers) -> QueryResult:
    """Mark results an engine cut on its own side: Virtuoso stops at its ResultSetMaxRows without an error (it
    says so in X-SPARQL-MaxRows) and, under its "anytime" timeout, returns what it had with X-SQL-State S1TAT."""
    table = result.table
    if table is None or table.is_boolean:
        return result
    state = headers.get("x-sql-state", "")
    if state == "S1TAT":
        table.truncated = True
        table.cap = f"the endpoint's time limit (partial results: {headers.get('x-sql-message', state)})"
        return result
    cap = headers.get("x-sparql-maxrows", "")
    if cap.isdigit() and len(table.rows) >= int(cap) and not table.truncated:
        table.truncated, table.cap = True, f"the endpoint's row limit ({cap} rows)"
    return result


class RemoteEndpoint:
    """A SPARQL 1.1 protocol endpoint over HTTP (GET/POST, JSON results, backoff honouring Retry-After)."""

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        limits: Limits | None = None,
        http: HttpOptions | None = None,
        allowed_services: Iterable[str] = (),
        allow_self: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        unix_socket: str | None = None,
    ) -> None:
        self.url = url
        self.unix_socket = unix_socket  # a local engine's only way in; the URL then names it (Host, paths)
        self.shown = shown_url(url)  # what messages say: never a password
        self.name = name or self.shown
        self.limits = limits or Limits()
        self.http = http or HttpOptions()
        # A SERVICE clause may call this endpoint itself, unless its URL is private (a local store's server).
        self.allowed_services = [url, *allowed_services] if allow_self else list(allowed_services)
        # sparqlnav's own engine (allow_self=False) is Oxigraph: a query runs there only when it parses as Oxigraph
        # reads it; a remote engine may speak its own dialect (see sparql/guard.py).
        self._remote_dialect = allow_self
        self._private = not allow_self  # a local engine: its address appears in no message, its base is neutral
        self._sleep = sleep
        # A private engine speaks plain HTTP on loopback: a TLS context that trusts nothing lets no TLS connection
        # through and spares loading the CA bundle (60-90 ms, a tenth of a CLI call).
        tls: dict[str, Any] = {"verify": ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)} if self._private else {}
        if unix_socket:
            tls["uds"] = unix_socket
        self._client = httpx.Client(
            headers={"User-Agent": self.http.user_agent, **self.http.headers},
            follow_redirects=True,
            # a cancelled run stops waiting for its query at once
            transport=guarded_transport(**tls),
            # Each redirect's request too: within the endpoint's origin, or to one allowed. Another may be anywhere,
            # this machine or its network included, and would get the endpoint's headers (SPARQLNAV_HEADERS).
            event_hooks={"request": [OriginGuard(
                url,
                self.http.allowed_redirects,
                what="the endpoint",
                hint=" (SPARQLNAV_ALLOWED_REDIRECTS allows others)",
            )]},
        )

    def _unnamed(self, message: str) -> str:
        """A private engine's message without its address (its port says nothing to anyone else)."""
        netloc = httpx.URL(self.url).netloc.decode("ascii", "replace")
        return message.replace(self.url, "the local engine").replace(netloc, "the local engine")

    def _as_sent(self, sparql: str) -> str:
        """The text sent: a private engine's query with a neutral BASE when it sets none (NEUTRAL_BASE)."""
        if self._private and not _has_base(sparql):
            return f"BASE <{NEUTRAL_BASE}>\n{sparql}"
        return sparql

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> RemoteEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Run one query under the time, row and byte limits."""
        start = time.monotonic()
        limit = timeout_s if timeout_s is not None else self.limits.timeout_s
        try:
            sparql.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate (e.g. from a JSON "\ud800"): no engine can read it
            message = f"error at character {exc.start + 1}: U+{ord(sparql[exc.start]):04X} is a lone surrogate, not a character"
            return QueryResult(sparql, Outcome.SYNTAX_ERROR, message=message, endpoint=self.name)
        try:
            form = check_query(sparql, self.allowed_services, remote=self._remote_dialect, deadline=start + limit)
        except Unreadable as exc:
            # Not SPARQL as sparqlnav reads it: not run, and reported as the syntax error it is, with its place.
            return QueryResult(sparql, Outcome.SYNTAX_ERROR, message=exc.syntax_message(), endpoint=self.name)
        except Refused as exc:
            # The outcome already says "refused"; the message says why, so it is shown once.
            message = str(exc).removeprefix(f"{Outcome.REFUSED.value}: ")
            return QueryResult(sparql, Outcome.REFUSED, message=message, endpoint=self.name)
        result = self._run(sparql, form, start, start + limit, limit)
        result.seconds = time.monotonic() - start
        if self._private and result.message:
            result.message = self._unnamed(result.message)
        return result

    # The body of `query`, split so the local store can wrap it with process management.
    def _run(
        self, sparql: str, form: QueryForm, start: float, deadline: float, limit: float
    ) -> QueryResult:
        policy = RetryPolicy(self.http.retries, self.http.backoff_s, self.http.max_backoff_s)
        try:
            return with_retries(
                lambda _: self._attempt(sparql, form, deadline, limit),
                policy,
                time_left=lambda: deadline - time.monotonic(),
                sleep=self._sleep,
            )
        except GaveUp as exc:
            return QueryResult(sparql, Outcome.ENGINE_ERROR, message=exc.last.reason, endpoint=self.name)
        except (_Deadline, httpx.TimeoutException):
            return QueryResult(
                sparql,
                Outcome.TIMEOUT,
                message=f"the query did not finish within {limit:g} s",
                endpoint=self.name,
            )
        except OffOrigin as exc:
            return QueryResult(sparql, Outcome.UNREACHABLE, message=str(exc), endpoint=self.name)
        except (httpx.TransportError, RuntimeError) as exc:
            # RuntimeError: httpx's "client has been closed" when a restart replaced the client.
            return QueryResult(
                sparql,
                Outcome.UNREACHABLE,
                message=f"cannot reach {self.shown}: {type(exc).__name__}: {exc}".rstrip(": "),
                endpoint=self.name,
            )
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            return QueryResult(
                sparql, Outcome.ENGINE_ERROR, message=f"{type(exc).__name__}: {exc}", endpoint=self.name
            )

    def _request(self, sparql: str, form: QueryForm, deadline: float) -> httpx.Request:
        accept = (
            "application/sparql-results+json"
            if form in ("SELECT", "ASK")
            else "application/n-triples, text/plain;q=0.5"
        )
        headers = {"Accept": accept}
        remaining = max(0.1, deadline - time.monotonic())
        timeout = httpx.Timeout(remaining, connect=min(remaining, 10.0))
        # Servers limit URL length; judge by the encoded length, which non-ASCII text multiplies.
        encoded = len(quote(sparql, safe=""))
        use_get = self.http.method == "GET" or (self.http.method == "auto" and encoded < 2000)
        if use_get:
            # Merged, not replaced: the URL may carry protocol parameters such as `default-graph-uri` (how a
            # Virtuoso graph is queried without the system graphs its default graph also holds).
            url = httpx.URL(self.url).copy_merge_params({"query": sparql})
            return self._client.build_request("GET", url, headers=headers, timeout=timeout)
        headers["Content-Type"] = "application/sparql-query; charset=utf-8"
        return self._client.build_request(
            "POST", self.url, content=sparql.encode(), headers=headers, timeout=timeout
        )

    def _attempt(self, sparql: str, form: QueryForm, deadline: float, limit: float) -> QueryResult:
        sent = self._as_sent(sparql)
        request = self._request(sent, form, deadline)
        response = self._client.send(request, stream=True)
        # Per-read timeouts alone let a slowly streaming body run past the limit; close it at the deadline.
        ticket = _WATCHDOG.watch(deadline, response.close)
        try:
            if response.status_code in (429, 502, 503, 504):
                raise Retryable(
                    f"{self.shown} answered HTTP {response.status_code}",
                    asked=retry_after(response.headers),
                )
            if response.status_code >= 400:
                text = _read_text(response, 4000, deadline)
                message = _engine_message(text)[:1000] or f"HTTP {response.status_code}"
                if sent is not sparql:  # positions as in the query given, not the one with the BASE line before it
                    message = _ENGINE_POSITION.sub(lambda m: f"error at {int(m[1]) - 1}:{m[2]}", message)
                if _looks_like_syntax_error(response.status_code, text):
                    return QueryResult(
                        sparql, Outcome.SYNTAX_ERROR, message=message, endpoint=self.name
                    )
                if _looks_like_timeout(text) or response.status_code == 408:
                    return QueryResult(sparql, Outcome.TIMEOUT, message=message, endpoint=self.name)
                return QueryResult(
                    sparql,
                    Outcome.ENGINE_ERROR,
                    message=f"HTTP {response.status_code}: {message}",
                    endpoint=self.name,
                )
            reader = _CappedReader(
                response.iter_bytes(), self.limits.max_bytes, deadline, self.limits.max_row_bytes
            )
            if form in ("SELECT", "ASK"):
                return _engine_cuts(self._parse_results(sparql, response, reader), response.headers)
            return _engine_cuts(self._parse_graph(sparql, response, reader), response.headers)
        except (httpx.HTTPError, OSError, ValueError, RuntimeError):
            if time.monotonic() >= deadline:
                raise _Deadline() from None
            raise
        finally:
            _WATCHDOG.cancel(ticket)
            response.close()

    def _parse_results(
        self, sparql: str, response: httpx.Response, reader: _CappedReader
    ) -> QueryResult:
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        fmt = {
            "application/sparql-results+xml": ox.QueryResultsFormat.XML,
            "text/tab-separated-values": ox.QueryResultsFormat.TSV,
        }.get(ctype, ox.QueryResultsFormat.JSON)
        if fmt == ox.QueryResultsFormat.JSON:
            body = reader.read_all(WHOLE_JSON_BYTES)
            if reader.ended:
                return self._parse_json(sparql, body, reader)
            reader.unread(body)  # too long to hold whole: parsed row by row below
            del body
        buffered = io.BufferedReader(reader, buffer_size=65536)
        table = ResultTable()
        try:
            parsed = ox.parse_query_results(buffered, fmt)
            if isinstance(parsed, ox.QueryBoolean):
                return _finish(sparql, ResultTable(boolean=bool(parsed)), self.name)
            table.vars = [v.value for v in parsed.variables]
            reader.row_start = reader.handed
            for solution in parsed:
                if len(table.rows) >= self.limits.max_rows:
                    table.truncated, table.cap = True, f"max {self.limits.max_rows} rows"
                    break
                row = {v: Term.from_oxigraph(solution[v]) for v in table.vars if solution[v] is not None}
                if _row_bytes(row) > self.limits.max_row_bytes:
                    self._cut_row(table)
                    break
                table.rows.append(row)
                reader.row_start = reader.handed
        except SyntaxError as exc:
            if reader.hit_row_cap:
                self._cut_row(table)
            elif reader.hit_cap:
                table.truncated, table.cap = True, f"max {self.limits.max_bytes} bytes"
            else:
                tail = _tail_text(reader)
                if _looks_like_timeout(tail):
                    return QueryResult(
                        sparql, Outcome.TIMEOUT, message=tail.strip()[:500], endpoint=self.name
                    )
                return QueryResult(
                    sparql,
                    Outcome.ENGINE_ERROR,
                    message=f"could not read the endpoint's results: {exc}",
                    endpoint=self.name,
                )
        return _finish(sparql, table, self.name)

    def _cut_row(self, table: ResultTable) -> None:
        """Mark `table` cut at a row longer than the row cap (the rows before it stay)."""
        table.truncated, table.cap = True, f"max {self.limits.max_row_bytes} bytes per row"

    def _parse_json(self, sparql: str, body: bytes, reader: _CappedReader) -> QueryResult:
        """Complete SPARQL JSON results: parsed by the json module, which is faster than term-by-term streaming."""
        try:
            data = json.loads(body)
            if "boolean" in data:
                return _finish(sparql, ResultTable(boolean=bool(data["boolean"])), self.name)
            bindings = data["results"]["bindings"]
            table = ResultTable(vars=list(data.get("head", {}).get("vars") or []))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            # RecursionError: JSON nested beyond the parser's depth is garbled results, not a lost connection.
            tail = _tail_text(reader)
            if _looks_like_timeout(tail):
                return QueryResult(sparql, Outcome.TIMEOUT, message=tail.strip()[:500], endpoint=self.name)
            return QueryResult(
                sparql, Outcome.ENGINE_ERROR, message=f"could not read the endpoint's results: {exc}", endpoint=self.name
            )
        if len(bindings) > self.limits.max_rows:
            bindings = bindings[: self.limits.max_rows]
            table.truncated, table.cap = True, f"max {self.limits.max_rows} rows"
        try:
            for b in bindings:
                row = {k: _json_term(v) for k, v in b.items()}
                if _row_bytes(row) > self.limits.max_row_bytes:
                    self._cut_row(table)
                    break
                table.rows.append(row)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return QueryResult(sparql, Outcome.ENGINE_ERROR, message=f"malformed result term: {exc}", endpoint=self.name)
        return _finish(sparql, table, self.name)

    def _parse_graph(
        self, sparql: str, response: httpx.Response, reader: _CappedReader
    ) -> QueryResult:
        table = ResultTable(vars=["subject", "predicate", "object"])
        buffered = io.BufferedReader(reader, buffer_size=65536)
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        fmt = ox.RdfFormat.from_media_type(ctype) or ox.RdfFormat.N_TRIPLES
        try:
            for quad in ox.parse(buffered, fmt, lenient=True):
                if len(table.rows) >= self.limits.max_rows:
                    table.truncated, table.cap = True, f"max {self.limits.max_rows} rows"
                    break
                row = {
                    "subject": Term.from_oxigraph(quad.subject),
                    "predicate": Term.from_oxigraph(quad.predicate),
                    "object": Term.from_oxigraph(quad.object),
                }
                if _row_bytes(row) > self.limits.max_row_bytes:
                    self._cut_row(table)
                    break
                table.rows.append(row)
                reader.row_start = reader.handed
        except SyntaxError as exc:
            if reader.hit_row_cap:
                self._cut_row(table)
                return _finish(sparql, table, self.name)
            if not reader.hit_cap:
                return QueryResult(
                    sparql,
                    Outcome.ENGINE_ERROR,
                    message=f"could not read triples: {exc}",
                    endpoint=self.name,
                )
            table.truncated, table.cap = True, f"max {self.limits.max_bytes} bytes"
        return _finish(sparql, table, self.name)


_PLAIN_TYPES = ("http://www.w3.org/2001/XMLSchema#string", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString")


def _json_term(d: dict[str, Any]) -> Term:
    kind = d["type"]
    if kind in ("literal", "typed-literal"):
        dt = d.get("datatype")
        return Term("literal", d["value"], None if dt in _PLAIN_TYPES else dt, d.get("xml:lang"))
    if kind in ("uri", "bnode"):
        return Term(kind, d["value"])
    return Term.from_json(d)


class _Watchdog:
    """One background thread that calls a function when its deadline passes (cheaper than a timer per query)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._seq = 0
        self._thread: threading.Thread | None = None

    def watch(self, deadline: float, action: Callable[[], None]) -> int:
        """Schedule `action` at `deadline` (monotonic); returns a ticket for `cancel`."""
        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, action))
            self._live.add(self._seq)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="sparqlnav-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
            return self._seq

    def cancel(self, ticket: int) -> None:
        """Forget a scheduled action."""
        with self._cond:
            self._live.discard(ticket)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(timeout=5.0)
                    continue
                deadline, ticket, action = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(timeout=wait)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(ticket)
            with contextlib.suppress(Exception):
                action()


_WATCHDOG = _Watchdog()


def _finish(sparql: str, table: ResultTable, name: str) -> QueryResult:
    if table.is_empty and table.truncated:
        # Not "no rows": rows exist, and the first was already over a cap.
        message = f"the result was cut at a cap ({table.cap}) before its first complete row"
        return QueryResult(sparql, Outcome.CUT, table=table, message=message, endpoint=name)
    table.vars = star_order(sparql, table.vars)
    outcome = Outcome.EMPTY if table.is_empty else Outcome.OK
    return QueryResult(sparql, outcome, table=table, endpoint=name)


def _row_bytes(row: dict[str, Term]) -> int:
    """About how many bytes a row takes (its terms' text)."""
    return sum(len(t.value) + len(t.datatype or "") + len(t.lang or "") for t in row.values())


def star_order(sparql: str, result_vars: list[str]) -> list[str]:
    """For `SELECT *`, the result's variables in the order the query first names them (engines may
    choose any order, e.g. alphabetical); other queries keep the engine's (their projection's) order."""
    toks = tokens(sparql)
    words = [(i, t.text.upper()) for i, t in enumerate(toks) if t.kind == "word"]
    select = next((i for i, w in words if w == "SELECT"), None)
    if select is None:
        return result_vars
    projection = [t.text.upper() for t in toks[select + 1 : select + 3]]
    if projection[:1] in (["DISTINCT"], ["REDUCED"]):
        projection = projection[1:]
    if projection[:1] != ["*"]:
        return result_vars
    first_seen = {t.text[1:]: i for i, t in reversed(list(enumerate(toks))) if t.kind == "var"}
    return sorted(result_vars, key=lambda v: first_seen.get(v, len(toks)))


def _read_text(response: httpx.Response, limit: int, deadline: float) -> str:
    data = b""
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) >= limit or time.monotonic() > deadline:
            break
    return data[:limit].decode("utf-8", "replace")


def _tail_text(reader: _CappedReader) -> str:
    # Oxigraph reports a cancelled query inside an already-started 200 body.
    return reader.last.decode("utf-8", "replace")


def rows_as_dicts(result: QueryResult) -> list[dict[str, str]]:
    """Rows as variable → lexical value (for code that needs only strings; check `table.truncated` first)."""
    if result.table is None:
        return []
    return [{k: t.value for k, t in row.items()} for row in result.table.rows]


def as_mapping(headers: Iterable[str]) -> dict[str, str]:
    """Parse `Name: value` header strings (from the CLI) into a dict."""
    out: dict[str, str] = {}
    for h in headers:
        name, sep, value = h.partition(":")
        if not sep:
            raise ValueError(f"a header must look like 'Name: value', got {h!r}")
        out[name.strip()] = value.strip()
    return out
