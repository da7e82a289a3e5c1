"""Issue 17 in a real headless Chromium against a real server: the start page offers the KG's example questions
and one click asks one; results download as CSV (the file equals the table) and JSON; a copied query carries its
PREFIX lines; long IRIs are compact and cells stay on one line; the editor wraps long lines and marks a syntax
error at its line and column; at 400 px the header folds and the entity panel covers the page and closes.
Screenshots are kept under artifacts/ui/ (`test_ui.artifacts`), with the downloaded CSV."""

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
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import Settings
from test_serve import EX

tiny_path = test_serve.tiny_path
tiny = test_serve.tiny
browser_page = test_ui.browser_page

LONG_IRI = "https://data.example.net/registry/v2/organisations/departments/people/records/person_0042_alice"
NOTE = 'She said "hi", then left'  # a comma and quotes: the CSV must quote it
PEOPLE = (
    f"PREFIX ex: <{EX}>\nPREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    "SELECT ?p ?name ?age ?record ?note WHERE {\n"
    "  ?p a ex:Person ; rdfs:label ?name ; ex:age ?age .\n"
    f"  BIND(IF(?p = ex:alice, <{LONG_IRI}>, ?p) AS ?record)\n"
    f"  BIND(IF(?p = ex:alice, '{NOTE.replace(chr(34), chr(92) + chr(34))}', 'none') AS ?note)\n"
    "} ORDER BY ?age"
)
BROKEN = "SELECT ?s WHERE {\n  ?s ?p ?o .\n  }}\n"  # the second brace on line 3, column 4, is one too many
LONG_LINE = f"SELECT ?p WHERE {{ ?p <{EX}memberOf> <{EX}rockets> . ?p <{EX}age> ?age . FILTER(?age > 30 && ?age < 60) }}"

# The text before the mark in the highlighted copy of the editor: the line and column it sits at.
MARK_PLACE = """el => {
  const code = el.closest('pre');
  const r = document.createRange();
  r.setStart(code, 0);
  r.setEndBefore(el);
  const before = r.toString();
  return [before.split('\\n').length, before.length - before.lastIndexOf('\\n')];
}"""
NO_WRAPPED_CELLS = """tds => tds.every(td => td.getBoundingClientRect().height < 2 * parseFloat(getComputedStyle(td).lineHeight))"""


def app_for(settings: Settings, tiny: KnowledgeGraph) -> Any:
    """The small graph with no LLM: auto is the lexical strategy."""
    return create_app(settings, ServeConfig(mcp=False), kgs={"tiny": tiny})


@pytest.mark.slow
def test_start_page_downloads_copy_and_syntax_marks(settings: Settings, tiny: KnowledgeGraph, browser_page: Any) -> None:
    page = browser_page
    shots = test_ui.artifacts()
    with background(app_for(settings, tiny)) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        # The start page teaches: questions written from the graph's schema, one click to ask.
        examples = page.locator("#welcome button.example")
        assert examples.all_inner_texts() == [
            "How many persons are there?", "List the persons with their age.", "How many teams are there?"
        ]
        assert page.get_attribute("#welcome .examples", "data-source") == "schema"
        page.screenshot(path=str(shots / "start-page.png"))
        examples.first.click()
        page.wait_for_selector(".turn.done, .turn.failed", timeout=30_000)
        assert page.locator(".turn.done").count() == 1, page.inner_text("#chat")
        assert page.inner_text(".turn .question") == "How many persons are there?"
        assert page.eval_on_selector_all(".answer .results-table td", "els => els.map(e => e.dataset.value)") == ["3"]
        assert page.locator("#welcome").count() == 0
        assert page.locator(".steps").evaluate("d => d.open") is False
        assert page.inner_text(".steps-summary") == "linked person · 2 queries · answer from query #1"

        # Copy: the query as edited, with a PREFIX line for the prefix it uses but does not declare.
        page.context_.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
        page.locator(".sparql-block textarea").fill("SELECT ?team WHERE { ex:carol ex:memberOf ?team }")
        page.click(".sparql-block button.copy")
        page.wait_for_selector(".sparql-block button.copy:text('Copied')")
        assert page.evaluate("navigator.clipboard.readText()") == (
            f"PREFIX ex: <{EX}>\nSELECT ?team WHERE {{ ex:carol ex:memberOf ?team }}"
        )

        # Results to take away: the CSV holds exactly what the table shows, row for row.
        page.click("#mode-sparql")
        editor = page.locator("#sparql-view textarea")
        editor.fill(PEOPLE)
        page.click("#sparql-run")
        page.wait_for_selector("#sparql-results table")
        cells = page.eval_on_selector_all(
            "#sparql-results tbody tr", "trs => trs.map(tr => Array.from(tr.cells).map(td => td.dataset.value))"
        )
        assert cells == [
            [EX + "carol", "Carol Castellano", "29", EX + "carol", "none"],
            [EX + "alice", "Alice Wunderlich", "34", LONG_IRI, NOTE],
            [EX + "bob", "Bob Baumeister", "51", EX + "bob", "none"],
        ]
        with page.expect_download() as got:
            page.click("#sparql-results button.download-csv")
        download = got.value
        assert download.suggested_filename == "results.csv"
        text = Path(download.path()).read_text(encoding="utf-8")
        (shots / "results.csv").write_text(text, encoding="utf-8")
        rows = list(csv.reader(io.StringIO(text)))
        assert rows[0] == ["p", "name", "age", "record", "note"]
        assert rows[1:] == cells
        with page.expect_download() as got_json:
            page.click("#sparql-results button.download-json")
        data = json.loads(Path(got_json.value.path()).read_text(encoding="utf-8"))
        assert data["head"]["vars"] == rows[0]
        assert [[b[v]["value"] for v in rows[0]] for b in data["results"]["bindings"]] == cells

        # A long IRI no prefix covers is shown compact, whole on hover; no cell wraps onto a second line.
        record = page.locator(f"#sparql-results td .iri[data-iri='{LONG_IRI}']")
        assert record.inner_text() == "<data.example.net/…/person_0042_alice>"
        assert record.get_attribute("title") == LONG_IRI
        assert page.eval_on_selector_all("#sparql-results td", NO_WRAPPED_CELLS) is True
        page.screenshot(path=str(shots / "csv-download.png"))

        # The editor wraps a long line instead of scrolling sideways.
        editor.fill(LONG_LINE)
        assert editor.evaluate("a => a.scrollWidth <= a.clientWidth") is True
        page.set_viewport_size({"width": 700, "height": 1000})
        line_height = editor.evaluate("a => parseFloat(getComputedStyle(a).lineHeight)")
        assert page.locator("#sparql-view .editor-hl").evaluate("p => p.scrollHeight") > 3.5 * line_height
        assert editor.evaluate("a => a.scrollWidth <= a.clientWidth") is True
        page.set_viewport_size({"width": 1280, "height": 1000})

        # A syntax error is marked where it is, with our parser's words.
        editor.fill(BROKEN)
        page.click("#sparql-run")
        page.wait_for_selector("#sparql-view .syntax-mark")
        mark = page.locator("#sparql-view .syntax-mark")
        assert mark.inner_text() == "}" and mark.evaluate(MARK_PLACE) == [3, 4]
        assert (mark.get_attribute("data-line"), mark.get_attribute("data-column")) == ("3", "4")
        message = "line 3, column 4: expected the end of the query, found '}'"
        assert page.inner_text("#sparql-view .editor-error") == message
        assert page.inner_text("#sparql-status") == "syntax_error: " + message
        assert "u{" not in page.inner_text("#sparql-view")  # none of the engine's Unicode ranges
        page.screenshot(path=str(shots / "syntax-error.png"))
        editor.press("End")
        editor.type(" ")  # editing clears the mark
        assert page.locator("#sparql-view .syntax-mark").count() == 0
        assert page.locator("#sparql-view .editor-error").is_hidden()
    assert page.outside == []
    assert [p for p in page.problems if "status of 400 (Bad Request)" not in p] == []
    for name in ("start-page.png", "csv-download.png", "syntax-error.png"):
        assert (shots / name).stat().st_size > 10_000


@pytest.mark.slow
def test_narrow_window_folds_the_header_and_overlays_the_entity_panel(
    settings: Settings, tiny: KnowledgeGraph, browser_page: Any
) -> None:
    page = browser_page
    shots = test_ui.artifacts()
    page.set_viewport_size({"width": 400, "height": 800})
    overflow = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    with background(app_for(settings, tiny)) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        assert page.evaluate(overflow) == 0
        header = page.locator("header.top")
        assert header.bounding_box()["height"] < 60  # one row: the settings are folded away
        assert page.locator("#kg").is_hidden() and page.locator("#menu-toggle").is_visible()
        page.click("#menu-toggle")
        assert page.locator("#kg").is_visible() and page.get_attribute("#menu-toggle", "aria-expanded") == "true"
        assert page.evaluate(overflow) == 0
        page.screenshot(path=str(shots / "narrow-menu.png"))
        page.click("#menu-toggle")
        assert page.locator("#kg").is_hidden()

        page.click("#welcome button.example >> nth=1")  # the persons and their ages: a table with IRIs
        page.wait_for_selector(".turn.done, .turn.failed", timeout=30_000)
        assert page.locator(".turn.done").count() == 1, page.inner_text("#chat")
        assert page.evaluate(overflow) == 0
        page.screenshot(path=str(shots / "narrow-400.png"))

        page.click("#mode-sparql")
        page.locator("#sparql-view textarea").fill(f"SELECT ?t WHERE {{ <{EX}carol> <{EX}memberOf> ?t }}")
        page.click("#sparql-run")
        page.click("#sparql-results td .iri")
        page.wait_for_selector("#entity-body table.edges")
        box = page.locator("#entity-panel").bounding_box()
        assert (box["x"], box["y"], box["width"], box["height"]) == (0, 0, 400, 800)  # it covers the page
        assert page.inner_text("#entity-title") == "Gliders"
        assert page.evaluate(overflow) == 0
        page.screenshot(path=str(shots / "narrow-entity.png"))
        page.click("#entity-close")
        assert page.locator("#entity-panel").is_hidden()
        page.click("#sparql-results td .iri")
        page.wait_for_selector("#entity-body table.edges")
        page.keyboard.press("Escape")  # Escape closes it too
        assert page.locator("#entity-panel").is_hidden()
    assert page.outside == [] and page.problems == []
    for name in ("narrow-menu.png", "narrow-400.png", "narrow-entity.png"):
        assert (shots / name).stat().st_size > 10_000
