"""Issue 35: databases answered where they live. `ask` on a database answers in SQL by default, through the SQL
writer (one request, no tools), with no graph store made; an SQL error comes back once for a fix; an answer not to
be trusted goes to the step-by-step builder with the reason in its first request; a follow-up continues in SQL;
a SPARQL strategy on a database above the copy limit is refused in one line. The real LLM client over HTTP against
the scripted OpenAI-compatible server, a real SQLite file and a real PostgreSQL."""

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
from scripted_llm import Reply, ScriptedLLM
from sparqlnav.answer import run_question
from sparqlnav.context import RunContext, Turn
from sparqlnav.graph.kg import KGError
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.relational import database_spec
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.sql.introspect import profile_database
from sparqlnav.strategies import auto, lexical
from sparqlnav.trace import Trace
from test_sql_build import RESEARCH, SCHEMA, act, make_sqlite

SN = [sys.executable, "-m", "sparqlnav"]
GOOD = 'SELECT e.name FROM employees e JOIN departments d ON e.dept_id = d.id WHERE d.name = \'Research\''
RESEARCHERS = {"Ada Lovelace", "Alan Turing"}


def llm_of(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0,
                     retry_backoff_s=0)


def sql_reply(sql: str) -> Reply:
    return Reply(f"Here it is.\n\n```sql\n{sql}\n```", input_tokens=1500, output_tokens=60)


