"""The build strategy's SQL target (issue 25, item 2; queryagent.txt §5): the real LLM client over HTTP against a
scripted OpenAI-compatible server, the SQL builder's tools over a real SQLite file and a real PostgreSQL, every
step run through `sparqlnav.sql.run_sql`, and ERASER's SQL guidelines, each firing on its case and silent on a
correct step."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from postgres import Postgres
from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.relational import relational_of
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.sql.draft import (
    ColumnRef,
    DatePart,
    SqlAggregate,
    SqlCondition,
    SqlDraft,
    SqlValue,
    SqlValues,
)
from sparqlnav.strategies.builder import create
from sparqlnav.strategies.builder.sql_tools import SQL_BUILD_TOOLS
from sparqlnav.trace import Trace

SN = [sys.executable, "-m", "sparqlnav"]
SCHEMA = """
CREATE TABLE departments (id INTEGER PRIMARY KEY, name TEXT NOT NULL, budget NUMERIC(12, 2));
CREATE TABLE employees (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, salary INTEGER, dept_id INTEGER REFERENCES departments (id),
  manager_id INTEGER REFERENCES employees (id));
INSERT INTO departments VALUES (1, 'Research', 1500000), (2, 'Sales', 400000), (3, 'Production', 800000);
INSERT INTO employees VALUES
  (1, 'Ada Lovelace', 120000, 1, NULL), (2, 'Alan Turing', 95000, 1, 1), (3, 'Grace Hopper', 99000, 3, 1),
  (4, 'Heinrich Hoch', 70000, 2, 3), (5, 'Karen Brant', NULL, NULL, 4);
