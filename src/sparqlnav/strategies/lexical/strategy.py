"""The lexical strategy itself: link the question, build candidate queries, run the most promising
within the time budget, rank them, and answer (or say "not found" below the confidence threshold)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sparqlnav.answer import Answer
from sparqlnav.context import RunContext
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import Term, clip, shown_labels
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.question.followup import NEEDS_A_NAME, Ambiguous, pronoun, read_followup
from sparqlnav.question.intent import analyse
from sparqlnav.question.linking import link
from sparqlnav.question.wording import Asked, for_people, unit_labels, yes_no
from sparqlnav.question.words import SYNONYMS, WordToken, content_positions, is_stopword
from sparqlnav.settings import LexicalSettings
from sparqlnav.sparql.prefixes import declare_prefixes
from sparqlnav.strategies.check import readable_query, weak_parts
from sparqlnav.strategies.lexical.candidates import MAX_CLASSES, Candidate, Candidates, Part
from sparqlnav.strategies.lexical.context import BudgetedEndpoint, Context
from sparqlnav.strategies.lexical.scoring import QuestionCoverage, Scorer
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace

DEFAULT_BUDGET_S = 5.0
DEFAULT_THRESHOLD = LexicalSettings().threshold  # calibrated: see settings.LexicalSettings
MAX_EXECUTE = 60
QUERY_TIMEOUT_S = 2.0
# Below this confidence an answer is said to be probable, not given as fact: the wrong answers lexical gave at its
# default threshold had confidences from 0.35 to 0.91 (bench/results/lexical_calibration.md).
PROBABLE_BELOW = 0.9
TRUSTED_AMONG = 5  # how many of the best-scored candidates the checks choose among
WEAK_LINK = 0.8  # an entity linked below this score (a fuzzy or partial name match) may not be the one meant (chosen)


@dataclass
class LexicalStrategy:
    """Link, enumerate bounded-shape queries, run the most promising within a budget, rank, answer."""

    budget_s: float = DEFAULT_BUDGET_S
    threshold: float = DEFAULT_THRESHOLD
    query_timeout_s: float = QUERY_TIMEOUT_S
    max_execute: int = MAX_EXECUTE
    name: str = "lexical"

    def run(
        self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None
    ) -> Answer:
        """Answer one question from its own words; a follow-up ("When was it discovered?", "What about neon?") is
        read as being about the last answer's thing, or the thing the last question named (`question/followup`)."""
        word = pronoun(question)
        turn = context.history[-1] if context is not None and context.history else None
        reading = read_followup(question, turn, kg) if turn is not None else None
        if isinstance(reading, Ambiguous):
            # Asking the question as written would read its other words as names ("born" as boron).
            text = f"I cannot tell who you mean: {reading.text()}"
            trace.emit("info", text=f"a follow-up: {reading.text()}")
            trace.emit("answer", text=text, status="not_found", confidence=0.0)
            return Answer(question, self.name, None, None, text, trace, status="not_found", confidence=0.0)
        if reading is not None:
            trace.emit("info", text=f"a follow-up: '{reading.word}' read as {reading.label} ({reading.because}): "
                                    f"{reading.question}", followup=reading.iri)
            answer = _Run(self, reading.question, kg, trace).answer()
            return replace(answer, question=question)
        answer = _Run(self, question, kg, trace).answer()
        if word and answer.status == "not_found" and (turn is not None or not answer.extra.get("best_guess")):
            # Nothing the question names was found, and it points back at something: say what would help.
            hint = NEEDS_A_NAME.format(word=word)
            trace.emit("info", text=hint)
            return replace(answer, text=f"{answer.text} {hint}")
        return answer


def create(llm: object = None, **options: Any) -> LexicalStrategy:
    """Build the strategy; it never uses an LLM (`llm` is accepted for the common factory signature)."""
    allowed = {"budget_s", "threshold", "query_timeout_s", "max_execute"}
    unknown = set(options) - allowed
    if unknown:
        raise TypeError(f"unknown lexical options: {', '.join(sorted(unknown))}")
    return LexicalStrategy(**{k: v for k, v in options.items() if k in allowed})


