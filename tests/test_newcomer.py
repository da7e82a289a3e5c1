"""What a new user trips on (issue 26), each as they typed it: labels read as emoji codes in `entity`, dates said at a
precision the data does not have, numbers that differ in their last digits scored as wrong, and a README that
names a file nobody has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import conftest
import test_ui
from sparqlnav.faces.cli import app
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import XSD, Term
from sparqlnav.question.wording import Asked, for_people
from sparqlnav.settings import Settings
from test_cli import run

REPO = Path(__file__).resolve().parents[1]
browser_page = test_ui.browser_page


def test_entity_prints_property_names_not_emoji(tmp_path: Path) -> None:
    """Item 4: `sparqlnav entity Q2` printed `rdfs🏷 helium` (`:label:` read as an emoji code)."""
    res = run("entity", "Q2", home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "rdfs:label" in res.stdout and "helium" in res.stdout
    assert "🏷" not in res.stdout


def test_a_year_precision_timestamp_reads_as_the_year() -> None:
    """Item 5: "When was helium discovered?" said "1 January 1868" for 1868-01-01T00:00:00Z."""
    stamp = Term("literal", "1868-01-01T00:00:00Z", XSD + "dateTime")
    assert for_people(stamp, Asked.of("When was helium discovered?")) == "1868"
    real_day = Term("literal", "1774-08-01T00:00:00Z", XSD + "dateTime")
    assert for_people(real_day, Asked.of("When was oxygen discovered?")) == "1 August 1774"
    new_years_noon = Term("literal", "1900-01-01T12:30:00Z", XSD + "dateTime")
    assert for_people(new_years_noon, Asked.of("When?")) == "1 January 1900, 12:30"


def test_the_demo_answers_a_discovery_date_as_a_year(tmp_path: Path) -> None:
    res = run("ask", "When was helium discovered?", home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1868" in res.stdout and "January" not in res.stdout


def _results(value: str) -> dict[str, object]:
    return {"head": {"vars": ["avg"]}, "results": {"bindings": [{"avg": {"type": "literal", "value": value}}]}}


def test_score_compares_numbers_with_a_relative_tolerance(tmp_path: Path) -> None:
    """Item 11: the same average summed in another order scored 0."""
    lines = [
        {"id": "same", "gold": _results("29.28676470588236"), "predicted": _results("29.286764705882362")},
        {"id": "other", "gold": _results("29.28676470588236"), "predicted": _results("29.2867")},
        {"id": "ids", "gold": _results("007"), "predicted": _results("7")},  # integers stay as written
    ]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    res = CliRunner().invoke(app, ["score", str(path), "--json"])
    assert res.exit_code == 0, res.output
    per_line = {item["id"]: item["row_f1"] for item in json.loads(res.output)["items"]}
    assert per_line == {"same": 1.0, "other": 0.0, "ids": 0.0}


def test_the_readme_names_the_files_it_uses_and_skips_say_where_data_comes_from() -> None:
    """Item 12: the README used `--kg ck25.ttl`, a file CK25 does not have."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "ck25.ttl" not in readme and "--kg prod-inst.ttl" in readme
    assert "github.com/eccenca/ck25-dataset" in readme or "eccenca/ck25-dataset" in readme
    assert "eccenca/ck25-dataset" in conftest.DATA_MISSING


def test_a_dead_llm_fails_after_one_retry() -> None:
    """Item 7: a base URL where nothing listens took 5 attempts per stage (33 s for auto)."""
    import socket

    from sparqlnav.llm import CallRecord, LLMClient, LLMConfig, LLMError, Message

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    records: list[CallRecord] = []
    config = LLMConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", retry_backoff_s=0)
    with LLMClient(config) as client:
        try:
            client.chat([Message.user("hi")], record=records.append)
        except LLMError as exc:
            assert exc.attempts == 2 and "Connection refused" in str(exc)
        else:
            raise AssertionError("a dead LLM answered")
    assert [r.outcome for r in records] == ["unreachable", "unreachable"]


