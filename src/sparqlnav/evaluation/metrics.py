"""Answer-quality metrics over SPARQL 1.1 JSON results: SPINACH row-major EM/F1, set P/R/F1, Superset.

Inputs are SPARQL 1.1 JSON results dicts, ``{"head": {"vars": [...]}, "results": {"bindings":
[...]}}`` or ``{"head": {}, "boolean": true}``; ``None`` as a prediction means "no prediction"
(the system failed to produce a query or the query failed) and scores 0 everywhere.

Row-major EM/F1 (SPINACH, spinach.txt §5.1), as SPINACH's ``eval.py`` computes it. What the
reference vectors (the per-question ``f1`` in SPINACH's agent outputs on QALD-10 and QALD-7)
taught us, where they refine or differ from the paper text:

* Recall of a gold row against a predicted row is ``|gold ∩ predicted| / |gold|`` over the
  *multisets of cell values*; variable names play no part. A gold value may therefore be found
  in any predicted column (the paper speaks of "extra columns"; the code ignores column names
  altogether). Gold cells whose variable name ends in ``Label`` or ``Description`` are dropped
  before counting (the code does this; the paper does not say so); predicted cells are never
  dropped. A gold row left with no values has recall 0 against everything.
* Cells are compared by value (the lexical form), as SPINACH's code and TEXT2SPARQL do: a
  result ``"3"^^xsd:integer`` matches a gold ``"3"``, so row and set metrics agree on what one
  value is. Datatypes, language tags and term types play no part (none occurs in the reference
  data, which is reproduced exactly either way).
* The assignment is ``scipy.optimize.linear_sum_assignment(maximize=True)`` on a matrix with
  one row per *predicted* row and one column per *gold* row. Pairs with recall 0 that the solver
  returns count as one false positive and one false negative, which is the paper's "matching
  rows with 0 recall is disallowed". With ``r`` positive pairs, ``n`` gold and ``n'`` predicted
  rows: ``tp = Σ recall``, ``fn = n − tp``, ``fp = n' − r``, ``F1 = 2tp / (2tp + fp + fn)``.
  F1 depends on ``r`` (``F1 = 2tp / (tp + n + n' − r)``), and several assignments can reach the
  same total recall with different ``r``: gold rows {A,B} {C,D} {E,F} against predicted {A}
  {A,B,C} {E} give 2/3 (three half matches) or 3/5.5 (one full, one half match). The paper does
  not settle this; the code takes scipy's pick on the predicted-by-gold matrix (2/3 here, the
  transposed matrix would give 3/5.5), and so do we.
* All 387 QALD-10 and 45 QALD-7 reference F1 values are reproduced exactly (difference 0.0).
  They confirm that variable names are ignored (most predictions name their columns differently
  from the gold), booleans and empty predictions; they are single-column and contain no gold
  labels, so the label rule, term normalisation and tie-breaking rest on the code and
  SPINACH's own unit cases (``tests/test_eval.py``), which our tests restate.
* Booleans (ASK): 1 when both sides are the same boolean, else 0; a boolean against a table is 0.
* Both sides empty: SPINACH's code divides 0 by 0 and fails its own assertion; we score 1
  (the correct answer was "nothing"). Gold empty, prediction not: 0.
* EM is 1 exactly when row F1 is 1 (we test ``≥ 1 − 1e-9`` against float noise).

Set-based precision/recall/F1 (TEXT2SPARQL / QALD style, as ``text2sparql-client`` computes it
with pytrec_eval ``set_P``/``set_recall``/``set_F``): the answer is the *set of lexical values*
(``value`` strings) of every bound cell of every variable, labels included; booleans compare
equal or not. Both empty scores 1. Micro aggregation sums tp/fp/fn over questions.

Superset (SPAGHETTI, spaghetti.txt §4: the prediction "contains" the gold answer): every lexical
value of the gold answer, except gold ``Label``/``Description`` columns, occurs somewhere in the
prediction; booleans compare equal.

Free-text answers (the hybrid strategy's; SPAGHETTI §4) are scored against gold answer strings, each
required: EM when the normalised answer (lower case, no punctuation, articles or citation marks like
``[E2]``) equals the normalised gold parts joined by "and" (or the only part); Superset when every
normalised gold part is a substring of the normalised answer; and an LLM judge's verdict (`LLMJudge`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np
from scipy.optimize import linear_sum_assignment

Results = Mapping[str, Any]
Row = Mapping[str, Mapping[str, Any]]
TermKey = str

_IGNORED_GOLD_SUFFIXES = ("Label", "Description")
_EM_TOLERANCE = 1e-9


class AnswerJudge(Protocol):
    """Decides whether a predicted answer means the same as the gold one (e.g. an LLM judge)."""

    def __call__(self, question: str, gold: str, predicted: str) -> bool:
        """True when ``predicted`` answers ``question`` as well as ``gold`` does."""
        ...


@dataclass(frozen=True, slots=True)
class RowMatch:
    """SPINACH row-major comparison of one prediction with one gold answer."""

    tp: float
    fp: float
    fn: float
    f1: float

    @property
    def precision(self) -> float:
        """Row-major precision ``tp / (tp + fp)``."""
        return _ratio(self.tp, self.tp + self.fp, empty=self.f1)

    @property
    def recall(self) -> float:
        """Row-major recall ``tp / (tp + fn)``."""
        return _ratio(self.tp, self.tp + self.fn, empty=self.f1)

    @property
    def em(self) -> float:
        """1.0 when row F1 is 1, else 0.0."""
        return 1.0 if self.f1 >= 1.0 - _EM_TOLERANCE else 0.0


@dataclass(frozen=True, slots=True)
class SetMatch:
    """Set-based comparison of the values of a prediction with those of a gold answer."""

    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float


@dataclass(frozen=True, slots=True)
class Scores:
    """Every metric for one question."""

    row_em: float
    row_f1: float
    row_precision: float
    row_recall: float
    set_precision: float
    set_recall: float
    set_f1: float
    superset: float
    row_tp: float
    row_fp: float
    row_fn: float
    set_tp: int
    set_fp: int
    set_fn: int
    predicted: bool
    judge: bool | None = None
    ex: float | None = None  # execution accuracy (`evaluation.execution`), for SQL datasets' questions

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field."""
        return asdict(self)


