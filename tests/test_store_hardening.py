"""Loading local RDF files survives hostile input and its own crashes: entity bombs are refused under a memory
cap, killed builds are cleaned up, damaged stores are rebuilt, and `sparqlnav cache` lists and clears stores."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparqlnav.graph.entities import EntityExpansionError, check_entity_expansion
from sparqlnav.graph.store import remove_leftovers

SN = [sys.executable, "-m", "sparqlnav"]
MEMORY_CAP = 2 * 1024**3
NAMES = "abcdefghij"


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    return env


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a real process with its address space capped at 2 GB."""
    return subprocess.run(
        [*SN, *args], capture_output=True, text=True, env=_env(home), timeout=240, check=False, preexec_fn=_cap_memory
    )


def error_lines(res: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.strip()]


def builds(home: Path) -> list[Path]:
    return sorted((home / "stores").glob(".build-*")) if (home / "stores").is_dir() else []


def stores(home: Path) -> list[Path]:
    return sorted(p for p in (home / "stores").iterdir() if p.is_dir() and not p.name.startswith("."))


def billion_laughs(path: Path) -> Path:
    entities = ['<!ENTITY a "lol">'] + [f'<!ENTITY {NAMES[i]} "{f"&{NAMES[i - 1]};" * 10}">' for i in range(1, 10)]
    path.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n' + "\n".join(entities) + "]>\n"
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://example.org/">\n'
        '<rdf:Description rdf:about="http://example.org/x"><ex:p>&j;</ex:p></rdf:Description>\n</rdf:RDF>\n'
    )
    return path


BENIGN = """<?xml version="1.0"?>
<!DOCTYPE rdf:RDF [
  <!ENTITY rdf "http://www.w3.org/1999/02/22-rdf-syntax-ns#">
  <!ENTITY ex "http://example.org/zoo#">
]>
<rdf:RDF xmlns:rdf="&rdf;" xmlns:ex="&ex;">
  <rdf:Description rdf:about="&ex;Tom">
    <rdf:type rdf:resource="&ex;Cat"/>
    <ex:name>Tom &amp; Jerry's &ex;</ex:name>
  </rdf:Description>
  <rdf:Description rdf:about="&ex;Jerry"><rdf:type rdf:resource="&ex;Mouse"/></rdf:Description>
</rdf:RDF>
"""


def test_entity_bomb_is_refused_in_one_line_under_a_memory_cap(tmp_path: Path) -> None:
    bomb = billion_laughs(tmp_path / "laughs.rdf")
    assert bomb.stat().st_size < 700
    res = run("sparql", "ASK {}", "--kg", str(bomb), home=tmp_path / "home")
    lines = error_lines(res)
    assert res.returncode == 1, res.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr[-2000:]
    assert "laughs.rdf" in lines[0] and "entity expansion over 67108864 bytes — refused" in lines[0]
    assert builds(tmp_path / "home") == []


def test_namespace_entities_in_rdfxml_still_load(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo.rdf"
    zoo.write_text(BENIGN)
    q = "SELECT ?s ?t WHERE { ?s a ?t } ORDER BY ?s"
    res = run("sparql", q, "--kg", str(zoo), "--format", "csv", home=tmp_path / "home")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "s,t",
        "http://example.org/zoo#Jerry,http://example.org/zoo#Mouse",
        "http://example.org/zoo#Tom,http://example.org/zoo#Cat",
    ]
    name = run("sparql", "SELECT ?n WHERE { ?s <http://example.org/zoo#name> ?n }", "--kg", str(zoo), "-f", "csv", home=tmp_path / "home")
    assert name.stdout.splitlines()[1] == "Tom & Jerry's http://example.org/zoo#"


