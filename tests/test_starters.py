"""Example questions for a start page (issue 17): the demo's own questions, the questions of a KG's indexed
examples, or questions written from its schema; served as `GET /api/examples`. And the readable syntax error the
editor marks: from our parser, or the engine's message translated; served with `/api/sparql` and
`/api/sparql/check`."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

import test_serve
from sparqlnav.faces.http import ServeConfig, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.retrieval.examples import Example
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.retrieval.kg_index import build_kg_index
from sparqlnav.settings import Settings
from sparqlnav.sparql.syntax import SyntaxProblem, engine_problem, syntax_problem
from sparqlnav.tools.starters import StarterQuestions, demo_questions_path, plural
from test_serve import EX

tiny_path = test_serve.tiny_path
tiny = test_serve.tiny
TINY_FROM_SCHEMA = ["How many persons are there?", "List the persons with their age.", "How many teams are there?"]


def test_demo_questions_come_from_its_question_set(demo: KnowledgeGraph) -> None:
    found = StarterQuestions().get(demo, limit=5)
    every = [q["question"] for q in json.loads(demo_questions_path().read_text(encoding="utf-8"))]
    assert found.source == "demo" and len(found.questions) == 5
    assert found.questions[0] == every[0] == "Who discovered oxygen?"
    assert set(found.questions) <= set(every) and len(set(found.questions)) == 5


def test_indexed_examples_win_over_the_schema(tiny: KnowledgeGraph, tmp_path: Path) -> None:
    assert StarterQuestions(KGIndexes(tmp_path)).get(tiny).questions == tuple(TINY_FROM_SCHEMA)  # no index yet
    examples = [
        Example(id="urn:ex:1", question="Who manages Alice?", query=f"SELECT ?m WHERE {{ <{EX}alice> <{EX}manager> ?m }}"),
        Example(id="urn:ex:2", question="Is Bob in a team?", query=f"ASK {{ <{EX}bob> <{EX}memberOf> ?t }}", form="ASK"),
    ]
    build_kg_index(tiny, tmp_path, examples=examples, embedder=None, embedder_spec="none", endpoint_examples=False)
    found = StarterQuestions(KGIndexes(tmp_path)).get(tiny)
    assert found.source == "index"
    assert sorted(found.questions) == ["Is Bob in a team?", "Who manages Alice?"]


def test_examples_route_writes_questions_from_the_schema(tiny: KnowledgeGraph, tmp_path: Path) -> None:
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path)})  # a home without any index
    app = create_app(settings, ServeConfig(mcp=False, allowed_hosts=("testserver",)), kgs={"tiny": tiny})
    with TestClient(app) as client:
        body = client.get("/api/examples", params={"kg": "tiny"}).json()
        assert body == {"kg": "tiny", "source": "schema", "questions": TINY_FROM_SCHEMA}
        assert client.get("/api/examples", params={"limit": 1}).json()["questions"] == TINY_FROM_SCHEMA[:1]
        assert client.get("/api/examples", params={"kg": "nope"}).status_code == 400


def test_plural() -> None:
    assert [plural(w) for w in ("person", "city", "class", "day", "box")] == ["persons", "cities", "classes", "days", "boxes"]


def test_syntax_problems_name_line_column_and_what_was_found() -> None:
    assert syntax_problem("SELECT ?s WHERE {\n  ?s ?p ?o .\n  }}\n") == SyntaxProblem(
        3, 4, "expected the end of the query, found '}'"
    )
    cut = syntax_problem("SELECT ?s WHERE { ?s")
    assert cut is not None and (cut.line, cut.column) == (1, 21) and cut.message.endswith("found the end of the query")
    undeclared = syntax_problem("SELECT ?m WHERE {\n  ex:alice ?p ?m }")
    assert undeclared == SyntaxProblem(2, 3, "the prefix 'ex:' is not declared (add a PREFIX line)")
    assert syntax_problem(f"SELECT ?m WHERE {{ <{EX}alice> ?p ?m }}") is None
    assert undeclared.text() == "line 2, column 3: the prefix 'ex:' is not declared (add a PREFIX line)"


def test_engine_messages_are_translated_without_their_ranges() -> None:
    query = "SELECT ?s WHERE {\n ?s ?p ?o \n FILTER(?o > ) }"
    engine = "error at 3:14: expected one of ABS, AVG, DAY, IRI, ['0' ..= '9' | '\\u{00B7}'], [_]"
    assert engine_problem(query, engine) == SyntaxProblem(3, 14, "unexpected ')'")
    assert engine_problem("SELECT * {", "error at 1:11: expected [_]") == SyntaxProblem(1, 11, "unexpected end of the query")
    assert engine_problem(query, "the engine is unwell") is None


def test_sparql_routes_say_where_the_syntax_error_is(tiny: KnowledgeGraph, settings: Settings) -> None:
    app = create_app(settings, ServeConfig(mcp=False, allowed_hosts=("testserver",)), kgs={"tiny": tiny})
    with TestClient(app) as client:
        bad = client.post("/api/sparql", json={"query": "SELECT ?s WHERE {\n  ?s ?p ?o .\n  }}"})
        assert bad.status_code == 400 and bad.json()["outcome"] == "syntax_error"
        assert bad.json()["syntax"] == {
            "line": 3, "column": 4, "message": "expected the end of the query, found '}'",
            "text": "line 3, column 4: expected the end of the query, found '}'",
        }
        checked = client.post("/api/sparql/check", json={"query": "SELECT ?m WHERE { ex:alice ex:manager ?m }"}).json()
        assert checked["ok"] is True and checked["added"] == ["ex"] and checked["syntax"] is None
        assert checked["query"] == f"PREFIX ex: <{EX}>\nSELECT ?m WHERE {{ ex:alice ex:manager ?m }}"
        broken = client.post("/api/sparql/check", json={"query": "SELECT ?m WHERE { ?m"}).json()
        assert broken["ok"] is False and (broken["syntax"]["line"], broken["syntax"]["column"]) == (1, 21)
