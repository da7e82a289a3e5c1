"""Evaluation reports: `summary.json`, a Markdown report and PNG plots for one run folder, and a side-by-side
comparison of several runs. Everything is computed from `predictions.jsonl` (and `run.json`), so a report
can be rebuilt at any time, also for a run that is still going or was interrupted.

Plots need matplotlib (the `report` extra); without it the reports are written and say so.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sparqlnav.errors import SparqlnavError
from sparqlnav.evaluation.metrics import Scores, TextScores, aggregate, aggregate_text

FailureKind = Literal[
    "correct", "partial", "wrong_answer", "empty", "timeout", "syntax_error", "query_error",
    "no_query", "error", "unscored",
]  # fmt: skip
FAILURE_KINDS: tuple[FailureKind, ...] = (
    "correct", "partial", "wrong_answer", "empty", "timeout", "syntax_error", "query_error",
    "no_query", "error", "unscored",
)  # fmt: skip
FAILURE_HELP: dict[str, str] = {
    "correct": "F1 = 1",
    "partial": "ran, some of the gold found (0 < F1 < 1)",
    "wrong_answer": "ran with results, none of them right (F1 = 0)",
    "empty": "the final query returned no rows",
    "timeout": "the final query hit the time limit",
    "syntax_error": "the final query did not parse",
    "query_error": "the final query was refused or failed in the engine",
    "no_query": "the strategy gave no query, or declined to answer with it",
    "error": "the run failed (exception, LLM or endpoint unreachable)",
    "unscored": "no gold answer to score against",
}

SUMMARY = "summary.json"
REPORT = "report.md"
PLOT_TAGS = "f1_by_tag.png"
PLOT_COST = "cost_vs_f1.png"
PLOT_TAGS_COMPARE = "f1_by_tag_compare.png"
COMPARE = "compare.md"


class ReportError(SparqlnavError):
    """A folder that is not an evaluation run; one line."""


@dataclass(frozen=True)
class Run:
    """One run folder: what was run and the latest record per question."""

    path: Path
    info: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def label(self) -> str:
        """A short name for tables: the folder name."""
        return self.path.name or str(self.path)


def read_run(path: Path) -> Run:
    """Read a run folder (run.json optional, predictions.jsonl required)."""
    predictions = path / "predictions.jsonl"
    if not predictions.is_file():
        raise ReportError(f"{path} is not an evaluation run (no predictions.jsonl)")
    info: dict[str, Any] = {}
    info_path = path / "run.json"
    if info_path.is_file():
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ReportError(f"{info_path}: not valid JSON ({exc.msg})") from exc
    records: dict[str, dict[str, Any]] = {}
    for line in predictions.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a crash; the runner removes it when it resumes
        if isinstance(record, dict) and "id" in record:
            records[str(record["id"])] = record
    return Run(path, info, list(records.values()))


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts q2 before q10 (numbers compare as numbers)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text))


# --------------------------------------------------------------------------- summary


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _scores(record: Mapping[str, Any]) -> Scores | None:
    metrics = record.get("metrics")
    return Scores(**metrics) if isinstance(metrics, Mapping) else None


def _cost_known(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the cost figures can be trusted: no LLM call was made without a price.

    An `llm_call` event may say `cost_known`; when none does, LLM calls that all cost 0 mean that no
    price table was configured.
    """
    verdicts = [
        (event.get("data") or {}).get("cost_known")
        for record in records
        for event in record.get("trace") or ()
        if event.get("kind") == "llm_call"
    ]
    if False in verdicts:
        return False
    if True in verdicts or not verdicts:
        return True
    return sum(float((r.get("usage") or {}).get("cost_usd") or 0.0) for r in records) > 0


