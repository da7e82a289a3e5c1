"""Hardening, round two (issue 29), at the engine's side: the local engine's network reaches only the allowed
endpoints whatever query reaches it (item 1's second barrier), and its memory has a ceiling (item 3).

Real parts only: a real Oxigraph process in sparqlnav's launcher, a real canary HTTP server on 127.0.0.1, the
real HTTP API in front. The guard is bypassed on purpose (the engine's own URL is called) to stand for a
difference between the guard's reading and the engine's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from sparqlnav.faces.http import background
from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.store import LocalGraph
from sparqlnav.settings import Settings
from sparqlnav.sparql.guard import MAX_CLAUSES
from test_hardening_http import app_with, client_at
from test_serve import EX, MANAGER_OF_ALICE, tiny_path  # noqa: F401 - fixtures

CEILING = 512 * 1024 * 1024
RESULTS_JSON = {"Accept": "application/sparql-results+json"}


class _Canary(BaseHTTPRequestHandler):
    """Counts every request and answers like a SPARQL endpoint with one empty row."""

    hits: ClassVar[list[str]] = []

    def _answer(self) -> None:
        type(self).hits.append(self.path)
        body = b'{"head":{"vars":["a"]},"results":{"bindings":[{"a":{"type":"literal","value":"canary"}}]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def canary() -> Iterator[str]:
    """A real HTTP server on loopback that counts the requests reaching it; yields its URL."""
    _Canary.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canary)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/min"
    server.shutdown()
    server.server_close()


def _doublings(n: int) -> str:
    """The red team's query: n doubling CONCATs, then only the length (one small number) is selected."""
    binds = " ".join(f"BIND(CONCAT(?v{i}, ?v{i}) AS ?v{i + 1})" for i in range(n))
    return f"SELECT (STRLEN(?v{n}) AS ?n) WHERE {{ BIND('ab' AS ?v0) {binds} }}"


def _settings(home: Path, **extra: str) -> Settings:
    return Settings.from_env({"SPARQLNAV_HOME": str(home), "SPARQLNAV_ENGINE_MEMORY": str(CEILING), **extra})


def _engine_query(graph: KnowledgeGraph, sparql: str) -> httpx.Response:
    """POST straight to the engine (through its private socket, as its owner may), past the guard: what a
    guard/engine parser difference would let through."""
    server = graph.endpoint.server  # type: ignore[attr-defined]
    server.ensure_running()
    with httpx.Client(transport=httpx.HTTPTransport(uds=server.socket_path)) as client:
        return client.post(server.url, data={"query": sparql}, headers=RESULTS_JSON, timeout=30)


# -- item 1, the second barrier: the engine cannot reach what is not allowed ------------------------------------


def test_the_engine_cannot_reach_an_endpoint_that_is_not_allowed(
    tiny_path: Path, tmp_path: Path, canary: str  # noqa: F811
) -> None:
    with open_kg(str(tiny_path), _settings(tmp_path)) as graph:
        answer = _engine_query(graph, f"SELECT * WHERE {{ SERVICE <{canary}> {{ ?a ?b ?c }} }}")
        silent = _engine_query(graph, f"SELECT * WHERE {{ SERVICE SILENT <{canary}> {{ ?a ?b ?c }} }}")
        # the query, as the engine reads it (the guard refuses it first; here nothing stands in between)
        crafted = _engine_query(
            graph,
            f"PREFIX : <http://e/> SELECT * {{ OPTIONAL {{ ?s :a·\\' ?o }} SERVICE <{canary}> {{ ?a ?b ?c }} "
            "FILTER(?o != 'x' || isTRIPLE(?o)) }",
        )
        assert "canary" not in answer.text + silent.text + crafted.text
        assert "Connection refused" in answer.text  # the engine tried, and found nothing to connect to
        assert graph.endpoint.query(MANAGER_OF_ALICE).table.rows[0]["m"].value == EX + "bob"  # type: ignore[union-attr]
    assert _Canary.hits == []


def test_an_allowed_endpoint_is_reached_through_the_engines_door(
    tiny_path: Path, tmp_path: Path, canary: str  # noqa: F811
) -> None:
    with open_kg(str(tiny_path), _settings(tmp_path, SPARQLNAV_ALLOWED_SERVICES=canary)) as graph:
        ran = graph.endpoint.query(f"SELECT ?a WHERE {{ SERVICE <{canary}> {{ ?a ?b ?c }} }}")
        assert ran.outcome is Outcome.OK, ran.message
        assert [r["a"].value for r in ran.table.rows] == ["canary"]  # type: ignore[union-attr]
        other = canary.replace("/min", "/other")  # same host and port: the door allows the endpoint's address
        assert _engine_query(graph, f"SELECT * WHERE {{ SERVICE <{other}> {{ ?a ?b ?c }} }}").is_success
    assert len(_Canary.hits) == 2


