"""The `auto` strategy: a cascade that pays for a stronger strategy only when the cheaper answer is not
trustworthy. Lexical first (no LLM) when it is confident and one short LLM check (`check.AnswerCheck`) says its
query answers the question; else retrieve (SPARQL-LLM, a few calls) when the KG has or can build a retrieval
index; explore (SPINACH) when the evidence says the answer before it is not to be trusted: an empty or failed
query, validator issues left after the fixes, a result that does not fit what the question asks for (a count,
yes/no, a date, one thing), or the model saying it is unsure (`check.evidence_doubt`, the same for every stage).
Each move is an `escalate` event in the run's one trace, and hands what was learned to the next stage
(`context.Handover`): the reason in words, the query, and the values it gave.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparqlnav.answer import Answer, Strategy
from sparqlnav.context import EMPTY, Handover, RunContext
from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.relational import relational_of
from sparqlnav.graph.results import ResultTable
from sparqlnav.llm import LLMConfig
from sparqlnav.question.fit import asks_for_one, projection_mismatch
from sparqlnav.retrieval.indexes import index_errors
from sparqlnav.settings import CascadeSettings, Settings
from sparqlnav.strategies import lexical as lexical_module
from sparqlnav.strategies.check import AnswerCheck, Doubt, evidence_doubt, lexical_doubt, shown_rows
from sparqlnav.trace import Trace

if TYPE_CHECKING:  # imported when the cascade is built with an LLM: without one, lexical alone runs (and starts fast)
    from sparqlnav.strategies import retrieve as retrieve_module

ARROW = "→"
HANDOVER_ENTITIES = 12  # labelled IRIs a handover names: enough to start from, few enough to read
_IRI = re.compile(r"<([^<>\s]+)>")
_PNAME = re.compile(r"(?<![\w<?$])([A-Za-z][\w-]*):([A-Za-z_][\w-]*)")
_PREFIX_DECL = re.compile(r"(?im)^\s*PREFIX\s+([\w-]*):\s*<([^>]*)>")


def outcome_of(answer: Answer) -> str:
    """What a stage's query gave, in a few words, for a handover."""
    if answer.status == "error":
        return answer.error or answer.text
    table = answer.results
    if table is None and not answer.sparql:
        # A guess kept aside (lexical below its threshold) did run: say what it gave, not "no rows".
        guess = answer.extra.get("best_guess")
        results = guess.get("results") if isinstance(guess, dict) else None
        if isinstance(results, dict) and isinstance(results.get("boolean"), bool):
            # an ASK gives yes or no, not "1 row" (relay players could not tell what it had said)
            return f"{'yes' if results['boolean'] else 'no'}, but the strategy was not sure it answers the question"
        rows = _guess_rows(results)
        if rows is not None:
            return f"{rows} row(s), but the strategy was not sure they answer the question" if rows else "no rows"
    if table is None or table.is_empty:
        return "no rows"
    if table.boolean is not None:
        return "yes" if table.boolean else "no"
    if answer.strategy == "lexical":
        return f"{len(table.rows)} row(s)"  # its sentence only repeats the rows, which the handover shows
    return f"{len(table.rows)} row(s); its explanation: {answer.text}"


def result_of(answer: Answer) -> ResultTable | None:
    """The rows a stage's query gave: its answer's, or those of the best guess it kept aside when not sure."""
    if answer.results is not None:
        return answer.results
    guess = answer.extra.get("best_guess")
    results = guess.get("results") if isinstance(guess, dict) else None
    return ResultTable.from_sparql_json(results) if isinstance(results, dict) else None


def rows_of(answer: Answer, kg: KnowledgeGraph) -> str:
    """A stage's first rows with labels for a handover ('' for no rows or a yes/no, which `outcome_of` says)."""
    table = result_of(answer)
    if table is None or table.is_empty or table.is_boolean:
        return ""
    return shown_rows(table, kg)


def _guess_rows(results: object) -> int | None:
    """How many rows (or 1 for a yes/no) a best guess's SPARQL JSON results hold; None when unknown."""
    if not isinstance(results, dict):
        return None
    if "boolean" in results:
        return 1
    bindings = (results.get("results") or {}).get("bindings")
    return len(bindings) if isinstance(bindings, list) else None


