"""HTTP transports whose sockets keep two promises: a request ends at its overall deadline, however slowly
the server sends, and a request of a cancelled run stops waiting at once.

httpx's timeouts are per socket operation: a server that sends one byte every few seconds never trips them,
and a blocking read does not look at anything else while it waits. Here every connect, read and write of a
transport's connections is cut to the time left before the deadline set around the request
(`Deadline.within`), and reads wait in slices of `POLL_S`, checking the current run's cancel signal
(`sparqlnav.cancel`) between them; the connection pool closes the connection on either exception, so the server
sees the client go.

The OpenAI SDK is built on httpx (openai 1.x) or on its fork httpx2 (openai 3.x), which share the API:
`sdk_http()` names the one the installed SDK uses, `guarded_transport(http)` makes a transport of either.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import import_module
from types import ModuleType
from typing import Any

import httpx

from sparqlnav.cancel import check as check_cancelled
from sparqlnav.cancel import current as current_signal

__all__ = ["POLL_S", "TOO_LARGE", "Deadline", "guarded_transport", "sdk_http"]

POLL_S = 0.2  # how often a waiting read looks at the run's cancel signal
TOO_LARGE = "the response is larger than"  # the start of a capped read's error message

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


def guarded_transport(
    http: ModuleType = httpx, deadline: Deadline | None = None, *, max_response_bytes: int | None = None, **options: Any
) -> Any:
    """`http.HTTPTransport(**options)` (httpx or httpx2) whose connections keep `deadline` (if any), notice a
    cancelled run, and, with `max_response_bytes`, fail a response that passes that size (headers included)."""
    core = import_module(_CORE[http.__name__])
    transport = http.HTTPTransport(**options)
    pool = transport._pool  # the libraries offer no other way to give their pool a network backend
    if isinstance(pool, core.ConnectionPool):
        pool._network_backend = _Backend(pool._network_backend, deadline or _NO_DEADLINE, core, max_response_bytes)
    return transport


def sdk_http() -> ModuleType:
    """The HTTP library the installed OpenAI SDK is built on (httpx or httpx2)."""
    import openai

    client_class = next(c for c in openai.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
    return import_module(client_class.__module__.partition(".")[0])
