"""Stopping a run from outside it: a per-run cancel signal, bound to the thread doing the run, that the steps of
a run check between steps and the HTTP clients (LLM, SPARQL: `sparqlnav.transport`) check between reads of a
socket.

A signal is bound with `bound(signal)` for the duration of a run; code outside any run sees no signal and is
never cancelled.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["CancelSignal", "RunCancelled", "bound", "check", "current"]


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
