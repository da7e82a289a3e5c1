"""Nothing outside its folder (issue 29, items 4–5), through the real CLI on real files.

Item 4: a symlink inside a folder given to `index --docs` / `--examples` (or to `--kg`) that leads out of the folder
is not read, and the summary says so; a file named outright on the command line is followed (the user's word).
Item 5: `cache clear` removes only folders sparqlnav made (the `.sparqlnav-store` marker, or an older store's
meta.json), never through a symlink, and takes no lock through a symlink."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SN = [sys.executable, "-m", "sparqlnav"]
MARKER = ".sparqlnav-store"
SECRET = "SECRET-FROM-OUTSIDE the folder, a line nobody meant to index as evidence"


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a real process with its own home."""
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "300"}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    return subprocess.run([*SN, *args], capture_output=True, text=True, env=env, timeout=240, check=False)


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, res.stderr
    return res


def stored_documents(home: Path) -> list[dict[str, Any]]:
    """Every document in the stored retrieval indexes under `home` (what hybrid and retrieve search)."""
    docs: list[dict[str, Any]] = []
    for db in sorted((home / "retrieval").glob("*/index.sqlite")):
        with sqlite3.connect(db) as conn:
            docs += [json.loads(row[0]) for row in conn.execute("SELECT doc FROM docs")]
    return docs


def documents_folder(tmp_path: Path) -> tuple[Path, Path]:
    """docs/ with one page of its own, and a text file outside it."""
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    docs.mkdir()
    outside.mkdir()
    (docs / "ytterby.md").write_text("# Ytterby\n\nYtterby is a village in Sweden where four elements were found.\n")
    secret = outside / "secret.txt"
    secret.write_text(f"Notes\n\n{SECRET}.\n")  # a one-line text would be only a title
    return docs, secret


# ------------------------------------------------------------------------------------------ item 4: documents


def test_a_docs_symlink_out_of_the_folder_is_not_indexed_and_the_summary_names_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs, secret = documents_folder(tmp_path)
    (docs / "passwd.txt").symlink_to(secret)
    # A symlink that stays inside the folder is followed, under its own name.
    (docs / "sub").mkdir()
    (docs / "sub" / "again.md").symlink_to("../ytterby.md")
    # A symlinked folder leading out is not entered either.
    (docs / "shared").symlink_to(secret.parent, target_is_directory=True)
    res = ok(run("index", "--kg", "demo", "--embedder", "none", "--docs", str(docs), home=home))
    assert f"skipped 2 entries outside {docs}/ (symlinks): passwd.txt, shared/" in res.stdout
    stored = stored_documents(home)
    texts = [d["text"] for d in stored]
    assert not [t for t in texts if "SECRET-FROM-OUTSIDE" in t]
    files = {d["meta"].get("file") for d in stored if d["kind"] == "passage"}
    assert files == {"ytterby.md", "sub/again.md"}
    assert "passwd.txt" not in json.loads(next((home / "retrieval").glob("*/documents.json")).read_text())["files"]


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="no /etc/passwd here")
def test_the_red_teams_etc_passwd_symlink_is_not_indexed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs, _secret = documents_folder(tmp_path)
    (docs / "passwd.txt").symlink_to("/etc/passwd")
    summary = json.loads(ok(run("index", "--kg", "demo", "--embedder", "none", "--docs", str(docs), "--json",
                                home=home)).stdout)
    assert summary["skipped"] == [{"path": str(docs / "passwd.txt"), "folder": str(docs),
                                   "why": "a symlink outside the folder"}]
    assert summary["files"] == 1
    first_line = Path("/etc/passwd").read_text().splitlines()[0]
    assert not [d for d in stored_documents(home) if first_line in d["text"] or "passwd" in d["id"]]


def test_a_symlink_indexed_before_is_dropped_on_the_next_refresh(tmp_path: Path) -> None:
    home = tmp_path / "home"
    docs, secret = documents_folder(tmp_path)
    ok(run("index", "--kg", "demo", "--embedder", "none", "--docs", str(docs), home=home))
    (docs / "passwd.txt").symlink_to(secret)
    res = ok(run("index", "--kg", "demo", "--embedder", "none", "--docs", str(docs), home=home))
    assert f"skipped 1 file outside {docs}/ (a symlink): passwd.txt" in res.stdout
    assert not [d for d in stored_documents(home) if "SECRET-FROM-OUTSIDE" in d["text"]]


