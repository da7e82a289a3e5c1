"""What every strategy returns, and the protocol strategies implement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable
from sparqlnav.trace import Trace

Status = Literal["answered", "not_found", "budget_exhausted", "error"]


@dataclass
class Answer:
    """The outcome of asking one question: the final query, its results, a short answer and the trace."""

    question: str
    strategy: str
    sparql: str | None
    results: ResultTable | None
    answer: str
    trace: Trace
    status: Status = "answered"
    confidence: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `ask --json` object of DESIGN.md."""
        usage = self.trace.usage.to_json()
        return {
            "question": self.question,
            "strategy": self.strategy,
            "sparql": self.sparql,
            "results": self.results.to_sparql_json() if self.results is not None else None,
            "answer": self.answer,
            "status": self.status,
            "confidence": self.confidence,
            "error": self.error,
            "trace": self.trace.to_json(),
            "usage": usage,
            **({"extra": self.extra} if self.extra else {}),
        }


class Strategy(Protocol):
    """A way of answering questions over a KG; every strategy records its steps in the trace it is given."""

    name: str

    def run(self, question: str, kg: KnowledgeGraph, trace: Trace) -> Answer:
        """Answer one question."""
        ...
