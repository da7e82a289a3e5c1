"""The SQL builder after the relay players' second round (issue 35, item 5): one test per point they found, each
driving the real LLM client over HTTP against the scripted OpenAI-compatible server and the builder's tools over a
real SQLite file of our own (countries, the languages spoken there, payments, and visits whose country codes are
stored with spaces around them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres import Postgres
from scripted_llm import Reply, ScriptedLLM
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.settings import Settings
from sparqlnav.strategies.prompts import prompt_text
from test_sql_build import act, ask, cells, feedback_by_step, observed

WORLD = """
CREATE TABLE countries (code TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE languages (
  country_code TEXT REFERENCES countries (code), language TEXT NOT NULL,
  FOREIGN KEY (country_code) REFERENCES countries (code));
CREATE TABLE payments (id INTEGER PRIMARY KEY, country_code TEXT REFERENCES countries (code), amount INTEGER);
CREATE TABLE visits (id INTEGER PRIMARY KEY, country_code TEXT, city TEXT);
INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany'), ('BE', 'Belgium'), ('CH', 'Switzerland'),
  ('PT', 'Portugal');
INSERT INTO languages VALUES ('FR', 'French'), ('BE', 'French'), ('BE', 'Dutch'), ('BE', 'German'),
  ('CH', 'German'), ('CH', 'French'), ('CH', 'Italian'), ('DE', 'German'), ('PT', 'Portuguese');
INSERT INTO payments VALUES (1, 'FR', 10), (2, 'FR', 15), (3, 'DE', 7), (4, 'BE', 3);
INSERT INTO visits VALUES (1, ' FR', 'Paris'), (2, ' DE', 'Berlin'), (3, 'BE ', 'Brussels');
"""
# languages declares its one foreign key twice (inline and as a table constraint): SQLite lists it twice.


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeGraph]:
    folder = tmp_path_factory.mktemp("sqlworld")
    con = sqlite3.connect(folder / "world.db")
    con.executescript(WORLD)
    con.commit()
    con.close()
    with open_kg(f"sqlite://{folder / 'world.db'}", Settings.from_env({"SPARQLNAV_HOME": str(folder / "home")})) as kg:
        yield kg


def feedback_texts(answer: object) -> dict[str, str]:
    return {e.data["id"]: e.data["text"] for e in answer.trace.of_kind("feedback")}  # type: ignore[attr-defined]


def test_answer_columns_name_an_aggregate_and_a_later_aggregate_is_returned(
    scripted_llm: ScriptedLLM, world: KnowledgeGraph
) -> None:
    script = [
        act("add_table", table="payments"),
        act("add_group", column="payments.country_code"),
        act("set_answer_columns", columns=["payments.country_code", "sum_amount"]),  # not added yet
        act("add_aggregate", function="count"),  # after the answer's columns: returned too
        act("execute"),
        Reply(text="France paid 25 in two payments, Germany 7, Belgium 3."),
    ]
    answer = ask(scripted_llm, world, "How much did each country pay in total, in how many payments?", script)
    assert answer.status == "answered", observed(answer)
    assert cells(answer) == [("BE", "3", "1"), ("DE", "7", "1"), ("FR", "25", "2")]
    assert answer.sql == ('SELECT "payments"."country_code", SUM("payments"."amount") AS "sum_amount", COUNT(*) AS '
                          '"count_rows"\nFROM "payments"\nGROUP BY "payments"."country_code"')


def test_aggregation_missing_is_silent_on_having_and_on_ties_kept(scripted_llm: ScriptedLLM, world: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="languages"),
        act("add_group", column="languages.country_code"),
        act("add_aggregate", function="count"),
        act("add_condition", column="count_rows", op=">=", value=2),
        act("set_answer_columns", columns=["languages.country_code"]),
        act("execute"),
        Reply(text="Belgium and Switzerland."),
    ]
    answer = ask(scripted_llm, world, "Which countries speak at least two languages?", script)
    assert "sql_aggregation_missing" not in feedback_texts(answer) and cells(answer) == [("BE",), ("CH",)]
    # "The rarest": ordered smallest first and kept whole, so the three tied languages stay.
    script = [
        act("add_table", table="languages"),
        act("add_group", column="languages.language"),
        act("add_aggregate", function="count"),
        act("set_order", by="count_rows", direction="asc"),
        act("execute"),
        Reply(text="Dutch, Italian and Portuguese, each spoken in one country."),
    ]
    answer = ask(scripted_llm, world, "Which is the rarest language?", script)
    assert feedback_by_step(answer) == {} and answer.status == "answered"
    # Where it still fires it no longer pushes a limit of 1.
    script = [act("add_table", table="payments"), act("execute"), act("execute"), Reply(text="France.")]
    answer = ask(scripted_llm, world, "Which country paid the largest amount?", script)
    text = feedback_texts(answer)["sql_aggregation_missing"]
    assert 'set_order(…, "desc") (a limit of 1 drops rows that tie)' in text and '"desc", 1)' not in text


def test_a_join_whose_columns_share_no_value_is_blamed_on_the_join(
    scripted_llm: ScriptedLLM, world: KnowledgeGraph
) -> None:
    script = [
        act("add_table", table="countries"),
        act("add_join", to_column="visits.country_code", from_column="countries.code"),
        act("get_values", column="visits.country_code"),
        Reply(text="No answer."),
    ]
    answer = ask(scripted_llm, world, "Which cities were visited in each country?", script, max_steps=3)
    text = observed(answer)[1]
    assert ("countries.code and visits.country_code share no stored value; 3 row(s) would meet a partner with the "
            "spaces around the values trimmed: one side stores them with spaces") in text
    said = feedback_texts(answer)["sql_empty_result"]
    assert "The two columns of the join share no stored value" in said and "spelt" not in said


def test_stored_values_with_spaces_are_pointed_out(scripted_llm: ScriptedLLM, world: KnowledgeGraph) -> None:
    script = [act("get_values", column="visits.country_code"), act("get_values", column="countries.code")]
    answer = ask(scripted_llm, world, "Which country codes were visited?", script, max_steps=2)
    spaced, plain = observed(answer)[:2]
    assert "3 value(s) are stored with spaces before or after them" in spaced and "' FR' ×1" in spaced
    assert "spaces" not in plain


def test_the_column_asked_for_is_not_called_unasked(scripted_llm: ScriptedLLM, world: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="languages"),
        act("add_join", to_column="countries"),  # along the foreign key declared twice
        act("add_condition", column="countries.name", op="=", value="Belgium"),
        act("set_answer_columns", columns=["languages.language"]),
        act("execute"),
        Reply(text="Dutch, French and German."),
    ]
    answer = ask(scripted_llm, world, "What languages are spoken in Belgium?", script)
    assert feedback_by_step(answer) == {}
    assert cells(answer) == [("Dutch",), ("French",), ("German",)]
    assert 'JOIN "countries" ON "languages"."country_code" = "countries"."code"' in (answer.sql or "")


def test_a_list_can_be_made_distinct_and_the_join_advice_says_how(
    scripted_llm: ScriptedLLM, world: KnowledgeGraph
) -> None:
    script = [
        act("add_table", table="countries"),
        act("add_join", to_column="languages"),  # 9 rows from 5 countries
        act("set_answer_columns", columns=["languages.language"], distinct=True),
        act("execute"),
        Reply(text="Dutch, French, German, Italian and Portuguese."),
    ]
    answer = ask(scripted_llm, world, "Which languages are spoken?", script)
    assert cells(answer) == [("Dutch",), ("French",), ("German",), ("Italian",), ("Portuguese",)]
    assert (answer.sql or "").startswith('SELECT DISTINCT "languages"."language"\nFROM "countries"')
    assert feedback_by_step(answer) == {2: ["sql_join_multiplies"]}
    assert "if it lists countries, return each row once (set_answer_columns with distinct true)" in " ".join(
        feedback_texts(answer)["sql_join_multiplies"].split())


def test_an_anti_join_takes_a_condition(scripted_llm: ScriptedLLM, world: KnowledgeGraph) -> None:
    script = [
        act("add_table", table="countries"),
        act("add_join", to_column="languages", keep="unmatched"),
        act("add_condition", column="languages.language", op="=", value="French"),  # inside the NOT EXISTS
        act("set_answer_columns", columns=["countries.name"]),
        act("execute"),
        Reply(text="Germany and Portugal."),
    ]
    answer = ask(scripted_llm, world, "Which countries do not speak French?", script)
    assert cells(answer) == [("Germany",), ("Portugal",)]
    assert answer.sql == ('SELECT "countries"."name"\nFROM "countries"\nWHERE NOT EXISTS (SELECT 1 FROM "languages" '
                          'WHERE "languages"."country_code" = "countries"."code" AND "languages"."language" = '
                          "'French')")
    kept = observed(answer)[1]
    assert "It returned no rows." in kept and "Kept for now, though every row has a partner in languages." in kept
    assert "add_condition on languages.column puts it inside the NOT EXISTS" in kept
    assert feedback_by_step(answer) == {}


def test_the_step_limit_is_stated_and_counted_down(scripted_llm: ScriptedLLM, world: KnowledgeGraph) -> None:
    script = [act("add_table", table="countries"), act("get_tables"), act("get_tables"),
              act("set_answer_columns", columns=["countries.name"]), Reply(text="Five countries.")]
    answer = ask(scripted_llm, world, "Which countries are there?", script, max_steps=4)
    assert answer.status == "budget_exhausted"
    system = scripted_llm.requests[0]["messages"][0]["content"]
    assert "You have 4 steps (tool calls) in all." in system
    assert "say in a sentence" not in system and "each reply is exactly one tool call" in system
    shown = [m["content"] for m in scripted_llm.requests[3]["messages"] if m["role"] == "tool"]
    assert shown[0].endswith("\n\n3 step(s) left: the query as it stands when they run out is the answer.")
    assert shown[2].endswith("\n\n1 step(s) left: the query as it stands when they run out is the answer.")


def test_the_answer_writer_is_told_of_a_note_only_when_one_comes(
    scripted_llm: ScriptedLLM, world: KnowledgeGraph
) -> None:
    script = [act("add_table", table="countries"), act("set_answer_columns", columns=["countries.name"]),
              act("execute"), Reply(text="Five countries.")]
    ask(scripted_llm, world, "Which countries are there?", script)
    system, user = (m["content"] for m in scripted_llm.requests[-1]["messages"])
    assert "note" not in system and "noted" not in user
    script[-2] = act("execute", "Reading 'countries' as every row of the table.")
    ask(scripted_llm, world, "Which countries are there?", script)
    system, user = (m["content"] for m in scripted_llm.requests[-1]["messages"])
    assert " ".join(prompt_text("explore_answer_note.md").split()) in " ".join(system.split())
    assert "The query's author noted: Reading 'countries'" in user


def test_a_tie_on_an_order_key_left_out_of_the_answer_reaches_the_writer(
    scripted_llm: ScriptedLLM, world: KnowledgeGraph
) -> None:
    script = [
        act("add_table", table="languages"),
        act("add_group", column="languages.language"),
        act("add_aggregate", function="count"),
        act("set_order", by="count_rows", direction="desc", limit=1),
        act("set_answer_columns", columns=["languages.language"]),  # the count dropped
        act("execute"),
        Reply(text="French and German, each spoken in three countries."),
    ]
    answer = ask(scripted_llm, world, "Which language is spoken in the most countries?", script)
    assert len(cells(answer)) == 1  # the limit keeps one of the two
    said = ("The rows are ordered by count_rows, which the answer does not return: 2 rows share its largest value, "
            "3, so they tie; the limit of 1 returns 1 of them.")
    assert said in observed(answer)[-1]
    system, user = (m["content"] for m in scripted_llm.requests[-1]["messages"])
    assert f"The query's author noted: {said}" in user and "they tie" in system


@pytest.mark.slow
def test_the_new_probes_over_postgresql(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    """Values stored with spaces, a join sharing no value, an anti-join's condition and a tie, as PostgreSQL runs them."""
    pytest.importorskip("psycopg", reason="no psycopg (pip install -e '.[dev]')")
    import psycopg

    with Postgres() as server:
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute("CREATE DATABASE world")
        with psycopg.connect(server.url("world"), autocommit=True) as con:
            con.execute(WORLD)  # type: ignore[call-overload]  # a literal script, several statements
        with open_kg(server.url("world"), Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})) as kg:
            script = [
                act("get_values", column="visits.country_code"),
                act("add_table", table="countries"),
                act("add_join", to_column="visits.country_code", from_column="countries.code"),
                act("add_join", to_column="languages", keep="unmatched"),
                act("add_condition", column="languages.language", op="=", value="French"),
                act("set_answer_columns", columns=["countries.name"]),
                act("execute"),
                Reply(text="Germany and Portugal."),
            ]
            answer = ask(scripted_llm, kg, "Which countries do not speak French?", script)
            texts = observed(answer)
            assert "3 value(s) are stored with spaces before or after them" in texts[0]
            assert "share no stored value; 3 row(s) would meet a partner with the spaces" in texts[2]
            assert cells(answer) == [("Germany",), ("Portugal",)]
            script = [
                act("add_table", table="languages"),
                act("add_group", column="languages.language"),
                act("add_aggregate", function="count"),
                act("set_order", by="count_rows", direction="desc", limit=1),
                act("set_answer_columns", columns=["languages.language"]),
                act("execute"),
                Reply(text="French and German."),
            ]
            answer = ask(scripted_llm, kg, "Which language is spoken in the most countries?", script)
            assert "2 rows share its largest value, 3, so they tie; the limit of 1 returns 1 of them." in \
                observed(answer)[-1]