def system_of(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def users_of(request: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "user")


def stores_under(home: Path) -> list[Path]:
    return [p for p in (home / "stores").glob("*") if p.is_dir()] if (home / "stores").is_dir() else []


@pytest.fixture
def company(tmp_path: Path) -> Path:
    return make_sqlite(tmp_path / "company.db")


def cascade(server: ScriptedLLM, settings: Settings) -> Any:
    return auto.create(llm_of(server), settings=settings)


def test_ask_on_a_database_answers_in_sql_with_no_store(scripted_llm: ScriptedLLM, company: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "OPENAI_BASE_URL": scripted_llm.base_url,
           "OPENAI_API_KEY": "k", "SPARQLNAV_LLM_MODEL": "scripted-model", "NO_COLOR": "1"}  # fmt: skip
    scripted_llm.script([sql_reply(GOOD), Reply("Ada Lovelace and Alan Turing work in Research.")])
    done = subprocess.run([*SN, "ask", RESEARCH, "--kg", f"sqlite://{company}", "--json"], capture_output=True,
                          text=True, timeout=240, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["sql"] == GOOD and answer["sparql"] is None
    assert answer["strategy"] == "auto→sql" and answer["status"] == "answered"
    assert {c["value"] for b in answer["results"]["results"]["bindings"] for c in b.values()} == RESEARCHERS
    assert answer["usage"]["llm_calls"] == 2
    assert stores_under(home) == []  # nothing copied into a graph store (before: the direct-mapped copy first)
    prompt = system_of(scripted_llm.requests[0])
    assert '"departments" (3 rows; key id)' in prompt and "dept_id INTEGER → departments.id" in prompt
    assert "values 'Research', 'Sales', 'Production'" in prompt or "'Research'" in prompt
    assert "SQLite" in prompt
    # relay players selected ids and filter columns beside the answer, which execution accuracy counts as wrong
    assert "Select exactly what the question asks for, one column per thing asked, and nothing else" in prompt
    assert "the verdict in a column named `yes`" in prompt


def test_an_sql_error_comes_back_once_for_a_fix(scripted_llm: ScriptedLLM, company: Path, tmp_path: Path) -> None:
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    scripted_llm.script([sql_reply("SELECT name FROM staff"), sql_reply(GOOD), Reply("Ada and Alan.")])
    with open_kg(f"sqlite://{company}", settings) as kg, cascade(scripted_llm, settings) as strategy:
        answer = run_question(strategy, RESEARCH, kg, Trace())
    assert answer.sql == GOOD and {t.value for t in answer.results.values()} == RESEARCHERS  # type: ignore[union-attr]
    fix = users_of(scripted_llm.requests[1])
    assert "The query was run on the database and failed: no such table: staff" in fix
    assert [e.data["purpose"] for e in answer.trace.of_kind("llm_call")] == ["generate", "fix", "answer"]


def test_an_untrusted_answer_goes_to_the_builder_with_the_reason(
    scripted_llm: ScriptedLLM, company: Path, tmp_path: Path
) -> None:
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    nothing = "SELECT name FROM employees WHERE dept_id = 99"
    scripted_llm.script([
        sql_reply(nothing), sql_reply(nothing),  # empty twice: not trusted
        act("add_table", table="employees"),
        act("add_join", from_column="employees.dept_id", to_column="departments.id"),
        act("add_condition", column="departments.name", op="=", value="Research"),
        act("set_answer_columns", columns=["employees.name"]),
        act("execute"),
        Reply("Ada Lovelace and Alan Turing."),
    ])
    with open_kg(f"sqlite://{company}", settings) as kg, cascade(scripted_llm, settings) as strategy:
        answer = run_question(strategy, RESEARCH, kg, Trace())
    builder_first = users_of(scripted_llm.requests[2])
    assert "An earlier attempt (sql) was not trusted:" in builder_first and "no rows" in builder_first
    assert nothing in builder_first  # the writer's SQL, to start from
    assert answer.strategy == "auto→build" and answer.sql is not None
    assert {t.value for t in answer.results.values()} == RESEARCHERS  # type: ignore[union-attr]
    assert [e.data["to"] for e in answer.trace.of_kind("escalate")] == ["build"]
    assert stores_under(tmp_path / "home") == []


def test_a_follow_up_continues_in_sql(scripted_llm: ScriptedLLM, company: Path, tmp_path: Path) -> None:
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    salaries = "SELECT e.name, e.salary FROM employees e WHERE e.dept_id = 1"
    scripted_llm.script([sql_reply(salaries), Reply("Ada earns 120,000 and Alan 95,000.")])
    earlier = Turn(question=RESEARCH, sparql=GOOD, results="Ada Lovelace; Alan Turing", answer="Ada and Alan.")
    with open_kg(f"sqlite://{company}", settings) as kg, cascade(scripted_llm, settings) as strategy:
        answer = run_question(strategy, "And what do they earn?", kg, Trace(), RunContext(history=(earlier,)))
    asked = users_of(scripted_llm.requests[0])
    assert "Turn 1. Question: " + RESEARCH in asked and GOOD in asked and "And what do they earn?" in asked
    assert answer.sql == salaries and len(answer.results) == 2  # type: ignore[arg-type]


def test_a_sparql_strategy_on_a_database_too_big_to_copy_is_refused(company: Path, tmp_path: Path) -> None:
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home"), "SPARQLNAV_DB_COPY_MAX_ROWS": "5"})
    with open_kg(f"sqlite://{company}", settings) as kg, \
            pytest.raises(KGError, match=r"has 8 rows, more than SPARQLNAV_DB_COPY_MAX_ROWS \(5\)"):
        run_question(lexical.create(), "How many employees are there?", kg, Trace())
    assert stores_under(tmp_path / "home") == []
    small = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home2")})
    with open_kg(f"sqlite://{company}", small) as kg:  # under the limit: copied for SPARQL, as before
        answered = run_question(lexical.create(), "How many employees are there?", kg, Trace())
    assert answered.sparql is not None and len(stores_under(tmp_path / "home2")) == 1


@pytest.fixture(scope="module")
def postgres_company() -> Iterator[str]:
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.importorskip("psycopg", reason="no psycopg (pip install -e '.[dev]')")
    import psycopg

    with Postgres() as server:
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute("CREATE DATABASE company")
        with psycopg.connect(server.url("company"), autocommit=True) as con:
            con.execute(SCHEMA.replace("NUMERIC(12, 2)", "NUMERIC(12, 2)"))  # type: ignore[call-overload]
            con.execute("ANALYZE")
        yield server.url("company")


@pytest.mark.slow
def test_postgresql_is_answered_in_sql_with_its_catalogue(
    scripted_llm: ScriptedLLM, postgres_company: str, tmp_path: Path
) -> None:
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    database = database_spec(postgres_company)
    assert database is not None
    profile = profile_database(database, tmp_path / "profiles")
    assert {t.name: t.rows for t in profile.tables} == {"departments": 3, "employees": 5}
    again = profile_database(database, tmp_path / "profiles")  # kept: read back, not made again
    assert again == profile and len(list((tmp_path / "profiles").glob("*.json"))) == 1
    scripted_llm.script([sql_reply("SELECT nme FROM employees"), sql_reply(GOOD), Reply("Ada and Alan.")])
    with open_kg(postgres_company, settings) as kg, cascade(scripted_llm, settings) as strategy:
        answer = run_question(strategy, RESEARCH, kg, Trace())
    assert answer.sql == GOOD and {t.value for t in answer.results.values()} == RESEARCHERS  # type: ignore[union-attr]
    assert 'column "nme" does not exist' in users_of(scripted_llm.requests[1])
    assert "PostgreSQL" in system_of(scripted_llm.requests[0])
    assert stores_under(tmp_path / "home") == []


def test_lexical_first_on_a_small_database_when_asked(
    scripted_llm: ScriptedLLM, company: Path, tmp_path: Path
) -> None:
    """SPARQLNAV_DB_LEXICAL_MAX_ROWS: a database this small is read by lexical first on its graph copy; the answer
    check confirms it (one LLM call, no SQL written). Above the limit the SQL writer answers, nothing copied."""
    home = tmp_path / "home"
    settings = Settings.from_env({"SPARQLNAV_HOME": str(home), "SPARQLNAV_DB_LEXICAL_MAX_ROWS": "100"})
    scripted_llm.script([Reply("ANSWERS IT")])
    with open_kg(f"sqlite://{company}", settings) as kg, cascade(scripted_llm, settings) as strategy:
        assert kg.sparql_cost() == 8  # the rows a copy would hold, before it is made
        answer = run_question(strategy, "What is the salary of Grace Hopper?", kg, Trace())
        assert kg.sparql_cost() == 0
    assert answer.strategy == "auto→lexical" and answer.sql is None and answer.sparql is not None
    assert [t.value for t in answer.results.values()] == ["99000"]  # type: ignore[union-attr]
    assert [e.data["purpose"] for e in answer.trace.of_kind("llm_call")] == ["answer check"]
    assert len(stores_under(home)) == 1

    home2 = tmp_path / "home2"
    settings = Settings.from_env({"SPARQLNAV_HOME": str(home2), "SPARQLNAV_DB_LEXICAL_MAX_ROWS": "7"})
    scripted_llm.script([sql_reply(GOOD), Reply("Ada Lovelace and Alan Turing.")])
    with open_kg(f"sqlite://{company}", settings) as kg, cascade(scripted_llm, settings) as strategy:
        answer = run_question(strategy, RESEARCH, kg, Trace())
    assert answer.strategy == "auto→sql" and answer.sql == GOOD
    assert stores_under(home2) == []


def test_index_examples_on_a_database_keeps_sql_pairs_the_writer_shows(
    scripted_llm: ScriptedLLM, company: Path, tmp_path: Path
) -> None:
    """`index --examples` on a database takes question/SQL pairs (nothing copied); the SQL writer's request shows
    the pairs closest to the question, in their own section; a pair whose SQL writes is refused, naming the file."""
    home = tmp_path / "home"
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([
        {"id": "p1", "question": "Which employees earn more than their manager?",
         "sql": "SELECT e.name FROM employees e JOIN employees m ON m.id = e.manager_id WHERE e.salary > m.salary"},
        {"id": "p2", "question": "What is the budget of the Sales department?",
         "sql": "SELECT budget FROM departments WHERE name = 'Sales'"},
    ]))  # fmt: skip
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1"}
    done = subprocess.run([*SN, "index", "--kg", f"sqlite://{company}", "--examples", str(pairs), "--json"],
                          capture_output=True, text=True, timeout=240, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sql_examples"] == 2
    assert stores_under(home) == []

    settings = Settings.from_env({"SPARQLNAV_HOME": str(home)})
    scripted_llm.script([sql_reply("SELECT budget FROM departments WHERE name = 'Research'"), Reply("1,500,000.")])
    with open_kg(f"sqlite://{company}", settings) as kg, cascade(scripted_llm, settings) as strategy:
        answer = run_question(strategy, "What is the budget of the Research department?", kg, Trace())
    assert answer.sql is not None and [t.value for t in answer.results.values()] == ["1500000"]  # type: ignore[union-attr]
    prompt = system_of(scripted_llm.requests[0])
    section = prompt.split("## Questions answered on this database before, with their SQL", 1)[1]
    assert "Question: What is the budget of the Sales department?\n```sql\nSELECT budget FROM departments " in section
    assert "earn more than" not in section  # a pair that shares no word with the question is left out

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "x", "question": "Remove Sales", "sql": "DELETE FROM departments"}]))
    done = subprocess.run([*SN, "index", "--kg", f"sqlite://{company}", "--examples", str(bad)],
                          capture_output=True, text=True, timeout=240, env=env, check=False)  # fmt: skip
    assert done.returncode != 0 and "bad.json: the SQL of 'x' is refused" in done.stderr


