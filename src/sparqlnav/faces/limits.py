"""What a client may send, one set of rules for every face: the HTTP routes, the tool routes and MCP's tools all
check their inputs here, so a question, a query or a tool's argument has the same limits and the same short
messages wherever it comes in. Messages never repeat more than `ECHO_CHARS` of what a client sent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparqlnav.errors import SparqlnavError
from sparqlnav.tools.registry import Query, Tool

__all__ = [
    "ECHO_CHARS",
    "MAX_BODY_BYTES",
    "MAX_QUERY_CHARS",
    "MAX_QUESTION_CHARS",
    "InputLimits",
    "InputRefused",
    "shown",
]

MAX_QUESTION_CHARS = 2000  # a question, and any tool argument that is not SPARQL (names, identifiers)
MAX_QUERY_CHARS = 100_000  # a SPARQL query
# A request body: the longest query JSON-escaped (up to 6 bytes a character as \uXXXX) with room to spare.
MAX_BODY_BYTES = 1024 * 1024
ECHO_CHARS = 100  # the most of a client's input an error message repeats


class InputRefused(SparqlnavError, ValueError):
    """A client's input is over a limit or is not text; the message is one short line."""


def shown(value: object, limit: int = ECHO_CHARS) -> str:
    """`value` quoted for a message, cut to `limit` characters (saying how many more there were)."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text) - limit:,} more characters)"


def _lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate (JSON's "\\ud800" decodes to one; no UTF-8 can carry it), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


@dataclass(frozen=True)
class InputLimits:
    """How long questions and queries may be; the rules every face applies to what a client sends."""

    max_question_chars: int = MAX_QUESTION_CHARS
    max_query_chars: int = MAX_QUERY_CHARS

    def size(self, value: str, what: str, limit: int) -> str:
        """`value` when it has at most `limit` characters; InputRefused otherwise."""
        if len(value) > limit:
            raise InputRefused(f"{what} is too long ({len(value)} characters; the limit is {limit})")
        return value

    def text(self, value: str, what: str, limit: int) -> str:
        """`value` when it is text (no lone surrogate, which no UTF-8 can carry) of at most `limit` characters;
        InputRefused otherwise."""
        self.size(value, what, limit)
        at = _lone_surrogate(value)
        if at is not None:
            raise InputRefused(
                f"{what} is not valid text: character {at + 1} is a lone surrogate (U+{ord(value[at]):04X})"
            )
        return value

    def question(self, value: str, what: str = "question") -> str:
        """A question (or other words a person wrote), stripped; refused when empty, too long or not text."""
        text = self.text(value, what, self.max_question_chars).strip()
        if not text:
            raise InputRefused(f"{what} is empty")
        return text

    def query(self, value: str, what: str = "query") -> str:
        """A SPARQL query as given; refused when too long or not text (an empty one is the caller's to judge)."""
        return self.text(value, what, self.max_query_chars)

    def arguments(self, declared: Tool, arguments: Mapping[str, Any]) -> None:
        """A tool's arguments from a client: its SPARQL arguments within the query limit, every other text (a
        list's items together) within the question limit. Raises InputRefused."""
        sparql = {p.name for p in declared.params if p.annotation is Query}  # declared as "the SPARQL query"
        for name, value in arguments.items():
            texts = _texts(value)
            if name in sparql:
                for text in texts:
                    self.query(text, name)
            else:
                for text in texts:
                    self.text(text, name, self.max_question_chars)
                total = sum(len(t) for t in texts)
                if total > self.max_question_chars:
                    raise InputRefused(f"{name} is too long ({total} characters; the limit is {self.max_question_chars})")


def _texts(value: object) -> list[str]:
    """The strings in an argument's value (itself, or a list's items)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        return [v for v in value if isinstance(v, str)]
    return []
