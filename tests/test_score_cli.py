"""`sparqlnav score`: reproduces SPINACH's per-question F1 and reports per-line and overall metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sparqlnav.datasets import rows_to_results
from sparqlnav.evaluation.score import ScoreFileError, score_file
from sparqlnav.faces.cli import app

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPARQLNAV_DATA", REPO.parent / "shared" / "data"))
SPINACH_OUTPUTS = ["qald10_spinach_output_test.json", "qald7_spinach_output_test.json"]


def spinach_output(name: str) -> list[dict[str, Any]]:
    path = DATA / "spinach" / name
    if not path.is_file():
        pytest.skip(f"benchmark data not available: {path}")
    entries: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return entries


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def run_score(*args: str) -> Any:
    return CliRunner().invoke(app, ["score", *args])


@pytest.mark.data
@pytest.mark.parametrize("name", SPINACH_OUTPUTS)
def test_score_reproduces_spinach_f1_vectors(name: str, tmp_path: Path) -> None:
    entries = spinach_output(name)
    jsonl = write_jsonl(
        tmp_path / "predictions.jsonl",
        [
            {
                "id": f"q{index}",
                "gold": rows_to_results(entry["gold_answer_tuple"]),
                "predicted": rows_to_results(entry["predicted_answer_tuple"]),
            }
            for index, entry in enumerate(entries)
        ],
    )
    result = run_score(str(jsonl), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [item["id"] for item in report["items"]] == [f"q{i}" for i in range(len(entries))]
    differences = [
        abs(item["row_f1"] - entry["f1"])
        for item, entry in zip(report["items"], entries, strict=True)
    ]
    assert max(differences) <= 1e-6, [(i, d) for i, d in enumerate(differences) if d > 1e-6]
    expected_macro = sum(entry["f1"] for entry in entries) / len(entries)
    assert report["overall"]["row_f1"] == pytest.approx(expected_macro, abs=1e-9)
    assert report["overall"]["row_em"] == pytest.approx(
        sum(1 for entry in entries if entry["f1"] == 1) / len(entries), abs=1e-9
    )
    assert report["overall"]["count"] == len(entries)


def test_json_report_shape(tmp_path: Path) -> None:
    gold = {
        "head": {"vars": ["x"]},
        "results": {
            "bindings": [
                {"x": {"type": "uri", "value": "urn:a"}},
                {"x": {"type": "uri", "value": "urn:b"}},
            ]
        },
    }
    half = {
        "head": {"vars": ["y"]},
        "results": {"bindings": [{"y": {"type": "uri", "value": "urn:a"}}]},
    }
    jsonl = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": 1, "gold": gold, "predicted": gold},
            {"id": "half", "gold": gold, "predicted": half},
            {"id": "none", "gold": {"head": {}, "boolean": True}, "predicted": None},
        ],
    )
    result = run_score(str(jsonl), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    items = {item["id"]: item for item in report["items"]}
    assert list(items) == ["1", "half", "none"]
    assert (items["1"]["row_em"], items["1"]["row_f1"], items["1"]["set_f1"]) == (1.0, 1.0, 1.0)
    assert items["half"]["row_f1"] == pytest.approx(2 / 3)
    assert items["half"]["set_precision"] == 1.0 and items["half"]["set_recall"] == 0.5
    assert items["half"]["superset"] == 0.0
    assert items["none"]["predicted"] is False and items["none"]["row_f1"] == 0.0
    overall = report["overall"]
    assert overall["count"] == 3 and overall["predicted"] == 2
    assert overall["macro"]["set_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    # micro set: tp 2+1+0, fp 0, fn 0+1+1 → F1 = 6 / (6 + 2)
    assert overall["micro"]["set_f1"] == pytest.approx(6 / 8)
    assert overall["row_em"] == pytest.approx(1 / 3)


def test_table_output_for_people(tmp_path: Path) -> None:
    gold = {"head": {}, "boolean": False}
    jsonl = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "ask-1", "gold": gold, "predicted": gold},
            {"id": "ask-2", "gold": gold, "predicted": None},
        ],
    )
    result = run_score(str(jsonl))
    assert result.exit_code == 0, result.output
    assert "ask-1" in result.stdout and "ask-2 (no prediction)" in result.stdout
    assert "2 questions, 1 with a prediction" in result.stdout
    assert "0.500" in result.stdout  # macro row EM / F1


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            '{"id": 1, "gold": {"head": {}, "boolean": true}, "predicted": null}\n{"id": 2, "gold": ',
            "line 2: not valid JSON",
        ),
        ('\n\n{"id": 1, "predicted": null}\n', "line 3: missing 'gold'"),
        ('{"id": 1, "gold": {"head": {}, "boolean": true}}\n', "line 1: missing 'predicted'"),
        ("[1]\n", "line 1: expected an object"),
        (
            '{"id": 1, "gold": {"head": {}}, "predicted": null}\n',
            "line 1: gold: needs 'boolean' or 'results.bindings'",
        ),
        (
            '{"id": 1, "gold": {"head": {}, "boolean": true}, "predicted": {"results": {"bindings": [{"x": 1}]}}}\n',
            "line 1: predicted: binding 0",
        ),
    ],
)
def test_bad_lines_name_the_line(tmp_path: Path, lines: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(lines, encoding="utf-8")
    with pytest.raises(ScoreFileError, match=message):
        score_file(path)
    result = run_score(str(path))
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_missing_file_is_one_line_error(tmp_path: Path) -> None:
    result = run_score(str(tmp_path / "nope.jsonl"))
    assert result.exit_code == 1
    assert "nope.jsonl" in result.output and "Traceback" not in result.output


def test_console_script_end_to_end(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("sparqlnav")
    if not script.is_file():
        pytest.skip("console script not installed next to this interpreter")
    good = write_jsonl(
        tmp_path / "ok.jsonl",
        [
            {
                "id": "a",
                "gold": {"head": {}, "boolean": True},
                "predicted": {"head": {}, "boolean": True},
            }
        ],
    )
    done = subprocess.run(
        [str(script), "score", str(good), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["overall"]["row_em"] == 1.0
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    done = subprocess.run(
        [str(script), "score", str(bad)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "line 1: not valid JSON" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_eval_predictions_score_as_they_are(tmp_path: Path) -> None:
    """A `predictions.jsonl` line carries `results`, not `predicted`: score takes it as the prediction."""
    gold = {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}, {"x": {"type": "literal", "value": "2"}}]}}
    got = {"head": {"vars": ["y"]}, "results": {"bindings": [{"y": {"type": "literal", "value": "1"}}]}}
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": "?", "gold": gold, "results": got}) + "\n")
    report = score_file(path)
    assert report.items[0].scores.set_precision == 1.0 and report.items[0].scores.set_recall == 0.5


def test_lines_without_gold_are_skipped_and_redone_questions_count_once(tmp_path: Path) -> None:
    one = {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}]}}
    path = tmp_path / "p.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "a", "gold": one, "results": None},
                {"id": "b", "gold": None, "results": one},
                {"id": "a", "gold": one, "results": one},  # redone with --retry-errors: this one counts
            ]
        )
    )
    report = score_file(path)
    assert [i.id for i in report.items] == ["a"] and report.items[0].scores.row_f1 == 1.0
    assert report.skipped == ["b"]