def test_truth_values_are_listed_as_the_dialect_writes_them(postgres_company: str, tmp_path: Path) -> None:
    """A BOOLEAN column was profiled as text: SQLite's 0/1 shown as '0', '1' (a model compares with a string), and
    PostgreSQL's had no MIN/MAX at all. Now SQLite lists 0, 1 and PostgreSQL false, true, unquoted."""
    import psycopg

    from sparqlnav.strategies.write_sql import schema_view

    db = tmp_path / "flags.db"
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE drugs (code TEXT PRIMARY KEY, controlled BOOLEAN);"
                      "INSERT INTO drugs VALUES ('A', 1), ('B', 0), ('C', 0);")
    con.commit()
    con.close()
    lite = database_spec(f"sqlite://{db}")
    assert lite is not None
    view, _ = schema_view(profile_database(lite), "Which drugs are controlled?")
    assert "controlled BOOLEAN  -- values 0, 1" in view
    flags = postgres_company.rsplit("/", 1)[0] + "/flags"  # a database of its own: the company one stays as it is
    with psycopg.connect(postgres_company, autocommit=True) as pg:
        pg.execute("CREATE DATABASE flags")
    with psycopg.connect(flags, autocommit=True) as pg:
        pg.execute("CREATE TABLE drugs (code TEXT PRIMARY KEY, controlled BOOLEAN)")
        pg.execute("INSERT INTO drugs VALUES ('A', true), ('B', false)")
    pg_db = database_spec(flags)
    assert pg_db is not None
    view, _ = schema_view(profile_database(pg_db), "Which drugs are controlled?")
    assert "controlled boolean  -- values false, true" in view


