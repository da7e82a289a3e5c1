"""Metrics: SPINACH row-major EM/F1, set P/R/F1 (macro vs micro), Superset, the judge hook."""

from __future__ import annotations

from typing import Any

import pytest

from sparqlnav.evaluation.metrics import (
    aggregate,
    check_results,
    macro_prf,
    micro_prf,
    row_f1,
    row_match,
    score,
    set_match,
    superset,
)

XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"


def uri(value: str) -> dict[str, str]:
    return {"type": "uri", "value": value}


def lit(value: str, lang: str | None = None, datatype: str | None = None) -> dict[str, str]:
    term = {"type": "literal", "value": value}
    if lang:
        term["xml:lang"] = lang
    if datatype:
        term["datatype"] = datatype
    return term


def table(*rows: dict[str, Any]) -> dict[str, Any]:
    variables: list[str] = []
    for row in rows:
        variables += [v for v in row if v not in variables]
    return {"head": {"vars": variables}, "results": {"bindings": list(rows)}}


def items(*values: str, var: str = "item") -> dict[str, Any]:
    return table(*({var: uri(v)} for v in values))


def ask(value: bool) -> dict[str, Any]:
    return {"head": {}, "boolean": value}


# The metric cases of SPINACH's own test suite (tests/test_eval.py), restated: predicted, gold, F1.
S = {"surprise": uri("c")}
SPINACH_CASES = [
    ("simple EM", table({"item": uri("a"), "itemLabel": lit("Northern Tsou", "en")}),
     table({"item": uri("a"), "itemLabel": lit("Northern Tsou", "en")}), 1.0),
    ("gold label column ignored", items("a"),
     table({"item": uri("a"), "itemLabel": lit("Northern Tsou", "en")}), 1.0),
    ("duplicate rows", items("a", "a"), items("a", "a"), 1.0),
    ("row order free", items("a", "b"), items("b", "a"), 1.0),
    ("4 false positives", items("a", "a", "c", "d", "f"), items("a"), 2 / (2 + 0 + 4)),
    ("4 false negatives", items("a"), items("a", "a", "c", "d", "f"), 2 / (2 + 0 + 4)),
    ("3 false negatives", items("a", "c"), items("a", "a", "c", "d", "f"), 2 * 2 / (2 * 2 + 3)),
    ("3 fn, 1 fp", items("a", "c", "surprise"), items("a", "a", "c", "d", "f"), 2 * 2 / (2 * 2 + 1 + 3)),
    ("half rows", items("a", "b"), table({"item": uri("b"), **S}, {"item": uri("a"), **S}), 2 / (2 + 1)),
    ("half rows, 2 fp", items("a", "b", "surprise", "surprise_2"),
     table({"item": uri("b"), **S}, {"item": uri("a"), **S}), 2 / (2 + 1 + 2)),
    ("third rows, 2 fp", items("a", "b", "surprise", "surprise_2"),
     table({"item": uri("b"), **S, "surprise_2": uri("c")}, {"item": uri("a"), **S, "surprise_2": uri("c")}),
     (1 / 3 * 2 * 2) / (1 / 3 * 2 * 2 + 2 / 3 * 2 + 2)),
    ("two thirds, 2 fp",
     table({"item": uri("b"), **S}, {"item": uri("a"), **S}, {"item": uri("surprise"), **S}, {"item": uri("surprise_2"), **S}),
     table({"item": uri("b"), **S, "surprise_2": uri("abc")}, {"item": uri("a"), **S, "surprise_2": uri("abc")}),
     (2 / 3 * 2 * 2) / (2 / 3 * 2 * 2 + 1 / 3 * 2 + 2)),
    ("duplicate gold values count once per occurrence",
     table({"item": uri("b"), **S}, {"item": uri("a"), **S}, {"item": uri("surprise"), **S}, {"item": uri("surprise_2"), **S}),
     table({"item": uri("b"), **S, "surprise_2": uri("c")}, {"item": uri("a"), **S, "surprise_2": uri("c")}),
     (2 / 3 * 2 * 2) / (2 / 3 * 2 * 2 + 1 / 3 * 2 + 2)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "predicted", "gold", "expected"), SPINACH_CASES, ids=[c[0] for c in SPINACH_CASES]
)
def test_spinach_metric_cases(name: str, predicted: dict, gold: dict, expected: float) -> None:
    assert row_f1(gold, predicted) == pytest.approx(expected, abs=1e-9)


