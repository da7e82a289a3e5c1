"""The validator: parsing with positions, prefix repair, triple-pattern extraction (paths, SERVICE, VALUES, …),
schema checks that never reject a valid query, no network, the CLI; and measurements on real corpora
(false positives on every UniProt example, detection of mutated queries, syntax over every dataset)."""

from __future__ import annotations

import json
import os
import random
import re
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pyoxigraph as ox
import pytest
import yaml

from sparqlnav.graph.schema import (
    RDF_TYPE,
    Schema,
    StoreRunner,
    compute_schema,
    namespace_of,
    schema_from_void_file,
)
from sparqlnav.sparql.check import REPAIR_PREFIXES, CheckReport, endpoint_key, validate
from sparqlnav.sparql.guard import normalise_endpoint
from sparqlnav.sparql.parser import (
    Iri,
    PathAlt,
    PathInv,
    PathMod,
    PathNeg,
    PathSeq,
    SparqlSyntaxError,
    parse_query,
)

EX = "http://example.org/voc#"
GENE = "http://example.org/genes#"
MAIN = "http://example.org/sparql"
GENES_ENDPOINT = "https://genes.example.org/sparql"
PREFIXES = f"PREFIX ex: <{EX}>\nPREFIX g: <{GENE}>\n"

DATA = """
@prefix ex: <http://example.org/voc#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix d: <http://example.org/data/> .
d:alice a ex:Person ; ex:name "Alice" ; ex:age 30 ; ex:livesIn d:paris ; ex:knows d:bob .
d:bob a ex:Person ; ex:name "Bob" ; ex:livesIn d:rome ; ex:knows d:alice .
d:paris a ex:City ; ex:name "Paris" ; ex:population 2100000 ; ex:country d:fr .
d:rome a ex:City ; ex:name "Rome" ; ex:population 2800000 ; ex:country d:it .
d:fr a ex:Country ; ex:name "France" .
d:it a ex:Country ; ex:name "Italy" .
d:loose ex:note "a subject without a type" .
"""

GENE_DATA = """
@prefix g: <http://example.org/genes#> .
<http://example.org/g/1> a g:Gene ; g:symbol "BRCA1" ; g:encodes <http://example.org/p/1> .
<http://example.org/p/1> a g:Product ; g:mass 12 .
"""


def _schema(ttl: str, endpoint: str, prefixes: dict[str, str]) -> Schema:
    store = ox.Store()
    store.load(ttl, format=ox.RdfFormat.TURTLE)
    return compute_schema(StoreRunner(store), prefixes=prefixes, endpoint=endpoint)


@pytest.fixture(scope="module")
def schema() -> Schema:
    return _schema(DATA, MAIN, {"ex": EX})


@pytest.fixture(scope="module")
def genes() -> Schema:
    return _schema(GENE_DATA, GENES_ENDPOINT, {"g": GENE})


def errors(report: CheckReport) -> list[str]:
    return [i.kind for i in report.issues if i.severity == "error"]


# ------------------------------------------------------------------------------------- syntax


def test_syntax_error_has_line_and_column() -> None:
    query = "SELECT ?s\nWHERE {\n  ?s ?p ?o .\n  FILTR(?o > 1)\n}"
    report = validate(query)
    assert not report.ok
    [issue] = report.issues
    assert (issue.kind, issue.line, issue.column) == ("syntax", 4, 3)
    assert (
        issue.message.startswith("expected '.' between triple patterns, found 'FILTR'")
        or "FILTR" in issue.message
    )
    with pytest.raises(SparqlSyntaxError) as exc:
        parse_query(query)
    assert (exc.value.line, exc.value.column) == (4, 3)


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("SELECT ?s WHERE { ?s ?p ?o ", "found the end of the query"),
        ("SELECT ?s WHERE { ?s ?p }", "expected an object"),
        ("SELECT ?s (COUNT(?o) AS ?n) WHERE { ?s ?p ?o }", "neither grouped nor aggregated"),
        ("SELECT COUNT(?o) WHERE { ?s ?p ?o }", "must be written (COUNT(…) AS ?name)"),
        ("SELECT * WHERE { ?s ?p ?o } GROUP BY ?s", "SELECT * cannot be used with GROUP BY"),
        ("SELECT * WHERE { ?s ?p ?o BIND(1 AS ?o) }", "already used before this BIND"),
        ("SELECT * WHERE { ?s ?p ?o FILTER(COUNT(?o) > 1) }", "not allowed in FILTER"),
        ("SELECT * WHERE { VALUES (?a ?b) { (1) } }", "1 values for 2 variables"),
        ("SELECT * WHERE { ?s <http//x.org/p> ?o }", "not an absolute IRI"),
        ("SELECT * WHERE { ?s ?p ?o FILTER(STRLEN(?o, 2) > 1) }", "takes 1 argument"),
        ("INSERT DATA { <http://a> <http://b> <http://c> }", "SPARQL Update"),
        ("SELECT ?x ?x WHERE { ?x ?p ?o }", "projected twice"),
        ("SELECT * WHERE { ?s ?p 'unterminated }", "unterminated string"),
        ("PREFIXex: <http://x/> SELECT * WHERE { ?s ?p ?o }", "missing space after PREFIX"),
        ("SELECT * WHERE { _:b ?p ?o OPTIONAL { _:b ?q ?r } }", "two different graph patterns"),
    ],
)
def test_invalid_queries_are_rejected_with_a_reason(query: str, needle: str) -> None:
    report = validate(query)
    assert errors(report) == ["syntax"], report.text()
    assert needle in report.issues[0].message


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * WHERE { ?a ?p ?b FILTER(?a<?b&&?b>?a) }",  # '<' as an operator, not an IRI
        "SELECT ?s (SAMPLE(?o) AS ?o) WHERE { ?s ?p ?o } GROUP BY ?s",
        "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o } HAVING (COUNT(*) > 2)",
        "PREFIX ec: <http://purl.uniprot.org/enzyme/> SELECT * WHERE { VALUES ?e { ec:1.-.-.- } ?x ?p ?e }",
        "ASK { ?s ?p ?o }",
        "DESCRIBE <http://example.org/x>",
        "CONSTRUCT WHERE { ?s ?p ?o }",
        "CONSTRUCT { ?s <http://x/p> [ <http://x/q> ?o ] } WHERE { ?s ?p ?o }",
        "BASE <http://example.org/> SELECT * WHERE { <a> ?p ?o }",
        "SELECT * WHERE { ?s ?p ?o . FILTER NOT EXISTS { ?o ?q ?s } MINUS { ?s a ?t } }",
        'SELECT (GROUP_CONCAT(DISTINCT ?o; SEPARATOR=", ") AS ?all) WHERE { ?s ?p ?o }',
        "SELECT * WHERE { ?s ?p ( 1 2 [ ?q ?r ] ) }",
        "SELECT * WHERE { { SELECT ?s WHERE { ?s ?p ?o } LIMIT 1 } BIND(1 AS ?o) }",
        'SELECT * WHERE { ?s ?p """multi\nline""" ; ?q -1.5e3, true }',
    ],
)
def test_valid_queries_pass(query: str) -> None:
    report = validate(query)
    assert report.issues == [], report.text()
    assert report.ok


