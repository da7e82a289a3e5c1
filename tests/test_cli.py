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
    res = run("ask", "How many elements did Humphry Davy discover?", "-v", home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("no LLM configured") == 1
    assert "more queries" in res.stderr and res.stderr.count(" sparql ") <= 30
    assert "There are 4." in res.stdout


DEMO_CONSTRUCT = (
    "PREFIX wd: <https://demo.sparqlnav.org/entity/> PREFIX wdt: <https://demo.sparqlnav.org/prop/direct/> "
    "CONSTRUCT { ?e wdt:P61 ?who } WHERE { VALUES ?e { wd:Q8 wd:Q9 } ?e wdt:P61 ?who }"
)


def test_one_format_option_for_every_verb(tmp_path: Path) -> None:
    """`ask --format json`, `sparql --json`, and a CONSTRUCT written as Turtle and N-Triples that parse back."""
    import pyoxigraph as ox

    asked = run("ask", "Is helium a noble gas?", "--format", "json", home=tmp_path)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["results"] == {"head": {}, "boolean": True} and answer["answer"] == "Yes."
    assert "no LLM configured" not in asked.stderr  # machine output keeps stderr quiet too
    rows = run("sparql", "SELECT ?s WHERE { ?s a <http://wikiba.se/ontology#Property> } LIMIT 3", "--json", home=tmp_path)
    assert rows.returncode == 0, rows.stderr
    assert len(json.loads(rows.stdout)["results"]["bindings"]) == 3
    plain = run("sparql", DEMO_CONSTRUCT, "--format", "ntriples", home=tmp_path)
    turtle = run("sparql", DEMO_CONSTRUCT, "--format", "turtle", home=tmp_path)
    assert turtle.returncode == 0 and plain.returncode == 0, turtle.stderr + plain.stderr
    assert "@prefix wd: <https://demo.sparqlnav.org/entity/>" in turtle.stdout  # compact, with the graph's prefixes
    from_turtle = {(q.subject, q.predicate, q.object) for q in ox.parse(turtle.stdout.encode(), ox.RdfFormat.TURTLE)}
    from_nt = {(q.subject, q.predicate, q.object) for q in ox.parse(plain.stdout.encode(), ox.RdfFormat.N_TRIPLES)}
    discoverer = ox.NamedNode("https://demo.sparqlnav.org/prop/direct/P61")
    oxygen, fluorine = (ox.NamedNode(f"https://demo.sparqlnav.org/entity/{q}") for q in ("Q8", "Q9"))
    assert from_turtle == from_nt and {t[1] for t in from_turtle} == {discoverer}
    assert {t[0] for t in from_turtle} == {oxygen, fluorine}
    assert (fluorine, discoverer, ox.NamedNode("https://demo.sparqlnav.org/entity/Q1012")) in from_turtle
    for args, needle in [
        (("sparql", "SELECT * WHERE { ?s ?p ?o } LIMIT 1", "-f", "turtle"), "turtle is for CONSTRUCT and DESCRIBE"),
        (("search", "oxygen", "--json", "--format", "csv"), "--json and --format csv disagree"),
        (("validate", "SELECT * {?s ?p ?o}", "--format", "csv"), "`validate` cannot write csv: its formats are table, json"),
    ]:
        res = run(*args, home=tmp_path)
        assert res.returncode == 1 and res.stderr.strip() == f"error: {res.stderr.strip()[7:]}" and needle in res.stderr
    found = run("search", "oxygen", "--format", "csv", home=tmp_path)
    header, first = found.stdout.splitlines()[:2]
    assert header.startswith("iri,kind,label") and first.startswith("https://demo.sparqlnav.org/entity/Q8,entity,oxygen")


def run_in_terminal(*args: str, home: Path) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as its stdin, stdout and stderr: (exit code, everything it wrote)."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "TERM": "xterm", "COLUMNS": "200"}
    for var in ("NO_COLOR", "SPARQLNAV_PROGRESS", "OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    proc = subprocess.Popen([*SN, *args], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=240), b"".join(chunks).decode(errors="replace")


def _people_graph(path: Path, n: int = 30_000) -> Path:
    """A made-up graph large enough for a load to report progress more than once."""
    with path.open("w") as f:
        for i in range(n):
            f.write(f'<http://example.org/p{i}> <http://www.w3.org/2000/01/rdf-schema#label> "person {i}" .\n')
            f.write(f"<http://example.org/p{i}> <http://example.org/knows> <http://example.org/p{(i * 7) % n}> .\n")
    return path


def test_a_first_load_shows_progress_on_a_terminal_and_nothing_on_a_pipe(tmp_path: Path) -> None:
    import re

    ttl = _people_graph(tmp_path / "people.nt")
    q = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    code, screen = run_in_terminal("sparql", q, "--kg", str(ttl), home=tmp_path / "tty")
    assert code == 0, screen
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # colours and cursor moves
    assert "reading people.nt" in text and "building the name index" in text
    assert re.search(r"of \d+\.\d MB", text)  # bytes read of the file's size
    assert "60,000 triples of 60,000 triples" in text  # the name index read every triple
    stores = list((tmp_path / "tty" / "stores").iterdir())
    assert len(stores) == 1
    summary = re.search(r"store of people\.nt: 60,000 triples in [\d.]+ s, [\d,]+ triples/s; kept in (\S+) \(([\d.]+) MB\)", text)
    assert summary is not None, text
    assert summary.group(1) == str(stores[0]) and float(summary.group(2)) > 0.5
    assert "60000" in text  # the answer itself
    again = run_in_terminal("sparql", q, "--kg", str(ttl), home=tmp_path / "tty")[1]
    assert "reading" not in again and "kept in" not in again  # the store is there: nothing to report
    piped = run("sparql", q, "--kg", str(ttl), home=tmp_path / "pipe")
    assert piped.returncode == 0 and "60000" in piped.stdout
    assert "reading" not in piped.stderr and "name index" not in piped.stderr and "kept in" not in piped.stderr
    assert piped.stderr.strip().splitlines() == ["1 row(s) in " + piped.stderr.split("1 row(s) in ")[1].strip()]
    asked = subprocess.run(
        [*SN, "sparql", q, "--kg", str(ttl), "-f", "csv"], capture_output=True, text=True, timeout=240, check=False,
        env={**os.environ, "SPARQLNAV_HOME": str(tmp_path / "asked"), "SPARQLNAV_PROGRESS": "always"},
    )
    assert asked.stdout.splitlines() == ["n", "60000"]
    assert "reading people.nt: 0 B of" in asked.stderr and "store of people.nt: 60,000 triples" in asked.stderr


def _serve_logs(home: Path, *extra: str, terminal: bool) -> str:
    """Start `serve` (its stderr a pseudo-terminal or a pipe), ask /api/info once, stop it: what it logged."""
    import threading

    import httpx

    from test_hardening_runs import free_port, serve_env, wait_until

    port = free_port()
    args = [*SN, "serve", "--port", str(port), *extra]
    env = {**serve_env(home), "TERM": "xterm", "NO_COLOR": "1"}
    chunks: list[bytes] = []
    if terminal:
        import pty

        master, slave = pty.openpty()
        proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)

        def drain() -> None:
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return
                if not data:
                    return
                chunks.append(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
    else:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/api/info", timeout=2).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None

    try:
        assert wait_until(up, 60) and proc.poll() is None
    finally:
        proc.terminate()
        if terminal:
            proc.wait(timeout=30)
            reader.join(timeout=10)
            os.close(master)
        else:
            chunks.append(proc.communicate(timeout=30)[1])
    return b"".join(chunks).decode(errors="replace")


def test_serve_logs_lines_for_people_on_a_terminal_and_json_otherwise(tmp_path: Path) -> None:
    import re

    on_tty = _serve_logs(tmp_path, terminal=True)
    lines = [line for line in on_tty.splitlines() if " request " in line and "path=/api/info" in line]
    assert lines, on_tty
    assert re.match(r"^\d\d:\d\d:\d\d info +request +.*method=GET path=/api/info status=200", lines[0]), lines[0]
    assert not any(line.lstrip().startswith("{") for line in on_tty.splitlines())
    for piped in (_serve_logs(tmp_path, terminal=False), _serve_logs(tmp_path, "--log-format", "json", terminal=True)):
        logs = [json.loads(line) for line in piped.splitlines() if line.startswith("{")]
        request = next(x for x in logs if x["msg"] == "request" and x["path"] == "/api/info")
        assert request["status"] == 200 and request["level"] == "info"
    forced = _serve_logs(tmp_path, "--log-format", "text", terminal=False)
    assert re.search(r"^\d\d:\d\d:\d\d info +request .*path=/api/info status=200", forced, re.MULTILINE), forced
