"""Verbs that measure: `score` (existing predictions), `eval` (a benchmark run) and `report` (a run's report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from sparqlnav.faces.cli.common import (
    CliError,
    KgOpt,
    LlmRetriesOpt,
    LlmTimeoutOpt,
    MachineOpt,
    OptionOpt,
    SourcesOpt,
    TimeoutOpt,
    ToleranceOpt,
    err,
    made_strategy,
    one_line,
    opened,
    option_pairs,
    out,
    settings_for,
    strategy_knobs,
)
from sparqlnav.faces.output import TABLE_JSON, FormatOpt, JsonOpt, OutputFormat, chosen_format
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import Settings

if TYPE_CHECKING:
    from sparqlnav.evaluation.sql_runs import DatabaseSql


def score(
    file: Annotated[
        Path,
        typer.Argument(
            help="JSONL file, one {id, gold, predicted} object per line (SPARQL 1.1 JSON results; predicted may be null)."
        ),
    ],
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    judge: Annotated[
        bool, typer.Option("--judge", help="Also ask the configured LLM whether each free-text answer matches the gold.")
    ] = False,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    tolerance: ToleranceOpt = None,
) -> None:
    """Score existing predictions: per-question and overall row EM/F1, set P/R/F1 (macro and micro), Superset;
    execution accuracy for SQL datasets' lines and SQL tables ({columns, rows}); free-text answers
    (`{id, question, gold: [...], answer}` lines, or hybrid eval lines): EM, Superset, judge."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="score") is OutputFormat.json
    from sparqlnav.evaluation.execution import DEFAULT_TOLERANCE
    from sparqlnav.evaluation.judge import LLMJudge
    from sparqlnav.evaluation.score import ScoreFileError, render_report, report_json, score_file

    judge_fn = None
    if judge:
        llm = settings_for(None, llm_model).llm
        if llm is None:
            raise CliError("--judge needs an LLM: set OPENAI_BASE_URL, OPENAI_API_KEY and SPARQLNAV_LLM_MODEL")
        judge_fn = LLMJudge(llm)
    try:
        report = score_file(file, judge=judge_fn, tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance)
    except ScoreFileError as error:
        err().print(f"error: {one_line(error)}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    finally:
        if judge_fn is not None:
            judge_fn.close()
    if json_output:
        print(json.dumps(report_json(report), ensure_ascii=False))
    else:
        render_report(report, out())


def eval_command(
    dataset_file: Annotated[
        Path,
        typer.Argument(
            metavar="DATASET_FILE",
            help="QALD JSON, text2sparql YAML, SPINACH JSON, or a JSON/JSONL list of {question, sparql}.",
        ),
    ],
    kg: KgOpt = "demo",
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="auto, lexical, explore, retrieve, …")] = "auto",
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Run folder (default runs/<dataset>-<strategy>); the same folder resumes."),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only N questions (the first N, or N sampled with --sample).")] = None,
    sample: Annotated[bool, typer.Option("--sample", help="Take a seeded random sample instead of the first N.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --sample and --folds.")] = 0,
    workers: Annotated[int, typer.Option("--workers", "-j", help="Questions in flight at once.")] = 4,
    folds: Annotated[
        int | None,
        typer.Option("--folds", help="k-fold example splits, for strategies that retrieve examples from the same dataset."),
    ] = None,
    gold: Annotated[
        Path | None, typer.Option("--gold", help="Frozen gold answers (JSONL; default: under the sparqlnav home).")
    ] = None,
    refresh_gold: Annotated[bool, typer.Option("--refresh-gold", help="Run the gold queries again.")] = False,
    retry_errors: Annotated[bool, typer.Option("--retry-errors", help="Redo questions that ended in an error.")] = False,
    stop_after: Annotated[
        int,
        typer.Option("--stop-after", min=0, help="Stop when this many questions in a row fail on the same LLM error (0: never)."),
    ] = 3,
    compare: Annotated[
        list[Path] | None, typer.Option("--compare", help="Another run folder to compare with (repeatable).")
    ] = None,
    language: Annotated[str, typer.Option("--language", help="Question language.")] = "en",
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Do not draw PNG plots.")] = False,
    sources: SourcesOpt = None,
    format: FormatOpt = None,
    machine: MachineOpt = False,
    json_output: JsonOpt = False,
    tolerance: ToleranceOpt = None,
    option: OptionOpt = None,
) -> None:
    """Benchmark a strategy on a dataset: predictions.jsonl, summary.json, report.md and plots in the run folder.
    A SQL dataset ({question, sql, sparql}) over a database KG is also scored by execution accuracy."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="eval") is OutputFormat.json
    from sparqlnav.datasets import DatasetFormatError
    from sparqlnav.evaluation.execution import DEFAULT_TOLERANCE
    from sparqlnav.evaluation.report import ReportError, compare_runs, summary_table
    from sparqlnav.evaluation.runner import (
        EvalError,
        EvalSpec,
        RichProgress,
        default_out_dir,
        evaluate,
        plan,
    )
    from sparqlnav.strategies import REGISTRY, StrategyUnavailable, make_strategy
    from sparqlnav.strategies.machine import MachineShape

    settings = settings_for(timeout, llm_model, llm_timeout, llm_retries)
    llm = settings.llm
    knobs = strategy_knobs(strategy, sources, option)
    try:
        probe = made_strategy(strategy, llm, settings, knobs)
    except StrategyUnavailable as exc:
        raise CliError(str(exc)) from None

    def build(splits: Any) -> Any:
        options = {**knobs, **({"example_splits": splits} if splits is not None else {})}
        try:
            made = make_strategy(strategy, llm, settings=settings, **options)
            return MachineShape(made) if machine else made
        except TypeError as exc:
            raise CliError(f"the {probe.name} strategy does not take example splits (--folds): {exc}") from None

    spec = EvalSpec(
        dataset=dataset_file,
        kg=kg,
        strategy=probe.name,
        out=out_dir or default_out_dir(dataset_file, probe.name + (f"-{sources.replace(',', '+')}" if sources else "")
                                       + "".join(f"-{k}={v}" for k, v in sorted(option_pairs(option).items()))
                                       + ("-machine" if machine else "")),
        limit=limit,
        sample=sample,
        seed=seed,
        workers=workers,
        folds=folds,
        gold_file=gold,
        refresh_gold=refresh_gold,
        retry_errors=retry_errors,
        language=language,
        model=llm.model if llm is not None and REGISTRY.get(probe.name, ("", True))[1] else None,
        stop_after=stop_after,
        machine=machine,
        tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance,
        options=knobs,
    )
    console = err()
    try:
        work = plan(spec, build)  # the dataset and strategies are checked before the KG is opened
        with opened(kg, settings) as graph, RichProgress(console, description=spec.out.name) as progress:
            warn_if_not_the_datasets_graph(work.questions, graph, console)
            summary = evaluate(work, graph, home=settings.paths.home, listener=progress, plots=not no_plots,
                               sql=database_sql(kg, settings))
    except KeyboardInterrupt:
        console.print(
            f"interrupted: finished questions are saved in {spec.out}; run the same command again to resume",
            markup=False, highlight=False,
        )  # fmt: skip
        raise typer.Exit(130) from None
    except (DatasetFormatError, EvalError, ReportError) as exc:
        raise CliError(str(exc)) from None
    comparison = None
    if compare:
        try:
            comparison = compare_runs([spec.out, *compare], spec.out / "compare", plots=not no_plots)
        except ReportError as exc:
            raise CliError(str(exc)) from None
    if json_output:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        out().print(summary_table(summary, title=f"{spec.out}"))
        console.print(f"report: {spec.out / 'report.md'}", markup=False, highlight=False)
        if comparison is not None:
            out().print(comparison, markup=False, highlight=False)
    if summary.get("stopped"):
        raise CliError(f"the run {summary['stopped']}")


def database_sql(kg: str, settings: Settings) -> DatabaseSql | None:
    """The SQL runner of an evaluation over a database KG (its gold SQL and answers' SQL), None for other KGs."""
    from sparqlnav.evaluation.sql_runs import DatabaseSql
    from sparqlnav.graph.relational import database_spec

    database = database_spec(kg)
    if database is None:
        return None
    limits = settings.limits
    return DatabaseSql(database, timeout_s=limits.timeout_s, max_rows=limits.max_rows, max_bytes=limits.max_bytes)


def warn_if_not_the_datasets_graph(questions: Any, graph: KnowledgeGraph, console: Console) -> None:
    """Warn when the graph lacks most IRIs the dataset's reference queries name (a wrong or missing --kg)."""
    from sparqlnav.evaluation.coverage import dataset_coverage

    coverage = dataset_coverage((q.sparql for q in questions), graph.endpoint)
    if coverage is None or not coverage.poor:
        return
    console.print(
        f"warning: only {len(coverage.found)} of {len(coverage.checked)} IRIs the dataset's queries use occur in "
        f"{graph.name} (e.g. <{coverage.missing[0]}>): this is probably not the dataset's graph, and answers "
        "will score 0; give the right one with --kg",
        style="yellow", markup=False, highlight=False,
    )  # fmt: skip


def report_command(
    runs: Annotated[list[Path], typer.Argument(metavar="DIR...", help="Run folders of `sparqlnav eval`.")],
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Where to write compare.md and plots when comparing runs.")
    ] = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Do not draw PNG plots.")] = False,
    format: FormatOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Rebuild a run's summary.json, report.md and plots; with several folders, compare them side by side."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="report") is OutputFormat.json
    from sparqlnav.evaluation.report import ReportError, compare_runs, summary_table, write_report

    try:
        if len(runs) == 1 and out_dir is None:
            summary = write_report(runs[0], plots=not no_plots)
            if json_output:
                print(json.dumps(summary, ensure_ascii=False))
            else:
                out().print(summary_table(summary, title=str(runs[0])))
                err().print(f"report: {runs[0] / 'report.md'}", markup=False, highlight=False)
            return
        summaries = [write_report(run, plots=not no_plots) for run in runs]
        text = compare_runs(runs, out_dir, plots=not no_plots)
    except ReportError as exc:
        raise CliError(str(exc)) from None
    if json_output:
        print(json.dumps({"runs": [{"path": str(r), "summary": s} for r, s in zip(runs, summaries, strict=True)]}, ensure_ascii=False))
    else:
        out().print(text, markup=False, highlight=False)