def test_ask_prints_the_answer_and_one_summary_line_and_the_steps_with_v(tmp_path: Path) -> None:
    """Item 10: `ask` printed 47 trace lines for a one-line answer."""
    plain = run("ask", "Who discovered oxygen?", home=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == "The answers are Joseph Priestley and Carl Wilhelm Scheele."
    said = [line for line in plain.stderr.splitlines() if line.strip()]
    assert len(said) == 2 and said[0].startswith("no LLM configured")
    assert said[1].startswith("lexical · answered · ") and said[1].endswith("-v for the steps")
    steps = run("ask", "Who discovered oxygen?", "-v", home=tmp_path)
    assert " sparql " in steps.stderr and "SPARQL" in steps.stdout and len(steps.stderr.splitlines()) > 5


def test_ask_exits_alike_in_every_format_when_nothing_is_found(tmp_path: Path) -> None:
    """Item 10: `ask --format csv` on a not-found question exited 1; table and json exited 0."""
    question = "What is the salary of helium?"
    codes = {}
    for fmt in ("table", "json", "csv", "turtle"):
        res = run("ask", question, "--format", fmt, home=tmp_path)
        codes[fmt] = res.returncode
        if fmt in ("csv", "turtle"):
            assert res.stdout == "" and "could not find an answer" in res.stderr
    assert codes == {"table": 0, "json": 0, "csv": 0, "turtle": 0}


@pytest.mark.slow
def test_the_folded_steps_name_only_what_the_answer_used(settings: Settings, demo: KnowledgeGraph, browser_page: Any) -> None:
    """Item 10: the folded summary said "linked oxygen, group 16" for "Who discovered oxygen?"."""
    page = browser_page
    with background(create_app(settings, ServeConfig(mcp=False), kgs={"demo": demo})) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.fill("#question", "Who discovered oxygen?")
        page.click("#ask-button")
        page.wait_for_selector(".turn.done, .turn.failed", timeout=30_000)
        summary = page.inner_text(".steps-summary")
        assert summary.startswith("linked oxygen · ") and "group 16" not in summary, summary


@pytest.mark.data
def test_start_page_examples_read_as_a_person_would_ask(ck25: KnowledgeGraph) -> None:
    """Item 8: CK25's start page offered "How many hardwares are there?", "List the hardwares with their has
    category." and "How many prices are there?"."""
    from sparqlnav.tools.starters import StarterQuestions, plural

    questions = StarterQuestions().get(ck25).questions
    assert "How many hardware items are there?" in questions
    assert "List the hardware items with their category." in questions
    assert not any("price" in q.lower() or "hardwares" in q or " has " in q for q in questions), questions
    assert [plural(w) for w in ("software", "Spells", "status", "class")] == ["software items", "Spells", "statuses",
                                                                           "classes"]


def test_auto_with_a_dead_llm_fails_fast_and_keeps_lexicals_best_guess(tmp_path: Path) -> None:
    """Item 7: `auto` with OPENAI_BASE_URL at nothing took 33 s and lost the lexical stage's best guess."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "SPARQLNAV_HOME": str(tmp_path), "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
           "OPENAI_API_KEY": "k", "SPARQLNAV_LLM_MODEL": "m", "NO_COLOR": "1"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "ask", "How many elements did Humfry Davey discover?", "--json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert done.returncode == 1 and out["status"] == "error" and out["strategy"] == "auto→lexical"
    assert "Connection refused" in out["answer"] and "Without it, the lexical strategy says:" in out["answer"]
    assert "best guess" in out["answer"] and out["extra"]["best_guess"]["sparql"]
    attempts = [e for e in out["trace"] if e["kind"] == "llm_call"]
    assert [e["data"]["outcome"] for e in attempts] == ["unreachable", "unreachable"]  # one retry, one stage


def _turn_after(question: str, kg: KnowledgeGraph) -> Any:
    from sparqlnav.context import RunContext, Turn
    from sparqlnav.strategies.lexical import LexicalStrategy
    from sparqlnav.trace import Trace

    first = LexicalStrategy().run(question, kg, Trace())
    assert first.status == "answered", first.text
    return RunContext(history=(Turn.of(first, kg),))


def test_a_follow_up_reads_its_pronoun_without_an_llm(demo: KnowledgeGraph) -> None:
    """Item 6: "When was it discovered?" after an answer was not_found with 0 queries and no hint."""
    from sparqlnav.strategies.lexical import LexicalStrategy
    from sparqlnav.trace import Trace

    context = _turn_after("When was helium discovered?", demo)
    trace = Trace()
    answer = LexicalStrategy().run("When was it discovered?", demo, trace, context)
    assert answer.status == "answered" and answer.text == "The answer is 1868."
    assert answer.question == "When was it discovered?"
    said = [e.data["text"] for e in trace.events if e.kind == "info" and "follow-up" in str(e.data.get("text"))]
    assert said == ["a follow-up: 'it' read as helium (named in the last question): When was helium discovered?"]


@pytest.mark.data
def test_his_is_the_last_answer_when_it_was_one_person(ck25: KnowledgeGraph) -> None:
    from sparqlnav.strategies.lexical import LexicalStrategy
    from sparqlnav.trace import Trace

    context = _turn_after("Who is the manager of Heinrich Hoch?", ck25)
    assert context.history[-1].focus_label == "Waldtraud Kuttner"
    answer = LexicalStrategy().run("What is his email address?", ck25, Trace(), context)
    assert answer.status == "answered" and "Waldtraud.Kuttner@company.org" in answer.text


def test_a_pronoun_with_nothing_to_point_at_says_what_would_help(demo: KnowledgeGraph) -> None:
    from sparqlnav.strategies.lexical import LexicalStrategy
    from sparqlnav.trace import Trace

    answer = LexicalStrategy().run("When was it discovered?", demo, Trace())
    assert answer.status == "not_found"
    assert "This reads as a follow-up ('it')" in answer.text and "configure an LLM" in answer.text


def test_the_context_event_carries_a_line_for_people(demo: KnowledgeGraph) -> None:
    from sparqlnav.answer import run_question
    from sparqlnav.strategies.lexical import LexicalStrategy

    context = _turn_after("When was helium discovered?", demo)
    answer = run_question(LexicalStrategy(), "When was it discovered?", demo, context=context)
    event = next(e for e in answer.trace.events if e.kind == "context")
    assert event.data["summary"] == (
        "earlier in this conversation: 1 turn, the last “When was helium discovered?” → The answer is 1868."
    )


@pytest.mark.data
def test_names_that_search_prints_run_when_pasted_back(ck25: KnowledgeGraph) -> None:
    """Item 1: `prodi:empl-Waldtraud.Kuttner%40company.org` (printed by search and entity) failed in every face:
    Oxigraph misreads a local name with two runs of dots, though it is valid SPARQL."""
    from sparqlnav.graph.endpoint import Outcome
    from sparqlnav.tools.registry import TOOLKIT_TOOLS
    from sparqlnav.tools.toolkit import Toolkit
    from sparqlnav.trace import Trace

    employees = ck25.endpoint.query(
        "SELECT ?e WHERE { ?e a <http://ld.company.org/prod-vocab/Employee> } ORDER BY ?e LIMIT 15")
    products = ck25.endpoint.query(
        "SELECT ?e WHERE { ?e a <http://ld.company.org/prod-vocab/Hardware> } ORDER BY ?e LIMIT 15")
    iris = [r["e"].value for t in (employees.table, products.table) if t is not None for r in t.rows]
    assert len(iris) == 30 and any("%40" in i and i.count(".") >= 2 for i in iris)
    header = "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in ck25.prefixes.items())
    kit = Toolkit(ck25, Trace())
    for iri in iris:
        shown = ck25.prefixes.compact(iri)  # what search, entity and MCP print
        query = f"SELECT ?p WHERE {{ {shown} ?p ?o }} LIMIT 1"
        with_prefixes = ck25.endpoint.query(header + query)
        assert with_prefixes.outcome is Outcome.OK, (shown, with_prefixes.message)
        bare = TOOLKIT_TOOLS.call("execute_sparql", kit, {"query": query})  # the API's and MCP's path, no PREFIX lines
        assert bare.ok, (shown, bare.text)
    # the compact form an earlier version printed is valid SPARQL, and now runs too
    old = "prodi:empl-Waldtraud.Kuttner%40company.org"
    ran = ck25.endpoint.query(f"{header}SELECT ?p WHERE {{ {old} ?p ?o }} LIMIT 1")
    assert ran.outcome is Outcome.OK and ran.table is not None and len(ran.table) == 1


@pytest.mark.data
def test_every_face_declares_the_prefixes_the_graph_knows(settings: Settings, ck25: KnowledgeGraph) -> None:
    """Item 2: the CLI added a missing PREFIX the graph knows; /api/sparql and MCP refused the same query."""
    with background(create_app(settings, ServeConfig(mcp=False), kgs={"ck25": ck25})) as url:
        import httpx

        query = "SELECT ?d WHERE { ?d a pv:Department } LIMIT 2"
        r = httpx.post(url + "/api/sparql", json={"query": query, "kg": "ck25"}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["added"] == ["PREFIX pv: <http://ld.company.org/prod-vocab/>"]
        assert len(r.json()["results"]["results"]["bindings"]) == 2
        bad = httpx.post(url + "/api/sparql", json={"query": "SELECT * WHERE { ?s nope:p ?o }", "kg": "ck25"},
                         timeout=60)
        assert bad.status_code == 400 and "nope" in bad.json()["detail"]


@pytest.mark.data
def test_validate_with_a_graph_warns_on_what_the_graph_never_uses(data_dir: Path, tmp_path: Path) -> None:
    """Item 3: `validate '… <http://example.org/nope> …' --kg prod-inst.ttl` said "ok: no issues", and `wdt:` was
    silently read as Wikidata's on a graph that is not Wikidata."""
    kg = str(data_dir / "ck25" / "prod-inst.ttl")
    nope = run("validate", "SELECT ?x WHERE { ?x <http://example.org/nope> ?m }", "--kg", kg, home=tmp_path)
    assert nope.returncode == 0 and "ok: no issues" not in nope.stdout
    assert "warning [absent_iri]: <http://example.org/nope> occurs nowhere in prod-inst.ttl" in nope.stdout
    wdt = run("validate", "SELECT ?x WHERE { ?x wdt:P31 ?m }", "--kg", kg, "--json", home=tmp_path)
    kinds = [(i["kind"], i["severity"]) for i in json.loads(wdt.stdout)["issues"]]
    assert ("unknown_prefix", "warning") in kinds and ("absent_iri", "warning") in kinds
    fine = run("validate", "SELECT ?x WHERE { ?x pv:name ?m }", "--kg", kg, home=tmp_path)
    assert fine.returncode == 0 and "absent_iri" not in fine.stdout and "unknown_prefix" not in fine.stdout


def test_qualifiers_come_compact_and_names_read_in_lower_case(settings: Settings, demo: KnowledgeGraph) -> None:
    """Item 9: the entity panel showed `point in time <https://demo.sparqlnav.org/prop/qualifier/P585>` (it wrapped
    badly at 400 px) and "alt Label"."""
    import httpx

    from sparqlnav.graph.vocab import humanise

    with background(create_app(settings, ServeConfig(mcp=False), kgs={"demo": demo})) as url:
        page = httpx.get(url + "/api/entity", params={"id": "wd:Q1060", "kg": "demo"}, timeout=60).json()
    qualifiers = [q for e in page["edges"] for v in e["values"] for q in v["qualifiers"]]
    assert qualifiers and all(page["compact"][q["property"]] == "pq:P585" for q in qualifiers)
    assert {q["label"] for q in qualifiers} == {"point in time"}
    assert [humanise(n) for n in ("altLabel", "hasManager", "empl-Karen.Brant@x", "hasCRValue")] == [
        "alt label", "has manager", "empl Karen Brant@x", "has CRValue"]


def test_syntax_errors_are_sparqlnavs_own_on_every_face(settings: Settings, demo: KnowledgeGraph,
                                                       tmp_path: Path) -> None:
    """Item 2: `FILTER(?n > )` got the engine's grammar dump ("expected one of Prefix not found, ['%'], …")."""
    import httpx

    from sparqlnav.tools.registry import TOOLKIT_TOOLS
    from sparqlnav.tools.toolkit import Toolkit
    from sparqlnav.trace import Trace

    query = "SELECT * WHERE { ?s ?p ?n FILTER(?n > ) }"
    cli = run("sparql", query, home=tmp_path)
    assert cli.returncode == 1 and "error at 1:39: expected an expression, found ')'" in cli.stderr
    with background(create_app(settings, ServeConfig(mcp=False), kgs={"demo": demo})) as url:
        api = httpx.post(url + "/api/sparql", json={"query": query, "kg": "demo"}, timeout=60).json()
    assert "error at 1:39: expected an expression, found ')'" in api["detail"]
    assert (api["syntax"]["line"], api["syntax"]["column"]) == (1, 39)
    mcp = TOOLKIT_TOOLS.call("execute_sparql", Toolkit(demo, Trace()), {"query": query})  # MCP's execute_sparql
    assert "error at 1:39: expected an expression, found ')'" in mcp.text
    assert not any("expected one of" in text for text in (cli.stderr, api["detail"], mcp.text))