def test_a_text_stored_in_another_column_is_said_not_blamed_on_spelling(
    scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    """A relay player (clinic) filtered patients on a name that is a doctor's: the feedback said "spelt or
    capitalised differently", which leads a weaker model to answer "none". Now the step says which column holds it."""
    db = tmp_path / "company.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE departments (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT, dept_id INTEGER REFERENCES departments (id));
        INSERT INTO departments VALUES (1, 'Research'), (2, 'Sales');
        INSERT INTO employees VALUES (1, 'Ada Lovelace', 1), (2, 'Alan Turing', 1), (3, 'Grace Hopper', 2);
    """)
    con.commit()
    con.close()
    with open_kg(f"sqlite://{db}", Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})) as kg:
        answer = ask(scripted_llm, kg, "Who works in research?", [
            act("add_table", table="employees"),
            act("add_condition", column="employees.name", op="=", value="research"),
            act("add_join", table="departments"),
            act("add_condition", column="departments.name", op="=", value="Research"),
            act("set_answer_columns", columns=["employees.name"]), act("execute"), Reply("Ada and Alan.")])
    seen = observed(answer)[1]
    assert "'Research' is stored in departments.name (as 'Research'): is that the column the question means?" in seen
    texts = {e.data["id"]: e.data["text"] for e in answer.trace.of_kind("feedback")}
    assert "The text is stored in departments.name, not in employees.name" in texts["sql_empty_result"]
    assert "spelt or capitalised differently" not in texts["sql_empty_result"]  # before: the spelling was blamed
