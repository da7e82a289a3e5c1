"""The `sparqlnav` command line: each verb is a thin layer over the library."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sparqlnav.graph import Outcome
from sparqlnav.kg import KnowledgeGraph, open_kg
from sparqlnav.results import ResultTable
from sparqlnav.settings import Settings
from sparqlnav.trace import Event, Trace

app = typer.Typer(
    name="sparqlnav",
    help="Ask knowledge graphs questions in plain language; look things up; write, check and run SPARQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

KgOpt = Annotated[
    str,
    typer.Option(
        "--kg",
        help="RDF file or folder, http(s):// SPARQL endpoint, 'demo' or 'wikidata'.",
        envvar="SPARQLNAV_KG",
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", help="Time limit per SPARQL query, in seconds (default 60)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]


class CliError(Exception):
    """An error shown as one line, exit code 1."""


def out() -> Console:
    """Console for results (stdout)."""
    return Console(soft_wrap=True)


def err() -> Console:
    """Console for progress and messages (stderr)."""
    return Console(stderr=True, soft_wrap=True)


def settings_for(timeout: float | None) -> Settings:
    """Settings from the environment, with the command's time limit."""
    return Settings.from_env().with_timeout(timeout)


@contextmanager
def opened(kg: str, settings: Settings) -> Iterator[KnowledgeGraph]:
    """Open a KG, showing a progress bar while files load the first time."""
    console = err()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task("opening", total=None)

        def report(message: str, done: int, total: int) -> None:
            progress.update(task, description=message, completed=done, total=total)

        graph = open_kg(kg, settings, progress=report)
    try:
        yield graph
    finally:
        graph.close()


def read_query(query: str) -> str:
    """A query given inline, as a file path, or '-' for standard input."""
    if query == "-":
        return sys.stdin.read()
    if (
        len(query) < 4096
        and "\n" not in query
        and not query.lstrip()
        .upper()
        .startswith(("SELECT", "ASK", "PREFIX", "CONSTRUCT", "DESCRIBE", "BASE"))
    ):
        path = Path(query)
        if path.is_file():
            return path.read_text()
    return query


def rich_table(table: ResultTable, graph: KnowledgeGraph) -> Table:
    """A table for people: compact IRIs with labels."""
    iris = [t.value for row in table.rows for t in row.values() if t.kind == "uri"]
    labels = graph.names.labels_of(iris)
    rt = Table(show_lines=False)
    for v in table.vars:
        rt.add_column("?" + v, overflow="fold")
    for row in table.display_rows(graph.prefixes, labels):
        rt.add_row(*row)
    return rt


class Format(StrEnum):
    """Output formats of `sparql`."""

    table = "table"
    json = "json"
    csv = "csv"


@app.command()
def sparql(
    query: Annotated[str, typer.Argument(help="The query, a file holding it, or '-' for stdin.")],
    kg: KgOpt = "demo",
    format: Annotated[
        Format, typer.Option("--format", "-f", help="table, json (SPARQL 1.1 JSON) or csv.")
    ] = Format.table,
    timeout: TimeoutOpt = None,
) -> None:
    """Run a read-only SPARQL query."""
    text = read_query(query)
    with opened(kg, settings_for(timeout)) as graph:
        result = graph.endpoint.query(text)
        if not result.ok:
            raise CliError(result.describe())
        assert result.table is not None
        table = result.table
        if format is Format.json:
            sys.stdout.write(json.dumps(table.to_sparql_json(), ensure_ascii=False) + "\n")
        elif format is Format.csv:
            sys.stdout.write(table.to_csv())
        elif table.is_boolean:
            out().print("true" if table.boolean else "false")
        else:
            out().print(rich_table(table, graph))
            err().print(f"{len(table)} row(s) in {result.seconds:.2f} s")
        if table.truncated:
            err().print(
                f"[yellow]warning:[/] the result was cut at a cap ({table.cap}); more rows exist"
            )


