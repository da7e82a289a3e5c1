"""Dataset loaders on the real benchmark files (skipped when ../shared/data is absent) and small fixtures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sparqlnav.datasets import DatasetFormatError, load_dataset, rows_to_results

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPARQLNAV_DATA", REPO.parent / "shared" / "data"))


def data_file(relative: str) -> Path:
    path = DATA / relative
    if not path.is_file():
        pytest.skip(f"benchmark data not available: {path}")
    return path


@pytest.mark.data
def test_qald10() -> None:
    ds = load_dataset(data_file("qald10/qald_10.json"))
    assert (ds.format, ds.name, len(ds)) == ("qald", "qald-X", 394)
    first = ds.questions[0]
    assert first.id == "0"
    assert first.question == "After whom is the Riemannian geometry named?"
    assert first.sparql is not None and first.sparql.endswith(
        "SELECT DISTINCT ?result WHERE { wd:Q761383 wdt:P138 ?result. }"
    )
    assert first.gold_results == {
        "head": {"vars": ["result"]},
        "results": {
            "bindings": [
                {"result": {"type": "uri", "value": "http://www.wikidata.org/entity/Q42299"}}
            ]
        },
    }
    assert not first.gold_values_only
    assert sum("boolean" in (q.gold_results or {}) for q in ds) == 61
    assert sum("aggregation" in q.tags for q in ds) == 102
    german = load_dataset(data_file("qald10/qald_10.json"), language="de")
    assert german.questions[0].question == "Nach wem ist die Riemannsche Geometrie benannt?"
    assert german.questions[0].language == "de"


@pytest.mark.data
def test_bestiary() -> None:
    ds = load_dataset(data_file("bestiary/beastiary_with_qald_format.json"))
    assert (ds.format, ds.name, len(ds)) == ("qald", "bestiary", 100)
    by_id = {q.id: q for q in ds}
    q57 = by_id["57"]
    assert (
        q57.question
        == "what is the maximum combat maneuver defense level for creatures with neutral good alignment?"
    )
    assert q57.gold_results is not None
    assert q57.gold_results["results"]["bindings"] == [
        {
            "result": {
                "datatype": "http://www.w3.org/2001/XMLSchema#integer",
                "type": "literal",
                "value": "97",
            }
        }
    ]
    assert by_id["99"].sparql is not None and by_id["99"].sparql.startswith("ASK WHERE")
    # 31 plain ASK answers, and 2 (ids 42 and 68) that the file wraps inside `bindings`
    assert sum("boolean" in (q.gold_results or {}) for q in ds) == 33
    assert by_id["42"].gold_results == {"head": {}, "boolean": False}
    assert by_id["68"].gold_results == {"head": {}, "boolean": True}


@pytest.mark.data
def test_ck25_with_gold_value_sets() -> None:
    ds = load_dataset(data_file("ck25/questions.yml"))
    assert (ds.format, ds.name, len(ds)) == (
        "text2sparql",
        "https://text2sparql.aksw.org/2025/corporate/",
        50,
    )
    by_id = {q.id: q for q in ds}
    q1 = by_id["ck25:1-en"]
    assert q1.question == "In which department is Ms. Brant?"
    assert q1.tags == ("SELECT",)
    assert q1.gold_values_only
    assert q1.gold_results == {
        "head": {"vars": ["result"]},
        "results": {
            "bindings": [
                {
                    "result": {
                        "type": "uri",
                        "value": "http://ld.company.org/prod-instances/dept-73191",
                    }
                }
            ]
        },
    }
    assert by_id["ck25:4-en"].gold_results["results"]["bindings"] == [  # type: ignore[index]
        {"result": {"type": "literal", "value": "Sabrina.Geiger@company.org"}}
    ]
    assert by_id["ck25:9-en"].tags == ("SELECT", "COUNT")
    assert by_id["ck25:16-en"].gold_results == {"head": {}, "boolean": True}
    assert by_id["ck25:33-en"].gold_results == {"head": {}, "boolean": False}
    assert by_id["ck25:25-en"].gold_results == {
        "head": {"vars": ["result"]},
        "results": {"bindings": []},
    }
    assert all(q.gold_results is not None for q in ds)


@pytest.mark.data
def test_text2sparql_other_language_and_explicit_gold(tmp_path: Path) -> None:
    db25 = load_dataset(data_file("ck25/dbpedia_questions_db25.yaml"), language="es")
    assert len(db25) == 100
    assert db25.questions[0].id == "db25:1-es"
    assert db25.questions[0].question.startswith("¿Cuántos autores únicos")
    assert db25.questions[0].gold_results is None  # no db25 gold file next to it
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps({"db25:1-es": {"42": 1}}))
    with_gold = load_dataset(
        data_file("ck25/dbpedia_questions_db25.yaml"), language="es", gold_path=gold
    )
    assert with_gold.questions[0].gold_results == {
        "head": {"vars": ["result"]},
        "results": {"bindings": [{"result": {"type": "literal", "value": "42"}}]},
    }


@pytest.mark.data
@pytest.mark.parametrize(
    ("name", "count", "first_id", "fmt"),
    [
        (
            "spinach_test.json",
            165,
            "711f2f46b2bdc79ff326cf2fed9b9a7b118dedf6bad7d176f99a2f4e7d060b72",
            "spinach",
        ),
        ("spinach_dev.json", 155, "dev_3", "spinach"),
        ("qald10_test.json", 394, "0", "plain"),
        ("wikiwebquestions_dev.json", 454, "WebQTrn-3129", "plain"),
    ],
)
def test_spinach_sets(name: str, count: int, first_id: str, fmt: str) -> None:
    ds = load_dataset(data_file(f"spinach/{name}"))
    assert (ds.format, len(ds), ds.questions[0].id) == (fmt, count, first_id)
    assert all(q.sparql and q.question for q in ds)
    assert all(q.gold_results is None for q in ds)


@pytest.mark.data
def test_spinach_dev_fields() -> None:
    q = load_dataset(data_file("spinach/spinach_dev.json")).questions[0]
    assert q.question.startswith("Which items have an official website containing 'itch.io'")
    assert q.sparql is not None and "wdt:P856" in q.sparql


@pytest.mark.data
def test_spinach_agent_output_gold_rows() -> None:
    ds = load_dataset(data_file("spinach/qald7_spinach_output_test.json"))
    assert (ds.format, len(ds)) == ("spinach-output", 45)
    first = ds.questions[0]
    assert first.question == "Give me all cosmonauts."
    assert first.gold_results is not None and first.gold_results["head"]["vars"] == ["uri"]
    assert sum("boolean" in (q.gold_results or {}) for q in ds) == 8


@pytest.mark.data
def test_unknown_format_is_a_clear_error() -> None:
    # SPINACH's subj_obj test cases are queries with property lists, not a question set.
    with pytest.raises(
        DatasetFormatError, match=r"unrecognised dataset format .*keys \['properties', 'query'\]"
    ):
        load_dataset(data_file("spinach/metric_cases_subj_obj.json"))


def test_plain_jsonl_and_json(tmp_path: Path) -> None:
    gold = {
        "head": {"vars": ["x"]},
        "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}]},
    }
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text(
        json.dumps(
            {
                "question": "How many?",
                "sparql": "SELECT (1 AS ?x) {}",
                "gold": gold,
                "tags": ["count"],
            }
        )
        + "\n\n"
        + json.dumps({"id": "b", "question": "Is it?", "query": "ASK {}", "language": "de"})
        + "\n"
    )
    ds = load_dataset(jsonl)
    assert ds.format == "plain" and ds.name == "q"
    assert [(q.id, q.question, q.sparql, q.tags, q.language) for q in ds] == [
        ("0", "How many?", "SELECT (1 AS ?x) {}", ("count",), "en"),
        ("b", "Is it?", "ASK {}", (), "de"),
    ]
    assert ds.questions[0].gold_results == gold and ds.questions[1].gold_results is None
    as_json = tmp_path / "q.json"
    as_json.write_text(
        json.dumps(
            [{"question": "Q?", "sparql": "SELECT * {}", "results": {"head": {}, "boolean": True}}]
        )
    )
    assert load_dataset(as_json).questions[0].gold_results == {"head": {}, "boolean": True}


def test_text2sparql_yaml_fixture_finds_gold_by_prefix(tmp_path: Path) -> None:
    (tmp_path / "toy.yml").write_text(
        "dataset:\n  id: urn:toy\n  prefix: toy\nquestions:\n"
        "  - id: 1\n    question:\n      en: Any cats?\n    features: [ASK]\n"
        "    query:\n      sparql: |\n        PREFIX : <urn:x:>\n        ASK { ?c a :Cat }\n"
        "  - id: 2\n    question:\n      en: Which cats?\n      fr: Quels chats ?\n"
        "    query:\n      sparql: SELECT ?c WHERE { ?c a <urn:x:Cat> }\n"
    )
    (tmp_path / "toy_true_result_set.json").write_text(
        json.dumps({"toy:1-en": {"true": 1}, "toy:2-en": {"urn:x:tom": 1, "Felix": 1}})
    )
    ds = load_dataset(tmp_path / "toy.yml")
    assert [q.id for q in ds] == ["toy:1-en", "toy:2-en"]
    assert ds.questions[0].gold_results == {"head": {}, "boolean": True}
    assert ds.questions[1].gold_results == {
        "head": {"vars": ["result"]},
        "results": {
            "bindings": [
                {"result": {"type": "uri", "value": "urn:x:tom"}},
                {"result": {"type": "literal", "value": "Felix"}},
            ]
        },
    }
    french = load_dataset(tmp_path / "toy.yml", language="fr")
    assert [(q.id, q.question, q.gold_results) for q in french] == [
        ("toy:2-fr", "Quels chats ?", None)
    ]


def test_format_errors(tmp_path: Path) -> None:
    bad_jsonl = tmp_path / "bad.jsonl"
    bad_jsonl.write_text('{"question": "a", "sparql": "ASK {}"}\n{"question": oops}\n')
    with pytest.raises(DatasetFormatError, match=r"bad\.jsonl:2: not valid JSON"):
        load_dataset(bad_jsonl)
    numbers = tmp_path / "numbers.json"
    numbers.write_text("[1, 2, 3]")
    with pytest.raises(DatasetFormatError, match="top level is a list of int"):
        load_dataset(numbers)
    with pytest.raises(DatasetFormatError, match="cannot read"):
        load_dataset(tmp_path / "missing.json")


def test_rows_to_results() -> None:
    rows = [
        {"a": {"type": "uri", "value": "x"}},
        {"b": {"type": "uri", "value": "y"}, "a": {"type": "uri", "value": "z"}},
    ]
    assert rows_to_results(rows) == {"head": {"vars": ["a", "b"]}, "results": {"bindings": rows}}
    assert rows_to_results(False) == {"head": {}, "boolean": False}
    assert rows_to_results(None) is None



def test_demo_questions_load_with_their_answers_as_gold_values() -> None:
    from sparqlnav.graph.opening import demo_path

    ds = load_dataset(demo_path().with_name("questions.json"))
    assert len(ds) == 30 and ds.format == "plain"
    by_id = {q.id: q for q in ds}
    assert by_id["demo-07"].gold_results == {"head": {}, "boolean": True}
    gold = by_id["demo-01"].gold_results
    assert gold is not None and by_id["demo-01"].gold_values_only
    assert {b["result"]["value"] for b in gold["results"]["bindings"]} == {
        "https://demo.sparqlnav.org/entity/Q1010",
        "https://demo.sparqlnav.org/entity/Q1011",
    }