# ------------------------------------------------------------------------------------- prefixes


def test_missing_well_known_prefixes_are_added() -> None:
    query = "SELECT ?x ?l WHERE {\n  ?x a up:Protein ; rdfs:label ?l .\n}"
    report = validate(query)
    assert report.ok and report.repaired
    assert [i.kind for i in report.issues] == ["fix"]
    assert report.issues[0].severity == "info"
    assert set(report.issues[0].suggestions) == {
        "PREFIX up: <http://purl.uniprot.org/core/>",
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>",
    }
    assert report.query.endswith(query)
    parsed = parse_query(report.query)  # the repaired text parses with no help
    assert Iri("http://purl.uniprot.org/core/Protein") in [p.object for p in parsed.patterns]
    # the pattern positions refer to the repaired query
    assert report.triple_patterns[0].line == 4


def test_caller_and_schema_prefixes_win_over_well_known_ones(schema: Schema) -> None:
    report = validate(
        "SELECT * WHERE { ?x ex:name ?n ; schema:name ?m }",
        None,
        prefixes={"schema": "https://schema.org/"},
    )
    assert "PREFIX schema: <https://schema.org/>" in report.query
    with_schema = validate("SELECT * WHERE { ?x a ex:Person }", schema)
    assert f"PREFIX ex: <{EX}>" in with_schema.query and with_schema.ok


def test_unknown_prefix_is_a_syntax_error_with_position() -> None:
    report = validate("SELECT * WHERE {\n ?x foo:bar ?y ; rdfs:label ?l }")
    assert not report.ok
    kinds = [i.kind for i in report.issues]
    assert kinds == ["fix", "syntax"]
    syntax = report.issues[1]
    assert (syntax.line, syntax.column) == (2, 5) and "PREFIX foo:" in syntax.message


def test_wikidata_prefixes_are_repaired() -> None:
    report = validate(
        "SELECT ?h WHERE { ?h wdt:P31 wd:Q5 ; p:P39/ps:P39 ?pos . ?pos pq:P580 ?start }"
    )
    assert report.ok and report.repaired
    for prefix in ("wd", "wdt", "p", "ps", "pq"):
        assert f"PREFIX {prefix}: <{REPAIR_PREFIXES[prefix]}>" in report.query


def test_escaped_names_are_written_out_and_only_used_prefixes_declared() -> None:
    # `ex:` is used only in an escaped name, so it needs no PREFIX line once that is an <IRI>.
    report = validate("SELECT * WHERE { ?s foaf:knows ex:a.b%40c.org . }", prefixes={"ex": "urn:ex:"})
    assert report.ok and report.repaired
    assert report.query == (
        "PREFIX foaf: <http://xmlns.com/foaf/0.1/>\nSELECT * WHERE { ?s foaf:knows <urn:ex:a.b%40c.org> . }"
    )
    fix = report.issues[0]
    assert fix.kind == "fix" and fix.suggestions == ("PREFIX foaf: <http://xmlns.com/foaf/0.1/>",)
    assert "for foaf: at the top" in fix.message and "ex:a.b%40c.org as <IRI>s" in fix.message
    assert [p.object for p in report.triple_patterns] == [Iri("urn:ex:a.b%40c.org")]