# --------------------------------------------------------------------------- validation


def check_results(data: Any, *, what: str = "results") -> None:
    """Raise ValueError naming the problem unless ``data`` is a SPARQL 1.1 JSON results dict."""
    if not isinstance(data, Mapping):
        raise ValueError(
            f"{what}: expected a SPARQL JSON results object, got {type(data).__name__}"
        )
    if "boolean" in data:
        if not isinstance(data["boolean"], bool):
            raise ValueError(f"{what}: 'boolean' must be true or false")
        return
    results = data.get("results")
    if not isinstance(results, Mapping) or not isinstance(results.get("bindings"), list):
        raise ValueError(f"{what}: needs 'boolean' or 'results.bindings' (a list)")
    for index, row in enumerate(results["bindings"]):
        if not isinstance(row, Mapping):
            raise ValueError(f"{what}: binding {index} is not an object")
        for var, term in row.items():
            if not isinstance(term, Mapping) or "type" not in term or "value" not in term:
                raise ValueError(
                    f"{what}: binding {index}, variable {var!r} needs 'type' and 'value'"
                )


def is_boolean(results: Results) -> bool:
    """True for an ASK result."""
    return "boolean" in results


def bindings(results: Results) -> list[Row]:
    """The rows of a SELECT result (empty for ASK)."""
    if is_boolean(results):
        return []
    return list(results.get("results", {}).get("bindings", []))


# A number written with a fraction or an exponent: the same average summed in another order differs in its last
# digits (29.28676470588236 against 29.286764705882362), so such numbers are compared at 10 significant digits.
_FRACTIONAL = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][+-]?\d+)")
NUMBER_DIGITS = 10


def term_key(term: Mapping[str, Any]) -> TermKey:
    """The identity of one cell for every metric: its value (lexical form), whatever its datatype; a fractional
    number by its value at NUMBER_DIGITS significant digits (a relative tolerance of about 1e-9)."""
    text = _value_text(term.get("value"))
    if _FRACTIONAL.fullmatch(text):
        number = float(text)
        if math.isfinite(number):
            return f"{number:.{NUMBER_DIGITS}g}"
    return text


