"""The guard fails closed (issue 29, items 1 and 2): a query runs only when sparqlnav's own parser reads it completely,
SERVICE endpoints are compared unescaped and normalised, and checking is linear in the query's length.

Real canary HTTP servers on 127.0.0.1 count every request; real Oxigraph engines (the managed local store, and a
plain `oxigraph serve-read-only` process that is not network-jailed, so that the guard is the only barrier) and the
real faces (open_kg, the CLI, /api/sparql, MCP, the explore toolkit). No test asserts a time."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph as ox
import pytest
from mcp import Client

import test_check
from sparqlnav.cancel import CancelSignal, RunCancelled, bound
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.endpoint import Outcome, RemoteEndpoint
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.store import health, oxigraph_binary
from sparqlnav.settings import Settings
from sparqlnav.sparql import guard, parser
from sparqlnav.sparql.guard import Refused, check_query, tokens
from sparqlnav.sparql.parser import parse_query
from sparqlnav.sparql.syntax import syntax_problem
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace
from test_mcp import text_of
from test_serve import TINY, tiny, tiny_path  # noqa: F401 - fixtures

GUARD_S = 60.0  # hang guard for HTTP clients, far beyond what any of these needs


def reproduction(port: int) -> str:
    """Issue 29, item 1(a), as the red team sent it: U+00B7 and `\\'` in a local name, SERVICE to a canary."""
    return (
        "PREFIX : <http://e/> SELECT * { OPTIONAL { ?s :a\u00b7\\' ?o } "
        f"SERVICE <http://127.0.0.1:{port}/min> {{ ?a ?b ?c }} FILTER(?o != 'x' || isTRIPLE(?o)) }}"
    )


def escaped_slash(called: int, allowed: int) -> str:
    """Item 1(b): `\\u002F@` makes the allowed host a user name for a reader that does not decode the escape."""
    return f"SELECT * WHERE {{ SERVICE <http://127.0.0.1:{called}\\u002F@127.0.0.1:{allowed}/allowed> {{ ?a ?b ?c }} }}"


def quotes(kb: int) -> str:
    """Item 2: `BIND('` + `\\'`×N + ` AS ?x)`, `kb` kilobytes long (one string that never closes)."""
    head, tail = "SELECT * WHERE { BIND('", " AS ?x) }"
    return head + "\\'" * ((kb * 1000 - len(head) - len(tail)) // 2) + tail


class Canary:
    """A SPARQL endpoint on 127.0.0.1 that counts every request it gets and answers with no rows."""

    def __init__(self) -> None:
        self.requests = 0
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                outer.requests += 1
                outer.paths.append(self.path.partition("?")[0])
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b'{"head":{"vars":[]},"results":{"bindings":[]}}'
                self.send_response(200)
                self.send_header("Content-Type", "application/sparql-results+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *_: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def canary() -> Iterator[Canary]:
    server = Canary()
    try:
        yield server
    finally:
        server.close()


def free_port() -> int:
    """A port nothing listens on (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def bare_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plain `oxigraph serve-read-only` over the small graph, outside any network jail: when the guard lets a
    SERVICE clause through, this engine calls out. Its query URL."""
    location = tmp_path_factory.mktemp("bare-engine") / "store"
    store = ox.Store(str(location))
    store.load(TINY, format=ox.RdfFormat.TURTLE)
    store.flush()
    del store
    port = free_port()
    process = subprocess.Popen(
        [oxigraph_binary(), "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/query"
    try:
        deadline = time.monotonic() + GUARD_S
        while not health(url):
            assert process.poll() is None and time.monotonic() < deadline, "the bare engine did not start"
            time.sleep(0.1)
        yield url
    finally:
        process.kill()
        process.wait()


def mcp_call(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One MCP tool call through the SDK's client, over streamable HTTP."""

    async def main() -> Any:
        async with Client(url) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(main())


def cli(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`sparqlnav` as a user runs it."""
    full = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", **(env or {})}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        full.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "sparqlnav", *args], capture_output=True, text=True, env=full, timeout=240, check=False
    )


# -- item 1(a): the reproduction, through every face -------------------------------------------------------------


def test_the_reproduction_never_reaches_an_engine_that_would_call_out(canary: Canary, bare_engine: str) -> None:
    query = reproduction(canary.port)
    # The control: the engine itself accepts the query and calls the canary when nothing stops it.
    before = canary.requests
    assert httpx.get(bare_engine, params={"query": query}, timeout=GUARD_S).status_code == 200
    assert canary.requests > before
    canary.requests = 0

    with RemoteEndpoint(bare_engine) as endpoint:  # the guard is the only barrier in front of this engine
        result = endpoint.query(query)
    assert result.outcome is Outcome.REFUSED, result.message
    assert result.message == f"SERVICE <{canary.url}/min> is not an allowed endpoint (allowed: {bare_engine})"
    assert canary.requests == 0


def test_the_reproduction_is_refused_through_every_face(
    canary: Canary, settings: Settings, tiny: KnowledgeGraph, tiny_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    query = reproduction(canary.port)
    refusal = f"SERVICE <{canary.url}/min> is not an allowed endpoint (allowed: none)"

    result = tiny.endpoint.query(query)  # `tiny` is open_kg's graph over the local store
    assert result.outcome is Outcome.REFUSED and result.message == refusal

    done = cli("sparql", query, "--kg", str(tiny_path), home=tmp_path)
    assert done.returncode != 0 and refusal in done.stderr and "Traceback" not in done.stderr

    step = Toolkit(tiny, Trace()).execute_sparql(query)  # an explore step runs its queries here
    assert not step.ok and refusal in step.text

    app = create_app(settings, ServeConfig(), kgs={"tiny": tiny})
    with background(app) as url, httpx.Client(base_url=url, timeout=GUARD_S) as client:
        answered = client.post("/api/sparql", json={"query": query})
        assert answered.status_code == 400
        assert answered.json()["outcome"] == "refused" and refusal in answered.json()["detail"]
        called = mcp_call(url + "/mcp", "execute_sparql", {"query": query})
        assert called.is_error and refusal in text_of(called)

    assert canary.requests == 0


# -- item 1(b): escaped URLs, and two readings Oxigraph has that the old guard did not ----------------------------


def test_an_escaped_slash_cannot_borrow_an_allowed_host(canary: Canary, bare_engine: str) -> None:
    allowed = f"http://127.0.0.1:{free_port()}/allowed"
    query = escaped_slash(canary.port, int(allowed.split(":")[2].split("/")[0]))
    with RemoteEndpoint(bare_engine, allowed_services=[allowed]) as endpoint:
        result = endpoint.query(query)
    assert result.outcome is Outcome.REFUSED
    assert result.message.startswith(f"SERVICE <{canary.url}/@127.0.0.1:")  # compared as the engine reads it
    assert "is not a valid endpoint URL (it holds '@'" in result.message
    assert canary.requests == 0


def test_the_local_engine_gets_no_escaped_url_either(canary: Canary, settings: Settings, tmp_path: Path) -> None:
    allowed = f"http://127.0.0.1:{free_port()}/allowed"
    allowing = Settings.from_env({"SPARQLNAV_HOME": str(settings.paths.home), "SPARQLNAV_ALLOWED_SERVICES": allowed})
    small = tmp_path / "small.ttl"
    small.write_text("<http://e/a> <http://e/b> <http://e/c> .\n", encoding="utf-8")
    with open_kg(str(small), allowing) as graph:
        result = graph.endpoint.query(escaped_slash(canary.port, int(allowed.split(":")[2].split("/")[0])))
    assert result.outcome is Outcome.REFUSED and "is not a valid endpoint URL" in result.message
    assert canary.requests == 0


@pytest.mark.parametrize(
    ("body", "what_the_old_guard_read"),
    [
        # Oxigraph matches keywords as prefixes: this is SERVICE SILENT LY:x, not SERVICE SILENTLY:x.
        ("SELECT * {{ SERVICE SILENTLY:x {{ ?s ?p ?o }} }}", "/ok/x"),
        # Its local names hold one run of dots: `ok:a.b . SERVICE <…>`, not the one name `ok:a.b.SERVICE`.
        ("SELECT * {{ ?s ?p ok:a.b.SERVICE <{evil}> {{ ?x ?y ?z }} }}", None),
    ],
)
def test_names_are_read_as_oxigraph_reads_them(
    body: str, what_the_old_guard_read: str | None, canary: Canary, bare_engine: str
) -> None:
    prefixes = f"PREFIX SILENTLY: <{canary.url}/ok/> PREFIX LY: <{canary.url}/evil/> PREFIX ok: <{canary.url}/ok/> "
    query = prefixes + body.format(evil=f"{canary.url}/evil")
    # The control: Oxigraph itself, given the text (and a triple for the dotted name to match), calls the evil path.
    control = ox.Store()
    control.add(ox.Quad(ox.NamedNode("http://e/s"), ox.NamedNode("http://e/p"), ox.NamedNode(f"{canary.url}/ok/a.b")))
    list(control.query(query))  # type: ignore[arg-type]
    assert [p for p in canary.paths if p.startswith("/evil")], canary.paths
    canary.requests, canary.paths = 0, []

    allowed = [f"{canary.url}/ok/x"] if what_the_old_guard_read else []
    for remote in (False, True):
        with pytest.raises(Refused):
            check_query(query, allowed, remote=remote)
    with RemoteEndpoint(bare_engine, allowed_services=allowed) as endpoint:
        assert endpoint.query(query).outcome in (Outcome.REFUSED, Outcome.SYNTAX_ERROR)
    assert canary.requests == 0


def test_allowed_endpoints_are_compared_unescaped_and_normalised() -> None:
    allowed = ["https://query.example.org/sparql"]
    escaped = "SELECT * WHERE { SERVICE <HTTPS://Query.example.org:443/\\u0073parql/> { ?s ?p ?o } }"
    assert check_query(escaped, allowed) == "SELECT"
    through_prefix = "PREFIX q: <https://query.example.org/> SELECT * WHERE { SERVICE q:sparql { ?s ?p ?o } }"
    assert check_query(through_prefix, allowed) == "SELECT"
    through_base = "BASE <https://query.example.org/a/> SELECT * WHERE { SERVICE <../sparql> { ?s ?p ?o } }"
    assert check_query(through_base, allowed) == "SELECT"
    for url, why in [
        ("http://a.example@query.example.org/sparql", "'@'"),
        ("http://query.example.org\\@evil.example/sparql", "'@'"),
        ("http://query.example.org\\evil.example/sparql", "backslash"),
        ("http://query.example.org%2Eevil.example/sparql", "not a plain host"),
        ("ftp://query.example.org/sparql", "not an http or https URL"),
        ("http:query.example.org/sparql", "not an http or https URL"),
    ]:
        with pytest.raises(ValueError, match=why):
            guard.endpoint_form(url)
    assert guard.endpoint_form("HTTP://Query.Example.org:80/sparql/") == "http://query.example.org/sparql"


# -- fail closed: a query runs only when sparqlnav reads it --------------------------------------------------------

HARMLESS_12 = [
    "SELECT * WHERE { ?s ?p ?o FILTER(?o != 'x' || isTRIPLE(?o)) }",
    "PREFIX ex: <http://example.org/tiny/> SELECT ?t WHERE { BIND(TRIPLE(ex:alice, ex:manager, ex:bob) AS ?t) "
    "FILTER(SUBJECT(?t) = ex:alice && PREDICATE(?t) = ex:manager && OBJECT(?t) = ex:bob) }",
    "PREFIX ex: <http://example.org/tiny/> SELECT * WHERE { << ex:alice ex:manager ?m >> ex:since ?d }",
    "PREFIX ex: <http://example.org/tiny/> SELECT * WHERE { ?r ex:about <<( ex:alice ex:manager ?m )>> }",
    "PREFIX ex: <http://example.org/tiny/> SELECT * WHERE { ex:alice ex:manager ?m {| ex:since ?d |} }",
    "PREFIX ex: <http://example.org/tiny/> SELECT * WHERE { ex:alice ex:manager ?m ~ ?r }",
    'SELECT ?d WHERE { BIND(LANGDIR("a"@en--ltr) AS ?d) FILTER(hasLANG("a"@en) && hasLANGDIR("a"@ar--rtl)) }',
    "VERSION '1.2' SELECT * WHERE { VALUES ?t { <<( <http://e/a> <http://e/b> 'c' )>> } }",
    "SELECT * WHERE { ?s ?p ?o FILTER(!!true) } LIMIT 1",
    "SELECT * WHERE { ?s ?p ?o LATERAL { SELECT ?x WHERE { ?s ?q ?x } LIMIT 1 } } LIMIT 1",
]


@pytest.mark.parametrize("query", HARMLESS_12)
def test_sparql_12_that_the_engine_accepts_still_runs(query: str, tiny: KnowledgeGraph) -> None:  # noqa: F811
    assert test_check._oxigraph_verdict(query) is None  # the engine's own parser accepts it
    assert syntax_problem(query) is None  # and so does ours, as the web editor shows
    result = tiny.endpoint.query(query)
    assert result.outcome in (Outcome.OK, Outcome.EMPTY), result.message


def test_what_sparqlnav_cannot_read_is_not_run(tiny: KnowledgeGraph) -> None:  # noqa: F811
    unreadable = "SELECT * WHERE { ?s ?p ?o FILTER(?o != 'x' || isTRIPPLE(?o)) }"
    with pytest.raises(guard.Unreadable, match=r"^refused: sparqlnav could not read this query completely \(error at 1:"):
        check_query(unreadable, [])
    result = tiny.endpoint.query(unreadable)
    assert result.outcome is Outcome.SYNTAX_ERROR
    assert result.message.startswith("error at 1:") and "so it was not run" in result.message


def test_remote_dialects_run_unless_they_could_name_a_service() -> None:
    virtuoso = "SELECT COUNT(?s) WHERE { ?s ?p ?o . ?o bif:contains '\"word\"' }"  # no (… AS ?n): Virtuoso's own
    assert check_query(virtuoso, [], remote=True) == "SELECT"
    with pytest.raises(guard.Unreadable):
        check_query(virtuoso, [])  # the local Oxigraph engine gets only what parses
    dressed = [
        virtuoso.replace("WHERE {", "WHERE { SERVICE <http://evil.example/> { ?a ?b ?c }"),
        virtuoso.replace("WHERE {", "WHERE { \\u0053ERVICE <http://evil.example/> { ?a ?b ?c }"),
        virtuoso.replace("WHERE {", "WHERE { # service\n"),
        virtuoso.replace("'\"word\"'", "'\"word\""),  # an unclosed string: the tokens are out of step
        virtuoso.replace("?o .", "?o \\ ."),
    ]
    for query in dressed:
        with pytest.raises(Refused):
            check_query(query, ["http://evil.example/"], remote=True)
    # An engine that decodes \u escapes before parsing (SPARQL 1.1, §19.2) would see a SERVICE inside this string.
    hidden = "SELECT * WHERE { ?s ?p '\\u0027 . SERVICE <http://evil.example/> { ?x ?y ?z } ?q ?r \\u0027' }"
    assert check_query(hidden, []) == "SELECT"  # Oxigraph decodes escapes inside strings only: a string
    with pytest.raises(Refused, match=r"evil\.example"):
        check_query(hidden, [], remote=True)


def test_tokens_read_names_and_strings_as_sparql_does() -> None:
    name, *_ = tokens(":a\u00b7\\'\u203f\u0300 ?o")
    assert (name.kind, name.text) == ("pname", ":a\u00b7\\'\u203f\u0300")
    assert [t.kind for t in tokens('"a" \'b\' """c\n""" \'never closed')] == ["string", "string", "lstring", "unclosed"]
    assert [(t.kind, t.text) for t in tokens("_:b1 ex:n.x a.b @en-GB")] == [
        ("bnode", "_:b1"), ("pname", "ex:n.x"), ("word", "a"), ("other", "."), ("word", "b"), ("langtag", "@en-GB"),
    ]
    assert guard.service_targets(
        "BASE <http://h.example/a/> PREFIX e: <x/> SELECT * { SERVICE e:\\,s { } SERVICE <\\u0073> { } }"
    ) == ["http://h.example/a/x/,s", "http://h.example/a/s"]


# -- item 2: linear checking, under the request's deadline ---------------------------------------------------------


@pytest.mark.parametrize("kb", [10, 20, 40, 100])
def test_an_unclosed_string_is_read_once(kb: int) -> None:
    query = quotes(kb)
    toks = tokens(query)
    # The string that never closes is one token to the end of its line: no quote inside it starts another reading
    # (the old tokenizer read the rest of the line again from each of its N quotes).
    assert [t.kind for t in toks] == ["word", "other", "word", "other", "word", "other", "unclosed"]
    assert len(toks[-1].text) == len(query) - len("SELECT * WHERE { BIND(")
    for remote in (False, True):
        with pytest.raises(guard.Unreadable, match="an unterminated string"):
            check_query(query, [], remote=remote)


def test_a_run_of_names_is_matched_once() -> None:
    run = "a." * 50_000
    matches = [m.lastgroup for m in guard._TOKEN.finditer(f"SELECT * WHERE {{ {run} }}")]
    assert matches.count("name") == 3  # SELECT, WHERE and the whole run, one match each
    assert len(tokens(run)) == 100_000  # words and dots, each once


def test_the_parser_tries_a_prefixed_name_once_per_run() -> None:
    """Inside a run such as `true-true-…`, where no prefixed name starts, the parser's lexer leaves the attempt out:
    the full lexer runs a fixed number of times, however long the run."""
    counts = {"full": 0}
    lexers = dict(parser._LEXERS)

    class Counting:
        def __init__(self, pattern: Any) -> None:
            self.pattern = pattern

        def match(self, text: str, pos: int) -> Any:
            counts["full"] += 1
            return self.pattern.match(text, pos)

    for key, lexer in lexers.items():
        counting = parser._Lexer(lexer._names)
        counting.token = Counting(lexer.token)  # type: ignore[assignment]
        parser._LEXERS[key] = counting
    try:
        for n in (100, 10_000):
            counts["full"] = 0
            parse_query("SELECT * WHERE { FILTER(" + "-".join(["true"] * n) + ") }", oxigraph=True)
            assert counts["full"] <= 12, n
    finally:
        parser._LEXERS.update(lexers)


def test_a_check_stops_at_the_deadline_and_when_the_run_is_cancelled() -> None:
    # Long in tokens, within the clause budget (a VALUES block's values are data, not clauses).
    long = "SELECT * WHERE { VALUES ?s { " + " ".join(f"<http://e/s{i}>" for i in range(15000)) + " } ?s ?p ?o }"
    assert check_query(long, [], deadline=time.monotonic() + GUARD_S) == "SELECT"
    with pytest.raises(Refused, match="took longer than its time limit"):
        check_query(long, [], deadline=time.monotonic() - 1)
    signal = CancelSignal()
    signal.cancel()
    with bound(signal), pytest.raises(RunCancelled):
        check_query(long, [])


def test_the_long_query_of_the_report_is_answered_at_once(settings: Settings, tiny: KnowledgeGraph) -> None:  # noqa: F811
    query = quotes(99)
    app = create_app(settings, ServeConfig(), kgs={"tiny": tiny})
    with background(app) as url, httpx.Client(base_url=url, timeout=GUARD_S) as client:
        answered = client.post("/api/sparql", json={"query": query})
    assert answered.status_code == 400, answered.text[:300]
    assert answered.json()["outcome"] == "syntax_error" and "could not read the query completely" in answered.json()["detail"]


def test_name_classes_written_as_complements_hold_the_same_characters() -> None:
    """The lexers' Unicode classes are compiled from their complements (faster to compile): on every code point,
    each complement matches exactly what the class as the grammar writes it matches."""
    every = "".join(chr(c) for c in range(0x110000))
    tail = r"0-9\u00b7\u0300-\u036f\u203f-\u2040"
    for astral in ("", "\U00010000-\U000effff"):  # Oxigraph's names stop at U+FFFD; SPARQL 1.1's go on
        base = parser._PN_CHARS_BASE_BMP + astral
        chars = base + "_" + r"\-" + tail
        for body in (base, chars, chars + ":", base + "_0-9", base + "_:0-9", base + "_" + tail):
            fast = parser.char_class(body)
            assert fast.startswith("[^")  # the cheaper form was chosen
            kept = re.compile(f"[{body}]++").sub("", every)
            assert re.compile(fast + "++").sub("", every) == kept, body
            assert len(every) - len(kept) > 50_000 if astral == "" else len(every) - len(kept) > 900_000
    assert parser.char_class("a-z_") == "[a-z_]"  # a small class is left as it is
    assert parser.class_ranges(r"a-c\-x\u00e9") == [(ord("-"), ord("-")), (ord("a"), ord("c")), (ord("x"), ord("x")),
                                                    (0xE9, 0xE9)]
