"""Whether a cascade keeps a stage's answer: one decision, whatever the strategy, from the evidence the answer
carries (its query failed or found nothing, validator issues left, a result of the wrong shape, the explaining
model's `UNSURE`) and, for an answer no model has read (lexical's), one short LLM check of the question, the query
with labels beside its identifiers, and the first rows. Each reason not to keep an answer is a `Doubt`: which
check spoke, and why in words, so the next stage is told what was found rather than a number."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from sparqlnav.answer import Answer
from sparqlnav.context import RunContext
from sparqlnav.feedback.memory import normalise_iri
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable, shown_labels
from sparqlnav.graph.vocab import label_adds
from sparqlnav.llm import (
    BudgetExceeded,
    LLMClient,
    LLMConfig,
    LLMError,
    Message,
    trace_recorder,
)
from sparqlnav.question.fit import asks_for_one, projection_mismatch
from sparqlnav.question.intent import analyse
from sparqlnav.question.words import tokenize
from sparqlnav.sparql.guard import declared_prefixes, tokens
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.trace import Trace

CHECK_ROWS = 5  # rows the answer check reads: enough to see what the query returns, few enough to stay short
CHECK_PURPOSE = "answer check"  # the LLM call's purpose in the trace and in usage
Check = Literal["query", "validator", "shape", "explanation", "answer check", "lexical"]
_VERDICT = re.compile(r"(?is)^\W*(answers\s+it|does\s+not|doesn't)\b\W*(.*)$")


@dataclass(frozen=True)
class Doubt:
    """Why an answer is not kept: the check that said so and its reason, in words a person or a model can read."""

    check: Check
    reason: str

    def __str__(self) -> str:
        return self.reason


def evidence_doubt(answer: Answer, question: str, singular_rows: int) -> Doubt | None:
    """What the answer's own evidence says against keeping it (None: nothing): a failed or empty query, validator
    issues left after the fixes, a result that does not fit the question, or the explaining model's doubt."""
    if answer.status == "error":
        return Doubt("query", f"its query failed: {answer.error or answer.text}")
    table = answer.results
    if answer.status != "answered" or table is None or table.is_empty:
        return Doubt("query", "its query found nothing")
    issues = answer.extra.get("validator_issues")
    if issues:
        return Doubt("validator", "the validator still found issues after the fixes: " + "; ".join(map(str, issues)))
    mismatch = projection_mismatch(analyse(tokenize(question)), table, singular_rows, one=asks_for_one(question),
                                   query=answer.sparql)
    if mismatch is not None:
        # Said as what a check of the result's shape found, not as a fact: the check reads words and rows only.
        return Doubt("shape", f"its result does not fit the question, by a check of the result's shape: {mismatch}")
    doubt = answer.extra.get("unsure")
    if doubt:
        return Doubt("explanation", f"the model was unsure: {doubt}")
    return None


def lexical_doubt(answer: Answer, bar: float) -> Doubt | None:
    """Why a lexical answer is not kept without a model's check: it failed, found nothing, or is not sure enough,
    said by what it could not match (never by its confidence number); None when it answered at or above `bar`."""
    if answer.status == "answered" and (answer.confidence or 0.0) >= bar:
        return None
    if answer.status == "error":
        return Doubt("lexical", f"the lexical strategy failed: {answer.error or answer.text}")
    guess = answer.extra.get("best_guess")
    if answer.status != "answered" and not (isinstance(guess, dict) and guess.get("sparql")):
        return Doubt("lexical", "the lexical strategy found no query that returns rows")
    weak = weak_parts(answer.extra.get("explained"))
    why = "; ".join(weak) if weak else "its words matched the graph's names only loosely"
    if answer.status != "answered":
        return Doubt("lexical", f"the lexical strategy (matching words to names, no model) was not sure: {why}")
    return Doubt("lexical", f"the lexical strategy's answer is below the cascade's bar for keeping it: {why}")


# lexical's answer-type doubts (scoring.unsupported), said as a person would
ANSWER_TYPE_WORDS = {
    "answer type: no person among the answers": "the question asks for a person, and the graph does not say that "
    "any of its answers is one",
    "answer type: values where things were asked": "the question asks for a thing, and its answers are plain "
    "values, not things of the graph",
}


