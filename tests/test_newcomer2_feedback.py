"""Issue 40, items 10 and 7. Item 10: explore's feedback on a date compared with plain text. A query comparing an `xsd:date`
property with "2016-12-31" matched nothing and was told "No stored value is spelled as your text… (LCASE,
CONTAINS)"; the spelling is right, the datatype is the problem, and the feedback now says so. The real explore loop
over HTTP against the scripted OpenAI-compatible server, on a real Oxigraph store of our own small graph."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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


# ------------------------------------------------------------------------------------------ item 7: validate

def validate(zoo_file: Path, home: Path, query: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparqlnav", "validate", query, "--kg", str(zoo_file)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1"})  # fmt: skip


@pytest.fixture(scope="module")
def zoo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("zoofile") / "zoo.ttl"
    path.write_text(ZOO)
    return path


def test_validate_never_says_the_files_own_namespace_is_unused(zoo_file: Path, tmp_path: Path) -> None:
    done = validate(zoo_file, tmp_path / "home", "SELECT ?e ?k WHERE { ?e a ex:Enclosure ; ex:keepers ?k }")
    assert done.returncode == 1
    assert "(closest: ex:keeper)" in done.stdout
    # before: "the prefix 'ex:' was not declared and was read as <http://example.org/zoo#>, which zoo.ttl does not use"
    assert "unknown_prefix" not in done.stdout and "does not use" not in done.stdout


def test_validate_names_the_closest_for_a_namespace_typo_and_fails(zoo_file: Path, tmp_path: Path) -> None:
    query = "PREFIX z: <http://example.org/zoo/> SELECT ?e WHERE { ?e a z:Enclosure ; z:keeper ?k }"
    done = validate(zoo_file, tmp_path / "home", query)
    assert done.returncode == 1  # before: two warnings and exit 0
    assert ("error [unknown_namespace]: <http://example.org/zoo/Enclosure> occurs nowhere in zoo.ttl: zoo.ttl does "
            "not use the namespace <http://example.org/zoo/> (closest: ex:Enclosure, in <http://example.org/zoo#>)"
            ) in done.stdout
    assert "(closest: ex:keeper, in <http://example.org/zoo#>)" in done.stdout
    other = validate(zoo_file, tmp_path / "home", "SELECT ?a WHERE { ?a wdt:P31 ?w }")
    assert "the prefix 'wdt:' was not declared" in other.stdout  # a default the graph does not use is still said
