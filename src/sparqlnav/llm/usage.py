"""What LLM use adds up to: usage totals, one record per request, and a run's budget of calls, tokens and seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sparqlnav.llm.messages import LLMUsage

if TYPE_CHECKING:
    from sparqlnav.trace import Trace


@dataclass
class UsageTotals:
    """Running totals over many calls; cached replies count with their original tokens and cost."""

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    cached_calls: int = 0
    cost_known: bool = True  # False once any call had no price

    def add(self, usage: LLMUsage) -> None:
        """Count one call."""
        self.llm_calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cost_usd += usage.cost_usd
        self.seconds += usage.latency_s
        self.cached_calls += int(usage.cached)
        self.cost_known = self.cost_known and usage.cost_known

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return asdict(self)


CallOutcome = Literal["ok", "http_error", "timeout", "unreachable", "unparseable", "cached"]
# Outcomes of requests the server answered: the requests a run's usage counts.
SERVED_OUTCOMES: frozenset[CallOutcome] = frozenset({"ok", "http_error", "unparseable"})


@dataclass(frozen=True)
class CallRecord:
    """One request sent to the LLM server (each retry is its own), or one reply taken from the cache.

    `served` requests are those the server answered: a reply (`ok`), an HTTP error (`http_error`) or
    output that could not be used (`unparseable`); they are what usage counts. A `timeout` or an
    `unreachable` server got no answer, and a `cached` reply sent no request: these are recorded but
    not counted (a cache hit carries the tokens of the reply it replays, for information only).
    """

    purpose: str
    model: str
    attempt: int  # 1 for the first request of a call, 2 for its first retry, …
    outcome: CallOutcome
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    cost_known: bool = False
    status_code: int | None = None
    error: str | None = None

    @property
    def served(self) -> bool:
        """Whether the server answered this request (so usage counts it)."""
        return self.outcome in SERVED_OUTCOMES

    def event_data(self) -> dict[str, Any]:
        """The data of this request's `llm_call` trace event."""
        data = asdict(self)
        data.update(latency_s=round(self.latency_s, 4), served=self.served, cached=self.outcome == "cached")
        return {k: v for k, v in data.items() if v is not None}


# Receives every request a call sends; passed with each call so that a client shared by concurrent
# runs reports each request to the run that made it.
Recorder = Callable[[CallRecord], None]


def trace_recorder(trace: Trace) -> Recorder:
    """A recorder writing each request as an `llm_call` event of `trace` (which keeps the usage)."""

    def record(call: CallRecord) -> None:
        trace.emit("llm_call", **call.event_data())

    return record


@dataclass(frozen=True)
class CallReporter:
    """Reports the requests of one call to its recorder, if it has one."""

    record: Recorder | None
    purpose: str
    model: str
    priced: bool  # whether the model has a price: a request without usage then costs a known 0

    def __call__(
        self,
        attempt: int,
        outcome: CallOutcome,
        latency_s: float,
        *,
        usage: LLMUsage | None = None,
        model: str | None = None,
        status_code: int | None = None,
        error: str | None = None,
    ) -> None:
        if self.record is None:
            return
        u = usage or LLMUsage()
        self.record(
            CallRecord(
                purpose=self.purpose,
                model=model or self.model,
                attempt=attempt,
                outcome=outcome,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                latency_s=latency_s,
                cost_usd=u.cost_usd,
                cost_known=u.cost_known if usage is not None else self.priced,
                status_code=status_code,
                error=error,
            )
        )


@dataclass
class Budget:
    """Limits on one run's LLM use; a None limit is no limit. The clock starts at creation."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    calls: int = 0
    tokens: int = 0
    started_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.started_at = self.clock()

    def elapsed(self) -> float:
        """Seconds since the budget was created."""
        return self.clock() - self.started_at

    def remaining_seconds(self) -> float | None:
        """Seconds left, or None without a time limit."""
        return None if self.max_seconds is None else self.max_seconds - self.elapsed()

    def charge(self, usage: LLMUsage) -> None:
        """Count one call and its tokens."""
        self.calls += 1
        self.tokens += usage.input_tokens + usage.output_tokens

    def exceeded(self) -> str | None:
        """Why the budget is used up, or None while there is room for another call."""
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"LLM call budget used up ({self.calls} of {self.max_calls} calls)"
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"LLM token budget used up ({self.tokens} of {self.max_tokens} tokens)"
        remaining = self.remaining_seconds()
        if remaining is not None and remaining <= 0:
            return f"LLM time budget used up ({self.elapsed():.1f} of {self.max_seconds:g} s)"
        return None