# -- item 3: a memory ceiling ---------------------------------------------------------------------------------


def test_a_query_that_needs_more_memory_than_allowed_is_stopped_and_the_engine_restarts(
    tiny_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    bomb = _doublings(30)  # 1 KB of query; the red team measured 3.28 GB of engine memory for it
    assert len(bomb) < 1500
    with open_kg(str(tiny_path), _settings(tmp_path)) as graph:
        endpoint = graph.endpoint
        assert isinstance(endpoint, LocalGraph)
        restarts = endpoint.server.restarts
        result = endpoint.query(bomb)
        assert result.outcome is Outcome.ENGINE_ERROR
        assert result.message.startswith("the query needed more memory than allowed (0.5 GiB, SPARQLNAV_ENGINE_MEMORY)")
        assert endpoint.server.restarts == restarts + 1  # one restart: the query is not retried into the ceiling
        assert 0 < endpoint.server.last_peak_bytes <= CEILING  # the engine's own peak, reported by its launcher
        assert endpoint.query(MANAGER_OF_ALICE).table.rows[0]["m"].value == EX + "bob"  # type: ignore[union-attr]
        small = endpoint.query(_doublings(10))  # 2 KB strings are fine
        assert small.table.rows[0]["n"].value == str(2 * 2**10)  # type: ignore[union-attr]


def test_other_queries_survive_a_neighbours_memory_death(tiny_path: Path, tmp_path: Path) -> None:  # noqa: F811
    with open_kg(str(tiny_path), _settings(tmp_path)) as graph, ThreadPoolExecutor(4) as pool:
        graph.endpoint.query(MANAGER_OF_ALICE)  # the engine is up
        bomb = pool.submit(graph.endpoint.query, _doublings(30))
        others = [pool.submit(graph.endpoint.query, MANAGER_OF_ALICE) for _ in range(6)]
        assert bomb.result().outcome is Outcome.ENGINE_ERROR
        assert "needed more memory than allowed" in bomb.result().message
        assert [f.result().outcome for f in others] == [Outcome.OK] * 6


def test_the_http_api_reports_the_memory_ceiling(tiny_path: Path, tmp_path: Path) -> None:  # noqa: F811
    settings = _settings(tmp_path)
    with (
        open_kg(str(tiny_path), settings) as graph,
        background(app_with(settings, graph, mcp=False)) as url,
        client_at(url) as client,
    ):
        r = client.post("/api/sparql", json={"query": _doublings(31)})
        assert r.status_code != 200 and r.json()["outcome"] == "engine_error"
        assert "needed more memory than allowed" in r.json()["detail"]
        assert client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}).status_code == 200


# -- item 7: wide flat queries ---------------------------------------------------------------------------------


def _projections(n: int) -> str:
    return "SELECT " + " ".join(f"(1 AS ?v{i})" for i in range(n)) + " WHERE {}"


def _binds(n: int) -> str:
    return "SELECT * WHERE { " + " ".join(f"BIND({i} AS ?v{i})" for i in range(n)) + " }"


def _values(n: int) -> str:
    return "SELECT * WHERE { " + " ".join(f"VALUES ?v{i} {{ {i} }}" for i in range(n)) + " }"


def test_wide_flat_queries_are_refused_before_the_engine_sees_them(tiny_path: Path, tmp_path: Path) -> None:  # noqa: F811
    """3,000 projected expressions, BINDs or VALUES blocks killed or broke the engine (five restarts each)."""
    settings = _settings(tmp_path)
    with (
        open_kg(str(tiny_path), settings) as graph,
        background(app_with(settings, graph, mcp=False)) as url,
        client_at(url) as client,
    ):
        endpoint = graph.endpoint
        assert isinstance(endpoint, LocalGraph)
        assert client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}).status_code == 200  # the engine is up
        before = (endpoint.server.generation, endpoint.server.restarts)
        for query in (_projections(3000), _binds(3000), _values(3000)):
            r = client.post("/api/sparql", json={"query": query})
            assert r.status_code == 400 and r.json()["outcome"] == "refused", r.text
            assert f"more than {MAX_CLAUSES:,} clauses" in r.json()["detail"]
        assert (endpoint.server.generation, endpoint.server.restarts) == before  # the engine never saw them
        # At the budget (the WHERE group is one clause): they run.
        for query in (_projections(MAX_CLAUSES - 1), _binds(MAX_CLAUSES - 1), _values(MAX_CLAUSES - 1)):
            assert client.post("/api/sparql", json={"query": query}).status_code == 200
        assert (endpoint.server.generation, endpoint.server.restarts) == before