def test_row_metrics_ignore_variable_names_and_extra_predicted_columns() -> None:
    gold = table({"county": uri("Q1")})
    predicted = table({"x": uri("Q1"), "population": lit("5", datatype=XSD_INT)})
    s = score(gold, predicted)
    assert (s.row_f1, s.row_em, s.row_precision, s.row_recall) == (1.0, 1.0, 1.0, 1.0)
    # ...while the set metric counts the extra population value as a false positive.
    assert (s.set_precision, s.set_recall) == (0.5, 1.0)


def test_cells_are_compared_by_value_in_every_metric() -> None:
    # SPINACH's code and TEXT2SPARQL compare values: a datatype or language tag does not make a new value
    gold = table({"name": lit("Paris", "en")})
    for other in (lit("Paris", "fr"), lit("Paris"), lit("Paris", "EN")):
        assert row_f1(gold, table({"name": other})) == 1.0
        assert set_match(gold, table({"name": other})).f1 == 1.0
    assert row_f1(gold, table({"name": lit("Lyon", "en")})) == 0.0
    typed = {"type": "typed-literal", "value": "5", "datatype": XSD_INT}
    assert row_f1(table({"n": lit("5", datatype=XSD_INT)}), table({"n": typed})) == 1.0
    xsd_string = lit("a", datatype="http://www.w3.org/2001/XMLSchema#string")
    assert row_f1(table({"s": lit("a")}), table({"s": xsd_string})) == 1.0
    assert row_f1(table({"n": lit("5", datatype=XSD_INT)}), table({"n": lit("6", datatype=XSD_INT)})) == 0.0


def test_label_and_description_gold_columns_ignored() -> None:
    gold = table(
        {"item": uri("Q1"), "itemLabel": lit("One", "en"), "itemDescription": lit("first", "en")}
    )
    assert row_f1(gold, items("Q1")) == 1.0
    assert superset(gold, items("Q1")) is True
    # a gold row made only of labels can never be matched
    assert (
        row_f1(table({"itemLabel": lit("One", "en")}), table({"itemLabel": lit("One", "en")}))
        == 0.0
    )
    # set F1 keeps every column, like TEXT2SPARQL: two gold values, one found
    assert set_match(
        table({"item": uri("Q1"), "itemLabel": lit("One", "en")}), items("Q1")
    ).f1 == pytest.approx(2 / 3)


def test_partial_rows_precision_recall() -> None:
    gold = table({"a": uri("x"), "b": uri("y")}, {"a": uri("z"), "b": uri("w")})
    predicted = table({"a": uri("x")}, {"a": uri("nothing")})
    m = row_match(gold, predicted)
    # one pair with recall 1/2: tp = 0.5, fn = 2 - 0.5, fp = 2 - 1
    assert (m.tp, m.fn, m.fp) == (0.5, 1.5, 1.0)
    assert m.f1 == pytest.approx(2 * 0.5 / (2 * 0.5 + 1.0 + 1.5))
    assert m.precision == pytest.approx(0.5 / 1.5)
    assert m.recall == pytest.approx(0.25)
    assert m.em == 0.0


def test_assignment_ties_follow_scipy_on_predicted_by_gold_matrix() -> None:
    # Gold rows {A,B} {C,D} {E,F}; predicted rows {A} {A,B,C} {E}. Two assignments reach total
    # recall 1.5: three half matches (F1 = 3 / 4.5 = 2/3) or {A,B,C}-{A,B} and {E}-{E,F} with
    # {C,D} left over (F1 = 3 / 5.5). SPINACH's code takes what scipy picks on a predicted-by-gold
    # matrix (2/3); scipy on the transposed matrix would pick the other one.
    gold = table(*({"a": uri(x), "b": uri(y)} for x, y in ("AB", "CD", "EF")))
    predicted = table(
        {"p": uri("A")}, {"p": uri("A"), "q": uri("B"), "r": uri("C")}, {"p": uri("E")}
    )
    assert row_f1(gold, predicted) == pytest.approx(2 / 3)


