"""The evaluation runner: ask a strategy every question of a dataset, several at once, score each answer
against its gold, and append it to `predictions.jsonl` the moment it is done, so a crash or Ctrl-C loses
nothing finished and running the same command again resumes where the last run stopped.

Files in the run folder: `run.json` (what was run), `predictions.jsonl` (one record per question; when a
question is redone its later line wins), `folds.json` (k-fold example splits, when used), and what
`sparqlnav.evaluation.report` writes from those: `summary.json`, `report.md` and plots.

A SQL dataset's question (gold `sql`) over a database KG is scored by what its answer carries: an answer with SQL
(the SQL builder) has that SQL run once more through the run's `SqlRunner` and compared with the gold SQL's result;
an answer with SPARQL (any strategy on the direct-mapped graph) with the gold SPARQL's, as for any dataset. Either
way the record adds execution accuracy (`ex`, see `evaluation.execution`) beside row and set F1; `scored_by` says
which gold was used, `ordered` whether the gold is a ranking whose row order counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from sparqlnav.answer import Strategy, run_question
from sparqlnav.datasets import Dataset, Question, load_dataset
from sparqlnav.errors import SparqlnavError
from sparqlnav.evaluation.execution import DEFAULT_TOLERANCE, execution_match, is_ranking
from sparqlnav.evaluation.gold import Gold, freeze_gold, gold_file_for
from sparqlnav.evaluation.metrics import (
    Scores,
    bindings,
    check_results,
    gold_strings,
    is_boolean,
    score,
    score_text,
)
from sparqlnav.evaluation.report import FailureKind, write_report
from sparqlnav.evaluation.sql_runs import SqlRun, SqlRunner
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.trace import Trace
from sparqlnav.version import __version__

PREDICTIONS = "predictions.jsonl"
RUN_INFO = "run.json"
FOLDS = "folds.json"
# A resumed run must be the same experiment; these keys of run.json must not change between runs.
IDENTITY_KEYS = ("dataset_sha256", "kg", "strategy", "options", "model", "answer_shape", "tolerance")
# A run stops when this many questions in a row end on the same LLM failure: a dead or hanging server
# then costs one wait, not one per question.
STOP_AFTER_SAME_LLM_ERROR = 3
# How a question's last LLM request failed, when it got no answer because of it.
_LLM_FAILURES = frozenset({"timeout", "unreachable", "http_error"})
_EM_TOLERANCE = 1e-9

StrategyFactory = Callable[[], Strategy]


class EvalError(SparqlnavError):
    """An evaluation that cannot start (e.g. the run folder holds another experiment); one line."""


# --------------------------------------------------------------------------- choosing questions


def select_questions(
    questions: Sequence[Question], *, limit: int | None = None, sample: bool = False, seed: int = 0
) -> list[Question]:
    """The first `limit` questions, or with `sample` a seeded random `limit` of them (dataset order kept)."""
    items = list(questions)
    if limit is not None and limit < 0:
        raise EvalError(f"--limit must be 0 or more, not {limit}")
    count = len(items) if limit is None else min(limit, len(items))
    if not sample:
        return items[:count]
    chosen = sorted(random.Random(seed).sample(range(len(items)), count))
    return [items[i] for i in chosen]


@dataclass(frozen=True)
class ExampleSplits:
    """k-fold splits of a dataset, for strategies that retrieve example questions from the same dataset.

    A question may only be shown examples from the other folds: `allowed_ids(question_id)`, or by text,
    `allowed_for(question)` (what a strategy sees). Pass it to a strategy as `example_splits=`.
    """

    folds: tuple[frozenset[str], ...]
    text_folds: Mapping[str, frozenset[int]] = field(repr=False)

    @classmethod
    def kfold(cls, questions: Sequence[Question], k: int, *, seed: int = 0) -> ExampleSplits:
        """Shuffle the questions with `seed` and deal them into `k` folds."""
        ids = [q.id for q in questions]
        if len(set(ids)) != len(ids):
            raise EvalError("k-fold splits need unique question ids; the dataset repeats some")
        if not 2 <= k <= len(ids):
            raise EvalError(f"--folds must be between 2 and the number of questions ({len(ids)}), not {k}")
        order = list(range(len(ids)))
        random.Random(seed).shuffle(order)
        folds: list[set[str]] = [set() for _ in range(k)]
        for rank, index in enumerate(order):
            folds[rank % k].add(ids[index])
        return cls.from_folds([sorted(f) for f in folds], questions)

    @classmethod
    def from_folds(cls, folds: Sequence[Iterable[str]], questions: Sequence[Question]) -> ExampleSplits:
        """Splits from explicit folds of question ids."""
        frozen = tuple(frozenset(f) for f in folds)
        fold_of = {qid: n for n, fold in enumerate(frozen) for qid in fold}
        text_folds: dict[str, set[int]] = {}
        for q in questions:
            if q.id in fold_of:
                text_folds.setdefault(_normal_text(q.question), set()).add(fold_of[q.id])
        return cls(frozen, {t: frozenset(n) for t, n in text_folds.items()})

    def fold_of(self, question_id: str) -> int:
        """The fold holding a question id."""
        for number, fold in enumerate(self.folds):
            if question_id in fold:
                return number
        raise KeyError(question_id)

    def allowed_ids(self, question_id: str) -> frozenset[str]:
        """Example ids a question may see: every id outside its own fold."""
        own = self.fold_of(question_id)
        return frozenset().union(*(f for n, f in enumerate(self.folds) if n != own))

    def allowed_for(self, question: str) -> frozenset[str] | None:
        """Example ids allowed for a question text (outside every fold holding that text); None if unknown."""
        own = self.text_folds.get(_normal_text(question))
        if own is None:
            return None
        return frozenset().union(*(f for n, f in enumerate(self.folds) if n not in own))

    def to_json(self) -> dict[str, Any]:
        """Plain data for folds.json."""
        return {"k": len(self.folds), "folds": [sorted(f) for f in self.folds]}


def _normal_text(text: str) -> str:
    return " ".join(text.split()).casefold()


# --------------------------------------------------------------------------- one record per question


def headline_f1(scores: Scores, values_only: bool) -> float:
    """The F1 a question is judged by: set F1 when the gold is a bare value set, else SPINACH row F1."""
    return scores.set_f1 if values_only else scores.row_f1


def final_outcome(sparql: str | None, trace: Sequence[Mapping[str, Any]]) -> str | None:
    """How the final query ended when the strategy ran it (the last matching `sparql` event)."""
    if not sparql:
        return None
    wanted = " ".join(sparql.split())
    for event in reversed(trace):
        data = event.get("data") or {}
        if event.get("kind") == "sparql" and " ".join(str(data.get("query", "")).split()) == wanted:
            outcome = data.get("outcome")
            return str(outcome) if outcome is not None else None
    return None


def classify(record: Mapping[str, Any]) -> FailureKind:
    """Sort one finished question into correct / partial / a failure kind (see `report.FAILURE_KINDS`)."""
    if record.get("metrics") is None:
        return "unscored"
    f1 = float(record.get("f1") or 0.0)
    if f1 >= 1.0 - _EM_TOLERANCE:
        return "correct"
    if not record.get("sparql") and not record.get("sql"):
        return "error" if record.get("status") == "error" else "no_query"
    outcome = record.get("outcome")
    if outcome == "timeout":
        return "timeout"
    if outcome == "syntax_error":
        return "syntax_error"
    if outcome == "unreachable":
        return "error"
    results = record.get("results")
    if _problem(results, "results"):
        return "error"
    if outcome in ("refused", "engine_error"):
        return "query_error"
    if results is None:  # a query but no results: the strategy declined to answer (e.g. a guess below its threshold)
        return "no_query" if record.get("status") in ("not_found", "budget_exhausted") else "error"
    if not is_boolean(results) and not bindings(results):
        return "empty"
    return "partial" if f1 > 0 else "wrong_answer"


def make_record(
    question: Question,
    gold: Gold,
    answer: Mapping[str, Any] | None,
    trace: Trace,
    *,
    error: str | None = None,
    fold: int | None = None,
    sql_run: SqlRun | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """The predictions.jsonl line of one question: answer, gold, metrics, failure kind, usage and trace.

    `sql_run` is the answer's final SQL run again against the database (an SQL answer: scored against the gold
    SQL's result); `tolerance` is the relative tolerance of execution accuracy's numbers."""
    answer = dict(answer or {})
    events = answer.get("trace") or trace.to_json()
    usage = answer.get("usage") or trace.usage.to_json()
    sparql = answer.get("sparql")
    results = answer.get("results")
    sql = answer.get("sql") if isinstance(answer.get("sql"), str) and answer.get("sql") else None
    gold_results, gold_error, gold_note, outcome = gold.results, gold.error, gold.note, final_outcome(sparql, events)
    ordered = is_ranking(gold.sparql)
    if sql is not None:
        # An SQL answer is the SQL's result (run again, typed) against the gold SQL's; the answer's own rendering aside.
        results = sql_run.results if sql_run is not None else None
        outcome = sql_run.outcome if sql_run is not None else None
        gold_results, gold_note, ordered = gold.sql_results, gold.sql_note, is_ranking(question.sql)
        gold_error = gold.sql_error if question.sql else "the dataset gives no gold SQL to score an SQL answer"
        if sql_run is not None and sql_run.error:
            error = error or f"the answer's SQL failed ({sql_run.outcome}): {sql_run.error}"
    # Malformed results are kept for inspection but not scored (a strategy bug, or a broken gold file).
    bad_results = _problem(results, "results")
    if bad_results:
        error = error or f"the strategy returned malformed results ({bad_results})"
    bad_gold = _problem(gold_results, "gold")
    record: dict[str, Any] = {
        "id": question.id,
        "question": question.question,
        "tags": list(question.tags),
        "language": question.language,
        "fold": fold,
        "strategy": answer.get("strategy"),
        "sparql": sparql,
        "results": results,
        "answer": answer.get("answer"),
        "status": answer.get("status", "error" if error else None),
        "error": error or answer.get("error"),
        "gold": gold_results,
        "gold_source": gold.source,
        "gold_sparql": gold.sparql,
        "gold_error": gold_error or bad_gold,
        "gold_note": gold_note,
        "values_only": gold.values_only,
        "outcome": outcome,
    }
    if question.sql is not None or sql is not None:
        record.update(sql=sql, gold_sql=question.sql, scored_by="sql" if sql is not None else "sparql",
                      ordered=ordered)
    scores = None
    if gold_results is not None and not bad_gold:
        scores = score(gold_results, None if bad_results else results)
        if question.sql is not None:
            match = execution_match(gold_results, None if bad_results else results, ordered=ordered,
                                    tolerance=tolerance)
            scores = replace(scores, ex=match.score)
            record["ex_reason"] = match.reason
    record["metrics"] = scores.to_dict() if scores else None
    # A free-text answer against gold answer strings (the hybrid questions): EM and Superset of the text.
    # Gold IRIs are not text an answer could contain: only literal gold values are scored this way.
    # A short answer (hybrid's quiz-style line) is what EM and Superset compare, as SPAGHETTI compares its
    # generated answer; the full text would fail EM on every sentence and pass Superset too easily.
    short = (answer.get("extra") or {}).get("short_answer")
    record["short_answer"] = short if isinstance(short, str) else None
    text = answer.get("answer")
    parts = gold_strings(gold.results) if gold.values_only and gold.results is not None and not bad_gold else []
    textual = bool(parts) and not any(p.startswith(("http://", "https://")) for p in parts)
    record["text_metrics"] = score_text(parts, text if isinstance(text, str) else None,
                                        short=record["short_answer"]).to_dict() if textual else None
    record["f1"] = headline_f1(scores, gold.values_only) if scores else None
    for name in ("row_f1", "row_em", "set_f1", "ex"):
        record[name] = getattr(scores, name) if scores else None
    record["failure"] = classify(record)
    record["usage"] = usage
    record["trace"] = events
    record["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return record


def _problem(results: Any, what: str) -> str | None:
    if results is None:
        return None
    try:
        check_results(results, what=what)
    except ValueError as exc:
        return str(exc)
    return None


def answer_one(
    strategy: Strategy,
    question: Question,
    gold: Gold,
    kg: KnowledgeGraph,
    *,
    fold: int | None = None,
    sql: SqlRunner | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """Ask one question and build its record; an exception in the strategy becomes the record's error. An answer
    carrying SQL has it run through `sql` (the database's runner) to be scored."""
    trace = Trace()
    try:
        answer = run_question(strategy, question.question, kg, trace).to_json()
        final_sql = answer.get("sql")
        # Only SQL the strategy stands by: without results it declined to answer with it (as a SPARQL answer would).
        stood_by = answer.get("results") is not None and isinstance(final_sql, str) and bool(final_sql)
        sql_run = sql(str(final_sql)) if sql is not None and stood_by else None
        return make_record(question, gold, answer, trace, fold=fold, sql_run=sql_run, tolerance=tolerance)
    except Exception as exc:  # noqa: BLE001 - one failing question must not end the run; the record says why
        message = " ".join(str(exc).split()) or type(exc).__name__
        error = f"{type(exc).__name__}: {message}"[:2000]
        return make_record(question, gold, None, trace, error=error, fold=fold, tolerance=tolerance)


# --------------------------------------------------------------------------- the predictions file


class PredictionLog:
    """predictions.jsonl: read what is there (the last line per id wins), append one flushed line per question."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, dict[str, Any]]:
        """Finished records by id; a line torn by a crash is cut off the file so appends stay valid."""
        if not self.path.is_file():
            return {}
        raw = self.path.read_bytes()
        records: dict[str, dict[str, Any]] = {}
        good_end = 0
        position = 0
        for line in raw.splitlines(keepends=True):
            position += len(line)
            if not line.strip():
                good_end = position
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                break  # only the last line can be torn; anything after it is not trusted either
            if not line.endswith(b"\n") or not isinstance(record, dict) or "id" not in record:
                break
            records[str(record["id"])] = record
            good_end = position
        if good_end < len(raw):
            with self.path.open("r+b") as handle:
                handle.truncate(good_end)
        return records

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record as one line and push it to the disk before returning."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


# --------------------------------------------------------------------------- progress


@dataclass
class RunningStats:
    """Totals so far, for a progress display."""

    total: int = 0
    done: int = 0
    scored: int = 0
    f1_sum: float = 0.0
    errors: int = 0
    cost_usd: float = 0.0

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one finished question."""
        self.done += 1
        if record.get("f1") is not None:
            self.scored += 1
            self.f1_sum += float(record["f1"])
        if record.get("failure") == "error":
            self.errors += 1
        self.cost_usd += float((record.get("usage") or {}).get("cost_usd") or 0.0)

    @property
    def f1(self) -> float | None:
        """Mean headline F1 of the scored questions so far."""
        return self.f1_sum / self.scored if self.scored else None


class EvalListener(Protocol):
    """Told when a run starts and after each question (from the thread that writes the records)."""

    def started(self, stats: RunningStats) -> None:
        """The run begins; `stats` already counts questions finished by earlier runs."""
        ...

    def finished(self, record: Mapping[str, Any], stats: RunningStats) -> None:
        """One more question is on disk."""
        ...


class RichProgress:
    """A rich progress bar with the running F1, error count and cost."""

    def __init__(self, console: Console, *, description: str = "eval") -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self._description = description
        self._task: Any = None

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    @staticmethod
    def _status(stats: RunningStats) -> str:
        f1 = "-" if stats.f1 is None else f"{stats.f1:.3f}"
        cost = f" ${stats.cost_usd:.4f}" if stats.cost_usd else ""
        return f"F1 {f1} · errors {stats.errors}{cost}"

    def started(self, stats: RunningStats) -> None:
        """Show the bar with what earlier runs finished."""
        self._task = self._progress.add_task(
            self._description, total=stats.total, completed=stats.done, status=self._status(stats)
        )

    def finished(self, record: Mapping[str, Any], stats: RunningStats) -> None:
        """Advance the bar and the running F1."""
        self._progress.update(self._task, completed=stats.done, status=self._status(stats))


# --------------------------------------------------------------------------- the run


def _check_run_info(out_dir: Path, info: Mapping[str, Any]) -> dict[str, Any]:
    path = out_dir / RUN_INFO
    if not path.is_file():
        return dict(info)
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"{path}: cannot read ({exc}); remove it or use another --out") from exc
    for key in IDENTITY_KEYS:
        if key in info and key in before and before[key] != info[key]:
            raise EvalError(
                f"{out_dir} holds a run with {key}={before[key]!r}, not {info[key]!r}: "
                "use another --out to start a new run"
            )
    return {**before, **info, "first_started": before.get("first_started", before.get("started"))}


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def run_eval(
    questions: Sequence[Question],
    golds: Mapping[str, Gold],
    kg: KnowledgeGraph,
    strategies: Sequence[Strategy] | StrategyFactory,
    out_dir: Path,
    *,
    workers: int = 4,
    retry_errors: bool = False,
    splits: ExampleSplits | None = None,
    listener: EvalListener | None = None,
    run_info: Mapping[str, Any] | None = None,
    plots: bool = True,
    stop_after: int = STOP_AFTER_SAME_LLM_ERROR,
    sql: SqlRunner | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """Run (or resume) an evaluation in `out_dir` and return its summary.

    `strategies` is one instance per worker thread or a factory that makes them (instances are never
    shared between threads). Questions already in predictions.jsonl are not asked again, except those
    that failed with an error when `retry_errors` is set. Ctrl-C stops at once: every finished question
    is on disk and the summary is written before the KeyboardInterrupt goes on. When `stop_after`
    questions in a row (0: never) fail on the same LLM error, the run stops there: run.json and the
    summary say why in `stopped`, and running the command again asks the rest. `sql` runs answers' SQL against
    the database (SQL datasets); `tolerance` is execution accuracy's relative tolerance for numbers.
    """
    if workers < 1:
        raise EvalError(f"--workers must be at least 1, not {workers}")
    missing = [q.id for q in questions if q.id not in golds]
    if missing:
        raise EvalError(f"no gold entry for {len(missing)} question(s), e.g. {missing[0]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    info = {
        "sparqlnav": __version__,
        **(run_info or {}),
        "selected": [q.id for q in questions],
        "workers": workers,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "stopped": None,
    }
    info = _check_run_info(out_dir, info)
    _write_json(out_dir / RUN_INFO, info)
    if splits is not None:
        _write_json(out_dir / FOLDS, splits.to_json())

    log = PredictionLog(out_dir / PREDICTIONS)
    done = log.load()
    todo = [
        q for q in questions
        if q.id not in done or (retry_errors and done[q.id].get("failure") == "error")
    ]  # fmt: skip
    stats = RunningStats(total=len(questions))
    selected = {q.id for q in questions}
    todo_ids = {q.id for q in todo}
    for qid, record in done.items():
        if qid in selected and qid not in todo_ids:
            stats.add(record)
    if listener is not None:
        listener.started(stats)

    try:
        if todo:
            count = min(workers, len(todo))
            pool = list(strategies) if not callable(strategies) else [strategies() for _ in range(count)]
            if not pool:
                raise EvalError("no strategy instance to run")
            scoring = _Scoring(sql, tolerance)
            stopped = _run_pool(todo, golds, kg, pool[:count], splits, log, stats, listener, stop_after, scoring)
            if stopped is not None:
                _write_json(out_dir / RUN_INFO, {**info, "stopped": stopped})
    finally:
        # Also on Ctrl-C: the summary of what is on disk, so the folder is always readable.
        summary = write_report(out_dir, plots=plots)
    return summary


def _run_pool(
    todo: Sequence[Question],
    golds: Mapping[str, Gold],
    kg: KnowledgeGraph,
    pool: Sequence[Strategy],
    splits: ExampleSplits | None,
    log: PredictionLog,
    stats: RunningStats,
    listener: EvalListener | None,
    stop_after: int = STOP_AFTER_SAME_LLM_ERROR,
    scoring: _Scoring | None = None,
) -> str | None:
    """Ask the questions on the pool's threads, logging each record; why the run stopped early, if it did."""
    scoring = scoring or _Scoring()
    tasks: queue.Queue[Question] = queue.Queue()
    for q in todo:
        tasks.put(q)
    finished: queue.Queue[dict[str, Any]] = queue.Queue()
    stop = threading.Event()

    def work(strategy: Strategy) -> None:
        while not stop.is_set():
            try:
                question = tasks.get_nowait()
            except queue.Empty:
                return
            fold = splits.fold_of(question.id) if splits and _in_splits(splits, question.id) else None
            try:
                record = answer_one(strategy, question, golds[question.id], kg, fold=fold, sql=scoring.sql,
                                    tolerance=scoring.tolerance)
            except Exception as exc:  # noqa: BLE001 - a worker must not die: its question would never finish
                record = _crash_record(question, exc)
            finished.put(record)

    # A local graph starts its server and HTTP client on the first query; start them here, once, so that
    # worker threads do not race to create (and close each other's) clients. A database answered in SQL is left
    # uncopied (issue 35): the copy is made only for a strategy that writes SPARQL.
    if pool and not getattr(pool[0], "in_sql", False):
        kg.sparql_ready()
    if kg.sparql_cost() == 0:
        kg.endpoint.query("ASK {}")
    # Daemon threads: on Ctrl-C the main thread returns at once instead of waiting for in-flight LLM calls;
    # those questions are simply not on disk and a resumed run asks them again.
    threads = [
        threading.Thread(target=work, args=(s,), name=f"eval-{n}", daemon=True)
        for n, s in enumerate(pool)
    ]
    for thread in threads:
        thread.start()
    streak = _Streak(stop_after)
    try:
        received = 0
        while received < len(todo):
            try:
                record = finished.get(timeout=0.2)
            except queue.Empty:
                if not any(t.is_alive() for t in threads) and finished.empty():
                    raise EvalError("the evaluation workers stopped unexpectedly") from None
                continue
            received += 1
            log.append(record)
            stats.add(record)
            if listener is not None:
                listener.finished(record, stats)
            if streak.add(record):
                # Questions still in flight are left unrecorded (as on Ctrl-C): a later run asks them.
                return (
                    f"stopped early: {streak.count} questions in a row failed on the same LLM error "
                    f"({streak.error}); fix the LLM and run the same command again to ask the rest"
                )
        return None
    finally:
        stop.set()


def llm_failure(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """(a key, the error) when a question got no answer because its last LLM request failed, else None.

    The key leaves out numbers, so "no answer within 12 s" and "within 9 s" (a budget's last seconds)
    count as the same failure.
    """
    if record.get("status") not in ("error", "budget_exhausted") or record.get("results") is not None:
        return None
    calls = [e.get("data") or {} for e in record.get("trace") or () if e.get("kind") == "llm_call"]
    if not calls or calls[-1].get("outcome") not in _LLM_FAILURES:
        return None
    last = calls[-1]
    error = str(last.get("error") or last.get("outcome"))
    return f"{last.get('outcome')}|{last.get('status_code')}|{re.sub(r'[0-9.]+', '#', error)}", error


@dataclass(frozen=True)
class _Scoring:
    """How the workers score what they are not told by the gold: answers' SQL and numbers' tolerance."""

    sql: SqlRunner | None = None
    tolerance: float = DEFAULT_TOLERANCE


@dataclass
class _Streak:
    """Consecutive finished questions that failed on the same LLM error."""

    limit: int
    count: int = 0
    key: str | None = None
    error: str = ""

    def add(self, record: Mapping[str, Any]) -> bool:
        """Count one record; True when the streak reaches the limit."""
        failure = llm_failure(record)
        if failure is None:
            self.count, self.key = 0, None
            return False
        key, self.error = failure
        self.count = self.count + 1 if key == self.key else 1
        self.key = key
        return 0 < self.limit <= self.count


def _crash_record(question: Question, exc: Exception) -> dict[str, Any]:
    """The record of a question whose record could not even be built (a bug; the error says which)."""
    return {
        "id": question.id,
        "question": question.question,
        "tags": list(question.tags),
        "sparql": None,
        "results": None,
        "status": "error",
        "error": f"evaluation failed: {type(exc).__name__}: {exc}"[:2000],
        "metrics": None,
        "f1": None,
        "failure": "error",
        "usage": {},
        "trace": [],
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _in_splits(splits: ExampleSplits, question_id: str) -> bool:
    return any(question_id in fold for fold in splits.folds)


# --------------------------------------------------------------------------- a whole dataset


@dataclass(frozen=True)
class EvalSpec:
    """What `sparqlnav eval` was asked to do."""

    dataset: Path
    kg: str
    strategy: str
    out: Path
    limit: int | None = None
    sample: bool = False
    seed: int = 0
    workers: int = 4
    folds: int | None = None
    gold_file: Path | None = None
    refresh_gold: bool = False
    retry_errors: bool = False
    language: str = "en"
    model: str | None = None
    stop_after: int = STOP_AFTER_SAME_LLM_ERROR  # questions in a row failing on one LLM error (0: never stop)
    machine: bool = False  # the strategies answer in the machine shape (label columns dropped)
    tolerance: float = DEFAULT_TOLERANCE  # execution accuracy: relative tolerance of numbers
    options: Mapping[str, Any] = field(default_factory=dict)  # the strategy's own (-o target=sql, --sources)


def default_out_dir(dataset: Path, strategy: str) -> Path:
    """`runs/<dataset file stem>-<strategy>` under the current folder (same command, same folder: resumes)."""
    return Path("runs") / f"{dataset.stem}-{strategy}"


@dataclass
class EvalPlan:
    """Everything decided before the KG is opened: the dataset, the questions, the splits, the strategies."""

    spec: EvalSpec
    dataset: Dataset
    questions: list[Question]
    splits: ExampleSplits | None
    strategies: list[Strategy]


def plan(spec: EvalSpec, make_strategy: Callable[[ExampleSplits | None], Strategy]) -> EvalPlan:
    """Load the dataset, choose the questions and build one strategy per worker (fails before any KG work)."""
    dataset = load_dataset(spec.dataset, language=spec.language)
    questions = select_questions(dataset.questions, limit=spec.limit, sample=spec.sample, seed=spec.seed)
    splits = ExampleSplits.kfold(dataset.questions, spec.folds, seed=spec.seed) if spec.folds else None
    workers = max(1, min(spec.workers, len(questions) or 1))
    strategies = [make_strategy(splits) for _ in range(workers)]
    return EvalPlan(spec, dataset, questions, splits, strategies)


def evaluate(
    work: EvalPlan,
    kg: KnowledgeGraph,
    *,
    home: Path,
    listener: EvalListener | None = None,
    gold_progress: Callable[[Question, Gold], None] | None = None,
    plots: bool = True,
    sql: SqlRunner | None = None,
) -> dict[str, Any]:
    """Freeze the gold answers and run (or resume) the evaluation; returns the summary. `sql` runs SQL against
    the database the KG was mapped from: SQL datasets' gold SQL and answers' SQL (None: no database)."""
    spec = work.spec
    gold_path = spec.gold_file or gold_file_for(spec.dataset, f"{kg.name}\0{kg.description}", home)
    golds = freeze_gold(work.questions, kg.endpoint, gold_path, refresh=spec.refresh_gold, progress=gold_progress,
                        sql=sql)
    info = {
        "dataset": str(spec.dataset),
        "dataset_name": work.dataset.name,
        "dataset_format": work.dataset.format,
        "dataset_sha256": hashlib.sha256(spec.dataset.read_bytes()).hexdigest(),
        "kg": spec.kg,
        "strategy": work.strategies[0].name,
        # build -o target=sql and build in SPARQL are different experiments under one strategy name.
        "options": {k: list(v) if isinstance(v, tuple | list) else v for k, v in sorted(spec.options.items())},
        "model": spec.model,
        "limit": spec.limit,
        "sample": spec.sample,
        "seed": spec.seed,
        "folds": spec.folds,
        "gold_file": str(gold_path),
        "answer_shape": "machine" if spec.machine else "human",
        "tolerance": spec.tolerance,
    }
    return run_eval(
        work.questions,
        golds,
        kg,
        work.strategies,
        spec.out,
        workers=len(work.strategies),
        retry_errors=spec.retry_errors,
        splits=work.splits,
        listener=listener,
        run_info=info,
        plots=plots,
        stop_after=spec.stop_after,
        sql=sql,
        tolerance=spec.tolerance,
    )