"""
RESEARCH = "Which employees work in the Research department?"


def config_llm(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0,
                     retry_backoff_s=0)


def act(tool: str, thought: str = "", **arguments: Any) -> Reply:
    """A policy reply: a thought and one native tool call."""
    return Reply(text=thought, tool_calls=[Call(tool, arguments)])


def make_sqlite(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def sqlite_kg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeGraph]:
    folder = tmp_path_factory.mktemp("sqlbuild")
    db = make_sqlite(folder / "company.db")
    with open_kg(f"sqlite://{db}", Settings.from_env({"SPARQLNAV_HOME": str(folder / "home")})) as kg:
        yield kg


def ask(server: ScriptedLLM, kg: KnowledgeGraph, question: str, script: list[Any], **options: Any) -> Answer:
    server.script(script)
    options.setdefault("target", "sql")
    with create(config_llm(server), embedder=None, **options) as strategy:
        answer = strategy.run(question, kg, Trace())
    answer.trace.finish()
    assert server.problems == []
    assert server.remaining == 0, "the run did not use the whole script"
    return answer


def feedback_by_step(answer: Answer) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for e in answer.trace.of_kind("feedback"):
        out.setdefault(e.data["step"], []).append(e.data["id"])
    return out


def cells(answer: Answer) -> list[tuple[str, ...]]:
    assert answer.results is not None
    return sorted(tuple(row[v].value for v in answer.results.vars if v in row) for row in answer.results.rows)


RESEARCH_SCRIPT = [
    act("get_tables", "Which tables are there?"),
    act("add_table", "Employees are what is asked for.", table="employees"),
    act("add_join", "Their department's name is in departments.", from_column="employees.dept_id",
        to_column="departments.id"),
    act("add_condition", "Keep the Research department.", column="departments.name", op="=", value="Research"),
    act("set_answer_columns", "Only the names.", columns=["employees.name"]),
    act("execute", "Done."),
    Reply(text="Ada Lovelace and Alan Turing work in Research."),
]


def test_sql_builder_answers_over_sqlite(scripted_llm: ScriptedLLM, sqlite_kg: KnowledgeGraph) -> None:
    answer = ask(scripted_llm, sqlite_kg, RESEARCH, RESEARCH_SCRIPT)
    assert answer.status == "answered", answer.text
    assert cells(answer) == [("Ada Lovelace",), ("Alan Turing",)]
    assert answer.sparql is None and answer.sql == (
        'SELECT "employees"."name"\nFROM "employees"\nJOIN "departments" ON "employees"."dept_id" = "departments"."id"\n'
        "WHERE \"departments\".\"name\" = 'Research'")
    assert answer.query_language == "SQL" and answer.to_json()["sql"] == answer.sql
    assert feedback_by_step(answer) == {}  # silent on correct steps
    assert answer.usage.sql_queries >= 5 and answer.usage.sparql_queries == 0
    written = scripted_llm.requests[-1]["messages"][-1]["content"]  # the answer writer is shown SQL, not SPARQL
    assert "SQL:\nSELECT" in written and "SPARQL" not in written
    system = scripted_llm.requests[0]["messages"][0]["content"]
    assert "employees (5 rows): id integer key, name string, salary integer, dept_id integer → departments.id" in system
    assert answer.trace.of_kind("observation")[1].data["sql"] == 'SELECT *\nFROM "employees"'


def test_sql_guidelines_fire_on_their_case_and_stay_silent_on_correct_steps(
    scripted_llm: ScriptedLLM, sqlite_kg: KnowledgeGraph
) -> None:
    script = [
        act("add_table", table="employees"),  # 1 silent
        act("add_join", from_column="employees.dept_id", to_column="departments"),  # 2 silent: 4 rows of 5
        act("add_condition", column="departments.name", op="=", value=1),  # 3 a text column against a number
        act("add_condition", column="departments.name", op="=", value="research"),  # 4 stored as 'Research'
        act("add_condition", column="employees.salary", op=">", value=90000),  # 5 silent
        act("add_condition", column="departments.name", op="=", value="Research"),  # 6 silent
        act("set_answer_columns", columns=["employees.name", "employees.salary"]),  # 7 salary is not asked for
        act("set_answer_columns", columns=["employees.name"]),  # 8 silent
        act("execute"),  # 9 silent
        Reply(text="Ada Lovelace and Alan Turing."),
    ]
    answer = ask(scripted_llm, sqlite_kg, RESEARCH, script)
    assert feedback_by_step(answer) == {
        3: ["sql_empty_result", "sql_type_mismatch"],
        4: ["sql_empty_result"],
        7: ["sql_unasked_column"],
    }
    texts = {e.data["id"]: e.data["text"] for e in answer.trace.of_kind("feedback")}
    assert "departments.name holds a text, but you compared it with a number" in texts["sql_type_mismatch"]
    assert 'get_values("departments.name")' in texts["sql_empty_result"]
    assert "does not ask for employees.salary" in texts["sql_unasked_column"]
    assert cells(answer) == [("Ada Lovelace",), ("Alan Turing",)]
    assert "salary" in (answer.sql or "") and "90000" in (answer.sql or "")


def test_sql_guidelines_for_counts_and_joins(scripted_llm: ScriptedLLM, sqlite_kg: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="departments"),  # 1 silent
        act("add_join", from_column="departments.id", to_column="employees.dept_id"),  # 2 4 rows from 3 departments
        act("execute"),  # 3 a count is asked for: blocked once
        act("add_aggregate", function="count", column="employees.id", distinct=True),  # 4 silent
        act("execute"),  # 5 silent
        Reply(text="4 employees work in a department."),
    ]
    answer = ask(scripted_llm, sqlite_kg, "How many employees work in a department?", script)
    assert feedback_by_step(answer) == {2: ["sql_join_multiplies"], 3: ["sql_aggregation_missing"]}
    texts = {e.data["id"]: e.data["text"] for e in answer.trace.of_kind("feedback")}
    assert "return 4 rows while departments has 3" in texts["sql_join_multiplies"]
    assert cells(answer) == [("4",)]
    assert answer.sql is not None and 'COUNT(DISTINCT "employees"."id") AS "count_distinct_id"' in answer.sql
    # A join the other way (each employee has one department) multiplies nothing.
    script = [act("add_table", table="employees"), act("add_join", to_column="departments"),
              act("add_aggregate", function="count"), act("execute"), Reply(text="4.")]
    answer = ask(scripted_llm, sqlite_kg, "How many employees work in a department?", script)
    assert feedback_by_step(answer) == {} and cells(answer) == [("4",)]


def test_sql_execution_error_and_a_self_join(scripted_llm: ScriptedLLM, sqlite_kg: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="employees"),
        act("add_join", from_column="employees.manager_id", to_column="employees.id"),  # joins as employees_2
        act("add_condition", column="employees.name", op="=", value="Heinrich Hoch"),
        act("add_aggregate", function="sum", column="employees_2.name"),
        act("set_order", by="employees.nope", direction="desc", limit=1),  # no such column: refused by the tool
        act("set_answer_columns", columns=["employees_2.name"]),
        act("execute"),
        Reply(text="Grace Hopper manages Heinrich Hoch."),
    ]
    answer = ask(scripted_llm, sqlite_kg, "Who is the manager of Heinrich Hoch?", script)
    observations = [e.data["text"] for e in answer.trace.of_kind("observation")]
    assert "employees joins as employees_2" in observations[1]
    assert "employees has no column 'nope'" in observations[4]
    assert cells(answer) == [("Grace Hopper",)]
    assert 'JOIN "employees" AS "employees_2" ON "employees"."manager_id" = "employees_2"."id"' in (answer.sql or "")


def test_the_sql_target_needs_a_database_graph(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    scripted_llm.script([])
    with create(config_llm(scripted_llm), embedder=None, target="sql") as strategy:
        answer = strategy.run("How many products are there?", demo, Trace())
    assert answer.status == "error" and "needs a graph opened from a database" in (answer.error or "")
    with pytest.raises(ValueError, match="target is one of sparql, sql, auto"):
        create(config_llm(scripted_llm), target="cypher")


def test_sql_tools_are_declared_once_with_their_arguments() -> None:
    assert SQL_BUILD_TOOLS.names() == [
        "get_tables", "get_columns", "get_values", "get_foreign_keys", "add_table", "add_join", "add_condition",
        "add_group", "add_aggregate", "set_order", "set_answer_columns", "undo", "execute"]
    spec = {s.name: s.parameters for s in SQL_BUILD_TOOLS.specs()}
    assert spec["set_answer_columns"]["properties"]["columns"]["type"] == "array"
    assert spec["add_join"]["required"] == ["to_column"]


def test_the_draft_renders_groups_having_and_order() -> None:
    dept, emp = ColumnRef("departments", "name"), ColumnRef("employees", "id")
    count = SqlAggregate("count", emp, distinct=True)
    draft = (SqlDraft().with_base("employees")
             .with_condition(SqlCondition(ColumnRef("employees", "salary"), ">", SqlValue(50000)))
             .with_group(dept).with_aggregate(count)
             .with_condition(SqlCondition(count, ">=", SqlValue(2)))
             .with_answer((dept, count)))
    assert draft.render() == (
        'SELECT "departments"."name", COUNT(DISTINCT "employees"."id") AS "count_distinct_id"\nFROM "employees"\n'
        'WHERE "employees"."salary" > 50000\nGROUP BY "departments"."name"\n'
        'HAVING COUNT(DISTINCT "employees"."id") >= 2')
    assert SqlValue("O'Brien").sql() == "'O''Brien'"


def test_get_values_shows_how_values_are_stored(scripted_llm: ScriptedLLM, sqlite_kg: KnowledgeGraph) -> None:
    script = [
        act("get_values", column="departments.name", containing="RES"),
        act("get_values", column="salary"),
        act("add_table", table="employees"),
        act("execute"),
        Reply(text="Everyone."),
    ]
    answer = ask(scripted_llm, sqlite_kg, "List the employees.", script)
    observations = [e.data["text"] for e in answer.trace.of_kind("observation")]
    assert observations[0] == ("departments.name (string): 3 distinct value(s) in 3 of 3 rows; "
                               "from 'Production' to 'Sales'\nValues containing 'RES': 'Research' ×1")
    assert observations[1].startswith("employees.salary (integer): 4 distinct value(s) in 4 of 5 rows; "
                                      "from 70000 to 120000\nMost frequent values: NULL ×1, ")


# ---------------------------------------------------------------- what a relay run found missing (issue 25)

SHOP = """
CREATE TABLE wards (id INTEGER PRIMARY KEY, name TEXT NOT NULL, beds INTEGER);
CREATE TABLE appointments (id INTEGER PRIMARY KEY, ward_id INTEGER REFERENCES wards (id), reason TEXT);
CREATE TABLE orders (ord_id INTEGER PRIMARY KEY, ord_date TEXT, total NUMERIC);
CREATE TABLE products (id INTEGER PRIMARY KEY, title TEXT NOT NULL, price REAL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER REFERENCES products (id), stars INTEGER);
CREATE TABLE transfers (TransferCode TEXT PRIMARY KEY, fee INTEGER, season TEXT, OtherClubName TEXT);
INSERT INTO wards VALUES (1, 'Stroke Unit', 24), (2, 'Cardiology', 30);
INSERT INTO appointments VALUES (1042, 1, 'Follow-up after a stroke'), (1043, 2, 'Chest pain');
INSERT INTO orders VALUES
  (1, '2022-03-01', 10.5), (2, '2022-06-11', 3), (3, '2022-12-24', 4),
  (4, '2023-01-09', 7.25), (5, '2023-02-10', 1), (6, '2023-03-15', 2), (7, '2023-04-01', 9), (8, '2023-05-05', 3),
  (9, '2023-07-30', 2.45), (10, '2023-11-02', 8), (11, '2023-12-31', 5),
  (12, '2024-01-02', 1), (13, '2024-02-02', 1), (14, '2024-03-03', 6), (15, '2024-04-04', 2);