def _value_text(value: Any) -> str:
    """The lexical form of a JSON ``value`` (quoted triples arrive as objects)."""
    return value if isinstance(value, str) else repr(value)


def _ignored_gold_var(var: str) -> bool:
    return var.endswith(_IGNORED_GOLD_SUFFIXES)


# --------------------------------------------------------------------------- row-major (SPINACH)


def row_match(gold: Results, predicted: Results | None) -> RowMatch:
    """SPINACH's row-major comparison (tp, fp, fn, F1) of a prediction with the gold answer."""
    if predicted is None:
        missed = 1 if is_boolean(gold) else len(bindings(gold))
        return RowMatch(0.0, 0.0, float(max(missed, 1)), 0.0)
    if is_boolean(gold) or is_boolean(predicted):
        if is_boolean(gold) and is_boolean(predicted) and gold["boolean"] == predicted["boolean"]:
            return RowMatch(1.0, 0.0, 0.0, 1.0)
        return RowMatch(0.0, 1.0, 1.0, 0.0)
    gold_rows = bindings(gold)
    predicted_rows = bindings(predicted)
    if not gold_rows and not predicted_rows:
        return RowMatch(0.0, 0.0, 0.0, 1.0)
    if len(predicted_rows) * len(gold_rows) > MAX_MATCH_CELLS:
        return _row_match_large(gold_rows, predicted_rows)
    recall = _recall_matrix(predicted_rows, gold_rows)
    tp = 0.0
    positive_pairs = 0
    fp_or_fn = 0.0
    if recall.size:
        row_ind, col_ind = linear_sum_assignment(recall, maximize=True)
        assigned = recall[row_ind, col_ind]
        positive = assigned[assigned > 0]
        tp = float(positive.sum())
        positive_pairs = int(positive.size)
        # Same order of float operations as SPINACH's eval.f1, so the vectors match closely.
        partial = assigned[(assigned < 1) & (assigned > 0)]
        fp_or_fn = float((1 - partial).sum()) + 2 * int(np.sum(assigned <= 0))
        fp_or_fn += (len(predicted_rows) - len(row_ind)) + (len(gold_rows) - len(col_ind))
    else:
        fp_or_fn = float(len(predicted_rows) + len(gold_rows))
    f1 = 2 * tp / (2 * tp + fp_or_fn)
    fp = float(len(predicted_rows) - positive_pairs)
    fn = len(gold_rows) - tp
    return RowMatch(tp, fp, fn, f1)


# Beyond this many gold × predicted cells the Hungarian assignment costs minutes and gigabytes.
MAX_MATCH_CELLS = 1_000_000


def _row_match_large(gold_rows: Sequence[Row], predicted_rows: Sequence[Row]) -> RowMatch:
    """Row matching for very large results: identical rows only (recall 1), so partial-row credit is
    not given — equal results still score 1, and otherwise the F1 is a lower bound of SPINACH's."""

    def key(row: Row, gold: bool) -> tuple[TermKey, ...]:
        return tuple(sorted(term_key(t) for var, t in row.items() if not (gold and _ignored_gold_var(var))))

    gold_counts = Counter(key(r, True) for r in gold_rows)
    predicted_counts = Counter(key(r, False) for r in predicted_rows)
    tp = float(sum((gold_counts & predicted_counts).values()))
    fp = float(len(predicted_rows) - tp)
    fn = float(len(gold_rows) - tp)
    return RowMatch(tp, fp, fn, 2 * tp / (2 * tp + fp + fn) if tp else 0.0)


def row_f1(gold: Results, predicted: Results | None) -> float:
    """SPINACH row-major F1."""
    return row_match(gold, predicted).f1


def row_em(gold: Results, predicted: Results | None) -> float:
    """SPINACH row-major exact match (1.0 when row F1 is 1)."""
    return row_match(gold, predicted).em