def _guess_sparql(answer: Answer) -> str | None:
    """The query a stage ended with: its answer's, or the best guess it kept aside when not sure."""
    if answer.sparql:
        return answer.sparql
    guess = answer.extra.get("best_guess")
    if isinstance(guess, dict):
        guess = guess.get("sparql")
    return guess if isinstance(guess, str) and guess.strip() else None


def named_entities(kg: KnowledgeGraph, queries: Iterable[str | None]) -> tuple[tuple[str, str], ...]:
    """The IRIs the queries name that have labels, as (IRI as the KG's prefixes show it, label)."""
    iris: list[str] = []
    for query in queries:
        if not query:
            continue
        declared = {p: ns for p, ns in _PREFIX_DECL.findall(query)}
        prefixes = kg.prefixes.merged(declared)
        body = _PREFIX_DECL.sub("", query)
        found = [m.group(1) for m in _IRI.finditer(body)]
        found += [iri for m in _PNAME.finditer(_IRI.sub(" ", body)) if (iri := prefixes.expand(m.group(0)))]
        iris += [i for i in dict.fromkeys(found) if i not in iris]  # a property used twice is named once
    if not iris:
        return ()
    labels = kg.names.labels_of(iris)
    return tuple((kg.prefixes.compact(i), labels[i]) for i in iris if i in labels)[:HANDOVER_ENTITIES]


@dataclass
class Stage:
    """One strategy the cascade ran, what it answered, and why that was not trusted (None: trusted)."""

    name: str
    answer: Answer
    distrust: Doubt | None