# ----------------------------------------------------------------------------- pattern extraction


def test_property_paths_are_kept_as_structures() -> None:
    parsed = parse_query(
        PREFIXES + "SELECT * WHERE { ?a ex:knows/ex:livesIn* ?b . ?b ^ex:country|ex:name ?c . "
        "?c !(ex:a|^ex:b) ?d . ?d (ex:knows)+ ?e ; ex:name? ?f }"
    )
    preds = [p.predicate for p in parsed.patterns]
    assert (
        isinstance(preds[0], PathSeq)
        and isinstance(preds[0].parts[1], PathMod)
        and preds[0].parts[1].mod == "*"
    )
    assert isinstance(preds[1], PathAlt) and isinstance(preds[1].options[0], PathInv)
    assert isinstance(preds[2], PathNeg) and preds[2].iris == ((EX + "a", False), (EX + "b", True))
    assert isinstance(preds[3], PathMod) and preds[3].mod == "+"
    assert isinstance(preds[4], PathMod) and preds[4].mod == "?"
    assert str(preds[0]) == f"<{EX}knows>/<{EX}livesIn>*"
    roles = {(u.iri, u.role) for u in parsed.iri_uses}
    assert (EX + "livesIn", "predicate") in roles


def test_services_values_and_contexts_are_extracted() -> None:
    parsed = parse_query(
        PREFIXES
        + """SELECT * WHERE {
  VALUES ?t { ex:Person ex:City }
  ?x a ?t .
  OPTIONAL { ?x ex:name ?n }
  { ?x ex:age ?a } UNION { ?x ex:population ?a }
  FILTER NOT EXISTS { ?x ex:note ?z }
  { SELECT ?x WHERE { ?x ex:knows ?k } }
  SERVICE <https://genes.example.org/sparql> { ?g g:symbol ?n . SERVICE SILENT ?ep { ?g g:mass ?m } }
}"""
    )
    by_pred = {str(p.predicate): p for p in parsed.patterns}
    assert parsed.values["t"] == [Iri(EX + "Person"), Iri(EX + "City")]
    assert by_pred[f"<{EX}name>"].context == ("OPTIONAL",)
    assert by_pred[f"<{EX}age>"].context == ("UNION",)
    assert by_pred[f"<{EX}population>"].context == ("UNION",)
    assert by_pred[f"<{EX}note>"].context == ("NOT EXISTS",)
    assert by_pred[f"<{EX}knows>"].context == ("SUBQUERY",)
    assert by_pred[f"<{GENE}symbol>"].service == GENES_ENDPOINT
    assert by_pred[f"<{GENE}mass>"].service == "?ep"
    assert by_pred[f"<{GENE}mass>"].context == ("SERVICE", "SERVICE")
    assert [(s.endpoint, s.silent) for s in parsed.services] == [
        (GENES_ENDPOINT, False),
        ("?ep", True),
    ]


def test_report_lists_patterns_and_services_as_json(schema: Schema) -> None:
    report = validate(
        PREFIXES
        + f"SELECT * WHERE {{ ?x ex:name ?n SERVICE <{GENES_ENDPOINT}> {{ ?g g:symbol ?n }} }}",
        schema,
    )
    data = json.loads(json.dumps(report.to_dict(schema.compact)))
    assert data["services"] == [GENES_ENDPOINT]
    assert data["triple_patterns"][0] == {
        "subject": "?x",
        "predicate": "ex:name",
        "object": "?n",
        "service": None,
        "line": 3,
        "context": [],
    }
    assert data["triple_patterns"][1]["service"] == GENES_ENDPOINT
    assert data["ok"] is True and data["issues"] == []


# ------------------------------------------------------------------------------------ schema checks


def test_predicate_not_on_class_names_what_the_class_has(schema: Schema) -> None:
    report = validate(
        PREFIXES
        + "SELECT * WHERE {\n  ?p a ex:Person ;\n     ex:populaton ?x ; ex:population ?y .\n}",
        schema,
    )
    issues = {i.kind: i for i in report.issues}
    assert not report.ok
    unknown = issues["unknown_predicate"]
    assert (
        unknown.line == 5 and "ex:populaton is not a predicate of this endpoint" in unknown.message
    )
    assert "ex:population" in unknown.suggestions
    wrong = issues["predicate_not_on_class"]
    assert wrong.message.startswith(
        "?p of type ex:Person has no predicate ex:population; it has: ex:knows, ex:livesIn"
    )
    assert "ex:name" in wrong.message and "ex:age" in wrong.message


def test_unknown_class_suggests_the_closest(schema: Schema) -> None:
    report = validate(PREFIXES + "SELECT * WHERE { ?p a ex:Persn }", schema)
    [issue] = [i for i in report.issues if i.kind == "unknown_class"]
    assert issue.message == "ex:Persn is not a class of this endpoint (closest: ex:Person)"
    values = validate(
        PREFIXES + "SELECT * WHERE { VALUES ?t { ex:Person ex:Town } ?p a ?t }", schema
    )
    assert [i.message.split(" (")[0] for i in values.issues if i.kind == "unknown_class"] == [
        "ex:Town is not a class of this endpoint"
    ]


