"""Question–query examples from SHACL files, an endpoint's own metadata, and benchmark files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sparqlnav.graph.opening import open_kg
from sparqlnav.retrieval.examples import (
    ExamplesError,
    clean_text,
    examples_from_endpoint,
    examples_from_rdf,
    load_examples,
)
from sparqlnav.settings import Settings
from sparqlnav.sparql.check import endpoint_key
from sparqlnav.sparql.parser import parse_query
from sparqlnav.sparql.prefixes import declare_prefixes

SHACL = """
@prefix ex: <https://example.org/.well-known/sparql-examples/> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix schema: <https://schema.org/> .
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix spex: <https://purl.expasy.org/sparql-examples/ontology#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .

_:prefixes sh:declare [ sh:prefix "up" ; sh:namespace "http://purl.uniprot.org/core/"^^xsd:anyURI ] .

ex:1 a sh:SPARQLExecutable, sh:SPARQLSelectExecutable ;
    rdfs:comment "Alle Proteine"@de, "List all <em>proteins</em> &amp; their names"^^rdf:HTML ;
    sh:prefixes _:prefixes ;
    sh:select "SELECT ?p ?name WHERE { ?p a up:Protein ; up:mnemonic ?name }" ;
    schema:keywords "protein", "name" ;
    schema:target <https://sparql.uniprot.org/sparql/> .

ex:2 a sh:SPARQLExecutable, sh:SPARQLAskExecutable ;
    rdfs:comment "Is there a reviewed protein?"@en ;
    sh:ask "PREFIX up: <http://purl.uniprot.org/core/>\\nASK { ?p up:reviewed true }" .

ex:3 a sh:SPARQLExecutable ;
    rdfs:comment "Describe one rule"@en ;
    spex:describe "DESCRIBE <http://purl.uniprot.org/hamap/MF_00001>" ;
    schema:target <http://hamap.example/sparql> .

ex:4 a sh:SPARQLExecutable ;
    rdfs:comment "No query: not an example"@en .
"""


def test_shacl_examples_are_read_with_prefixes_language_and_endpoints(tmp_path: Path) -> None:
    path = tmp_path / "examples.ttl"
    path.write_text(SHACL, encoding="utf-8")
    found = {e.id.rsplit("/", 1)[-1]: e for e in examples_from_rdf([path])}

    assert sorted(found) == ["1", "2", "3"]
    one = found["1"]
    # The HTML comment beats the German one (no English one exists, untagged is next), tags stripped.
    assert one.question == "List all proteins & their names"
    assert one.query.startswith("PREFIX up: <http://purl.uniprot.org/core/>\nSELECT")
    parse_query(one.query)  # the completed query parses without help
    assert one.endpoint == "https://sparql.uniprot.org/sparql/"
    assert one.keywords == ("name", "protein")
    assert one.form == "SELECT" and one.source == str(path)
    assert found["2"].form == "ASK" and found["2"].endpoint is None
    assert found["3"].form == "DESCRIBE" and found["3"].query.startswith("DESCRIBE")


def test_helpers() -> None:
    assert clean_text("  <b>Proteins</b>\n with &lt;10 &amp; more ") == "Proteins with <10 & more"
    query = "SELECT * WHERE { ?s up:name ?n ; rdfs:label ?l }"
    completed = declare_prefixes(query, {"up": "http://purl.uniprot.org/core/", "rdfs": "http://x/"}).query
    assert completed.splitlines()[:2] == ["PREFIX rdfs: <http://x/>", "PREFIX up: <http://purl.uniprot.org/core/>"]
    assert declare_prefixes("SELECT * WHERE { ?s ?p ?o", {"up": "u"}).query == "SELECT * WHERE { ?s ?p ?o"


def test_federated_services_and_errors(tmp_path: Path) -> None:
    ttl = tmp_path / "fed.ttl"
    ttl.write_text(
        '@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n'
        '<urn:ex:f> a sh:SPARQLExecutable ; rdfs:comment "fed"@en ; sh:select """SELECT * WHERE {\n'
        ' SERVICE <https://sparql.rhea-db.org/sparql> { ?r ?p ?o } SERVICE SILENT <https://b.example/sparql> { ?a ?b ?c }\n'
        ' SERVICE <https://sparql.rhea-db.org/sparql> { ?x ?y ?z } }""" .\n',
        encoding="utf-8",
    )
    (fed,) = load_examples([ttl])
    assert fed.services == ["https://sparql.rhea-db.org/sparql", "https://b.example/sparql"]
    bad = tmp_path / "bad.ttl"
    bad.write_text("<a> <b> .", encoding="utf-8")
    with pytest.raises(ExamplesError, match=r"bad\.ttl"):
        load_examples([bad])
    with pytest.raises(ExamplesError, match="unknown examples format"):
        (tmp_path / "x.txt").write_text("hi")
        load_examples([tmp_path / "x.txt"])
    with pytest.raises(ExamplesError, match="no such file"):
        load_examples([tmp_path / "missing"])


