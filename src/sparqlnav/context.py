"""What a run knows before it starts: the earlier turns of its conversation, and what an earlier stage of a
cascade learned. Strategies put it in front of the question (`RunContext.to_prompt`) so a follow-up can start
from the last query and an escalation does not start blind."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable, shown_labels

TURN_ROWS = 5  # result rows kept per turn: enough to resolve "his", "those", "the second one"
TURN_CELL_CHARS = 120


class Finished(Protocol):
    """What a turn is made of: the parts of an `Answer` (named here so this module needs no strategy types)."""

    @property
    def question(self) -> str: ...
    @property
    def sparql(self) -> str | None: ...
    @property
    def results(self) -> ResultTable | None: ...
    @property
    def text(self) -> str: ...
    @property
    def status(self) -> str: ...


@dataclass(frozen=True)
class Turn:
    """One finished question of a conversation: what was asked, the final query, its first rows, the answer."""

    question: str
    sparql: str | None
    results: str  # a compact rendering of the first rows, with labels
    answer: str
    status: str = "answered"
    focus: str = ""  # the answer's one thing (an IRI) when it was one, so "his …" can follow up without an LLM
    focus_label: str = ""
    # The things (IRI, label) the answer's first rows named: "he" after "Who discovered neon?" is one of them, not
    # neon; several people make "he" ambiguous, which the user is told.
    things: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, answer: Finished, kg: KnowledgeGraph) -> Turn:
        """The turn an answer makes, its results summarised with the graph's prefixes and labels."""
        table = answer.results
        focus = focus_label = ""
        things: tuple[tuple[str, str], ...] = ()
        if table is None:
            shown = "(no results)"
        elif table.boolean is not None:
            shown = "yes" if table.boolean else "no"
        else:
            labels = shown_labels(table, kg.names, head=TURN_ROWS, tail=0, whole=0)
            shown = table.to_markdown(kg.prefixes, labels, head=TURN_ROWS, tail=0, whole=0, max_cell=TURN_CELL_CHARS)
            named = list(dict.fromkeys(t.value for row in table.rows[:TURN_ROWS] for t in row.values()
                                       if t.kind == "uri"))
            things = tuple((iri, labels.get(iri, "")) for iri in named)
            if len(table.rows) == 1 and len(named) == 1:
                focus = named[0]
                focus_label = labels.get(focus, "")
        return cls(answer.question, answer.sparql, shown, answer.text, answer.status, focus, focus_label, things)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Turn:
        """A turn from its JSON (`asdict`): its things come back as pairs, and a turn stored before they were kept
        has none."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["things"] = tuple((str(iri), str(label)) for iri, label in data.get("things") or ())
        return cls(**known)

    def to_prompt(self, number: int) -> str:
        """The turn as a block of text for a prompt."""
        query = self.sparql.strip() if self.sparql else "(none)"
        return (
            f"Turn {number}. Question: {self.question}\nSPARQL:\n{query}\n"
            f"Result ({self.status}):\n{self.results}\nAnswer: {self.answer}"
        )

    def size(self) -> int:
        """Characters it takes in a prompt (a stand-in for tokens)."""
        return len(self.to_prompt(0))


@dataclass(frozen=True)
class Handover:
    """What an earlier strategy of a cascade learned, and why its answer was not trusted."""

    strategy: str
    reason: str  # why it was not trusted, in words: which check said so and what it found
    sparql: str | None = None
    outcome: str = ""  # what that query gave: "no rows", "3 rows", the engine's message
    entities: tuple[tuple[str, str], ...] = ()  # (IRI as shown, label) it linked in the question
    rows: str = ""  # its first rows, labels beside IRIs ('' when it gave none)

    def to_prompt(self) -> str:
        """The handover as a block of text for a prompt."""
        # The reason may be a model's sentence with its own full stop: one stop, not "..".
        lines = [f"An earlier attempt ({self.strategy}) was not trusted: {self.reason.rstrip().rstrip('.')}."]
        if self.entities:
            # Not "It linked": relay players took a distrusted query's links (an icon for "manager", the department
            # Production for "product") as found facts.
            lines.append("Identifiers in its query (check them, they may be what was wrong): "
                         + "; ".join(f"{label} = {iri}" for iri, label in self.entities) + ".")
        if self.sparql:
            lines.append(f"Its query:\n{self.sparql.strip()}")
        if self.outcome:
            lines.append(f"It gave: {self.outcome}")
        if self.rows:
            lines.append(self.rows)
            # Rows were returned: the query ran; what is wrong is what the reason says, not that it "failed".
            lines.append("Use what is right in it and change what the reason above points at.")
        elif self.sparql:
            lines.append("Use what is right in it; do not repeat what failed.")
        # No query shown: there is nothing to reuse (relay players were told to "use what is right in it").
        return "\n".join(lines)


@dataclass(frozen=True)
class RunContext:
    """Earlier turns (oldest first) and an optional handover; empty by default."""

    history: tuple[Turn, ...] = ()
    handover: Handover | None = None
    notes: tuple[str, ...] = field(default=())  # e.g. "the user edited the last query"
    # time.monotonic() by which the question's LLM use must end, across the stages of a cascade (None: each
    # strategy's own budget).
    deadline: float | None = None

    def __bool__(self) -> bool:
        return bool(self.history or self.handover or self.notes)

    def summary(self) -> str:
        """One line for people saying what the run was given (the prompt block is for models)."""
        parts: list[str] = []
        if self.history:
            last = self.history[-1]
            n = len(self.history)
            parts.append(f"earlier in this conversation: {n} turn{'s' if n != 1 else ''}, the last "
                         f"“{last.question}” → {last.answer[:80]}")
        if self.handover is not None:
            parts.append(f"handed over from {self.handover.strategy}: {self.handover.reason}")
        parts.extend(self.notes)
        return "; ".join(parts)

    def to_prompt(self) -> str:
        """Everything before the question, as text for a prompt ('' when there is nothing)."""
        blocks: list[str] = []
        if self.history:
            turns = "\n\n".join(t.to_prompt(i + 1) for i, t in enumerate(self.history))
            blocks.append(
                "Earlier in this conversation (the new question may refer to it: start from the last query when "
                f"it only refines it):\n\n{turns}"
            )
        blocks.extend(self.notes)
        if self.handover is not None:
            blocks.append(self.handover.to_prompt())
        return "\n\n".join(blocks)

    def without_handover(self) -> RunContext:
        """The same context without a cascade's handover: for the steps that read the question (decomposing it) or
        a result (explaining it), where an earlier stage's query and doubts are no help and only mislead."""
        return replace(self, handover=None) if self.handover is not None else self

    def with_question(self, question: str) -> str:
        """The question, preceded by the context when there is any."""
        text = self.to_prompt()
        return f"{text}\n\nQuestion: {question}" if text else f"Question: {question}"

    def within(self, max_chars: int) -> RunContext:
        """The latest turns whose prompt fits in `max_chars` (always the last one)."""
        kept: list[Turn] = []
        used = 0
        for turn in reversed(self.history):
            used += turn.size()
            if kept and used > max_chars:
                break
            kept.append(turn)
        return replace(self, history=tuple(reversed(kept)))

    def seconds_left(self, budget_s: float | None) -> float | None:
        """A strategy's LLM seconds: its own budget, cut to what is left before the deadline."""
        if self.deadline is None:
            return budget_s
        left = max(0.0, self.deadline - time.monotonic())
        return left if budget_s is None else min(budget_s, left)

    def handed_over(self, handover: Handover) -> RunContext:
        """The same context with a handover from an earlier stage."""
        return replace(self, handover=handover)


EMPTY = RunContext()
