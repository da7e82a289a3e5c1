"""Score existing predictions: a JSONL file of ``{id, gold, predicted}`` lines → per-line and overall metrics."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sparqlnav.errors import SparqlnavError
from sparqlnav.evaluation.metrics import AnswerJudge, Scores, aggregate, check_results, score


class ScoreFileError(SparqlnavError, ValueError):
    """A predictions file that cannot be scored; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class ScoredItem:
    """The metrics of one line of a predictions file."""

    id: str
    scores: Scores


@dataclass(frozen=True, slots=True)
class ScoreReport:
    """Per-line metrics and their macro/micro aggregates (see `sparqlnav.evaluation.metrics.aggregate`)."""

    items: list[ScoredItem]
    overall: dict[str, Any]
    skipped: list[str] = field(default_factory=list)  # ids with no gold answer to score against


def score_file(path: str | Path, *, judge: AnswerJudge | None = None) -> ScoreReport:
    """Score a JSONL predictions file (each line ``{id, gold, predicted}``, SPARQL 1.1 JSON results)."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as handle:
            return score_lines(handle, source=str(path), judge=judge)
    except (OSError, UnicodeDecodeError) as error:
        raise ScoreFileError(f"{path}: cannot read ({error})") from error


def score_lines(
    lines: Iterable[str], *, source: str = "<input>", judge: AnswerJudge | None = None
) -> ScoreReport:
    """Score JSONL text lines; blank lines are skipped, a bad line raises `ScoreFileError`."""
    items: dict[str, ScoredItem] = {}
    skipped: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ScoreFileError(f"{where}: not valid JSON ({error.msg})") from error
        if not isinstance(record, dict):
            raise ScoreFileError(f"{where}: expected an object {{id, gold, predicted}}")
        if "predicted" not in record and "results" in record:
            record["predicted"] = record["results"]  # an `eval` predictions.jsonl line scores as it is
        for key in ("gold", "predicted"):
            if key not in record:
                raise ScoreFileError(f"{where}: missing '{key}'")
        gold, predicted = record["gold"], record["predicted"]
        ident = record.get("id", str(number))
        if gold is None:  # e.g. an eval record whose gold query failed: nothing to score against
            skipped.append(str(ident))
            continue
        try:
            check_results(gold, what="gold")
            if predicted is not None:
                check_results(predicted, what="predicted")
        except ValueError as error:
            raise ScoreFileError(f"{where}: {error}") from error
        if not isinstance(ident, str | int):
            raise ScoreFileError(f"{where}: 'id' must be a string or a number")
        question = record.get("question")
        scores = score(
            gold,
            predicted,
            question=question if isinstance(question, str) else None,
            judge=judge,
        )
        items[str(ident)] = ScoredItem(id=str(ident), scores=scores)  # a re-done question: the last line wins
    scored = list(items.values())
    return ScoreReport(items=scored, overall=aggregate([item.scores for item in scored]), skipped=skipped)


def report_json(report: ScoreReport) -> dict[str, Any]:
    """The machine form: ``{"items": [{"id", "row_f1", "row_em", "set_f1", ...}], "overall": {...}}``."""
    return {
        "items": [{"id": item.id, **item.scores.to_dict()} for item in report.items],
        "overall": report.overall,
        "skipped": report.skipped,
    }


def render_report(report: ScoreReport, console: Console) -> None:
    """Print per-line and overall tables for people."""
    table = Table(title="Per question", title_justify="left")
    table.add_column("id", overflow="fold")
    for header in ("row EM", "row F1", "set P", "set R", "set F1", "superset"):
        table.add_column(header, justify="right")
    for item in report.items:
        s = item.scores
        table.add_row(
            item.id if s.predicted else f"{item.id} (no prediction)",
            _num(s.row_em), _num(s.row_f1),
            _num(s.set_precision), _num(s.set_recall), _num(s.set_f1),
            "yes" if s.superset else "no",
        )  # fmt: skip
    console.print(table)

    overall = report.overall
    summary = Table(title="Overall", title_justify="left")
    summary.add_column("metric")
    summary.add_column("macro", justify="right")
    summary.add_column("micro", justify="right")
    macro, micro = overall["macro"], overall["micro"]
    metrics = (
        "row_em",
        "row_f1",
        "row_precision",
        "row_recall",
        "set_precision",
        "set_recall",
        "set_f1",
        "superset",
        "judge",
    )
    for name in metrics:
        if name in macro or name in micro:
            summary.add_row(name, _num(macro.get(name)), _num(micro.get(name)))
    console.print(summary)
    console.print(f"{overall['count']} questions, {overall['predicted']} with a prediction")
    if report.skipped:
        console.print(f"{len(report.skipped)} without a gold answer, not scored: {', '.join(report.skipped[:10])}")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
