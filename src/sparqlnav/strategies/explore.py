"""The explore strategy (SPINACH): an LLM explores the graph one thought and one action at a time, over
search / get_entity / get_property_examples / execute_sparql / stop, until the last query answers.

State is the full history of steps. Repeating an action rolls the state back to before the first
action of the repeated cycle; stopping while the last query gave nothing rolls it back to before the
step that ran that query; exploration then goes on. After every action the feedback module (ERASER)
may add a targeted guideline to the observation. Budgets: effective actions (those still in the state)
and total actions (every action taken, rolled back or not).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass
from string import Template
from typing import Annotated, Any

from pydantic import BaseModel, Field

from sparqlnav.answer import Answer, Status
from sparqlnav.context import EMPTY, RunContext
from sparqlnav.feedback.catalogue import Guideline, render_guidelines
from sparqlnav.feedback.checker import Feedback
from sparqlnav.feedback.eraser import FeedbackOptions, StepContext
from sparqlnav.feedback.memory import Memory, Record, normalise_iri
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import (
    Budget,
    BudgetExceeded,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMOutputError,
    LLMReply,
    Message,
    ToolCall,
    trace_recorder,
)
from sparqlnav.settings import Settings
from sparqlnav.sparql.prefixes import declare_prefixes
from sparqlnav.strategies.ending import finish
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.tools.digest import Digest, Digests, stored_digests
from sparqlnav.tools.lookup import EntityPage, LookupFailed, resolve
from sparqlnav.tools.registry import TOOLKIT_TOOLS, Registry, tool
from sparqlnav.tools.toolkit import Observation, Toolkit
from sparqlnav.trace import Trace


def stop(
    kit: Toolkit,
    step: Annotated[
        int | None,
        Field(description="the [step N] of an earlier execute_sparql whose rows answer the question; omit for the last query"),
    ] = None,
    note: Annotated[
        str | None,
        Field(description="for the answer writer: the reading of the question you chose, ties or cases the rows hide"),
    ] = None,
) -> Observation:
    """Finish: the last query you ran (or the one of `step`) becomes the final answer. Call it only when that query
    returned the answer. The answer writer sees the query, its rows and `note` only: say in the note the reading of the
    question you chose, ties or cases the rows hide, never step numbers, and only what an observation showed you."""
    return Observation("stopped")  # never run: the strategy ends the run when the model calls it


def give_up(
    kit: Toolkit,
    reason: Annotated[
        str, Field(description="what the question needs that the graph lacks, and what you checked to find out")
    ],
) -> Observation:
    """Finish without an answer, when the graph does not hold what the question asks for (no property or value for
    it on the things it names). Never answer with something nearby instead; but an answer you found and are unsure
    of is given with stop() and a note, not with this."""
    return Observation("gave up")  # never run: the strategy ends the run when the model calls it


def _mend_stop_arguments(arguments: dict[str, Any]) -> None:
    """stop's arguments as meant: `{"step": "3"}` names step 3 (a relay model wrote it so), and a note that is itself
    the JSON of both arguments (`note='{"step": 2, "note": "…"}'`, another relay model's slip) is unpacked."""
    note = arguments.get("note")
    if isinstance(note, str) and note.lstrip().startswith("{") and arguments.get("step") is None:
        try:
            inner = json.loads(note)
        except ValueError:
            inner = None
        if isinstance(inner, dict) and inner and set(inner) <= {"step", "note"}:
            arguments.pop("note")
            arguments.update(inner)
    step = arguments.get("step")
    if isinstance(step, str) and step.strip().isdigit():
        arguments["step"] = int(step)


# What the agent offers the model; tool and argument names are a contract (docs/design.md).
EXPLORE_TOOLS: Registry = TOOLKIT_TOOLS.only("search", "get_entity", "get_property_examples", "execute_sparql").plus(
    tool(stop), tool(give_up)
)
CHARS_PER_TOKEN = 4  # rough size estimate for compaction; servers report the real counts
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class ExploreOptions:
    """Budgets and knobs of the explore strategy (defaults follow SPINACH)."""

    max_actions: int = 15  # actions still in the state (after rollbacks)
    max_total_actions: int = 30  # every action taken, including rolled-back ones
    temperature: float | None = 1.0  # of the policy; pruning and answering use the config's
    top_p: float | None = 0.9
    prune_over: int = 40  # entity pages with more values than this are pruned by an LLM call
    max_context_tokens: int = 16_000  # compact older observations beyond this estimate
    keep_recent: int = 3  # the latest observations are never compacted
    max_seconds: float | None = None  # wall-clock limit on the run's LLM use (None: the LLM config's budget_s)
    large_rows: int = 500  # feedback: results longer than this are "oversized"


@dataclass
class Step:
    """One kept step: what the model said and called, and the observation it got back."""

    reply_text: str
    call: ToolCall | None
    observation: str
    query: str | None = None
    record: Record | None = None


class _Keep(BaseModel):
    keep: list[str]




def thought_of(text: str) -> str:
    """The thought in a reply: the text before any `Action:` line, without a `Thought:` label."""
    head = re.split(r"^\s*Action\s*:", text, maxsplit=1, flags=re.M | re.I)[0]
    return re.sub(r"^\s*Thought\s*:\s*", "", head.strip(), flags=re.I).strip()


def record_reply(trace: Trace, reply: LLMReply, step: int) -> ToolCall | None:
    """Record a policy reply's thought and (first) action as trace events; return that action, if any."""
    call = reply.tool_calls[0] if reply.tool_calls else None
    thought = thought_of(reply.text)
    if thought:
        trace.emit("thought", text=thought, step=step)
    if call is not None:
        shown: dict[str, Any] = {"tool": call.name, "arguments": call.arguments, "step": step}
        if call.parse_error:
            shown["raw"] = call.raw_arguments
        trace.emit("action", **shown)
    return call


def compact_text(text: str, limit: int = 240) -> str:
    """A short stand-in for an old observation."""
    lines = text.splitlines()
    head = "\n".join(lines[:3])[:limit]
    return f"{head}\n[… observation shortened to save space: {max(0, len(text) - len(head))} characters left out]"


class Explore:
    """The SPINACH-style agent; one instance serves many questions (each run has its own state)."""

    name = "explore"

    def __init__(
        self,
        llm: LLMConfig,
        options: ExploreOptions | None = None,
        feedback: Feedback | None = None,
        *,
        digests: Digests | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.llm = llm
        self.options = options or ExploreOptions()
        self.feedback = feedback or Feedback(
            options=FeedbackOptions(large_rows=self.options.large_rows)
        )
        self.settings = settings
        self._digests = digests
        self._clients: tuple[LLMClient, LLMClient] | None = None
        self._lock = threading.Lock()

    def digests(self) -> Digests:
        """The schema digests of the graphs this agent explores (stored index schemas where `sparqlnav index` made them)."""
        with self._lock:
            if self._digests is None:
                self._digests = stored_digests(self.settings)
            return self._digests

    def run(
        self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None
    ) -> Answer:
        """Answer one question (after the earlier turns and handover in `context`, if any)."""
        return _Run(self, question, kg, trace, context if context is not None else EMPTY).go()

    def clients(self) -> tuple[LLMClient, LLMClient]:
        """The policy client (sampling as configured here) and the helper client (pruning, answers).

        Made once and shared by all runs: creating a client costs tens of milliseconds (TLS setup)."""
        with self._lock:
            if self._clients is None:
                policy = self.llm.model_copy(
                    update={"temperature": self.options.temperature, "top_p": self.options.top_p}
                )
                self._clients = (LLMClient(policy), LLMClient(self.llm))
            return self._clients

    def close(self) -> None:
        """Close the LLM connections."""
        with self._lock:
            for client in self._clients or ():
                client.close()
            self._clients = None

    def __enter__(self) -> Explore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Run:
    """The state of one question's exploration."""

    def __init__(
        self, agent: Explore, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext
    ) -> None:
        self.o = agent.options
        self.feedback = agent.feedback
        self.digest: Digest = agent.digests().get(kg)
        kg = self.digest.graph(kg)  # the graph's own namespace gets a prefix even when its file declares none
        self.question, self.kg, self.trace, self.context = question, kg, trace, context
        self.tools = Toolkit(kg, trace)
        self.memory = Memory(kg.prefixes, kg.vocab)
        self.memory.note_text(question)
        self.memory.note_text(self.digest.text)  # what the system prompt's digest names is seen (pv:Hardware)
        self.state: list[Step] = []
        self.total = 0
        self.rollbacks = 0
        self.fired: Counter[str] = Counter()
        self.note: str | None = None  # told once to the model after a rollback
        self.chosen: int | None = None  # the step stop(step=N) named
        self.gave_up: str | None = None  # the reason give_up() gave: the graph does not hold the answer
        self.stop_note: str | None = None  # stop(note=…) for the answer writer (a step's thought never is)
        seconds = self.o.max_seconds if self.o.max_seconds is not None else agent.llm.budget_s
        # Per run, passed to every call; a cascade's stages share the question's time.
        self.budget = Budget(max_seconds=context.seconds_left(seconds))
        self.record = trace_recorder(trace)  # the clients are shared: each call says whose trace it is
        self.policy, self.helper = agent.clients()
        self.system = self._system_prompt()

    # ------------------------------------------------------------ loop

    def go(self) -> Answer:
        try:
            # Budgets as in spinach.txt §4.2: at most 15 actions still in the state, 30 taken in all
            # (taking 9, being rolled back by 4, then taking 10 more is legal).
            while True:
                if len(self.state) >= self.o.max_actions:
                    return self._exhausted(f"the budget of {self.o.max_actions} actions is used up")
                if self.total >= self.o.max_total_actions:
                    return self._exhausted(
                        f"the budget of {self.o.max_total_actions} actions in total (with rollbacks) is used up"
                    )
                reply = self._chat(self.policy, self._messages(), "policy", tools=True)
                self.total += 1
                if self._step(reply):
                    return self._conclude()
        except BudgetExceeded as exc:
            return self._exhausted(str(exc))
        except LLMError as exc:
            self.trace.emit("error", message=str(exc))
            return self._answer("error", self._best(), f"The LLM failed: {exc}", error=str(exc))

    def _step(self, reply: LLMReply) -> bool:
        """Handle one reply; True when the model stopped with a usable last query."""
        n = len(self.state) + 1
        call = record_reply(self.trace, reply, n)
        ctx = StepContext(
            self.memory,
            EXPLORE_TOOLS.specs(),
            call=call,
            extra_calls=max(0, len(reply.tool_calls) - 1),
            finishing=call is not None and call.name == "stop" and call.parse_error is None,
            absent_of=self.tools.absent,
            values_of=self.tools.closest_values,
            datatype_of=self.tools.value_datatype,
        )
        if ctx.finishing:
            ctx.question = self.question  # the chosen rows are meant as the answer: their shape is checked
        if ctx.finishing and call is not None:
            _mend_stop_arguments(call.arguments)
        sparql = call.arguments.get("query") if call and call.name == "execute_sparql" else None
        if isinstance(sparql, str) and sparql.strip():
            ctx.query = declare_prefixes(sparql.strip(), self.kg.prefixes.mapping).query
        before = self.feedback.check(ctx, "before")
        named = call.arguments.get("step") if ctx.finishing and call is not None else None
        for g in before:  # SPINACH's rollback (spinach.txt §4.2): cut the state, then explore on
            if g.id == "stop_without_results" and named is not None:
                continue  # a wrong step number is corrected by the model, not by cutting its work
            if g.id in ("repeated_action", "stop_without_results"):
                self._rollback(g, n, keep=self._restart_point(g, call))
                return False
        blocked = any(g.blocks for g in before)
        if ctx.finishing and not blocked:
            assert call is not None  # finishing is a stop call
            self.chosen = named if isinstance(named, int) else None
            said = call.arguments.get("note")
            # A note given as such is the note; a retry's thought ("that call was malformed …") is not.
            self.stop_note = said.strip() if isinstance(said, str) and said.strip() else None
            return True
        if call is not None and call.name == "give_up" and call.parse_error is None and not blocked:
            self.gave_up = " ".join(str(call.arguments.get("reason") or "").split()) or "no reason given"
            return True
        observation: Observation | None = None
        if not blocked:
            assert call is not None
            observation = self._run_tool(call, ctx.query)
            ctx.observation = observation
            ctx.result = observation.value if ctx.query is not None else None
        after = self.feedback.check(ctx, "after") if observation is not None else []
        text = observation.text if observation is not None else "The action was not run."
        self.trace.emit("observation", text=text, step=n)
        fired = before + after
        self._emit_feedback(fired, n)
        seen_text = text if observation is not None else ""
        full = f"{text}\n\n{render_guidelines(fired)}" if fired else text
        record = Record(
            call.name if call else "",
            dict(call.arguments) if call else {},
            query=ctx.query if observation is not None else None,
            result=ctx.result,
            ok=observation.ok if observation is not None else False,
        )
        if record.answered:  # the number stop(step=N) takes
            full += f"\n[step {n}]"
        self.memory.record(record, seen_text)
        self.state.append(Step(reply.text, call, full, ctx.query, record))
        self.note = None
        return False

    def _run_tool(self, call: ToolCall, query: str | None) -> Observation:
        # The query runs as feedback checked it (prefixes repaired); entity pages are pruned for the question.
        args = dict(call.arguments) if query is None else {**call.arguments, "query": query}
        return EXPLORE_TOOLS.call(call.name, self.tools, args, prune=self._prune)

    def _emit_feedback(self, fired: list[Guideline], step: int) -> None:
        for g in fired:
            self.fired[g.id] += 1
            self.trace.emit("feedback", id=g.id, source=g.source, text=g.text, step=step)

    def _restart_point(self, guideline: Guideline, call: ToolCall | None) -> int:
        """How many steps a rollback keeps. SPINACH (spinach.txt §4.2) "resets the exploration state to
        the one before the repetition or the deviation": a cycle (steps 3, 4, 5, then step 3's action
        again) goes back to before step 3; stop() after an empty or failed query goes back to before
        the step that ran it (nothing to cut when no query ran)."""
        if guideline.id == "repeated_action" and call is not None:
            first = self.memory.find(Record(call.name, dict(call.arguments)).key)
            return len(self.state) if first is None else first
        last = self.memory.last_query()
        return len(self.state) if last is None else last[0] - 1

    def _rollback(self, guideline: Guideline, step: int, keep: int) -> None:
        """Cut the state, and the run's memory with it, to its first `keep` steps; tell the model why, once."""
        self._emit_feedback([guideline], step)
        self.rollbacks += 1
        removed = len(self.state) - keep
        del self.state[keep:]
        self.memory.truncate(keep)  # guidelines reading memory must not see the removed steps
        reason = {
            "repeated_action": "the model repeated an earlier action",
            "stop_without_results": "the model called stop() although the last query gave no answer",
        }[guideline.id]
        self.trace.emit(
            "rollback",
            reason=reason,
            guideline=guideline.id,
            step=step,
            back_to=keep,
            removed=removed,
            text=f"{reason}; {removed} step(s) removed, {keep} kept",
        )
        cut = f" and the state went back to before step {keep + 1} ({removed} step(s) removed)"
        discarded = "Note: your last action was discarded" + (cut if removed else "")
        self.note = f"{discarded}. {guideline.text}"

    # ------------------------------------------------------------ prompts

    def _system_prompt(self) -> str:
        kg = self.kg
        prefixes = self.digest.prefix_lines(kg)
        flavour = self.digest.block()
        wb = kg.vocab.wikibase
        if wb:
            flavour += (
                "\nThis graph is shaped like Wikidata: items and properties are wd:Q… and wd:P…; "
                "wdt:P… links an item to its main values; a statement with its qualifiers is reached "
                "with p:P… (item to statement), ps:P… (statement to value) and pq:P… (statement to "
                "qualifier value). Names are rdfs:label literals; there is no label SERVICE.\n"
            )
        triples = kg.extra.get("triples")
        graph = kg.name + (f" ({triples} triples)" if triples else "")
        return Template(prompt_text("explore_policy.md")).safe_substitute(
            graph=graph, prefixes=prefixes, flavour=flavour
        )

    def _messages(self) -> list[Message]:
        """The state as a conversation, older observations compacted while it is too long."""
        head = [Message.system(self.system), Message.user(self.context.with_question(self.question))]
        observations = [s.observation for s in self.state]
        fixed = sum(len(m.content) for m in head) + sum(
            len(s.reply_text) + len(s.call.raw_arguments if s.call else "") for s in self.state
        )
        limit = self.o.max_context_tokens * CHARS_PER_TOKEN
        size = fixed + sum(map(len, observations))
        for i in range(max(0, len(observations) - self.o.keep_recent)):
            if size <= limit:
                break
            if len(observations[i]) <= 400:
                continue
            short = compact_text(observations[i])
            size -= len(observations[i]) - len(short)
            observations[i] = short
        messages = list(head)
        for step, obs in zip(self.state, observations, strict=True):
            if step.call is None:
                messages += [
                    Message.assistant(step.reply_text),
                    Message.user(f"Observation:\n{obs}"),
                ]
                continue
            # Servers reject tool names outside [A-Za-z0-9_-]; the model's own text keeps the original.
            call = step.call.model_copy(
                update={"name": _TOOL_NAME.sub("_", step.call.name)[:64] or "invalid"}
            )
            messages += [Message.assistant(step.reply_text, [call]), Message.tool(call, obs)]
        if self.note:
            messages.append(Message.user(self.note))
        return messages

    def _chat(
        self, client: LLMClient, messages: list[Message], purpose: str, tools: bool = False
    ) -> LLMReply:
        return client.chat(
            messages,
            EXPLORE_TOOLS.specs() if tools else None,
            budget=self.budget,
            purpose=purpose,
            record=self.record,
        )

    # ------------------------------------------------------------ entity pruning (SPINACH)

    def _prune(self, page: EntityPage) -> EntityPage:
        """Keep only the properties that matter for the question, when the page is large."""
        if sum(len(e.values) for e in page.edges) <= self.o.prune_over:
            return page
        p = self.kg.prefixes
        example = p.compact(page.edges[0].property) if page.edges else "ex:property"
        system = Template(prompt_text("explore_prune.md")).safe_substitute(example=example)
        user = f"Question: {self.question}\n\nEntity page:\n{page.to_text(self.kg)}"
        try:
            got = self.helper.chat_json(
                [Message.system(system), Message.user(user)],
                _Keep,
                budget=self.budget,
                purpose="prune",
                record=self.record,
            )
        except LLMOutputError as exc:
            self.trace.emit("info", message=f"entity not pruned: {exc}")
            return page
        wanted = {self._property_key(k) for k in got.value.keep}
        always = set(self.kg.vocab.labels) | set(self.kg.vocab.descriptions)
        edges = [
            e
            for e in page.edges
            if e.property in always or self._property_key(e.property) in wanted
        ]
        return dataclasses.replace(page, edges=edges) if edges else page

    def _property_key(self, ident: str) -> str:
        """One spelling per property: wdt:P31, <…/P31>, P31 and wd:P31 are the same."""
        ident = ident.strip()
        try:
            iri = ident if ident.startswith(("http://", "https://")) else resolve(self.kg, ident)
        except LookupFailed:
            return ident
        return normalise_iri(iri, self.kg.vocab)

    # ------------------------------------------------------------ endings

    def _best(self) -> Step | None:
        """The latest kept step whose query produced an answer."""
        return next((s for s in reversed(self.state) if s.record and s.record.answered), None)

    def _conclude(self) -> Answer:
        if self.gave_up is not None:
            # Said as the model's finding, not as a fact: it is what its lookups showed, in its words.
            self.trace.emit("info", message=f"gave up: {self.gave_up}")
            text = f"Not found in {self.kg.name}: {self.gave_up}"
            return self._answer("not_found", None, text, reason=self.gave_up)
        # Step numbers are positions in the kept state: a rollback only cuts its tail, so N is the step the model saw.
        best = self.state[self.chosen - 1] if self.chosen is not None else self._best()
        assert best is not None  # stop_without_results guarantees it
        return self._answer("answered", best, None, note=self.stop_note)

    def _exhausted(self, why: str) -> Answer:
        self.trace.emit("info", message=f"stopped: {why}")
        best = self._best()
        if best is None:
            text = f"No answer: {why} before any query returned a result."
            return self._answer("budget_exhausted", None, text, reason=why)
        return self._answer("budget_exhausted", best, None, reason=why)

    def _answer(
        self,
        status: Status,
        best: Step | None,
        text: str | None,
        *,
        error: str | None = None,
        reason: str | None = None,
        note: str | None = None,
    ) -> Answer:
        table = best.record.result.table if best and best.record and best.record.result else None
        return finish(
            lambda m, purpose: self._chat(self.helper, m, purpose),
            self.kg,
            self.trace,
            self.context,
            question=self.question,
            strategy="explore",
            status=status,
            sparql=best.query if best else None,
            table=table,
            text=text,
            error=error,
            reason=reason,
            note=note,
            extra={
                "actions": len(self.state),
                "actions_total": self.total,
                "rollbacks": self.rollbacks,
                "guidelines": dict(self.fired),
            },
        )


def create(llm: LLMConfig | None, **options: Any) -> Explore:
    """Build the explore strategy; options are the fields of ExploreOptions plus `digests`, `settings`, `feedback`."""
    if llm is None:
        raise ValueError(
            "the explore strategy needs an LLM (set OPENAI_BASE_URL and SPARQLNAV_LLM_MODEL)"
        )
    known = {f.name for f in dataclasses.fields(ExploreOptions)}
    extra = {"digests", "settings", "feedback"}
    unknown = set(options) - known - extra
    if unknown:
        raise TypeError(f"unknown explore options: {', '.join(sorted(unknown))}")
    knobs = ExploreOptions(**{k: v for k, v in options.items() if k in known})
    return Explore(llm, knobs, **{k: v for k, v in options.items() if k in extra})