def test_names_the_question_gives_are_found_as_the_data_stores_them(tmp_path: Path) -> None:
    """Relay players (clinic): a full name kept in first_name and last_name was "held by no text column"; a
    possessive ("Walter Young's") and a sign ("AB-") were looked up as other texts. Each is now found as stored."""
    from sparqlnav.strategies.write_sql import _named_line, named_values

    db = tmp_path / "clinic.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE people (id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT, blood TEXT);
        INSERT INTO people VALUES (1, 'Mira', 'Olsen', 'AB-'), (2, 'Tomas', 'Reyes', 'O+'), (3, 'Mira', 'Reyes', 'AB+');
    """)
    con.commit()
    con.close()
    database = database_spec(f"sqlite://{db}")
    assert database is not None
    tables = list(profile_database(database).tables)
    lines = [_named_line(n) for q in ("When was Mira Olsen born?", "What is Tomas Reyes's blood type?",
                                      "How many people have blood type AB-?")
             for n in named_values(database, tables, q, Trace())]  # fmt: skip
    assert lines == [
        "- \"Mira Olsen\": stored in parts in people: 'Mira' in people.first_name and 'Olsen' in people.last_name",
        "- \"Tomas Reyes\": stored in parts in people: 'Tomas' in people.first_name and 'Reyes' in people.last_name",
        "- \"AB-\": stored as 'AB-' in people.blood",
    ]  # before: "no text column of these tables holds it" (twice) and "AB": not found


def test_what_the_question_names_is_found_where_it_is_and_its_table_shown(tmp_path: Path) -> None:
    """Relay players (shop, clinic): a named value in a table ranked out of the full view was "held by no text
    column of these tables" and the table's columns were not shown; a name that is part of a longer stored text was
    "not found"; a column's NULLs were never mentioned ("still in hospital" is a NULL discharge date)."""
    from sparqlnav.strategies.write_sql import _named_line, named_values, ranked_tables, schema_view

    db = tmp_path / "shop.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE groups (grp_id INTEGER PRIMARY KEY, grp_label TEXT, grp_parent INTEGER);
        CREATE TABLE products (id INTEGER PRIMARY KEY, prod_name TEXT, grp_id INTEGER,
                               retired_on DATE);
        CREATE TABLE stock_a (id INTEGER PRIMARY KEY, product_note TEXT); CREATE TABLE stock_b (id INTEGER PRIMARY KEY);
        CREATE TABLE stock_c (id INTEGER PRIMARY KEY); CREATE TABLE stock_d (id INTEGER PRIMARY KEY);
        CREATE TABLE stock_e (id INTEGER PRIMARY KEY); CREATE TABLE stock_f (id INTEGER PRIMARY KEY);
    """)
    con.executemany("INSERT INTO groups VALUES (?, ?, ?)", [(i, f"Group {i}", None) for i in range(1, 40)]
                    + [(40, "Garden Tools", 1)])
    con.executemany("INSERT INTO products VALUES (?, ?, ?, ?)",
                    [(1, "Lumen Arc 300 Lamp", 40, None), (2, "Pebble Mug", 2, "2023-01-04"), (3, "Reed Vase", 3, None)])
    con.commit()
    con.close()
    database = database_spec(f"sqlite://{db}")
    assert database is not None
    profile = profile_database(database)
    question = "How many products of the stock are in 'Garden Tools' and is the Lumen Arc retired?"
    named = named_values(database, ranked_tables(profile, question), question, Trace())
    lines = [_named_line(n) for n in named]
    assert "- \"Garden Tools\": stored as 'Garden Tools' in groups.grp_label" in lines
    assert ("- \"Lumen Arc\": no value is just that; it is part of 'Lumen Arc 300 Lamp' in products.prod_name "
            "(match with LIKE)") in lines  # before: "no text column of these tables holds it"
    assert "groups" not in [t.name for t in schema_view(profile, question)[1]]  # ranked out on its own
    view, chosen = schema_view(profile, question, holding=["groups"])
    assert "groups" in [t.name for t in chosen] and "grp_label TEXT" in view
    assert "retired_on DATE  -- values 2023-01-04; 2 empty (NULL)" in view