@app.command()
def search(
    text: Annotated[str, typer.Argument(help="A name, possibly partial or misspelt.")],
    kg: KgOpt = "demo",
    json_output: JsonOpt = False,
    limit: Annotated[
        int, typer.Option("--limit", help="How many entities (properties: half as many).")
    ] = 8,
    timeout: TimeoutOpt = None,
) -> None:
    """Find entities and properties by label, alias or description."""
    from sparqlnav.lookup import search as do_search

    with opened(kg, settings_for(timeout)) as graph:
        found = do_search(graph, text, entities=limit, properties=max(1, limit // 2))
        if json_output:
            print(json.dumps(found.to_json(), ensure_ascii=False))
        else:
            out().print(found.to_text(graph), markup=False, highlight=False)


@app.command()
def entity(
    ident: Annotated[
        str, typer.Argument(metavar="ID", help="IRI, prefixed name, Q/P id, or a name to look up.")
    ],
    kg: KgOpt = "demo",
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Show an entity's outgoing edges, with qualifiers where the KG has them."""
    from sparqlnav.lookup import entity as do_entity
    from sparqlnav.lookup import resolve_or_search

    with opened(kg, settings_for(timeout)) as graph:
        page = do_entity(graph, resolve_or_search(graph, ident))
        if json_output:
            print(json.dumps(page.to_json(), ensure_ascii=False))
        else:
            out().print(page.to_text(graph), markup=False, highlight=False)


def _show_event(console: Console, event: Event) -> None:
    """One readable line (or block) per trace event, for the terminal."""
    d = event.data
    style = {"thought": "cyan", "action": "bold", "feedback": "yellow", "rollback": "magenta", "error": "red"}.get(event.kind, "dim")
    if event.kind == "thought":
        text = str(d.get("text", ""))
    elif event.kind == "action":
        text = f"{d.get('tool')}({json.dumps(d.get('arguments', {}), ensure_ascii=False)})"
    elif event.kind == "observation":
        text = str(d.get("text", ""))
        text = text if len(text) < 800 else text[:800] + " …"
    elif event.kind == "sparql":
        first = " ".join(str(d.get("query", "")).split())[:140]
        text = f"{d.get('outcome')} {d.get('rows') if d.get('rows') is not None else ''} ({d.get('seconds')} s): {first}"
    elif event.kind == "llm_call":
        text = f"{d.get('input_tokens', 0)} in / {d.get('output_tokens', 0)} out tokens, {d.get('latency_s', 0)} s"
    elif event.kind == "answer":
        return
    else:
        text = str(d.get("text") or d.get("message") or json.dumps(d, ensure_ascii=False, default=str)[:300])
    console.print(f"[{style}]{event.kind:>11}[/] ", end="")
    console.print(text, markup=False, highlight=False)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in plain language.")],
    kg: KgOpt = "demo",
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="auto, lexical, explore, retrieve, …")] = "auto",
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not show the steps.")] = False,
) -> None:
    """Answer a question: find entities, write and run SPARQL, explain the result."""
    from sparqlnav.llm import LLMConfig
    from sparqlnav.strategies import make_strategy

    overrides = {"model": llm_model} if llm_model else {}
    llm = LLMConfig.from_env(os.environ, **overrides)
    chosen = make_strategy(strategy, llm)
    console = err()
    if strategy == "auto" and llm is None and not json_output:
        console.print("no LLM configured (OPENAI_BASE_URL / SPARQLNAV_LLM_MODEL): using the lexical strategy", style="dim")
    with opened(kg, settings_for(timeout)) as graph:
        trace = Trace()
        if not json_output and not quiet:
            trace.subscribe(lambda e: _show_event(console, e))
        result = chosen.run(question, graph, trace)
        trace.finish()
        if json_output:
            print(json.dumps(result.to_json(), ensure_ascii=False, default=str))
            return
        screen = out()
        if result.sparql:
            screen.rule("SPARQL", style="dim")
            screen.print(result.sparql.strip(), markup=False, highlight=False)
        if result.results is not None and not result.results.is_boolean and result.results.rows:
            screen.print(rich_table(result.results, graph))
        screen.rule("Answer", style="dim")
        screen.print(result.answer, markup=False, highlight=False)
        u = result.trace.usage
        console.print(
            f"{result.strategy} · {result.status} · {u.sparql_queries} queries · {u.llm_calls} LLM calls "
            f"({u.input_tokens}+{u.output_tokens} tokens) · {u.seconds:.2f} s",
            style="dim",
        )
        if result.status == "error":
            raise typer.Exit(1)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:500]


def main(argv: list[str] | None = None) -> Any:
    """Entry point: run the app; any failure is one line on stderr and a non-zero exit."""
    try:
        return app(args=argv, standalone_mode=False)
    except CliError as exc:
        err().print(f"error: {_one_line(exc)}", markup=False, highlight=False)
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err().print("aborted", markup=False)
        sys.exit(130)
    except Exception as exc:
        # Usage errors of the CLI framework know how to show themselves (typer vendors click).
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            sys.exit(exc.exit_code)
        if os.environ.get("SPARQLNAV_DEBUG"):
            raise
        err().print(f"error: {_one_line(exc)}", markup=False, highlight=False)
        sys.exit(1)


def outcome_exit_code(outcome: Outcome) -> int:
    """Exit code for a query outcome: 0 ran, 1 otherwise."""
    return 0 if outcome in (Outcome.OK, Outcome.EMPTY) else 1


@app.command()
def score(
    file: Annotated[
        Path,
        typer.Argument(
            help="JSONL file, one {id, gold, predicted} object per line (SPARQL 1.1 JSON results; predicted may be null)."
        ),
    ],
    json_output: JsonOpt = False,
) -> None:
    """Score existing predictions: per-question and overall row EM/F1, set P/R/F1 (macro and micro), Superset."""
    from sparqlnav.score import ScoreFileError, render_report, report_json, score_file

    try:
        report = score_file(file)
    except ScoreFileError as error:
        err().print(f"error: {_one_line(error)}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    if json_output:
        print(json.dumps(report_json(report), ensure_ascii=False))
    else:
        render_report(report, out())
