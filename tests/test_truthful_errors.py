"""Issue 18: errors name the real problem, and checks never report success for what they did not check.
Each test drives the real command, server or tool as a user (or an MCP client) would."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from mcp import Client

import test_serve
from sparqlnav.datasets import load_dataset
from sparqlnav.evaluation.coverage import dataset_coverage
from sparqlnav.evaluation.metrics import score
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.wikidata import WikidataNames
from sparqlnav.settings import Settings
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace
from test_cli import run
from test_mcp import run as run_mcp
from test_mcp import text_of
from test_serve import app_for

tiny_path = test_serve.tiny_path  # the shared small graph (fixtures)
tiny = test_serve.tiny
DEMO_WDT = "https://demo.sparqlnav.org/prop/direct/"


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


# -- 1. errors that name the real problem --------------------------------------------------------------


def test_a_misspelt_kg_file_is_said_missing_with_the_near_name(tmp_path: Path) -> None:
    (tmp_path / "prod-inst.ttl").write_text("<http://e.org/a> <http://e.org/b> <http://e.org/c> .\n")
    res = run("sparql", "SELECT * WHERE { ?s ?p ?o }", "--kg", str(tmp_path / "prod-inst.tll"), home=tmp_path)
    assert res.returncode == 1
    assert error_lines(res.stderr) == [
        f"error: no such file or folder: {tmp_path / 'prod-inst.tll'} (did you mean {tmp_path / 'prod-inst.ttl'}?)"
    ]


def test_a_missing_query_file_is_said_missing_and_refusals_say_refused_once(tmp_path: Path, tiny: KnowledgeGraph) -> None:
    missing = run("sparql", "missing.rq", home=tmp_path)
    assert (missing.returncode, error_lines(missing.stderr)) == (1, ["error: no such file: missing.rq"])
    drop = run("sparql", "DROP ALL", home=tmp_path)
    assert drop.returncode == 1 and error_lines(drop.stderr)[0].startswith("error: refused: this is a read-only tool")
    assert drop.stderr.count("refused") == 1
    # MCP's execute_sparql returns the toolkit's observation text
    observed = Toolkit(tiny, Trace()).execute_sparql("SELECT ?x WHERE { ?x ?y ?z } ; DROP ALL")
    assert not observed.ok and observed.text.count("refused") == 1, observed.text


def test_sparql_repairs_a_prefix_the_graph_knows_and_names_an_unknown_one(tmp_path: Path) -> None:
    repaired = run("sparql", "SELECT ?o WHERE { wd:Q17 wdt:P31 ?o }", "-f", "json", home=tmp_path)
    assert repaired.returncode == 0, repaired.stderr
    assert json.loads(repaired.stdout)["results"]["bindings"][0]["o"]["value"] == "https://demo.sparqlnav.org/entity/Q212"
    assert f"added missing PREFIX wd: <https://demo.sparqlnav.org/entity/>, PREFIX wdt: <{DEMO_WDT}> (from demo)" in repaired.stderr
    unknown = run("sparql", "SELECT * WHERE { ?s zz:P31 ?o } LIMIT 2", home=tmp_path)
    assert unknown.returncode == 1
    assert error_lines(unknown.stderr) == [
        "error: the prefix 'zz:' is not declared and demo does not know it: add PREFIX zz: <namespace IRI>"
    ]


def test_serve_on_a_busy_port_fails_first_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = run("serve", "--port", str(port), home=tmp_path)
    assert res.returncode == 1
    assert error_lines(res.stderr) == [f"error: cannot listen on 127.0.0.1:{port}: the port is in use"]
    assert res.stdout == ""


def test_an_unreachable_name_service_is_named() -> None:
    names = WikidataNames("http://wikidata.invalid/w/api.php")
    try:
        with pytest.raises(Exception, match=r"cannot reach http://wikidata\.invalid/w/api\.php: "):
            names.search("Paris")
    finally:
        names.close()


@pytest.mark.data
def test_eval_warns_when_the_graph_is_not_the_datasets(data_dir: Path, tmp_path: Path, ck25: KnowledgeGraph) -> None:
    questions = data_dir / "ck25" / "questions.yml"
    res = run("eval", str(questions), "--limit", "1", "-s", "lexical", "--out", str(tmp_path / "run"), "--no-plots", home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "warning: only 0 of 3 IRIs the dataset's queries use occur in demo" in " ".join(res.stderr.split())
    # on its own graph the same check finds every IRI it samples
    coverage = dataset_coverage((q.sparql for q in load_dataset(questions).questions), ck25.endpoint)
    assert coverage is not None and len(coverage.checked) == 40 and coverage.missing == [] and not coverage.poor


# -- 2. validate never reports success for what it did not check ---------------------------------------


def test_validate_defaults_to_the_demo_graph(tmp_path: Path) -> None:
    res = run("validate", "SELECT ?o WHERE { ?s wdt:P31 ?o }", "--json", home=tmp_path)
    report = json.loads(res.stdout)
    assert report["query"].startswith(f"PREFIX wdt: <{DEMO_WDT}>\n"), report["query"]


def test_validate_refuses_a_file_that_is_no_void_description(tmp_path: Path, data_dir: Path) -> None:
    notvoid = tmp_path / "notvoid.ttl"
    notvoid.write_text("@prefix pv: <http://ld.company.org/prod-vocab/> .\npv:Employee a <http://www.w3.org/2002/07/owl#Class> .\n")
    query = "PREFIX pv: <http://ld.company.org/prod-vocab/> SELECT ?e WHERE { ?e a pv:Employe }"
    for void in (notvoid, data_dir / "ck25" / "prod-vocab.ttl"):
        res = run("validate", query, "--void", str(void), home=tmp_path)
        assert res.returncode == 1 and "ok" not in res.stdout
        assert error_lines(res.stderr) == [
            f"error: {void} is not a VoID description: it has no void:classPartition or void:propertyPartition"
        ]


def test_validate_ok_and_exit_code_agree(tmp_path: Path) -> None:
    only_repaired = run("validate", "SELECT ?o WHERE { ?s wdt:P31 ?o }", "--json", home=tmp_path)
    assert json.loads(only_repaired.stdout)["ok"] is True and only_repaired.returncode == 0
    wrong = run("validate", "SELECT ?o WHERE { ?s wdt:P31 ?o . ?o a wd:Q999999 }", "--json", home=tmp_path)
    assert json.loads(wrong.stdout)["ok"] is False and wrong.returncode == 1


# -- 3. one literal, one value --------------------------------------------------------------------------


@pytest.mark.data
def test_a_typed_count_matches_its_plain_gold_in_every_metric(data_dir: Path, ck25: KnowledgeGraph) -> None:
    q9 = next(q for q in load_dataset(data_dir / "ck25" / "questions.yml").questions if q.id == "ck25:9-en")
    assert q9.gold_results is not None and q9.sparql is not None
    result = ck25.endpoint.query(q9.sparql)
    assert result.table is not None
    predicted = result.table.to_sparql_json()
    cell = predicted["results"]["bindings"][0]["result"]
    assert (cell["value"], cell["datatype"]) == ("3", "http://www.w3.org/2001/XMLSchema#integer")
    s = score(q9.gold_results, predicted)
    assert (s.row_f1, s.row_em, s.set_f1, s.superset) == (1.0, 1.0, 1.0, 1.0)


# -- 4. MCP get_entity accepts a name ---------------------------------------------------------------------


def test_mcp_get_entity_resolves_a_name_and_says_so(settings: Settings, tiny: KnowledgeGraph) -> None:
    async def body(client: Client) -> None:
        page = await client.call_tool("get_entity", {"id": "Alice Wunderlich"})
        text = text_of(page)
        assert not page.is_error, text
        assert text.startswith("'Alice Wunderlich' resolved to ex:alice (Alice Wunderlich) by name search\n")
        assert "ex:bob (Bob Baumeister)" in text
        by_id = await client.call_tool("get_entity", {"id": "ex:alice"})
        assert not by_id.is_error and "resolved to" not in text_of(by_id)

    with background(create_app(settings, ServeConfig(), kgs={"tiny": tiny})) as url:
        run_mcp(url + "/mcp", body)


# -- 5. /api/info without file paths off loopback; SELECT * keeps the query's order -----------------------


def test_api_info_hides_file_paths_unless_on_loopback(settings: Settings, tiny: KnowledgeGraph, tiny_path: Path) -> None:
    from fastapi.testclient import TestClient

    with TestClient(app_for(settings, tiny, host="0.0.0.0")) as client:
        kgs = client.get("/api/info").json()["kgs"]
    assert kgs == [{"name": "tiny", "description": f"{tiny.extra['triples']} triples"}]
    with TestClient(app_for(settings, tiny)) as client:
        local = client.get("/api/info").json()["kgs"]
    assert str(tiny_path) in local[0]["description"]


def test_select_star_keeps_the_querys_variable_order(tmp_path: Path, tiny: KnowledgeGraph, tiny_path: Path) -> None:
    query = "PREFIX ex: <http://example.org/tiny/> SELECT * WHERE { ?z ex:manager ?b . ?z ex:age ?a } ORDER BY ?a"
    assert tiny.endpoint.query(query).table.vars == ["z", "b", "a"]  # type: ignore[union-attr]
    csv_out = run("sparql", query, "--kg", str(tiny_path), "-f", "csv", home=tmp_path)
    assert csv_out.stdout.splitlines() == [
        "z,b,a",
        "http://example.org/tiny/carol,http://example.org/tiny/bob,29",
        "http://example.org/tiny/alice,http://example.org/tiny/bob,34",
    ]