def test_types_follow_from_ranges_and_paths(schema: Schema) -> None:
    # ?c is the object of ex:livesIn from a Person: a City, which has no ex:age.
    report = validate(
        PREFIXES + "SELECT * WHERE { ?p a ex:Person ; ex:livesIn ?c . ?c ex:age ?a }", schema
    )
    [issue] = report.issues
    assert issue.kind == "predicate_not_on_class"
    assert issue.message.startswith(
        "?c of type ex:City (inferred from ex:livesIn) has no predicate ex:age"
    )
    # the same through a sequence path, with the intermediate node named for people
    path = validate(PREFIXES + "SELECT * WHERE { ?p a ex:Person ; ex:livesIn/ex:age ?a }", schema)
    assert [i.kind for i in path.issues] == ["predicate_not_on_class"]
    assert "the node inside the property path on line 3" in path.issues[0].message
    # inverse paths swap subject and object: ?c ^ex:livesIn ?p means ?p ex:livesIn ?c
    inverse = validate(
        PREFIXES + "SELECT * WHERE { ?c a ex:City ; ^ex:livesIn ?p . ?p ex:population ?x }", schema
    )
    assert errors(inverse) == ["predicate_not_on_class"]
    ok = validate(
        PREFIXES + "SELECT * WHERE { ?p a ex:Person ; ex:livesIn/ex:country/ex:name ?n }", schema
    )
    assert ok.ok and ok.issues == []


def test_variables_projected_by_a_subquery_keep_their_type(schema: Schema) -> None:
    query = "SELECT * WHERE { ?x a ex:Person { SELECT ?x ?n WHERE { ?x ex:population ?n } } }"
    report = validate(PREFIXES + query, schema)
    assert errors(report) == ["predicate_not_on_class"]
    star = validate(PREFIXES + query.replace("SELECT ?x ?n WHERE", "SELECT * WHERE"), schema)
    assert errors(star) == ["predicate_not_on_class"]
    inner = validate(
        PREFIXES + "SELECT * WHERE { { SELECT ?n WHERE { ?x a ex:City ; ex:age ?n } } }", schema
    )
    assert errors(inner) == ["predicate_not_on_class"]
    assert inner.issues[0].message.startswith(
        "?x (inside a subquery) of type ex:City has no predicate ex:age"
    )


def test_alternatives_fail_only_when_every_option_does(schema: Schema) -> None:
    fine = validate(
        PREFIXES + "SELECT * WHERE { ?p a ex:Person ; ex:name|ex:population ?n }", schema
    )
    assert fine.ok and fine.issues == []
    wrong = validate(
        PREFIXES + "SELECT * WHERE { ?p a ex:Person ; ex:country|ex:population ?n }", schema
    )
    assert errors(wrong) == ["predicate_not_on_class", "predicate_not_on_class"]
    # a predicate the endpoint never uses is wrong even as one option among others
    typo = validate(PREFIXES + "SELECT * WHERE { ?p a ex:Person ; ex:name|ex:nmae ?n }", schema)
    assert errors(typo) == ["unknown_predicate"]


def test_object_mismatches_are_warnings(schema: Schema) -> None:
    report = validate(
        PREFIXES
        + "SELECT * WHERE { ?p a ex:Person ; ex:livesIn ?c ; ex:livesIn 'Paris' . ?c a ex:Country }",
        schema,
    )
    kinds = [(i.kind, i.severity) for i in report.issues]
    assert kinds.count(("object_class_mismatch", "warning")) == 2
    assert report.ok  # warnings do not make a query wrong
    messages = " | ".join(i.message for i in report.issues)
    assert "?c is typed ex:Country, but ex:livesIn from ?p leads to ex:City" in messages
    assert 'never to a literal such as "Paris"' in messages
    numeric = validate(PREFIXES + "SELECT * WHERE { ?c a ex:City ; ex:population 'many' }", schema)
    assert "not a string literal" in numeric.issues[-1].message
    assert (
        validate(PREFIXES + "SELECT * WHERE { ?c a ex:City ; ex:population 2.1e6 }", schema).issues
        == []
    )


@pytest.mark.parametrize(
    "body",
    [
        "?x ex:name ?n ; ex:population ?p",  # untyped subject, known predicates
        "?x a ex:Person ; ?anything ?o",  # variable predicate
        "?x a ex:Person ; <http://other.org/p> ?o",  # predicate outside the schema's namespaces
        "?x a <http://other.org/Thing> ; ex:population ?o",  # class outside the schema: nothing to compare with
        "?x ex:knows* ?y . ?y ex:population ?p",  # zero-length paths: no range inference
        "?x a ex:Person . OPTIONAL { ?x ex:livesIn ?c } ?c ex:name ?n",
        "?x a ?t ; ex:population ?p",  # a variable class
        "?x rdf:type/rdfs:subClassOf* ex:Person ; ex:population ?p",  # typing through a path is not exact
        # ?x inside the subquery is not projected: another variable than the outer ?x
        "?x a ex:Person ; ex:name ?n { SELECT ?n WHERE { ?x ex:population ?n } }",
    ],
)
def test_no_issue_when_unsure(schema: Schema, body: str) -> None:
    report = validate(PREFIXES + f"SELECT * WHERE {{ {body} }}", schema)
    assert errors(report) == [], report.text()
    assert all(i.kind in ("fix",) for i in report.issues), report.text()