@dataclass
class Auto:
    """The cascade: lexical → retrieve → explore, each stage only when the one before is not trusted."""

    lexical: Strategy
    explore: Strategy
    retrieve: retrieve_module.Retrieve | None = None
    options: CascadeSettings = field(default_factory=CascadeSettings)
    budget_s: float | None = None  # the question's LLM seconds, shared by every stage (None: each stage its own)
    # The LLM check of a lexical answer before it is kept (None: lexical's own threshold decides, as without an LLM).
    check: AnswerCheck | None = None
    name: str = "auto"
    # On a database (issue 35): the SQL writer, then the step-by-step SQL builder, on the live database; nothing is
    # copied into a graph store. `target="sparql"` keeps the SPARQL cascade over the database's mapped copy.
    sql_writer: Strategy | None = None
    sql_builder: Strategy | None = None
    target: str = "auto"
    # On a database up to this many rows lexical runs first, on its graph copy (0: the SQL writer first).
    lexical_max_rows: int = 0

    def run(
        self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None
    ) -> Answer:
        """Answer with the cheapest stage whose answer the evidence does not contradict."""
        context = context if context is not None else EMPTY
        if self.budget_s is not None and context.deadline is None:
            # One LLM time budget for the question, not one per stage: a stage gets what the earlier ones left.
            context = dataclasses.replace(context, deadline=time.monotonic() + self.budget_s)
        if self.sql_writer is not None and self.target != "sparql" and relational_of(kg) is not None:
            return self._in_sql(question, kg, trace, context)
        stages: list[Stage] = []
        if context.history:
            # Lexical reads the question's own words only; a follow-up ("her email") needs the earlier turns.
            trace.emit("info", message="a follow-up question: the lexical stage is skipped (it cannot read "
                                       "earlier turns)")
        else:
            answer = self.lexical.run(question, kg, trace, context)
            doubt, confirmed = self._lexical_doubt(answer, question, kg, trace, context)
            sure = answer.extra.get("sentence")
            if confirmed and isinstance(sure, str) and sure:
                # A model read it: the hedge lexical puts on an answer no model read is no longer needed.
                extra = {k: v for k, v in answer.extra.items() if k != "text_beside_query"}  # the hedge, too
                answer = dataclasses.replace(answer, text=sure, extra=extra)
            stages.append(Stage("lexical", answer, doubt))
            if stages[-1].distrust is None:
                return self._final(stages)
        if self.retrieve is not None and self._has_index(kg, trace):
            answer = self._escalate(stages, "retrieve", self.retrieve, question, kg, trace, context)
            stages.append(Stage("retrieve", answer, evidence_doubt(answer, question, self.options.singular_rows)))
            if stages[-1].distrust is None:
                return self._final(stages)
            if _llm_failed(answer, trace):
                # Explore needs the same LLM: asking it again only waits again. What lexical found is kept.
                return self._without_llm(stages)
        answer = self._escalate(stages, "explore", self.explore, question, kg, trace, context)
        stages.append(Stage("explore", answer, None))  # the last stage's answer is the answer
        return self._final(stages)

    @property
    def in_sql(self) -> bool:
        """Whether a database is answered in SQL (no graph copy is made for it)."""
        return self.sql_writer is not None and self.target != "sparql"

    def _in_sql(self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext) -> Answer:
        """A database answered where it lives: lexical on its small graph copy when it reads the question (its own
        bar, then the answer check), else the SQL writer, and the builder when the writer's answer is not trusted,
        with the reason and the writer's SQL in its first request (a follow-up continues in SQL: both read the
        turns)."""
        assert self.sql_writer is not None
        stages: list[Stage] = []
        if self._lexical_on_copy(kg, trace, context):
            read = self.lexical.run(question, kg, trace, context)
            doubt, confirmed = self._lexical_doubt(read, question, kg, trace, context)
            sure = read.extra.get("sentence")
            if confirmed and isinstance(sure, str) and sure:
                read = dataclasses.replace(read, text=sure)
            stages.append(Stage("lexical", read, doubt))
            if doubt is None:
                return self._final(stages)
            trace.emit("escalate", reason=str(doubt), check=doubt.check, sparql=read.sparql,
                       **{"from": "lexical", "to": "sql"})
        answer = self.sql_writer.run(question, kg, trace, context)
        stages.append(Stage("sql", answer, evidence_doubt(answer, question, self.options.singular_rows)))
        if stages[-1].distrust is None or self.sql_builder is None or _llm_failed(answer, trace):
            return self._final(stages)
        reason = str(stages[-1].distrust)
        handover = Handover("sql", reason, answer.sql, outcome_of(answer), (), rows_of(answer, kg))
        trace.emit("escalate", reason=reason, check=stages[-1].distrust.check if stages[-1].distrust else None,
                   sparql=None, sql=answer.sql, **{"from": "sql", "to": "build"})
        built = self.sql_builder.run(question, kg, trace, context.handed_over(handover))
        stages.append(Stage("build", built, None))
        return self._final(stages)

    def _lexical_on_copy(self, kg: KnowledgeGraph, trace: Trace, context: RunContext) -> bool:
        """Whether lexical is tried first on a database: a first question (lexical cannot read earlier turns), on a
        database whose graph copy is made or takes seconds (`lexical_max_rows`); the copy is made here."""
        if context.history or self.lexical_max_rows <= 0:
            return False
        try:
            rows = kg.sparql_cost()
            if rows > self.lexical_max_rows:
                return False
            kg.sparql_ready()
        except SparqlnavError as exc:  # the copy could not be made: the SQL writer does not need it
            trace.emit("info", message=f"lexical skipped on the database: {exc}")
            return False
        return True

    def close(self) -> None:
        """Close the stages that hold resources (explore's LLM clients)."""
        for stage in (self.lexical, self.explore, self.retrieve, self.sql_writer, self.sql_builder):
            close = getattr(stage, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Auto:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- judging a stage

    def _lexical_doubt(
        self, answer: Answer, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext
    ) -> tuple[Doubt | None, bool]:
        """Why lexical's answer is not kept (None: kept): its own bar (and the cascade's), then the evidence any
        stage's answer is judged by, then, with an LLM, the answer check; and whether that check confirmed it."""
        doubt = lexical_doubt(answer, self.options.lexical_confidence)
        if doubt is None:
            doubt = evidence_doubt(answer, question, self.options.singular_rows)
        if doubt is not None or self.check is None:
            return doubt, False
        verdict = self.check(question, answer, kg, trace, context, "lexical")
        if verdict is None:  # the check could not be made: lexical's own bar decided
            return None, False
        return verdict.doubt, verdict.kept

    def _has_index(self, kg: KnowledgeGraph, trace: Trace) -> bool:
        assert self.retrieve is not None
        try:
            self.retrieve.context(kg, trace)
        except index_errors() as exc:
            trace.emit("info", message=f"retrieve skipped: no retrieval index for {kg.name} ({exc})")
            return False
        return True

    # -- moving on

    def _escalate(
        self,
        stages: list[Stage],
        to: str,
        strategy: Strategy,
        question: str,
        kg: KnowledgeGraph,
        trace: Trace,
        context: RunContext,
    ) -> Answer:
        if stages:
            last = stages[-1]
            sparql = _guess_sparql(last.answer)
            earlier = [_guess_sparql(s.answer) for s in stages]
            reason = str(last.distrust or "")
            handover = Handover(last.name, reason, sparql, outcome_of(last.answer), named_entities(kg, earlier),
                                rows_of(last.answer, kg))
            check = last.distrust.check if last.distrust is not None else None
            trace.emit("escalate", reason=reason, check=check, sparql=sparql, **{"from": last.name, "to": to})
            context = context.handed_over(handover)
        return strategy.run(question, kg, trace, context)

    def _without_llm(self, stages: list[Stage]) -> Answer:
        """The LLM failed: the answer says so, and keeps lexical's answer or best guess, shown as such."""
        failed = stages[-1].answer
        lexical = next((s.answer for s in stages if s.name == "lexical"), None)
        if lexical is None or (lexical.sparql is None and not lexical.extra.get("best_guess")):
            return self._final(stages)
        text = f"{failed.text} Without it, the lexical strategy says: {lexical.text}"
        final = self._final([*stages[:-1], Stage(stages[-1].name, dataclasses.replace(lexical, text=text), None)])
        return dataclasses.replace(final, status="error", error=failed.error, strategy=f"auto{ARROW}lexical")

    def _final(self, stages: list[Stage]) -> Answer:
        last = stages[-1]
        extra: dict[str, Any] = {
            **last.answer.extra,
            "path": [s.name for s in stages],
            "escalations": [{"from": a.name, "to": b.name, "reason": str(a.distrust or ""),
                             "check": a.distrust.check if a.distrust is not None else None}
                            for a, b in itertools.pairwise(stages)],
        }
        return dataclasses.replace(last.answer, strategy=f"auto{ARROW}{last.name}", extra=extra)


def create(
    llm: LLMConfig | None,
    *,
    settings: Settings | None = None,
    lexical: Strategy | None = None,
    retrieve: retrieve_module.Retrieve | None = None,
    explore: Strategy | None = None,
    **options: Any,
) -> Strategy:
    """Build the cascade; with no LLM it is the lexical strategy itself. Stages may be given built; otherwise
    `options` go to lexical (its knobs) and retrieve (`example_splits`), thresholds come from `settings`."""
    lexical_keys = {"budget_s", "threshold", "query_timeout_s", "max_execute"}
    target = str(options.pop("target", "auto"))
    if target not in ("auto", "sql", "sparql"):
        raise TypeError(f"auto's target is auto, sql or sparql, not {target!r}")
    unknown = set(options) - lexical_keys - {"example_splits"}
    if unknown:
        raise TypeError(f"unknown auto options: {', '.join(sorted(unknown))}")
    lexical_options = {k: v for k, v in options.items() if k in lexical_keys}
    first = lexical or lexical_module.create(**lexical_options)
    if llm is None:
        return first
    from sparqlnav.strategies import explore as explore_module
    from sparqlnav.strategies import retrieve as retrieve_module

    # The registry builds strategies without settings: read them once, as the entry points do.
    settings = settings if settings is not None else Settings.from_env()
    if retrieve is None:
        splits = {"example_splits": options["example_splits"]} if "example_splits" in options else {}
        retrieve = retrieve_module.create(llm, settings=settings, **splits)
    from sparqlnav.strategies import builder as builder_module
    from sparqlnav.strategies import write_sql

    return Auto(
        lexical=first,
        explore=explore or explore_module.create(llm, settings=settings),
        retrieve=retrieve,
        options=settings.cascade,
        budget_s=llm.budget_s,
        check=AnswerCheck(llm),
        sql_writer=write_sql.create(llm, settings=settings) if target != "sparql" else None,
        sql_builder=builder_module.create(llm, settings=settings, target="sql") if target != "sparql" else None,
        target=target,
        lexical_max_rows=settings.databases.lexical_max_rows,
    )


__all__ = ["Auto", "Stage", "asks_for_one", "create", "named_entities", "projection_mismatch"]


def _llm_failed(answer: Answer, trace: Trace) -> bool:
    """Whether a stage ended in an error because its LLM did not answer (its last LLM request failed)."""
    calls = trace.of_kind("llm_call")
    return answer.status == "error" and bool(calls) and calls[-1].data.get("outcome") in (
        "unreachable", "timeout", "http_error"
    )
