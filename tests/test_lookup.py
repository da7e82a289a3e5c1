"""Search, entity pages, property examples and relations on real stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.settings import Settings
from sparqlnav.tools.lookup import entity, property_examples, relations, resolve, search

HOCH = "http://ld.company.org/prod-instances/empl-Heinrich.Hoch%40company.org"

WIKIBASE_TTL = """@prefix wd: <https://kg.example/entity/> .
@prefix wdt: <https://kg.example/prop/direct/> .
@prefix p: <https://kg.example/prop/> .
@prefix ps: <https://kg.example/prop/statement/> .
@prefix pq: <https://kg.example/prop/qualifier/> .
@prefix wikibase: <http://wikiba.se/ontology#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix schema: <http://schema.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
wd:P166 a wikibase:Property ; rdfs:label "award received"@en ; wikibase:directClaim wdt:P166 ;
  wikibase:claim p:P166 ; wikibase:statementProperty ps:P166 ; wikibase:qualifier pq:P166 .
wd:P585 a wikibase:Property ; rdfs:label "point in time"@en ; wikibase:directClaim wdt:P585 ;
  wikibase:claim p:P585 ; wikibase:statementProperty ps:P585 ; wikibase:qualifier pq:P585 .
wd:Q1 rdfs:label "Marie Curie"@en ; skos:altLabel "Maria Skłodowska"@en ; schema:description "physicist and chemist"@en ;
  wdt:P166 wd:Q2, wd:Q3 ; p:P166 <https://kg.example/entity/statement/s1>, <https://kg.example/entity/statement/s2> .
