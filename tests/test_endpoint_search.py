"""Big endpoints (issue 16): names searched on the endpoint itself, nothing downloaded. A private Virtuoso holds
CK25 and BESTIARY (tests/virtuoso.py); Oxigraph served over HTTP stands for an endpoint without a text index."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from bare_oxigraph import BareOxigraph
from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.datasets import load_dataset
from sparqlnav.evaluation.metrics import set_match
from sparqlnav.graph.endpoint import Outcome, RemoteEndpoint
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.names import LabelIndex
from sparqlnav.graph.opening import index_remote_names, open_kg, remote_dir
from sparqlnav.graph.search import EndpointNames, TextSearch
from sparqlnav.graph.store import ensure_store, rdf_files
from sparqlnav.settings import Settings
from sparqlnav.sparql.check import validate
from sparqlnav.strategies.lexical import LexicalStrategy
from sparqlnav.tools.lookup import search
from sparqlnav.trace import Trace
from test_explore import CK25_RUNS, ask, values
from virtuoso import Virtuoso

pytestmark = [pytest.mark.slow, pytest.mark.data]

CK25_GRAPH = "urn:sparqlnav:ck25"
BESTIARY_GRAPH = "urn:sparqlnav:bestiary"
PI = "http://ld.company.org/prod-instances/"
HOCH = PI + "empl-Heinrich.Hoch%40company.org"


@pytest.fixture(scope="module")
def virtuoso(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Virtuoso]:
    """One private Virtuoso with CK25 and BESTIARY in named graphs, text index on."""
    with Virtuoso(
        tmp_path_factory.mktemp("virtuoso"), data_dirs=[data_dir / "ck25", data_dir / "bestiary"]
    ) as server:
        server.load([data_dir / "ck25" / "prod-inst.ttl"], graph=CK25_GRAPH)
        server.load([data_dir / "bestiary" / "beastiary_kg.rdf"], graph=BESTIARY_GRAPH)
        yield server


def large(home: Path) -> Settings:
    """Settings under which every endpoint counts as large (threshold set low)."""
    return Settings.from_env({"SPARQLNAV_HOME": str(home), "SPARQLNAV_NAME_INDEX_MAX_TRIPLES": "1000"})


@pytest.fixture(scope="module")
def ck25_virtuoso(virtuoso: Virtuoso, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeGraph]:
    """CK25 on Virtuoso, opened as a large endpoint."""
    home = tmp_path_factory.mktemp("home-large")
    with open_kg(f"{virtuoso.url}?default-graph-uri={CK25_GRAPH}", large(home)) as kg:
        kg.extra["home"] = home
        yield kg


def test_first_search_is_on_the_endpoint_fast_and_downloads_nothing(ck25_virtuoso: KnowledgeGraph) -> None:
    kg = ck25_virtuoso
    assert isinstance(kg.names, EndpointNames) and kg.names.engine is TextSearch.VIRTUOSO
    start = time.monotonic()
    found = search(kg, "Heinrich Hoch")
    seconds = time.monotonic() - start
    print(f"\nfirst search on Virtuoso: {seconds:.3f} s")
    assert seconds < 3.0
    assert found.entities[0].iri == HOCH and found.note == ""
    home = kg.extra["home"]
    assert isinstance(home, Path)
    folder = remote_dir(kg.name, large(home))
    assert sorted(p.name for p in folder.iterdir()) == ["endpoint.json"]  # no names file
    profile = json.loads((folder / "endpoint.json").read_text())
    assert (profile["search"], profile["triples"], profile["size_from"]) == ("virtuoso", 26903, "count")


def test_typos_are_found_through_prefix_wildcards(ck25_virtuoso: KnowledgeGraph) -> None:
    assert search(ck25_virtuoso, "Hienrich Hock").entities[0].iri == HOCH


def test_properties_and_labels_come_from_the_endpoint(ck25_virtuoso: KnowledgeGraph) -> None:
    props = search(ck25_virtuoso, "has manager").properties
    assert props[0].iri == "http://ld.company.org/prod-vocab/hasManager"
    assert ck25_virtuoso.names.labels_of([HOCH, PI + "nothing"]) == {HOCH: "Heinrich Hoch"}


def test_virtuoso_quirks(ck25_virtuoso: KnowledgeGraph, virtuoso: Virtuoso) -> None:
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    # default-graph-uri in the URL survives GET (the default graph alone also holds Virtuoso's system graphs).
    assert ck25_virtuoso.endpoint.query(count).table.rows[0]["n"].value == "26903"  # type: ignore[union-attr]
    with RemoteEndpoint(virtuoso.url) as bare:
        assert int(bare.query(count).table.rows[0]["n"].value) > 26903 + 98070  # type: ignore[union-attr]
        wrong = bare.query("SELECT ?s WHERE { ?s ?p }")
        assert wrong.outcome is Outcome.SYNTAX_ERROR and "SPARQL query:" not in wrong.message
        assert "syntax error" in wrong.message
        huge = bare.query("SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }")
        assert huge.outcome is Outcome.TIMEOUT and "estimated execution time" in huge.message
        # Virtuoso cuts at its ResultSetMaxRows (10000) without an error: the cut must not be silent.
        many = bare.query("SELECT ?s WHERE { ?s ?p ?o } LIMIT 20000")
        assert many.table is not None and len(many.table.rows) == 10000
        assert many.table.truncated and "endpoint's row limit (10000" in (many.table.cap or "")


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the telephone of Baldwin Dirksen?", {"+49-6200-33069465"}),
        ("Who is the manager of Heinrich Hoch?", {PI + "empl-Waldtraud.Kuttner%40company.org"}),
        ("Which department is responsible for the Sensor Switch M558-2275045?", {PI + "dept-41622"}),
    ],
)
def test_lexical_answers_over_virtuoso(ck25_virtuoso: KnowledgeGraph, question: str, expected: set[str]) -> None:
    answer = LexicalStrategy(budget_s=60.0).run(question, ck25_virtuoso, Trace())
    assert answer.status == "answered" and answer.results is not None
    assert {t.value for t in answer.results.values()} == expected


def _full_iris(reply: Reply) -> Reply:
    """The CK25 script with its prefixed names written out (a remote endpoint declares no prefixes)."""

    def full(value: object) -> object:
        if not isinstance(value, str):
            return value
        value = re.sub(r"prodi:([\w.%-]+)", r"<http://ld.company.org/prod-instances/\1>", value)
        return re.sub(r"pv:(\w+)", r"<http://ld.company.org/prod-vocab/\1>", value)

    calls = [
        Call(c.name, {k: full(v) for k, v in c.arguments.items()} if isinstance(c.arguments, dict) else c.arguments)
        for c in reply.tool_calls
    ]
    return replace(reply, tool_calls=calls)


@pytest.mark.parametrize("qid", [1, 2, 3])
def test_explore_answers_ck25_questions_1_to_3_over_virtuoso(
    qid: int, scripted_llm: ScriptedLLM, ck25_virtuoso: KnowledgeGraph, data_dir: Path
) -> None:
    question, script = CK25_RUNS[qid]
    gold = json.loads((data_dir / "ck25" / "ck25_true_result_set.json").read_text(encoding="utf-8"))
    answer = ask(scripted_llm, ck25_virtuoso, question, [_full_iris(r) for r in script])
    assert answer.status == "answered"
    assert values(answer) == set(gold[f"ck25:{qid}-en"])


# ------------------------------------------------------------------- an endpoint without a text index


@pytest.fixture(scope="module")
def oxigraph_ck25(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """CK25 served by Oxigraph over HTTP: no text index."""
    folder = tmp_path_factory.mktemp("ox")
    server = BareOxigraph(ensure_store(rdf_files(data_dir / "ck25" / "prod-inst.ttl"), folder).data_dir)
    server.ensure_running()
    yield server.url
    server.stop()


def test_no_text_index_falls_back_to_a_bounded_scan_that_says_so(oxigraph_ck25: str, tmp_path: Path) -> None:
    with open_kg(oxigraph_ck25, large(tmp_path)) as kg:
        assert isinstance(kg.names, EndpointNames) and kg.names.engine is TextSearch.CONTAINS
        found = search(kg, "Heinrich Hoch")
        assert found.entities[0].iri == HOCH
        assert "search is degraded" in found.note and "CONTAINS" in found.note
        assert "Note: search is degraded" in found.to_text(kg) and "degraded" in kg.description
        assert search(kg, "Hienrich Hock").entities[0].iri == HOCH  # transposed prefixes, scanned
        assert not (remote_dir(oxigraph_ck25, large(tmp_path)) / "labels.sqlite").exists()


def test_small_endpoints_still_get_a_local_index_and_index_names_builds_one(oxigraph_ck25: str, tmp_path: Path) -> None:
    small = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "small")})
    with open_kg(oxigraph_ck25, small) as kg:
        assert isinstance(kg.names, LabelIndex) and search(kg, "Heinrich Hoch").entities[0].iri == HOCH
    path, problem = index_remote_names(oxigraph_ck25, large(tmp_path / "big"))
    assert problem == "" and path.name == "labels.sqlite"
    with open_kg(oxigraph_ck25, large(tmp_path / "big")) as kg:
        assert isinstance(kg.names, LabelIndex)  # an index built on request is used, whatever the size


# ------------------------------------------------------------------- BESTIARY's Virtuoso-only gold queries


ONT = "http://www.semanticweb.org/annab/ontologies/2022/3/ontology#"
# The variable each grouped gold query projects without grouping or aggregating it (what the checker flags).
UNGROUPED = {"32": "creatures", "33": "HP", "35": "XP", "37": "elementals", "38": "creatures"}


def _rows(table: object) -> list[tuple[str, ...]]:
    """The lexical values of each row of a SPARQL JSON result."""
    assert isinstance(table, dict)
    return [tuple(term["value"] for term in row.values()) for row in table["results"]["bindings"]]


def test_bestiary_virtuoso_extension_gold_queries_on_virtuoso(virtuoso: Virtuoso, data_dir: Path) -> None:
    """The gold queries our checker names as Virtuoso extensions, run on the installed Virtuoso. Measured (7.2.5
    from Debian 12, and 7.2.12 from Debian 13 run by hand with the same results): 7 are marked; Virtuoso rejects 2
    (SP031) and none of the 5 it runs reproduces the published gold. The cause is not our loading (98,070 triples,
    as in the file) nor a Virtuoso setting: the gold was computed with SPARQL 1.1's SAMPLE for the ungrouped
    variable (what rdflib does implicitly) and with exact decimal division at 28 digits (Python's `decimal`, which
    rdflib uses), while Virtuoso groups the ungrouped variable too and divides integers as integers. Written with
    SAMPLE, the 5 grouped queries reproduce the gold on Virtuoso; the 2 divisions count the same numbers."""
    dataset = load_dataset(data_dir / "bestiary" / "beastiary_with_qald_format.json")
    version = virtuoso.version()
    print(f"\nVirtuoso {version}")
    marked: list[str] = []
    rejected: list[str] = []
    rows: dict[str, list[tuple[str, ...]]] = {}
    exact: list[str] = []
    with_sample: list[str] = []
    counts: dict[str, tuple[int, int]] = {}
    with RemoteEndpoint(f"{virtuoso.url}?default-graph-uri={BESTIARY_GRAPH}") as endpoint:
        size = endpoint.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        assert size.table is not None and _rows(size.table.to_sparql_json()) == [("98070",)]  # all of the file
        for q in dataset.questions:
            assert q.sparql is not None
            syntax = [i for i in validate(q.sparql, None).issues if i.kind == "syntax"]
            if not syntax or "Virtuoso" not in syntax[0].message:
                continue
            marked.append(q.id)
            assert q.gold_results is not None
            result = endpoint.query(q.sparql)
            if result.outcome is Outcome.SYNTAX_ERROR:
                assert "SP031" in result.message  # Virtuoso's own "not mentioned in GROUP BY"
                rejected.append(q.id)
            else:
                assert result.ok and result.table is not None, result.describe()
                rows[q.id] = _rows(result.table.to_sparql_json())
                if set_match(q.gold_results, result.table.to_sparql_json()).f1 == 1.0:
                    exact.append(q.id)
            if q.id in UNGROUPED:  # the same query with SAMPLE around the ungrouped variable
                var = UNGROUPED[q.id]
                sampled = re.sub(rf"SELECT (DISTINCT )?\?{var}\b", rf"SELECT \1(SAMPLE(?{var}) AS ?sampled)", q.sparql)
                assert sampled != q.sparql
                again = endpoint.query(sampled)
                assert again.ok and again.table is not None, again.describe()
                if set_match(q.gold_results, again.table.to_sparql_json()).f1 == 1.0:
                    with_sample.append(q.id)
            else:  # the percentages: count numerator and denominator instead of dividing them
                parts = re.sub(
                    r"SELECT \(\((\w+\(\?\w+\))/\?n_creatures\)\*100 as \?creatures_perc\)",
                    r"SELECT (\1 AS ?k) (MAX(?n_creatures) AS ?n)",
                    q.sparql,
                )
                assert parts != q.sparql
                counted = endpoint.query(parts)
                assert counted.table is not None, counted.describe()
                [(k, n)] = _rows(counted.table.to_sparql_json())
                counts[q.id] = (int(k), int(n))
    print(f"BESTIARY on Virtuoso {version}: {len(marked)} marked as Virtuoso extensions, {len(rejected)} rejected,"
          f" {len(rows)} run, {len(exact)} reproduce the gold as written, {len(with_sample)} with SAMPLE; {counts}")
    assert marked == ["32", "33", "35", "37", "38", "70", "80"]
    assert rejected == ["33", "35"] and exact == [], version
    # Virtuoso keeps every member of each kept group: supersets of the gold (9 vs 3, 24 vs 8, 27 vs 2 rows) ...
    gold = {q.id: _rows(q.gold_results) for q in dataset.questions if q.id in rows}
    assert {i: (len(rows[i]), len(gold[i])) for i in ("32", "37", "38")} == {"32": (9, 3), "37": (24, 8), "38": (27, 2)}
    assert all(set(gold[i]) < set(rows[i]) for i in ("32", "37", "38"))
    assert (ONT + "Gynosphinx",) in rows["32"] and (ONT + "Gynosphinx",) not in gold["32"]  # speed 40, like Androsphinx
    # ... while the gold is one member per group: SAMPLE reproduces all five grouped queries, on Virtuoso too.
    assert with_sample == ["32", "33", "35", "37", "38"], version
    # The percentages: Virtuoso's integer division gives 0; the gold is the exact quotient of the same counts at
    # 28 significant digits, Python's decimal default (12/565 and 11/14).
    assert rows["70"] == rows["80"] == [("0",)]
    assert counts == {"70": (12, 565), "80": (11, 14)}
    for i, (k, n) in counts.items():
        assert [(str(Decimal(k) / Decimal(n) * 100),)] == gold[i]


def test_cli_index_names_builds_the_local_index(oxigraph_ck25: str, tmp_path: Path) -> None:
    from test_cli import run

    done = run("index", "--kg", oxigraph_ck25, "--names", "--json", home=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["complete"] is True and Path(summary["names_index"]).name == "labels.sqlite"
    assert LabelIndex(Path(summary["names_index"])).search("Heinrich Hoch")[0].iri == HOCH
    refused = run("index", "--kg", "demo", "--names", home=tmp_path)
    assert refused.returncode != 0 and "--names is for SPARQL endpoints" in refused.stderr
