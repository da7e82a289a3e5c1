"""Graph access against real engines: a local Oxigraph store behind its managed server, and the remote
HTTP path against a real local SPARQL endpoint (plus a flaky proxy in front of it for retries)."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from bare_oxigraph import BareOxigraph
from sparqlnav.graph.endpoint import HttpOptions, Limits, Outcome, RemoteEndpoint
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.store import LocalGraph, ensure_store, rdf_files
from sparqlnav.settings import Settings

TTL = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:ada a ex:Person ; rdfs:label "Ada Lovelace"@en ; ex:born 1815 ; ex:knows ex:charles .
ex:charles a ex:Person ; rdfs:label "Charles Babbage"@en ; ex:born 1791 .
"""
OTHER_TTL = """@prefix ex: <http://example.org/> .
ex:ada ex:wrote ex:notes .
ex:notes ex:title "Notes on the Analytical Engine" .
"""
NT = "<http://example.org/x> <http://example.org/p> \"from n-triples\" .\n"
JSONLD = '{"@id": "http://example.org/y", "http://example.org/p": "from json-ld"}'
RDFXML = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://example.org/">
  <rdf:Description rdf:about="http://example.org/z"><ex:p>from rdf/xml</ex:p></rdf:Description>
</rdf:RDF>"""
TRIG = "<http://example.org/g> { <http://example.org/w> <http://example.org/p> \"from trig\" . }\n"
NQ = "<http://example.org/v> <http://example.org/p> \"from n-quads\" <http://example.org/g2> .\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "kg"
    (d / "sub").mkdir(parents=True)
    (d / "people.ttl").write_text(TTL)
    (d / "a.nt").write_text(NT)
    (d / "sub" / "b.jsonld").write_text(JSONLD)
    (d / "sub" / "c.rdf").write_text(RDFXML)
    (d / "d.trig").write_text(TRIG)
    (d / "e.nq").write_text(NQ)
    (d / "README.txt").write_text("not RDF")
    return d


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home"), **env})


def test_every_format_loads_and_named_graphs_are_queried(folder: Path, tmp_path: Path) -> None:
    with open_kg(str(folder), _settings(tmp_path)) as kg:
        res = kg.endpoint.query("SELECT ?o WHERE { ?s <http://example.org/p> ?o } ORDER BY ?o")
        assert res.outcome is Outcome.OK and res.table is not None
        assert [r["o"].value for r in res.table.rows] == [
            "from json-ld", "from n-quads", "from n-triples", "from rdf/xml", "from trig",
        ]


def test_store_persists_and_is_rebuilt_when_a_file_changes(folder: Path, tmp_path: Path) -> None:
    stores = tmp_path / "stores"
    first = ensure_store(rdf_files(folder), stores)
    again = ensure_store(rdf_files(folder), stores)
    assert again.path == first.path and again.triples == first.triples == 12
    (folder / "a.nt").write_text(NT + '<http://example.org/x> <http://example.org/q> "new" .\n')
    changed = ensure_store(rdf_files(folder), stores)
    assert changed.path != first.path and changed.triples == 13


def test_load_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ttl"
    bad.write_text("@prefix ex: <http://example.org/> .\nex:a ex:b .\n")
    from sparqlnav.graph.kg import KGError
    from sparqlnav.graph.store import LoadError

    with pytest.raises((LoadError, KGError), match=r"bad\.ttl"):
        open_kg(str(bad), _settings(tmp_path))


def test_typed_outcomes(folder: Path, tmp_path: Path) -> None:
    with open_kg(str(folder / "people.ttl"), _settings(tmp_path)) as kg:
        ok = kg.endpoint.query("SELECT ?n WHERE { ?p <http://www.w3.org/2000/01/rdf-schema#label> ?n } ORDER BY ?n")
        assert ok.outcome is Outcome.OK and [r["n"].value for r in ok.table.rows] == ["Ada Lovelace", "Charles Babbage"]  # type: ignore[union-attr]
        assert ok.table.rows[0]["n"].lang == "en"  # type: ignore[union-attr]
        empty = kg.endpoint.query("SELECT ?s WHERE { ?s <http://example.org/nothing> ?o }")
        assert empty.outcome is Outcome.EMPTY and empty.table is not None and empty.table.vars == ["s"]
        bad = kg.endpoint.query("SELECT ?s WHERE { ?s ?p }")
        assert bad.outcome is Outcome.SYNTAX_ERROR and "1:" in bad.message
        err = kg.endpoint.query('SELECT ?x WHERE { BIND(<http://example.org/f>(1) AS ?x) ?s ?p ?o }')
        assert err.outcome in (Outcome.ENGINE_ERROR, Outcome.SYNTAX_ERROR, Outcome.OK)
        ask = kg.endpoint.query("ASK { <http://example.org/ada> <http://example.org/knows> ?x }")
        assert ask.outcome is Outcome.OK and ask.table is not None and ask.table.boolean is True
        construct = kg.endpoint.query("CONSTRUCT { ?s <http://example.org/b> ?y } WHERE { ?s <http://example.org/born> ?y }")
        assert construct.outcome is Outcome.OK and len(construct.table or []) == 2


def test_row_and_byte_caps_are_reported(folder: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path, SPARQLNAV_MAX_ROWS="3")
    with open_kg(str(folder), settings) as kg:
        res = kg.endpoint.query("SELECT * WHERE { ?s ?p ?o }")
        assert res.outcome is Outcome.OK and res.table is not None
        assert len(res.table) == 3 and res.table.truncated and res.table.cap == "max 3 rows"
        assert res.table.to_sparql_json()["sparqlnav"]["truncated"] is True
        assert "cut at a cap" in res.table.to_markdown()
    settings = _settings(tmp_path, SPARQLNAV_MAX_BYTES="300")
    with open_kg(str(folder), settings) as kg:
        res = kg.endpoint.query("SELECT * WHERE { ?s ?p ?o }")
        assert res.outcome is Outcome.OK and res.table is not None
        assert res.table.truncated and "bytes" in (res.table.cap or "") and 0 < len(res.table) < 12


def test_updates_and_foreign_services_are_refused_and_data_is_unchanged(folder: Path, tmp_path: Path) -> None:
    with open_kg(str(folder / "people.ttl"), _settings(tmp_path)) as kg:
        count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
        before = kg.endpoint.query(count).table.rows[0]["n"].value  # type: ignore[union-attr]
        for update in ("DELETE WHERE { ?s ?p ?o }", "# hi\nclear all", "PREFIX x: <urn:x>\n drop default"):
            res = kg.endpoint.query(update)
            assert res.outcome is Outcome.REFUSED and "read-only" in res.message
        res = kg.endpoint.query("SELECT * WHERE { SERVICE <http://169.254.169.254/latest/meta-data/> { ?s ?p ?o } }")
        assert res.outcome is Outcome.REFUSED and "169.254.169.254" in res.message
        after = kg.endpoint.query(count).table.rows[0]["n"].value  # type: ignore[union-attr]
        assert before == after == "7"


@pytest.fixture
def served(folder: Path, tmp_path: Path) -> Iterator[tuple[BareOxigraph, BareOxigraph]]:
    """Two real SPARQL endpoints on loopback (people, and their writings); a's engine may call b's."""
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "w.ttl").write_text(OTHER_TTL)
    b = BareOxigraph(ensure_store(rdf_files(tmp_path / "w"), tmp_path / "s").data_dir)
    b.ensure_running()
    a = BareOxigraph(ensure_store(rdf_files(folder / "people.ttl"), tmp_path / "s").data_dir)
    a.ensure_running()
    yield a, b
    a.stop()
    b.stop()


def test_remote_endpoint_get_post_and_user_agent(served: tuple[BareOxigraph, BareOxigraph]) -> None:
    a, _ = served
    q = "SELECT ?n WHERE { ?p <http://www.w3.org/2000/01/rdf-schema#label> ?n } ORDER BY ?n"
    for method in ("GET", "POST"):
        with RemoteEndpoint(a.url, http=HttpOptions(method=method)) as ep:
            res = ep.query(q)
            assert res.outcome is Outcome.OK and [r["n"].value for r in res.table.rows] == ["Ada Lovelace", "Charles Babbage"]  # type: ignore[union-attr]
    long_query = q.replace("SELECT", "SELECT " + "\n" * 2000, 1)  # long queries go by POST in auto mode
    with RemoteEndpoint(a.url) as ep:
        assert ep.query(long_query).outcome is Outcome.OK


def test_federation_between_two_local_endpoints(served: tuple[BareOxigraph, BareOxigraph]) -> None:
    a, b = served
    q = (
        "SELECT ?name ?title WHERE { ?p <http://www.w3.org/2000/01/rdf-schema#label> ?name . "
        f"SERVICE <{b.url}> {{ ?p <http://example.org/wrote> ?w . ?w <http://example.org/title> ?title }} }}"
    )
    with RemoteEndpoint(a.url, allowed_services=[b.url]) as ep:
        res = ep.query(q)
        assert res.outcome is Outcome.OK and res.table is not None
        assert [(r["name"].value, r["title"].value) for r in res.table.rows] == [("Ada Lovelace", "Notes on the Analytical Engine")]
    with RemoteEndpoint(a.url) as ep:  # b is not allowed here
        assert ep.query(q).outcome is Outcome.REFUSED


class _Flaky(BaseHTTPRequestHandler):
    """Answers 429/503 (with Retry-After) a set number of times, then forwards to the real endpoint."""

    failures: ClassVar[list[int]] = []
    retry_after = "0"
    target = ""
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        type(self).seen.append(dict(self.headers))
        if self.failures:
            status = self.failures.pop(0)
            self.send_response(status)
            self.send_header("Retry-After", self.retry_after)
            self.end_headers()
            self.wfile.write(b"slow down")
            return
        with urllib.request.urlopen(self.target + self.path[self.path.index("?"):]) as r:
            body = r.read()
            ctype = r.headers["Content-Type"]
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_backoff_honours_retry_after_then_succeeds(served: tuple[BareOxigraph, BareOxigraph]) -> None:
    a, _ = served
    _Flaky.failures = [429, 503]
    _Flaky.target = a.url
    _Flaky.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/sparql"
        opts = HttpOptions(user_agent="sparqlnav-test/1", headers={"X-Team": "kg"})
        with RemoteEndpoint(url, http=opts, sleep=waits.append) as ep:
            res = ep.query("ASK { ?s ?p ?o }")
        assert res.outcome is Outcome.OK and res.table is not None and res.table.boolean is True
        assert waits == [0.0, 0.0] and len(_Flaky.seen) == 3
        assert _Flaky.seen[0]["User-Agent"] == "sparqlnav-test/1" and _Flaky.seen[0]["X-Team"] == "kg"
        _Flaky.failures = [429] * 10
        with RemoteEndpoint(url, http=HttpOptions(retries=2), sleep=waits.append) as ep:
            res = ep.query("ASK { ?s ?p ?o }")
        assert res.outcome is Outcome.ENGINE_ERROR and "429" in res.message
    finally:
        server.shutdown()


def test_dead_endpoint_is_unreachable_not_a_crash() -> None:
    with RemoteEndpoint("http://127.0.0.1:9/sparql") as ep:
        res = ep.query("ASK {}")
    assert res.outcome is Outcome.UNREACHABLE and "cannot reach" in res.message


@pytest.mark.slow
def test_runaway_query_times_out_and_the_next_one_works(ck25, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    graph: LocalGraph = ck25.endpoint
    restarts = graph.server.restarts
    res = graph.query("SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }", timeout_s=2)
    assert res.outcome is Outcome.TIMEOUT and "2 s" in res.message
    assert res.seconds < 30  # it stopped, instead of running for minutes
    assert graph.server.restarts == restarts + 1  # the engine process was killed, so the work really stopped
    nxt = graph.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert nxt.outcome is Outcome.OK and nxt.table is not None and nxt.table.rows[0]["n"].value == "26903"


@pytest.mark.data
def test_benchmark_graph_sizes(ck25, data_dir: Path, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    assert ck25.endpoint.query(count).table.rows[0]["n"].value == "26903"
    with open_kg(str(data_dir / "bestiary" / "beastiary_kg.rdf"), settings) as kg:
        assert kg.endpoint.query(count).table.rows[0]["n"].value == "98070"  # type: ignore[union-attr]


def test_limits_dataclass_defaults() -> None:
    assert Limits().timeout_s == 60.0


def test_remote_kg_indexes_names_and_detects_wikibase(served: tuple[BareOxigraph, BareOxigraph], tmp_path: Path) -> None:
    a, _ = served
    from sparqlnav.tools.lookup import search

    with open_kg(a.url, _settings(tmp_path, SPARQLNAV_HOME=str(tmp_path / "remote-home"))) as kg:
        assert kg.vocab.wikibase is None
        found = search(kg, "Ada Lovelase")
        assert found.entities[0].iri == "http://example.org/ada"
        assert search(kg, "knows").properties[0].iri == "http://example.org/knows"
        res = kg.endpoint.query("SELECT ?y WHERE { <http://example.org/ada> <http://example.org/born> ?y }")
        assert res.table is not None and res.table.rows[0]["y"].value == "1815"
    assert (tmp_path / "remote-home" / "remote").is_dir()  # the name index is kept for the next run


@pytest.mark.slow
def test_concurrent_queries_survive_a_timeout_on_another_thread(ck25) -> None:  # type: ignore[no-untyped-def]
    from concurrent.futures import ThreadPoolExecutor

    graph: LocalGraph = ck25.endpoint
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"

    def work(i: int) -> str:
        if i % 10 == 5:
            return graph.query("SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }", timeout_s=1).outcome.value
        res = graph.query(count)
        return res.table.rows[0]["n"].value if res.ok and res.table else res.outcome.value

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(work, range(40)))
    assert outcomes.count("timeout") == 4
    assert outcomes.count("26903") == 36, outcomes


def test_unreadable_retry_after_falls_back_to_exponential_backoff(served: tuple[BareOxigraph, BareOxigraph]) -> None:
    a, _ = served
    _Flaky.failures, _Flaky.target, _Flaky.seen, _Flaky.retry_after = [503, 503], a.url, [], "soon"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    try:
        with RemoteEndpoint(f"http://127.0.0.1:{server.server_address[1]}/sparql", sleep=waits.append) as ep:
            res = ep.query("ASK { ?s ?p ?o }")
        assert res.outcome is Outcome.OK and waits == [0.5, 1.0]
    finally:
        _Flaky.retry_after = "0"
        server.shutdown()


def test_server_outlives_the_thread_that_started_it_and_keeps_its_port(folder: Path, tmp_path: Path) -> None:
    info = ensure_store(rdf_files(folder / "people.ttl"), tmp_path / "s")
    graph = LocalGraph(info, name="people")
    try:
        worker = threading.Thread(target=lambda: graph.query("ASK { ?s ?p ?o }"))
        worker.start()
        worker.join()
        port = graph.server.port
        assert graph.server._proc is not None and graph.server._proc.poll() is None  # still alive
        graph.server.restart()
        res = graph.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        assert res.table is not None and res.table.rows[0]["n"].value == "7"
        assert graph.server.port == port  # restarted on the same port: clients keep their URL
    finally:
        graph.close()


def test_remote_name_index_pages_past_the_row_cap(served: tuple[BareOxigraph, BareOxigraph], tmp_path: Path) -> None:
    a, _ = served
    from sparqlnav.tools.lookup import search

    settings = _settings(tmp_path, SPARQLNAV_HOME=str(tmp_path / "paged"), SPARQLNAV_MAX_ROWS="1")
    with open_kg(a.url, settings) as kg:
        assert "incomplete" not in kg.description
        assert {search(kg, name).entities[0].label for name in ("Ada Lovelace", "Charles Babbage")} == {
            "Ada Lovelace", "Charles Babbage"}  # fmt: skip


def test_headers_from_the_environment_reach_remote_endpoints(served: tuple[BareOxigraph, BareOxigraph], tmp_path: Path) -> None:
    a, _ = served
    _Flaky.failures, _Flaky.target, _Flaky.seen = [], a.url, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = _settings(tmp_path, SPARQLNAV_HEADERS="Authorization: Bearer t0ken\nX-Team: kg")
        assert settings.remote.headers == {"Authorization": "Bearer t0ken", "X-Team": "kg"}
        with open_kg(f"http://127.0.0.1:{server.server_address[1]}/sparql", settings) as kg:
            assert kg.endpoint.query("ASK { ?s ?p ?o }").ok
        assert _Flaky.seen and all(h.get("Authorization") == "Bearer t0ken" for h in _Flaky.seen)
    finally:
        server.shutdown()
