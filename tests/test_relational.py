"""Relational databases as graphs (issue 25, item 1): a SQLite file or a PostgreSQL database opened with `--kg`,
turned into triples by the W3C Direct Mapping, read without writing, answered like any local graph."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres import Postgres
from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import run_question
from sparqlnav.graph.direct_mapping import canonical_decimal, canonical_double, iri_safe
from sparqlnav.graph.kg import KGError, KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.relational import (
    PostgresReader,
    SqliteReader,
    database_spec,
    materialise,
    read_database,
    stored_status,
)
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.strategies.explore import create as create_explore
from sparqlnav.tools.digest import Digests
from sparqlnav.trace import Trace

BASE = "http://sparqlnav.local/db/company/"
XSD = "http://www.w3.org/2001/XMLSchema#"
SN = [sys.executable, "-m", "sparqlnav"]

# Valid in SQLite and PostgreSQL alike: a self-referencing key (employees.manager_id), a composite key (projects)
# referred to by a composite foreign key in another column order (assignments), a table without a key holding two
# identical rows (assignments), a foreign key to a unique column that is no primary key (badges.holder), NULLs, and
# a key value that needs percent-encoding ('SALES PUSH').
SCHEMA = """
CREATE TABLE departments (id INTEGER PRIMARY KEY, name TEXT NOT NULL, budget REAL, founded DATE);
CREATE TABLE employees (
  id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT, email TEXT UNIQUE, salary NUMERIC(10, 2), hired DATE,
  active BOOLEAN, dept_id INTEGER REFERENCES departments (id), manager_id INTEGER REFERENCES employees (id));
CREATE TABLE projects (
  code TEXT, year INTEGER, title TEXT, dept_id INTEGER REFERENCES departments (id), PRIMARY KEY (code, year));
CREATE TABLE assignments (
  employee_id INTEGER REFERENCES employees (id), project_code TEXT, project_year INTEGER, hours REAL,
  FOREIGN KEY (project_year, project_code) REFERENCES projects (year, code));
CREATE TABLE badges (number INTEGER PRIMARY KEY, holder TEXT REFERENCES employees (email));
INSERT INTO departments VALUES
  (1, 'Research', 1500000.5, '2001-03-15'), (2, 'Sales & Marketing', NULL, NULL), (3, 'Production', 800000, '1999-12-01');
INSERT INTO employees VALUES
  (1, 'Ada', 'Lovelace', 'ada@example.org', 120000, '2010-01-04', TRUE, 1, NULL),
  (2, 'Alan', 'Turing', NULL, 95000.5, '2012-06-23', TRUE, 1, 1),
  (3, 'Grace', 'Hopper', 'grace@example.org', 99000, NULL, FALSE, 3, 1),
  (4, 'Heinrich', 'Hoch', 'hh@example.org', 70000, '2019-09-01', TRUE, 2, 3),
  (5, 'Karen', 'Brant', NULL, NULL, '2021-02-28', NULL, NULL, 4);
INSERT INTO projects VALUES
  ('APOLLO', 2023, 'Moon sensors', 1), ('APOLLO', 2024, 'Moon sensors II', 1), ('SALES PUSH', 2024, 'Spring campaign', 2);
INSERT INTO assignments VALUES
  (1, 'APOLLO', 2023, 12.5), (2, 'APOLLO', 2024, 40), (4, 'SALES PUSH', 2024, NULL), (4, 'SALES PUSH', 2024, NULL);
