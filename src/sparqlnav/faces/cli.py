"""The `sparqlnav` command line: each verb is a thin layer over the library."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from sparqlnav.answer import Answer
from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.logs import LogFormat
from sparqlnav.faces.output import (
    TABLE_JSON,
    TABLE_JSON_CSV,
    DataConsole,
    FormatOpt,
    JsonOpt,
    OutputFormat,
    cell,
    check_form,
    chosen_format,
    write_json,
    write_records,
    write_result,
)
from sparqlnav.faces.progress import human_size, reporting
from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import near_name, open_kg
from sparqlnav.graph.progress import ProgressStep
from sparqlnav.graph.results import ResultTable, shown_labels
from sparqlnav.settings import ConfigError, Settings
from sparqlnav.trace import Event

if TYPE_CHECKING:
    from sparqlnav.evaluation.sql_runs import DatabaseSql
    from sparqlnav.retrieval.examples import Example
    from sparqlnav.sparql.check import Issue

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
    typer.Option("--timeout", min=0.001, help="Time limit per SPARQL query, in seconds (default 60)."),
]
LlmTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--llm-timeout", min=0.001, help="Seconds one LLM request may take in all (else SPARQLNAV_LLM_TIMEOUT, 120)."
    ),
]
LlmRetriesOpt = Annotated[
    int | None,
    typer.Option("--llm-retries", min=0, help="Retries of a failed LLM request (else SPARQLNAV_LLM_RETRIES, 4)."),
]


class CliError(SparqlnavError):
    """An error shown as one line, exit code 1."""


def out() -> Console:
    """Console for results (stdout): data in it is never read as markup codes, emoji codes or control sequences."""
    return DataConsole()


def err() -> Console:
    """Console for progress and messages (stderr), as safe for data as `out()`."""
    return DataConsole(stderr=True)


def settings_for(
    timeout: float | None,
    llm_model: str | None = None,
    llm_timeout: float | None = None,
    llm_retries: int | None = None,
) -> Settings:
    """Settings from the environment, with the command's time limit and LLM options."""
    overrides = {
        "SPARQLNAV_LLM_MODEL": llm_model,
        "SPARQLNAV_LLM_TIMEOUT": None if llm_timeout is None else repr(llm_timeout),
        "SPARQLNAV_LLM_RETRIES": None if llm_retries is None else str(llm_retries),
    }
    return Settings.from_env(overrides=overrides).with_timeout(timeout)


@contextmanager
def opened(kg: str, settings: Settings) -> Iterator[KnowledgeGraph]:
    """Open a KG, showing the progress of a first load (and a summary line of what it built) on a terminal."""
    with reporting(err(), settings.progress) as reporter:
        graph = open_kg(kg, settings, reporter=reporter)
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
        if not any(c.isspace() for c in query):
            # One word that is no query form: a file name, and that file does not exist.
            raise CliError(f"no such file: {query}{near_name(path)}")
    return query


def declare_known_prefixes(text: str, graph: KnowledgeGraph) -> str:
    """The query with PREFIX lines added for undeclared prefixes the graph knows (said on stderr); an
    undeclared prefix the graph does not know is an error naming it."""
    from sparqlnav.sparql.parser import SparqlSyntaxError, parse_query
    from sparqlnav.sparql.prefixes import declare_prefixes

    try:
        undefined = parse_query(text, collect_undefined_prefixes=True).undefined_prefixes
    except SparqlSyntaxError:
        return text  # the engine reports syntax errors itself
    unknown = [p for p in undefined if p not in graph.prefixes]
    if unknown:
        raise CliError(
            f"the prefix '{unknown[0]}:' is not declared and {graph.name} does not know it: "
            f"add PREFIX {unknown[0]}: <namespace IRI>"
        )
    if not undefined:
        return text
    known = {p: ns for p, ns in graph.prefixes.items() if p in undefined}
    err().print(
        "added missing " + ", ".join(f"PREFIX {p}: <{ns}>" for p, ns in known.items()) + f" (from {graph.name})",
        style="dim", markup=False, highlight=False,
    )  # fmt: skip
    return declare_prefixes(text, known).query


def rich_table(table: ResultTable, graph: KnowledgeGraph) -> Table:
    """A table for people: compact IRIs with labels."""
    labels = shown_labels(table, graph.names, head=len(table), tail=0)
    rt = Table(show_lines=False)
    for v in table.vars:
        rt.add_column("?" + v, overflow="fold")
    for row in table.display_rows(graph.prefixes, labels):
        rt.add_row(*(cell(value) for value in row))
    return rt


