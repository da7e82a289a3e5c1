"""Retrieve resolves what the question names before it writes (issue 31): the generation prompt lists the things and
stored values each name of the question may be, says which names the graph lacks, carries what explore's digest
knows of the graph (sparse properties, other spellings, property groups, single values, no label property), and
lets a yes/no question show its figures. The real LLM client talks over HTTP to a scripted OpenAI-compatible server;
CK25 and BESTIARY are real Oxigraph stores; the index holds the graphs' shapes and one example without identifiers,
so no example query can put an identifier in the prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scripted_llm import Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.question.named import named_things
from sparqlnav.retrieval.examples import Example
from sparqlnav.retrieval.kg_index import kg_schema
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import example_doc, shape_docs
from sparqlnav.settings import Settings
from sparqlnav.strategies.retrieve import Retrieve, create
from sparqlnav.trace import Trace

pytestmark = pytest.mark.data

PV = "http://ld.company.org/prod-vocab/"
ONTO = "http://www.semanticweb.org/annab/ontologies/2022/3/ontology#"
HEAD_PV = f"PREFIX pv: <{PV}>\n"
HEAD_ONTO = f"PREFIX ontology: <{ONTO}>\n"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLM]:
    """One scripted server for the module, so each graph's strategy (and its digest) is made once."""
    with ScriptedLLM() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def bestiary(data_dir: Path, settings: Settings) -> Iterator[KnowledgeGraph]:
    with open_kg(str(data_dir / "bestiary" / "beastiary_kg.rdf"), settings) as kg:
        yield kg