def test_a_document_named_outright_is_read_even_through_a_symlink(tmp_path: Path) -> None:
    # The decision: a file given on the command line is the user's word; only a folder's contents are confined.
    home = tmp_path / "home"
    _docs, secret = documents_folder(tmp_path)
    link = tmp_path / "notes.txt"
    link.symlink_to(secret)
    summary = json.loads(ok(run("index", "--kg", "demo", "--embedder", "none", "--docs", str(link), "--json",
                                home=home)).stdout)
    assert summary["skipped"] == [] and summary["files"] == 1
    assert [d for d in stored_documents(home) if "SECRET-FROM-OUTSIDE" in d["text"]]


# ------------------------------------------------------------------------------------------ item 4: examples, VoID, --kg

EXAMPLE = """@prefix ex: <https://example.org/examples/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix sh: <http://www.w3.org/ns/shacl#> .
ex:{id} a sh:SPARQLExecutable, sh:SPARQLSelectExecutable ;
    rdfs:comment "{question}"@en ;
    sh:select "SELECT (COUNT(?p) AS ?n) WHERE {{ ?p a <http://example.org/Person> }}" .
"""


def test_an_examples_symlink_to_an_outside_ttl_is_skipped_and_named(tmp_path: Path) -> None:
    home, examples, outside = tmp_path / "home", tmp_path / "examples", tmp_path / "outside"
    examples.mkdir()
    outside.mkdir()
    (examples / "people.ttl").write_text(EXAMPLE.format(id="people", question="How many people are there?"))
    secret = outside / "secret.ttl"
    secret.write_text(EXAMPLE.format(id="secret", question=SECRET))
    (examples / "out.ttl").symlink_to(secret)
    res = ok(run("index", "--kg", "demo", "--embedder", "none", "--examples", str(examples), home=home))
    assert res.stdout.startswith("1 examples,")
    assert f"skipped 1 file outside {examples}/ (a symlink): out.ttl" in res.stdout
    questions = [d["text"] for d in stored_documents(home) if d["kind"] == "example"]
    assert len(questions) == 1 and "How many people" in questions[0]
    assert not [d for d in stored_documents(home) if "SECRET-FROM-OUTSIDE" in d["text"]]


VOID = """@prefix void: <http://rdfs.org/ns/void#> .
@prefix ex: <http://example.org/> .
<http://example.org/dataset> a void:Dataset ; void:triples 2 ;
    void:classPartition [ void:class ex:Person ; void:entities 2 ] ;
    void:propertyPartition [ void:property ex:name ; void:triples 2 ] .
"""


def test_a_void_file_named_outright_is_read_through_its_symlink(tmp_path: Path) -> None:
    # --void takes files only, each named by the user: a symlink there is followed (the decision above), and a
    # VoID file under a symlinked folder named outright too. No folder is walked, so nothing is skipped.
    home, outside = tmp_path / "home", tmp_path / "outside"
    outside.mkdir()
    (outside / "void.ttl").write_text(VOID)
    link = tmp_path / "void.ttl"
    link.symlink_to(outside / "void.ttl")
    (tmp_path / "linked").symlink_to(outside, target_is_directory=True)
    for given in (link, tmp_path / "linked" / "void.ttl"):
        summary = json.loads(ok(run("index", "--kg", "demo", "--embedder", "none", "--void", str(given), "--json",
                                    home=home)).stdout)
        assert summary["skipped"] == [] and summary["shapes"] > 0


def test_a_kg_folder_symlink_out_of_the_folder_is_not_loaded(tmp_path: Path) -> None:
    home, kg, outside = tmp_path / "home", tmp_path / "kg", tmp_path / "outside"
    kg.mkdir()
    outside.mkdir()
    (kg / "g.ttl").write_text('<http://example.org/a> <http://example.org/name> "Ada" .\n')
    (outside / "secret.ttl").write_text(f'<http://example.org/s> <http://example.org/name> "{SECRET}" .\n')
    (kg / "more.ttl").symlink_to(outside / "secret.ttl")
    res = ok(run("sparql", "SELECT ?n WHERE { ?s <http://example.org/name> ?n }", "--kg", str(kg), "-f", "csv",
                 home=home))
    assert res.stdout.splitlines() == ["n", "Ada"]
    assert f"skipped 1 file outside {kg}/ (a symlink): more.ttl" in res.stderr


