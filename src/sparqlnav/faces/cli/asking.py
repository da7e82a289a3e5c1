"""Verbs that answer questions: `ask` (one question, its steps shown as they happen) and `chat` (a conversation)."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Annotated

import typer
from rich.console import Console

from sparqlnav.answer import Answer
from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.cli.common import (
    CliError,
    KgOpt,
    LlmRetriesOpt,
    LlmTimeoutOpt,
    MachineOpt,
    OptionOpt,
    SourcesOpt,
    TimeoutOpt,
    err,
    made_strategy,
    one_line,
    opened,
    out,
    rich_table,
    settings_for,
    strategy_knobs,
)
from sparqlnav.faces.output import (
    RDF_FORMATS,
    FormatOpt,
    JsonOpt,
    OutputFormat,
    chosen_format,
    is_graph,
    write_json,
    write_result,
)
from sparqlnav.faces.steps import steps_summary
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.trace import Event


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

    table = result.results
    form = query_form(result.sparql) if result.sparql is not None else "SELECT" if result.sql is not None else None
    if table is not None and form is not None and fmt in RDF_FORMATS and not is_graph(form):
        # An answer is no error for its format: `ask` exits 0 in every format, writing the rows it can (none here).
        err().print(f"{fmt.value} holds the triples of a CONSTRUCT or DESCRIBE; this answer's query is a {form}: "
                    "its rows are in --format csv or json", markup=False, highlight=False, style="yellow")
    elif table is not None and form is not None:
        iris = [t.value for row in table.rows for t in row.values() if t.kind == "uri"]
        labels = graph.names.labels_of(iris) if iris and fmt is OutputFormat.csv else None
        write_result(table, fmt, form=form, prefixes=graph.prefixes.mapping, labels=labels)
    # No query (not found, or an error): no rows to write; the words say why, and the exit code is the run's.
    err().print(result.text, markup=False, highlight=False)
    _say_llm_failures(result, err())


def _say_llm_failures(result: Answer, console: Console) -> None:
    """One line on `console` for each thing the LLM failed to do while the run went on without it."""
    for failure in result.llm_failures:
        console.print(f"the LLM failed: {failure}", markup=False, highlight=False, style="yellow")


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
    # With the query shown above, the words need not repeat it.
    words = result.text_beside_query if verbose and result.query else result.text
    screen.print(words, markup=False, highlight=False)
    for item in result.extra.get("evidence", []):
        mark = "cited" if item["used"] else "not cited"
        screen.print(f"[{item['id']}] {item['kind']} {item['ref']} ({mark}): {item['text'][:200]}",
                     markup=False, highlight=False, style="dim")
    for branch, why in result.extra.get("failed", {}).items():
        console.print(f"source {branch} failed: {why}", markup=False, highlight=False, style="yellow")
    _say_llm_failures(result, console)
    if not summary:
        return
    u = result.trace.usage
    queries = steps_summary(result).text()  # SQL queries counted too, and the one that gave the answer named
    failed = " · the LLM failed: decided without it" if result.llm_failures else ""
    console.print(
        f"{result.strategy} · {result.status} · {queries} · {u.llm_calls} LLM calls "
        f"({u.input_tokens}+{u.output_tokens} tokens) · {u.seconds:.2f} s{failed}"
        + ("" if verbose else " · -v for the steps"),
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


def chat(
    kg: KgOpt = "demo",
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="auto, lexical, explore, retrieve, …")] = "auto",
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show every step as it happens, the final query and its rows.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the answers: no summary lines.")] = False,
    option: OptionOpt = None,
) -> None:
    """Talk with a knowledge graph: each question may follow up on the answers before it (/new, /quit).

    Shows what `ask` shows: each answer and one summary line (-v: the steps, the query and its rows too)."""
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
                        question, kg=graph, strategy=chosen, conversation=talk, on_event=shown if verbose else None
                    )
                except SparqlnavError as exc:  # one failed question does not end the conversation
                    console.print(f"error: {one_line(exc)}", markup=False, highlight=False)
                    continue
                finally:
                    shown.close()
                _show_answer(result, graph, console, verbose=verbose, summary=not quiet)
    finally:
        close = getattr(chosen, "close", None)
        if callable(close):
            close()
        if interactive:
            with contextlib.suppress(OSError):
                history.parent.mkdir(parents=True, exist_ok=True)
                readline.set_history_length(1000)
                readline.write_history_file(history)



