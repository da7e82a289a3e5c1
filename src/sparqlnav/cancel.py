"""Stopping a run from outside it: a per-run cancel signal, bound to the thread doing the run, that the steps of
a run check between steps and the HTTP clients (LLM, SPARQL) check between reads of a socket.

A signal is bound with `bound(signal)` for the duration of a run; code outside any run sees no signal and is
never cancelled. `cancellable_transport()` is the httpx transport that makes a blocking read notice the signal
within `POLL_S` seconds, so a request that gives up stops a hanging LLM call or SPARQL query at once (the
connection is closed) rather than when its own timeout ends.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from types import ModuleType
from typing import Any

import httpx

__all__ = ["POLL_S", "CancelSignal", "RunCancelled", "bound", "cancellable_transport", "check", "current"]

POLL_S = 0.2  # how often a blocking read looks at the signal


class RunCancelled(BaseException):
    """Raised inside a cancelled run (at its next step or socket read); a BaseException so strategies'
    `except Exception` handlers and the HTTP clients' error handling do not swallow it."""


class CancelSignal:
    """One run's stop flag: set once by whoever gave up on the run, read by the run's thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask the run to stop at its next step or read."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        """True once `cancel` was called."""
        return self._event.is_set()

    def check(self) -> None:
        """Raise RunCancelled when the run was cancelled."""
        if self._event.is_set():
            raise RunCancelled("the run was cancelled")


_CURRENT: ContextVar[CancelSignal | None] = ContextVar("sparqlnav_cancel_signal", default=None)


def current() -> CancelSignal | None:
    """The signal of the run this thread is doing, if any."""
    return _CURRENT.get()


def check() -> None:
    """Raise RunCancelled when the current run was cancelled (no run: nothing happens)."""
    signal = _CURRENT.get()
    if signal is not None:
        signal.check()


@contextlib.contextmanager
def bound(signal: CancelSignal) -> Iterator[CancelSignal]:
    """Make `signal` the current run's signal for the body of the `with`."""
    token = _CURRENT.set(signal)
    try:
        yield signal
    finally:
        _CURRENT.reset(token)


class _Stream:
    """A socket stream (httpcore's or its httpcore2 fork's) whose reads wait in short slices, checking the
    current run's signal between them."""

    def __init__(self, inner: Any, read_timeout: type[Exception]) -> None:
        self._inner = inner
        self._read_timeout = read_timeout

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        signal = _CURRENT.get()
        if signal is None:
            return bytes(self._inner.read(max_bytes, timeout))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            signal.check()  # the connection pool closes the connection on any exception: the server sees us go
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise self._read_timeout("timed out")
            try:
                return bytes(self._inner.read(max_bytes, POLL_S if left is None else min(left, POLL_S)))
            except self._read_timeout:
                # A read that timed out consumed nothing (plain sockets and TLS alike): wait again.
                continue

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        check()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> _Stream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, timeout), self._read_timeout)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    """A synchronous socket backend handing out cancellable streams."""

    def __init__(self, inner: Any, read_timeout: type[Exception]) -> None:
        self._inner = inner
        self._read_timeout = read_timeout

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> _Stream:
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _Stream(stream, self._read_timeout)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> _Stream:
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options), self._read_timeout)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def cancellable_transport(httpx_module: ModuleType = httpx, **options: Any) -> Any:
    """An HTTP transport of `httpx_module` (httpx, or the httpx2 fork the openai SDK uses; options as its
    HTTPTransport's) whose reads stop when the current run is cancelled."""
    transport = httpx_module.HTTPTransport(**options)
    pool = transport._pool  # the libraries offer no other way to give their pool a network backend
    core = sys.modules[type(pool).__module__.partition(".")[0]]  # httpcore or httpcore2
    if isinstance(pool, core.ConnectionPool):
        pool._network_backend = _Backend(pool._network_backend, core.ReadTimeout)
    return transport