INSERT INTO badges VALUES (10, 'ada@example.org'), (11, 'hh@example.org'), (12, NULL);
"""
TABLES = {
    "departments": ("id", "name", "budget", "founded"),
    "employees": ("id", "first_name", "last_name", "email", "salary", "hired", "active", "dept_id", "manager_id"),
    "projects": ("code", "year", "title", "dept_id"),
    "assignments": ("employee_id", "project_code", "project_year", "hours"),
    "badges": ("number", "holder"),
}
DATATYPES = {
    ("departments", "id"): XSD + "integer",
    ("departments", "name"): XSD + "string",
    ("departments", "budget"): XSD + "double",
    ("departments", "founded"): XSD + "date",
    ("employees", "salary"): XSD + "decimal",
    ("employees", "hired"): XSD + "date",
    ("employees", "active"): XSD + "boolean",
    ("employees", "manager_id"): XSD + "integer",
    ("projects", "code"): XSD + "string",
    ("assignments", "hours"): XSD + "double",
}


def make_sqlite(path: Path) -> Path:
    """The test database as a SQLite file (written by the test, never by sparqlnav)."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.commit()
    con.close()
    return path


def expected_counts() -> dict[tuple[str, str | None], int]:
    """Rows per table and non-NULL values per column, counted by SQL on an in-memory copy of the test database."""
    con = sqlite3.connect(":memory:")
    con.executescript(SCHEMA)
    out: dict[tuple[str, str | None], int] = {}
    for table, columns in TABLES.items():
        out[(table, None)] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for column in columns:
            out[(table, column)] = con.execute(f"SELECT count({column}) FROM {table}").fetchone()[0]
    con.close()
    return out


def home_settings(tmp_path: Path) -> Settings:
    return Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})


def values(kg: KnowledgeGraph, query: str) -> list[dict[str, str]]:
    """A query's rows as plain {variable: value} dicts."""
    result = kg.endpoint.query(query)
    assert result.ok and result.table is not None, result.message
    return [{k: t.value for k, t in row.items()} for row in result.table.rows]


def count(kg: KnowledgeGraph, pattern: str) -> int:
    return int(values(kg, f"SELECT (COUNT(*) AS ?n) WHERE {{ {pattern} }}")[0]["n"])


def assert_direct_mapping(kg: KnowledgeGraph) -> None:
    """What the Direct Mapping of the test database must hold, whatever database it was read from."""
    # One typed row per table row (the two identical rows of the keyless table stay two), one triple per non-NULL value.
    for (table, column), n in expected_counts().items():
        if column is None:
            assert count(kg, f"SELECT DISTINCT ?s WHERE {{ ?s a <{BASE}{table}> }}") == n, table
        else:
            assert count(kg, f"?s <{BASE}{table}#{column}> ?o") == n, (table, column)
    # Row IRIs: the key's columns in key order, values percent-encoded; keyless rows numbered.
    assert values(kg, f"SELECT ?t WHERE {{ <{BASE}projects/code=SALES%20PUSH;year=2024> <{BASE}projects#title> ?t }}") \
        == [{"t": "Spring campaign"}]
    assert {r["s"] for r in values(kg, f"SELECT ?s WHERE {{ ?s a <{BASE}assignments> }}")} \
        == {f"{BASE}assignments/_row={n}" for n in (1, 2, 3, 4)}
    # Foreign keys link rows: the self-reference (no link where it is NULL) …
    managers = {(r["s"], r["o"]) for r in values(kg, f"SELECT ?s ?o WHERE {{ ?s <{BASE}employees#ref-manager_id> ?o }}")}
    assert managers == {(f"{BASE}employees/id={e}", f"{BASE}employees/id={m}") for e, m in ((2, 1), (3, 1), (4, 3), (5, 4))}
    # … and a composite key in another column order than the referenced key's; every link ends at a row of its target.
    projects = {r["o"] for r in values(kg, f"SELECT ?o WHERE {{ ?s <{BASE}assignments#ref-project_year;project_code> ?o }}")}
    assert projects == {f"{BASE}projects/code=APOLLO;year=2023", f"{BASE}projects/code=APOLLO;year=2024",
                        f"{BASE}projects/code=SALES%20PUSH;year=2024"}
    # A key to a unique column is looked up among the rows it refers to.
    holders = {(r["s"], r["o"]) for r in values(kg, f"SELECT ?s ?o WHERE {{ ?s <{BASE}badges#ref-holder> ?o }}")}
    assert holders == {(f"{BASE}badges/number=10", f"{BASE}employees/id=1"), (f"{BASE}badges/number=11", f"{BASE}employees/id=4")}
    for table, fk, target in (("employees", "ref-manager_id", "employees"), ("employees", "ref-dept_id", "departments"),
                              ("assignments", "ref-project_year;project_code", "projects"),
                              ("badges", "ref-holder", "employees")):
        assert count(kg, f"?s <{BASE}{table}#{fk}> ?o FILTER NOT EXISTS {{ ?o a <{BASE}{target}> }}") == 0
    assert count(kg, f"?s <{BASE}employees#ref-dept_id> ?o") == 4  # Karen's dept_id is NULL
    # Datatypes from the columns' SQL types; numbers compare as numbers.
    for (table, column), datatype in DATATYPES.items():
        found = values(kg, f"SELECT DISTINCT ?dt WHERE {{ ?s <{BASE}{table}#{column}> ?o BIND(DATATYPE(?o) AS ?dt) }}")
        assert found == [{"dt": datatype}], (table, column, found)
    assert count(kg, f"<{BASE}departments/id=1> <{BASE}departments#budget> ?b FILTER(?b = 1500000.5)") == 1
    assert count(kg, f"<{BASE}employees/id=2> <{BASE}employees#salary> 95000.5") == 1
    # Labels from name-like columns (a person's two name parts), the tables' singular, the links' names.
    labels = {r["s"]: r["l"] for r in values(kg, "SELECT ?s ?l WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }")}
    assert labels[f"{BASE}employees/id=1"] == "Ada Lovelace" and labels[f"{BASE}departments/id=2"] == "Sales & Marketing"
    assert labels[f"{BASE}projects/code=APOLLO;year=2023"] == "Moon sensors"
    assert labels[f"{BASE}employees"] == "employee" and labels[f"{BASE}employees#ref-manager_id"] == "manager"
    assert labels[f"{BASE}employees#ref-dept_id"] == "department"
    assert not any(s.startswith(f"{BASE}assignments/") for s in labels)  # no name-like column


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    return subprocess.run([*SN, *args], capture_output=True, text=True, env=env, timeout=240, check=False)