def test_service_patterns_are_checked_against_their_endpoint(schema: Schema, genes: Schema) -> None:
    query = PREFIXES + (
        "SELECT * WHERE { ?p a ex:Person ; ex:name ?n .\n"
        "  SERVICE <https://genes.example.org/sparql/> { ?g a g:Gene ; g:symbol ?n ; g:mass ?m }\n"
        "  SERVICE <http://elsewhere.example.org/sparql> { ?z a g:Gene ; g:nothing ?y }\n}"
    )
    report = validate(query, schema, schemas_by_endpoint={GENES_ENDPOINT: genes})
    [issue] = report.issues
    assert issue.kind == "predicate_not_on_class" and issue.line == 4
    assert issue.message.startswith(
        "?g of type g:Gene has no predicate g:mass in SERVICE <https://genes.example.org/sparql/>"
    )
    assert report.services == [
        "https://genes.example.org/sparql/",
        "http://elsewhere.example.org/sparql",
    ]
    # without a schema for the SERVICE endpoint, its patterns are not judged by the main endpoint's schema
    alone = validate(query, schema)
    assert alone.ok and alone.issues == []
    # the main endpoint's own URL in SERVICE uses the main schema
    self_service = validate(
        PREFIXES + f"SELECT * WHERE {{ SERVICE <{MAIN}/> {{ ?p a ex:Person ; ex:nmae ?n }} }}",
        schema,
    )
    assert errors(self_service) == ["unknown_predicate"]


def test_endpoint_key_ignores_scheme_port_case_and_slash() -> None:
    assert endpoint_key("https://Sparql.UniProt.org:443/sparql/") == endpoint_key(
        "http://sparql.uniprot.org/sparql"
    )
    assert endpoint_key("http://h.org:8890/sparql") != endpoint_key("http://h.org/sparql")
    assert endpoint_key("https://bad]host/x") == "https://bad]host/x"


def test_endpoint_key_is_the_guards_spelling_without_the_scheme() -> None:
    url = "HTTPS://Sparql.UniProt.org:443/sparql/?format=json"
    assert normalise_endpoint(url) == "https://sparql.uniprot.org/sparql?format=json"
    assert endpoint_key(url) == "sparql.uniprot.org/sparql?format=json"
    # 443 is the default port of https only, as the guard reads it.
    assert endpoint_key("http://h.org:443/s") == "h.org:443/s"


def test_wikidata_style_typing() -> None:
    wdt = "http://www.wikidata.org/prop/direct/"
    wd = "http://www.wikidata.org/entity/"
    store = ox.Store()
    store.load(
        f"<{wd}Q1> <{wdt}P31> <{wd}Q5> ; <{wdt}P569> '1900-01-01' ; <{wdt}P19> <{wd}Q2> .\n"
        f"<{wd}Q2> <{wdt}P31> <{wd}Q515> ; <{wdt}P1082> 100 .",
        format=ox.RdfFormat.TURTLE,
    )
    s = compute_schema(
        StoreRunner(store), type_predicate=wdt + "P31", prefixes={"wd": wd, "wdt": wdt}
    )
    assert s.type_predicates == [wdt + "P31", RDF_TYPE]
    assert "wdt:P31 [ wd:Q5 ]" in s.shape(wd + "Q5")
    report = validate("SELECT * WHERE { ?h wdt:P31 wd:Q5 ; wdt:P1082 ?n }", s)
    assert errors(report) == ["predicate_not_on_class"]
    assert report.issues[1].message.startswith("?h of type wd:Q5 has no predicate wdt:P1082")


# ---------------------------------------------------------------------------------------- no network


class _Counting(socketserver.BaseRequestHandler):
    hits: ClassVar[list[str]] = []

    def handle(self) -> None:
        _Counting.hits.append(self.request.recv(65536).decode("latin-1").split("\r\n", 1)[0])
        self.request.sendall(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )


@pytest.fixture
def listening_endpoint() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Counting)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Counting.hits = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/sparql"
    finally:
        server.shutdown()
        server.server_close()


def test_validation_never_touches_the_network(listening_endpoint: str, schema: Schema) -> None:
    query = f"SELECT * WHERE {{ SERVICE <{listening_endpoint}> {{ ?s ?p ?o }} SERVICE SILENT <{listening_endpoint}> {{ ?a ?b ?c }} }}"
    for _ in range(3):
        report = validate(query, schema, schemas_by_endpoint={listening_endpoint: schema})
        assert report.ok and report.services == [listening_endpoint]
    parse_query(query)
    assert _Counting.hits == []
    # Control: executing the same text with pyoxigraph, even on an empty store, calls the endpoint.
    with pytest.raises(OSError):
        list(ox.Store().query(query.replace("SERVICE SILENT", "SERVICE", 1)))
    deadline = time.monotonic() + 5
    while not _Counting.hits and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _Counting.hits and _Counting.hits[0].startswith(("GET /sparql", "POST /sparql"))


# ---------------------------------------------------------------------------------------------- CLI


