"""The build strategy (QueryAgent): the model builds one query step by step with small tools (get_relations,
add_fact, add_filter, add_count/max/min, set_answer, execute); the draft runs after every step, and ERASER
shows a targeted guideline only when the environment (engine, tool-call interpreter, run memory) says
something is wrong. Budgets: steps, and the LLM's calls, tokens and seconds.

Its SQL target (`target="sql"`, queryagent.txt §5) builds one SELECT on the database a graph was opened from
(`--kg sqlite:///…`, `postgresql://…`) with the SQL tools of `sql_tools`, the same loop and the same feedback
module (its SQL guidelines).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from dataclasses import dataclass
from string import Template
from typing import Any

from sparqlnav.answer import Answer, Status
from sparqlnav.context import EMPTY, RunContext
from sparqlnav.feedback.builder import BuildView
from sparqlnav.feedback.catalogue import Guideline, render_guidelines
from sparqlnav.feedback.checker import Feedback
from sparqlnav.feedback.eraser import StepContext
from sparqlnav.feedback.memory import Memory, Record
from sparqlnav.feedback.view import SqlView
from sparqlnav.graph.endpoint import Limits
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.relational import Materialised, relational_of
from sparqlnav.graph.results import ResultTable
from sparqlnav.llm import (
    Budget,
    BudgetExceeded,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMReply,
    Message,
    ToolCall,
    trace_recorder,
)
from sparqlnav.question.intent import analyse
from sparqlnav.question.linking import link_entities
from sparqlnav.question.words import tokenize
from sparqlnav.retrieval.embed import Embedder, default_embedder
from sparqlnav.settings import Settings
from sparqlnav.sparql.draft import Aggregation
from sparqlnav.sql.executor import Caps
from sparqlnav.sql.results import result_table
from sparqlnav.strategies.builder.sql_tools import SQL_BUILD_TOOLS, SqlBuilder, SqlEdit
from sparqlnav.strategies.builder.tools import BUILD_TOOLS, Builder, DraftRun, RelationList
from sparqlnav.strategies.ending import finish, last_thought
from sparqlnav.strategies.explore import record_reply
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.tools.digest import Digests, stored_digests
from sparqlnav.tools.registry import Registry
from sparqlnav.tools.toolkit import NAME_SERVICE_ERRORS, Observation, Toolkit
from sparqlnav.trace import Trace

AUTO = "auto"  # the embedder the retrieval index uses by default (MiniLM when installed, else BM25)
TARGETS = ("sparql", "sql", "auto")  # auto: SQL on a graph opened from a database, SPARQL on any other


@dataclass(frozen=True)
class BuildOptions:
    """Budgets and knobs of the build strategy."""

    max_steps: int = 20  # tool calls, blocked ones included
    max_calls: int | None = None  # LLM requests per question
    max_tokens: int | None = None  # LLM tokens per question
    max_seconds: float | None = None  # None: the LLM config's budget_s
    keep_relations: int = 40  # queryagent.txt B.3: more candidates than this are ranked and cut
    linked_entities: int = 5  # entities linked in the question that the model is given
    seed: int | None = None  # of the relation shuffle (None: derived from the question)
    target: str = "sparql"  # the query language built: sparql, sql (a database graph's own tables) or auto

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"build's target is one of {', '.join(TARGETS)}, not {self.target!r}")


@dataclass
class BuildStep:
    """One step: the reply, its call, and the observation (with any guidelines) it got back."""

    reply_text: str
    call: ToolCall | None
    observation: str


def wanted_aggregations(question: str) -> tuple[Aggregation, ...]:
    """What the question asks the query to end with: a count, a largest or a smallest (empty: nothing)."""
    intent = analyse(tokenize(question))
    if intent.answer == "count":
        return ("count",)
    if intent.aggregate in ("MAX", "MIN"):
        return ("max",) if intent.aggregate == "MAX" else ("min",)
    sup = intent.superlative
    if sup is not None and not sup.counting:
        return ("max",) if sup.direction == "DESC" else ("min",)
    return ()


class Build:
    """The QueryAgent-style builder; one instance serves many questions (each run has its own draft)."""

    name = "build"

    @property
    def in_sql(self) -> bool:
        """Whether a database is answered in SQL (no graph copy is made for it): the SQL target, or auto's."""
        return self.options.target in ("sql", "auto")

    def __init__(
        self,
        llm: LLMConfig,
        options: BuildOptions | None = None,
        *,
        feedback: Feedback | None = None,
        embedder: Embedder | str | None = AUTO,
        digests: Digests | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.llm = llm
        self.options = options or BuildOptions()
        self.feedback = feedback or Feedback()
        self.settings = settings
        self._digests = digests
        self._embedder = embedder
        self._client: LLMClient | None = None
        self._lock = threading.Lock()

    def run(
        self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None
    ) -> Answer:
        """Answer one question (after the earlier turns and handover in `context`, if any): in SQL on the database
        the graph was opened from when the target asks for it, else in SPARQL."""
        context = context if context is not None else EMPTY
        relational = relational_of(kg)
        if self.options.target == "sql" and relational is None:
            why = ("the build strategy's SQL target needs a graph opened from a database "
                   "(--kg sqlite:///path/file.db or postgresql://user@host/db)")
            trace.emit("error", message=why)
            return finish(lambda m, purpose: self.client().chat(m, None, purpose=purpose), kg, trace, context,
                          question=question, strategy=self.name, status="error", sparql=None, table=None, text=why,
                          error=why)
        if relational is not None and self.options.target in ("sql", "auto"):
            return _SqlRun(self, question, kg, trace, context, relational).go()
        return _Run(self, question, kg, trace, context).go()

    def client(self) -> LLMClient:
        """The LLM client, made once and shared by all runs."""
        with self._lock:
            if self._client is None:
                self._client = LLMClient(self.llm)
            return self._client

    def digests(self) -> Digests:
        """The schema digests of the graphs this builder queries (the same as explore's, made once)."""
        with self._lock:
            if self._digests is None:
                self._digests = stored_digests(self.settings)
            return self._digests

    def embedder(self) -> Embedder | None:
        """The relation-ranking embedder, loaded on first use (None: BM25)."""
        with self._lock:
            if isinstance(self._embedder, str):
                self._embedder = default_embedder()
            return self._embedder

    def close(self) -> None:
        """Close the LLM connection."""
        with self._lock:
            if self._client is not None:
                self._client.close()
            self._client = None

    def __enter__(self) -> Build:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Run:
    """One question's construction."""

    registry: Registry = BUILD_TOOLS
    builder: Builder | SqlBuilder

    def __init__(self, agent: Build, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext) -> None:
        self.o = agent.options
        self.feedback = agent.feedback
        self.digest = agent.digests().get(kg)
        kg = self.digest.graph(kg)  # the graph's own namespace gets a prefix even when its file declares none
        self.question, self.kg, self.trace, self.context = question, kg, trace, context
        self.tools = Toolkit(kg, trace)
        self.builder = Builder(
            self.tools, question, embedder=agent.embedder, keep=self.o.keep_relations, seed=self.o.seed
        )
        self.memory = Memory(kg.prefixes, kg.vocab)
        self.memory.note_text(question)
        self.memory.note_text(self.digest.text)  # what the system prompt's digest names is seen (pv:Hardware)
        self.linked = self._link()
        self.memory.note_text(" ".join(iri for iri, _ in self.linked))
        self.wanted = wanted_aggregations(question)
        self.steps: list[BuildStep] = []
        self.fired: Counter[str] = Counter()
        seconds = self.o.max_seconds if self.o.max_seconds is not None else agent.llm.budget_s
        seconds = context.seconds_left(seconds)  # a cascade's stages share the question's time
        self.budget = Budget(max_calls=self.o.max_calls, max_tokens=self.o.max_tokens, max_seconds=seconds)
        self.record = trace_recorder(trace)
        self.llm = agent.client()
        self.system = self._system_prompt()

    def _link(self) -> list[tuple[str, str]]:
        """The entities and classes linked in the question, as (prefixed name or <IRI>, label)."""
        try:
            found = link_entities(self.kg, self.question, limit=self.o.linked_entities)
        except NAME_SERVICE_ERRORS as exc:
            self.trace.emit("info", message=f"entity linking failed: {exc}")
            return []
        linked = [(self.kg.prefixes.compact(c.iri), c.label) for c in found]
        self.trace.emit("info", message="linked: " + ("; ".join(f"{label} = {iri}" for iri, label in linked) or "nothing"))
        return linked

    # ------------------------------------------------------------ loop

    def go(self) -> Answer:
        try:
            while True:
                if len(self.steps) >= self.o.max_steps:
                    return self._exhausted(f"the budget of {self.o.max_steps} steps is used up")
                reply = self._chat(self._messages(), "policy", tools=True)
                if self._step(reply):
                    return self._answer("answered", self.builder.last, None)
        except BudgetExceeded as exc:
            return self._exhausted(str(exc))
        except LLMError as exc:
            self.trace.emit("error", message=str(exc))
            return self._answer("error", self.builder.last, f"The LLM failed: {exc}", error=str(exc))

    def _context(self, call: ToolCall | None, reply: LLMReply) -> StepContext:
        """What the feedback sees before the step runs."""
        b = self.builder
        assert isinstance(b, Builder)
        view = BuildView(
            b.draft, dict(b.relations), tuple(iri for iri, _ in self.linked), self.wanted, frozenset(self.fired)
        )
        return StepContext(
            self.memory, self.registry.specs(), call=call, extra_calls=max(0, len(reply.tool_calls) - 1), build=view
        )

    def _observed(self, ctx: StepContext, observation: Observation) -> None:
        """What the feedback sees after the step ran."""
        assert ctx.build is not None
        if isinstance(observation.value, DraftRun):
            ctx.build.rows = observation.value.rows
        elif isinstance(observation.value, RelationList):
            ctx.build.relations_found = observation.value.found

    def _query_now(self) -> dict[str, str | None]:
        """The query under construction, for the step's `observation` event."""
        b = self.builder
        assert isinstance(b, Builder)
        return {"query": b.draft.render(self.kg.prefixes) if b.draft.facts else None}

    def _step(self, reply: LLMReply) -> bool:
        """Handle one reply; True when execute() finished the query."""
        n = len(self.steps) + 1
        call = record_reply(self.trace, reply, n)
        b = self.builder
        ctx = self._context(call, reply)
        before = self.feedback.check(ctx, "before")
        observation = None
        if call is not None and not any(g.blocks for g in before):
            observation = self.registry.call(call.name, self.tools, call.arguments, builder=b)
            ctx.observation = observation
            self._observed(ctx, observation)
        after = self.feedback.check(ctx, "after") if observation is not None else []
        text = observation.text if observation is not None else "The action was not run."
        self.trace.emit("observation", text=text, step=n, **self._query_now())
        fired = before + after
        self._emit_feedback(fired, n)
        full = (f"{text}\n\n{render_guidelines(fired)}" if fired else text) + self._steps_left(n)
        ok = observation.ok if observation is not None else False
        self.memory.record(
            Record(call.name if call else "", dict(call.arguments) if call else {}, ok=ok),
            text if observation is not None else "",
        )
        self.steps.append(BuildStep(reply.text, call, full))
        return b.finished

    def _steps_left(self, step: int) -> str:
        """What the observation of step `step` says of the steps left (nothing here; the SQL run counts down)."""
        return ""

    def _emit_feedback(self, fired: list[Guideline], step: int) -> None:
        for g in fired:
            self.fired[g.id] += 1
            self.trace.emit("feedback", id=g.id, source=g.source, text=g.text, step=step)

    # ------------------------------------------------------------ prompts

    def _system_prompt(self) -> str:
        kg = self.kg
        prefixes = self.digest.prefix_lines(kg)
        flavour = self.digest.block()
        if kg.vocab.wikibase:
            flavour += (
                "\nThis graph is shaped like Wikidata: relations between items are wdt:P…; names are rdfs:label "
                "literals.\n"
            )
        triples = kg.extra.get("triples")
        graph = kg.name + (f" ({triples} triples)" if triples else "")
        return Template(prompt_text("build_policy.md")).safe_substitute(graph=graph, prefixes=prefixes, flavour=flavour)

    def _opening(self) -> str:
        text = self.context.with_question(self.question)
        if self.linked:
            lines = "\n".join(f"- {iri} ({label})" for iri, label in self.linked)
            text += f"\n\nEntities linked in the question (check that they are the ones meant):\n{lines}"
        else:
            text += "\n\nNo entity of the question could be linked: use search."
        return text

    def _messages(self) -> list[Message]:
        messages = [Message.system(self.system), Message.user(self._opening())]
        for step in self.steps:
            if step.call is None:
                messages += [Message.assistant(step.reply_text), Message.user(f"Observation:\n{step.observation}")]
            else:
                messages += [Message.assistant(step.reply_text, [step.call]), Message.tool(step.call, step.observation)]
        return messages

    def _chat(self, messages: list[Message], purpose: str, tools: bool = False) -> LLMReply:
        return self.llm.chat(
            messages,
            self.registry.specs() if tools else None,
            budget=self.budget,
            purpose=purpose,
            record=self.record,
        )

    # ------------------------------------------------------------ endings

    def _exhausted(self, why: str) -> Answer:
        self.trace.emit("info", message=f"stopped: {why}")
        best = self.builder.last
        if best is None:
            return self._answer("budget_exhausted", None, f"No answer: {why} before the query returned anything.", reason=why)
        return self._answer("budget_exhausted", best, None, reason=why)

    def _answer(
        self, status: Status, best: Any, text: str | None, *, error: str | None = None, reason: str | None = None
    ) -> Answer:
        sparql, sql, table, extra = self._found(best)
        return finish(
            lambda m, purpose: self._chat(m, purpose),
            self.kg,
            self.trace,
            self.context,
            question=self.question,
            strategy="build",
            status=status,
            sparql=sparql,
            sql=sql,
            table=table,
            text=text,
            error=error,
            reason=reason,
            note=self._note() if status == "answered" else None,
            extra={"steps": len(self.steps), "guidelines": dict(self.fired), **extra},
        )

    def _note(self) -> str | None:
        """What the answer writer is told beside the result: the agent's last thought."""
        return last_thought(self.trace)

    def _found(self, best: Any) -> tuple[str | None, str | None, ResultTable | None, dict[str, Any]]:
        """The best query's SPARQL, SQL (none here), result and what the answer's extra says of the target."""
        assert best is None or isinstance(best, DraftRun)
        return (best.query if best is not None else None, None, best.result.table if best is not None else None, {})


def create(llm: LLMConfig | None, **options: Any) -> Build:
    """Build the build strategy; options are BuildOptions fields plus `feedback`, `embedder` (an Embedder, None
    for BM25, or "auto"), `digests` and `settings`."""
    if llm is None:
        raise ValueError("the build strategy needs an LLM (set OPENAI_BASE_URL and SPARQLNAV_LLM_MODEL)")
    fields = {f.name for f in dataclasses.fields(BuildOptions)}
    extra = {"feedback", "embedder", "digests", "settings"}
    unknown = set(options) - fields - extra
    if unknown:
        raise TypeError(f"unknown build options: {', '.join(sorted(unknown))}")
    knobs = BuildOptions(**{k: v for k, v in options.items() if k in fields})
    return Build(llm, knobs, **{k: v for k, v in options.items() if k in extra})


STEPS_WARNED = 3  # the SQL run's last steps, counted down in its observations


class _SqlRun(_Run):
    """One question's SELECT, built on the database the graph was opened from (queryagent.txt §5)."""

    registry = SQL_BUILD_TOOLS

    def __init__(
        self, agent: Build, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext,
        relational: Materialised,
    ) -> None:
        self.o = agent.options
        self.feedback = agent.feedback
        self.question, self.kg, self.trace, self.context = question, kg, trace, context
        self.relational = relational
        self.tools = Toolkit(kg, trace)
        limits = agent.settings.limits if agent.settings is not None else Limits()
        caps = Caps(self.tools.timeout_s or limits.timeout_s, limits.max_rows, limits.max_bytes)
        self.sql_builder = SqlBuilder(relational.database, relational.tables, trace, caps)
        self.builder = self.sql_builder
        self.memory = Memory(kg.prefixes, kg.vocab)
        self.memory.note_text(question)
        self.linked = []
        self.wanted = wanted_aggregations(question)
        self.steps = []
        self.fired = Counter()
        seconds = self.o.max_seconds if self.o.max_seconds is not None else agent.llm.budget_s
        seconds = context.seconds_left(seconds)
        self.budget = Budget(max_calls=self.o.max_calls, max_tokens=self.o.max_tokens, max_seconds=seconds)
        self.record = trace_recorder(trace)
        self.llm = agent.client()
        self.system = self._system_prompt()
        self.trace.emit("info", message=f"building SQL on {relational.database.shown}")

    def _context(self, call: ToolCall | None, reply: LLMReply) -> StepContext:
        b = self.sql_builder
        view = SqlView(
            b.draft, b.column_kinds, self.question, keys={t.name: t.key for t in b.tables.values()},
            wanted=self.wanted, fired=frozenset(self.fired),
            previous_rows=b.last.run.rows if b.last is not None else None,
        )
        return StepContext(
            self.memory, self.registry.specs(), call=call, extra_calls=max(0, len(reply.tool_calls) - 1), sql=view
        )

    def _observed(self, ctx: StepContext, observation: Observation) -> None:
        view, edit = ctx.sql, observation.value
        if view is None or not isinstance(edit, SqlEdit):
            return
        view.run, view.base_rows, view.compared, view.answer = edit.run, edit.base_rows, edit.compared, edit.answer
        view.shared = edit.shared
        view.elsewhere = tuple(p.shown for p in edit.elsewhere)

    def _query_now(self) -> dict[str, str | None]:
        return {"sql": self.sql_builder.draft.render() or None}

    def _system_prompt(self) -> str:
        b = self.sql_builder
        tables = b.get_tables().text.split("\n", 1)[-1]
        database = f"{self.relational.database.kind}: {self.kg.name}"
        return Template(prompt_text("build_sql_policy.md")).safe_substitute(database=database, tables=tables,
                                                                             steps=self.o.max_steps)

    def _steps_left(self, step: int) -> str:
        """The last steps are counted down: when they run out, the query as it stands is the answer."""
        left = self.o.max_steps - step
        if left > STEPS_WARNED or left <= 0:
            return ""
        return f"\n\n{left} step(s) left: the query as it stands when they run out is the answer."

    def _opening(self) -> str:
        return self.context.with_question(self.question)

    def _note(self) -> str | None:
        """The agent's last thought, and a tie on an order key the answer does not return (the writer sees only the
        answer's columns, so it could not report the tie its rule asks for)."""
        said = [t for t in (last_thought(self.trace), self.sql_builder.tie) if t]
        return "\n".join(said) or None

    def _found(self, best: Any) -> tuple[str | None, str | None, ResultTable | None, dict[str, Any]]:
        """The best statement's SQL and result."""
        edit = best if isinstance(best, SqlEdit) else None
        table = result_table(edit.result) if edit is not None and edit.result is not None else None
        return None, edit.run.sql if edit is not None else None, table, {"target": "sql"}
