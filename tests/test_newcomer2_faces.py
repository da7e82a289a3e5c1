"""What a new user trips on, round two (issue 40), on every face: one syntax error at one place (item 3), SQL answers
shown as SQL in the CLI and the web UI (item 5), the web UI's "Probably:" without the query's text and the answer
first on a phone (item 6). Fixtures are written here: the zoo graph and library database of tests/test_newcomer2.py;
the browser parts run in headless Chromium as tests/test_ui.py does, the LLM is the scripted server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client

import test_ui
from scripted_llm import Reply, ScriptedLLM
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.mcp import SingleKG, create_mcp_server
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from test_cli import run
from test_newcomer2 import library, zoo
from test_sql_build import act, run_cli

browser_page = test_ui.browser_page

# The user's query: the '.' between the two triple patterns is missing, and `ex:`/`rdfs:` are left for sparqlnav to
# declare (the graph knows them). The error is at line 1, column 37 of what they typed, the second `?a`.
TYPED = "SELECT ?a ?l WHERE { ?a a ex:Animal ?a rdfs:label ?l }"
# The same on two lines: line 2, column 24.
TYPED_TWO_LINES = "SELECT ?a ?l\nWHERE { ?a a ex:Animal ?a rdfs:label ?l }"
REASON = "expected '.' between triple patterns, found '?a'"


@pytest.fixture(scope="module")
def zoo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zoo graph's Turtle file."""
    return zoo(tmp_path_factory.mktemp("zoo"))


@pytest.fixture(scope="module")
def zoo_graph(zoo_file: Path, settings: Settings) -> Iterator[KnowledgeGraph]:
    """The zoo graph, opened once for the module."""
    with open_kg(str(zoo_file), settings) as graph:
        yield graph


