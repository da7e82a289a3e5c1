"""Hardening, round two (issue 29, item 9), and what a new user tripped on (issue 26, item 4): output that attacks
its reader. CSV from every verb and the web UI's download neutralises cells a spreadsheet would run as formulas
(OWASP: a leading quote), JSON keeps the raw values; terminal output shows control characters as escapes and never
reads data as markup or emoji codes. Real CLI processes over a graph written for this test; a real browser."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

import test_serve
import test_ui
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.output import terminal_safe
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import spreadsheet_safe
from sparqlnav.settings import Settings
from test_cli import run

tiny_path = test_serve.tiny_path
tiny = test_serve.tiny
browser_page = test_ui.browser_page

FORMULAS = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://evil.example/","click")', "+1+cmd", "-2+cmd", "@SUM(A1)"]
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
EVIL = "".join(f'<http://x.example/f{i}> <{LABEL}> "{json.dumps(v)[1:-1]}" .\n' for i, v in enumerate(FORMULAS)) + (
    f'<http://x.example/esc> <{LABEL}> "a\\u001b[2Jb" .\n'
    f'<http://x.example/markup> <{LABEL}> "[bold]loud[/] :smile: [/]" .\n'
    f'<http://x.example/markup> <http://x.example/email> "Heinrich.Hoch@company.org" .\n'
    f'<http://x.example/neg> <{LABEL}> "-5" .\n'
)


@pytest.fixture
def evil(tmp_path: Path) -> Path:
    path = tmp_path / "evil.ttl"
    path.write_text(EVIL, encoding="utf-8")
    return path


def test_spreadsheet_safe_prefixes_formulas_and_leaves_numbers() -> None:
    assert [spreadsheet_safe(v) for v in FORMULAS] == ["'" + v for v in FORMULAS]
    assert [spreadsheet_safe(v) for v in ("-5", "+3.5e2", "plain", "a=b", "")] == ["-5", "+3.5e2", "plain", "a=b", ""]
    assert spreadsheet_safe("\tx") == "'\tx"
    assert terminal_safe("a\x1b[2Jb\x07\n\tc\x9b") == "a\\x1b[2Jb\\x07\n\tc\\x9b"


def test_csv_from_sparql_search_and_entity_is_neutralised_and_json_is_raw(evil: Path, tmp_path: Path) -> None:
    query = f"SELECT ?s ?l WHERE {{ ?s <{LABEL}> ?l }} ORDER BY ?s"
    as_csv = run("sparql", query, "--kg", str(evil), "-f", "csv", home=tmp_path / "h")
    assert as_csv.returncode == 0, as_csv.stderr
    cells = {row[0]: row[1] for row in csv.reader(io.StringIO(as_csv.stdout))}
    assert [cells[f"http://x.example/f{i}"] for i in range(len(FORMULAS))] == ["'" + v for v in FORMULAS]
    assert cells["http://x.example/neg"] == "-5"
    as_json = run("sparql", query, "--kg", str(evil), "--json", home=tmp_path / "h")
    raw = {b["s"]["value"]: b["l"]["value"] for b in json.loads(as_json.stdout)["results"]["bindings"]}
    assert [raw[f"http://x.example/f{i}"] for i in range(len(FORMULAS))] == FORMULAS

    entity = run("entity", "<http://x.example/f0>", "--kg", str(evil), "-f", "csv", home=tmp_path / "h")
    assert entity.returncode == 0, entity.stderr
    assert "'" + FORMULAS[0] in [c for row in csv.reader(io.StringIO(entity.stdout)) for c in row]
    search = run("search", "cmd", "--kg", str(evil), "-f", "csv", home=tmp_path / "h")
    assert search.returncode == 0, search.stderr
    found = [c for row in csv.reader(io.StringIO(search.stdout)) for c in row]
    assert "'" + FORMULAS[0] in found and FORMULAS[0] not in found


def test_terminal_output_escapes_control_characters_and_reads_no_markup_or_emoji(evil: Path, tmp_path: Path) -> None:
    table = run("sparql", f"SELECT ?l WHERE {{ ?s <{LABEL}> ?l }}", "--kg", str(evil), home=tmp_path / "h")
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout and "a\\x1b[2Jb" in table.stdout
    assert "[bold]loud[/] :smile: [/]" in table.stdout
    page = run("entity", "<http://x.example/markup>", "--kg", str(evil), home=tmp_path / "h")
    assert page.returncode == 0, page.stderr
    assert "[bold]loud[/] :smile: [/]" in page.stdout and "rdfs:label" in page.stdout
    assert "😄" not in page.stdout and "🏷" not in page.stdout


@pytest.mark.slow
def test_the_web_uis_csv_download_is_neutralised(
    settings: Settings, tiny: KnowledgeGraph, browser_page: Any
) -> None:
    page = browser_page
    values = " ".join(json.dumps(v) for v in [*FORMULAS, "-5"])
    with background(create_app(settings, ServeConfig(mcp=False), kgs={"tiny": tiny})) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.click("#mode-sparql")
        page.locator("#sparql-view textarea").fill(f"SELECT ?v WHERE {{ VALUES ?v {{ {values} }} }}")
        page.click("#sparql-run")
        page.wait_for_selector("#sparql-results table")
        with page.expect_download() as got:
            page.click("#sparql-results button.download-csv")
        rows = list(csv.reader(io.StringIO(Path(got.value.path()).read_text(encoding="utf-8"))))
        assert rows == [["v"], *[["'" + v] for v in FORMULAS], ["-5"]]
        with page.expect_download() as got_json:
            page.click("#sparql-results button.download-json")
        data = json.loads(Path(got_json.value.path()).read_text(encoding="utf-8"))
        assert [b["v"]["value"] for b in data["results"]["bindings"]] == [*FORMULAS, "-5"]
