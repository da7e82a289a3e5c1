"""The guard refuses updates and unlisted SERVICE targets, however they are dressed up."""

from __future__ import annotations

import pytest

from sparqlnav.sparql.guard import (
    Refused,
    check_query,
    check_read_only,
    check_services,
    query_form,
    service_targets,
)

UPDATES = [
    "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
    "delete where { ?s ?p ?o }",
    "PREFIX ex: <http://example.org/>\nInSeRt { ?s ex:p 1 } WHERE { ?s ?p ?o }",
    "# a harmless comment\nDROP ALL",
    "LOAD <http://example.org/data.ttl>",
    "CLEAR DEFAULT",
    "CREATE GRAPH <urn:g>",
    "ADD DEFAULT TO <urn:g>",
    "MOVE <urn:a> TO <urn:b>",
    "COPY DEFAULT TO <urn:g>",
    "WITH <urn:g> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "SELECT * WHERE { ?s ?p ?o } ; DELETE WHERE { ?s ?p ?o }",
    "/* not a comment in SPARQL */ DELETE WHERE { ?s ?p ?o }",
]


@pytest.mark.parametrize("text", UPDATES)
def test_update_forms_are_refused(text: str) -> None:
    with pytest.raises(Refused, match="refused"):
        check_read_only(text)


@pytest.mark.parametrize(
    "text",
    [
        'SELECT ?s WHERE { ?s <http://example.org/p> "INSERT DATA { }" }',
        "SELECT ?s WHERE { ?s <http://example.org/DELETE> ?o } # DROP ALL",
        "PREFIX ex: <http://example.org/>\nSELECT ?s WHERE { ?s ex:insert ?o . ?s ex:COPY ?c }",
        "ASK { ?s ?p ?o }",
        "DESCRIBE <http://example.org/x>",
        "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }",
    ],
)
def test_queries_that_only_mention_keywords_pass(text: str) -> None:
    check_read_only(text)


def test_query_form() -> None:
    assert query_form("PREFIX a: <urn:a>\n# x\nselect * {}") == "SELECT"
    assert query_form("BASE <http://x/> ASK {}") == "ASK"
    assert query_form("INSERT DATA {}") is None


def test_service_targets_resolve_prefixes_and_silent() -> None:
    q = (
        "PREFIX up: <https://sparql.uniprot.org/>\n"
        "SELECT * WHERE { SERVICE SILENT up:sparql { ?s ?p ?o } SERVICE <http://b.example/sparql> { ?x ?y ?z } }"
    )
    assert service_targets(q) == ["https://sparql.uniprot.org/sparql", "http://b.example/sparql"]


def test_service_allow_list() -> None:
    q = "SELECT * WHERE { SERVICE <http://169.254.169.254/latest/meta-data> { ?s ?p ?o } }"
    with pytest.raises(Refused, match="not an allowed endpoint"):
        check_query(q, ["https://query.wikidata.org/sparql"])
    ok = "SELECT * WHERE { SERVICE <HTTPS://query.wikidata.org:443/sparql/> { ?s ?p ?o } }"
    assert check_query(ok, ["https://query.wikidata.org/sparql"]) == "SELECT"
    with pytest.raises(Refused, match="variable endpoint"):
        check_query("SELECT * WHERE { SERVICE ?e { ?s ?p ?o } }", ["https://query.wikidata.org/sparql"])


def test_empty_and_non_queries_are_refused() -> None:
    with pytest.raises(Refused, match="empty"):
        check_query("   ", [])
    with pytest.raises(Refused, match="not a SPARQL query"):
        check_query("hello world", [])


EVIL = "http://evil.example/sparql"
BYPASSES = [
    # A comment ends at \r for SPARQL engines: what follows it is live.
    "SELECT * WHERE { # x\rSERVICE <" + EVIL + "> { ?s ?p ?o } }",
    # Unicode spaces and \u escapes are legal inside IRIs; a '#' or quotes there must not start a comment or string.
    "SELECT * WHERE { OPTIONAL { ?x <http://ex.org/\u3000#> ?y } SERVICE <" + EVIL + "> { ?s ?p ?o } }",
    "SELECT * WHERE { OPTIONAL { ?x <http://ex.org/\\u0041#> ?y } SERVICE <" + EVIL + "> { ?s ?p ?o } }",
    "SELECT * WHERE { OPTIONAL { ?x <http://ex.org/\\u0041'''> ?y }\n SERVICE <" + EVIL + "> { ?s ?p ?o }\n"
    " OPTIONAL { ?x <http://ex.org/'''> ?z } }",
    'SELECT * WHERE { ?s ?p "a\rb" . SERVICE <' + EVIL + "> { ?s ?p ?o } }",
    "PREFIX e: <http://evil.example/>\nSELECT * WHERE { SERVICE e:sparql { ?s ?p ?o } }",
    "BASE <http://evil.example/>\nSELECT * WHERE { SERVICE <sparql> { ?s ?p ?o } }",
]


@pytest.mark.parametrize("query", BYPASSES)
@pytest.mark.parametrize("remote", [False, True])
def test_service_allow_list_cannot_be_smuggled_past(query: str, remote: bool) -> None:
    # Refused for its endpoint, or, when sparqlnav cannot read it (a raw \r inside a string), for that.
    with pytest.raises(Refused, match=r"not an allowed endpoint|not a valid endpoint|could not read"):
        check_query(query, ["https://query.wikidata.org/sparql"], remote=remote)


@pytest.mark.parametrize("target", ["http://x.org:99999/s", "http://[x/s"])
def test_malformed_service_urls_are_refused_not_crashes(target: str) -> None:
    with pytest.raises(Refused):
        check_query(f"SELECT * WHERE {{ SERVICE <{target}> {{ ?s ?p ?o }} }}", ["https://query.wikidata.org/sparql"])
    # a malformed allow-list entry allows nothing, and breaks nothing
    assert check_query("SELECT * WHERE { ?s ?p ?o }", ["http://[bad"]) == "SELECT"


def test_a_service_target_that_is_no_url_is_refused_and_a_bad_allow_entry_allows_nothing() -> None:
    with pytest.raises(Refused, match="not a valid endpoint URL"):
        check_services("SELECT * { SERVICE <http://h.org:99999/s> { ?s ?p ?o } }", ["http://h.org:99999/s"])
    check_services("SELECT * { SERVICE <HTTP://H.org:80/s/> { ?s ?p ?o } }", ["http://h.org/s", "http://x:bad/"])
