"""The LLM errors: a request that failed for good, a budget used up, a reply that could not be used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparqlnav.errors import SparqlnavError

if TYPE_CHECKING:
    from sparqlnav.llm.messages import LLMReply


def one_line(text: str) -> str:
    """`text` on one line, as every LLM error message is written."""
    return " ".join(str(text).split())


class LLMError(SparqlnavError):
    """An LLM request failed for good; the message is one line a person can act on."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 0) -> None:
        super().__init__(one_line(message))
        self.status_code = status_code
        self.attempts = attempts


class BudgetExceeded(LLMError):
    """The run's LLM budget (calls, tokens or seconds) is used up; no request was sent."""


class LLMOutputError(LLMError):
    """The model answered, but not with what was asked for (e.g. JSON that fails the schema)."""

    reply: LLMReply | None = None  # the answer that could not be used, when there was one