def _group(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    scored = [r for r in records if r.get("metrics") is not None]
    scores = [s for s in (_scores(r) for r in scored) if s is not None]
    agg = aggregate(scores)
    return {
        "count": len(scored),
        "f1": _mean([float(r.get("f1") or 0.0) for r in scored]),
        "macro_f1": agg["macro_f1"],
        "micro_f1": agg["micro_f1"],
        "row_f1": agg["row_f1"],
        "row_em": agg["row_em"],
        **({"ex": agg["ex"]} if agg["ex"] is not None else {}),  # SQL datasets' questions only
    }


def summarize(records: Sequence[Mapping[str, Any]], info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary.json object: metrics overall and by tag, cost per question, failure and gold breakdowns.

    Only the questions this run selected count: a folder reused with another --limit or --sample keeps
    earlier records (for resuming), which are reported as `stale`, not scored.
    """
    info = info or {}
    chosen = info.get("selected")
    stale = 0
    if chosen is not None:
        wanted = set(map(str, chosen))
        kept = [r for r in records if str(r.get("id")) in wanted]
        stale, records = len(records) - len(kept), kept
    scored = [r for r in records if r.get("metrics") is not None]
    scores = [s for s in (_scores(r) for r in scored) if s is not None]
    agg = aggregate(scores)
    usages = [r.get("usage") or {} for r in records]

    def total(key: str) -> float:
        return float(sum(float(u.get(key) or 0) for u in usages))

    n = len(records)
    failures = Counter(str(r.get("failure")) for r in records)
    tags = sorted({str(t) for r in scored for t in r.get("tags") or ()})
    selected = info.get("selected")
    done_ids = {str(r["id"]) for r in records}
    summary: dict[str, Any] = {
        "dataset": info.get("dataset_name") or info.get("dataset"),
        "kg": info.get("kg"),
        "strategy": info.get("strategy") or next((r.get("strategy") for r in records if r.get("strategy")), None),
        "model": info.get("model"),
        "complete": bool(selected is not None and set(map(str, selected)) <= done_ids),
        "stopped": info.get("stopped"),  # why the run stopped before the end (the same LLM error again and again)
        "stale": stale,
        "answer_shape": info.get("answer_shape", "human"),  # "machine": label columns were dropped before scoring
        "f1": _mean([float(r.get("f1") or 0.0) for r in scored]),
        "macro_f1": agg["macro_f1"],
        "micro_f1": agg["micro_f1"],
        "row_f1": agg["row_f1"],
        "row_em": agg["row_em"],
        "superset": agg["superset"],
        "ex": agg["ex"],  # execution accuracy, over the questions of SQL datasets (None when there are none)
        # Free-text answers against gold strings (SPAGHETTI's EM / Superset; the judge comes from `score --judge`).
        "answer": aggregate_text([TextScores(**r["text_metrics"]) for r in records if r.get("text_metrics")]),
        "macro": agg["macro"],
        "micro": agg["micro"],
        "tpq": total("seconds") / n if n else 0.0,
        "qpq": (total("sparql_queries") + total("sql_queries")) / n if n else 0.0,  # the SQL builder's are SQL
        "cpq": total("cost_usd") / n if n else 0.0,
        "lpq": total("llm_calls") / n if n else 0.0,
        "input_tokens": int(total("input_tokens")),
        "output_tokens": int(total("output_tokens")),
        "cost_usd": total("cost_usd"),
        "cost_known": _cost_known(records),
        "seconds": total("seconds"),
        "counts": {
            "selected": len(selected) if selected is not None else None,
            "done": n,
            "scored": len(scored),
            "unscored": n - len(scored),
            "predicted": sum(1 for r in records if r.get("sparql")),
            "errors": failures.get("error", 0),
        },
        "failures": {kind: failures.get(kind, 0) for kind in FAILURE_KINDS},
        "gold": dict(Counter(str(r.get("gold_source")) for r in records)),
        "by_tag": {tag: _group([r for r in scored if tag in (r.get("tags") or ())]) for tag in tags},
    }
    return summary


# --------------------------------------------------------------------------- markdown


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{float(value):.{digits}f}"


def _cell(text: Any, limit: int = 90) -> str:
    flat = " ".join(str(text or "").split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_markdown(run: Run, summary: Mapping[str, Any], plots: Sequence[str] = (), plot_note: str = "") -> str:
    """The report.md of one run."""
    s = summary
    counts = s["counts"]
    title = " · ".join(str(x) for x in (s.get("dataset"), s.get("strategy"), s.get("kg")) if x)
    lines = [f"# Evaluation: {title or run.label}", ""]
    state = "complete" if s["complete"] else "incomplete"
    selected = counts["selected"] if counts["selected"] is not None else "?"
    lines.append(
        f"{counts['done']} of {selected} questions done ({state}), {counts['scored']} scored"
        + (f"; model `{s['model']}`" if s.get("model") else "")
        + "."
    )
    if s.get("stopped"):
        lines += ["", f"**The run {s['stopped']}.**"]
    if s.get("answer_shape") == "machine":
        lines += ["", "Answers in the machine shape: columns that only label another projected entity were dropped."]
    lines += ["", "## Answer quality", "", "| metric | value |", "|---|---:|"]
    lines += [
        f"| F1 (set F1 where the gold is a bare value set, else row F1) | {_num(s['f1'])} |",
        f"| macro F1 (set) | {_num(s['macro_f1'])} |",
        f"| micro F1 (set) | {_num(s['micro_f1'])} |",
        f"| row F1 (SPINACH) | {_num(s['row_f1'])} |",
        f"| row EM | {_num(s['row_em'])} |",
        f"| Superset | {_num(s['superset'])} |",
    ]
    if s.get("ex") is not None:
        by = Counter(str(r.get("scored_by")) for r in run.records if r.get("ex") is not None)
        said = ", ".join(f"{n} against gold {kind.upper()}" for kind, n in sorted(by.items()))
        lines.append(f"| execution accuracy ({said}) | {_num(s['ex'])} |")
    cost = _num(s["cpq"], 5) + ("" if s["cost_known"] else " (some LLM calls had no price)")
    lines += ["", "## Cost", "", "| per question | value |", "|---|---:|"]
    lines += [
        f"| TPQ (seconds) | {_num(s['tpq'], 2)} |",
        f"| QPQ (SPARQL and SQL queries) | {_num(s['qpq'], 2)} |",
        f"| CPQ (USD) | {cost} |",
        f"| LLM calls | {_num(s['lpq'], 2)} |",
        f"| input / output tokens | {_per(s['input_tokens'], counts['done'])} / {_per(s['output_tokens'], counts['done'])} |",
    ]
    lines.append("")
    lines.append(f"Totals: {s['input_tokens']} input and {s['output_tokens']} output tokens, "
                 f"{_num(s['cost_usd'], 4)} USD, {_num(s['seconds'], 1)} question-seconds.")  # fmt: skip
    lines += ["", "## Outcomes", "", "| kind | count | share | meaning |", "|---|---:|---:|---|"]
    for kind in FAILURE_KINDS:
        count = s["failures"][kind]
        if count:
            share = count / counts["done"] if counts["done"] else 0.0
            lines.append(f"| {kind} | {count} | {share:.0%} | {FAILURE_HELP[kind]} |")
    if s["by_tag"]:
        lines += ["", "## By tag", "", "| tag | n | F1 | macro F1 | row F1 | row EM | EX |", "|---|---:|---:|---:|---:|---:|---:|"]
        for tag, g in sorted(s["by_tag"].items(), key=lambda kv: (-kv[1]["count"], kv[0])):
            lines.append(f"| {tag} | {g['count']} | {_num(g['f1'])} | {_num(g['macro_f1'])} | {_num(g['row_f1'])} "
                         f"| {_num(g['row_em'])} | {_num(g.get('ex'))} |")
    if plots or plot_note:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({name})" for name in plots]
        if plot_note:
            lines.append(plot_note)
    lines += ["", "## Questions", "", "| id | F1 | outcome | queries | LLM calls | seconds | note |", "|---|---:|---|---:|---:|---:|---|"]
    for r in sorted(run.records, key=lambda rec: natural_key(str(rec["id"]))):
        u = r.get("usage") or {}
        note = r.get("error") or r.get("gold_error") or r.get("ex_reason") or ""
        lines.append(
            f"| {_cell(r['id'], 40)} | {_num(r.get('f1'))} | {r.get('failure')} | {u.get('sparql_queries', 0) + u.get('sql_queries', 0)} "
            f"| {u.get('llm_calls', 0)} | {_num(u.get('seconds'), 2)} | {_cell(note)} |"
        )
    gold_failed = [r for r in run.records if r.get("gold_error")]
    if gold_failed:
        lines += ["", "## Gold answers that could not be obtained", ""]
        lines += [f"- `{r['id']}`: {_cell(r['gold_error'], 300)}" for r in gold_failed]
    noted = [r for r in run.records if r.get("gold_note")]
    if noted:
        lines += ["", "## Notes on gold answers", ""]
        lines += [f"- `{r['id']}`: {_cell(r['gold_note'], 300)}" for r in noted]
    return "\n".join(lines) + "\n"


def _per(value: float, count: int) -> str:
    return f"{value / count:.0f}" if count else "0"


# --------------------------------------------------------------------------- plots


def _figure(width: float, height: float) -> Any:
    """A matplotlib Figure without pyplot (no global state, no GUI backend); raises ImportError without matplotlib."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def plot_f1_by_tag(runs: Sequence[tuple[str, Mapping[str, Any]]], path: Path) -> bool:
    """Horizontal bars of F1 per dataset tag, one bar per run; False when there are no tags."""
    tags = sorted({t for _, s in runs for t in s["by_tag"]})
    if not tags:
        return False
    fig = _figure(7.5, 1.2 + 0.35 * len(tags) * max(1, len(runs)) ** 0.6)
    ax = fig.subplots()
    height = 0.8 / len(runs)
    for n, (label, s) in enumerate(runs):
        values = [s["by_tag"].get(t, {}).get("f1", 0.0) for t in tags]
        positions = [i + n * height - 0.4 + height / 2 for i in range(len(tags))]
        ax.barh(positions, values, height=height, label=label)
    counts = [max((s["by_tag"].get(t, {}).get("count", 0) for _, s in runs), default=0) for t in tags]
    ax.set_yticks(range(len(tags)), [f"{t} ({c})" for t, c in zip(tags, counts, strict=True)])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("F1")
    ax.set_title("F1 by tag")
    if len(runs) > 1:
        ax.legend(loc="lower right", fontsize="small")
    fig.savefig(path, dpi=110)
    return True


def plot_cost_vs_f1(runs: Sequence[tuple[str, Mapping[str, Any]]], path: Path) -> bool:
    """F1 against cost per question (USD, or seconds when no run has a cost), one point per run."""
    if not runs:
        return False
    use_money = any(s["cpq"] > 0 for _, s in runs)
    fig = _figure(6.5, 4.5)
    ax = fig.subplots()
    for label, s in runs:
        x = s["cpq"] if use_money else s["tpq"]
        ax.scatter([x], [s["f1"]], s=40)
        ax.annotate(label, (x, s["f1"]), textcoords="offset points", xytext=(5, 4), fontsize="small")
    ax.set_xlabel("cost per question (USD)" if use_money else "seconds per question (no cost recorded)")
    ax.set_ylabel("F1")
    from matplotlib.ticker import MaxNLocator

    ax.set_ylim(0, 1.05)
    # Room on the right for the last run's label.
    ax.set_xlim(0, max((s["cpq"] if use_money else s["tpq"]) for _, s in runs) * 1.4 or 1.0)
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.set_title("Cost vs F1")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    return True


def _try_plot(draw: Any, *args: Any) -> tuple[bool, str]:
    try:
        return bool(draw(*args)), ""
    except ImportError:
        return False, "Plots skipped: matplotlib is not installed (`pip install 'sparqlnav[report]'`)."


# --------------------------------------------------------------------------- writing


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_report(out_dir: Path, *, plots: bool = True) -> dict[str, Any]:
    """Write summary.json, report.md and (with matplotlib) f1_by_tag.png into a run folder; return the summary."""
    run = read_run(out_dir)
    summary = summarize(run.records, run.info)
    _write_text(out_dir / SUMMARY, json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    made: list[str] = []
    note = ""
    if plots and summary["by_tag"]:
        ok, note = _try_plot(plot_f1_by_tag, [(run.label, summary)], out_dir / PLOT_TAGS)
        if ok:
            made.append(PLOT_TAGS)
    _write_text(out_dir / REPORT, render_markdown(run, summary, made, note))
    return summary


# --------------------------------------------------------------------------- comparing runs


def _labels(runs: Sequence[Run]) -> list[str]:
    labels = [r.label for r in runs]
    if len(set(labels)) < len(labels):
        labels = [str(r.path) for r in runs]
    return labels


def compare_runs(paths: Sequence[Path], out_dir: Path | None = None, *, plots: bool = True) -> str:
    """Markdown comparing runs side by side; with `out_dir`, also compare.md and plots written there."""
    runs = [read_run(p) for p in paths]
    labels = _labels(runs)
    summaries = [summarize(r.records, r.info) for r in runs]
    pairs = list(zip(labels, summaries, strict=True))
    lines = [f"# Comparison of {len(runs)} runs", ""]
    lines += ["| run | strategy | model | done | F1 | macro F1 | micro F1 | row F1 | row EM | EX | TPQ s | QPQ | CPQ USD | LLM calls/q | tokens in/q | tokens out/q |"]
    lines += ["|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, s in pairs:
        n = s["counts"]["done"]
        lines.append(
            f"| {label} | {s.get('strategy') or '-'} | {s.get('model') or '-'} | {n} | {_num(s['f1'])} "
            f"| {_num(s['macro_f1'])} | {_num(s['micro_f1'])} | {_num(s['row_f1'])} | {_num(s['row_em'])} "
            f"| {_num(s.get('ex'))} "
            f"| {_num(s['tpq'], 2)} | {_num(s['qpq'], 2)} | {_num(s['cpq'], 5)} | {_num(s['lpq'], 2)} "
            f"| {_per(s['input_tokens'], n)} | {_per(s['output_tokens'], n)} |"
        )
    lines += ["", "## Outcomes", "", "| kind | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for kind in FAILURE_KINDS:
        row = [s["failures"][kind] for s in summaries]
        if any(row):
            lines.append(f"| {kind} | " + " | ".join(str(v) for v in row) + " |")
    tags = sorted({t for s in summaries for t in s["by_tag"]})
    if tags:
        lines += ["", "## F1 by tag", "", "| tag | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        for tag in tags:
            cells = [_num(s["by_tag"][tag]["f1"]) if tag in s["by_tag"] else "-" for s in summaries]
            lines.append(f"| {tag} | " + " | ".join(cells) + " |")
    by_id = [{str(r["id"]): r for r in run.records} for run in runs]
    ids = sorted(dict.fromkeys(i for table in by_id for i in table), key=natural_key)
    differing = []
    for qid in ids:
        values = [table[qid].get("f1") if qid in table else None for table in by_id]
        if len({None if v is None else round(float(v), 6) for v in values}) > 1:
            differing.append((qid, values))
    lines += ["", f"## Questions where the runs differ ({len(differing)} of {len(ids)})", ""]
    if differing:
        lines += ["| id | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
        lines += [f"| {_cell(qid, 40)} | " + " | ".join(_num(v) for v in values) + " |" for qid, values in differing]
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        made: list[str] = []
        note = ""
        if plots:
            ok, note = _try_plot(plot_cost_vs_f1, pairs, out_dir / PLOT_COST)
            if ok:
                made.append(PLOT_COST)
            if not note:
                ok, note = _try_plot(plot_f1_by_tag, pairs, out_dir / PLOT_TAGS_COMPARE)
                if ok:
                    made.append(PLOT_TAGS_COMPARE)
        if made or note:
            lines += ["", "## Plots", ""] + [f"![{m}]({m})" for m in made] + ([note] if note else [])
        text = "\n".join(lines) + "\n"
        _write_text(out_dir / COMPARE, text)
        return text
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- for the terminal


def summary_table(summary: Mapping[str, Any], *, title: str = "Summary") -> Any:
    """A rich Table of the headline numbers of one run."""
    from rich.table import Table

    s = summary
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    counts = s["counts"]
    selected = counts["selected"] if counts["selected"] is not None else "?"
    rows = [
        ("questions done", f"{counts['done']} of {selected}" + ("" if s["complete"] else " (incomplete)")),
        ("scored", str(counts["scored"])),
        ("answer shape", str(s.get("answer_shape", "human"))),
        ("F1", _num(s["f1"])),
        ("macro F1 (set)", _num(s["macro_f1"])),
        ("micro F1 (set)", _num(s["micro_f1"])),
        ("row F1", _num(s["row_f1"])),
        ("row EM", _num(s["row_em"])),
        *([("execution accuracy", _num(s["ex"]))] if s.get("ex") is not None else []),
        *([("answer EM (text)", _num(s["answer"]["em"])), ("answer Superset (text)", _num(s["answer"]["superset"]))]
          if s.get("answer", {}).get("count") else []),
        ("TPQ (s)", _num(s["tpq"], 2)),
        ("QPQ", _num(s["qpq"], 2)),
        ("CPQ (USD)", _num(s["cpq"], 5) + ("" if s["cost_known"] else " ?")),
        ("tokens in / out", f"{s['input_tokens']} / {s['output_tokens']}"),
    ]
    rows += [(f"outcome: {k}", str(v)) for k, v in s["failures"].items() if v]
    if s.get("stopped"):
        rows.append(("stopped", str(s["stopped"])))
    for name, value in rows:
        table.add_row(name, value)
    return table