def test_booleans() -> None:
    for gold_value in (True, False):
        s = score(ask(gold_value), ask(gold_value))
        assert (s.row_em, s.row_f1, s.set_f1, s.superset) == (1.0, 1.0, 1.0, 1.0)
        s = score(ask(gold_value), ask(not gold_value))
        assert (s.row_em, s.row_f1, s.set_f1, s.superset) == (0.0, 0.0, 0.0, 0.0)
    # a table for a yes/no question is wrong unless its one row carries one verdict (a yes/no with its figures,
    # read as that verdict); a yes/no for a table question is wrong
    truth = table({"x": lit("true", datatype="http://www.w3.org/2001/XMLSchema#boolean")})
    assert score(ask(True), truth).set_f1 == 1.0 and score(ask(False), truth).set_f1 == 0.0
    assert score(ask(True), table({"x": lit("true")})).set_f1 == 0.0  # a plain "true" string is no verdict
    assert score(truth, ask(True)).row_f1 == 0.0


def test_empty_results() -> None:
    empty = table()
    s = score(empty, empty)
    assert (s.row_em, s.row_f1, s.set_precision, s.set_recall, s.set_f1, s.superset) == (1.0,) * 6
    s = score(empty, items("a"))
    assert (s.row_f1, s.set_f1, s.set_precision) == (0.0, 0.0, 0.0)
    assert s.superset == 1.0  # nothing to contain
    s = score(items("a"), empty)
    assert (s.row_f1, s.set_f1, s.set_recall, s.superset) == (0.0, 0.0, 0.0, 0.0)


def test_no_prediction_scores_zero() -> None:
    for gold in (items("a", "b"), ask(True), table()):
        s = score(gold, None)
        assert (s.row_em, s.row_f1, s.set_f1, s.superset, s.predicted) == (
            0.0,
            0.0,
            0.0,
            0.0,
            False,
        )
    assert score(items("a", "b"), None).set_fn == 2


def test_superset() -> None:
    gold = items("a", "b")
    assert superset(gold, table({"x": uri("b"), "y": lit("extra")}, {"x": uri("a")})) is True
    assert superset(gold, items("a", "c", "d")) is False
    assert superset(gold, None) is False
    # values, not terms: the lexical form suffices (SPAGHETTI compares answer strings)
    assert superset(table({"n": lit("3", datatype=XSD_INT)}), table({"count": lit("3")})) is True


def test_set_macro_and_micro_differ() -> None:
    # Q1: gold {a}, predicted {a}: P = R = F1 = 1 (tp 1).
    # Q2: gold {b..k} (10 values), predicted {b, x}: P = 1/2, R = 1/10, F1 = 1/6 (tp 1, fp 1, fn 9).
    m1 = set_match(items("a"), items("a"))
    gold2 = items(*"bcdefghijk")
    m2 = set_match(gold2, items("b", "x"))
    assert (m2.tp, m2.fp, m2.fn) == (1, 1, 9)
    assert m2.f1 == pytest.approx(1 / 6)
    macro = macro_prf([m1, m2])
    micro = micro_prf([m1, m2])
    assert macro == pytest.approx(((1 + 0.5) / 2, (1 + 0.1) / 2, (1 + 1 / 6) / 2))
    # micro: tp 2, fp 1, fn 9 → P 2/3, R 2/11, F1 2PR/(P+R) = 2/7
    assert micro == pytest.approx((2 / 3, 2 / 11, 2 / 7))
    summary = aggregate([score(items("a"), items("a")), score(gold2, items("b", "x"))])
    assert summary["macro_f1"] == pytest.approx((1 + 1 / 6) / 2)
    assert summary["micro_f1"] == pytest.approx(2 / 7)
    assert summary["macro"]["set_f1"] == summary["macro_f1"]
    assert summary["count"] == 2