def _recall_matrix(predicted_rows: Sequence[Row], gold_rows: Sequence[Row]) -> np.ndarray:
    """recall[i, j] = share of gold row j's values found in predicted row i (multiset overlap)."""
    matrix = np.zeros((len(predicted_rows), len(gold_rows)))
    gold_counts: list[Counter[TermKey]] = []
    rows_with_value: dict[TermKey, list[int]] = {}
    for j, row in enumerate(gold_rows):
        counts = Counter(term_key(t) for var, t in row.items() if not _ignored_gold_var(var))
        gold_counts.append(counts)
        for key in counts:
            rows_with_value.setdefault(key, []).append(j)
    # Sparse fill: only gold rows sharing a value with a predicted row can have non-zero recall.
    for i, row in enumerate(predicted_rows):
        predicted_counts = Counter(term_key(t) for t in row.values())
        overlap: dict[int, int] = {}
        for key, count in predicted_counts.items():
            for j in rows_with_value.get(key, ()):
                overlap[j] = overlap.get(j, 0) + min(count, gold_counts[j][key])
        for j, shared in overlap.items():
            matrix[i, j] = shared / sum(gold_counts[j].values())
    return matrix


# --------------------------------------------------------------------------- set-based


def result_values(results: Results, *, skip_label_columns: bool = False) -> set[str]:
    """The set of lexical values of every bound cell (optionally without Label/Description vars)."""
    return {
        term_key(term)
        for row in bindings(results)
        for var, term in row.items()
        if not (skip_label_columns and _ignored_gold_var(var))
    }


def set_match(gold: Results, predicted: Results | None) -> SetMatch:
    """Set precision/recall/F1 of the prediction's values against the gold values."""
    if predicted is None:
        gold_size = 1 if is_boolean(gold) else len(result_values(gold))
        return SetMatch(0, 0, gold_size, 0.0, 0.0, 0.0)
    if is_boolean(gold) or is_boolean(predicted):
        if is_boolean(gold) and is_boolean(predicted) and gold["boolean"] == predicted["boolean"]:
            return SetMatch(1, 0, 0, 1.0, 1.0, 1.0)
        return SetMatch(0, 1, 1, 0.0, 0.0, 0.0)
    gold_values = result_values(gold)
    predicted_values = result_values(predicted)
    if not gold_values and not predicted_values:
        return SetMatch(0, 0, 0, 1.0, 1.0, 1.0)
    tp = len(gold_values & predicted_values)
    fp = len(predicted_values) - tp
    fn = len(gold_values) - tp
    precision = _ratio(tp, tp + fp, empty=0.0)
    recall = _ratio(tp, tp + fn, empty=0.0)
    return SetMatch(tp, fp, fn, precision, recall, _f1(precision, recall))


def prf_from_counts(tp: float, fp: float, fn: float) -> tuple[float, float, float]:
    """Precision, recall and F1 from counts; all three are 1 when there is nothing to count."""
    if tp == 0 and fp == 0 and fn == 0:
        return 1.0, 1.0, 1.0
    precision = _ratio(tp, tp + fp, empty=0.0)
    recall = _ratio(tp, tp + fn, empty=0.0)
    return precision, recall, _f1(precision, recall)


def macro_prf(matches: Iterable[SetMatch]) -> tuple[float, float, float]:
    """Mean of per-question precision, recall and F1 (1.0 each for no questions)."""
    items = list(matches)
    if not items:
        return 1.0, 1.0, 1.0
    count = len(items)
    return (
        sum(m.precision for m in items) / count,
        sum(m.recall for m in items) / count,
        sum(m.f1 for m in items) / count,
    )


def micro_prf(matches: Iterable[SetMatch]) -> tuple[float, float, float]:
    """Precision, recall and F1 of tp/fp/fn summed over questions."""
    items = list(matches)
    return prf_from_counts(
        sum(m.tp for m in items), sum(m.fp for m in items), sum(m.fn for m in items)
    )


# --------------------------------------------------------------------------- Superset


def superset(gold: Results, predicted: Results | None) -> bool:
    """SPAGHETTI Superset: the prediction contains every gold value (booleans: equal)."""
    if predicted is None:
        return False
    if is_boolean(gold) or is_boolean(predicted):
        return (
            is_boolean(gold) and is_boolean(predicted) and gold["boolean"] == predicted["boolean"]
        )
    return result_values(gold, skip_label_columns=True) <= result_values(predicted)


