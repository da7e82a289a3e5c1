"""What every strategy returns, the protocol strategies implement, and the one way a question is run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable
from sparqlnav.trace import Trace, Usage

if TYPE_CHECKING:
    from sparqlnav.context import RunContext

Status = Literal["answered", "not_found", "budget_exhausted", "error"]


@dataclass
class Answer:
    """The outcome of asking one question: the final query (SPARQL, or SQL for the SQL builder: `sql`), its results,
    a short answer text and the trace."""

    question: str
    strategy: str
    sparql: str | None
    results: ResultTable | None
    text: str
    trace: Trace
    status: Status = "answered"
    confidence: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sql: str | None = None  # the final SQL when the answer was built in SQL (then `sparql` is None)

    @property
    def query(self) -> str | None:
        """The final query, whichever its language."""
        return self.sql if self.sql is not None else self.sparql

    @property
    def query_language(self) -> str:
        """"SQL" or "SPARQL": what `query` is written in."""
        return "SQL" if self.sql is not None else "SPARQL"

    @property
    def text_beside_query(self) -> str:
        """The words for a face that shows the final query beside them (the web UI, `ask -v`): without the query
        the text may repeat for faces that show only words (`extra["text_beside_query"]`, else the text)."""
        return str(self.extra.get("text_beside_query") or self.text)

    @property
    def llm_failures(self) -> list[str]:
        """What the LLM failed to do while the run went on without it, in words: an answer check not made (the
        stage's own bar decided), one line each; a run the LLM's failure ended is an error and says so itself."""
        return [str(e.data.get("text", "")) for e in self.trace.of_kind("check") if e.data.get("verdict") == "not made"]

    @property
    def usage(self) -> Usage:
        """What the run cost (LLM calls and tokens, SPARQL queries, seconds), from its trace."""
        return self.trace.usage

    def to_json(self) -> dict[str, Any]:
        """The `ask --json` object of DESIGN.md (the text under the key "answer")."""
        usage = self.usage.to_json()
        return {
            "question": self.question,
            "strategy": self.strategy,
            "sparql": self.sparql,
            **({"sql": self.sql} if self.sql is not None else {}),
            "results": self.results.to_sparql_json() if self.results is not None else None,
            "answer": self.text,
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

    def run(
        self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None
    ) -> Answer:
        """Answer one question; `context` holds earlier turns of its conversation and any handover."""
        ...


def run_question(
    strategy: Strategy,
    question: str,
    kg: KnowledgeGraph,
    trace: Trace | None = None,
    context: RunContext | None = None,
) -> Answer:
    """Run one question with a strategy over an open KG, with the context of its conversation if any; the trace
    (new by default) gets its total time even on error."""
    trace = Trace() if trace is None else trace
    if context:
        trace.emit(
            "context",
            turns=len(context.history),
            handover=context.handover.strategy if context.handover else None,
            text=context.to_prompt(),
            summary=context.summary(),
        )
    try:
        if not getattr(strategy, "in_sql", False):
            kg.sparql_ready()  # a database's graph copy, made now for a strategy that writes SPARQL
        return strategy.run(question, kg, trace, context)
    finally:
        trace.finish()