# ------------------------------------------------------------------------------------------ item 5: cache clear


def small_graph(path: Path, name: str = "Ada") -> Path:
    path.write_text(f'<http://example.org/a> <http://example.org/name> "{name}" .\n')
    return path


def build_store(home: Path, ttl: Path) -> Path:
    """Build the store of `ttl` under `home` through the CLI; its folder."""
    ok(run("sparql", "ASK {}", "--kg", str(ttl), home=home))
    listed = json.loads(ok(run("cache", "--json", home=home)).stdout)["stores"]
    return next(Path(s["path"]) for s in listed if s["files"] == [str(ttl.resolve())])


def test_cache_clear_leaves_a_folder_it_did_not_make(tmp_path: Path) -> None:
    home = tmp_path / "H"
    mine = home / "stores" / "mine"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine, not sparqlnav's\n")
    for args in (("cache", "clear"), ("cache", "clear", "--all")):
        res = ok(run(*args, home=home))
        assert "removed mine" not in res.stdout and "0 store(s) removed" in res.stderr
        assert f"not a store, left alone: mine (no {MARKER} marker)" in res.stderr
        assert (mine / "notes.txt").read_text() == "mine, not sparqlnav's\n"
    listed = json.loads(ok(run("cache", "--json", home=home)).stdout)
    assert listed["stores"] == [] and listed["left_alone"] == [{"path": str(mine), "why": f"no {MARKER} marker"}]


def test_a_symlinked_stores_folder_is_refused_and_nothing_where_it_points_is_removed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    # A real store, made stale (its source is gone), and a marker-less folder, both where the symlink points.
    store = build_store(elsewhere, small_graph(tmp_path / "gone.ttl"))
    (tmp_path / "gone.ttl").unlink()
    (elsewhere / "stores" / "precious").mkdir()
    (elsewhere / "stores" / "precious" / "data").write_text("keep\n")
    home = tmp_path / "H"
    home.mkdir()
    (home / "stores").symlink_to(elsewhere / "stores", target_is_directory=True)
    for args in (("cache", "clear"), ("cache", "clear", "--all")):
        res = run(*args, home=home)
        assert res.returncode == 1 and "removed" not in res.stdout
        assert f"{home / 'stores'} is a symlink" in res.stderr and "removes nothing through one" in res.stderr
    assert (store / "meta.json").is_file() and (elsewhere / "stores" / "precious" / "data").read_text() == "keep\n"


def test_a_build_lock_symlink_creates_no_file_outside_the_home(tmp_path: Path) -> None:
    home, outside = tmp_path / "H", tmp_path / "outside"
    (home / "stores").mkdir(parents=True)
    outside.mkdir()
    (home / "stores" / ".build-x.lock").symlink_to(outside / "created")
    res = ok(run("cache", "clear", home=home))
    assert not (outside / "created").exists()
    assert "not a store, left alone: .build-x.lock (a symlink)" in res.stderr
    # Building a store cleans leftovers first: still nothing outside.
    ok(run("sparql", "ASK {}", "--kg", str(small_graph(tmp_path / "g.ttl")), home=home))
    assert not (outside / "created").exists() and (home / "stores" / ".build-x.lock").is_symlink()
    assert list(outside.iterdir()) == []


def test_an_abandoned_build_folder_without_the_marker_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "H"
    build = home / "stores" / ".build-old"
    build.mkdir(parents=True)
    (build / "data").write_text("keep\n")
    res = ok(run("cache", "clear", "--all", home=home))
    assert (build / "data").is_file() and not (home / "stores" / ".build-old.lock").exists()
    assert f"not a store, left alone: .build-old (no {MARKER} marker)" in res.stderr