# --------------------------------------------------------------------------- all together


_BOOLEAN = "http://www.w3.org/2001/XMLSchema#boolean"


def verdict_of(gold: Results, predicted: Results | None) -> Results | None:
    """A yes/no answered with its figures (one row: the two counts and the verdict, `?yes` = true/false) scored as
    the verdict it carries, when the gold is a yes/no; any other result as it is."""
    if predicted is None or not is_boolean(gold) or is_boolean(predicted):
        return predicted
    rows = bindings(predicted)
    if not rows:
        return predicted
    # SQL has no boolean type in SQLite: there the verdict column is named `yes` and holds 0/1 (`COUNT(*) > 0 AS yes`)
    columns = [n for n, t in rows[0].items() if t.get("datatype") == _BOOLEAN] if len(rows) == 1 else []
    columns = columns or [n for n in rows[0] if n.lower() == "yes"]
    # the verdict beside the rows it rests on (one row a match) counts when every row states the same one
    said = {str(r[columns[0]].get("value")) for r in rows if columns[0] in r} if len(columns) == 1 else set()
    if len(said) != 1 or not said <= {"true", "false", "1", "0"}:
        return predicted
    return {"head": {}, "boolean": said.pop() in ("true", "1")}


def score(
    gold: Results,
    predicted: Results | None,
    *,
    question: str | None = None,
    judge: AnswerJudge | None = None,
) -> Scores:
    """Every metric for one question; ``judge`` (with ``question``) adds an answer-match verdict."""
    predicted = verdict_of(gold, predicted)
    rows = row_match(gold, predicted)
    sets = set_match(gold, predicted)
    verdict: bool | None = None
    if judge is not None and question is not None:
        verdict = (
            False
            if predicted is None
            else bool(judge(question, results_text(gold), results_text(predicted)))
        )
    return Scores(
        row_em=rows.em,
        row_f1=rows.f1,
        row_precision=rows.precision,
        row_recall=rows.recall,
        set_precision=sets.precision,
        set_recall=sets.recall,
        set_f1=sets.f1,
        superset=1.0 if superset(gold, predicted) else 0.0,
        row_tp=rows.tp,
        row_fp=rows.fp,
        row_fn=rows.fn,
        set_tp=sets.tp,
        set_fp=sets.fp,
        set_fn=sets.fn,
        predicted=predicted is not None,
        judge=verdict,
    )


_MACRO_FIELDS = (
    "row_em", "row_f1", "row_precision", "row_recall",
    "set_precision", "set_recall", "set_f1", "superset",
)  # fmt: skip


def aggregate(scores: Sequence[Scores]) -> dict[str, Any]:
    """Macro (mean per question) and micro (pooled counts) summaries of many questions' scores.

    Besides ``macro`` and ``micro`` the result carries the flat headline keys of the eval
    summary: ``macro_f1`` / ``micro_f1`` (set-based), ``row_f1``, ``row_em`` (macro), ``superset``, and ``ex``
    (execution accuracy over the questions that have it, else None).
    """
    count = len(scores)
    macro: dict[str, float] = {}
    for name in _MACRO_FIELDS:
        macro[name] = sum(getattr(s, name) for s in scores) / count if count else 0.0
    judged = [s.judge for s in scores if s.judge is not None]
    if judged:
        macro["judge"] = sum(judged) / len(judged)
    executed = [s.ex for s in scores if s.ex is not None]
    if executed:
        macro["ex"] = sum(executed) / len(executed)
    set_p, set_r, set_f = prf_from_counts(
        sum(s.set_tp for s in scores), sum(s.set_fp for s in scores), sum(s.set_fn for s in scores)
    )
    row_p, row_r, row_f = prf_from_counts(
        sum(s.row_tp for s in scores), sum(s.row_fp for s in scores), sum(s.row_fn for s in scores)
    )
    if not scores:  # nothing was asked: report zeros, not the "both empty" 1.0
        set_p = set_r = set_f = row_p = row_r = row_f = 0.0
    micro = {
        "set_precision": set_p, "set_recall": set_r, "set_f1": set_f,
        "row_precision": row_p, "row_recall": row_r, "row_f1": row_f,
    }  # fmt: skip
    return {
        "count": count,
        "predicted": sum(1 for s in scores if s.predicted),
        "macro": macro,
        "micro": micro,
        "macro_f1": macro["set_f1"],
        "micro_f1": micro["set_f1"],
        "row_f1": macro["row_f1"],
        "row_em": macro["row_em"],
        "superset": macro["superset"],
        "ex": macro.get("ex"),
    }


