"""Issue 39, item 10 (in part): U+202E (right-to-left override) printed raw in tables, and `--format csv` to a
terminal wrote raw ESC. A terminal is a pseudo-terminal here, a real `sparqlnav sparql` process writing to it; into
a pipe or a file the data stays exactly as stored."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from sparqlnav.faces.output import terminal_safe

LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
GRAPH = f'<http://x.example/a> <{LABEL}> "invoice\\u202Efdp.exe \\u001b[2J done" .\n'
QUERY = f"SELECT ?l WHERE {{ ?s <{LABEL}> ?l }}"


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "rlo.nt"
    path.write_text(GRAPH, encoding="utf-8")
    return path


def on_a_terminal(args: list[str], home: Path) -> str:
    """What `args` writes to stdout when stdout is a pseudo-terminal (stderr apart)."""
    master, slave = pty.openpty()
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200", "TERM": "xterm"}
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode("utf-8", "replace")


def test_bidi_controls_are_escaped_for_terminals() -> None:
    assert terminal_safe("a\u202eb\u2066c\u200fd") == "a\\u202eb\\u2066c\\u200fd"
    assert terminal_safe("line\n\tend") == "line\n\tend"
    assert terminal_safe("line\n\tend", lines=False) == "line\\n\\tend"


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_no_raw_escape_or_override_reaches_a_terminal(graph: Path, tmp_path: Path, fmt: str) -> None:
    shown = on_a_terminal([sys.executable, "-m", "sparqlnav", "sparql", QUERY, "--kg", str(graph), "-f", fmt], tmp_path)
    assert "\x1b[2J" not in shown and "\u202e" not in shown, repr(shown)
    assert "invoice\\u202efdp.exe" in shown  # before: the override raw in every format, ESC raw in CSV


def test_into_a_pipe_csv_keeps_the_stored_text(graph: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "sparql", QUERY, "--kg", str(graph), "-f", "csv"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "SPARQLNAV_HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "invoice\u202efdp.exe \x1b[2J done"