def ask_counts_employees(kg: str, home: Path) -> None:
    """`sparqlnav ask` answers a count over the database through the lexical strategy, with no LLM."""
    res = run("ask", "How many employees are there?", "--kg", kg, "--strategy", "lexical", "--json", home=home)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["usage"]["llm_calls"] == 0
    assert out["results"]["results"]["bindings"][0]["count"]["value"] == "5", out["answer"]
    assert f"<{BASE}employees>" in out["sparql"] or "db:employees" in out["sparql"]
    found = run("search", "Grace Hoper", "--kg", kg, "--json", home=home)  # misspelt
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["entities"][0]["iri"] == f"{BASE}employees/id=3"


# ---------------------------------------------------------------- the mapping


def test_literal_forms_and_iri_escapes() -> None:
    assert canonical_double(1500000.5) == "1.5000005E6" and canonical_double(0.0) == "0.0E0"
    assert canonical_double(40.0) == "4.0E1" and canonical_double(float("inf")) == "INF"
    from decimal import Decimal

    assert canonical_decimal(Decimal("120000.00")) == "120000.0" and canonical_decimal(Decimal("95000.50")) == "95000.5"
    assert iri_safe("SALES PUSH") == "SALES%20PUSH" and iri_safe("a;b=c/d#e") == "a%3Bb%3Dc%2Fd%23e"
    assert iri_safe("Zürich-1.x_~") == "Zürich-1.x_~"


