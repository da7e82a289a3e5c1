"""Retries for HTTP clients: the server's Retry-After, exponential back-off, and an overall deadline.

Used by the SPARQL endpoint client and the LLM client, so both wait and give up by the same rules.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypeVar

from sparqlnav.errors import SparqlnavError

__all__ = ["GaveUp", "RetryPolicy", "Retryable", "retry_after", "with_retries"]

T = TypeVar("T")
GiveUpReason = Literal["attempts", "retry_after", "deadline"]


def retry_after(
    headers: Mapping[str, str], now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms or Retry-After), or None if it said nothing readable."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # an unreadable Retry-After: the caller's own back-off applies
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now()).total_seconds())


class Retryable(SparqlnavError):
    """An attempt failed in a way a later attempt may not; `asked` is the server's Retry-After, if any."""

    def __init__(self, reason: str, *, asked: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.asked = asked


class GaveUp(SparqlnavError):
    """No further attempt: out of attempts, the server asks to wait too long, or the deadline is near."""

    def __init__(self, why: GiveUpReason, last: Retryable, attempts: int, wait: float) -> None:
        super().__init__(last.reason)
        self.why = why
        self.last = last
        self.attempts = attempts
        self.wait = wait  # the wait that was not taken


@dataclass(frozen=True)
class RetryPolicy:
    """How many retries and how long to wait before each: `backoff_s * 2**n` capped at `max_backoff_s`.

    A server's Retry-After replaces our own wait. With `max_retry_after_s` set, a longer request gives
    up at once; without it the request is capped at `max_backoff_s` like our own waits.
    """

    retries: int
    backoff_s: float
    max_backoff_s: float
    max_retry_after_s: float | None = None

    def wait(self, retry: int, asked: float | None) -> float | None:
        """Seconds to wait before retry number `retry` (0 = the first), or None to give up."""
        if asked is None:
            return min(self.max_backoff_s, self.backoff_s * 2**retry)
        if self.max_retry_after_s is None:
            return min(self.max_backoff_s, asked)
        return asked if asked <= self.max_retry_after_s else None


def with_retries(
    attempt: Callable[[int], T],
    policy: RetryPolicy,
    *,
    time_left: Callable[[], float | None] = lambda: None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `attempt(1)`, `attempt(2)`, … while it raises Retryable; GaveUp when the policy ends it.

    `time_left` is the overall deadline (seconds, None = none): no wait is started that would reach it.
    """
    number = 1
    while True:
        try:
            return attempt(number)
        except Retryable as failure:
            wait = policy.wait(number - 1, failure.asked)
            if wait is None:
                raise GaveUp("retry_after", failure, number, failure.asked or 0.0) from failure
            if number > policy.retries:
                raise GaveUp("attempts", failure, number, wait) from failure
            left = time_left()
            if left is not None and left <= wait:
                raise GaveUp("deadline", failure, number, wait) from failure
        sleep(wait)
        number += 1