def test_a_damaged_store_is_removed_and_a_current_one_kept(tmp_path: Path) -> None:
    home = tmp_path / "H"
    current = build_store(home, small_graph(tmp_path / "a.ttl"))
    garbled = build_store(home, small_graph(tmp_path / "b.ttl", "Bob"))
    broken_db = build_store(home, small_graph(tmp_path / "c.ttl", "Cy"))
    (garbled / "meta.json").write_text("{garbage")
    for f in (broken_db / "oxigraph").iterdir():  # the database no longer reads; meta.json does
        if f.is_file():
            f.write_bytes(b"\0garbage")
    listed = {Path(s["path"]): s for s in json.loads(ok(run("cache", "--json", home=home)).stdout)["stores"]}
    assert {p: s["status"] for p, s in listed.items()} == {current: "current", garbled: "damaged", broken_db: "damaged"}
    assert "meta.json" in listed[garbled]["problem"]
    cleared = json.loads(ok(run("cache", "clear", "--json", home=home)).stdout)
    assert sorted(Path(s["path"]) for s in cleared["removed"]) == sorted([garbled, broken_db])
    assert current.is_dir() and not garbled.exists() and not broken_db.exists()
    assert (current / MARKER).is_file()


def test_a_store_of_an_older_version_counts_as_made_by_sparqlnav_and_gets_its_marker(tmp_path: Path) -> None:
    home, ttl = tmp_path / "H", small_graph(tmp_path / "a.ttl")
    store = build_store(home, ttl)
    (store / MARKER).unlink()  # as built before the marker existed: its meta.json is sparqlnav's
    listed = json.loads(ok(run("cache", "--json", home=home)).stdout)
    assert [s["status"] for s in listed["stores"]] == ["current"] and listed["left_alone"] == []
    ok(run("sparql", "ASK {}", "--kg", str(ttl), home=home))
    assert (store / MARKER).is_file()
    # A bare folder holding only an empty meta.json is still no store.
    (home / "stores" / "bare").mkdir()
    (home / "stores" / "bare" / "meta.json").write_text("{}")
    ok(run("cache", "clear", "--all", home=home))
    assert (home / "stores" / "bare").is_dir() and not store.exists()


def test_a_planted_symlink_in_the_stores_folder_is_never_followed(tmp_path: Path) -> None:
    home, victim = tmp_path / "H", tmp_path / "victim"
    victim.mkdir()
    (victim / "data").write_text("keep\n")
    (home / "stores").mkdir(parents=True)
    (home / "stores" / "link").symlink_to(victim, target_is_directory=True)
    res = ok(run("cache", "clear", "--all", home=home))
    assert (victim / "data").read_text() == "keep\n"
    assert "removed link" not in res.stdout and "not a store, left alone: link (a symlink)" in res.stderr


# -- item 8, document indexing: per-file limits, and one bad file does not abort the rest ---------------------------


def test_oversized_binary_and_unparseable_documents_are_skipped_and_named(tmp_path: Path) -> None:
    """A 100 MB JSONL line took 3.8 GB, a 200 MB HTML file 2 GB; a binary file named .html aborted the whole index
    with "unknown status keyword 'T' in marked section" and no file name."""
    from sparqlnav.retrieval.documents import MAX_FILE_BYTES, MAX_RECORD_BYTES

    home = tmp_path / "home"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Ytterby\n\nYtterby is a village in Sweden where four elements were found.\n")
    with (docs / "huge.html").open("wb") as fh:  # sparse: the size is what counts, not the bytes written
        fh.truncate(MAX_FILE_BYTES + 1)
    (docs / "long.jsonl").write_text(json.dumps({"id": "a", "text": "x" * (MAX_RECORD_BYTES + 10)}) + "\n")
    (docs / "binary.html").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    (docs / "marked.html").write_text("<html><body><![T foo]>text</body></html>")
    res = ok(run("index", "--kg", "demo", "--embedder", "none", "--docs", str(docs), home=home))
    said = res.stdout
    assert f"skipped huge.html: {MAX_FILE_BYTES + 1:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit" in said
    assert f"skipped long.jsonl: line 1 is longer than {MAX_RECORD_BYTES:,} bytes" in said
    assert "skipped binary.html: not text (binary content), though named .html" in said
    assert "skipped marked.html: not readable as html (" in said
    files = {d["meta"].get("file") for d in stored_documents(home) if d["kind"] == "passage"}
    assert files == {"good.md"}
