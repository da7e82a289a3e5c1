"""The answer shape for machines (issue 14, item 7): label-only helper columns dropped from a SELECT when they
label another projected entity, the patterns that bound them removed when nothing else uses them."""

from __future__ import annotations

import pytest

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.sparql.machine import machine_query
from sparqlnav.sparql.parser import parse_query

WD = """PREFIX wd: <http://www.wikidata.org/entity/>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX wikibase: <http://wikiba.se/ontology#>
PREFIX bd: <http://www.bigdata.com/rdf#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
"""
PV = "PREFIX pv: <http://ld.company.org/prod-vocab/>\n"


def test_wikidata_label_service_columns_are_dropped_with_the_service() -> None:
    query = WD + """SELECT ?element ?elementLabel ?discoverer ?discovererLabel WHERE {
  ?element wdt:P31 wd:Q11344 ; wdt:P61 ?discoverer .
  SERVICE wikibase:label { bd:serviceParam wikibase:language "en". }
}"""
    shaped = machine_query(query)
    assert shaped.dropped == ("elementLabel", "discovererLabel") and shaped.removed_patterns == 1
    assert "SELECT ?element ?discoverer WHERE {" in shaped.query
    assert "SERVICE" not in shaped.query and "?element wdt:P31 wd:Q11344 ; wdt:P61 ?discoverer ." in shaped.query
    parse_query(shaped.query)  # still a query


def test_wikidata_label_kept_when_its_entity_is_not_projected_or_the_label_is_used() -> None:
    answer = WD + """SELECT ?discovererLabel WHERE {
  wd:Q8 wdt:P61 ?discoverer .
  SERVICE wikibase:label { bd:serviceParam wikibase:language "en". }
}"""
    assert machine_query(answer).query == answer and not machine_query(answer).changed
    ordered = WD + """SELECT ?item ?itemLabel WHERE {
  ?item wdt:P31 wd:Q5 .
  SERVICE wikibase:label { bd:serviceParam wikibase:language "en". }
} ORDER BY ?itemLabel"""
    shaped = machine_query(ordered)
    # The column goes; the service stays, because ORDER BY still reads the label it binds.
    assert shaped.dropped == ("itemLabel",) and shaped.removed_patterns == 0 and "SERVICE wikibase:label" in shaped.query
    explicit = WD + "SELECT ?x ?xLabel WHERE { ?x wdt:P31 wd:Q5 . OPTIONAL { ?x rdfs:label ?xLabel } }"
    shaped = machine_query(explicit)
    assert shaped.dropped == ("xLabel",) and shaped.query.endswith("SELECT ?x WHERE { ?x wdt:P31 wd:Q5 . }")


def test_ck25_name_columns_are_dropped_and_their_triples_removed() -> None:
    alone = PV + """SELECT DISTINCT ?result ?name WHERE {
  ?product pv:hasSupplier ?result .
  ?result pv:addressLocality "Toulouse" .
  ?result pv:name ?name .
}"""
    shaped = machine_query(alone)
    assert shaped.dropped == ("name",) and shaped.removed_patterns == 1
    assert shaped.query == PV + """SELECT DISTINCT ?result WHERE {
  ?product pv:hasSupplier ?result .
  ?result pv:addressLocality "Toulouse" .
}"""
    listed = PV + "SELECT ?p ?name ?email WHERE { ?p a pv:Employee ; pv:name ?name ; pv:email ?email . }"
    assert machine_query(listed).query == PV + "SELECT ?p ?email WHERE { ?p a pv:Employee ; pv:email ?email . }"
    first = PV + "SELECT ?p ?name WHERE { ?p pv:name ?name ; a pv:Employee . }"
    assert machine_query(first).query == PV + "SELECT ?p WHERE { ?p a pv:Employee . }"
    optional = PV + """SELECT ?p ?name WHERE {
  ?p a pv:Employee .
  OPTIONAL { ?p pv:name ?name . FILTER(LANG(?name) = "") }
}"""
    assert machine_query(optional).query == PV + "SELECT ?p WHERE {\n  ?p a pv:Employee .\n}"


def test_ck25_columns_that_are_the_answer_or_more_than_a_label_are_kept() -> None:
    kept = [
        # the name is the answer: its entity is not projected
        PV + 'SELECT ?name WHERE { ?p a pv:Employee ; pv:name ?name ; pv:email "x@company.org" }',
        # the email is not a label
        PV + "SELECT ?p ?email WHERE { ?p a pv:Employee ; pv:email ?email }",
        # the name is also matched against another pattern
        PV + "SELECT ?p ?name WHERE { ?p pv:name ?name . ?q pv:name ?name . ?p a pv:Employee }",
        # an aggregate beside its group's name: the count is not a label, and a SELECT * has no columns to drop
        PV + "SELECT ?d (COUNT(?p) AS ?n) WHERE { ?p pv:memberOf ?d } GROUP BY ?d",
        PV + "SELECT * WHERE { ?p pv:name ?name ; a pv:Employee }",
        PV + "ASK { ?p pv:name ?name }",
        "SELECT ?x ?l WHERE { ?x <http://www.w3.org/2000/01/rdf-schema#label> ?l",  # does not parse
    ]
    for query in kept:
        assert machine_query(query).query == query, query
    # The entity is bound by nothing else: the column goes, the triple stays (else ?x would bind nothing).
    only = "SELECT ?x ?l WHERE { ?x <http://www.w3.org/2000/01/rdf-schema#label> ?l }"
    assert machine_query(only).query == "SELECT ?x WHERE { ?x <http://www.w3.org/2000/01/rdf-schema#label> ?l }"


@pytest.mark.data
def test_the_machine_query_returns_the_entities_without_their_names(ck25: KnowledgeGraph) -> None:
    human = PV + """SELECT DISTINCT ?result ?name WHERE {
  ?product pv:hasSupplier ?result .
  ?result pv:addressLocality "Toulouse" .
  ?result pv:name ?name .
}"""
    before = ck25.endpoint.query(human).table
    after = ck25.endpoint.query(machine_query(human).query).table
    assert before is not None and after is not None and after.vars == ["result"]
    assert {r["result"].value for r in after.rows} == {r["result"].value for r in before.rows} != set()
    assert all(r["result"].kind == "uri" for r in after.rows)