@dataclass
class _Run:
    strategy: LexicalStrategy
    question: str
    kg_in: KnowledgeGraph
    trace: Trace
    started: float = field(default_factory=time.monotonic)
    executed: list[Candidate] = field(default_factory=list)
    enumerated: list[Candidate] = field(default_factory=list)
    ctx: Context = field(init=False)
    scorer: Scorer = field(init=False)
    gen: Candidates = field(init=False)

    def __post_init__(self) -> None:
        self.toolkit = Toolkit(self.kg_in, self.trace)
        self.deadline = self.started + self.strategy.budget_s
        # every query, linking's included, runs through the toolkit (traced) and within the budget
        self.kg = replace(
            self.toolkit.kg,
            endpoint=BudgetedEndpoint(
                self.toolkit.kg.endpoint, self.deadline, self.strategy.query_timeout_s
            ),
        )

    # -- main --------------------------------------------------------------------------------
    def answer(self) -> Answer:
        """Link, build candidates, run and rank them, answer."""
        self.trace.emit("thought", text="Linking the question's words to the graph (no LLM).")
        linking = link(self.kg, self.question)
        content = set(content_positions(linking.tokens)) - _ignorable(linking.tokens)
        intent = analyse(linking.tokens)
        self.ctx = Context(
            self.kg, self.trace, self.deadline, self.strategy.budget_s, linking, intent, content
        )
        self.scorer = Scorer(self.ctx)
        self.gen = Candidates(self.ctx, self.scorer.prior)
        self.trace.emit(
            "info",
            text=f"intent: {self.ctx.intent.answer}"
            + (
                f", superlative {self.ctx.intent.superlative.direction}"
                if self.ctx.intent.superlative
                else ""
            )
            + (
                f", {len(self.ctx.intent.comparisons)} numeric condition(s)"
                if self.ctx.intent.comparisons
                else ""
            )
            + (f", {self.ctx.intent.aggregate} of a value" if self.ctx.intent.aggregate else "")
            + f"; linked in {linking.seconds:.2f} s",
            linking=linking.to_json(),
        )
        anchors = self.gen.anchors(linking.entities)
        classes = [e for e in linking.entities if e.kind == "class"][:MAX_CLASSES]
        self.trace.emit(
            "info",
            text="anchors: "
            + (", ".join(f"{a.label} ({a.score:.2f})" for a in anchors) or "none")
            + "; classes: "
            + (", ".join(f"{c.label} ({c.score:.2f})" for c in classes) or "none"),
        )
        cands = self.gen.enumerate(anchors, classes)
        self.enumerated = cands
        best = self.execute(cands)
        return self.finish(best)

    def execute(self, cands: list[Candidate]) -> Candidate | None:
        """Run the most promising candidates within the budget; the best, scored, or None."""
        tried = 0
        for c in cands:
            if tried >= self.strategy.max_execute or self.ctx.remaining() <= 0.05:
                break
            if self.executed and c.prior < self.executed_best_prior() - 0.35:
                break
            tried += 1
            res = self.ctx.query(c.sparql())
            if res is None or not res.ok or res.table is None:
                continue
            table = res.table
            if c.form != "ask" and (
                table.is_empty or (not table.column("a") and c.form == "select")
            ):
                continue
            if (
                c.form == "count"
                and table.rows
                and table.rows[0].get("count", Term.literal("0")).value == "0"
            ):
                continue
            if c.form == "aggregate" and not (table.rows and "value" in table.rows[0]):
                continue
            c.result = table
            c.rows = len(table.rows)
            c.fit = self.scorer.fit(c, table)
            size_penalty = 0.0
            if c.form == "select" and not self.ctx.intent.plural and c.rows > 1:
                size_penalty = min(0.12, 0.04 * math.log10(c.rows))
            if c.form == "ask" and table.boolean is False:
                size_penalty += 0.1  # a false ASK only says this shape found nothing
            c.score = round(c.prior + 0.25 * c.fit - size_penalty, 4)
            c.penalty = size_penalty
            self.executed.append(c)
        self.executed.sort(key=lambda c: -c.score)
        # second look, at the leaders only: do the answers' types fit what was asked?
        for c in self.executed[:10]:
            if self.ctx.remaining() <= 0.05:
                break
            c.fit = self.scorer.type_fit(c)
            c.score = round(c.prior + 0.25 * c.fit - c.penalty, 4)
        self.executed.sort(key=lambda c: -c.score)
        if not self.executed:
            return None
        return self.executed[0]

    def executed_best_prior(self) -> float:
        """The best prior among the candidates that ran."""
        return max(c.prior for c in self.executed)

    # -- answer ------------------------------------------------------------------------------
    def finish(self, best: Candidate | None) -> Answer:
        """The Answer for the best candidate, or "not found" below the threshold."""
        runners = self.executed[1:6]
        if runners:
            self.trace.emit(
                "info",
                text="runners-up: "
                + "; ".join(f"{c.describe()} ({c.score:.2f}, {c.rows} row{'' if c.rows == 1 else 's'})" for c in runners[:3]),
                candidates=[
                    {
                        "score": c.score,
                        "rows": c.rows,
                        "shape": c.describe(),
                        "sparql": self.display(c),
                    }
                    for c in runners
                ],
            )
        best, found, confidence = self.most_trusted(best)
        evidence = found.to_json() if found is not None else {}
        if best is None or best.result is None or confidence < self.strategy.threshold:
            text = "I could not find an answer in this knowledge graph."
            extra: dict[str, Any] = {}
            if best is not None and best.result is not None:
                meant = did_you_mean(best, found, [t.lower for t in self.ctx.tokens])
                if meant is not None:
                    text += f" (The best guess, {best.describe()}, scored {confidence:.2f}, below the threshold {self.strategy.threshold:.2f}.)"
                    # The query fits every other word: only the name is in doubt, so the guess is worth offering.
                    text += f" Did you mean {meant}? If so: {self.sentence(best)}"
                else:
                    # Say what was found and why it is not trusted in the words themselves: a face may show only
                    # them (`ask` without --json), and the guess may well be right ("The answer is Italy.").
                    weak = weak_parts(evidence)
                    why = "; ".join(weak) if weak else "its words matched the graph's names only loosely"
                    shape = f"{best.describe()}, scored {confidence:.2f}, below the threshold {self.strategy.threshold:.2f}"
                    # A guess of another kind than asked (a tower for its height) answers another question:
                    # never shown as "Probably".
                    # An operation the query leaves undone (a condition, an ordering) answers a wider question, so
                    # its guess is no reading of this one; a doubt about the answers' type is.
                    if found is not None and not (found.unexplained or found.unmatched or found.loose
                                                  or found.misread or undone(found)):
                        # Every word of the question is in the query: only what it returns is in doubt, so the
                        # guess is said with how the question was read, never as "not found" (issue 36, item 4).
                        text = (f"Probably: {self.sentence(best)} {self.reading(best)}\nNot sure: {why} "
                                f"(found by {shape}).")
                    else:
                        text += f" The best guess ({shape}) is not trusted because {why}."
                # kept aside, never as the answer: a caller (or a cascade) may show it or build on it
                extra = {
                    "best_guess": {
                        "sparql": self.display(best),
                        "answer": self.sentence(best),
                        "results": best.result.to_sparql_json(),
                        "confidence": confidence,
                    },
                    "explained": evidence,
                }
            self.trace.emit("answer", text=text, status="not_found", confidence=confidence)
            return Answer(
                self.question,
                self.strategy.name,
                None,
                None,
                text,
                self.trace,
                status="not_found",
                confidence=confidence,
                extra=extra,
            )
        self.trace.emit("thought", text=f"Best query ({best.describe()}), score {best.score:.2f}.")
        sentence = self.sentence(best)
        text = sentence
        beside: dict[str, str] = {}
        if confidence < PROBABLE_BELOW:
            # No model read this answer: say how sure it is, and show the query (labels beside its identifiers) in
            # the words themselves, since a face may show only the words (`ask` without -v).
            hedge = (f"Probably: {sentence} {self.reading(best)}\n"
                     "Found by matching the question's words to the graph's names, with no model.")
            text = (f"{hedge} The query, to check how the question was read:\n"
                    f"{readable_query(self.display(best), self.ctx.kg)}")
            # A face that shows the query beside the words (the web UI, `ask -v`) shows the hedge alone.
            beside = {"text_beside_query": hedge}
        self.trace.emit("answer", text=text, status="answered", confidence=confidence)
        return Answer(
            self.question,
            self.strategy.name,
            self.display(best),
            best.result,
            text,
            self.trace,
            status="answered",
            confidence=confidence,
            extra={
                "shape": best.shape,
                "score": best.score,
                "coverage": round(self.scorer.coverage(best), 4),
                "fit": best.fit,
                "margin": round(self.scorer.margin(best, self.executed), 4),
                "linking_seconds": round(self.ctx.linking.seconds, 4),
                "explained": evidence,
                "sentence": sentence,  # the answer without the hedge, for a caller that confirmed it (auto)
                **beside,
            },
        )

    def most_trusted(self, best: Candidate | None) -> tuple[Candidate | None, QuestionCoverage | None, float]:
        """The best-scored candidate, unless its checks find it misreads the question ("the tallest tree" where its
        height was asked) and one of the next few reads all of it without a fault: then that one."""
        if best is None:
            return None, None, 0.0
        found = self.scorer.evidence(best, self.executed, self.enumerated)
        confidence = self.scorer.confidence(best, self.executed, found)
        if not (found.misread or undone(found)):
            return best, found, confidence  # a doubt about its answers' type is no misreading
        for c in self.executed[1:TRUSTED_AMONG]:
            if self.ctx.remaining() <= 0.05:
                break
            other = self.scorer.evidence(c, self.executed, self.enumerated)
            if other.misread or other.unsupported or other.unexplained or other.coverage < found.coverage:
                continue
            trusted = self.scorer.confidence(c, self.executed, other)
            if trusted > confidence:
                return c, other, trusted
        return best, found, confidence

    def display(self, c: Candidate) -> str:
        """The query with the KG's prefixes applied."""
        text = c.sparql()
        prefixes = self.ctx.kg.prefixes

        def compact(m: re.Match[str]) -> str:
            short = prefixes.compact(m.group(1))
            return short if not short.startswith("<") else m.group(0)

        body = re.sub(r"<([^<>\s]+)>", compact, text)
        return declare_prefixes(body, prefixes.mapping).query

    def reading(self, c: Candidate) -> str:
        """How the query reads the question, in words: "I read 'length' as the property length, 'bridge' as the
        class Bridge, 'longest' as the largest length." (what a reader checks before trusting a guess)."""
        return f"I read {read_parts(c.parts, [t.text for t in self.ctx.tokens])}."

    def sentence(self, c: Candidate) -> str:
        """The answer in words, from the result and its labels."""
        table = c.result
        assert table is not None
        asked = Asked.of(self.question)
        if c.form == "ask":
            return f"{yes_no(bool(table.boolean))}."
        if c.form == "count":
            n = table.rows[0].get("count") if table.rows else None
            return f"There are {n.value if n else 0}."
        if c.form == "aggregate":
            value = table.rows[0]["value"].value
            what = {"AVG": "average", "SUM": "total", "MIN": "minimum", "MAX": "maximum"}
            return f"The {what.get(c.aggregate or '', 'value')} is {_round(value)}."
        values = table.column("a")
        labels = shown_labels(table, self.ctx.kg.names, head=10, tail=0, whole=0)  # every row binds ?a
        labels |= unit_labels(values[:10], self.ctx.kg.names)
        shown = [_show(v, labels, asked) for v in values[:10]]
        more = len(values) - len(shown)
        listed = ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + shown[-1]
        if more > 0:
            listed = ", ".join(shown) + f" and {more} more"
        if len(values) == 1:
            return f"The answer is {listed}."
        return (
            f"The answers are {listed} ({len(values)} in total)."
            if more > 0
            else f"The answers are {listed}."
        )


