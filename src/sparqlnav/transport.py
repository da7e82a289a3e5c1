"""HTTP transports whose sockets keep two promises: a request ends at its overall deadline, however slowly
the server sends, and a request of a cancelled run stops waiting at once.

httpx's timeouts are per socket operation: a server that sends one byte every few seconds never trips them,
and a blocking read does not look at anything else while it waits. Here every connect, read and write of a
transport's connections is cut to the time left before the deadline set around the request
(`Deadline.within`), and reads wait in slices of `POLL_S`, checking the current run's cancel signal
(`sparqlnav.cancel`) between them; the connection pool closes the connection on either exception, so the server
sees the client go.

A response's size is counted after content decoding as well as on the wire: a gzip body of 1.46 MB decodes to
gigabytes. The transport decodes gzip and deflate itself, in pieces of at most `DECODE_PIECE` bytes, counts what they
make and stops at the cap (`max_response_bytes`); the response then says no Content-Encoding, so nothing decodes it
again. A body in any other encoding is refused, as nothing could bound its decoding.

The OpenAI SDK is built on httpx (openai 1.x) or on its fork httpx2 (openai 3.x), which share the API:
`sdk_http()` names the one the installed SDK uses, `guarded_transport(http)` makes a transport of either.
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import import_module
from types import ModuleType
from typing import Any

import httpx

from sparqlnav.cancel import check as check_cancelled
from sparqlnav.cancel import current as current_signal

__all__ = ["DECODE_PIECE", "POLL_S", "TOO_LARGE", "Deadline", "guarded_transport", "sdk_http"]

POLL_S = 0.2  # how often a waiting read looks at the run's cancel signal
TOO_LARGE = "the response is larger than"  # the start of a capped read's error message
DECODE_PIECE = 64 * 1024  # the most one step of decoding makes: what a compressed body costs beyond the cap
# zlib's window bits: a gzip header (16 + 15) or a zlib one (15); raw deflate (-15) for servers that send no header.
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
# What requests say they accept: httpx would add br and zstd when their packages are installed.
ACCEPTED_ENCODINGS = "gzip, deflate"

# The connection library under each HTTP client library.
_CORE = {"httpx": "httpcore", "httpx2": "httpcore2"}


class Deadline:
    """When the request in progress in this context (thread) must end; shared by concurrent callers."""

    def __init__(self) -> None:
        self._at: ContextVar[float | None] = ContextVar("deadline", default=None)

    @contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Requests sent in this block (in this thread) end `seconds` from now."""
        token = self._at.set(time.monotonic() + seconds)
        try:
            yield
        finally:
            self._at.reset(token)

    def cut(self, timeout: float | None, late: type[Exception]) -> float | None:
        """`timeout` shortened to the time left; `late` is raised when no time is left."""
        at = self._at.get()
        if at is None:
            return timeout
        left = at - time.monotonic()
        if left <= 0:
            raise late("the request's overall deadline has passed")
        return left if timeout is None else min(timeout, left)


_NO_DEADLINE = Deadline()  # never set: timeouts pass through unchanged


class _Stream:
    """A connection (httpcore's NetworkStream) whose socket operations keep the deadline and whose reads notice
    a cancelled run."""

    def __init__(self, inner: Any, deadline: Deadline, core: ModuleType, cap: int | None = None) -> None:
        self._inner, self._deadline, self._core, self._cap = inner, deadline, core, cap
        self._read = 0  # bytes read since the request was written: its response, however the body is framed

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Read, waiting no longer than the deadline allows, stopping when the run is cancelled or the response
        passes the cap."""
        data = self._read_within(max_bytes, timeout)
        self._read += len(data)
        if self._cap is not None and self._read > self._cap:
            raise self._core.ReadError(f"{TOO_LARGE} {self._cap:,} bytes")
        return data

    def _read_within(self, max_bytes: int, timeout: float | None) -> bytes:
        timeout = self._deadline.cut(timeout, self._core.ReadTimeout)
        if current_signal() is None:
            return bytes(self._inner.read(max_bytes, timeout))
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            check_cancelled()
            left = None if until is None else until - time.monotonic()
            if left is not None and left <= 0:
                raise self._core.ReadTimeout("timed out")
            try:
                return bytes(self._inner.read(max_bytes, POLL_S if left is None else min(left, POLL_S)))
            except self._core.ReadTimeout:
                continue  # a read that timed out consumed nothing (plain sockets and TLS alike): wait again

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Write, waiting no longer than the deadline allows."""
        check_cancelled()
        self._read = 0  # a new request on a kept-alive connection: its response is counted afresh
        self._inner.write(buffer, self._deadline.cut(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        """Close the socket."""
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> _Stream:
        """TLS over this connection, the handshake ending by the deadline."""
        cut = self._deadline.cut(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, cut), self._deadline, self._core, self._cap)

    def get_extra_info(self, info: str) -> Any:
        """What the socket says (the pool asks whether an idle connection is still usable)."""
        return self._inner.get_extra_info(info)


class _Backend:
    """Opens connections as httpcore does, wrapped to keep the deadline and notice cancellation."""

    def __init__(self, inner: Any, deadline: Deadline, core: ModuleType, cap: int | None) -> None:
        self._inner, self._deadline, self._core, self._cap = inner, deadline, core, cap

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        """Connect, waiting no longer than the deadline allows."""
        check_cancelled()
        cut = self._deadline.cut(timeout, self._core.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, cut, local_address, socket_options)
        return _Stream(stream, self._deadline, self._core, self._cap)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> _Stream:
        """Connect to a local socket, waiting no longer than the deadline allows."""
        cut = self._deadline.cut(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, cut, socket_options), self._deadline, self._core, self._cap)

    def sleep(self, seconds: float) -> None:
        """Sleep (between the pool's own connection retries)."""
        self._inner.sleep(seconds)