def test_entity_expansion_is_computed_through_nesting_and_references(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo.rdf"
    zoo.write_text(BENIGN)
    rdf, ex = len("http://www.w3.org/1999/02/22-rdf-syntax-ns#"), len("http://example.org/zoo#")
    assert check_entity_expansion(zoo) == rdf + 6 * ex  # &amp; is predefined, not declared
    bomb = billion_laughs(tmp_path / "laughs.rdf")
    assert check_entity_expansion(bomb, limit=4 * 10**9) == 3 * 10**9  # "lol" times 10⁹
    with pytest.raises(EntityExpansionError, match=r"over 1000000 bytes — refused"):
        check_entity_expansion(bomb, limit=10**6)
    loop = tmp_path / "loop.rdf"
    loop.write_text('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "x&b;"><!ENTITY b "&a;">]><r>&a;</r>')
    with pytest.raises(EntityExpansionError, match="refers to itself"):
        check_entity_expansion(loop)


def _big_ntriples(path: Path, n: int) -> Path:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(f'<http://example.org/s{i}> <http://example.org/p{i % 50}> "value number {i}" .\n')
    return path


@pytest.mark.slow
def test_a_killed_bulk_load_leaves_a_build_folder_that_the_next_run_removes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    big = _big_ntriples(tmp_path / "big.nt", 300_000)
    proc = subprocess.Popen(
        [*SN, "sparql", "ASK {}", "--kg", str(big)], env=_env(home),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_cap_memory,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any((b / "oxigraph").exists() for b in builds(home)) and time.monotonic() < deadline:
            assert proc.poll() is None, "the load ended before it could be killed"
            time.sleep(0.01)
        time.sleep(0.3)  # well inside the bulk load, which takes seconds
        # A build whose process is alive is not a leftover.
        assert remove_leftovers(home / "stores") == [] and len([b for b in builds(home) if b.is_dir()]) == 1
        assert proc.poll() is None, "the load ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [b for b in builds(home) if b.is_dir()]
    assert len(left) == 1 and (left[0] / "oxigraph").is_dir() and stores(home) == []
    small = tmp_path / "small.ttl"
    small.write_text('<http://example.org/a> <http://example.org/p> "kept" .\n')
    res = run("sparql", "SELECT ?o WHERE { ?s ?p ?o }", "--kg", str(small), "-f", "csv", home=home)
    assert res.returncode == 0 and res.stdout.splitlines() == ["o", "kept"], res.stderr
    assert builds(home) == []


def _small_graph(tmp_path: Path) -> Path:
    ttl = tmp_path / "g.ttl"
    ttl.write_text(
        '<http://example.org/a> <http://example.org/name> "Ada" .\n<http://example.org/b> <http://example.org/name> "Bob" .\n'
    )
    return ttl


QUERY = "SELECT ?n WHERE { ?s <http://example.org/name> ?n } ORDER BY ?n"


def test_a_store_with_garbage_over_its_files_is_rebuilt_and_answers(tmp_path: Path) -> None:
    home, ttl = tmp_path / "home", _small_graph(tmp_path)
    assert run("sparql", QUERY, "--kg", str(ttl), "-f", "csv", home=home).returncode == 0
    [store] = stores(home)
    damaged = 0
    for f in (store / "oxigraph").rglob("*"):
        if f.is_file():
            f.write_bytes(os.urandom(max(64, f.stat().st_size)))
            damaged += 1
    assert damaged >= 3
    res = run("sparql", QUERY, "--kg", str(ttl), "-f", "csv", home=home)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["n", "Ada", "Bob"]
    assert f"the store {store} is damaged" in res.stderr and "rebuilding it from its source files" in res.stderr
    again = run("sparql", QUERY, "--kg", str(ttl), "-f", "csv", home=home)
    assert again.stdout.splitlines() == ["n", "Ada", "Bob"] and "damaged" not in again.stderr
    assert stores(home) == [store] and builds(home) == []


def test_a_truncated_meta_json_is_named_and_the_store_rebuilt(tmp_path: Path) -> None:
    home, ttl = tmp_path / "home", _small_graph(tmp_path)
    assert run("sparql", QUERY, "--kg", str(ttl), "-f", "csv", home=home).returncode == 0
    [store] = stores(home)
    meta = store / "meta.json"
    meta.write_text(meta.read_text()[:13])  # '{\n "files": ': what a crash mid-write leaves
    res = run("sparql", QUERY, "--kg", str(ttl), "-f", "csv", home=home)
    assert res.returncode == 0 and res.stdout.splitlines() == ["n", "Ada", "Bob"], res.stderr
    assert f"cannot read {meta}" in res.stderr and "Expecting value" in res.stderr
    assert json.loads(meta.read_text())["triples"] == 2


def test_cache_lists_replaces_and_clears_stores(tmp_path: Path) -> None:
    home, ttl = tmp_path / "home", _small_graph(tmp_path)
    other = tmp_path / "other.nt"
    other.write_text('<http://example.org/x> <http://example.org/p> "1" .\n')
    for kg in (ttl, other):
        assert run("sparql", "ASK {}", "--kg", str(kg), home=home).returncode == 0
    listed = json.loads(run("cache", "--json", home=home).stdout)
    assert listed["stores_dir"] == str(home / "stores")
    rows = {tuple(s["files"]): s for s in listed["stores"]}
    assert set(rows) == {(str(ttl.resolve()),), (str(other.resolve()),)}
    assert all(s["status"] == "current" and s["size_bytes"] > 10_000 and 0 <= s["age_s"] < 600 for s in rows.values())
    assert rows[(str(other.resolve()),)]["triples"] == 1
    table = run("cache", home=home)
    assert table.returncode == 0 and str(ttl.resolve()) in table.stdout and "current" in table.stdout
    # A changed file gets a new store; the one of its old content is removed, not kept forever.
    old = Path(rows[(str(other.resolve()),)]["path"])
    other.write_text(other.read_text() + '<http://example.org/y> <http://example.org/p> "2" .\n')
    assert run("sparql", "ASK {}", "--kg", str(other), home=home).returncode == 0
    assert not old.exists() and len(stores(home)) == 2
    # `clear` removes stores whose source is gone; `clear --all` removes the rest.
    other.unlink()
    cleared = json.loads(run("cache", "clear", "--json", home=home).stdout)["removed"]
    assert [s["files"] for s in cleared] == [[str(other.resolve())]] and cleared[0]["status"] == "stale"
    assert [s["files"] for s in json.loads(run("cache", "--json", home=home).stdout)["stores"]] == [[str(ttl.resolve())]]
    everything = run("cache", "clear", "--all", home=home)
    assert everything.returncode == 0 and "1 store(s) removed" in everything.stderr
    assert stores(home) == [] and json.loads(run("cache", "--json", home=home).stdout)["stores"] == []