@pytest.mark.data
def test_sib_sparql_examples_load_whole(data_dir: Path) -> None:
    examples = load_examples([data_dir / "sparql-examples" / "examples"])
    assert len(examples) == 1227  # the README's count
    assert len({e.id for e in examples}) == len(examples)
    by_endpoint = Counter(endpoint_key(e.endpoint) for e in examples if e.endpoint)
    assert by_endpoint["sparql.nextprot.org/sparql"] == 776
    assert by_endpoint["sparql.uniprot.org/sparql"] >= 130
    assert all(e.question and e.query for e in examples)
    for e in examples:
        parse_query(e.query)  # every query parses once sh:prefixes declarations are added
    assert sum(1 for e in examples if e.services) >= 100
    assert Counter(e.form for e in examples) == {"SELECT": 1222, "DESCRIBE": 3, "ASK": 1, "CONSTRUCT": 1}


@pytest.mark.data
def test_pubchem_examples_with_html_comments(data_dir: Path) -> None:
    examples = load_examples([data_dir / "void" / "examples_pubchem.ttl"])
    assert len(examples) == 377
    assert all("<" not in e.question for e in examples)
    assert {endpoint_key(e.endpoint) for e in examples if e.endpoint} == {"pubchem-virtuoso.be-md.ncbi.nlm.nih.gov:8090/sparql"}


@pytest.mark.data
def test_benchmark_files_become_examples(data_dir: Path) -> None:
    ck25 = load_examples([data_dir / "ck25" / "questions.yml"], endpoint="https://ck25.example/sparql")
    assert len(ck25) == 50
    assert ck25[0].id == "ck25:1-en" and ck25[0].question == "In which department is Ms. Brant?"
    assert "pv:memberOf" in ck25[0].query and ck25[0].endpoint == "https://ck25.example/sparql"
    qald = load_examples([data_dir / "qald10" / "qald_10.json"])
    assert len(qald) == 394 and all(e.query.strip() for e in qald)
    spinach = load_examples([data_dir / "spinach" / "spinach_dev.json"])
    assert len(spinach) == 155 and spinach[0].endpoint is None


@pytest.mark.data
def test_an_endpoint_publishes_its_own_examples(data_dir: Path, settings: Settings) -> None:
    folder = data_dir / "sparql-examples" / "examples" / "Bgee"
    from_files = {e.id: e for e in load_examples([folder])}
    with open_kg(str(folder), settings) as kg:
        from_endpoint = {e.id: e for e in examples_from_endpoint(kg.endpoint)}
    assert len(from_files) == 26 and set(from_endpoint) == set(from_files)
    for ident, e in from_files.items():
        other = from_endpoint[ident]
        assert (other.question, other.query, other.endpoint, other.form) == (e.question, e.query, e.endpoint, e.form)
