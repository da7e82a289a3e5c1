"""Evaluation reports: summary numbers checked by hand, Markdown, PNG plots (with and without matplotlib),
comparison of runs, and the `report` verb as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparqlnav.datasets import Question
from sparqlnav.evaluation.gold import Gold
from sparqlnav.evaluation.report import (
    FAILURE_KINDS,
    ReportError,
    compare_runs,
    natural_key,
    read_run,
    summarize,
    write_report,
)
from sparqlnav.evaluation.runner import PredictionLog, make_record
from sparqlnav.trace import Trace

PNG = b"\x89PNG\r\n\x1a\n"


def uri(value: str) -> dict[str, str]:
    return {"type": "uri", "value": f"http://example.org/{value}"}


def table(*values: str) -> dict[str, Any]:
    return {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": uri(v)} for v in values]}}


def usage(
    seconds: float, queries: int, calls: int, tin: int, tout: int, cost: float
) -> dict[str, Any]:
    return {"llm_calls": calls, "input_tokens": tin, "output_tokens": tout, "sparql_queries": queries,
            "seconds": seconds, "cost_usd": cost}  # fmt: skip


def answer(
    sparql: str | None,
    results: dict[str, Any] | None,
    use: dict[str, Any],
    status: str = "answered",
) -> dict[str, Any]:
    return {"strategy": "handmade", "sparql": sparql, "results": results, "answer": "", "status": status,
            "error": None, "trace": [], "usage": use}  # fmt: skip


def handmade_records(f1_first: bool = False) -> list[dict[str, Any]]:
    """Four questions whose metrics are worked out by hand in test_summary_numbers_by_hand."""
    q1 = Question("q1", "Which x are a or b?", "SELECT ?x {}", tags=("A",))
    q2 = Question("q2", "Is it true?", "ASK {}", tags=("A", "B"))
    q3 = Question("q3", "Which is c?", "SELECT ?x {}", tags=("B",))
    q4 = Question("q4", "No gold here?", None)
    g1 = Gold("q1", table("a", "b"), "executed")
    g2 = Gold("q2", {"head": {}, "boolean": True}, "dataset")
    g3 = Gold("q3", table("c"), "dataset")
    g4 = Gold("q4", None, "failed", error="gold query failed: syntax_error: boom")
    trace = Trace()
    return [
        make_record(
            q1,
            g1,
            answer(
                "SELECT ?x {}",
                table("b", "a") if f1_first else table("a"),
                usage(2, 3, 2, 100, 10, 0.01),
            ),
            trace,
        ),
        make_record(
            q2,
            g2,
            answer("ASK {}", {"head": {}, "boolean": True}, usage(4, 1, 1, 50, 5, 0.02)),
            trace,
        ),
        make_record(
            q3, g3, answer(None, None, usage(0, 0, 3, 30, 3, 0.0), status="not_found"), trace
        ),
        make_record(q4, g4, answer("SELECT ?x {}", table("z"), usage(1, 2, 0, 0, 0, 0.0)), trace),
    ]


def write_run(path: Path, records: list[dict[str, Any]], **info: Any) -> Path:
    path.mkdir(parents=True)
    log = PredictionLog(path / "predictions.jsonl")
    for record in records:
        log.append(record)
    run_info = {"selected": [r["id"] for r in records], "strategy": "handmade", **info}
    (path / "run.json").write_text(json.dumps(run_info))
    return path


def test_summary_numbers_by_hand() -> None:
    records = handmade_records()
    assert [r["failure"] for r in records] == ["partial", "correct", "no_query", "unscored"]
    s = summarize(records, {"selected": ["q1", "q2", "q3", "q4", "q5"]})
    # q1: gold {a, b}, predicted {a}: row F1 = 2·1 / (1 + 2 + 1 − 1) = 2/3; set P = 1, R = 1/2, F1 = 2/3.
    # q2: ASK true = true → 1.  q3: no prediction → 0.  q4: no gold → not scored.
    assert s["f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert s["macro_f1"] == pytest.approx(5 / 9)
    assert s["row_f1"] == pytest.approx(5 / 9)
    assert s["row_em"] == pytest.approx(1 / 3)
    # micro set: tp = 1 + 1 + 0, fp = 0, fn = 1 + 0 + 1 → P = 1, R = 1/2, F1 = 2/3.
    assert s["micro_f1"] == pytest.approx(2 / 3)
    # cost per question over all four finished questions
    assert s["tpq"] == pytest.approx((2 + 4 + 0 + 1) / 4)
    assert s["qpq"] == pytest.approx((3 + 1 + 0 + 2) / 4)
    assert s["cpq"] == pytest.approx(0.03 / 4)
    assert s["lpq"] == pytest.approx(6 / 4)
    assert s["cost_known"] is True
    assert (s["input_tokens"], s["output_tokens"]) == (180, 18)
    assert s["counts"] == {
        "selected": 5,
        "done": 4,
        "scored": 3,
        "unscored": 1,
        "predicted": 3,
        "errors": 0,
    }
    assert s["complete"] is False
    assert s["failures"] == {
        k: {"partial": 1, "correct": 1, "no_query": 1, "unscored": 1}.get(k, 0)
        for k in FAILURE_KINDS
    }
    assert s["gold"] == {"executed": 1, "dataset": 2, "failed": 1}
    assert s["by_tag"]["A"]["count"] == 2 and s["by_tag"]["A"]["f1"] == pytest.approx(
        (2 / 3 + 1) / 2
    )
    assert s["by_tag"]["B"]["count"] == 2 and s["by_tag"]["B"]["f1"] == pytest.approx(0.5)
    assert s["by_tag"]["B"]["row_em"] == pytest.approx(0.5)


def test_write_report_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = write_run(tmp_path / "run-a", handmade_records(), dataset_name="hand", kg="demo")
    summary = write_report(run)
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert on_disk["complete"] is True and on_disk["counts"]["done"] == 4
    text = (run / "report.md").read_text()
    assert text.startswith("# Evaluation: hand · handmade · demo")
    assert "| F1 (set F1 where the gold is a bare value set, else row F1) | 0.556 |" in text
    assert "| partial | 1 | 25% |" in text and "| no_query | 1 | 25% |" in text
    assert "| A | 2 | 0.833 |" in text
    assert "- `q4`: gold query failed: syntax_error: boom" in text
    assert "![f1_by_tag.png](f1_by_tag.png)" in text
    png = (run / "f1_by_tag.png").read_bytes()
    assert png.startswith(PNG) and len(png) > 5000


def test_report_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import matplotlib...` raise ImportError, as when the extra is not installed.
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)
    run = write_run(tmp_path / "run-a", handmade_records())
    summary = write_report(run)
    assert summary["counts"]["scored"] == 3
    assert not (run / "f1_by_tag.png").exists()
    assert "Plots skipped: matplotlib is not installed" in (run / "report.md").read_text()
    text = compare_runs([run, run], tmp_path / "cmp")
    assert "Plots skipped" in text and not (tmp_path / "cmp" / "cost_vs_f1.png").exists()


def test_compare_runs_side_by_side(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    a = write_run(tmp_path / "run-a", handmade_records(), model="m-a")
    b = write_run(tmp_path / "run-b", handmade_records(f1_first=True), model="m-b")
    text = compare_runs([a, b], tmp_path / "cmp")
    lines = text.splitlines()
    row_a = next(line for line in lines if line.startswith("| run-a |"))
    row_b = next(line for line in lines if line.startswith("| run-b |"))
    # run-b answers q1 fully, so its F1 is (1 + 1 + 0) / 3.
    assert "| 0.556 |" in row_a and "| 0.667 |" in row_b
    assert "## Questions where the runs differ (1 of 4)" in text
    assert "| q1 | 0.667 | 1.000 |" in text
    assert "| partial | 1 | 0 |" in text and "| correct | 1 | 2 |" in text
    assert "| A | 0.833 | 1.000 |" in text
    assert (tmp_path / "cmp" / "compare.md").read_text() == text
    for name in ("cost_vs_f1.png", "f1_by_tag_compare.png"):
        assert (tmp_path / "cmp" / name).read_bytes().startswith(PNG)


def test_read_run_errors_and_torn_lines(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no predictions\.jsonl"):
        read_run(tmp_path)
    run = write_run(tmp_path / "r", handmade_records())
    with (run / "predictions.jsonl").open("a") as handle:
        handle.write('{"id": "q9", "question": "cut sh')
    assert [r["id"] for r in read_run(run).records] == ["q1", "q2", "q3", "q4"]


@pytest.mark.slow
def test_report_verb(tmp_path: Path) -> None:
    a = write_run(tmp_path / "run-a", handmade_records())
    b = write_run(tmp_path / "run-b", handmade_records(f1_first=True))
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "SPARQLNAV_HOME": str(tmp_path / "home"),
    }
    one = subprocess.run([sys.executable, "-m", "sparqlnav", "report", str(a), "--json", "--no-plots"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["f1"] == pytest.approx(5 / 9)
    assert (a / "report.md").is_file() and not (a / "f1_by_tag.png").exists()
    both = subprocess.run([sys.executable, "-m", "sparqlnav", "report", str(a), str(b), "--no-plots"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert "# Comparison of 2 runs" in both.stdout and "| q1 | 0.667 | 1.000 |" in both.stdout
    bad = subprocess.run([sys.executable, "-m", "sparqlnav", "report", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert (
        bad.returncode == 1
        and bad.stderr.strip().startswith("error:")
        and "no predictions.jsonl" in bad.stderr
    )


def test_natural_order_of_ids() -> None:
    ids = ["ck25:10-en", "ck25:2-en", "q", "ck25:1-en"]
    assert sorted(ids, key=natural_key) == ["ck25:1-en", "ck25:2-en", "ck25:10-en", "q"]


def test_summary_counts_only_the_questions_this_run_selected() -> None:
    from sparqlnav.evaluation.report import summarize

    one = {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}]}}
    none = {"head": {"vars": ["x"]}, "results": {"bindings": []}}

    def record(qid: str, predicted: dict[str, object]) -> dict[str, object]:
        from sparqlnav.evaluation.metrics import score

        s = score(one, predicted)
        return {"id": qid, "gold": one, "results": predicted, "metrics": s.to_dict(), "f1": s.set_f1, "tags": [], "usage": {}}

    records = [record("a", one), record("old", none)]  # "old" is left from an earlier --limit
    summary = summarize(records, {"selected": ["a"]})
    assert summary["stale"] == 1 and summary["macro_f1"] == 1.0 and summary["complete"] is True