def test_sqlite_direct_mapping_counts_links_and_datatypes(tmp_path: Path) -> None:
    db = make_sqlite(tmp_path / "company.db")
    with open_kg(f"sqlite://{db}", home_settings(tmp_path)) as kg:
        assert kg.name == "company.db" and "answered in SQL, copied into a graph only for SPARQL" in kg.description
        kg.sparql_ready()  # what a SPARQL strategy does first: the database's mapped copy
        assert "from the SQLite database" in kg.description
        assert_direct_mapping(kg)
        # Prefixes read as the database does: tables as db: classes, columns under their table's name.
        assert kg.prefixes.compact(f"{BASE}employees") == "db:employees"
        assert kg.prefixes.compact(f"{BASE}employees#first_name") == "employees:first_name"


def test_sqlite_is_opened_read_only_and_its_store_follows_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    db = make_sqlite(folder / "company.db")
    wal = make_sqlite(folder / "wal.sqlite")
    con = sqlite3.connect(wal)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    settings = home_settings(tmp_path)
    stores = settings.paths.stores_dir
    for spec, base in ((f"sqlite://{db}", BASE), (str(wal), "http://sparqlnav.local/db/wal/")):  # a URL; a path
        with open_kg(spec, settings) as kg:
            assert count(kg, f"?s a <{base}employees>") == 5
    # Not a byte changed, and no journal, -wal or -shm file was made beside them; the connection cannot write.
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()} == before
    for path in (db, wal):
        spec = database_spec(str(path))
        assert spec is not None
        with read_database(spec) as reader:
            assert isinstance(reader, SqliteReader)
            with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|query_only"):
                reader.con.execute("CREATE TABLE intruder (i INTEGER)")
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()} == before
    # A second opening reuses the store; a change to the file builds a new one (and removes the old).
    spec = database_spec(f"sqlite://{db}")
    assert spec is not None
    first = materialise(spec, stores)
    assert first.info.built_s is None and stored_status(first.info.files[0], first.info.path.name) == "current"
    con = sqlite3.connect(db)
    con.execute("INSERT INTO employees (id, first_name, last_name) VALUES (6, 'Katherine', 'Johnson')")
    con.commit()
    con.close()
    assert stored_status(first.info.files[0], first.info.path.name) == "stale"
    with open_kg(str(db), settings) as kg:
        assert count(kg, f"?s a <{BASE}employees>") == 6
    assert not first.info.path.exists()


def test_ask_and_search_a_sqlite_database_through_the_cli(tmp_path: Path) -> None:
    db = make_sqlite(tmp_path / "company.db")
    ask_counts_employees(f"sqlite://{db}", tmp_path / "home")


def test_explore_prompt_names_the_tables(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    db = make_sqlite(tmp_path / "company.db")
    settings = home_settings(tmp_path)
    query = f"SELECT (COUNT(?e) AS ?n) WHERE {{ ?e a <{BASE}employees> }}"
    scripted_llm.script([Reply(text="", tool_calls=[Call("execute_sparql", {"query": query})]),
                         Reply(text="", tool_calls=[Call("stop", {})]), Reply(text="Five.")])
    config = LLMConfig(model="scripted-model", base_url=scripted_llm.base_url, api_key="k", timeout_s=10,
                       max_retries=0, retry_backoff_s=0)
    with open_kg(f"sqlite://{db}", settings) as kg, create_explore(config, digests=Digests(), settings=settings) as explore:
        answer = run_question(explore, "How many employees are there?", kg, Trace())
    assert answer.status == "answered"
    system = scripted_llm.requests[0]["messages"][0]["content"]
    assert "- db:employees (5): " in system and "employees:ref-manager_id → db:employees" in system
    assert "employees:hired → xsd:date" in system and "employees:salary → xsd:decimal" in system
    assert f"db: <{BASE}>" in system and f"employee: <{BASE}employees/>" in system
    assert "employees2" not in system  # no invented prefix for the rows' namespace


def test_bad_database_values_fail_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "company.db").write_text("not a database")
    closed = _closed_port()
    for kg, needle in [
        ("sqlite://host/company.db", "bad SQLite URL"),
        (f"sqlite://{tmp_path}/missing.db", "no such SQLite database"),
        (str(tmp_path / "missing.sqlite3"), "no such SQLite database"),
        (str(tmp_path / "company.db"), "cannot read"),
        (f"postgresql://nobody@127.0.0.1:{closed}/company", "cannot connect to PostgreSQL at postgresql://nobody@127.0.0.1"),
        (f"postgresql://nobody:secret@127.0.0.1:{closed}/company", "cannot connect to PostgreSQL"),
        ("postgresql:/nobody:secret@127.0.0.1/company", "bad PostgreSQL URL"),
    ]:
        res = run("sparql", "ASK {}", "--kg", kg, home=tmp_path / "home")
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.returncode != 0 and len(lines) == 1 and needle in lines[0], res.stderr
        assert "secret" not in res.stderr and "Traceback" not in res.stderr
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the optional driver were not installed
    with pytest.raises(KGError, match=r"needs the psycopg driver: pip install 'sparqlnav\[postgres\]'"):
        open_kg(f"postgresql://nobody@127.0.0.1:{closed}/company", home_settings(tmp_path))


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