def strategy_for(kg: KnowledgeGraph, server: ScriptedLLM) -> Iterator[Retrieve]:
    schema = kg_schema(kg)
    config = LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)
    with LocalIndex(None, None) as index:
        # One example without identifiers, so the decomposition runs and names the classes these tests show
        # (retrieve skips it when the index holds no examples).
        any_count = Example("any", "How many statements are there?", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        index.build([*shape_docs(schema, labels=kg.names.labels_of(schema.class_names)), example_doc(any_count)])
        yield create(config, index=index, schema=schema)


@pytest.fixture(scope="module")
def ck25_retrieve(ck25: KnowledgeGraph, server: ScriptedLLM) -> Iterator[Retrieve]:
    yield from strategy_for(ck25, server)


@pytest.fixture(scope="module")
def bestiary_retrieve(bestiary: KnowledgeGraph, server: ScriptedLLM) -> Iterator[Retrieve]:
    yield from strategy_for(bestiary, server)


def run(server: ScriptedLLM, strategy: Retrieve, kg: KnowledgeGraph, question: str, classes: list[str], query: str,
        explanation: str = "Here they are.") -> tuple[Answer, list[dict[str, Any]]]:
    """One scripted run (decompose, generate, explain); the requests it sent."""
    first = len(server.requests)
    server.script([
        Reply(json.dumps({"sub_questions": [question], "classes": classes})),
        Reply(f"```sparql\n{query}\n```"),
        Reply(explanation),
    ])
    answer = strategy.run(question, kg, Trace())
    assert server.problems == [] and server.remaining == 0
    return answer, server.requests[first:]


def system(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def named_block(prompt: str) -> list[str]:
    """The lines of the prompt's block of what the question names."""
    assert "## What the question names" in prompt
    block = prompt.split("## What the question names", 1)[1]
    return [line for line in block.splitlines() if line.startswith('- "')]


def count(kg: KnowledgeGraph, query: str) -> int:
    table = kg.endpoint.query(query).table
    assert table is not None and table.rows
    return int(next(iter(table.rows[0].values())).value)


# ---------------------------------------------------------------- item 1: resolve before writing


def test_boggard_the_language_is_in_the_generation_prompt(
    server: ScriptedLLM, bestiary: KnowledgeGraph, bestiary_retrieve: Retrieve
) -> None:
    # A relay model guessed language IRIs from "# e.g. ontology:CommonL, ontology:AuranL"; no request held BoggardL.
    question = "Which creatures speak Boggard and have strength over 20?"
    query = HEAD_ONTO + "SELECT ?b WHERE { ?b ontology:hasLanguages ontology:BoggardL ; ontology:str ?s FILTER(?s > 20) }"
    answer, (_decompose, generate, _explain) = run(server, bestiary_retrieve, bestiary, question, ["Beast", "Language"],
                                                   query)
    prompt = system(generate)
    lines = named_block(prompt)
    # The name with both things it may be, each with its class, so "speak" picks the language.
    assert lines == ['- "Boggard": ontology:Boggard (a ontology:Beast), or ontology:BoggardL (a ontology:Language)']
    assert f"PREFIX ontology: <{ONTO}>" in prompt
    # The lookups are steps of the run, their queries counted (and marked as lookups, not written queries).
    assert [e.data["tool"] for e in answer.trace.of_kind("action")] == ["retrieve", "resolve_names"]
    lookups = [e for e in answer.trace.of_kind("sparql") if e.data.get("purpose") == "lookup"]
    assert 1 <= len(lookups) <= 2 and answer.trace.usage.sparql_queries == len(lookups) + 1
    assert answer.status == "answered" and answer.results is not None
    assert {t.value.removeprefix(ONTO) for t in answer.results.column("b")} == {"Mobogo", "MarshGiant"}


def test_poland_is_the_dbpedia_entity_suppliers_point_at_and_a_stored_text_too(
    server: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieve: Retrieve
) -> None:
    # A relay model guessed dbpedia:Poland and dbpedia:France from "# e.g. dbpedia:United_States".
    query = HEAD_PV + "SELECT ?s WHERE { ?s pv:country <http://dbpedia.org/resource/Poland> }"
    _answer, (_d, generate, _e) = run(server, ck25_retrieve, ck25, "Which suppliers are in Poland?", ["Supplier"], query)
    prompt = system(generate)
    suppliers = count(ck25, f"SELECT (COUNT(?s) AS ?n) WHERE {{ ?s <{PV}country> <http://dbpedia.org/resource/Poland> }}")
    texts = count(ck25, f'SELECT (COUNT(?s) AS ?n) WHERE {{ ?s a <{PV}Supplier> ; <{PV}addressCountry> "Poland" }}')
    assert named_block(prompt) == [
        f'- "Poland": dbpedia:Poland (no class; a pv:country of {suppliers} pv:Supplier); '
        f'also the text "Poland" as pv:addressCountry of {texts} pv:Supplier'
    ]
    assert "PREFIX dbpedia: <http://dbpedia.org/resource/>" in prompt  # the identifier shown is declared


def test_a_named_value_says_how_it_is_stored(server: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieve: Retrieve) -> None:
    query = HEAD_PV + 'SELECT ?s WHERE { ?s pv:addressLocality "Toulouse" }'
    _answer, (_d, generate, _e) = run(server, ck25_retrieve, ck25, "Which suppliers do we have in Toulouse?",
                                      ["Supplier"], query)
    assert named_block(system(generate)) == [
        '- "Toulouse": no thing by this name; the text "Toulouse" as pv:addressLocality of 1 pv:Supplier'
    ]


def test_a_name_the_graph_lacks_is_stated_as_not_found(
    server: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieve: Retrieve
) -> None:
    query = HEAD_PV + 'SELECT ?s WHERE { ?s pv:addressCountry "Atlantis" }'
    found = named_things(ck25, "Which suppliers are in Atlantis?")
    assert [(n.mention, n.found, n.values_checked) for n in found.names] == [("Atlantis", False, True)]
    server.script([Reply(json.dumps({"sub_questions": [], "classes": ["Supplier"]})), Reply(f"```sparql\n{query}\n```"),
                   Reply(f"```sparql\n{query}\n```")])  # the empty result goes back once; the same query again
    first = len(server.requests)
    answer = ck25_retrieve.run("Which suppliers are in Atlantis?", ck25, Trace())
    assert server.problems == [] and server.remaining == 0
    lines = named_block(system(server.requests[first + 1]))
    assert lines == ['- "Atlantis": not found (no thing and no stored text has this name): '
                     "do not make up an identifier for it"]
    assert answer.status == "not_found"


def test_the_names_block_stays_short_and_leaves_out_words_that_are_not_names(ck25: KnowledgeGraph) -> None:
    # "products" is not the Production department, "10th" is a rank, "IDs" a plural acronym: none is a name.
    found = named_things(ck25, "What products, IDs and prices do the 6th to 10th most expensive suppliers in France have?")
    assert [n.mention for n in found.names] == ["France"]
    many = "Do Heinrich Hoch, Sabrina Geiger, Baldwin Dirksen, Karen Brant, Elena Herzog, Marketing, Sensor, " \
           "Transistor, Encoder and Oscillator appear in France or Poland?"
    assert len(named_things(ck25, many).names) == 8


# ---------------------------------------------------------------- item 2: one view of the graph


def test_bestiary_shapes_say_what_the_digest_knows(
    server: ScriptedLLM, bestiary: KnowledgeGraph, bestiary_retrieve: Retrieve
) -> None:
    query = HEAD_ONTO + "SELECT (MAX(?hp) AS ?most) WHERE { ?b a ontology:Beast ; ontology:hasHPvalue ?hp }"
    _answer, (_d, generate, _e) = run(server, bestiary_retrieve, bestiary, "What is the most hit points a creature has?",
                                      ["Beast"], query)
    prompt = system(generate)
    shapes = prompt.split("## Schema of relevant classes", 1)[1]
    beasts = count(bestiary, f"SELECT (COUNT(?b) AS ?n) WHERE {{ ?b a <{ONTO}Beast> }}")
    other = count(bestiary, f"SELECT (COUNT(*) AS ?n) WHERE {{ ?b a <{ONTO}Beast> ; <{ONTO}hasHPValue> ?v }}")
    levels = count(bestiary, f"SELECT (COUNT(*) AS ?n) WHERE {{ ?b a <{ONTO}Beast> ; <{ONTO}hasLevel> ?v }}")
    assert other < 10 and levels == 1
    # Class size, the other spelling said on both lines, and a sparse property's uses, as explore's digest says them.
    assert f"ontology:Beast {{  # subclass of owl:Thing; {beasts:,} instances" in shapes
    assert re.search(rf"  ontology:hasHPvalue xsd:integer ;  # e\.g\. [^\n]*; also spelled ontology:hasHPValue, "
                     rf"{other} uses\n", shapes)
    assert f"  ontology:hasHPValue xsd:integer ;  # another spelling of ontology:hasHPvalue; only {other} uses\n" in shapes
    assert "  ontology:hasLevel xsd:integer ;  # only 1 use\n" in shapes
    digest = bestiary_retrieve.digests.get(bestiary).text
    assert f"(also spelled ontology:hasHPValue, {other} uses)" in digest and "ontology:hasLevel (only 1 use)" in digest
    # A range typed owl:NamedIndividual too names only its class, as in the digest.
    assert "  ontology:hasLanguages [ ontology:Language ] ;" in shapes
    # The sub-property groups the data declares, with their members, and that the graph has no label property.
    table = bestiary.endpoint.query(
        f"SELECT ?p WHERE {{ ?p <http://www.w3.org/2000/01/rdf-schema#subPropertyOf> <{ONTO}defValues> }} ORDER BY ?p"
    ).table
    assert table is not None and len(table) == 7
    members = ", ".join(r["p"].value.removeprefix(ONTO) for r in table.rows)  # written in the group's prefix
    graph = prompt.split("## About the whole graph", 1)[1]
    assert "- Property groups (rdfs:subPropertyOf; a member without a prefix is in its group's): " in graph
    assert f"ontology:defValues = {members};" in graph
    # Lines from the vocabulary's bookkeeping are left out, as in the digest.
    assert "from owl:NamedIndividual" not in shapes and "owl:Restriction" not in shapes
    assert "- This graph has no label property (no rdfs:label)" in graph
    assert "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>" in prompt


def test_ck25_shapes_say_a_property_has_a_single_value(
    server: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieve: Retrieve
) -> None:
    query = HEAD_PV + "SELECT ?h WHERE { ?h pv:price ?p . ?p pv:amount ?a } ORDER BY ?a LIMIT 1"
    _answer, (_d, generate, _e) = run(server, ck25_retrieve, ck25, "What is the cheapest Oscillator we have?",
                                      ["Hardware", "Price"], query)
    prompt = system(generate)
    # Every one of the 1,009 prices is in EUR: the shape says so, as the digest does, rather than two examples of it.
    assert '  pv:currency xsd:string ;  # only "EUR"\n' in prompt
    assert "pv:Price {  # Price; 1,009 instances" in prompt
    assert "## About the whole graph" not in prompt  # CK25 has labels and declares no property groups
    assert named_block(prompt)[0].startswith('- "Oscillator": prodi:prod-cat-Oscillator (a pv:ProductCategory)')


# ---------------------------------------------------------------- item 3: yes/no with its figures


def test_a_yes_no_question_may_select_its_figures_and_the_explainer_words_them(
    server: ScriptedLLM, bestiary: KnowledgeGraph, bestiary_retrieve: Retrieve
) -> None:
    question = "Is the number of creatures speaking Polyglot greater than those speaking Skald?"
    query = HEAD_ONTO + (
        "SELECT ?polyglot ?skald (?polyglot > ?skald AS ?yes) WHERE {\n"
        "  { SELECT (COUNT(DISTINCT ?a) AS ?polyglot) WHERE { ?a ontology:hasLanguages ontology:PolyglotL } }\n"
        "  { SELECT (COUNT(DISTINCT ?b) AS ?skald) WHERE { ?b ontology:hasLanguages ontology:SkaldL } }\n}"
    )
    answer, (_d, generate, explain) = run(server, bestiary_retrieve, bestiary, question, ["Beast", "Language"], query,
                                          "No — 6 creatures speak Polyglot against 7 that speak Skald.")
    rule = system(generate)
    assert "For a yes/no question, select in one row the figures the answer rests on" in " ".join(rule.split())
    assert "the yes/no itself as `?yes`" in " ".join(rule.split())
    assert "a bare ASK only when there is nothing to show" in " ".join(rule.split())
    # Both names were resolved, so the figures do not rest on guessed identifiers.
    assert [line.split(":", 1)[0] for line in named_block(rule)] == ['- "Polyglot"', '- "Skald"']
    assert "ontology:PolyglotL (a ontology:Language)" in rule and "ontology:SkaldL (a ontology:Language)" in rule
    # The explainer is told to answer Yes or No with the figures, and it sees them.
    told = " ".join(system(explain).split())
    assert 'begin with Yes or No; when the result holds the figures the answer rests on' in told
    assert '"No — 1 language against 2"' in told
    shown = str(explain["messages"][-1]["content"])
    assert "| 6 | 7 | false |" in shown.replace("  ", " ") or re.search(r"\|\s*6\s*\|\s*7\s*\|\s*false\s*\|", shown)
    assert answer.status == "answered" and answer.text.startswith("No — 6")
    assert "unsure" not in answer.extra


def test_a_name_of_two_things_says_which_holds_the_data(tmp_path: Path) -> None:
    """Two beasts named alike ("Caypup" and "caypup"): relay players could not tell which one held the data."""
    ex, label = "http://beasts.example.org/", "http://www.w3.org/2000/01/rdf-schema#label"
    lines = [f'<{ex}Beast> a <http://www.w3.org/2000/01/rdf-schema#Class> ; <{label}> "Beast" .',
             f'<{ex}Caypup> a <{ex}Beast> ; <{label}> "Caypup" .',
             f'<{ex}caypup> a <{ex}Beast> ; <{label}> "caypup" ; '
             + " ; ".join(f'<{ex}spell> "spell {i}"' for i in range(5)) + " .",
             f'<{ex}Boggard> a <{ex}Beast> ; <{label}> "Boggard" ; <{ex}spell> "fog" .']
    (tmp_path / "beasts.ttl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_kg(str(tmp_path / "beasts.ttl"), Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "h")})) as kg:
        found = named_things(kg, "Which spells does Caypup know?")
        (line,) = found.lines(kg.prefixes)
        assert re.search(r"caypup> \(a <http://beasts\.example\.org/Beast>, 7 statements\)", line), line
        assert re.search(r"Caypup> \(a <http://beasts\.example\.org/Beast>, 2 statements\)", line), line
        single = named_things(kg, "Which spells does Boggard know?")
        assert "statement" not in single.lines(kg.prefixes)[0]  # one thing by the name: no count, no query
        assert single.queries == found.queries - 1
