"""Issue 40, item 10: explore's feedback on a date compared with plain text. A query comparing an `xsd:date`
property with "2016-12-31" matched nothing and was told "No stored value is spelled as your text… (LCASE,
CONTAINS)"; the spelling is right, the datatype is the problem, and the feedback now says so. The real explore loop
over HTTP against the scripted OpenAI-compatible server, on a real Oxigraph store of our own small graph."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scripted_llm import Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.settings import Settings
from sparqlnav.strategies.explore import create
from sparqlnav.trace import Trace
from test_explore import act, config, kinds, messages


def explore_once(server: ScriptedLLM, kg: KnowledgeGraph, question: str, query: str) -> Answer:
    """One query, then stop (answered or not, the replies after it do not matter here)."""
    server.script([act("execute_sparql", query=query), *[act("stop"), Reply("Nothing found.")] * 3])
    with create(config(server)) as strategy:
        answer = strategy.run(question, kg, Trace())
    answer.trace.finish()
    return answer

ZOO = """@prefix ex: <http://example.org/zoo#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:lion a ex:Enclosure ; rdfs:label "Lion Rock" ; ex:opened "2014-05-01"^^xsd:date ; ex:keeper "Mara Oyelaran" .
ex:reptiles a ex:Enclosure ; rdfs:label "Reptile House" ; ex:opened "2018-09-15"^^xsd:date ; ex:keeper "Ivo Brandt" .
ex:aviary a ex:Enclosure ; rdfs:label "Free Flight Aviary" ; ex:opened "2016-12-31"^^xsd:date ; ex:keeper "Ivo Brandt" .
"""
PLAIN = ('PREFIX ex: <http://example.org/zoo#>\nSELECT ?e WHERE { ?e ex:opened ?d FILTER(?d < "2016-12-31") }')
SPELT = 'PREFIX ex: <http://example.org/zoo#>\nSELECT ?e WHERE { ?e ex:keeper "ivo brandt" }'


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeGraph]:
    folder = tmp_path_factory.mktemp("zoo")
    (folder / "zoo.ttl").write_text(ZOO)
    with open_kg(str(folder / "zoo.ttl"), Settings.from_env({"SPARQLNAV_HOME": str(folder / "home")})) as kg:
        yield kg


def test_a_date_compared_with_plain_text_is_told_its_datatype(scripted_llm: ScriptedLLM, zoo: KnowledgeGraph) -> None:
    answer = explore_once(scripted_llm, zoo, "Which enclosures opened before 2017?", PLAIN)
    assert [f["id"] for f in kinds(answer, "feedback") if f.get("source") == "engine"] == ["empty_result", "typed_value"]
    seen = str(messages(scripted_llm, 1)[-1]["content"])
    assert ('Typed values compared with plain text: ex:opened holds xsd:date values and is compared with the plain '
            'text "2016-12-31"; write it as "2016-12-31"^^xsd:date.') in seen
    assert "No stored value is spelled" not in seen and "LCASE" not in seen  # before: the spelling was blamed


def test_a_misspelt_text_still_gets_the_stored_spelling(scripted_llm: ScriptedLLM, zoo: KnowledgeGraph) -> None:
    explore_once(scripted_llm, zoo, "Which enclosures does Ivo Brandt keep?", SPELT)
    seen = str(messages(scripted_llm, 1)[-1]["content"])
    assert 'ex:keeper compared with "ivo brandt": the closest stored values are "Ivo Brandt"' in seen
    assert "Typed values" not in seen
