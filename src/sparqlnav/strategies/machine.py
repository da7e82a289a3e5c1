"""Answers in the machine shape (issue 14, item 7): any strategy's final query without the columns that only
label another projected entity, run again so its results are those of the query submitted. For scorers that
compare flat sets of values (the TEXT2SPARQL endpoint, `ask --machine`, `eval --machine`); people keep labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparqlnav.answer import Answer, Strategy
from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable
from sparqlnav.sparql.machine import MachineQuery, machine_query
from sparqlnav.tools.toolkit import TracedEndpoint
from sparqlnav.trace import Trace

if TYPE_CHECKING:
    from sparqlnav.context import RunContext


def machine_form(kg: KnowledgeGraph, sparql: str) -> MachineQuery:
    """The machine shape of a query over `kg` (its label predicates count as labels)."""
    return machine_query(sparql, label_predicates=kg.vocab.labels, prefixes=dict(kg.prefixes.items()))


def for_machines(answer: Answer, kg: KnowledgeGraph, trace: Trace) -> Answer:
    """The answer with its query (and a kept best guess) in the machine shape; the human query stays in
    `extra["human_sparql"]`. The new query is run once; if that fails, the label columns are dropped instead."""
    guess = answer.extra.get("best_guess")
    if isinstance(guess, dict) and isinstance(guess.get("sparql"), str):
        guess["sparql"] = machine_form(kg, guess["sparql"]).query
    if not answer.sparql:
        return answer
    shaped = machine_form(kg, answer.sparql)
    if not shaped.changed:
        return answer
    trace.emit("info", message="machine answer shape: dropped the label column(s) "
               + ", ".join("?" + v for v in shaped.dropped))
    table = answer.results
    if table is not None and answer.extra.get("endpoint"):
        table = _without(table, shaped.dropped)  # retrieve ran it on another endpoint: not run again here
    elif table is not None:
        result = TracedEndpoint(kg.endpoint, trace).query(shaped.query)
        ok = result.outcome in (Outcome.OK, Outcome.EMPTY) and result.table is not None
        table = result.table if ok and result.table is not None else _without(table, shaped.dropped)
    answer.extra["human_sparql"] = answer.sparql
    answer.sparql = shaped.query
    answer.results = table
    return answer


def _without(table: ResultTable, dropped: tuple[str, ...]) -> ResultTable:
    """The table without the dropped columns."""
    keep = [v for v in table.vars if v not in dropped]
    rows = [{k: t for k, t in row.items() if k in keep} for row in table.rows]
    return ResultTable(keep, rows, boolean=table.boolean, truncated=table.truncated, cap=table.cap)


@dataclass
class MachineShape:
    """A strategy whose answers come in the machine shape."""

    inner: Strategy
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.inner.name

    def run(self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None) -> Answer:
        """Answer with the wrapped strategy, then reshape its query for machines."""
        return for_machines(self.inner.run(question, kg, trace, context), kg, trace)

    def close(self) -> None:
        """Close the wrapped strategy when it holds resources."""
        close: Any = getattr(self.inner, "close", None)
        if callable(close):
            close()