def weak_parts(explained: object) -> list[str]:
    """What lexical's evidence (`extra["explained"]`) says it could not account for, in words."""
    if not isinstance(explained, dict):
        return []
    said: list[str] = []

    def words(key: str) -> list[str]:
        value = explained.get(key)
        return [str(v) for v in value] if isinstance(value, list) else []

    if unmatched := words("unmatched"):
        said.append("nothing in the graph matches " + _quoted(unmatched))
    if left := [w for w in words("unexplained") if w not in unmatched]:
        said.append("its query leaves out " + _quoted(left))
    unsupported = words("unsupported")
    for kind in [u for u in unsupported if u in ANSWER_TYPE_WORDS]:
        said.append(ANSWER_TYPE_WORDS[kind])
    if unsupported := [u for u in unsupported if u not in ANSWER_TYPE_WORDS]:
        said.append("the question asks for what its query does not do: " + "; ".join(map(unsupported_in_words, unsupported)))
    if misread := words("misread"):  # the answer is of another kind than asked ("the tower given where its height …")
        said.append("; ".join(misread))
    if loose := words("loose"):
        said.append("it took a word of the question to mean " + _quoted(loose) + ", a name the question gives only "
                    "in part")
    return said


# lexical's codes for what a query does not do (`Scorer.unsupported`), as a reader (a person, a model) takes them.
_OPERATIONS = {
    "negation": "a negation",
    "comparison": "a comparison of two things",
    "proportion": "a proportion",
    "rank": "a rank below the top",
    "alternative": "either of two things",
    "grouping": "a figure for each group",
}
_UNSUPPORTED = {
    "count": "a count",
    "yes/no": "a yes or no (its query lists rows)",
    "not a yes/no question": "rows (its query answers yes or no)",
    "superlative": "the most or least of something (its query orders nothing)",
    "superlative: by an attribute no word names": "an ordering (its query orders by an attribute the question does "
                                                   "not name)",
    "numeric condition": "a numeric condition",
    "answer type: no person among the answers": "a person (none of its answers is one)",
    "answer type: values where things were asked": "things (its answers are plain values)",
}
_AGGREGATES = {"AVG": "an average", "SUM": "a sum", "MIN": "the smallest value", "MAX": "the largest value"}


def unsupported_in_words(code: str) -> str:
    """One of lexical's `unsupported` codes in plain words: "comparison: than" → 'a comparison of two things
    ("than")' (relay players read the codes as instructions and changed right queries)."""
    if code in _UNSUPPORTED:
        return _UNSUPPORTED[code]
    kind, _, word = code.partition(": ")
    if kind == "aggregate":
        return _AGGREGATES.get(word, word)
    if kind in _OPERATIONS:
        return f'{_OPERATIONS[kind]} ("{word}")'
    return code


def _quoted(items: list[str]) -> str:
    return ", ".join(f"'{i}'" for i in items)


def readable_query(query: str, kg: KnowledgeGraph) -> str:
    """The query with the labels of its identifiers beside them, as a `# …` comment at the end of each line (only
    labels that say more than the identifier's own name: `prodi:dept-66469 = Production`)."""
    toks = tokens(query)
    declared = declared_prefixes(toks)
    prefixes = kg.prefixes.merged(declared)
    skip: set[int] = set()
    for i, t in enumerate(toks):  # a PREFIX line's namespace is no identifier of the data
        if t.kind == "word" and t.text.upper() in ("PREFIX", "BASE"):
            skip.update((i + 1, i + 2))
    by_line: dict[int, list[tuple[str, str]]] = {}
    for i, t in enumerate(toks):
        if i in skip or t.kind not in ("iri", "pname"):
            continue
        shown = t.text.rstrip(".")
        iri = t.text[1:-1] if t.kind == "iri" else prefixes.expand(shown)
        if iri:
            by_line.setdefault(query.count("\n", 0, t.pos), []).append((shown, iri))
    wanted = {normalise_iri(iri, kg.vocab) for found in by_line.values() for _, iri in found}
    labels = kg.names.labels_of(wanted) if wanted else {}
    lines = query.strip("\n").split("\n")
    for number, found in by_line.items():
        named = []
        for shown, iri in dict.fromkeys(found):
            label = labels.get(normalise_iri(iri, kg.vocab))
            if label and label_adds(iri, label):
                named.append(f"{shown} = {label}")
        if named and number < len(lines):
            lines[number] = f"{lines[number].rstrip()}   # " + "; ".join(named)
    return "\n".join(lines)


