"""Execution accuracy (evaluation/execution.py) and SQL results as the metrics read them (evaluation/sql_runs.py):
column order free, numbers within a relative tolerance, NULLs, duplicates as a multiset, yes/no, rankings."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparqlnav.evaluation.execution import execution_match, is_ranking, top_level
from sparqlnav.evaluation.metrics import score
from sparqlnav.evaluation.score import score_lines
from sparqlnav.evaluation.sql_runs import is_exists_query, sql_results, sql_term, variable_names

XSD = "http://www.w3.org/2001/XMLSchema#"


def sql(columns: list[str], rows: list[list[Any]], query: str | None = None) -> dict[str, Any]:
    return sql_results(columns, [tuple(r) for r in rows], query)


def ex(gold: dict[str, Any], predicted: dict[str, Any] | None, **options: Any) -> bool:
    return execution_match(gold, predicted, **options).correct


def test_column_order_is_free_and_names_play_no_part() -> None:
    gold = sql(["name", "total"], [["Ada", 3], ["Alan", 5]])
    assert ex(gold, sql(["n", "name"], [[5, "Alan"], [3, "Ada"]]))
    # Columns are paired by their values, not their multisets alone: here each column's values match a gold
    # column's, but only one pairing makes the rows agree.
    gold = sql(["a", "b"], [[1, 2], [2, 1], [3, 3]])
    assert ex(gold, sql(["x", "y"], [[2, 1], [1, 2], [3, 3]]))
    assert not ex(gold, sql(["x", "y"], [[1, 1], [2, 2], [3, 3]]))
    # One column too many or too few is another answer; row F1 still gives partial credit.
    wide = sql(["name", "total", "id"], [["Ada", 3, 1], ["Alan", 5, 2]])
    match = execution_match(sql(["name", "total"], [["Ada", 3], ["Alan", 5]]), wide)
    assert not match.correct and match.reason == "3 column(s), the gold has 2"
    assert score(sql(["name", "total"], [["Ada", 3], ["Alan", 5]]), wide).row_f1 == 1.0


def test_numbers_within_a_relative_tolerance_whatever_their_type() -> None:
    gold = sql(["avg"], [[Decimal("29.2867647058823")]])
    assert ex(gold, sql(["avg"], [[29.286764705882362]]))
    assert ex(gold, sql(["avg"], [[29.2868]]), tolerance=1e-5)
    assert not ex(gold, sql(["avg"], [[29.2868]]))  # 1.2e-6 apart: outside the default 1e-6
    assert not ex(gold, sql(["avg"], [[29.3]]))
    # int, float, Decimal and numeric text are one value; a leading zero keeps text as text.
    assert ex(sql(["n"], [[3]]), sql(["n"], [[3.0]]))
    assert ex(sql(["n"], [[Decimal("3.50")]]), sql(["n"], [["3.5"]]))
    assert ex(sql(["n"], [[120000]]), sql(["n"], [[Decimal("120000.00")]]))
    assert not ex(sql(["code"], [["007"]]), sql(["code"], [[7]]))
    # Big integers compare exactly; values near zero within an absolute floor.
    assert not ex(sql(["n"], [[2**62]]), sql(["n"], [[2**62 + 1]]))
    assert ex(sql(["x"], [[0.0]]), sql(["x"], [[1e-17]]))
    # A boolean is 1 or 0 (PostgreSQL's True against SQLite's 1).
    assert ex(sql(["active"], [[True], [False]]), sql(["active"], [[0], [1]]))


def test_nulls_equal_only_nulls() -> None:
    gold = sql(["name", "email"], [["Alan", None], ["Ada", "ada@example.org"]])
    assert ex(gold, sql(["email", "name"], [["ada@example.org", "Ada"], [None, "Alan"]]))
    assert not ex(gold, sql(["name", "email"], [["Alan", ""], ["Ada", "ada@example.org"]]))
    assert not ex(gold, sql(["name", "email"], [["Alan", 0], ["Ada", "ada@example.org"]]))
    assert not ex(sql(["x"], [[None]]), sql(["x"], [["NULL"]]))


def test_duplicates_count_as_a_multiset() -> None:
    gold = sql(["city"], [["Toulouse"], ["Toulouse"], ["Lyon"]])
    assert ex(gold, sql(["city"], [["Lyon"], ["Toulouse"], ["Toulouse"]]))
    assert not ex(gold, sql(["city"], [["Toulouse"], ["Lyon"]]))  # DISTINCT lost a row
    assert not ex(gold, sql(["city"], [["Toulouse"], ["Lyon"], ["Lyon"]]))  # same size, other counts
    match = execution_match(gold, sql(["city"], [["Toulouse"], ["Lyon"]]))
    assert match.reason == "2 row(s), the gold has 3"
    # Near-ties in two number columns sort rows apart; the rows are still matched.
    gold = sql(["a", "b"], [[1.0, 2.0], [1.0000000001, 1.0]])
    assert ex(gold, sql(["a", "b"], [[1.0000000001, 2.0], [1.0, 1.0]]))


def test_yes_no_from_select_exists_reads_as_a_boolean() -> None:
    exists = "SELECT EXISTS (SELECT 1 FROM employees WHERE salary > 100000) AS answer"
    assert is_exists_query(exists) and is_exists_query("  select exists(select 1) as a")
    assert not is_exists_query("SELECT name FROM t WHERE EXISTS (SELECT 1)")
    assert sql(["answer"], [[1]], exists) == {"head": {}, "boolean": True}
    assert sql(["answer"], [[False]], exists) == {"head": {}, "boolean": False}  # PostgreSQL
    gold = sql(["answer"], [[1]], exists)
    assert ex(gold, sql(["answer"], [[1]], exists))
    assert not ex(gold, sql(["answer"], [[0]], exists))
    assert ex(gold, sql(["yes"], [[1]]))  # SELECT COUNT(*) > 0: one 0/1 cell is a verdict
    assert ex(gold, {"head": {}, "boolean": True})  # an ASK
    assert not ex(gold, sql(["n"], [[3]]))  # a count is no verdict
    match = execution_match(gold, sql(["name"], [["Ada"], ["Alan"]]))
    assert not match.correct and match.reason == "a table, the gold is a yes/no"
    # A count of 1 is a table, not a yes/no: a SELECT EXISTS answer to it is wrong.
    assert not ex(sql(["n"], [[1]], "SELECT COUNT(*) AS n FROM t"), sql(["answer"], [[1]], exists))
    # Row F1 reads both sides the same way.
    assert score(gold, sql(["answer"], [[1]], exists)).row_f1 == 1.0


def test_order_counts_only_for_a_ranking() -> None:
    assert is_ranking("SELECT name FROM products ORDER BY price DESC LIMIT 3")
    assert is_ranking("SELECT ?p WHERE { ?p <http://x/price#a> ?v } ORDER BY DESC(?v) LIMIT 3")
    assert is_ranking("SELECT name FROM t ORDER BY 1 FETCH FIRST 3 ROWS ONLY")
    assert not is_ranking("SELECT name FROM products ORDER BY name")  # a presentation order
    assert not is_ranking("SELECT name FROM (SELECT name FROM t ORDER BY x LIMIT 3) AS s")  # inner ranking
    assert not is_ranking("SELECT name FROM t WHERE note = 'ORDER BY x LIMIT 3' -- ORDER BY y LIMIT 1")
    assert not is_ranking(None)
    assert "LIMIT" not in top_level("SELECT a FROM (SELECT a FROM t LIMIT 1) s")
    gold = sql(["name", "price"], [["C", 30], ["B", 20], ["A", 10]])
    swapped = sql(["name", "price"], [["B", 20], ["C", 30], ["A", 10]])
    assert ex(gold, swapped)  # no ranking: a set
    match = execution_match(gold, swapped, ordered=True)
    assert not match.correct and match.reason == "the gold's rows in another order (a ranking)"
    assert ex(gold, sql(["price", "name"], [[30, "C"], [20, "B"], [10, "A"]]), ordered=True)


def test_empty_missing_and_sparql_results() -> None:
    empty = sql(["name"], [])
    assert ex(empty, sql(["other", "columns"], []))
    assert not ex(empty, sql(["name"], [["Ada"]]))
    assert not execution_match(sql(["name"], [["Ada"]]), None).correct
    # SPARQL results: typed literals are numbers, IRIs and plain strings text, unbound cells NULLs.
    gold = {"head": {"vars": ["p", "n", "x"]}, "results": {"bindings": [
        {"p": {"type": "uri", "value": "http://e/1"}, "n": {"type": "literal", "value": "3", "datatype": XSD + "integer"}},
    ]}}  # fmt: skip
    predicted = {"head": {"vars": ["count", "item", "unused"]}, "results": {"bindings": [
        {"count": {"type": "literal", "value": "3.0E0", "datatype": XSD + "double"}, "item": {"type": "uri", "value": "http://e/1"}},
    ]}}  # fmt: skip
    assert ex(gold, predicted)


def test_sql_values_keep_their_types() -> None:
    assert variable_names(["name", "name", "", "name"]) == ["name", "name_2", "column_3", "name_3"]
    assert sql_term(None) is None
    assert sql_term(3) == {"type": "literal", "value": "3", "datatype": XSD + "integer"}
    assert sql_term(Decimal("1.50"))["datatype"] == XSD + "decimal"  # type: ignore[index]
    assert sql_term(float("inf"))["value"] == "INF"  # type: ignore[index]
    assert sql_term(dt.date(2024, 2, 29))["value"] == "2024-02-29"  # type: ignore[index]
    assert sql_term(b"\x01\xff")["value"] == "01FF"  # type: ignore[index]
    assert sql_term("x") == {"type": "literal", "value": "x"}
    assert sql(["a", "b"], [[None, 1]])["results"]["bindings"] == [{"b": sql_term(1)}]


def test_score_reads_sql_tables_and_sql_dataset_lines(tmp_path: Path) -> None:
    exists = "SELECT EXISTS (SELECT 1 FROM t) AS answer"
    lines = [
        {"id": "cols", "gold": {"columns": ["a", "b"], "rows": [[1, "x"], [2, "y"]]},
         "predicted": {"columns": ["b", "a"], "rows": [["y", 2.0], ["x", 1]]}},
        {"id": "yes", "gold_sql": exists, "gold": {"columns": ["answer"], "rows": [[1]]},
         "predicted": {"columns": ["answer"], "rows": [[0]]}, "sql": exists},
        {"id": "rank", "ordered": True, "gold": {"columns": ["n"], "rows": [[3], [2]]},
         "predicted": {"columns": ["n"], "rows": [[2], [3]]}},
        {"id": "sparql", "gold_sql": "SELECT 1", "gold": sql(["n"], [[1]]), "predicted": sql(["n"], [[1]])},
        {"id": "plain", "gold": sql(["n"], [[1]]), "predicted": sql(["n"], [[1]])},  # no SQL: no execution accuracy
    ]
    report = score_lines([json.dumps(line) for line in lines])
    found = {item.id: item.scores.ex for item in report.items if item.scores is not None}
    assert found == {"cols": 1.0, "yes": 0.0, "rank": 0.0, "sparql": 1.0, "plain": None}
    assert report.overall["ex"] == pytest.approx(0.5)
    assert report.overall["macro"]["row_f1"] == pytest.approx(0.8)  # all but the wrong verdict: the ranking as a set


def test_interchangeable_columns_are_tried_once() -> None:
    import time

    nulls = [None] * 7  # 7! orders of seven all-NULL columns, were each of them tried
    names = [f"c{i}" for i in range(9)]
    gold = sql(names, [[n, n, *nulls] for n in range(300)])
    # Every column holds the gold's values, but the rows pair n with 299 - n: no pairing of columns gives them.
    crossed = sql(names, [[*nulls, n, 299 - n] for n in range(300)])
    started = time.perf_counter()
    assert execution_match(gold, crossed).reason == "the rows differ"
    assert ex(gold, sql(names, [[*nulls, n, n] for n in range(300)]))
    assert time.perf_counter() - started < 1.0
