"""The command line as a user runs it: a real process, real stores, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SN = [sys.executable, "-m", "sparqlnav"]


def run(*args: str, home: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    return subprocess.run([*SN, *args], capture_output=True, text=True, env=env, input=stdin, timeout=240, check=False)


@pytest.mark.data
def test_sparql_counts_the_benchmark_graphs(data_dir: Path, sn_home: Path) -> None:
    q = "SELECT (COUNT(*) AS ?n) WHERE {?s ?p ?o}"
    ck = run("sparql", "--kg", str(data_dir / "ck25" / "prod-inst.ttl"), q, "--format", "json", home=sn_home)
    assert ck.returncode == 0, ck.stderr
    assert json.loads(ck.stdout)["results"]["bindings"][0]["n"]["value"] == "26903"
    best = run("sparql", "--kg", str(data_dir / "bestiary" / "beastiary_kg.rdf"), q, home=sn_home)
    assert best.returncode == 0 and "98070" in best.stdout


@pytest.mark.data
def test_search_and_entity_verbs(data_dir: Path, sn_home: Path) -> None:
    kg = str(data_dir / "ck25" / "prod-inst.ttl")
    res = run("search", "Hienrich Hock", "--kg", kg, "--json", home=sn_home)
    assert res.returncode == 0, res.stderr
    top3 = [h["iri"] for h in json.loads(res.stdout)["entities"][:3]]
    assert "http://ld.company.org/prod-instances/empl-Heinrich.Hoch%40company.org" in top3
    page = run("entity", "Heinrich Hoch", "--kg", kg, home=sn_home)
    assert page.returncode == 0 and "Waldtraud Kuttner" in page.stdout and "pv:hasManager" in page.stdout


def test_formats_and_errors_on_a_small_graph(tmp_path: Path) -> None:
    ttl = tmp_path / "g.ttl"
    ttl.write_text('<http://example.org/a> <http://example.org/name> "A, with comma" .\n')
    q = "SELECT ?n WHERE { ?s <http://example.org/name> ?n }"
    csv_out = run("sparql", q, "--kg", str(ttl), "--format", "csv", home=tmp_path)
    assert csv_out.stdout.splitlines() == ['n', '"A, with comma"']
    from_stdin = run("sparql", "-", "--kg", str(ttl), "-f", "json", home=tmp_path, stdin=q)
    assert json.loads(from_stdin.stdout)["results"]["bindings"][0]["n"]["value"] == "A, with comma"
    for args, needle in [
        (("sparql", "SELECT ?n WHERE { ?s ", "--kg", str(ttl)), "syntax_error: error at 1:"),
        (("sparql", "DROP ALL", "--kg", str(ttl)), "refused"),
        (("sparql", q, "--kg", str(tmp_path / "missing.ttl")), "no such file or folder"),
        (("sparql", q, "--kg", "http://127.0.0.1:9/sparql"), "cannot reach"),
    ]:
        res = run(*args, home=tmp_path)
        assert res.returncode != 0
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], res.stderr
        assert "Traceback" not in res.stderr


def test_ask_shows_a_readable_number_of_steps(tmp_path: Path) -> None:
    """Without an LLM `ask` says so in one line, answers, and cuts long runs of queries to a count."""
    res = run("ask", "How many elements did Humphry Davy discover?", home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("no LLM configured") == 1
    assert "more queries" in res.stderr and res.stderr.count(" sparql ") <= 30
    assert "There are 4." in res.stdout