# --------------------------------------------------------------------------- free-text answers

_CITATION = re.compile(r"\[E\d+\]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = re.compile(r"[^\w\s]")


def normalise_answer(text: str) -> str:
    """Lower case, without citation marks, punctuation, articles and extra spaces (SQuAD-style)."""
    text = _CITATION.sub(" ", text).lower()
    return " ".join(_ARTICLES.sub(" ", _PUNCT.sub(" ", text)).split())


def answer_em(gold: Sequence[str], predicted: str | None) -> bool:
    """Exact match of a free-text answer: the normalised answer is the gold (its parts joined by "and")."""
    if predicted is None or not gold:
        return False
    answer = normalise_answer(predicted)
    parts = [normalise_answer(g) for g in gold]
    return answer in {" and ".join(parts), " ".join(parts)}


def answer_superset(gold: Sequence[str], predicted: str | None) -> bool:
    """SPAGHETTI Superset for free text: every gold part occurs in the answer (normalised, as words)."""
    if predicted is None or not gold:
        return False
    answer = f" {normalise_answer(predicted)} "
    return all(f" {normalise_answer(g)} " in answer for g in gold)


@dataclass(frozen=True, slots=True)
class TextScores:
    """The metrics of one free-text answer."""

    em: float
    superset: float
    judge: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


def score_text(gold: Sequence[str], predicted: str | None, *, question: str | None = None,
               judge: AnswerJudge | None = None, short: str | None = None) -> TextScores:
    """EM, Superset and (with a judge and the question) the judge's verdict for one free-text answer; EM and
    Superset compare its `short` answer when it has one (hybrid's quiz-style line), the judge reads the whole."""
    verdict: bool | None = None
    if judge is not None and question is not None:
        verdict = False if not predicted else bool(judge(question, "; ".join(gold), predicted))
    compared = short or predicted
    return TextScores(em=float(answer_em(gold, compared)), superset=float(answer_superset(gold, compared)),
                      judge=verdict)


def aggregate_text(scores: Sequence[TextScores]) -> dict[str, Any]:
    """Means of EM, Superset and (over judged answers) the judge: the columns of SPAGHETTI's Table 2."""
    n = len(scores)
    judged = [s.judge for s in scores if s.judge is not None]
    return {
        "count": n,
        "em": sum(s.em for s in scores) / n if n else 0.0,
        "superset": sum(s.superset for s in scores) / n if n else 0.0,
        "judge": sum(judged) / len(judged) if judged else None,
    }


def gold_strings(results: Results) -> list[str]:
    """The values of a gold answer as strings (the parts a free-text answer must contain)."""
    if is_boolean(results):
        return ["yes" if results["boolean"] else "no"]
    return [_value_text(t.get("value")) for row in bindings(results) for t in row.values()]


# --------------------------------------------------------------------------- text for judges

_WIKIDATA_ENTITY = re.compile(r"^https?://www\.wikidata\.org/entity/")


def results_text(results: Results, *, max_rows: int = 50) -> str:
    """A compact text rendering of a result (for an answer judge): one row per line."""
    if is_boolean(results):
        return "yes" if results["boolean"] else "no"
    rows = bindings(results)
    lines = [
        ", ".join(_WIKIDATA_ENTITY.sub("wd:", _value_text(t.get("value"))) for t in row.values())
        for row in rows[:max_rows]
    ]
    if len(rows) > max_rows:
        lines.append(f"... ({len(rows) - max_rows} more rows)")
    return "\n".join(lines) if lines else "(no results)"


# --------------------------------------------------------------------------- helpers


def _ratio(numerator: float, denominator: float, *, empty: float) -> float:
    return numerator / denominator if denominator else empty


def _f1(precision: float, recall: float) -> float:
    total = precision + recall
    return 2 * precision * recall / total if total else 0.0