<https://kg.example/entity/statement/s1> ps:P166 wd:Q2 ; pq:P585 "1903-01-01T00:00:00Z"^^xsd:dateTime .
<https://kg.example/entity/statement/s2> ps:P166 wd:Q3 ; pq:P585 "1911-01-01T00:00:00Z"^^xsd:dateTime .
wd:Q2 rdfs:label "Nobel Prize in Physics"@en .
wd:Q3 rdfs:label "Nobel Prize in Chemistry"@en .
"""


@pytest.fixture(scope="module")
def wikibase(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeGraph:
    d = tmp_path_factory.mktemp("wb")
    (d / "kg.ttl").write_text(WIKIBASE_TTL)
    return open_kg(str(d / "kg.ttl"), Settings.from_env({"SPARQLNAV_HOME": str(d / "home")}))


@pytest.mark.data
def test_search_ranks_the_employee_first_and_tolerates_typos(ck25: KnowledgeGraph) -> None:
    exact = search(ck25, "Heinrich Hoch")
    assert exact.entities[0].iri == HOCH
    typo = search(ck25, "Hienrich Hock")
    assert HOCH in [h.iri for h in typo.entities[:3]]
    partial = search(ck25, "Hoch")
    assert HOCH in [h.iri for h in partial.entities]
    assert len(exact.entities) <= 8 and len(exact.properties) <= 4


@pytest.mark.data
def test_search_hits_say_what_kind_of_thing_they_are(ck25: KnowledgeGraph, demo: KnowledgeGraph) -> None:
    # A relay model could tell the category "Sensor" from products named "… Sensor" only by the IRI's shape.
    found = search(ck25, "Sensor")
    text = found.to_text(ck25)
    assert text.splitlines()[1] == "  prodi:prod-cat-Sensor 'Sensor' (a pv:ProductCategory)"
    assert "'M558-2275045 - Sensor Switch' (a pv:Hardware)" in text
    assert found.classes["http://ld.company.org/prod-instances/prod-cat-Sensor"] == [
        "http://ld.company.org/prod-vocab/ProductCategory"
    ]
    # On a Wikibase graph the class is an item: its label comes along (not when the name already says it).
    oxygen = search(demo, "oxygen").to_text(demo)
    assert "wd:Q8 'oxygen' (a wd:Q204 'nonmetal', wd:Q201 'chemical element')" in oxygen


@pytest.mark.data
def test_search_says_when_nothing_matches_closely(ck25: KnowledgeGraph) -> None:
    # CK25 has no salaries: "salary" finds only look-alikes (Salinas-Kelly), and the observation says so.
    text = search(ck25, "salary").to_text(ck25)
    assert text.startswith("Entities matching 'salary'") and " — none close, the nearest:" in text.splitlines()[0]
    assert "Salinas-Kelly" in text
    assert "none close" not in search(ck25, "Hienrich Hock").to_text(ck25)  # a typo still matches closely


@pytest.mark.data
def test_properties_are_reported_separately(ck25: KnowledgeGraph) -> None:
    found = search(ck25, "manager")
    assert found.properties and found.properties[0].iri == "http://ld.company.org/prod-vocab/hasManager"
    assert all(h.kind == "property" for h in found.properties)
    assert all(h.kind in ("entity", "class") for h in found.entities)


@pytest.mark.data
def test_entity_page_groups_edges_with_labels(ck25: KnowledgeGraph) -> None:
    page = entity(ck25, HOCH)
    by_prop = {e.property: e for e in page.edges}
    manager = by_prop["http://ld.company.org/prod-vocab/hasManager"].values[0]
    assert manager.label == "Waldtraud Kuttner"
    assert page.label == "Heinrich Hoch"
    text = page.to_text(ck25)
    assert "pv:hasManager" in text and "Waldtraud Kuttner" in text


@pytest.mark.data
def test_property_examples_and_relations(ck25: KnowledgeGraph) -> None:
    ex = property_examples(ck25, "http://ld.company.org/prod-vocab/hasManager", limit=3)
    assert len(ex.pairs) == 3 and all(o.kind == "uri" for _, o in ex.pairs)
    rel = relations(ck25, HOCH)
    assert ("http://ld.company.org/prod-vocab/hasManager", 1) in rel.outgoing
    assert rel.incoming == [] or all(n > 0 for _, n in rel.incoming)


def test_wikibase_statements_show_qualifiers(wikibase: KnowledgeGraph) -> None:
    assert wikibase.vocab.wikibase is not None
    assert resolve(wikibase, "Q1") == "https://kg.example/entity/Q1"
    page = entity(wikibase, "https://kg.example/entity/Q1")
    awards = next(e for e in page.edges if e.property == "https://kg.example/prop/direct/P166")
    assert awards.label == "award received"
    got = {(v.label, q.value.value[:4], q.property_label) for v in awards.values for q in v.qualifiers}
    assert got == {("Nobel Prize in Physics", "1903", "point in time"), ("Nobel Prize in Chemistry", "1911", "point in time")}
    assert not any(e.property.startswith("https://kg.example/prop/P") for e in page.edges)  # statements folded in
    found = search(wikibase, "Maria Sklodowska")
    assert found.entities[0].iri == "https://kg.example/entity/Q1"
    props = search(wikibase, "award")
    assert props.properties[0].iri == "https://kg.example/entity/P166"
    ex = property_examples(wikibase, "https://kg.example/entity/P166")
    assert ex.property == "https://kg.example/prop/direct/P166" and len(ex.pairs) == 2


def test_plain_graph_without_labels_uses_local_names(tmp_path: Path) -> None:
    (tmp_path / "g.ttl").write_text("@prefix ex: <http://example.org/> .\nex:RedDragon ex:hasChallengeRating 17 .\n")
    with open_kg(str(tmp_path / "g.ttl"), Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "h")})) as kg:
        found = search(kg, "red dragon")
        assert found.entities[0].iri == "http://example.org/RedDragon" and found.entities[0].label == "Red Dragon"
        assert search(kg, "challenge rating").properties[0].iri == "http://example.org/hasChallengeRating"


def test_identifiers_cannot_inject_query_text_and_weak_matches_are_not_used(wikibase: KnowledgeGraph) -> None:
    from sparqlnav.tools.lookup import LookupFailed, resolve_or_search

    with pytest.raises(LookupFailed, match="not a valid IRI"):
        resolve(wikibase, "<http://x> ?p ?o . ?x ?y ?z } #>")
    with pytest.raises(LookupFailed, match="not a valid IRI"):
        resolve(wikibase, "http://x> ?p ?o . ?x ?y ?z } #")
    assert resolve_or_search(wikibase, "Marie Curie") == "https://kg.example/entity/Q1"
    with pytest.raises(LookupFailed, match=r"nothing in .* is called 'Zanzibar Quokka'"):
        resolve_or_search(wikibase, "Zanzibar Quokka")


def test_toolkit_reports_a_dead_name_service_as_a_failed_observation(wikibase: KnowledgeGraph) -> None:
    import dataclasses

    from sparqlnav.graph.wikidata import WikidataNames
    from sparqlnav.tools.toolkit import Toolkit
    from sparqlnav.trace import Trace

    assert wikibase.vocab.wikibase is not None
    dead = WikidataNames("http://127.0.0.1:9/w/api.php", wikibase=wikibase.vocab.wikibase, timeout_s=2)
    tools = Toolkit(dataclasses.replace(wikibase, names=dead), Trace())
    obs = tools.search("Marie Curie")
    assert not obs.ok and obs.text.startswith("search failed: ConnectError")
    page = tools.get_entity("Q1")
    assert not page.ok and "ConnectError" in page.text
    rows = tools.execute_sparql("SELECT ?o WHERE { <https://kg.example/entity/Q1> <https://kg.example/prop/direct/P166> ?o }")
    assert rows.ok and "2 rows" in rows.text  # the rows stand without labels
    dead.close()


def test_labels_are_fetched_for_exactly_the_rows_a_rendering_shows(demo: KnowledgeGraph) -> None:
    from sparqlnav.graph.results import shown_labels
    from sparqlnav.tools.toolkit import Toolkit
    from sparqlnav.trace import Trace

    query = "SELECT ?s WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l } ORDER BY ?s LIMIT 30"
    table = demo.endpoint.query(query).table
    assert table is not None
    iris = [row["s"].value for row in table.rows]
    names = demo.names.labels_of(iris)
    assert len(iris) == 30 and set(names) == set(iris)
    shown, hidden = iris[:5] + iris[-5:], iris[5:25]  # beyond 25 rows: the first and last 5
    assert shown_labels(table, demo.names) == {i: names[i] for i in shown}
    text = Toolkit(demo, Trace()).execute_sparql(query).text
    assert all(f"| {demo.prefixes.compact(i)} ({names[i]}) |" in text for i in shown)
    assert not any(f"| {demo.prefixes.compact(i)} " in text for i in hidden)
    # A rendering of the first rows only (no tail) shows, and labels, just those.
    assert [row["s"].value for row in table.shown_rows(3, 0)] == iris[:3]
    assert set(shown_labels(table, demo.names, head=3, tail=0)) == set(iris[:3])
    assert table.to_markdown(head=3, tail=0).count("| <https://demo.sparqlnav.org/entity/") == 3
