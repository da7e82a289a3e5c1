"""The HTTP server as clients use it: real uvicorn on loopback, real KGs in Oxigraph, real strategies, the real
TEXT2SPARQL client. Strategies written here are real implementations of the Strategy protocol over the real
toolkit; they only add a gate so a test can hold a run in progress."""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import Answer, Strategy
from sparqlnav.faces.http import (
    JsonFormatter,
    RateLimiter,
    ServeConfig,
    background,
    create_app,
    parse_kgs,
)
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.strategies import make_strategy
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace

TINY = """\
@prefix ex: <http://example.org/tiny/> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .

ex:Person a rdfs:Class ; rdfs:label "person" .
ex:Team a rdfs:Class ; rdfs:label "team" .
ex:manager a rdf:Property ; rdfs:label "manager" .
ex:memberOf a rdf:Property ; rdfs:label "member of" .
ex:age a rdf:Property ; rdfs:label "age" .

ex:alice a ex:Person ; rdfs:label "Alice Wunderlich" ; ex:manager ex:bob ; ex:memberOf ex:rockets ; ex:age 34 .
ex:bob a ex:Person ; rdfs:label "Bob Baumeister" ; ex:memberOf ex:rockets ; ex:age 51 .
ex:carol a ex:Person ; rdfs:label "Carol Castellano" ; ex:manager ex:bob ; ex:memberOf ex:gliders ; ex:age 29 .
ex:rockets a ex:Team ; rdfs:label "Rockets" .
ex:gliders a ex:Team ; rdfs:label "Gliders" .
"""
EX = "http://example.org/tiny/"
MANAGER_OF_ALICE = f"PREFIX ex: <{EX}> SELECT ?m WHERE {{ ex:alice ex:manager ?m }}"
DATASET = "https://text2sparql.aksw.org/2025/corporate/"


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small people-and-teams graph written for these tests."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.ttl"
    path.write_text(TINY, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny(tiny_path: Path, settings: Settings) -> Iterator[KnowledgeGraph]:
    """The small graph in a real local Oxigraph store."""
    with open_kg(str(tiny_path), settings) as graph:
        yield graph


class Gated:
    """A strategy over the real toolkit that stops at a gate after its first step until the test opens it."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.finished = threading.Event()
        self.gate_timed_out = False

    def run(self, question: str, kg: KnowledgeGraph, trace: Trace, context: object = None) -> Answer:
        tools = Toolkit(kg, trace)
        trace.emit("thought", text="first I look the names up")
        if not self.gate.wait(10):
            self.gate_timed_out = True
        trace.emit("action", tool="search", arguments={"query": question})
        found = tools.search(question)
        trace.emit("observation", text=found.text)
        trace.emit("action", tool="execute_sparql", arguments={"query": MANAGER_OF_ALICE})
        ran = tools.execute_sparql(MANAGER_OF_ALICE)
        trace.emit("observation", text=ran.text)
        trace.emit("feedback", text="the query returned one row")
        self.finished.set()
        return Answer(question, "gated", MANAGER_OF_ALICE, ran.value.table, "Bob Baumeister manages Alice.", trace)


def factory_with(**extra: Strategy) -> Any:
    """The real strategy registry plus the given strategies."""

    def factory(name: str, llm: LLMConfig | None) -> Strategy:
        return extra[name] if name in extra else make_strategy(name, llm)

    return factory


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) of each server-sent event; keep-alive comments are skipped."""
    name, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def app_for(settings: Settings, tiny: KnowledgeGraph, **config: Any) -> Any:
    """An app over the small graph, with a fresh gated strategy reachable as `app.state.gated`."""
    gated = Gated()
    config.setdefault("allowed_hosts", ("testserver",))  # the Host TestClient sends
    app = create_app(settings, ServeConfig(**config), kgs={"tiny": tiny}, strategy_factory=factory_with(gated=gated))
    app.state.gated = gated
    return app


# -- API ------------------------------------------------------------------------------------------


def test_ask_returns_the_ask_json_object(settings: Settings, tiny: KnowledgeGraph) -> None:
    with TestClient(app_for(settings, tiny)) as client:
        r = client.post("/api/ask", json={"question": "Who is the manager of Alice Wunderlich?", "strategy": "lexical"})
        assert r.status_code == 200, r.text
        body = r.json()
    for key in ("question", "strategy", "sparql", "results", "answer", "trace", "usage"):
        assert key in body
    assert body["strategy"] == "lexical" and body["status"] == "answered"
    assert [b["a"]["value"] for b in body["results"]["results"]["bindings"]] == [EX + "bob"]
    assert "Bob Baumeister" in body["answer"]
    assert body["extra"]["display"]["labels"][EX + "bob"] == "Bob Baumeister"
    assert body["extra"]["display"]["compact"][EX + "bob"] == "ex:bob"
    assert [e["seq"] for e in body["trace"]] == list(range(len(body["trace"])))
    assert body["usage"]["sparql_queries"] == sum(e["kind"] == "sparql" for e in body["trace"]) > 0
    # Which query answered, said by the server (the web UI's Steps line shows it; it matched queries itself before)
    ran = [e["data"]["query"] for e in body["trace"] if e["kind"] == "sparql"]
    by = body["steps"]["answered_by"]
    assert body["steps"]["sparql_queries"] == len(ran) and body["steps"]["sql_queries"] == 0
    assert by["language"] == "SPARQL" and 1 <= by["number"] <= len(ran)


def test_requests_are_checked_with_messages(settings: Settings, tiny: KnowledgeGraph) -> None:
    with TestClient(app_for(settings, tiny, max_question_chars=50)) as client:
        cases = [
            ({"question": "   "}, 422, "question is empty"),
            ({"question": "x" * 51}, 422, "too long (51 characters; the limit is 50)"),
            ({}, 422, "question: Field required"),
            ({"question": "Who?", "kg": "nope"}, 400, "unknown KG 'nope': this server offers tiny"),
            ({"question": "Who?", "strategy": "magic"}, 400, "unknown strategy 'magic'"),
            ({"question": "Who?", "strategy": "explore"}, 400, "needs an LLM"),
        ]
        for body, status, needle in cases:
            for path in ("/api/ask", "/api/ask/stream"):
                r = client.post(path, json=body)
                assert r.status_code == status, (path, body, r.text)
                assert needle in r.json()["detail"], (path, body, r.text)
        bad = client.post("/api/sparql", json={"query": "SELECT ?s WHERE { ?s "})
        assert bad.status_code == 400 and bad.json()["outcome"] == "syntax_error"
        assert bad.json()["detail"].startswith("syntax_error: error at 1:")
        refused = client.post("/api/sparql", json={"query": "DROP ALL"})
        assert refused.status_code == 400 and refused.json()["outcome"] == "refused"
        assert client.post("/api/sparql", json={"query": " "}).json()["detail"] == "query is empty"
        assert client.get("/api/search", params={"q": ""}).status_code == 422
        assert client.get("/text2sparql", params={"question": "Who?"}).json()["detail"] == "dataset: Field required"


def test_sparql_search_and_entity(settings: Settings, tiny: KnowledgeGraph) -> None:
    with TestClient(app_for(settings, tiny)) as client:
        r = client.post("/api/sparql", json={"query": MANAGER_OF_ALICE})
        assert r.status_code == 200
        body = r.json()
        assert body["outcome"] == "ok" and body["kg"] == "tiny"
        assert body["results"]["results"]["bindings"] == [{"m": {"type": "uri", "value": EX + "bob"}}]
        assert body["display"]["labels"] == {EX + "bob": "Bob Baumeister"}
        ask = client.post("/api/sparql", json={"query": f"ASK {{ <{EX}bob> <{EX}age> 51 }}"}).json()
        assert ask["results"] == {"head": {}, "boolean": True}
        found = client.get("/api/search", params={"q": "Carol Castelano"}).json()
        assert found["entities"][0]["iri"] == EX + "carol"
        assert found["compact"][EX + "carol"] == "ex:carol"
        page = client.get("/api/entity", params={"id": "ex:alice"}).json()
        assert page["label"] == "Alice Wunderlich"
        managers = [e for e in page["edges"] if e["property"] == EX + "manager"]
        assert managers[0]["values"][0]["label"] == "Bob Baumeister"
        missing = client.get("/api/entity", params={"id": "xqzvw"})
        assert missing.status_code == 404 and missing.json()["detail"] == "nothing in tiny.ttl is called 'xqzvw'"


def test_info_docs_and_ui_are_served(settings: Settings, tiny: KnowledgeGraph) -> None:
    with TestClient(app_for(settings, tiny)) as client:
        info = client.get("/api/info").json()
        assert info["kgs"][0]["name"] == "tiny" and info["default_kg"] == "tiny"
        assert "lexical" in info["strategies"] and "auto" in info["strategies"]
        assert "explore" not in info["strategies"] and info["llm"] is False
        assert {"search", "get_entity", "get_property_examples", "execute_sparql"} <= set(info["mcp_tools"])
        assert client.get("/health").json()["status"] == "ok"
        paths = client.get("/openapi.json").json()["paths"]
        assert {"/api/ask", "/api/ask/stream", "/api/sparql", "/api/search", "/text2sparql", "/health"} <= set(paths)
        docs = client.get("/docs")
        assert docs.status_code == 200 and "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs.text
        assert "cdn" not in docs.text.lower()
        bundle = client.get("/static/vendor/swagger-ui/swagger-ui-bundle.js")
        assert bundle.status_code == 200 and len(bundle.content) > 500_000
        index = client.get("/")
        assert index.status_code == 200 and 'id="ask-form"' in index.text
        assert "default-src 'self'" in index.headers["content-security-policy"]
        assert client.get("/static/app.js").status_code == 200


# -- streaming, limits ----------------------------------------------------------------------------


def test_stream_sends_each_step_as_it_happens(settings: Settings, tiny: KnowledgeGraph) -> None:
    app = app_for(settings, tiny)
    gated: Gated = app.state.gated
    with background(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        body = {"question": "Alice Wunderlich", "strategy": "gated"}
        with client.stream("POST", "/api/ask/stream", json=body) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            events = sse_events(resp.iter_lines())
            name, first = next(events)
            # The run is still held at its gate: this event was sent as it happened, not with the reply.
            assert name == "trace" and first["kind"] == "thought" and not gated.finished.is_set()
            gated.gate.set()
            rest = list(events)
    assert not gated.gate_timed_out
    names = [n for n, _ in rest]
    assert names[-1] == "answer" and set(names[:-1]) == {"trace"}
    streamed = [first, *(d for _, d in rest[:-1])]
    assert [e["kind"] for e in streamed] == [
        "thought", "action", "sparql", "observation", "action", "sparql", "observation", "feedback",
    ]  # the first sparql is the search naming its hits' classes
    answer = rest[-1][1]
    assert answer["trace"] == streamed  # the answer carries the same trace that was streamed
    assert answer["results"]["results"]["bindings"][0]["m"]["value"] == EX + "bob"
    assert "Alice Wunderlich" in streamed[3]["data"]["text"]


def test_stream_of_a_lexical_run_matches_its_answer(settings: Settings, tiny: KnowledgeGraph) -> None:
    with background(app_for(settings, tiny)) as url, httpx.Client(base_url=url, timeout=30) as client:
        body = {"question": "Which team is Carol Castellano a member of?", "strategy": "lexical"}
        with client.stream("POST", "/api/ask/stream", json=body) as resp:
            got = list(sse_events(resp.iter_lines()))
    assert got[-1][0] == "answer"
    answer = got[-1][1]
    assert [d for n, d in got[:-1]] == answer["trace"]
    assert answer["results"]["results"]["bindings"][0]["a"]["value"] == EX + "gliders"


def test_a_saturated_server_answers_503(settings: Settings, tiny: KnowledgeGraph) -> None:
    app = app_for(settings, tiny, max_concurrent=1)
    gated: Gated = app.state.gated
    question = {"question": "Who is the manager of Alice Wunderlich?", "strategy": "lexical"}
    with background(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        with client.stream("POST", "/api/ask/stream", json={"question": "Alice", "strategy": "gated"}) as resp:
            events = sse_events(resp.iter_lines())
            next(events)  # the gated run now holds the only worker
            busy = client.post("/api/ask", json=question)
            assert busy.status_code == 503 and "busy" in busy.json()["detail"]
            assert busy.headers["retry-after"] == "1"
            assert client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}).status_code == 503
            assert client.get("/health").json()["active_runs"] == 1
            gated.gate.set()
            assert [n for n, _ in events][-1] == "answer"
        assert client.post("/api/ask", json=question).status_code == 200


def test_the_time_limit_ends_requests_and_stops_runs(settings: Settings, tiny: KnowledgeGraph) -> None:
    app = app_for(settings, tiny, request_timeout_s=0.3)
    gated: Gated = app.state.gated
    with TestClient(app) as client:
        r = client.post("/api/ask", json={"question": "Alice", "strategy": "gated"})
        assert r.status_code == 504 and "time limit of 0.3 s" in r.json()["detail"]
        gated.gate.set()
        workers = app.state.service.workers
        for _ in range(500):  # the run ends at its next step; wait for its thread to return
            if workers.active == 0:
                break
            time.sleep(0.01)
        assert workers.active == 0 and not gated.finished.is_set()

    app = app_for(settings, tiny, request_timeout_s=0.3)
    with TestClient(app) as client:
        r = client.post("/api/ask/stream", json={"question": "Alice", "strategy": "gated"})
        got = list(sse_events(iter(r.text.split("\n"))))
        app.state.gated.gate.set()
    assert [n for n, _ in got] == ["trace", "error"]
    assert got[1][1]["status"] == 504 and "time limit" in got[1][1]["detail"]


def test_token_rate_limit_and_cors(settings: Settings, tiny: KnowledgeGraph) -> None:
    with TestClient(app_for(settings, tiny, token="s3cret")) as client:
        assert client.get("/api/info").status_code == 401
        wrong = client.get("/api/info", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert client.get("/api/info", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/text2sparql", params={"question": "q", "dataset": "d"}).status_code == 401
        assert client.post("/mcp", json={}).status_code == 401
        assert client.get("/health").status_code == 200 and client.get("/").status_code == 200

    with TestClient(app_for(settings, tiny, rate_limit=3)) as client:
        codes = [client.get("/api/info").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = client.get("/api/info")
        assert int(limited.headers["retry-after"]) >= 1 and "rate limit" in limited.json()["detail"]
        assert client.get("/health").status_code == 200  # not limited

    with TestClient(app_for(settings, tiny, cors_origins=("http://allowed.example",))) as client:
        pre = client.options(
            "/api/ask",
            headers={"Origin": "http://allowed.example", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization,content-type"},
        )
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://allowed.example"
        other = client.get("/api/info", headers={"Origin": "http://other.example"})
        assert "access-control-allow-origin" not in other.headers


def test_rate_limiter_refills() -> None:
    now = [0.0]
    limiter = RateLimiter(60, clock=lambda: now[0])  # one a second, bursts of 60
    assert all(limiter.take("a") == 0 for _ in range(60))
    assert limiter.take("a") == pytest.approx(1.0)
    assert limiter.take("b") == 0  # clients are separate
    now[0] += 1.0
    assert limiter.take("a") == 0 and limiter.take("a") > 0


def test_requests_are_logged_as_json(settings: Settings, tiny: KnowledgeGraph) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("sparqlnav.faces.http")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        with TestClient(app_for(settings, tiny)) as client:
            r = client.post("/api/ask", json={"question": "How old is Bob Baumeister?", "strategy": "lexical"})
            assert r.status_code == 200
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    request = next(x for x in lines if x["msg"] == "request" and x["path"] == "/api/ask")
    assert request["status"] == 200 and request["method"] == "POST" and request["request_id"] == r.headers["x-request-id"]
    ask = next(x for x in lines if x["msg"] == "ask")
    assert ask["kg"] == "tiny" and ask["strategy"] == "lexical" and ask["status"] == "answered"
    assert ask["sparql_queries"] > 0 and ask["level"] == "info"


def test_config_from_env_and_kg_names() -> None:
    assert parse_kgs(["demo", "/data/ck25/prod-inst.ttl", "corp=/data/x.ttl", "https://query.example.org/sparql?a=b", "/other/prod-inst.ttl"]) == {
        "demo": "demo",
        "prod-inst.ttl": "/data/ck25/prod-inst.ttl",
        "corp": "/data/x.ttl",
        "https://query.example.org/sparql?a=b": "https://query.example.org/sparql?a=b",
        "prod-inst.ttl-2": "/other/prod-inst.ttl",
    }
    local = ServeConfig.from_settings(Settings.from_env({"SPARQLNAV_KG": "a=x.ttl b=y.ttl", "SPARQLNAV_TEXT2SPARQL_DATASETS": f"{DATASET}=a"}))
    assert list(local.kgs) == ["a", "b"] and local.datasets == {DATASET: "a"} and local.rate_limit is None
    public = ServeConfig.from_settings(Settings.from_env({"SPARQLNAV_HOST": "0.0.0.0", "SPARQLNAV_API_TOKEN": "t"}))
    assert public.rate_limit == 120 and public.token == "t"
    assert ServeConfig.from_settings(Settings.from_env({}), host="0.0.0.0", rate_limit=0).rate_limit is None


# -- TEXT2SPARQL ----------------------------------------------------------------------------------


def test_text2sparql_answers_for_any_dataset_or_a_mapped_one(settings: Settings, tiny: KnowledgeGraph) -> None:
    question = "Who is the manager of Alice Wunderlich?"
    with TestClient(app_for(settings, tiny, strategy="lexical")) as client:
        r = client.get("/text2sparql", params={"question": question, "dataset": DATASET})
        assert r.status_code == 200
        body = r.json()
        assert set(body) == {"dataset", "question", "query"}
        assert body["dataset"] == DATASET and body["question"] == question
        ran = client.post("/api/sparql", json={"query": body["query"]}).json()
        assert [b["a"]["value"] for b in ran["results"]["results"]["bindings"]] == [EX + "bob"]
        assert client.get("/text2sparql", params={"question": question, "dataset": "anything"}).status_code == 200

    with TestClient(app_for(settings, tiny, strategy="lexical", datasets={DATASET: "tiny"})) as client:
        assert client.get("/text2sparql", params={"question": question, "dataset": DATASET}).status_code == 200
        other = client.get("/text2sparql", params={"question": question, "dataset": "https://other/"})
        assert other.status_code == 404 and "unknown dataset" in other.json()["detail"]


def test_text2sparql_returns_the_query_without_label_columns(
    settings: Settings, tiny: KnowledgeGraph, scripted_llm: ScriptedLLM
) -> None:
    labelled = (f"PREFIX ex: <{EX}>\nPREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
                "SELECT ?m ?name WHERE { ex:alice ex:manager ?m . ?m rdfs:label ?name . }")
    run = [Reply("", [Call("execute_sparql", {"query": labelled})]), Reply("", [Call("stop", {})]),
           Reply("Bob Baumeister manages Alice.")]
    scripted_llm.script(run * 2)
    llm = LLMConfig(model="scripted-model", base_url=scripted_llm.base_url, api_key="k", timeout_s=10, max_retries=0)
    app = create_app(settings, ServeConfig(allowed_hosts=("testserver",), strategy="explore"), kgs={"tiny": tiny},
                     strategy_factory=lambda name, _llm: make_strategy(name, llm))
    question = "Who is the manager of Alice Wunderlich?"
    with TestClient(app) as client:
        machine = client.get("/text2sparql", params={"question": question, "dataset": DATASET}).json()
        assert machine["query"] == f"PREFIX ex: <{EX}>\nPREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n" \
                                   "SELECT ?m WHERE { ex:alice ex:manager ?m . }"
        ran = client.post("/api/sparql", json={"query": machine["query"]}).json()
        assert ran["results"]["results"]["bindings"] == [{"m": {"type": "uri", "value": EX + "bob"}}]
        # People asking the same keep the names beside the entities.
        human = client.post("/api/ask", json={"question": question}).json()
        assert human["sparql"] == labelled and human["results"]["head"]["vars"] == ["m", "name"]
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0


def _client_ask(exe: Path, questions: Path, url: str, db: Path) -> tuple[list[dict[str, Any]], list[tuple[str, Any, Any]]]:
    """Run the challenge's own client (`text2sparql ask`) and read what it stored."""
    res = subprocess.run(
        [str(exe), "ask", str(questions), url, "--answers-db", str(db), "--timeout", "120"],
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    printed = json.loads(res.stdout)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT question, response, exception FROM responses").fetchall()
    return printed, rows


def test_the_challenge_client_gets_an_answer_for_every_question(
    settings: Settings, tiny: KnowledgeGraph, tmp_path: Path, text2sparql_client: Path
) -> None:
    questions = tmp_path / "questions.yml"
    questions.write_text(
        f"dataset:\n  id: {DATASET}\n  prefix: tiny\nquestions:\n"
        "  - id: 1\n    question:\n      en: Who is the manager of Alice Wunderlich?\n"
        "  - id: 2\n    question:\n      en: How old is Bob Baumeister?\n      de: Wie alt ist Bob Baumeister?\n",
        encoding="utf-8",
    )
    with background(app_for(settings, tiny, strategy="lexical")) as url:
        printed, rows = _client_ask(text2sparql_client, questions, url + "/text2sparql", tmp_path / "answers.db")
    assert [p["qname"] for p in printed] == ["tiny:1-en", "tiny:2-en", "tiny:2-de"]
    assert all(p["dataset"] == DATASET and p["query"] for p in printed)
    assert len(rows) == 3 and all(resp is not None and exc is None for _, resp, exc in rows)
    stored = pickle.loads(rows[0][1])  # the client pickles the requests.Response it got
    assert stored.status_code == 200 and "ex:manager" in stored.json()["query"]


@pytest.mark.slow
@pytest.mark.data
def test_the_challenge_client_on_ck25(
    settings: Settings, data_dir: Path, tmp_path: Path, text2sparql_client: Path
) -> None:
    questions = data_dir / "ck25" / "questions.yml"
    config = {"kgs": {"ck25": str(data_dir / "ck25" / "prod-inst.ttl")}, "strategy": "lexical"}
    with background(create_app(settings, ServeConfig(**config))) as url:
        printed, rows = _client_ask(text2sparql_client, questions, url + "/text2sparql", tmp_path / "answers.db")
    assert len(printed) == 50 and len(rows) == 50
    assert all(resp is not None and exc is None for _, resp, exc in rows)
    assert sum(1 for p in printed if p["query"].strip()) >= 40  # most questions get a query, not just a reply
    assert {p["qname"] for p in printed} == {f"ck25:{i}-en" for i in range(1, 51)}


def test_app_factory_reads_the_environment(tiny_path: Path, sn_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sparqlnav.faces.http import app_factory

    monkeypatch.setenv("SPARQLNAV_HOME", str(sn_home))
    monkeypatch.setenv("SPARQLNAV_KG", f"people={tiny_path}")
    monkeypatch.setenv("SPARQLNAV_STRATEGY", "lexical")
    monkeypatch.setenv("SPARQLNAV_ALLOWED_HOSTS", "testserver")  # the Host TestClient sends
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        with TestClient(app_factory()) as client:
            info = client.get("/api/info").json()
            assert info["default_kg"] == "people" and info["default_strategy"] == "lexical"
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


@pytest.mark.slow
def test_serve_command_starts_a_server(tiny_path: Path, sn_home: Path) -> None:
    env = {**os.environ, "SPARQLNAV_HOME": str(sn_home)}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparqlnav", "serve", "--kg", f"people={tiny_path}", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        body = None
        for _ in range(300):
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=2).json()
                break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
        assert body is not None, proc.stderr.read() if proc.poll() is not None else "no answer"
        assert body["default_kg"] == "people"
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=20)
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(x["msg"] == "request" and x["path"] == "/api/info" for x in logs)