# ---------------------------------------------------------------- a real PostgreSQL


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A private PostgreSQL holding the test database; yields its URL."""
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):  # under CI=true, where the dev extra installs
        pytest.importorskip("psycopg", reason="no psycopg (pip install -e '.[dev]')")  # it, its absence fails
    import psycopg

    with Postgres() as server:
        with psycopg.connect(server.url(), autocommit=True) as con:
            con.execute("CREATE DATABASE company")
        with psycopg.connect(server.url("company"), autocommit=True) as con:
            con.execute(SCHEMA)  # type: ignore[call-overload]  # a literal script, several statements
        yield server.url("company")


@pytest.mark.slow
def test_postgresql_direct_mapping_matches_sqlite(postgres: str, tmp_path: Path) -> None:
    with open_kg(postgres, home_settings(tmp_path)) as kg:
        kg.sparql_ready()  # what a SPARQL strategy does first: the database's mapped copy
        assert kg.name == postgres and "from the PostgreSQL database" in kg.description
        assert_direct_mapping(kg)
    ask_counts_employees(postgres, tmp_path / "home")


@pytest.mark.slow
def test_postgresql_is_read_in_a_read_only_transaction(postgres: str) -> None:
    import psycopg

    spec = database_spec(postgres)
    assert spec is not None
    with read_database(spec) as reader:
        assert isinstance(reader, PostgresReader) and reader.transaction_read_only() == "on"
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.con.execute("CREATE TABLE intruder (i integer)")
    with psycopg.connect(postgres) as con:
        assert con.execute("SELECT to_regclass('intruder')").fetchone() == (None,)


def test_labels_come_from_name_columns_in_any_naming_style() -> None:
    """CamelCase schemas (`ClubName`) and tables that prefix every column (`cust_fname`, `cust_lname`) have labels
    too; the class and link labels read as words (`PlayerSeasonStats` → "player season stat", `HomeClub` → "home
    club")."""
    from sparqlnav.graph.direct_mapping import (
        Column,
        ForeignKey,
        Table,
        label_columns,
        link_label,
        table_label,
    )

    def table(name: str, *columns: str) -> Table:
        return Table(name, tuple(Column(c, "TEXT") for c in columns), (columns[0],))

    assert label_columns(table("Club", "ClubCode", "ClubName", "City")) == ("ClubName",)
    assert label_columns(table("Player", "PlayerCode", "FirstName", "LastName")) == ("FirstName", "LastName")
    assert label_columns(table("customers", "cust_id", "cust_fname", "cust_lname")) == ("cust_fname", "cust_lname")
    assert label_columns(table("staff", "id", "staff_first_name", "staff_last_name")) == (
        "staff_first_name", "staff_last_name")
    assert label_columns(table("readings", "id", "value")) == ()
    assert table_label("PlayerSeasonStats") == "player season stat"
    assert link_label(ForeignKey(("HomeClub",), "Club", ("ClubCode",))) == "home club"