def undone(found: QuestionCoverage) -> list[str]:
    """What the question asks the query to do and it does not (a condition, an ordering): the query answers a wider
    question. A doubt about its answers' type ("no person among the answers") is not such a thing."""
    return [u for u in found.unsupported if not u.startswith("answer type")]


_ORDERS = {"DESC": "the largest", "ASC": "the smallest"}
_AGGREGATES = {"AVG": "the average", "SUM": "the total", "MIN": "the smallest", "MAX": "the largest"}


def read_parts(parts: Sequence[Part], words: Sequence[str]) -> str:
    """The parts of a query as the question's words each was read as ("'bridge' as the class Bridge"); a part no
    word names (a hop the question implies) is said as what links them."""
    said: list[str] = []
    for p in parts:
        quoted = " ".join(words[i] for i in sorted(p.positions) if i < len(words))
        if p.kind == "class":
            what = f"the class {p.text}"
        elif p.kind == "relation":
            what = f"the property {p.text}"
        elif p.kind == "literal":
            what = f"the value '{p.text}'"
        elif p.kind == "modifier":
            head, _, rest = p.text.partition(" ")
            what = (f"{_ORDERS[head]} {rest}" if head in _ORDERS and rest
                    else f"{_AGGREGATES[head]} of {rest}" if head in _AGGREGATES and rest
                    else p.text)
        else:
            what = p.text
        if not quoted:
            if p.kind == "relation":
                said.append(f"linked by {p.text}")
            continue
        said.append(f"'{quoted}' as {what}")
    return ", ".join(dict.fromkeys(said)) or "no word of the question in the query"


