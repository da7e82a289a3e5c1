"""The `sparqlnav` app: its verbs in the order `--help` lists them, and `main`, which runs it with every failure
shown as one line."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from sparqlnav.faces.cli import asking, data, evaluation, lookup, serving
from sparqlnav.faces.cli.common import CliError, err, one_line
from sparqlnav.settings import ConfigError, Settings
from sparqlnav.version import __version__

app = typer.Typer(
    name="sparqlnav",
    help="Ask knowledge graphs questions in plain language; look things up; write, check and run SPARQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

def _version(value: bool) -> None:
    if value:
        typer.echo(f"sparqlnav {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Ask knowledge graphs questions in plain language; look things up; write, check and run SPARQL."""


# The table of contents: looking, asking, measuring, serving, then data and indexes.
app.command()(lookup.sparql)
app.command()(lookup.search)
app.command()(lookup.entity)
app.command()(asking.ask)
app.command()(asking.chat)
app.command()(evaluation.score)
app.command("eval")(evaluation.eval_command)
app.command("report")(evaluation.report_command)
app.command("validate")(lookup.validate_command)
app.command("serve")(serving.serve_command)
app.command("mcp")(serving.mcp_command)
app.command("index")(data.index_command)
app.add_typer(data.cache_app, name="cache")


def main(argv: list[str] | None = None) -> Any:
    """Entry point: run the app; any failure is one line on stderr and a non-zero exit."""
    # What sparqlnav writes (stores copied from a 0600 database, engine logs, indexes, conversations, run folders)
    # is its user's alone, whatever the shell's umask (issue 39); its engines and keepers inherit it.
    os.umask(0o077)
    try:
        code = app(args=argv, standalone_mode=False)
        # Without standalone mode, click returns the code of a `typer.Exit` instead of exiting with it.
        if isinstance(code, int) and code != 0:
            sys.exit(code)
        return code
    except CliError as exc:
        err().print(f"error: {one_line(exc)}", markup=False, highlight=False)
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
        err().print(f"error: {one_line(exc)}", markup=False, highlight=False)
        sys.exit(1)


def _debugging() -> bool:
    """SPARQLNAV_DEBUG is on (and readable: a bad setting is itself the error being shown)."""
    try:
        return Settings.from_env().debug
    except ConfigError:
        return False