INSERT INTO products VALUES (1, 'Kettle', 18.200000000000003), (2, 'Toaster', 25), (3, 'Lamp', 9.99), (4, 'Mug', NULL);
INSERT INTO reviews VALUES (1, 1, 5), (2, 1, 4), (3, 3, 2);
INSERT INTO transfers VALUES ('T-001', 1000000, '2022-23', NULL), ('T-002', 500000, '2023-24', 'Harbour FC');
"""


@pytest.fixture(scope="module")
def shop_kg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeGraph]:
    folder = tmp_path_factory.mktemp("sqlshop")
    con = sqlite3.connect(folder / "shop.db")
    con.executescript(SHOP)
    con.commit()
    con.close()
    with open_kg(f"sqlite://{folder / 'shop.db'}", Settings.from_env({"SPARQLNAV_HOME": str(folder / "home")})) as kg:
        yield kg


def observed(answer: Answer) -> list[str]:
    return [e.data["text"] for e in answer.trace.of_kind("observation")]


def test_undo_takes_back_the_last_kept_step(scripted_llm: ScriptedLLM, shop_kg: KnowledgeGraph) -> None:
    script = [
        act("undo"),  # 1 nothing to undo
        act("add_table", table="wards"),  # 2
        act("add_condition", column="wards.name", op="=", value="Cardiology"),  # 3 wrong, but kept
        act("undo"),  # 4 back to every ward
        act("add_condition", column="wards.name", op="=", value="Stroke Unit"),  # 5
        act("set_answer_columns", columns=["wards.beds"]),  # 6 a stored number answers "how many"
        act("execute"),  # 7 no aggregation asked for: the number is stored
        Reply(text="The Stroke Unit has 24 beds."),
    ]
    answer = ask(scripted_llm, shop_kg, "How many beds does the Stroke Unit have?", script)
    texts = observed(answer)
    assert texts[0] == "there is no kept step to undo"
    assert texts[3].startswith('Undone: the condition. The query is again:\nSQL:\nSELECT *\nFROM "wards"\n'
                               "It returned 2 row(s):")
    assert feedback_by_step(answer) == {}
    assert cells(answer) == [("24",)] and "Cardiology" not in (answer.sql or "")
    policy = scripted_llm.requests[0]["messages"][0]["content"]
    assert "`undo()`" in policy and "can be undone" in policy
    # Undoing the first table empties the query; a table can then be chosen again.
    script = [act("add_table", table="orders"), act("undo"), act("add_table", table="wards"),
              act("set_answer_columns", columns=["wards.name"]), act("execute"), Reply(text="Two wards.")]
    answer = ask(scripted_llm, shop_kg, "Which wards are there?", script)
    assert observed(answer)[1] == "Undone: the table. The query is empty again: start with add_table."
    assert cells(answer) == [("Cardiology",), ("Stroke Unit",)]


def test_in_lists_and_rows_without_a_partner(
    scripted_llm: ScriptedLLM, shop_kg: KnowledgeGraph, sqlite_kg: KnowledgeGraph
) -> None:
    script = [
        act("add_table", table="products"),
        act("add_join", to_column="reviews", keep="unmatched"),  # along reviews.product_id
        act("set_answer_columns", columns=["products.title"]),
        act("execute"),
        Reply(text="The Toaster and the Mug."),
    ]
    answer = ask(scripted_llm, shop_kg, "Which products were never reviewed?", script)
    assert cells(answer) == [("Mug",), ("Toaster",)] and feedback_by_step(answer) == {}
    assert answer.sql == ('SELECT "products"."title"\nFROM "products"\nWHERE NOT EXISTS (SELECT 1 FROM "reviews" '
                          'WHERE "reviews"."product_id" = "products"."id")')
    # Within the same table: the employees nobody reports to.
    script = [
        act("add_table", table="employees"),
        act("add_join", to_column="employees.manager_id", from_column="employees.id", keep="unmatched"),
        act("set_answer_columns", columns=["employees.name"]),
        act("execute"),
        Reply(text="Alan Turing and Karen Brant."),
    ]
    answer = ask(scripted_llm, sqlite_kg, "Which employees manage nobody?", script)
    assert cells(answer) == [("Alan Turing",), ("Karen Brant",)]
    assert 'NOT EXISTS (SELECT 1 FROM "employees" AS "employees_2" WHERE "employees_2"."manager_id" = ' \
        '"employees"."id")' in (answer.sql or "")
    script = [
        act("add_table", table="products"),
        act("add_condition", column="products.title", op="in", value=["Kettle", "Lamp"]),
        act("add_condition", column="products.price", op="NOT IN", value="9.99, 30"),  # a text list of numbers
        act("add_join", to_column="reviews", keep="sometimes"),  # refused by the tool
        act("set_answer_columns", columns=["products.title"]),
        act("execute"),
        Reply(text="The Kettle."),
    ]
    answer = ask(scripted_llm, shop_kg, "Which of the Kettle and the Lamp do not cost 9.99 or 30?", script)
    assert cells(answer) == [("Kettle",)] and feedback_by_step(answer) == {}
    assert "WHERE \"products\".\"title\" IN ('Kettle', 'Lamp')\n  AND \"products\".\"price\" NOT IN (9.99, 30)" \
        in (answer.sql or "")
    assert observed(answer)[3] == "keep is matched or unmatched, not 'sometimes'"


def test_year_and_month_of_a_date_stored_as_text(scripted_llm: ScriptedLLM, shop_kg: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="orders"),
        act("add_group", column="orders.ord_date", part="year"),
        act("add_aggregate", function="count"),
        act("set_order", by="count_rows", direction="desc", limit=1),
        act("set_answer_columns", columns=["year_ord_date"]),
        act("execute"),
        Reply(text="2023."),
    ]
    answer = ask(scripted_llm, shop_kg, "Which year had the most orders?", script)
    assert cells(answer) == [("2023",)] and feedback_by_step(answer) == {}
    assert "Its column is year_ord_date" in observed(answer)[1]
    assert answer.sql == ("SELECT CAST(strftime('%Y', \"orders\".\"ord_date\") AS INTEGER) AS \"year_ord_date\"\n"
                          'FROM "orders"\nGROUP BY CAST(strftime(\'%Y\', "orders"."ord_date") AS INTEGER)\n'
                          "ORDER BY COUNT(*) DESC\nLIMIT 1")
    script = [
        act("add_table", table="orders"),
        act("add_aggregate", function="count"),
        act("add_condition", column="orders.ord_date", op="=", value="2023", part="year"),
        act("add_condition", column="orders.ord_date", op=">=", value=7, part="month"),
        act("execute"),
        Reply(text="3."),
    ]
    answer = ask(scripted_llm, shop_kg, "How many orders were placed from July 2023 on in that year?", script)
    assert cells(answer) == [("3",)] and feedback_by_step(answer) == {}
    pg = DatePart(ColumnRef("orders", "ord_date"), "month", "postgresql")
    assert pg.sql() == 'CAST(EXTRACT(MONTH FROM CAST("orders"."ord_date" AS DATE)) AS INTEGER)'
    assert SqlCondition(ColumnRef("t", "c"), "IN", SqlValues((SqlValue(1), SqlValue("a")))).sql() == \
        '"t"."c" IN (1, \'a\')'


def test_none_is_answered_by_counting_first(scripted_llm: ScriptedLLM, shop_kg: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="orders"),  # 1
        act("add_condition", column="orders.ord_date", op="=", value=2021, part="year"),  # 2 no row: not kept
        act("add_aggregate", function="count"),  # 3
        act("add_condition", column="orders.ord_date", op="=", value=2021, part="year"),  # 4 kept: the count says 0
        act("execute"),  # 5
        Reply(text="No, no order was placed in 2021."),
    ]
    answer = ask(scripted_llm, shop_kg, "Was any order placed in 2021?", script)
    assert feedback_by_step(answer) == {2: ["sql_empty_result"]}
    text = next(e.data["text"] for e in answer.trace.of_kind("feedback"))
    assert 'count first: after add_aggregate("count") a condition keeps the count\'s one row' in text
    assert 'get_values("orders.ord_date")' in text  # spelling still named, after the count
    assert cells(answer) == [("0",)]
    policy = scripted_llm.requests[0]["messages"][0]["content"]
    assert "add the count first" in policy


def test_asked_columns_are_not_called_unasked(scripted_llm: ScriptedLLM, shop_kg: KnowledgeGraph) -> None:
    cases = [
        ("What was appointment 1042 for?", "appointments", ("appointments.id", "=", 1042), ["appointments.reason"]),
        ("Is the Stroke Unit larger than Cardiology?", "wards", None, ["wards.name", "wards.beds"]),
        # the key names a transfer: `OtherClubName` names another club, not the table's rows (relay player, league)
        ("Which transfers happened in season 2022-23?", "transfers", ("transfers.season", "=", "2022-23"),
         ["transfers.TransferCode"]),
        ("Which orders cost more than 9?", "orders", ("orders.total", ">", 9), ["orders.ord_id"]),
    ]
    for question, table, condition, columns in cases:
        script = [act("add_table", table=table)]
        if condition is not None:
            script.append(act("add_condition", column=condition[0], op=condition[1], value=condition[2]))
        script += [act("set_answer_columns", columns=columns), act("execute"), Reply(text="Answered.")]
        answer = ask(scripted_llm, shop_kg, question, script)
        assert feedback_by_step(answer) == {}, question
        assert answer.status == "answered" and answer.results is not None and len(answer.results.rows) >= 1
    # Still said where it holds: the fee is not asked for, and a products' id is no name (they have a title).
    script = [act("add_table", table="transfers"),
              act("set_answer_columns", columns=["transfers.TransferCode", "transfers.fee"]), act("execute"),
              Reply(text="T-001 and T-002.")]
    answer = ask(scripted_llm, shop_kg, "Which transfers are there?", script)
    assert feedback_by_step(answer) == {2: ["sql_unasked_column"]}
    texts = {e.data["id"]: e.data["text"] for e in answer.trace.of_kind("feedback")}
    assert "does not ask for transfers.fee." in texts["sql_unasked_column"]
    script = [act("add_table", table="products"), act("set_answer_columns", columns=["products.id"]),
              act("execute"), Reply(text="1 to 4.")]
    answer = ask(scripted_llm, shop_kg, "Which products are there?", script)
    assert feedback_by_step(answer) == {2: ["sql_unasked_column"]}


def test_get_values_says_when_its_list_is_cut(scripted_llm: ScriptedLLM, shop_kg: KnowledgeGraph) -> None:
    script = [
        act("get_values", column="orders.ord_date"),
        act("get_values", column="orders.ord_date", containing="2023"),
        act("add_table", table="orders"),
        act("execute"),
        Reply(text="Fifteen orders."),
    ]
    answer = ask(scripted_llm, shop_kg, "List the orders.", script)
    first, second = observed(answer)[:2]
    assert first.startswith("orders.ord_date (string): 15 distinct value(s) in 15 of 15 rows; "
                            "from '2022-03-01' to '2024-04-04'\nMost frequent values: '2022-03-01' ×1, ")
    assert first.endswith(" … and 3 more value(s) (get_values with containing finds one)")
    assert second.count("×1") == 8 and "more value" not in second


def test_the_answer_writer_reads_sql_rows_as_written(scripted_llm: ScriptedLLM, shop_kg: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="products"),
        act("add_condition", column="products.title", op="IN", value=["Kettle", "Mug"]),
        act("set_answer_columns", columns=["products.title", "products.price"]),
        act("execute"),
        Reply(text="The Kettle costs 18.2; the Mug has no price."),
    ]
    answer = ask(scripted_llm, shop_kg, "What do the Kettle and the Mug cost?", script)
    assert answer.status == "answered"
    system, user = (m["content"] for m in scripted_llm.requests[-1]["messages"])
    assert "SPARQL" not in system and "a SQL query" in system
    assert "| title | price |" in user and "?title" not in user
    assert "| Kettle | 18.2 |" in user and "| Mug | NULL |" in user and "E1" not in user


# ---------------------------------------------------------------- the faces


def run_cli(*args: str, server: ScriptedLLM, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k",
           "SPARQLNAV_LLM_MODEL": "scripted-model", "SPARQLNAV_LLM_RETRIES": "0", "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([*SN, *args], capture_output=True, text=True, env=env, timeout=180, check=False)


def test_cli_ask_shows_the_sql(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    db = make_sqlite(tmp_path / "company.db")
    scripted_llm.script(RESEARCH_SCRIPT)
    shown = run_cli("ask", RESEARCH, "--kg", f"sqlite://{db}", "--strategy", "build", "-o", "target=sql", "-v",
                    server=scripted_llm, home=tmp_path / "home")
    assert shown.returncode == 0, shown.stderr
    assert "SQL" in shown.stdout and 'JOIN "departments" ON "employees"."dept_id"' in shown.stdout
    assert 'sql ok 1 (' in shown.stderr and 'ms): SELECT COUNT(*) FROM "departments"' in shown.stderr  # the steps
    assert 'sql ok 5 (' in shown.stderr and 'ms): SELECT * FROM "employees"' in shown.stderr
    assert "build · answered · 7 SQL queries · answer from SQL query #7 · 7 LLM calls" in shown.stderr
    assert "Ada Lovelace and Alan Turing work in Research." in shown.stdout
    scripted_llm.script(RESEARCH_SCRIPT)
    out = run_cli("ask", RESEARCH, "--kg", f"sqlite://{db}", "--strategy", "build", "-o", "target=sql", "--json",
                  server=scripted_llm, home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["sparql"] is None and data["sql"].startswith('SELECT "employees"."name"')
    assert {b["name"]["value"] for b in data["results"]["results"]["bindings"]} == {"Ada Lovelace", "Alan Turing"}
    assert data["usage"]["sql_queries"] >= 5
    bad = run_cli("ask", RESEARCH, "--kg", f"sqlite://{db}", "--strategy", "build", "-o", "target",
                  server=scripted_llm, home=tmp_path / "home")
    assert bad.returncode != 0 and "KEY=VALUE" in bad.stderr


# ---------------------------------------------------------------- a real PostgreSQL


@pytest.fixture(scope="module")
def postgres_kg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeGraph]:
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.importorskip("psycopg", reason="no psycopg (pip install -e '.[dev]')")
    import psycopg

    folder = tmp_path_factory.mktemp("sqlbuild-pg")
    with Postgres() as server:
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute("CREATE DATABASE company")
        with psycopg.connect(server.url("company"), autocommit=True) as con:
            con.execute(SCHEMA)  # type: ignore[call-overload]  # a literal script, several statements
        with open_kg(server.url("company"), Settings.from_env({"SPARQLNAV_HOME": str(folder / "home")})) as kg:
            yield kg


@pytest.mark.slow
def test_sql_builder_answers_over_postgresql(scripted_llm: ScriptedLLM, postgres_kg: KnowledgeGraph) -> None:
    relational = relational_of(postgres_kg)
    assert relational is not None and relational.database.kind == "postgresql"
    answer = ask(scripted_llm, postgres_kg, RESEARCH, RESEARCH_SCRIPT)
    assert answer.status == "answered" and cells(answer) == [("Ada Lovelace",), ("Alan Turing",)]
    assert feedback_by_step(answer) == {}
    # PostgreSQL refuses to compare a text column with a number: the database's error and the type both speak.
    script = [
        act("add_table", table="employees"),
        act("add_join", from_column="employees.dept_id", to_column="departments.id"),
        act("add_condition", column="departments.name", op="=", value=1),
        act("add_condition", column="departments.name", op="=", value="Research"),
        act("set_answer_columns", columns=["employees.name"]),
        act("execute"),
        Reply(text="Ada Lovelace and Alan Turing."),
    ]
    answer = ask(scripted_llm, postgres_kg, RESEARCH, script)
    assert feedback_by_step(answer) == {3: ["sql_execution_error", "sql_type_mismatch"]}
    texts = {e.data["id"]: e.data["text"] for e in answer.trace.of_kind("feedback")}
    assert "operator does not exist: text = integer" in texts["sql_execution_error"]
    assert cells(answer) == [("Ada Lovelace",), ("Alan Turing",)]


@pytest.mark.slow
def test_new_steps_over_postgresql(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    """The year of a date stored as text, IN lists and rows without a partner, as PostgreSQL writes them."""
    pytest.importorskip("psycopg", reason="no psycopg (pip install -e '.[dev]')")
    import psycopg

    with Postgres() as server:
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute("CREATE DATABASE shop")
        with psycopg.connect(server.url("shop"), autocommit=True) as con:
            con.execute(SHOP)  # type: ignore[call-overload]  # a literal script, several statements
        with open_kg(server.url("shop"), Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})) as kg:
            script = [
                act("add_table", table="orders"),
                act("add_condition", column="orders.ord_id", op="NOT IN", value=[1, 2]),
                act("add_group", column="orders.ord_date", part="year"),
                act("add_aggregate", function="count"),
                act("set_order", by="count_rows", direction="desc", limit=1),
                act("set_answer_columns", columns=["year_ord_date", "count_rows"]),
                act("execute"),
                Reply(text="2023, with 8 orders."),
            ]
            answer = ask(scripted_llm, kg, "Which year had the most orders, and how many?", script)
            assert cells(answer) == [("2023", "8")] and feedback_by_step(answer) == {}
            assert 'CAST(EXTRACT(YEAR FROM CAST("orders"."ord_date" AS DATE)) AS INTEGER)' in (answer.sql or "")
            script = [act("add_table", table="products"), act("add_join", to_column="reviews", keep="unmatched"),
                      act("set_answer_columns", columns=["products.title"]), act("execute"), Reply(text="Two.")]
            answer = ask(scripted_llm, kg, "Which products were never reviewed?", script)
            assert cells(answer) == [("Mug",), ("Toaster",)]


def test_http_and_mcp_show_the_sql(scripted_llm: ScriptedLLM, sqlite_kg: KnowledgeGraph, tmp_path: Path) -> None:
    """`serve -s build -o target=sql`: the server's default strategy takes its options; /api/ask answers with `sql`
    (and `sparql` null) where a SPARQL answer has `sparql`; MCP's ask tool says "SQL:" where it says "SPARQL:"."""
    from fastapi.testclient import TestClient
    from mcp import Client

    from sparqlnav.faces.http import ServeConfig, background, create_app
    from test_mcp import run, text_of

    scripted_llm.script(RESEARCH_SCRIPT)
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    config = ServeConfig(strategy="build", strategy_options={"target": "sql"}, allowed_hosts=("testserver",))
    app = create_app(settings, config, llm=config_llm(scripted_llm), kgs={"company": sqlite_kg})
    with TestClient(app) as client:
        data = client.post("/api/ask", json={"question": RESEARCH}).json()
    assert data["sparql"] is None and data["sql"].startswith('SELECT "employees"."name"\nFROM "employees"')
    assert data["usage"]["sql_queries"] >= 5

    async def body(client: Client) -> None:
        got = await client.call_tool("ask", {"question": RESEARCH})
        assert not got.is_error, text_of(got)
        assert 'SQL:\nSELECT "employees"."name"' in text_of(got) and "SPARQL" not in text_of(got)

    scripted_llm.script(RESEARCH_SCRIPT)
    with background(create_app(settings, config, llm=config_llm(scripted_llm), kgs={"company": sqlite_kg})) as url:
        run(url + "/mcp", body)
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0


def test_names_in_any_style_are_asked_for() -> None:
    from sparqlnav.feedback.sql import _asked

    words = ["which", "players", "play", "for", "riverside"]
    assert _asked("Player.PlayerName", words) and _asked("employees.first_name", words)
    assert not _asked("Player.MarketValue", words) and not _asked("Player.PlayerCode", words)
    assert _asked("Player.PlayerCode", ["what", "is", "the", "code", "of", "ada"])
