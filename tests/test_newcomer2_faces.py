"""What a new user trips on, round two (issue 40), on the faces other than the CLI's first lines: one syntax error
at one place on every face (item 3), SQL answers shown as SQL (item 5). Fixtures are written here: the zoo graph
and library database of tests/test_newcomer2.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from sparqlnav.faces.http import ServeConfig, create_app
from sparqlnav.faces.mcp import SingleKG, create_mcp_server
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.settings import Settings
from test_cli import run
from test_newcomer2 import zoo

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