def mcp_texts(graph: KnowledgeGraph, settings: Settings, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What MCP's tools answer to `calls`, through the SDK's own client on the in-process server."""
    server, _ = create_mcp_server(SingleKG(graph), settings=settings)

    async def main() -> list[str]:
        async with Client(server) as client:
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
        return ["\n".join(c.text for c in r.content if getattr(c, "type", "") == "text") for r in results]

    return asyncio.run(main())


@pytest.mark.parametrize(("typed", "line", "column"), [(TYPED, 1, 37), (TYPED_TWO_LINES, 2, 24)])
def test_every_face_places_a_syntax_error_in_the_text_as_typed(
    typed: str, line: int, column: int, zoo_file: Path, zoo_graph: KnowledgeGraph, settings: Settings
) -> None:
    """Item 3: `/api/sparql` said "error at 3:37" in its detail and line 1 in `syntax` for a one-line query (the
    PREFIX lines the server adds were counted), MCP "3:37", `validate` a line without a column. Every face now
    names the line and column of the query the user typed."""
    at = f"error at {line}:{column}: {REASON}"
    app = create_app(settings, ServeConfig(allowed_hosts=("testserver",)), kgs={"zoo": zoo_graph})
    with TestClient(app) as client:
        ran = client.post("/api/sparql", json={"query": typed})
        assert ran.status_code == 400
        body = ran.json()
        assert at in body["detail"], body
        assert (body["syntax"]["line"], body["syntax"]["column"], body["syntax"]["message"]) == (line, column, REASON)
        checked = client.post("/api/sparql/check", json={"query": typed}).json()
        assert checked["added"] == ["ex", "rdfs"]  # the query given back is the repaired one; the place is the typed
        assert (checked["syntax"]["line"], checked["syntax"]["column"]) == (line, column), checked
        tool = client.post("/api/tools/execute_sparql", json={"query": typed}).json()
        assert at in tool["text"], tool

    executed, validated = mcp_texts(
        zoo_graph, settings, [("execute_sparql", {"query": typed}), ("validate_sparql", {"query": typed})]
    )
    assert at in executed, executed
    assert f"line {line}, column {column}: {REASON}" in validated, validated

    cli = run("sparql", typed, "--kg", str(zoo_file), home=settings.paths.home)
    assert cli.returncode == 1 and at in cli.stderr, cli.stderr
    checked_cli = run("validate", typed, "--kg", str(zoo_file), home=settings.paths.home)
    assert checked_cli.returncode == 1
    assert f"error [syntax] line {line}, column {column}: {REASON}" in checked_cli.stdout, checked_cli.stdout


def test_a_place_after_a_written_out_name_is_found_in_the_text_as_typed() -> None:
    """Item 3: besides PREFIX lines, a repair writes %-escaped names out as <IRI>s, which moves the columns after
    them; the place reported is still the one typed."""
    from sparqlnav.sparql.prefixes import declare_prefixes
    from sparqlnav.sparql.syntax import typed_syntax_problem

    typed = "SELECT ?a WHERE {\n  ?a ex:x%41y ?b . ?a rdfs:label ?c ?d }"
    repair = declare_prefixes(typed, {"ex": "http://example.org/", "rdfs": "http://www.w3.org/2000/01/rdf-schema#"})
    assert repair.written_out == ("ex:x%41y",) and repair.added == ("rdfs",)
    problem = typed_syntax_problem(repair)
    assert problem is not None
    assert (problem.line, problem.column) == (2, typed.split("\n")[1].index("?d") + 1), problem


# The step builder on the library database (`--strategy build -o target=sql`): two row counts when it opens, then
# one run of the draft per edit; `execute` runs the final statement again, the 7th SQL query, which gave the answer.
CALVINO = "Which books did Italo Calvino write?"
CALVINO_SCRIPT = [
    act("get_tables", "Which tables are there?"),
    act("add_table", "Books are asked for.", table="books"),
    act("add_join", "Their author is in authors.", from_column="books.author_id", to_column="authors.id"),
    act("add_condition", "Italo Calvino's.", column="authors.name", op="=", value="Italo Calvino"),
    act("set_answer_columns", "Their titles.", columns=["books.title", "books.year"]),
    act("execute", "Done."),
    Reply("Italo Calvino wrote Invisible Cities and The Baron in the Trees."),
]
SQL_STEPS = "7 SQL queries · answer from SQL query #7"


def test_cli_counts_the_sql_queries_and_shows_sql_columns_and_database_rows_by_name(
    scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    """Item 5 in the CLI: the summary line of a SQL answer did not say which query gave it; SQL's columns were
    shown as `?title`; a database's rows (the direct mapping's IRIs, which no prefix shortens) as full IRIs."""
    db, home = library(tmp_path), tmp_path / "home"
    scripted_llm.script(CALVINO_SCRIPT)
    shown = run_cli("ask", CALVINO, "--kg", f"sqlite://{db}", "--strategy", "build", "-o", "target=sql", "-v",
                    server=scripted_llm, home=home)
    assert shown.returncode == 0, shown.stderr
    assert f"build · answered · {SQL_STEPS} · 7 LLM calls" in shown.stderr, shown.stderr
    header = next(line for line in shown.stdout.splitlines() if "title" in line and "year" in line)
    assert "?" not in header, shown.stdout
    rows = run("ask", "Which books are there?", "--kg", str(db), "-v", home=home)
    assert rows.returncode == 0, rows.stderr
    cells = [line for line in rows.stdout.splitlines() if line.startswith("│")]
    assert sorted(cells) == [f"│ {name:<22} │" for name in ("Ficciones", "Invisible Cities", "The Baron in the Trees")]
    assert "lexical · answered · 2 queries · answer from query #1" in rows.stderr, rows.stderr


def test_ui_counts_the_sql_queries_and_shows_sql_as_sql(
    settings: Settings, scripted_llm: ScriptedLLM, browser_page: Any, tmp_path: Path
) -> None:
    """Item 5 in the web UI: the Steps line said "0 queries · no query gave the answer" above a footer "7 SQL
    queries · answered"; the SQL result's columns were headed `?title`, `?year`; a database's rows showed full IRIs."""
    page = browser_page
    db = library(tmp_path)
    scripted_llm.script(CALVINO_SCRIPT)
    llm = LLMConfig(model=scripted_llm.model, base_url=scripted_llm.base_url, api_key="k", timeout_s=10,
                    max_retries=0, retry_backoff_s=0)
    config = ServeConfig(mcp=False, kgs={"library": f"sqlite://{db}"}, strategy="build",
                         strategy_options={"target": "sql"})
    with background(create_app(settings, config, llm=llm)) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#question", CALVINO)
        page.press("#question", "Enter")
        page.wait_for_selector(".turn.done, .turn.failed", timeout=60_000)
        assert page.inner_text(".steps-summary") == SQL_STEPS, page.inner_text("#chat")
        assert page.get_attribute(".event.gave-answer", "data-sql") == "7"
        assert page.text_content(".event.gave-answer .ev-kind") == "SQL #7"  # folded: text, not shown
        assert [h.inner_text() for h in page.query_selector_all(".answer .results-table th")] == ["title", "year"]
        assert "7 SQL queries" in page.inner_text(".usage")

    # Without an LLM the database is answered in SPARQL over its direct mapping: its rows show by name.
    with background(create_app(settings, ServeConfig(mcp=False, kgs={"library": f"sqlite://{db}"}))) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#question", "Which books are there?")
        page.press("#question", "Enter")
        page.wait_for_selector(".turn.done, .turn.failed", timeout=60_000)
        cells = [c.inner_text() for c in page.query_selector_all(".answer .results-table td")]
        assert sorted(cells) == ["Ficciones", "Invisible Cities", "The Baron in the Trees"], cells
    assert page.problems == []


def test_ui_probably_shows_the_hedge_without_the_query_and_a_phone_sees_the_answer_first(
    settings: Settings, zoo_graph: KnowledgeGraph, browser_page: Any
) -> None:
    """Item 6: "Probably:" repeated the whole query (PREFIX lines included) as plain text above the highlighted query
    box; on a phone the results came far down, below the steps and the query."""
    page = browser_page
    page.set_viewport_size({"width": 400, "height": 800})
    with background(create_app(settings, ServeConfig(mcp=False), kgs={"zoo": zoo_graph})) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#question", "Which keeper cares for the animal Simba?")
        page.press("#question", "Enter")
        page.wait_for_selector(".turn.done, .turn.failed", timeout=60_000)
        said = page.inner_text(".answer-text")
        assert said.startswith("Probably: The answer is Amara Okafor."), said
        assert "SELECT" not in said and "PREFIX" not in said and "The query, to check" not in said, said
        assert "SELECT" in page.inner_text(".answer .sparql-block")  # the query is in its box, once
        top = {name: page.locator(selector).bounding_box()["y"] for name, selector in (
            ("words", ".answer-text"), ("rows", ".answer .results"), ("query", ".answer .sparql-block"),
            ("steps", ".turn .steps"))}  # fmt: skip
        assert top["words"] < top["rows"] < top["query"], top
        assert top["rows"] < top["steps"], top
        page.screenshot(path=str(test_ui.artifacts() / "narrow-probably.png"))
    assert page.problems == []