@app.command()
def sparql(
    query: Annotated[str, typer.Argument(help="The query, a file holding it, or '-' for stdin.")],
    kg: KgOpt = "demo",
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Run a read-only SPARQL query."""
    from sparqlnav.sparql.guard import query_form

    fmt = chosen_format(format, json_output, verb="sparql")
    text = read_query(query)
    check_form(fmt, query_form(text))  # before the graph opens: a wrong format costs no load
    with opened(kg, settings_for(timeout)) as graph:
        text = declare_known_prefixes(text, graph)
        result = graph.endpoint.query(text)
        if not result.ok:
            raise CliError(result.describe())
        assert result.table is not None
        table = result.table
        if fmt is not OutputFormat.table:
            write_result(table, fmt, form=query_form(text), prefixes=graph.prefixes.mapping)
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
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    limit: Annotated[
        int, typer.Option("--limit", help="How many entities (properties: half as many).")
    ] = 8,
    timeout: TimeoutOpt = None,
) -> None:
    """Find entities and properties by label, alias or description."""
    from sparqlnav.tools.lookup import search as do_search

    fmt = chosen_format(format, json_output, allowed=TABLE_JSON_CSV, verb="search")
    if not text.strip():
        raise CliError("nothing to search for: the text is empty")
    with opened(kg, settings_for(timeout)) as graph:
        found = do_search(graph, text, entities=limit, properties=max(1, limit // 2))
        if fmt is OutputFormat.json:
            write_json(found.to_json())
        elif fmt is OutputFormat.csv:
            data = found.to_json()
            hits = [{**h, "kind": kind} for kind, key in (("entity", "entities"), ("property", "properties")) for h in data[key]]
            write_records(hits, [*dict.fromkeys(k for h in hits for k in h)] or ["iri", "kind"])
        else:
            out().print(found.to_text(graph), markup=False, highlight=False)


@app.command()
def entity(
    ident: Annotated[
        str, typer.Argument(metavar="ID", help="IRI, prefixed name, Q/P id, or a name to look up.")
    ],
    kg: KgOpt = "demo",
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Show an entity's outgoing edges, with qualifiers where the KG has them."""
    from sparqlnav.tools.lookup import entity as do_entity
    from sparqlnav.tools.lookup import resolve_name

    fmt = chosen_format(format, json_output, allowed=TABLE_JSON_CSV, verb="entity")
    with opened(kg, settings_for(timeout)) as graph:
        iri, hit = resolve_name(graph, ident)
        if hit is not None and fmt is OutputFormat.table:
            err().print(f"{ident!r} → {graph.prefixes.compact(iri)} ({hit.label})", style="dim", markup=False)
        page = do_entity(graph, iri)
        if fmt is OutputFormat.json:
            write_json(page.to_json())
        elif fmt is OutputFormat.csv:
            edges = [
                {"property": e["property"], "property_label": e["label"], "value": v["value"]["value"],
                 "value_label": v["label"], "qualifiers": [f"{q['property']}={q['value']['value']}" for q in v["qualifiers"]]}
                for e in page.to_json()["edges"] for v in e["values"]
            ]  # fmt: skip
            write_records(edges, ["property", "property_label", "value", "value_label", "qualifiers"])
        else:
            out().print(page.to_text(graph), markup=False, highlight=False)


class _StepPrinter:
    """Shows trace events as they happen; a run of many queries in a row (the lexical strategy tries
    dozens) is cut to its first few, with a count of the rest, so the steps stay readable."""

    def __init__(self, console: Console, max_queries_in_a_row: int = 6) -> None:
        self.console = console
        self.limit = max_queries_in_a_row
        self.in_a_row = 0

    def __call__(self, event: Event) -> None:
        if event.kind == "sparql":
            self.in_a_row += 1
            if self.in_a_row > self.limit:
                return
        else:
            self.close()
        _show_event(self.console, event)

    def close(self) -> None:
        """Report queries that were not shown."""
        if self.in_a_row > self.limit:
            self.console.print(f"{'':>12}… and {self.in_a_row - self.limit} more queries", style="dim")
        self.in_a_row = 0


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
    elif event.kind == "sql":  # a statement the build strategy's SQL target ran on the database
        first = " ".join(str(d.get("query", "")).split())[:140]
        outcome = f"ok {d.get('rows')}" if d.get("ok") else f"error ({d.get('error')})"
        text = f"{outcome} ({d.get('ms')} ms): {first}"
    elif event.kind == "llm_call":
        text = f"{d.get('input_tokens', 0)} in / {d.get('output_tokens', 0)} out tokens, {d.get('latency_s', 0)} s"
    elif event.kind == "answer":
        return
    else:
        text = str(d.get("text") or d.get("message") or json.dumps(d, ensure_ascii=False, default=str)[:300])
    console.print(f"[{style}]{event.kind:>11}[/] ", end="")
    console.print(text, markup=False, highlight=False)


SourcesOpt = Annotated[
    str | None,
    typer.Option("--sources", help="hybrid only: the sources to use, e.g. kg,text,tables,claims (the default: all)."),
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option("--option", "-o", help="A strategy option KEY=VALUE (repeatable), e.g. -o target=sql for build on a database."),
]
MachineOpt = Annotated[
    bool,
    typer.Option("--machine", help="Answer shape for machines: drop columns that only label another projected entity."),
]
ToleranceOpt = Annotated[
    float | None,
    typer.Option("--tolerance", min=0.0, help="Execution accuracy: relative tolerance of numbers (default 1e-6)."),
]


def option_pairs(pairs: list[str] | None) -> dict[str, Any]:
    """`-o KEY=VALUE` options as keyword arguments: true/false as booleans, numbers as numbers, else the text."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"-o {pair!r}: write KEY=VALUE, e.g. -o target=sql")
        text = value.strip()
        parsed: Any = {"true": True, "false": False}.get(text.lower(), text)
        if isinstance(parsed, str):
            with contextlib.suppress(ValueError):
                parsed = float(text) if any(c in text for c in ".eE") else int(text)
        out[key.strip().replace("-", "_")] = parsed
    return out


def strategy_knobs(strategy: str, sources: str | None, options: list[str] | None = None) -> dict[str, Any]:
    """Options for `make_strategy` from the command line: `-o KEY=VALUE` for any strategy (the one way), and
    `--sources` for the hybrid strategy."""
    knobs = option_pairs(options)
    if sources is None:
        return knobs
    if strategy != "hybrid":
        raise CliError("--sources is an option of the hybrid strategy (--strategy hybrid)")
    from sparqlnav.strategies.hybrid import parse_sources

    try:
        return {**knobs, "sources": parse_sources(sources)}
    except ValueError as exc:
        raise CliError(str(exc)) from None


def made_strategy(strategy: str, llm: Any, settings: Settings, knobs: dict[str, Any]) -> Any:
    """The strategy with its options; an option it does not take, or a bad value, is a one-line error."""
    from sparqlnav.strategies import make_strategy

    try:
        return make_strategy(strategy, llm, settings=settings, **knobs)
    except (TypeError, ValueError) as exc:
        if not knobs:
            raise
        raise CliError(f"-o: {exc}") from None


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in plain language.")],
    kg: KgOpt = "demo",
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="auto, lexical, explore, retrieve, …")] = "auto",
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show every step as it happens, the final query and its rows.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the answer: no summary line.")] = False,
    sources: SourcesOpt = None,
    machine: MachineOpt = False,
    option: OptionOpt = None,
) -> None:
    """Answer a question: find entities, write and run SPARQL (or SQL: --strategy build -o target=sql on a
    database), explain the result.

    Prints the answer and one summary line (-v: the steps, the query and its rows too). Exits 0 when the run
    ended, answered or not found, in every format (csv/turtle/ntriples then write no rows), and 1 on an error."""
    from sparqlnav.api import ask as ask_question

    fmt = chosen_format(format, json_output, verb="ask")
    for_programs = fmt is not OutputFormat.table  # output a program reads: no steps, no chatter
    if not question.strip():
        raise CliError("no question: the question is empty")
    settings = settings_for(timeout, llm_model, llm_timeout, llm_retries)
    llm = settings.llm
    # Made before the KG opens, so an unavailable strategy fails at once rather than after loading a graph.
    chosen = made_strategy(strategy, llm, settings, strategy_knobs(strategy, sources, option))
    if machine:
        from sparqlnav.strategies.machine import MachineShape

        chosen = MachineShape(chosen)
    console = err()
    if strategy == "auto" and llm is None and not for_programs:
        console.print("no LLM configured (OPENAI_BASE_URL / SPARQLNAV_LLM_MODEL): using the lexical strategy", style="dim")
    with opened(kg, settings) as graph:
        shown = _StepPrinter(console)
        result = ask_question(
            question, kg=graph, strategy=chosen, on_event=shown if verbose and not for_programs else None
        )
        shown.close()
        if fmt is OutputFormat.json:
            write_json(result.to_json())
        elif for_programs:
            _write_answer_result(result, fmt, graph)
        else:
            _show_answer(result, graph, console, verbose=verbose, summary=not quiet)
        if result.status == "error":
            raise typer.Exit(1)


def _write_answer_result(result: Answer, fmt: OutputFormat, graph: KnowledgeGraph) -> None:
    """The rows of an answer's query in csv, turtle or ntriples (the answer's words go to stderr)."""
    from sparqlnav.sparql.guard import query_form

    if result.results is not None and result.sparql is not None:
        write_result(result.results, fmt, form=query_form(result.sparql), prefixes=graph.prefixes.mapping)
    elif result.results is not None and result.sql is not None:  # a SELECT's rows
        write_result(result.results, fmt, form="SELECT", prefixes=graph.prefixes.mapping)
    # No query (not found, or an error): no rows to write; the words say why, and the exit code is the run's.
    err().print(result.text, markup=False, highlight=False)


def _show_answer(
    result: Answer, graph: KnowledgeGraph, console: Console, *, verbose: bool = True, summary: bool = True
) -> None:
    """The answer on stdout (with `verbose`, the final SPARQL or SQL and its rows before it); what it cost on
    `console`."""
    screen = out()
    if verbose:
        if result.query:
            screen.rule(result.query_language, style="dim")
            screen.print(result.query.strip(), markup=False, highlight=False)
        if result.results is not None and not result.results.is_boolean and result.results.rows:
            screen.print(rich_table(result.results, graph))
        screen.rule("Answer", style="dim")
    screen.print(result.text, markup=False, highlight=False)
    for item in result.extra.get("evidence", []):
        mark = "cited" if item["used"] else "not cited"
        screen.print(f"[{item['id']}] {item['kind']} {item['ref']} ({mark}): {item['text'][:200]}",
                     markup=False, highlight=False, style="dim")
    for branch, why in result.extra.get("failed", {}).items():
        console.print(f"source {branch} failed: {why}", markup=False, highlight=False, style="yellow")
    if not summary:
        return
    u = result.trace.usage
    queries = f"{u.sql_queries} SQL queries" if u.sql_queries and not u.sparql_queries else f"{u.sparql_queries} queries"
    console.print(
        f"{result.strategy} · {result.status} · {queries} · {u.llm_calls} LLM calls "
        f"({u.input_tokens}+{u.output_tokens} tokens) · {u.seconds:.2f} s" + ("" if verbose else " · -v for the steps"),
        style="dim", markup=False, highlight=False,
    )


CHAT_HELP = "Ask a question; a follow-up builds on the answers before it. /new starts over, /quit ends."


def _read_line(prompt: str, interactive: bool) -> str | None:
    """The next line typed (with readline's editing and history on a terminal), None at the end of input."""
    if not interactive:
        return sys.stdin.readline() or None
    try:
        return input(prompt)
    except EOFError:
        return None


@app.command()
def chat(
    kg: KgOpt = "demo",
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="auto, lexical, explore, retrieve, …")] = "auto",
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not show the steps.")] = False,
    option: OptionOpt = None,
) -> None:
    """Talk with a knowledge graph: each question may follow up on the answers before it (/new, /quit)."""
    from sparqlnav.api import ask as ask_question
    from sparqlnav.conversation import Conversation

    settings = settings_for(timeout, llm_model, llm_timeout, llm_retries)
    chosen = made_strategy(strategy, settings.llm, settings, strategy_knobs(strategy, None, option))
    console = err()
    interactive = sys.stdin.isatty()
    history = settings.paths.home / "chat_history"
    if interactive:
        import readline  # input() gets line editing and history once it is loaded

        with contextlib.suppress(OSError):
            readline.read_history_file(history)
    if strategy == "auto" and settings.llm is None:
        console.print("no LLM configured (OPENAI_BASE_URL / SPARQLNAV_LLM_MODEL): using the lexical strategy", style="dim")
    try:
        with opened(kg, settings) as graph:
            console.print(f"{graph.name} · {CHAT_HELP}", style="dim", markup=False, highlight=False)
            talk = Conversation()
            while (line := _read_line("? ", interactive)) is not None:
                question = line.strip()
                if not question:
                    continue
                if question in ("/quit", "/exit", "/q"):
                    break
                if question == "/new":
                    talk = Conversation()
                    console.print("new conversation", style="dim")
                    continue
                if question.startswith("/"):
                    console.print(f"unknown command {question.split()[0]}: {CHAT_HELP}", markup=False, highlight=False)
                    continue
                if not interactive:
                    console.print(f"? {question}", style="bold", markup=False, highlight=False)
                shown = _StepPrinter(console)
                try:
                    result = ask_question(
                        question, kg=graph, strategy=chosen, conversation=talk, on_event=None if quiet else shown
                    )
                except SparqlnavError as exc:  # one failed question does not end the conversation
                    console.print(f"error: {_one_line(exc)}", markup=False, highlight=False)
                    continue
                finally:
                    shown.close()
                _show_answer(result, graph, console)
    finally:
        close = getattr(chosen, "close", None)
        if callable(close):
            close()
        if interactive:
            with contextlib.suppress(OSError):
                history.parent.mkdir(parents=True, exist_ok=True)
                readline.set_history_length(1000)
                readline.write_history_file(history)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:500]


