"""Checks of the bundled demo knowledge graph (src/sparqlnav/data/demo) on a real Oxigraph store."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import defaultdict
from importlib.resources import files
from pathlib import Path
from types import ModuleType
from typing import Any

import pyoxigraph as ox
import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "scripts" / "build_demo_kg.py"
DEMO = files("sparqlnav").joinpath("data/demo")

ENTITY = "https://demo.sparqlnav.org/entity/"
WDT = "https://demo.sparqlnav.org/prop/direct/"
P = "https://demo.sparqlnav.org/prop/"
PS = "https://demo.sparqlnav.org/prop/statement/"
PQ = "https://demo.sparqlnav.org/prop/qualifier/"
WDS = "https://demo.sparqlnav.org/entity/statement/"
WIKIBASE = "http://wikiba.se/ontology#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
DESCRIPTION = "http://schema.org/description"
ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"

Q_IRI = re.compile(re.escape(ENTITY) + r"Q[0-9]+$")
P_LOCAL = re.compile(r"P[0-9]+$")


@pytest.fixture(scope="module")
def ttl_bytes() -> bytes:
    return DEMO.joinpath("demo.ttl").read_bytes()


@pytest.fixture(scope="module")
def store(ttl_bytes: bytes) -> ox.Store:
    st = ox.Store()
    st.load(ttl_bytes, format=ox.RdfFormat.TURTLE)
    return st


@pytest.fixture(scope="module")
def quads(store: ox.Store) -> list[ox.Quad]:
    return list(store)


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    data = json.loads(DEMO.joinpath("questions.json").read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_demo_kg", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def _value(term: Any) -> str:
    return str(term.value)


def _select(store: ox.Store, sparql: str) -> list[ox.QuerySolution]:
    result = store.query(sparql)
    assert isinstance(result, ox.QuerySolutions)
    return list(result)


def test_triple_count_in_range(store: ox.Store) -> None:
    assert 3000 <= len(store) <= 6000


def test_generator_reproduces_file_byte_for_byte(tmp_path: Path, ttl_bytes: bytes) -> None:
    builder = _load_builder()
    out = tmp_path / "demo.ttl"
    assert builder.main(["--out", str(out)]) == 0
    assert out.read_bytes() == ttl_bytes


def test_header_and_prefixes(ttl_bytes: bytes) -> None:
    text = ttl_bytes.decode("utf-8")
    assert text.startswith("# sparqlnav demo knowledge graph")
    assert "CC0" in text.split("@prefix", 1)[0]
    for prefix, iri in (
        ("wd", ENTITY),
        ("wdt", WDT),
        ("p", P),
        ("ps", PS),
        ("pq", PQ),
        ("wds", WDS),
    ):
        assert f"@prefix {prefix}: <{iri}> ." in text


def test_every_entity_has_one_english_label_and_a_description(quads: list[ox.Quad]) -> None:
    entities: set[str] = set()
    labels: dict[str, list[ox.Literal]] = defaultdict(list)
    descriptions: dict[str, list[ox.Literal]] = defaultdict(list)
    for q in quads:
        for term in (q.subject, q.object):
            if isinstance(term, ox.NamedNode) and Q_IRI.match(term.value):
                entities.add(term.value)
        if q.predicate.value == LABEL:
            assert isinstance(q.object, ox.Literal)
            labels[_value(q.subject)].append(q.object)
        elif q.predicate.value == DESCRIPTION:
            assert isinstance(q.object, ox.Literal)
            descriptions[_value(q.subject)].append(q.object)
    assert len(entities) > 400
    for entity in sorted(entities):
        assert [lit.language for lit in labels[entity]] == ["en"], entity
        assert [lit.language for lit in descriptions[entity]] == ["en"], entity
        assert descriptions[entity][0].value.strip(), entity


def test_all_aliases_are_english(quads: list[ox.Quad]) -> None:
    aliases = [q.object for q in quads if q.predicate.value == ALT_LABEL]
    assert len(aliases) > 300
    assert all(isinstance(a, ox.Literal) and a.language == "en" for a in aliases)


def test_objects_of_direct_claims_have_labels(store: ox.Store) -> None:
    rows = _select(
        store,
        f"""
        SELECT DISTINCT ?o WHERE {{
          ?s ?p ?o .
          FILTER(STRSTARTS(STR(?p), "{WDT}") && isIRI(?o))
          FILTER NOT EXISTS {{ ?o <{LABEL}> ?label }}
        }}""",
    )
    assert rows == []


def test_used_properties_are_declared(store: ox.Store, quads: list[ox.Quad]) -> None:
    used = {q.predicate.value.removeprefix(WDT) for q in quads if q.predicate.value.startswith(WDT)}
    used |= {q.predicate.value.removeprefix(PQ) for q in quads if q.predicate.value.startswith(PQ)}
    assert {"P31", "P61", "P246", "P1086", "P2067", "P575", "P166", "P585"} <= used
    for pid in sorted(used):
        declared = store.query(f"""
            ASK {{
              <{ENTITY}{pid}> a <{WIKIBASE}Property> ;
                  <{LABEL}> ?label ;
                  <{WIKIBASE}propertyType> ?type ;
                  <{WIKIBASE}directClaim> <{WDT}{pid}> ;
                  <{WIKIBASE}claim> <{P}{pid}> ;
                  <{WIKIBASE}statementProperty> <{PS}{pid}> ;
                  <{WIKIBASE}qualifier> <{PQ}{pid}> .
            }}""")
        assert bool(declared), pid


def test_statements_match_direct_claims(quads: list[ox.Quad]) -> None:
    direct: dict[tuple[str, str], set[str]] = defaultdict(set)
    statement_of: dict[str, tuple[str, str]] = {}
    statement_values: dict[str, list[str]] = defaultdict(list)
    for q in quads:
        pred = q.predicate.value
        if pred.startswith(WDT):
            direct[(_value(q.subject), pred.removeprefix(WDT))].add(str(q.object))
        elif pred.startswith(PS):
            statement_values[_value(q.subject)].append(str(q.object))
        elif pred.startswith(P) and P_LOCAL.match(pred.removeprefix(P)):
            node = _value(q.object)
            assert node not in statement_of, "statement node reused"
            assert node.startswith(WDS)
            statement_of[node] = (_value(q.subject), pred.removeprefix(P))
    assert len(statement_of) > 700
    by_claim: dict[tuple[str, str], set[str]] = defaultdict(set)
    for node, (subject, pid) in statement_of.items():
        ps_values = statement_values[node]
        assert len(ps_values) == 1, node
        assert ps_values[0] in direct[(subject, pid)], (node, ps_values[0])
        by_claim[(subject, pid)].add(ps_values[0])
    # every statement is best rank, so statements and truthy claims agree value for value
    for claim, values in by_claim.items():
        assert values == direct[claim], claim
    assert set(statement_values) == set(statement_of)


def test_qualifiers_hang_off_statements(store: ox.Store) -> None:
    rows = _select(
        store,
        f"""
        SELECT ?st WHERE {{
          ?st ?pq ?v .
          FILTER(STRSTARTS(STR(?pq), "{PQ}"))
          FILTER NOT EXISTS {{ ?s ?p ?st }}
        }}""",
    )
    assert rows == []
    counts = {
        str(row["p"].value): int(row["n"].value)
        for row in _select(
            store,
            f"""
            SELECT ?p (COUNT(*) AS ?n) WHERE {{
              ?st ?p ?v . FILTER(STRSTARTS(STR(?p), "{PQ}"))
            }} GROUP BY ?p""",
        )
    }
    assert counts[PQ + "P585"] > 100
    assert counts[PQ + "P276"] > 50


def test_all_118_elements(store: ox.Store) -> None:
    rows = _select(
        store,
        f"""
        SELECT ?e ?z ?symbol WHERE {{
          ?e <{WDT}P31> <{ENTITY}Q201> ;
             <{WDT}P1086> ?z ;
             <{WDT}P246> ?symbol ;
             <{ALT_LABEL}> ?alias .
          FILTER(STR(?alias) = STR(?symbol))
        }}""",
    )
    assert sorted(int(r["z"].value) for r in rows) == list(range(1, 119))
    assert len({r["symbol"].value for r in rows}) == 118
    # element ids are their atomic numbers; the demo questions rely on that
    assert all(r["e"].value == f"{ENTITY}Q{r['z'].value}" for r in rows)


def test_dates_are_xsd_datetime(quads: list[ox.Quad]) -> None:
    date_props = {"P569", "P570", "P575", "P585"}
    seen = 0
    for q in quads:
        pred = q.predicate.value
        local = pred.rsplit("/", 1)[-1]
        if local in date_props and pred.startswith((WDT, PS, PQ)):
            assert isinstance(q.object, ox.Literal)
            assert q.object.datatype.value == "http://www.w3.org/2001/XMLSchema#dateTime"
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T00:00:00Z", q.object.value)
            seen += 1
    assert seen > 400


def test_questions_are_well_formed(questions: list[dict[str, Any]]) -> None:
    assert len(questions) == 30
    assert len({q["id"] for q in questions}) == 30
    for q in questions:
        assert set(q) == {"id", "question", "sparql", "answer", "tags"}, q["id"]
        assert q["question"].strip() and q["tags"] and q["answer"], q["id"]
        assert "SERVICE" not in q["sparql"].upper(), q["id"]
    asked = {q["question"] for q in questions}
    for must in (
        "Who discovered oxygen?",
        "What is the atomic number of gold?",
        "Which element has the symbol W?",
        "How many elements did Humphry Davy discover?",
        "Which noble gas has the highest atomic number?",
        "When did Marie Curie receive the Nobel Prize in Chemistry?",
        "Is helium a noble gas?",
        "Where was Carl Wilhelm Scheele born?",
    ):
        assert must in asked
    tags = {t for q in questions for t in q["tags"]}
    assert {
        "one-hop",
        "reverse",
        "count",
        "superlative",
        "ask",
        "qualifier",
        "two-hop",
        "filter",
    } <= tags


def _run(store: ox.Store, sparql: str) -> list[Any]:
    result = store.query(sparql)
    if isinstance(result, ox.QueryBoolean):
        return [bool(result)]
    assert isinstance(result, ox.QuerySolutions)
    assert len(result.variables) == 1, "demo questions project exactly one variable"
    return sorted(_value(row[0]) for row in result)


def test_question_answers_match_the_graph(store: ox.Store, questions: list[dict[str, Any]]) -> None:
    wrong = {}
    for q in questions:
        got = _run(store, q["sparql"])
        expected = (
            q["answer"] if isinstance(q["answer"][0], bool) else sorted(map(str, q["answer"]))
        )
        if got != expected:
            wrong[q["id"]] = (q["question"], got, expected)
    assert wrong == {}


def test_answers_are_labelled_entities(store: ox.Store, questions: list[dict[str, Any]]) -> None:
    for q in questions:
        for value in q["answer"]:
            if isinstance(value, str) and value.startswith(ENTITY):
                labels = _select(store, f"SELECT ?l WHERE {{ <{value}> <{LABEL}> ?l }}")
                assert len(labels) == 1, (q["id"], value)


def test_periodic_table_positions(store: ox.Store) -> None:
    # element -> (period, group, block) labels, straight from the graph
    rows = _select(
        store,
        f"""
        SELECT ?z ?kind ?label WHERE {{
          ?e <{WDT}P1086> ?z ; <{WDT}P361> ?part .
          ?part <{WDT}P31> ?kind ; <{LABEL}> ?label .
        }}""",
    )
    kind_name = {f"{ENTITY}Q243": "period", f"{ENTITY}Q244": "group", f"{ENTITY}Q245": "block"}
    pos: dict[int, dict[str, str]] = defaultdict(dict)
    for r in rows:
        pos[int(r["z"].value)][kind_name[r["kind"].value]] = r["label"].value
    assert pos[1] == {"period": "period 1", "group": "group 1", "block": "s-block"}
    assert pos[2] == {"period": "period 1", "group": "group 18", "block": "s-block"}
    assert pos[5] == {"period": "period 2", "group": "group 13", "block": "p-block"}
    assert pos[26] == {"period": "period 4", "group": "group 8", "block": "d-block"}
    assert pos[79] == {"period": "period 6", "group": "group 11", "block": "d-block"}
    assert pos[60] == {"period": "period 6", "block": "f-block"}  # no group for f-block rows
    assert pos[57] == {"period": "period 6"}  # La: group and block disputed
    assert pos[104] == {"period": "period 7", "group": "group 4", "block": "d-block"}
    assert pos[118] == {"period": "period 7", "group": "group 18", "block": "p-block"}
    assert sum(1 for p in pos.values() if p.get("group") == "group 18") == 7