def _inflate(pieces: Iterable[bytes], coding: str, fail: Callable[[str], Exception]) -> Iterator[bytes]:
    """`pieces` of a body in one content coding, decoded in pieces of at most DECODE_PIECE bytes."""
    decoder = zlib.decompressobj(_WBITS[coding])
    first = True
    for piece in pieces:
        data = piece
        while data:
            try:
                out = decoder.decompress(data, DECODE_PIECE)
            except zlib.error as exc:
                if not (first and coding == "deflate"):
                    raise fail(f"the response's {coding} body is corrupt ({exc})") from None
                decoder = zlib.decompressobj(-zlib.MAX_WBITS)  # deflate without its zlib header, as httpx reads it
                first = False
                continue
            first = False
            data = decoder.unconsumed_tail
            if out:
                yield out
    try:
        tail = decoder.flush()
    except zlib.error as exc:
        raise fail(f"the response's {coding} body is corrupt ({exc})") from None
    if tail:
        yield tail


class _Decoded:
    """A response body decoded from its content codings (last applied, first undone), counted, and stopped at
    the cap; closing it closes the connection's stream. (Made a SyncByteStream of its library by `_decoded_class`.)"""

    def __init__(self, inner: Any, codings: list[str], cap: int | None, http: ModuleType, request: Any) -> None:
        self._inner, self._codings, self._cap, self._http, self._request = inner, codings, cap, http, request
        self.decoded = 0  # bytes made so far

    def _fail(self, message: str) -> Exception:
        return self._http.DecodingError(message, request=self._request)

    def __iter__(self) -> Iterator[bytes]:
        pieces: Iterable[bytes] = self._inner
        for coding in reversed(self._codings):
            pieces = _inflate(pieces, coding, self._fail)
        for piece in pieces:
            self.decoded += len(piece)
            if self._cap is not None and self.decoded > self._cap:
                raise self._http.ReadError(f"{TOO_LARGE} {self._cap:,} bytes once decoded", request=self._request)
            yield piece

    def close(self) -> None:
        """Close the undecoded stream (and its connection)."""
        self._inner.close()


@functools.cache
def _decoded_class(http: ModuleType) -> type[_Decoded]:
    """`_Decoded` as a SyncByteStream of `http` (httpx or httpx2), which clients check responses' streams against."""
    return type("_Decoded", (_Decoded, http.SyncByteStream), {})


class _DecodingTransport:
    """A transport whose responses arrive decoded from gzip and deflate, counted after decoding (see the module's
    docstring); any other content coding is refused."""

    def __init__(self, inner: Any, http: ModuleType, cap: int | None) -> None:
        self._inner, self._http, self._cap = inner, http, cap

    def handle_request(self, request: Any) -> Any:
        """Send `request`, asking only for the encodings read here; the response's body is decoded here, within the
        cap."""
        request.headers["Accept-Encoding"] = ACCEPTED_ENCODINGS
        response = self._inner.handle_request(request)
        codings = [c.strip().lower() for c in response.headers.get_list("content-encoding", split_commas=True)]
        codings = [c for c in codings if c not in ("", "identity")]
        if not codings:
            return response
        unknown = [c for c in codings if c not in _WBITS]
        if unknown:
            response.close()
            raise self._http.DecodingError(
                f"the response is encoded as {unknown[0][:40]!r}, which sparqlnav does not read", request=request
            )
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in (b"content-encoding", b"content-length")]
        return self._http.Response(
            response.status_code,
            headers=headers,
            stream=_decoded_class(self._http)(response.stream, codings, self._cap, self._http, request),
            extensions=response.extensions,
        )

    def close(self) -> None:
        """Close the connections."""
        self._inner.close()

    def __enter__(self) -> _DecodingTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def guarded_transport(
    http: ModuleType = httpx, deadline: Deadline | None = None, *, max_response_bytes: int | None = None, **options: Any
) -> Any:
    """`http.HTTPTransport(**options)` (httpx or httpx2) whose connections keep `deadline` (if any), notice a
    cancelled run, and, with `max_response_bytes`, fail a response that passes that size (headers included) on the
    wire or once decoded; bodies are decoded in bounded pieces whatever the cap."""
    core = import_module(_CORE[http.__name__])
    transport = http.HTTPTransport(**options)
    pool = transport._pool  # the libraries offer no other way to give their pool a network backend
    if isinstance(pool, core.ConnectionPool):
        pool._network_backend = _Backend(pool._network_backend, deadline or _NO_DEADLINE, core, max_response_bytes)
    return _DecodingTransport(transport, http, max_response_bytes)


def sdk_http() -> ModuleType:
    """The HTTP library the installed OpenAI SDK is built on (httpx or httpx2)."""
    import openai

    client_class = next(c for c in openai.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
    return import_module(client_class.__module__.partition(".")[0])