def main(argv: list[str] | None = None) -> Any:
    """Entry point: run the app; any failure is one line on stderr and a non-zero exit."""
    try:
        code = app(args=argv, standalone_mode=False)
        # Without standalone mode, click returns the code of a `typer.Exit` instead of exiting with it.
        if isinstance(code, int) and code != 0:
            sys.exit(code)
        return code
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
        if _debugging():
            raise
        err().print(f"error: {_one_line(exc)}", markup=False, highlight=False)
        sys.exit(1)


def _debugging() -> bool:
    """SPARQLNAV_DEBUG is on (and readable: a bad setting is itself the error being shown)."""
    try:
        return Settings.from_env().debug
    except ConfigError:
        return False


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
        err().print(f"error: {_one_line(error)}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    finally:
        if judge_fn is not None:
            judge_fn.close()
    if json_output:
        print(json.dumps(report_json(report), ensure_ascii=False))
    else:
        render_report(report, out())


@app.command("eval")
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


@app.command("report")
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


@app.command("validate")
def validate_command(
    query: Annotated[
        str, typer.Argument(metavar="QUERY_OR_FILE", help="A SPARQL query, a file holding one, or '-' for stdin.")
    ],
    kg: Annotated[
        str | None,
        typer.Option(
            "--kg", help="Check against this KG's schema (RDF file or folder, endpoint URL, 'demo' (the default), 'wikidata')."
        ),
    ] = None,
    void: Annotated[Path | None, typer.Option("--void", help="Check against the schema in this VoID file.")] = None,
    format: FormatOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Check a query without running it: syntax, missing prefixes (repaired), classes and predicates against the
    schema. Exit 0 when the (repaired) query is ok, 1 otherwise."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="validate") is OutputFormat.json
    from sparqlnav.graph.schema import Schema, schema_from_void_file
    from sparqlnav.retrieval.kg_index import SchemaUnavailable, kg_schema, open_kg_index
    from sparqlnav.sparql.check import validate as check_query

    if kg and void:
        raise CliError("give --kg or --void, not both")
    text = read_query(query)
    schema: Schema | None = None
    services: dict[str, Schema] = {}
    prefixes: dict[str, str] = {}
    if void is not None:
        if not void.is_file():
            raise CliError(f"no such VoID file: {void}")
        try:
            schema = schema_from_void_file(void)
        except (SyntaxError, ValueError, OSError) as exc:
            raise CliError(f"cannot read the VoID file {void}: {exc}") from None
        if not schema.classes and not schema.predicates:
            # Checking against an empty schema would pass every query: say what the file is not.
            raise CliError(f"{void} is not a VoID description: it has no void:classPartition or void:propertyPartition")
    else:
        kg = kg or "demo"  # every verb's default graph
        settings = settings_for(None)
        with opened(kg, settings) as graph:
            prefixes = {k: v for k, v in graph.prefixes.items() if k}
            # The schemas `sparqlnav index` stored; else read or computed now (not for Wikidata: too large).
            stored = open_kg_index(graph, settings.paths.home, embedder=None)
            if stored is not None:
                schema, services = stored.schema, stored.schemas
                stored.close()
            elif graph.name != "wikidata":
                try:
                    schema = kg_schema(graph)
                except SchemaUnavailable as exc:
                    raise CliError(f"cannot get the schema of {kg}: {exc}") from None
            report = check_query(text, schema, prefixes=prefixes, schemas_by_endpoint=services)
            report.issues.extend(_unused_in_graph(report.query, text, graph))
    if void is not None:
        report = check_query(text, schema, prefixes=prefixes, schemas_by_endpoint=services)
    if json_output:
        compact = schema.compact if schema is not None else None
        print(json.dumps(report.to_dict(compact), ensure_ascii=False))
    elif not report.issues:
        out().print("ok: no issues", markup=False, highlight=False)
    else:
        out().print(report.text(), markup=False, highlight=False)
        if report.repaired:
            out().print("\nrepaired query:\n" + report.query, markup=False, highlight=False)
    if not report.ok:  # a repaired prefix is reported, but the repaired query is fine: `ok` decides
        raise typer.Exit(1)


def _unused_in_graph(query: str, given: str, graph: KnowledgeGraph) -> list[Issue]:
    """Warnings for what the checked graph never uses: each IRI of the query that occurs nowhere in it (one query),
    and each prefix the query did not declare that was read from defaults the graph does not use (`wdt:` read as
    Wikidata's on a graph that is not Wikidata)."""
    from sparqlnav.feedback.memory import query_iris
    from sparqlnav.sparql.check import Issue
    from sparqlnav.sparql.guard import declared_prefixes, tokens
    from sparqlnav.tools.lookup import absent

    missing = absent(graph, query_iris(query, graph.prefixes, graph.vocab))
    out = [Issue("absent_iri", f"{graph.prefixes.compact(iri)} occurs nowhere in {graph.name}", "warning")
           for iri in missing]
    declared_by_user = declared_prefixes(tokens(given))
    for prefix, ns in declared_prefixes(tokens(query)).items():
        if prefix not in declared_by_user and any(i.startswith(ns) for i in missing):
            out.append(Issue("unknown_prefix", f"the prefix '{prefix}:' was not declared and was read as <{ns}>, "
                             f"which {graph.name} does not use: declare the namespace you mean", "warning"))
    return out


def check_can_listen(host: str, port: int) -> None:
    """Fail at once, in one line, when the address cannot be listened on (before any banner or KG)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            probe.bind(address)
    except OSError as exc:
        reason = "the port is in use" if getattr(exc, "errno", None) == errno.EADDRINUSE else exc.strerror or exc
        raise CliError(f"cannot listen on {host}:{port}: {reason}") from None


@app.command("serve")
def serve_command(
    kg: Annotated[
        list[str] | None,
        typer.Option(
            "--kg",
            help="A KG to serve (repeatable; NAME=SPEC names it): RDF file or folder, endpoint URL, 'demo', 'wikidata'. The first is the default.",
        ),
    ] = None,
    host: Annotated[str | None, typer.Option("--host", help="Address to listen on (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port to listen on (default 8000).")] = None,
    strategy: Annotated[str | None, typer.Option("--strategy", "-s", help="Default strategy (auto, lexical, explore, …).")] = None,
    option: OptionOpt = None,
    dataset: Annotated[
        list[str] | None,
        typer.Option("--dataset", help="TEXT2SPARQL dataset id mapped to a KG name: ID=NAME (repeatable). Without any, a one-KG server answers for every dataset."),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", help="Require 'Authorization: Bearer TOKEN' on /api, /mcp and /text2sparql.")] = None,
    rate_limit: Annotated[float | None, typer.Option("--rate-limit", help="Requests per minute per client (0: off; default off on localhost, 120 otherwise).")] = None,
    cors: Annotated[list[str] | None, typer.Option("--cors", help="An origin allowed to call the API from a browser (repeatable).")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option("--allowed-host", help="A host name the server answers to without a token, besides loopback ones (repeatable).")] = None,
    trusted_proxy: Annotated[list[str] | None, typer.Option("--trusted-proxy", help="A proxy address or network whose X-Forwarded-For is believed (repeatable).")] = None,
    request_timeout: Annotated[float | None, typer.Option("--request-timeout", help="Time limit of one request, in seconds (default 300).")] = None,
    max_concurrent: Annotated[int | None, typer.Option("--max-concurrent", help="Runs at once; more get 503 (default 64; the whole server's with a shared state store).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Server processes sharing the port (default 1; more need SPARQLNAV_STATE_URL=redis://…).")] = None,
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
    log_level: Annotated[str | None, typer.Option("--log-level", help="debug, info, warning or error (default info).")] = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="text (lines for people), json (JSON lines) or auto: text on a terminal, else json.")
    ] = LogFormat.auto,
) -> None:
    """Serve the HTTP API (with streaming), the web UI, the TEXT2SPARQL endpoint and MCP at /mcp."""
    import uvicorn

    from sparqlnav.faces.access import Networks
    from sparqlnav.faces.http import (
        ServeConfig,
        configure_logging,
        create_app,
        parse_kgs,
        parse_pairs,
    )
    from sparqlnav.faces.logs import ReadableFormatter, readable
    from sparqlnav.faces.state import open_state
    from sparqlnav.faces.workers import check_workers, serve_workers

    settings = settings_for(timeout, llm_model, llm_timeout, llm_retries)
    specs = parse_kgs(kg) if kg else None
    if port is not None and not 0 <= port <= 65535:
        raise CliError(f"--port {port} is not a port number (0 to 65535)")
    for name, spec in (specs or {}).items():
        # Checked here: a KG that fails to open inside the server is reported with the server's traceback.
        if not (spec in ("demo", "wikidata") or spec.startswith(("http://", "https://")) or Path(spec).expanduser().exists()
                or spec.lower().startswith(("sqlite:", "postgresql:", "postgres:"))):  # a database: checked as it opens
            raise CliError(f"--kg {name}: {spec} does not exist (give an RDF file or folder, an http(s):// endpoint, 'demo' or 'wikidata')")
    try:
        datasets = parse_pairs(dataset) if dataset else None
    except ValueError as exc:
        raise CliError(f"--dataset: {exc}") from None
    config = ServeConfig.from_settings(
        settings,
        kgs=specs,
        host=host,
        strategy=strategy,
        strategy_options=strategy_knobs(strategy or "", None, option) or None,
        datasets=datasets,
        token=token,
        rate_limit=rate_limit,
        cors_origins=tuple(cors) if cors else None,
        allowed_hosts=tuple(allowed_host) if allowed_host else None,
        trusted_proxies=tuple(trusted_proxy) if trusted_proxy else None,
        request_timeout_s=request_timeout,
        max_concurrent=max_concurrent,
    )
    unknown = [d for d, name in config.datasets.items() if name not in (config.kgs or {"demo": "demo"})]
    if unknown:
        raise CliError(f"--dataset maps {unknown[0]!r} to a KG this server does not have")
    try:
        Networks(config.trusted_proxies)
    except ValueError as exc:
        raise CliError(f"--trusted-proxy: {exc}") from None
    host = config.host
    port = settings.serve.port if port is None else port
    processes = settings.serve.workers if workers is None else workers
    if processes < 1:
        raise CliError(f"--workers {processes}: give 1 or more")
    try:
        check_workers(processes, settings)
        open_state(settings).close()  # an unreachable Redis is said now, in one line, not by every worker
    except SparqlnavError as exc:
        raise CliError(str(exc)) from None
    check_can_listen(host, port)
    people = readable(log_format, sys.stderr.isatty())
    level = log_level.upper() if log_level else settings.serve.log_level
    configure_logging(level, formatter=ReadableFormatter() if people else None)
    if processes > 1:
        err().print(f"sparqlnav on http://{host}:{port}/ with {processes} workers  (API docs /docs, MCP /mcp, TEXT2SPARQL /text2sparql)", style="dim")
        serve_workers(settings, config, port=port, workers=processes, log_level=level, readable=people)
        return
    app_ = create_app(settings, config, llm=settings.llm)
    if host not in ("127.0.0.1", "localhost", "::1") and not config.token:
        err().print("warning: serving beyond this machine without --token: anyone who can reach it can use it", style="yellow")
        if not config.allowed_hosts:
            err().print("note: without --token only loopback host names are answered; add others with --allowed-host", style="yellow")
    err().print(f"sparqlnav on http://{host}:{port}/  (API docs /docs, MCP /mcp, TEXT2SPARQL /text2sparql)", style="dim")
    uvicorn.run(
        app_, host=host, port=port, log_config=None, access_log=False, ws="none", timeout_graceful_shutdown=5,
        proxy_headers=False,  # the server reads X-Forwarded-For itself, from trusted proxies only
    )


@app.command("mcp")
def mcp_command(
    kg: KgOpt = "demo",
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
) -> None:
    """Serve the tools (search, get_entity, execute_sparql, …) to an MCP client over stdio."""
    from sparqlnav.faces.mcp import run_stdio

    settings = settings_for(timeout, llm_model, llm_timeout, llm_retries)
    with opened(kg, settings) as graph:
        run_stdio(graph, settings=settings, llm=settings.llm)


def _index_names(kg: str, settings: Settings, json_output: bool) -> None:
    """`index --names`: the explicit download of an endpoint's names (large endpoints are otherwise searched in place)."""
    import time

    from sparqlnav.graph.kg import KGError
    from sparqlnav.graph.opening import index_remote_names

    if not kg.startswith(("http://", "https://")):
        raise CliError("--names is for SPARQL endpoints (http(s):// URLs); local files are always indexed")
    start = time.monotonic()
    try:
        with reporting(err(), "never" if json_output else settings.progress) as reporter:
            path, problem = index_remote_names(kg, settings, reporter=reporter)
    except KGError as exc:
        raise CliError(str(exc)) from None
    summary = {"names_index": str(path), "complete": not problem, "problem": problem,
               "seconds": round(time.monotonic() - start, 3)}  # fmt: skip
    if json_output:
        print(json.dumps(summary, ensure_ascii=False))
        return
    note = f" (incomplete: {problem}; used for this run only)" if problem else ""
    out().print(f"names of {kg} indexed in {path}{note}", markup=False, highlight=False)


def _synthesized(graph: KnowledgeGraph, settings: Settings, n: int, kept_ids: list[str]) -> list[Example]:
    """`index --synthesize-examples N`: pairs the LLM writes over the schema that run and return rows."""
    from sparqlnav.llm import LLMError
    from sparqlnav.retrieval.kg_index import SchemaUnavailable, kg_schema
    from sparqlnav.retrieval.synthesize import synthesize_examples

    if settings.llm is None:
        raise CliError("--synthesize-examples needs an LLM: set OPENAI_BASE_URL, OPENAI_API_KEY and SPARQLNAV_LLM_MODEL")
    try:
        made = synthesize_examples(graph, kg_schema(graph), settings.llm, n)
    except (LLMError, SchemaUnavailable) as exc:
        raise CliError(f"no examples synthesized: {exc}") from None
    for question, why in made.dropped:
        err().print(f"dropped synthetic example {question!r}: {why}", markup=False, highlight=False)
    kept_ids += [e.id for e in made.kept]
    return made.kept


@app.command("index")
def index_command(
    kg: KgOpt = "demo",
    examples: Annotated[
        list[Path] | None,
        typer.Option("--examples", help="SHACL example files or folders, QALD JSON, text2sparql YAML or SPINACH JSON (repeatable)."),
    ] = None,
    void: Annotated[
        list[Path] | None,
        typer.Option("--void", help="VoID description of this KG or of an endpoint its examples federate with (repeatable)."),
    ] = None,
    embedder: Annotated[
        str,
        typer.Option("--embedder", help="auto (offline MiniLM when installed, else lexical only), minilm, minilm:<dir>, none, st:<model>, fastembed:<model>, openai:<model>."),
    ] = "auto",
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="Endpoint of examples that name none (benchmark files never do).")
    ] = None,
    qdrant: Annotated[
        str | None, typer.Option("--qdrant", help="Keep the index in Qdrant: an http(s) URL or a local folder.")
    ] = None,
    no_endpoint_examples: Annotated[
        bool, typer.Option("--no-endpoint-examples", help="Do not read the examples the endpoint publishes itself.")
    ] = False,
    names: Annotated[
        bool,
        typer.Option("--names", help="Download a SPARQL endpoint's names into a local search index, whatever its size (only that)."),
    ] = False,
    docs: Annotated[
        list[Path] | None,
        typer.Option("--docs", help="Documents beside the KG: folders or files of text, Markdown, HTML or JSONL {id, title, text} (repeatable; replaces the documents indexed before)."),
    ] = None,
    synthesize_examples: Annotated[
        int,
        typer.Option("--synthesize-examples", help="Ask the LLM for N question–query pairs over the schema; index those that run and return rows (marked synthetic)."),
    ] = 0,
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Build or refresh the retrieval index of a KG (examples, class shapes, endpoint descriptions, documents)."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="index") is OutputFormat.json
    import hashlib

    if names:
        _index_names(kg, settings_for(timeout), json_output)
        return

    from sparqlnav.folders import Outside, describe_outside
    from sparqlnav.retrieval.documents import DocumentsError
    from sparqlnav.retrieval.embed import EmbedderUnavailable, make_embedder
    from sparqlnav.retrieval.examples import ExamplesError, load_examples
    from sparqlnav.retrieval.index import IndexUnavailable
    from sparqlnav.retrieval.indexes import index_documents
    from sparqlnav.retrieval.kg_index import (
        SchemaUnavailable,
        build_kg_index,
        kg_index_dir,
        open_kg_index,
    )
    from sparqlnav.retrieval.qdrant import QdrantIndex
    from sparqlnav.retrieval.records import DOCUMENT_KINDS

    settings = settings_for(timeout)
    outside: list[Outside] = []  # symlinks out of a folder given, skipped and said so in the summary
    try:
        chosen = make_embedder(embedder, embedding=settings.embedding)
        found = load_examples(examples or [], endpoint=endpoint, outside=outside)
    except (EmbedderUnavailable, ExamplesError) as exc:
        raise CliError(str(exc)) from None
    for path in void or []:
        if not path.is_file():
            raise CliError(f"no such VoID file: {path}")
    spec = ("minilm" if chosen is not None else "none") if embedder == "auto" else embedder
    with opened(kg, settings) as graph, reporting(err(), settings.progress) as reporter:

        def report(message: str, done: int, total: int) -> None:
            if reporter is not None:
                reporter.step(ProgressStep(message, done, total or None, "items"))

        synthesized: list[str] = []
        if synthesize_examples > 0:
            found = [*found, *_synthesized(graph, settings, synthesize_examples, synthesized)]
        backend = backend_spec = None
        if qdrant:
            collection = "sparqlnav-" + hashlib.sha256(f"{graph.name}|{graph.description}".encode()).hexdigest()[:16]
            try:
                backend = QdrantIndex.open(qdrant, collection, chosen)
            except IndexUnavailable as exc:
                raise CliError(str(exc)) from None
            backend_spec = {"kind": "qdrant", "location": qdrant, "collection": collection}
        try:
            # Documents alone refresh an index that exists: its examples and shapes are kept as they are.
            ctx = (open_kg_index(graph, settings.paths.home, embedder=chosen)
                   if docs and not (examples or void or qdrant) else None)
            if ctx is None:
                ctx, stats = build_kg_index(
                    graph, settings.paths.home, examples=found, void_files=void or [], embedder=chosen,
                    embedder_spec=spec, endpoint_examples=not no_endpoint_examples,
                    backend=backend, backend_spec=backend_spec, progress=report,
                )
            corpus = None
            if docs:
                corpus, stats = index_documents(ctx, graph, settings.paths.home, docs, progress=report)
        except (SchemaUnavailable, ExamplesError, IndexUnavailable, DocumentsError) as exc:
            raise CliError(str(exc)) from None
        kinds = ("example", "shape", "endpoint", *DOCUMENT_KINDS)
        counts = {kind: len(ctx.index.documents([kind])) for kind in kinds}
        ctx.close()
    summary = {
        "index": str(kg_index_dir(graph, settings.paths.home)),
        "examples": counts["example"], "shapes": counts["shape"], "endpoints": counts["endpoint"],
        "passages": counts["passage"], "tables": counts["table"], "infoboxes": counts["infobox"],
        "embedder": spec, **stats.to_json(),
        **({"files": corpus.files, "files_read": corpus.read, "files_unchanged": corpus.unchanged} if corpus else {}),
        **({"synthesized": synthesized} if synthesize_examples > 0 else {}),
        "skipped": [o.to_json() for o in [*outside, *(corpus.outside if corpus else [])]],
    }  # fmt: skip
    if json_output:
        print(json.dumps(summary, ensure_ascii=False))
        return
    documents = (f"; {summary['passages']} passages, {summary['tables']} tables, {summary['infoboxes']} infoboxes "
                 f"from {corpus.files} files ({corpus.read} read, {corpus.unchanged} unchanged)") if corpus else ""
    out().print(
        f"{summary['examples']} examples, {summary['shapes']} class shapes, {summary['endpoints']} endpoint(s)"
        f"{documents} in {summary['index']}\n{stats.added} added, {stats.updated} updated, {stats.removed} removed, "
        f"{stats.unchanged} unchanged; {stats.embedded} embedded with {summary['embedder']} in {stats.seconds:.1f} s"
        + "".join(f"\n{line}" for line in describe_outside([*outside, *(corpus.outside if corpus else [])]))
        + "".join(f"\nskipped {why}" for why in (corpus.skipped if corpus else [])),
        markup=False, highlight=False,
    )


cache_app = typer.Typer(
    help="List the local stores of RDF files (source, size, age); `cache clear` removes stale ones.",
    no_args_is_help=False,
)
app.add_typer(cache_app, name="cache")


def _human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


@cache_app.callback(invoke_without_command=True)
def cache_command(ctx: typer.Context, format: FormatOpt = None, json_output: JsonOpt = False) -> None:
    """List the stores built from local RDF files: source, size, age, and whether the source changed since."""
    from sparqlnav.graph.cache import survey

    if ctx.invoked_subcommand is not None:
        return
    fmt = chosen_format(format, json_output, allowed=TABLE_JSON_CSV, verb="cache")
    stores_dir = settings_for(None).paths.stores_dir
    found = survey(stores_dir)
    stores = found.stores
    if fmt is OutputFormat.json:
        write_json({"stores_dir": str(stores_dir), "stores": [s.to_json() for s in stores],
                    "left_alone": [e.to_json() for e in found.left_alone]})
        return
    if fmt is OutputFormat.csv:
        write_records([s.to_json() for s in stores], ["path", "files", "triples", "size_bytes", "age_s", "status"])
        return
    table = Table(title=str(stores_dir))
    for column in ("store", "source", "triples", "size", "age", "status"):
        table.add_column(column, overflow="fold", no_wrap=column == "store")
    for s in stores:
        source = s.files[0] if len(s.files) == 1 else f"{len(s.files)} files under {os.path.commonpath(s.files)}" if s.files else "?"
        table.add_row(cell(s.path.name), cell(source), str(s.triples), human_size(s.size_bytes), _human_age(s.age_s),
                      s.status)
    out().print(table)
    err().print(f"{len(stores)} store(s), {human_size(sum(s.size_bytes for s in stores))}", markup=False, highlight=False)
    for entry in found.left_alone:
        err().print(f"not a store, left alone: {entry.path.name} ({entry.why})", markup=False, highlight=False)
    if stores_dir.is_symlink():
        err().print(f"{stores_dir} is a symlink: `cache clear` removes nothing through it", markup=False, highlight=False)


@cache_app.command("clear")
def cache_clear_command(
    everything: Annotated[bool, typer.Option("--all", help="Remove every store, not only stale and damaged ones (never a folder sparqlnav did not make).")] = False,
    format: FormatOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Remove stores whose source files changed or are gone, damaged ones and abandoned builds (--all: every store).

    Only folders sparqlnav made are removed; anything else is left alone and named, and nothing through a symlink."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="cache clear") is OutputFormat.json
    from sparqlnav.graph.cache import StoresFolderError, clear_stores

    try:
        cleared = clear_stores(settings_for(None).paths.stores_dir, everything=everything)
    except StoresFolderError as exc:
        raise CliError(str(exc)) from None
    removed = cleared.stores
    if json_output:
        print(json.dumps({"removed": [s.to_json() for s in removed], "left_alone": [e.to_json() for e in cleared.left_alone]},
                         ensure_ascii=False))
        return
    for s in removed:
        out().print(f"removed {s.path.name} ({', '.join(s.files) or s.status}, {human_size(s.size_bytes)})", markup=False, highlight=False)
    for entry in cleared.left_alone:
        err().print(f"not a store, left alone: {entry.path.name} ({entry.why})", markup=False, highlight=False)
    err().print(f"{len(removed)} store(s) removed, {human_size(sum(s.size_bytes for s in removed))} freed", markup=False, highlight=False)
