"""A server warms what its first question needs at start (faces/warm): the default graph is open, its engine
answers, its name index was read and the default strategy made before the first request; the first question then
imports nothing and starts nothing. A step that fails is left to the first question, which reports it."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.warm import warm
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.store import LocalGraph
from sparqlnav.settings import Settings

TTL = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:ada a ex:Person ; rdfs:label "Ada Lovelace" ; ex:knows ex:charles .
ex:charles a ex:Person ; rdfs:label "Charles Babbage" .
"""


def test_a_server_is_warm_before_its_first_question(tmp_path: Path) -> None:
    kg = tmp_path / "people.ttl"
    kg.write_text(TTL)
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    app = create_app(settings, ServeConfig(kgs={"people": str(kg)}, strategy="lexical"))
    service = app.state.service
    assert not service.pool.is_open("people") and service.strategies == {}
    with background(app) as url:
        graph = service.pool.get("people")
        assert isinstance(graph.endpoint, LocalGraph) and graph.endpoint.server.running()  # the engine is up
        generation = graph.endpoint.server.generation
        assert set(service.strategies) == {"lexical"}
        modules = set(sys.modules)
        with httpx.Client(base_url=url, timeout=60, headers={"X-Requested-With": "test"}) as client:
            first = client.post("/api/ask", json={"question": "Who does Ada Lovelace know?"})
        assert first.status_code == 200, first.text
        assert "Charles Babbage" in first.json()["answer"]
        assert {m for m in set(sys.modules) - modules if m.startswith("sparqlnav")} == set()  # imported at start
        assert graph.endpoint.server.generation == generation  # no engine started for the first question
        assert set(service.strategies) == {"lexical"}


def test_a_failing_step_is_left_to_the_first_question(tmp_path: Path) -> None:
    def broken() -> KnowledgeGraph:
        raise SparqlnavError("no such graph")

    made: list[str] = []
    warmed = warm(broken, lambda: made.append("strategy"), llm=None)
    assert warmed.failed == {"graph": "SparqlnavError: no such graph"}
    assert made == ["strategy"] and set(warmed.steps) == {"strategy"}  # the other steps still ran
