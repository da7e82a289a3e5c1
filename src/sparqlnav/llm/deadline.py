"""HTTP requests that end at an overall deadline, however slowly the server sends.

httpx's timeouts are per socket operation: a server that sends one byte every few seconds never trips
them. Here every connect, read and write of a transport's connections is cut to the time left before
the deadline set around the request (`Deadline.within`), so the request ends when its time is up, with
the HTTP library's own timeout exceptions.

The OpenAI SDK is built on httpx (openai 1.x) or on its successor httpx2 (openai 3.x), which have the
same API; `sdk_transport` makes the transport for whichever the installed SDK uses.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import import_module
from types import ModuleType
from typing import Any

__all__ = ["Deadline", "deadline_transport", "sdk_transport"]

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


class _Stream:
    """A connection whose every socket operation ends by the deadline (httpcore's NetworkStream)."""

    def __init__(self, inner: Any, deadline: Deadline, core: ModuleType) -> None:
        self._inner, self._deadline, self._core = inner, deadline, core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Read, waiting no longer than the deadline allows."""
        data: bytes = self._inner.read(max_bytes, self._deadline.cut(timeout, self._core.ReadTimeout))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Write, waiting no longer than the deadline allows."""
        self._inner.write(buffer, self._deadline.cut(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        """Close the socket."""
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> _Stream:
        """TLS over this connection, the handshake ending by the deadline."""
        cut = self._deadline.cut(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, cut), self._deadline, self._core)

    def get_extra_info(self, info: str) -> Any:
        """What the socket says (the pool asks whether an idle connection is still usable)."""
        return self._inner.get_extra_info(info)


class _Backend:
    """Opens connections as httpcore does, wrapped to keep the deadline (httpcore's NetworkBackend)."""

    def __init__(self, deadline: Deadline, core: ModuleType) -> None:
        self._inner, self._deadline, self._core = core.SyncBackend(), deadline, core

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        """Connect, waiting no longer than the deadline allows."""
        cut = self._deadline.cut(timeout, self._core.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, cut, local_address, socket_options)
        return _Stream(stream, self._deadline, self._core)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> _Stream:
        """Connect to a local socket, waiting no longer than the deadline allows."""
        cut = self._deadline.cut(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, cut, socket_options), self._deadline, self._core)

    def sleep(self, seconds: float) -> None:
        """Sleep (between the pool's own connection retries)."""
        self._inner.sleep(seconds)


def deadline_transport(deadline: Deadline, http: ModuleType) -> Any:
    """`http.HTTPTransport` (httpx or httpx2) whose connections keep `deadline`; httpx's default limits."""
    core = import_module(_CORE[http.__name__])
    transport = http.HTTPTransport()
    # The transport's pool is the one place its sockets are opened; it is replaced by an equal pool
    # (httpx's default limits) whose sockets keep the deadline. Exceptions and responses stay httpx's.
    transport._pool.close()
    transport._pool = core.ConnectionPool(
        ssl_context=http.create_ssl_context(),
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        network_backend=_Backend(deadline, core),
    )
    return transport


def sdk_transport(deadline: Deadline) -> tuple[ModuleType, Any]:
    """The HTTP library the installed OpenAI SDK is built on, and a transport of it keeping `deadline`."""
    import openai

    client_class = next(c for c in openai.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
    http = import_module(client_class.__module__.partition(".")[0])
    return http, deadline_transport(deadline, http)