def test_aggregate_row_metrics_and_counts() -> None:
    scores = [
        score(items("a"), items("a")),
        score(items("a", "b"), items("a")),
        score(ask(True), None),
    ]
    summary = aggregate(scores)
    assert summary["count"] == 3 and summary["predicted"] == 2
    assert summary["row_em"] == pytest.approx(1 / 3)
    assert summary["row_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    # micro row: tp 1+1+0, fp 0, fn 0+1+1
    assert summary["micro"]["row_f1"] == pytest.approx(2 * 2 / (2 * 2 + 0 + 2))
    empty = aggregate([])
    assert (empty["count"], empty["row_f1"], empty["micro_f1"]) == (0, 0.0, 0.0)


def test_judge_hook_is_called_with_text() -> None:
    seen: list[tuple[str, str, str]] = []

    def judge(question: str, gold: str, predicted: str) -> bool:
        seen.append((question, gold, predicted))
        return "Q42" in predicted

    s = score(items("http://www.wikidata.org/entity/Q42"), items("http://www.wikidata.org/entity/Q42"),
              question="Who wrote it?", judge=judge)  # fmt: skip
    assert s.judge is True
    assert seen == [("Who wrote it?", "wd:Q42", "wd:Q42")]
    assert score(ask(True), None, question="q", judge=judge).judge is False
    assert score(ask(True), ask(True)).judge is None
    summary = aggregate([s, score(ask(True), ask(False), question="q", judge=judge)])
    assert summary["macro"]["judge"] == 0.5


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected a SPARQL JSON results object"),
        ({"head": {}}, "needs 'boolean' or 'results.bindings'"),
        ({"boolean": "yes"}, "'boolean' must be true or false"),
        (
            {"results": {"bindings": [{"x": {"value": "a"}}]}},
            "binding 0, variable 'x' needs 'type' and 'value'",
        ),
    ],
)
def test_check_results_rejects_malformed(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_results(data)


def test_very_large_results_are_scored_quickly_by_whole_rows() -> None:
    from sparqlnav.evaluation.metrics import MAX_MATCH_CELLS, row_match

    n = int(MAX_MATCH_CELLS**0.5) + 500
    rows = [{"x": {"type": "literal", "value": str(i)}, "k": {"type": "literal", "value": "same"}} for i in range(n)]
    gold = {"head": {"vars": ["x", "k"]}, "results": {"bindings": rows}}
    assert row_match(gold, gold).f1 == 1.0
    half = {"head": {"vars": ["x", "k"]}, "results": {"bindings": rows[: n // 2]}}
    m = row_match(gold, half)
    assert (m.tp, m.fp, m.fn) == (n // 2, 0, n - n // 2)


def test_a_yes_no_answered_with_its_figures_scores_as_its_verdict() -> None:
    """Retrieve may answer "Is A faster than B?" with the two speeds and `?yes` in one row (issue 31, item 3): scored
    as the verdict it carries against an ASK gold; a row without one verdict stays a table (and scores 0)."""
    from sparqlnav.evaluation.metrics import score

    xsd = "http://www.w3.org/2001/XMLSchema#"
    gold_no = {"head": {}, "boolean": False}

    def row(**cells: tuple[str, str]) -> dict[str, Any]:
        return {"head": {"vars": list(cells)}, "results": {"bindings": [
            {k: {"type": "literal", "value": v, "datatype": xsd + t} for k, (v, t) in cells.items()}]}}

    figures = row(a=("30", "integer"), b=("30", "integer"), yes=("false", "boolean"))
    assert score(gold_no, figures).row_f1 == 1.0 and score(gold_no, figures).set_f1 == 1.0
    assert score({"head": {}, "boolean": True}, figures).row_f1 == 0.0
    assert score(gold_no, row(a=("30", "integer"), b=("31", "integer"))).row_f1 == 0.0  # no verdict to read
    two = row(x=("true", "boolean"), y=("false", "boolean"))
    assert score(gold_no, two).row_f1 == 0.0  # two verdicts: which one is the answer is not ours to guess


def test_a_verdict_beside_the_rows_it_rests_on_scores_as_that_verdict() -> None:
    """A yes/no answered with one row per match, each carrying the same `?yes` (relay player, BESTIARY "is there any
    spider with touch 11?"), scored 0 against the ASK gold; every row states the verdict, so it is the answer."""
    from sparqlnav.evaluation.metrics import verdict_of

    boolean = "http://www.w3.org/2001/XMLSchema#boolean"
    rows = {"head": {"vars": ["spider", "yes"]}, "results": {"bindings": [
        {"spider": {"type": "uri", "value": "http://x/SeaSpider"}, "yes": {"type": "literal", "value": "true", "datatype": boolean}},
        {"spider": {"type": "uri", "value": "http://x/BlackWidow"}, "yes": {"type": "literal", "value": "true", "datatype": boolean}},
    ]}}  # fmt: skip
    assert verdict_of({"head": {}, "boolean": True}, rows) == {"head": {}, "boolean": True}
    mixed = {"head": rows["head"], "results": {"bindings": [
        rows["results"]["bindings"][0], {**rows["results"]["bindings"][1], "yes": {"type": "literal", "value": "false", "datatype": boolean}}]}}  # fmt: skip
    assert verdict_of({"head": {}, "boolean": True}, mixed) is mixed  # rows that disagree state no verdict
    assert verdict_of({"head": {"vars": ["s"]}, "results": {"bindings": []}}, rows) is rows  # a table gold: as it is