def did_you_mean(best: Candidate, found: QuestionCoverage | None, words: Sequence[str] = ()) -> str | None:
    """The name to offer as "did you mean …" when an entity's link is the only weak part of the best guess: every
    content word explained and every asked-for operation done, and an entity named only in part or weakly linked;
    never for a word that names a relation ("born" is no misspelt boron: it asks for a birthplace)."""
    if found is None or found.unexplained or found.unmatched or found.unsupported:
        return None
    if any(words[i] in SYNONYMS for p in best.parts if p.kind == "entity" for i in p.positions if i < len(words)):
        return None  # a relation's word read as a thing's name: the guess answers another question
    if found.loose:
        return f"'{found.loose[0]}'"
    entities = [p for p in best.parts if p.kind == "entity"]
    weakest = min(best.parts, key=lambda p: p.score, default=None)
    if weakest is None or weakest not in entities or weakest.score >= WEAK_LINK:
        return None
    return f"'{weakest.text}'"


def _ignorable(tokens: Sequence[WordToken]) -> set[int]:
    """Content words that say nothing about the data ("we", "offer", "available")."""
    filler = {
        "we",
        "offer",
        "available",
        "exist",
        "exists",
        "existing",
        "there",
        "currently",
        "our",
        "kind",
        "type",
        "types",
        "sort",
        "get",
    }
    # How to present the answer, not what it is about: relay players read these, named as words a query "leaves
    # out", as instructions and changed right queries (issue 37).
    presenting = {
        "return", "returns", "display", "provide", "output", "distinct", "unique", "descending", "ascending",
        "alphabetical", "alphabetically", "respectively", "altogether", "overall", "including", "include",
    }
    orderings = {"descending", "ascending", "alphabetical", "reverse", "chronological", "increasing", "decreasing"}
    words = [t.lower for t in tokens]

    def presenting_order(i: int) -> bool:
        """"sorted by …", "in descending order": an ordering word, not a thing called an order."""
        return words[i] in ("order", "ordered", "sort", "sorted") and (
            (i + 1 < len(words) and words[i + 1] == "by") or (i > 0 and words[i - 1] in orderings))

    # "what's", "it's": a stopword with a clitic; "i.e": an abbreviation; "Count the …": the request itself
    return {
        i
        for i, t in enumerate(tokens)
        if t.lower in filler or t.lower in presenting or presenting_order(i) or (i == 0 and t.lower == "count")
        or t.lower == "i.e" or is_stopword(re.split(r"['’]", t.lower)[0])
    }


def _show(term: Term, labels: dict[str, str], asked: Asked) -> str:
    if term.kind == "uri":
        return labels.get(term.value) or humanise(local_name(term.value)) or term.value
    return clip(for_people(term, asked, labels), 80)


def _round(value: str) -> str:
    """A computed number shown with at most four decimals."""
    try:
        number = float(value)
    except ValueError:
        return value
    return str(int(number)) if number.is_integer() else f"{number:.4f}".rstrip("0")
