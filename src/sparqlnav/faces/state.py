"""The server's state between requests: conversations, the rate limit's and the wrong-token allowance's counters,
and the run slots. One worker keeps them in its own memory (`LocalState`, as a single process always did); several
workers behind one port must share them, or a follow-up lands on a worker that never saw its conversation and a
client gets N times its rate limit. `faces.state_choice.open_state` picks the implementation from the settings
(SPARQLNAV_STATE_URL: Redis through `faces.redis_state`), and `create_app` is given the one it should use."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Protocol

from sparqlnav.conversation import Conversations, ConversationStore
from sparqlnav.errors import SparqlnavError
from sparqlnav.settings import Settings

__all__ = [
    "Limiter",
    "LocalSlots",
    "LocalState",
    "RateLimiter",
    "Slots",
    "StateStore",
    "StateUnavailable",
]


class StateUnavailable(SparqlnavError):
    """The shared state store cannot be reached (or answered with an error): requests that need it get a 503."""


class Limiter(Protocol):
    """A token bucket per client."""

    def wait(self, client: str) -> float:
        """The seconds until `client` may go ahead (0: now), taking nothing."""
        ...

    def take(self, client: str) -> float:
        """0 when the request may go ahead (one token taken), else the seconds to wait."""
        ...


class Slots(Protocol):
    """The run slots: at most `size` runs at once, counted wherever the store counts (one process, or all)."""

    size: int

    def acquire(self) -> str | None:
        """A ticket for one run, or None when every slot is taken."""
        ...

    def release(self, ticket: str) -> None:
        """Give a ticket's slot back (a ticket released twice frees one slot)."""
        ...

    def in_use(self) -> int:
        """Slots taken now."""
        ...


class StateStore(Protocol):
    """Where a server keeps what outlives a request."""

    @property
    def shared(self) -> bool:
        """Whether other processes see the same state (so several workers may serve one port)."""
        ...

    @property
    def description(self) -> str:
        """What it is, for logs and /health (no password)."""
        ...

    def conversations(self, settings: Settings) -> Conversations:
        """The conversations, bounded as the settings say."""
        ...

    def limiter(self, name: str, per_minute: float) -> Limiter:
        """The token buckets called `name` (a rate limit, the wrong-token allowance), `per_minute` a client."""
        ...

    def slots(self, size: int, hold_s: float) -> Slots:
        """`size` run slots; a ticket not released within `hold_s` (its worker died) is taken back."""
        ...

    def ping(self) -> None:
        """Raise StateUnavailable when the store cannot be used (the readiness check)."""
        ...

    def close(self) -> None:
        """Let go of connections."""
        ...


class RateLimiter:
    """A token bucket per client: `per_minute` requests a minute, bursts up to that many."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, per_minute)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()  # the guard runs on the event loop, MCP's tools in threads

    def _tokens(self, client: str, now: float) -> float:
        tokens, last = self._buckets.get(client, (self.capacity, now))
        return min(self.capacity, tokens + (now - last) * self.rate)

    def wait(self, client: str) -> float:
        """The seconds until `client` may go ahead (0: now), taking nothing."""
        with self._lock:
            tokens = self._tokens(client, self.clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def take(self, client: str) -> float:
        """0 when the request may go ahead, else the seconds to wait."""
        with self._lock:
            now = self.clock()
            if len(self._buckets) > 10_000:  # forget clients that have refilled completely
                self._buckets = {
                    k: v for k, v in self._buckets.items() if v[0] + (now - v[1]) * self.rate < self.capacity
                }
            tokens = self._tokens(client, now)
            if tokens < 1.0:
                self._buckets[client] = (tokens, now)
                return (1.0 - tokens) / self.rate
            self._buckets[client] = (tokens - 1.0, now)
            return 0.0


class LocalSlots:
    """Run slots counted in this process."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._held: set[str] = set()
        self._lock = threading.Lock()

    def acquire(self) -> str | None:
        """A ticket, or None when all `size` are held."""
        with self._lock:
            if len(self._held) >= self.size:
                return None
            ticket = uuid.uuid4().hex
            self._held.add(ticket)
            return ticket

    def release(self, ticket: str) -> None:
        """Give the ticket's slot back."""
        with self._lock:
            self._held.discard(ticket)

    def in_use(self) -> int:
        """Tickets held now."""
        with self._lock:
            return len(self._held)


class LocalState:
    """State in this process's memory (conversations optionally on disk under the home): one worker only."""

    shared = False
    description = "in-process"

    def conversations(self, settings: Settings) -> Conversations:
        """The in-process store (`SPARQLNAV_CONVERSATIONS=disk` writes them under the home too)."""
        return ConversationStore.from_settings(settings)

    def limiter(self, name: str, per_minute: float) -> Limiter:
        """A token bucket per client, in memory."""
        return RateLimiter(per_minute)

    def slots(self, size: int, hold_s: float) -> Slots:
        """Slots counted here (a thread that dies releases its ticket in a `finally`)."""
        return LocalSlots(size)

    def ping(self) -> None:
        """Always usable."""

    def close(self) -> None:
        """Nothing to let go of."""
