"""Score existing predictions: a JSONL file of ``{id, gold, predicted}`` lines → per-line and overall metrics.

Results are SPARQL 1.1 JSON results, or SQL results as ``{"columns": [...], "rows": [[...], ...]}`` (read as
`sql_runs.sql_results` reads them, with the line's ``gold_sql`` / ``sql`` for a ``SELECT EXISTS`` yes/no). A line of
a SQL dataset (it carries ``gold_sql``, as `eval` lines of such datasets do) or one holding SQL tables is also scored
by execution accuracy (`execution`), its row order counting when the line says ``"ordered": true``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sparqlnav.errors import SparqlnavError
from sparqlnav.evaluation.execution import DEFAULT_TOLERANCE, execution_match
from sparqlnav.evaluation.metrics import (
    AnswerJudge,
    Scores,
    TextScores,
    aggregate,
    aggregate_text,
    check_results,
    gold_strings,
    score,
    score_text,
)
from sparqlnav.evaluation.sql_runs import sql_results


class ScoreFileError(SparqlnavError, ValueError):
    """A predictions file that cannot be scored; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class ScoredItem:
    """The metrics of one line of a predictions file."""

    id: str
    scores: Scores | None
    text: TextScores | None = None  # a free-text answer's EM / Superset / judge


@dataclass(frozen=True, slots=True)
class ScoreReport:
    """Per-line metrics and their macro/micro aggregates (see `sparqlnav.evaluation.metrics.aggregate`)."""

    items: list[ScoredItem]
    overall: dict[str, Any]
    skipped: list[str] = field(default_factory=list)  # ids with no gold answer to score against
    answers: dict[str, Any] | None = None  # free-text answers: EM / Superset / judge (see `aggregate_text`)


def score_file(path: str | Path, *, judge: AnswerJudge | None = None,
               tolerance: float = DEFAULT_TOLERANCE) -> ScoreReport:
    """Score a JSONL predictions file (each line ``{id, gold, predicted}``, SPARQL 1.1 JSON results or SQL tables)."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as handle:
            return score_lines(handle, source=str(path), judge=judge, tolerance=tolerance)
    except (OSError, UnicodeDecodeError) as error:
        raise ScoreFileError(f"{path}: cannot read ({error})") from error


def score_lines(
    lines: Iterable[str], *, source: str = "<input>", judge: AnswerJudge | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
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
        question = record.get("question")
        question = question if isinstance(question, str) else None
        free = _free_text(record)
        if free is not None:
            # {id, question, gold: ["..."], answer: "..."}: a free-text answer against gold strings.
            parts, said = free
            ident = str(record.get("id", number))
            items[ident] = ScoredItem(ident, None, score_text(parts, said, question=question, judge=judge))
            continue
        if "predicted" not in record and "results" in record:
            record["predicted"] = record["results"]  # an `eval` predictions.jsonl line scores as it is
        for key in ("gold", "predicted"):
            if key not in record:
                raise ScoreFileError(f"{where}: missing '{key}'")
        tables = _is_table(record["gold"]) or _is_table(record["predicted"])
        gold = _as_results(record["gold"], record.get("gold_sql"))
        predicted = _as_results(record["predicted"], record.get("sql"))
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
        scores = score(gold, predicted, question=question, judge=None if record.get("text_metrics") else judge)
        if tables or record.get("gold_sql") is not None:
            ordered = record.get("ordered") is True
            scores = replace(scores, ex=execution_match(gold, predicted, ordered=ordered, tolerance=tolerance).score)
        text_scores: TextScores | None = None
        if record.get("text_metrics") is not None:
            # An eval line of a free-text answer: the judge reads the answer text, not the KG rows.
            answer, short = record.get("answer"), record.get("short_answer")
            text_scores = score_text(gold_strings(gold), answer if isinstance(answer, str) else None, question=question,
                              judge=judge, short=short if isinstance(short, str) else None)  # fmt: skip
        items[str(ident)] = ScoredItem(id=str(ident), scores=scores, text=text_scores)  # a re-done question: the last line wins
    scored = list(items.values())
    texts = [item.text for item in scored if item.text is not None]
    return ScoreReport(items=scored, overall=aggregate([item.scores for item in scored if item.scores is not None]),
                       skipped=skipped, answers=aggregate_text(texts) if texts else None)


def _is_table(value: Any) -> bool:
    """A SQL result written as ``{"columns": [...], "rows": [[...]]}``."""
    return isinstance(value, dict) and isinstance(value.get("columns"), list) and isinstance(value.get("rows"), list)


def _as_results(value: Any, sql: Any) -> Any:
    """SPARQL JSON results as they are; a SQL table as `sql_results` reads it (a SELECT EXISTS's 0/1 a boolean)."""
    if not _is_table(value):
        return value
    rows = [row if isinstance(row, list) else [row] for row in value["rows"]]
    return sql_results([str(c) for c in value["columns"]], rows, sql if isinstance(sql, str) else None)


def _free_text(record: dict[str, Any]) -> tuple[list[str], str | None] | None:
    """The gold strings and answer text of a free-text line, or None for a results line."""
    gold = record.get("gold")
    if isinstance(gold, str):
        gold = [gold]
    if not (isinstance(gold, list) and all(isinstance(g, str | int | float) for g in gold)):
        return None
    answer = record.get("answer", record.get("predicted"))
    return [str(g) for g in gold], answer if isinstance(answer, str) else None


def report_json(report: ScoreReport) -> dict[str, Any]:
    """The machine form: ``{"items": [{"id", "row_f1", "row_em", "set_f1", ...}], "overall": {...}}``."""
    return {
        "items": [{"id": item.id, **(item.scores.to_dict() if item.scores else {}),
                   **({"answer": item.text.to_dict()} if item.text else {})} for item in report.items],
        "overall": report.overall,
        "answers": report.answers,
        "skipped": report.skipped,
    }


def render_report(report: ScoreReport, console: Console) -> None:
    """Print per-line and overall tables for people."""
    table = Table(title="Per question", title_justify="left")
    table.add_column("id", overflow="fold")
    executed = any(item.scores is not None and item.scores.ex is not None for item in report.items)
    for header in ("row EM", "row F1", "set P", "set R", "set F1", "superset", *(("EX",) if executed else ())):
        table.add_column(header, justify="right")
    for item in report.items:
        s = item.scores
        if s is None:
            continue
        table.add_row(
            item.id if s.predicted else f"{item.id} (no prediction)",
            _num(s.row_em), _num(s.row_f1),
            _num(s.set_precision), _num(s.set_recall), _num(s.set_f1),
            "yes" if s.superset else "no",
            *((_num(s.ex),) if executed else ()),
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
        "ex",
    )
    for name in metrics:
        if name in macro or name in micro:
            summary.add_row(name, _num(macro.get(name)), _num(micro.get(name)))
    console.print(summary)
    console.print(f"{overall['count']} questions, {overall['predicted']} with a prediction")
    if report.answers is not None:
        a = report.answers
        console.print(f"free-text answers ({a['count']}): EM {_num(a['em'])}, Superset {_num(a['superset'])}, "
                      f"judge {_num(a['judge'])}")
    if report.skipped:
        console.print(f"{len(report.skipped)} without a gold answer, not scored: {', '.join(report.skipped[:10])}")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