def shown_rows(table: ResultTable, kg: KnowledgeGraph, rows: int = CHECK_ROWS) -> str:
    """The first rows of a result (and its last), labels beside IRIs, for a prompt or a handover."""
    head, tail = max(1, rows - 1), 1
    labels = shown_labels(table, kg.names, head=head, tail=tail, whole=0)
    return table.to_markdown(kg.prefixes, labels, head=head, tail=tail, whole=0)


@dataclass(frozen=True)
class CheckVerdict:
    """What the answer check said: `kept` (it answers the question) or not, and why not."""

    kept: bool
    reason: str | None = None

    @property
    def doubt(self) -> Doubt | None:
        """The reason not to keep the answer, for the cascade and the next stage (None when kept)."""
        if self.kept:
            return None
        return Doubt("answer check", "a model that read its query and first rows said it does not answer the "
                                     f"question: {self.reason}")


def read_verdict(reply: str) -> CheckVerdict | None:
    """The check's reply as a verdict ("ANSWERS IT" or "DOES NOT: <why>"); None when it says neither."""
    for line in (reply or "").strip().splitlines():
        found = _VERDICT.match(line.strip().strip("*_`"))
        if found is None:
            continue
        if found.group(1).lower().startswith("answers"):
            return CheckVerdict(True)
        why = found.group(2).strip().strip("*_`").strip()
        return CheckVerdict(False, why or "no reason given")
    return None


@dataclass
class AnswerCheck:
    """One short LLM call before a cheap answer is kept: does this query's result answer this question?"""

    llm: LLMConfig

    def __call__(
        self, question: str, answer: Answer, kg: KnowledgeGraph, trace: Trace, context: RunContext, stage: str
    ) -> CheckVerdict | None:
        """The model's verdict on the answer; None when the check could not be made (no query or rows, the LLM
        failed, or its reply said neither): then the stage's own bar decides."""
        table = answer.results
        if answer.sparql is None or table is None:
            return None
        user = (f"Question: {question}\n\nQuery (labels of its identifiers after #):\n"
                f"{readable_query(answer.sparql, kg)}\n\nResult:\n{shown_rows(table, kg)}")
        messages = [Message.system(prompt_text("answer_check.md")), Message.user(user)]
        client = LLMClient(self.llm)
        try:
            # What is left of the question's time when a cascade set a deadline, else the configured budget.
            budget = client.question_budget(context.seconds_left(self.llm.budget_s))
            reply = client.chat(messages, purpose=CHECK_PURPOSE, record=trace_recorder(trace), budget=budget)
        except (BudgetExceeded, LLMError) as exc:
            _emit(trace, stage, "not made", f"the answer check could not be made ({exc}); the {stage} strategy's "
                  "own bar decided")
            return None
        finally:
            client.close()
        verdict = read_verdict(reply.text)
        if verdict is None:
            _emit(trace, stage, "unread", f"the answer check's reply said neither 'answers it' nor 'does not'; the "
                  f"{stage} strategy's own bar decided", reply=reply.text)
            return None
        if verdict.doubt is None:
            _emit(trace, stage, "answers it", f"a model read the {stage} answer's query and rows: it answers the "
                  "question")
        else:
            _emit(trace, stage, "does not", verdict.doubt.reason, why=verdict.reason)
        return verdict


def _emit(trace: Trace, stage: str, verdict: str, text: str, **data: Any) -> None:
    trace.emit("check", strategy=stage, verdict=verdict, text=text, **data)


__all__ = [
    "CHECK_PURPOSE",
    "AnswerCheck",
    "CheckVerdict",
    "Doubt",
    "evidence_doubt",
    "lexical_doubt",
    "read_verdict",
    "readable_query",
    "shown_rows",
    "weak_parts",
]