def _cli(*args: str, home: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARQLNAV_HOME": str(home)}
    script = Path(sys.executable).parent / "sparqlnav"  # the installed console script
    return subprocess.run(
        [str(script), "validate", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_cli_validate(tmp_path: Path) -> None:
    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return _cli(*args, home=tmp_path / "home", stdin=stdin)

    void = tmp_path / "void.ttl"
    void.write_text(
        "@prefix void: <http://rdfs.org/ns/void#> . @prefix ex: <http://example.org/voc#> .\n"
        "[] void:classPartition [ void:class ex:Person ; void:entities 3 ;"
        " void:propertyPartition [ void:property ex:name ; void:triples 3 ] ] .\n",
        encoding="utf-8",
    )
    ok = run("SELECT * WHERE { ?s ?p ?o }")
    assert (ok.returncode, ok.stdout.strip()) == (0, "ok: no issues")
    query_file = tmp_path / "q.rq"
    query_file.write_text(
        PREFIXES + "SELECT * WHERE { ?p a ex:Person ; ex:nmae ?n }", encoding="utf-8"
    )
    bad = run(str(query_file), "--void", str(void))
    assert (
        bad.returncode == 1
        and "ex:nmae is not a predicate" in bad.stdout
        and "closest: ex:name" in bad.stdout
    )
    as_json = run(
        "-",
        "--void",
        str(void),
        "--json",
        stdin="SELECT * WHERE { ?p a ex:Persons ; rdfs:label ?n }",
    )
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert [i["kind"] for i in data["issues"]] == ["fix", "unknown_class"]
    assert data["issues"][1]["suggestions"] == ["ex:Person"]
    assert data["query"].startswith("PREFIX ex: <http://example.org/voc#>\nPREFIX rdfs:")
    assert data["triple_patterns"][0] == {
        "subject": "?p",
        "predicate": "rdf:type",
        "object": "ex:Persons",
        "service": None,
        "line": 3,
        "context": [],
    }
    missing = run("SELECT * WHERE { ?s ?p ?o }", "--void", str(tmp_path / "nope.ttl"))
    assert (
        missing.returncode == 1
        and missing.stderr.strip() == f"error: no such VoID file: {tmp_path / 'nope.ttl'}"
    )
    assert "Traceback" not in missing.stderr
    kg = tmp_path / "kg.ttl"
    kg.write_text(DATA, encoding="utf-8")
    against_kg = run(PREFIXES + "SELECT * WHERE { ?c a ex:City ; ex:age ?a }", "--kg", str(kg))
    assert against_kg.returncode == 1, against_kg.stderr
    assert (
        "?c of type ex:City has no predicate ex:age; it has: ex:country, ex:name, ex:population"
        in against_kg.stdout
    )
    assert (
        run(PREFIXES + "SELECT * WHERE { ?c a ex:City ; ex:name ?n }", "--kg", str(kg)).returncode
        == 0
    )
    syntax = run("SELECT * WHERE { ?s ?p ?o")
    assert syntax.returncode == 1
    assert (
        syntax.stdout.strip()
        == "error [syntax] line 1, column 26: expected '}' or a graph pattern, found the end of the query"
    )


# ------------------------------------------------------------------------------ corpora (real data)

SH = "http://www.w3.org/ns/shacl#"
SPEX = "https://purl.expasy.org/sparql-examples/ontology#"
_QUERY_PREDICATES = {
    ns + form for ns in (SH, SPEX) for form in ("select", "ask", "construct", "describe")
}


def shacl_queries(path: Path) -> list[tuple[str, str]]:
    """(id, query) of every sh:SPARQLExecutable in a Turtle file."""
    return [
        (f"{path.parent.name}/{path.name}#{q.subject}", q.object.value)
        for q in ox.parse(path=str(path))
        if q.predicate.value in _QUERY_PREDICATES
    ]


def sib_prefixes(data_dir: Path) -> dict[str, str]:
    """The prefixes the SIB examples declare for their endpoints."""
    found: dict[str, str] = {}
    graph = list(ox.parse(path=str(data_dir / "sparql-examples" / "examples" / "prefixes.ttl")))
    prefix = {q.subject: q.object.value for q in graph if q.predicate.value == SH + "prefix"}
    namespace = {q.subject: q.object.value for q in graph if q.predicate.value == SH + "namespace"}
    for node, name in prefix.items():
        if node in namespace:
            found[name] = namespace[node]
    return found


def corpus(data_dir: Path) -> list[tuple[str, str, str]]:
    """(dataset, id, query) for every query in the shared data."""
    items: list[tuple[str, str, str]] = []
    for f in sorted((data_dir / "sparql-examples" / "examples").glob("*/*.ttl")):
        items += [("sparql-examples", i, q) for i, q in shacl_queries(f)]
    items += [
        ("void-pubchem", i, q) for i, q in shacl_queries(data_dir / "void" / "examples_pubchem.ttl")
    ]
    for name, f in [
        ("qald10", "qald10/qald_10.json"),
        ("bestiary", "bestiary/beastiary_with_qald_format.json"),
    ]:
        for q in json.loads((data_dir / f).read_text(encoding="utf-8"))["questions"]:
            items.append((name, f"{name}#{q['id']}", q["query"]["sparql"]))
    for name, f in [("ck25", "ck25/questions.yml"), ("db25", "ck25/dbpedia_questions_db25.yaml")]:
        for q in yaml.safe_load((data_dir / f).read_text(encoding="utf-8"))["questions"]:
            items.append((name, f"{name}#{q['id']}", q["query"]["sparql"]))
    for f in sorted((data_dir / "spinach").glob("*.json")):
        rows = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            continue
        for n, row in enumerate(rows):
            for key in ("sparql", "gold_sparql", "predicted_sparql"):
                if isinstance(row.get(key), str) and row[key].strip():
                    items.append(("spinach", f"{f.name}#{n}.{key}", row[key]))
    return items


@pytest.fixture(scope="module")
def uniprot(data_dir: Path) -> Schema:
    return schema_from_void_file(data_dir / "void" / "void_uniprot.ttl")


@pytest.fixture(scope="module")
def uniprot_examples(data_dir: Path) -> list[tuple[str, str]]:
    folder = data_dir / "sparql-examples" / "examples" / "UniProt"
    found = [x for f in sorted(folder.glob("*.ttl")) for x in shacl_queries(f)]
    assert len(found) == len(list(folder.glob("*.ttl")))  # one query per file, none missed
    return found


def test_no_false_positives_on_the_uniprot_examples(
    uniprot: Schema, uniprot_examples: list[tuple[str, str]]
) -> None:
    flagged: list[str] = []
    seconds: list[float] = []
    for ident, query in uniprot_examples:
        start = time.perf_counter()
        report = validate(query, uniprot)
        seconds.append(time.perf_counter() - start)
        bad = [i for i in report.issues if i.severity != "info"]
        if bad:
            flagged.append(f"{ident}: {bad[0].kind}: {bad[0].message}")
    rate = len(flagged) / len(uniprot_examples)
    print(
        f"\nUniProt examples: {len(uniprot_examples)} queries, {len(flagged)} flagged (false-positive rate {rate:.1%}); "
        f"validation p50 {statistics.median(seconds) * 1000:.2f} ms, max {max(seconds) * 1000:.2f} ms"
    )
    print("\n".join(flagged))
    assert len(uniprot_examples) >= 130
    assert flagged == []


def _near_miss(text: str, rng: random.Random) -> str | None:
    """`up:organism` → `up:organsim`-like spelling mistakes (deterministic under `rng`)."""
    m = re.fullmatch(r"(<.*[/#])([^/#>]+)(>)", text) or re.fullmatch(r"([^:]*:)(.+)()", text)
    if m is None:
        return None
    head, local, tail = m.groups()
    for _ in range(20):
        op = rng.choice(["drop", "swap", "double", "case", "plural"])
        i = rng.randrange(len(local))
        if op == "drop" and len(local) > 2:
            new = local[:i] + local[i + 1 :]
        elif op == "swap" and len(local) > 2:
            i = min(i, len(local) - 2)
            new = local[:i] + local[i + 1] + local[i] + local[i + 2 :]
        elif op == "double":
            new = local[:i] + local[i] + local[i:]
        elif op == "case":
            new = local[:1].swapcase() + local[1:]
        else:
            new = local + "s"
        if new != local and re.fullmatch(r"[A-Za-z0-9_]([A-Za-z0-9_\-.]*[A-Za-z0-9_\-])?", new):
            return head + new + tail
    return None


def test_mutated_queries_are_detected(
    uniprot: Schema, uniprot_examples: list[tuple[str, str]]
) -> None:
    """Replace one schema predicate or class per query by a near-miss spelling, or by another real IRI of the
    same namespace (seeded, so the same mutations every run) and count how many the validator flags."""
    rng = random.Random(20240611)
    outcome: Counter[tuple[str, str, bool]] = Counter()
    missed: list[str] = []
    for ident, query in uniprot_examples:
        base = validate(query, uniprot)
        if not base.ok:
            continue
        parsed = parse_query(base.query)
        sites = [
            u
            for u in parsed.iri_uses
            if u.role in ("predicate", "class")
            and u.service is None
            and u.iri != RDF_TYPE
            and (uniprot.has_class(u.iri) if u.role == "class" else uniprot.has_predicate(u.iri))
        ]
        if not sites:
            continue
        for kind in ("near-miss", "swap"):
            site = rng.choice(sites)
            original = base.query[site.start : site.end]
            if kind == "near-miss":
                replacement = _near_miss(original, rng)
                if replacement is None:
                    continue
                iri = parse_query(
                    base.query[: site.start] + replacement + base.query[site.end :]
                ).iri_uses
                new_iri = next(u.iri for u in iri if u.start == site.start)
                if uniprot.has_class(new_iri) or uniprot.has_predicate(new_iri):
                    continue
            else:
                pool = uniprot.class_names if site.role == "class" else uniprot.predicate_names
                pool = [
                    x
                    for x in pool
                    if x != site.iri and x != RDF_TYPE and namespace_of(x) == namespace_of(site.iri)
                ]
                if not pool:
                    continue
                replacement = f"<{rng.choice(pool)}>"
            mutated = base.query[: site.start] + replacement + base.query[site.end :]
            report = validate(mutated, uniprot)
            detected = any(i.severity in ("error", "warning") for i in report.issues)
            outcome[(kind, site.role, detected)] += 1
            if not detected:
                missed.append(f"{ident.split('#')[0]}: {kind} {original} -> {replacement}")

    def rate(kind: str | None = None) -> tuple[int, int]:
        hit = sum(n for (k, _r, d), n in outcome.items() if d and kind in (None, k))
        total = sum(n for (k, _r, _d), n in outcome.items() if kind in (None, k))
        return hit, total

    lines = [
        f"{k} {r}: {outcome[(k, r, True)]}/{outcome[(k, r, True)] + outcome[(k, r, False)]}"
        for k in ("near-miss", "swap")
        for r in ("predicate", "class")
    ]
    (nh, nt), (sh, st), (ah, at) = rate("near-miss"), rate("swap"), rate()
    print(
        f"\nmutation detection: near-miss {nh}/{nt} = {nh / nt:.1%}, swap {sh}/{st} = {sh / st:.1%}, all {ah}/{at} = {ah / at:.1%}"
    )
    print("; ".join(lines))
    print("missed (mostly swaps on subjects with no known type):\n" + "\n".join(missed[:20]))
    assert nt >= 120 and st >= 120
    assert nh / nt >= 0.95
    assert sh / st >= 0.45
    assert ah / at >= 0.70


_SERVICE = re.compile(r"\bSERVICE(\s+SILENT)?\b", re.IGNORECASE)


def _oxigraph_verdict(query: str) -> str | None:
    """Oxigraph's parse error, or None; SERVICE is turned into GRAPH first so that nothing is fetched."""
    try:
        ox.Store().query(_SERVICE.sub("GRAPH", query))
    except SyntaxError as exc:
        return str(exc).split("\n")[0][:200]
    except (OSError, RuntimeError):
        return None  # evaluation problems (unsupported functions, …) are not syntax problems
    return None


def report_dir() -> Path:
    path = Path(
        os.environ.get("SPARQLNAV_REPORT_DIR") or Path(tempfile.gettempdir()) / "sparqlnav-reports"
    )
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.slow
def test_every_query_in_the_shared_data_parses(data_dir: Path) -> None:
    """Syntax only, against Oxigraph's parser as the reference: no query Oxigraph accepts may be rejected; the
    rejected ones are listed with their reason and engine extension in a report file."""
    prefixes = sib_prefixes(data_dir)
    rows: list[str] = []
    counts: Counter[str] = Counter()
    by_dataset: Counter[tuple[str, str]] = Counter()
    wrongly_rejected: list[str] = []
    engines: Counter[str] = Counter()
    for dataset, ident, query in corpus(data_dir):
        report = validate(query, None, prefixes=prefixes)
        syntax = [i for i in report.issues if i.kind == "syntax"]
        reference = _oxigraph_verdict(report.query)
        if not syntax:
            verdict = "ok" if reference is None else "ok (Oxigraph's parser rejects it)"
        else:
            where = f"line {syntax[0].line}, column {syntax[0].column}: {syntax[0].message}"
            engine = re.search(r"\[(Virtuoso|Blazegraph)[^\]]*\]", syntax[0].message)
            if reference is None:
                verdict = "REJECTED BUT VALID"
                wrongly_rejected.append(f"{ident}: {where}")
            elif engine:
                verdict = "engine extension"
                engines[engine.group(1)] += 1
            else:
                verdict = "invalid"
            rows.append(f"{dataset}\t{ident}\t{verdict}\t{where}\t{reference or ''}")
        if verdict.startswith("ok") and reference is not None:
            rows.append(f"{dataset}\t{ident}\t{verdict}\t\t{reference}")
        counts[verdict] += 1
        by_dataset[(dataset, verdict)] += 1
    path = report_dir() / "parse_failures.tsv"
    path.write_text(
        "dataset\tid\tverdict\tour message\toxigraph message\n" + "\n".join(rows) + "\n",
        encoding="utf-8",
    )
    print(
        f"\nparsed {sum(counts.values())} queries: {dict(counts)}; engines {dict(engines)}; report: {path}"
    )
    print("\n".join(f"  {d}: {v} {n}" for (d, v), n in sorted(by_dataset.items())))
    assert sum(counts.values()) > 4000
    assert wrongly_rejected == []
    assert engines["Virtuoso"] >= 10 and engines["Blazegraph"] >= 10
    assert counts["ok"] > 0.97 * sum(counts.values())


def test_wikibase_graph_schema_types_subjects_by_p31(demo) -> None:  # type: ignore[no-untyped-def]
    """On a Wikibase-shaped graph the computed schema types subjects by wdt:P31, so class checks work."""
    from sparqlnav.retrieval.kg_index import kg_schema

    schema = kg_schema(demo)
    bad = validate(
        "PREFIX wd: <https://demo.sparqlnav.org/entity/>\nPREFIX wdt: <https://demo.sparqlnav.org/prop/direct/>\n"
        "SELECT ?x WHERE { ?x wdt:P31 wd:Q201 ; wdt:P569 ?born }",
        schema,
    )
    assert not bad.ok and any(i.kind == "predicate_not_on_class" and "wdt:P569" in i.message for i in bad.issues)
    good = validate(
        "PREFIX wd: <https://demo.sparqlnav.org/entity/>\nPREFIX wdt: <https://demo.sparqlnav.org/prop/direct/>\n"
        "SELECT ?x WHERE { ?x wdt:P31 wd:Q201 ; wdt:P1086 ?n }",
        schema,
    )
    assert good.ok and not good.issues
