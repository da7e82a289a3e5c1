"""What every verb of the command line shares: the options (`--kg`, `--timeout`, the LLM's, a strategy's), the
consoles, the CLI's one error, the settings of a command, opening a KG, and reading a query."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.output import DataConsole, cell
from sparqlnav.faces.progress import reporting
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import near_name, open_kg
from sparqlnav.graph.results import ResultTable, shown_labels
from sparqlnav.settings import Settings
from sparqlnav.sparql.prefixes import PrefixRepair

KgOpt = Annotated[
    str,
    typer.Option(
        "--kg",
        help="RDF file or folder, http(s):// SPARQL endpoint, SQLite file or sqlite:/// / postgresql:// database, "
        "'demo' or 'wikidata'.",
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


def declare_known_prefixes(text: str, graph: KnowledgeGraph) -> PrefixRepair:
    """The query with PREFIX lines added for undeclared prefixes the graph knows (said on stderr); an
    undeclared prefix the graph does not know is an error naming it."""
    from sparqlnav.sparql.parser import SparqlSyntaxError, parse_query
    from sparqlnav.sparql.prefixes import declare_prefixes

    try:
        undefined = parse_query(text, collect_undefined_prefixes=True).undefined_prefixes
    except SparqlSyntaxError:
        # Declared all the same, so the error reported is the query's real one, not the prefix left undeclared.
        return declare_prefixes(text, graph.prefixes.mapping)
    unknown = [p for p in undefined if p not in graph.prefixes]
    if unknown:
        raise CliError(
            f"the prefix '{unknown[0]}:' is not declared and {graph.name} does not know it: "
            f"add PREFIX {unknown[0]}: <namespace IRI>"
        )
    if not undefined:
        return PrefixRepair(text)
    known = {p: ns for p, ns in graph.prefixes.items() if p in undefined}
    err().print(
        "added missing " + ", ".join(f"PREFIX {p}: <{ns}>" for p, ns in known.items()) + f" (from {graph.name})",
        style="dim", markup=False, highlight=False,
    )  # fmt: skip
    return declare_prefixes(text, known)


def rich_table(table: ResultTable, graph: KnowledgeGraph) -> Table:
    """A table for people: compact IRIs with labels."""
    labels = shown_labels(table, graph.names, head=len(table), tail=0)
    rt = Table(show_lines=False)
    for v in table.vars:  # SQL's columns are columns, not variables: no `?`
        rt.add_column(("?" if table.language == "SPARQL" else "") + v, overflow="fold")
    for row in table.display_rows(graph.prefixes, labels, for_people=True):
        rt.add_row(*(cell(value) for value in row))
    return rt



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



def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:500]



