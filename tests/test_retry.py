"""The one retry module shared by the SPARQL endpoint and the LLM client."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sparqlnav.retry import GaveUp, Retryable, RetryPolicy, retry_after, with_retries

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def test_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "Wed, 01 Jan 2025 12:00:30 GMT"}, now=lambda: NOW) == 30.0
    assert retry_after({"retry-after": "Wed, 01 Jan 2025 11:00:00 GMT"}, now=lambda: NOW) == 0.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


def test_policy_backs_off_exponentially_and_treats_retry_after_by_its_limit() -> None:
    capped = RetryPolicy(retries=3, backoff_s=0.5, max_backoff_s=1.5)
    assert [capped.wait(n, None) for n in range(4)] == [0.5, 1.0, 1.5, 1.5]
    assert capped.wait(0, 600.0) == 1.5  # no limit on Retry-After: capped like our own waits
    strict = RetryPolicy(retries=3, backoff_s=1, max_backoff_s=2, max_retry_after_s=60)
    assert strict.wait(0, 45.0) == 45.0 and strict.wait(0, 61.0) is None


def test_with_retries_sleeps_between_attempts_and_gives_up_for_a_reason() -> None:
    slept: list[float] = []
    seen: list[int] = []

    def flaky(number: int) -> str:
        seen.append(number)
        if number < 3:
            raise Retryable(f"failure {number}")
        return "done"

    policy = RetryPolicy(retries=2, backoff_s=1, max_backoff_s=10)
    assert with_retries(flaky, policy, sleep=slept.append) == "done"
    assert seen == [1, 2, 3] and slept == [1, 2]

    def always(number: int) -> str:
        raise Retryable(f"failure {number}", asked=None)

    with pytest.raises(GaveUp) as out_of_attempts:
        with_retries(always, policy, sleep=slept.append)
    assert (out_of_attempts.value.why, out_of_attempts.value.attempts) == ("attempts", 3)
    assert str(out_of_attempts.value) == "failure 3"
    with pytest.raises(GaveUp) as near_deadline:
        with_retries(always, policy, time_left=lambda: 0.5, sleep=slept.append)
    assert (near_deadline.value.why, near_deadline.value.attempts, near_deadline.value.wait) == ("deadline", 1, 1)

    def far(number: int) -> str:
        raise Retryable("busy", asked=3600)

    strict = RetryPolicy(retries=5, backoff_s=1, max_backoff_s=10, max_retry_after_s=60)
    with pytest.raises(GaveUp) as too_long:
        with_retries(far, strict, sleep=slept.append)
    assert (too_long.value.why, too_long.value.wait) == ("retry_after", 3600)
