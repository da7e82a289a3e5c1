"""Hardening of the faces, as the red team's second run on loopback broke them (issue 29, items 8 and 10): unbounded
request bodies, tool routes and MCP past the API's length caps, conversations without a size, LLM runs started by
another site's <img>, lone surrogates and huge ids answered with 500s or echoed whole, the local engine's port in
messages and in what SERVICE targets receive, redirects to other hosts followed, and results without the expected
variables failing with a bare KeyError. Real uvicorn, real Oxigraph, real HTTP servers, all on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import select
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from scripted_llm import ScriptedLLM
from sparqlnav.conversation import MAX_BYTES, ConversationStore
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.limits import MAX_BODY_BYTES
from sparqlnav.graph.endpoint import HttpOptions, Outcome, RemoteEndpoint
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.settings import Settings
from sparqlnav.tools.registry import TOOLKIT_TOOLS
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace
from test_hardening_http import client_at
from test_hardening_runs import free_port, rss_mb, serving
from test_serve import DATASET, EX, MANAGER_OF_ALICE, tiny, tiny_path  # noqa: F401 - fixtures

MB = 1024 * 1024
NEUTRAL_BASE = "http://sparqlnav.invalid/"  # the BASE a query to the local engine gets when it has none (README)
QUESTION = "Who is the manager of Alice Wunderlich?"
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
# What a browser sends for <img src="http://127.0.0.1:PORT/text2sparql?…"> on another site's page.
IMG_FROM_ANOTHER_SITE = {
    "User-Agent": BROWSER,
    "Accept": "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5",
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Mode": "no-cors",
    "Sec-Fetch-Dest": "image",
    "Referer": "http://attacker.example/",
}


def port_of(url: str) -> int:
    """The port of a base URL."""
    return int(url.rsplit(":", 1)[1])


def head(path: str, **headers: str) -> bytes:
    """The head of a POST request to 127.0.0.1."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(s: socket.socket, first: bytes = b"") -> bytes:
    """The whole HTTP answer on `s` (head and a body of its Content-Length), starting with bytes already read."""
    data = first
    s.settimeout(10)
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        more = s.recv(65_536)
        if not more:
            break
        data += more
    return data


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def send_until_answered(port: int, path: str, total: int, *, chunked: bool, block: int = 65_536) -> tuple[int, bytes]:
    """POST a body of `total` bytes (declared, or chunked without a length) `block` bytes at a time, looking for an
    answer after each block; the body bytes sent before the answer came (or the server hung up) and the answer."""
    piece = b"x" * block
    sent, answer = 0, b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head(path, Transfer_Encoding="chunked") if chunked else head(path, Content_Length=str(total)))
        while sent < total and not answer:
            try:
                s.sendall(b"%x\r\n%s\r\n" % (block, piece) if chunked else piece)
                sent += block
            except (BrokenPipeError, ConnectionResetError):
                break  # the server hung up: its answer is already in our receive buffer
            if select.select([s], [], [], 0)[0]:
                answer = s.recv(65_536)
        return sent, read_answer(s, answer)


def json_post(client: httpx.Client, path: str, raw: str, **headers: str) -> httpx.Response:
    """POST a JSON text as written (escapes such as \\ud800 kept for the server's parser)."""
    return client.post(path, content=raw.encode(), headers={"Content-Type": "application/json", **headers})


def llm_of(server: ScriptedLLM) -> LLMConfig:
    """The real LLM client's configuration for the scripted server."""
    return LLMConfig(model=server.model, base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)


def mcp_calls(url: str, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, str]]:
    """Call MCP tools over streamable HTTP; (is_error, text) of each."""

    async def main() -> list[tuple[bool, str]]:
        out = []
        async with Client(url + "/mcp") as client:
            for name, arguments in calls:
                got = await client.call_tool(name, arguments)
                text = "\n".join(c.text for c in got.content if getattr(c, "type", "") == "text")
                out.append((bool(got.is_error), text))
        return out

    return asyncio.run(main())


class _Recording(ThreadingHTTPServer):
    """A stdlib HTTP server on 127.0.0.x that keeps the paths and SPARQL queries it was sent."""

    daemon_threads = True

    def __init__(self, host: str, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__((host, 0), handler)
        self.seen: list[tuple[str, str]] = []

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://{self.server_address[0]}:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    """Reads the query of a SPARQL protocol request and hands it to `answer`."""

    server: _Recording

    def do_GET(self) -> None:
        """A query in the URL."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("query", [""])[0]
        self._answer(query)

    def do_POST(self) -> None:
        """A query in the body."""
        self._answer(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())

    def _answer(self, query: str) -> None:
        self.server.seen.append((self.path, query))
        status, headers, body = self.answer(query)
        self.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def answer(self, query: str) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for `query`."""
        raise NotImplementedError

    def log_message(self, *_: Any) -> None:
        """Quiet."""


@pytest.fixture
def serve_http() -> Iterator[Any]:
    """Start `_Recording` servers (`serve_http(handler, host)`); all are stopped at the end."""
    started: list[_Recording] = []

    def start(handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> _Recording:
        server = _Recording(host, handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


# -- item 8: request bodies ----------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_before_it_is_read(settings: Settings, tiny: KnowledgeGraph) -> None:  # noqa: F811
    app = create_app(settings, ServeConfig(strategy="lexical"), kgs={"tiny": tiny})
    with background(app) as url:
        port = port_of(url)
        # A declared length over the limit: 413 at once, while the client has sent none of its 5 MB.
        for path in ("/api/ask", "/api/tools/search", "/mcp", "/text2sparql"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(head(path, Content_Length=str(5 * MB)))
                answer = read_answer(s)
            assert answer.startswith(b"HTTP/1.1 413"), (path, answer[:200])
            assert b"the request body is too large" in answer and b"connection: close" in answer.lower()
        # No length: the body is cut when it passes the limit. The 413 comes although the client never ends its 5 MB
        # (no last chunk): the server did not wait to read the body whole.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head("/api/sparql", Transfer_Encoding="chunked"))
            piece = b"x" * 65_536
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it may hang up before we are done
                for _ in range(5 * MB // len(piece)):
                    s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            answer = read_answer(s)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert f"the limit is {MAX_BODY_BYTES:,} bytes".encode() in answer
        with client_at(url) as client:  # a body within the limit is answered as before
            ok = client.post("/api/sparql", json={"query": MANAGER_OF_ALICE})
            assert ok.status_code == 200 and ok.json()["results"]["results"]["bindings"][0]["m"]["value"] == EX + "bob"


def test_parallel_large_bodies_do_not_grow_the_server(tiny_path: Path, sn_home: Path) -> None:  # noqa: F811
    # The red team's six parallel 100 MB bodies took the server to 1.19 GB before each 422; here 6 × 20 MB.
    with serving(["--kg", f"tiny={tiny_path}"], sn_home) as (url, proc):
        port = port_of(url)
        with httpx.Client(base_url=url, timeout=30) as client:
            for _ in range(3):  # warm-up: imports, worker threads, the engine's first queries
                assert client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}).status_code == 200
        before = rss_mb(proc.pid)
        answers: list[bytes] = []

        def flood(chunked: bool) -> None:
            answers.append(send_until_answered(port, "/api/ask", 20 * MB, chunked=chunked, block=MB)[1])

        threads = [threading.Thread(target=flood, args=(i % 2 == 0,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        grown = rss_mb(proc.pid) - before
    assert len(answers) == 6 and all(a.startswith(b"HTTP/1.1 413") for a in answers), [a[:40] for a in answers]
    assert grown < 20, f"the server grew by {grown:.0f} MB for 120 MB of refused bodies"


# -- item 8: one set of input limits on every face -------------------------------------------------------------


def test_tool_routes_and_mcp_hold_inputs_to_the_api_limits(
    settings: Settings, tiny: KnowledgeGraph, scripted_llm: ScriptedLLM  # noqa: F811
) -> None:
    huge = "Alice " * 150_000  # 900,000 characters: the red team's 1 MB search query took 55.7 s of CPU
    app = create_app(settings, ServeConfig(strategy="explore"), kgs={"tiny": tiny}, llm=llm_of(scripted_llm))
    with background(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        started = time.perf_counter()
        search = client.post("/api/tools/search", json={"query": huge})
        assert time.perf_counter() - started < 5
        assert search.status_code == 422
        assert search.json() == {"detail": "query is too long (900000 characters; the limit is 2000)"}
        shapes = client.post("/api/tools/get_class_shapes", json={"classes": ["Person"] * 500})
        assert shapes.status_code == 422 and "classes is too long (3000 characters" in shapes.json()["detail"]
        sparql = client.post("/api/tools/execute_sparql", json={"query": "# " + "x" * 100_000 + "\n" + MANAGER_OF_ALICE})
        assert sparql.status_code == 422 and "query is too long (100" in sparql.json()["detail"]
        assert "the limit is 100000" in sparql.json()["detail"]
        within = client.post("/api/tools/execute_sparql", json={"query": MANAGER_OF_ALICE})
        assert within.status_code == 200 and within.json()["ok"] and "ex:bob" in within.json()["text"]

        lone = json_post(client, "/api/tools/validate_sparql", '{"query": "SELECT \\ud800 WHERE {}"}')
        assert lone.status_code == 422
        assert lone.json() == {"detail": "query is not valid text: character 8 is a lone surrogate (U+D800)"}

        got = mcp_calls(url, [
            ("search", {"query": huge}),
            ("ask", {"question": "x" * 900_000}),
            ("get_entity", {"id": "x" * 5_000}),
            ("search", {"query": "Alice"}),
        ])  # fmt: skip
    # Tool errors, as the SDK words them ("Error executing tool search: …").
    assert got[0][0] and got[0][1].endswith(": query is too long (900000 characters; the limit is 2000)")
    assert got[1][0] and got[1][1].endswith(": question is too long (900000 characters; the limit is 2000)")
    assert got[2][0] and got[2][1].endswith(": id is too long (5000 characters; the limit is 2000)")
    assert got[3][0] is False and "Alice Wunderlich" in got[3][1]
    assert scripted_llm.requests == []  # the red team's 900,000-character question sent 27 MB to the LLM


# -- item 8: conversations have a size -------------------------------------------------------------------------


def test_a_conversation_keeps_its_latest_turns_within_its_bounds(tiny: KnowledgeGraph, tmp_path: Path) -> None:  # noqa: F811
    disk = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_CONVERSATIONS": "disk"})
    app = create_app(disk, ServeConfig(strategy="lexical", mcp=False), kgs={"tiny": tiny})
    edit = "# " + "x" * 99_000 + "\n" + MANAGER_OF_ALICE  # the red team's 99 KB edit, sent with every turn
    with background(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        first = client.post("/api/ask", json={"question": QUESTION, "sparql": edit}).json()
        ident = first["conversation"]
        assert first["turn"] == 2 and "conversation_note" not in first  # the edit is turn 1
        for _ in range(11):
            last = client.post("/api/ask", json={"question": QUESTION, "sparql": edit, "conversation": ident})
            assert last.status_code == 200
        answer = last.json()
        assert answer["turn"] == 24  # numbers count every turn, dropped ones too
        assert answer["conversation_note"].startswith("turns 1–") and "keeps its latest 50 turns within 512 KiB" in answer["conversation_note"]
        kept = json.loads((tmp_path / "conversations" / f"{ident}.json").read_text(encoding="utf-8"))
        assert kept["dropped"] + len(kept["turns"]) == 24 and kept["dropped"] >= 12  # about five edits fit
        assert (tmp_path / "conversations" / f"{ident}.json").stat().st_size <= MAX_BYTES + 1024
        gone = client.post("/api/ask", json={"question": QUESTION, "conversation": ident, "refine": 1})
        assert gone.status_code == 422 and gone.json()["detail"].startswith("turn 1 was dropped: this conversation keeps turns")
        recent = client.post("/api/ask", json={"question": QUESTION, "conversation": ident, "refine": 24})
        assert recent.status_code == 200 and recent.json()["turn"] == 25

    # The bounds are settings like the store's others.
    small = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_CONVERSATIONS_TURNS": "3",
                               "SPARQLNAV_CONVERSATIONS_BYTES": "4096"})  # fmt: skip
    store = ConversationStore.from_settings(small)
    assert (store.max_turns, store.max_bytes) == (3, 4096)


# -- item 10: LLM runs cannot be started by another site's page ----------------------------------------------------


def test_a_page_on_another_site_cannot_start_an_llm_run(
    settings: Settings, tiny: KnowledgeGraph, scripted_llm: ScriptedLLM  # noqa: F811
) -> None:
    app = create_app(settings, ServeConfig(strategy="explore", mcp=False), kgs={"tiny": tiny}, llm=llm_of(scripted_llm))
    params = {"question": QUESTION, "dataset": DATASET}
    with background(app) as url, client_at(url) as client:
        img = client.get("/text2sparql", params=params, headers=IMG_FROM_ANOTHER_SITE)
        assert img.status_code == 403 and "X-Requested-With" in img.json()["detail"]
        older = client.get("/text2sparql", params=params, headers={"User-Agent": BROWSER})  # no Sec-Fetch headers
        assert older.status_code == 403
        # A page's fetch() of a Blob has no Content-Type, which FastAPI still reads as JSON; a text/plain form too.
        blob = client.post("/api/ask", content=json.dumps({"question": QUESTION}).encode(), headers={"User-Agent": BROWSER})
        assert blob.status_code == 415 and "application/json" in blob.json()["detail"]
        form = client.post("/api/ask/stream", content=b'{"question": "x"}', headers={"Content-Type": "text/plain"})
        assert form.status_code == 415
    assert scripted_llm.requests == []  # the red team's <img> made 8 LLM requests

    # The same requests made the way only this server's page or a program can make them are answered.
    plain = create_app(settings, ServeConfig(strategy="lexical", mcp=False), kgs={"tiny": tiny})
    with background(plain) as url, client_at(url) as client:
        for headers in (
            {**IMG_FROM_ANOTHER_SITE, "X-Requested-With": "XMLHttpRequest"},  # only after a CORS preflight
            {"User-Agent": BROWSER, "Sec-Fetch-Site": "same-origin"},  # this server's own page (/docs)
            {},  # a program: httpx's own User-Agent
        ):
            r = client.get("/text2sparql", params=params, headers=headers)
            assert r.status_code == 200 and "ex:manager" in r.json()["query"], headers
        ui = client.post("/api/ask", json={"question": QUESTION}, headers={"User-Agent": BROWSER, "Sec-Fetch-Site": "same-origin"})
        assert ui.status_code == 200


def test_the_challenge_client_works_with_a_token_in_its_url(
    settings: Settings, tiny: KnowledgeGraph, tmp_path: Path, text2sparql_client: Path,  # noqa: F811
) -> None:
    # The TEXT2SPARQL client sends a plain GET (requests, no way to add a header); with a token on the server it
    # sends it as the password of http://user:TOKEN@host/…, which requests turns into Basic credentials.
    questions = tmp_path / "questions.yml"
    questions.write_text(
        f"dataset:\n  id: {DATASET}\n  prefix: tiny\nquestions:\n  - id: 1\n    question:\n      en: {QUESTION}\n",
        encoding="utf-8",
    )
    app = create_app(settings, ServeConfig(strategy="lexical", token="s3cret", mcp=False), kgs={"tiny": tiny})
    with background(app) as url:
        port = port_of(url)
        res = subprocess.run(
            [str(text2sparql_client), "ask", str(questions), f"http://challenge:s3cret@127.0.0.1:{port}/text2sparql",
             "--answers-db", str(tmp_path / "answers.db"), "--timeout", "60"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        with client_at(url) as client:
            wrong = client.get("/text2sparql", params={"question": QUESTION, "dataset": DATASET}, auth=("challenge", "guess"))
            bearer = client.get("/text2sparql", params={"question": QUESTION, "dataset": DATASET},
                                headers={"Authorization": "Bearer s3cret"})  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    with sqlite3.connect(tmp_path / "answers.db") as con:
        (response,) = con.execute("SELECT response FROM responses").fetchone()
    stored = pickle.loads(response)  # the client pickles the requests.Response it got
    assert stored.status_code == 200 and "ex:manager" in stored.json()["query"]
    assert wrong.status_code == 401 and bearer.status_code == 200


# -- item 10: short 4xx answers for bad text and huge ids ---------------------------------------------------------


def test_bad_text_and_huge_ids_get_short_4xx_answers(tiny: KnowledgeGraph, tmp_path: Path) -> None:  # noqa: F811
    disk = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_CONVERSATIONS": "disk"})
    app = create_app(disk, ServeConfig(strategy="lexical", mcp=False), kgs={"tiny": tiny})
    with background(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        lone = json_post(client, "/api/ask", '{"question": "\\ud800"}')
        assert lone.status_code == 422
        assert lone.json() == {"detail": "question is not valid text: character 1 is a lone surrogate (U+D800)"}
        edit = json_post(client, "/api/ask", '{"question": "Who manages Alice?", "sparql": "SELECT \\ud800"}')
        assert edit.status_code == 422 and edit.json()["detail"].startswith("sparql is not valid text: character 8")
        check = json_post(client, "/api/sparql/check", '{"query": "SELECT \\ud800"}')
        assert check.status_code == 422 and "lone surrogate" in check.json()["detail"]

        for ident in ("a" * 300, "0123456789abcdef" * 16, "g" * 900_000):  # 256 hex characters made a file name too long
            r = client.post("/api/ask", json={"question": QUESTION, "conversation": ident})
            assert r.status_code == 404 and len(r.content) < 300, (len(ident), r.status_code, len(r.content))
            assert r.json()["detail"].startswith("no conversation")
        for field in ("kg", "strategy"):
            r = client.post("/api/ask", json={"question": QUESTION, field: "k" * 100_000})
            assert r.status_code == 400 and len(r.content) < 400 and "more characters" in r.json()["detail"], field
        ok = client.post("/api/ask", json={"question": QUESTION})
        assert ok.status_code == 200 and ok.json()["turn"] == 1


# -- item 10: the local engine's address -----------------------------------------------------------------------------


class _EchoingError(_Handler):
    """A SPARQL endpoint that fails every query, repeating it in its error text (as many engines do)."""

    def answer(self, query: str) -> tuple[int, dict[str, str], bytes]:
        """A 500 that quotes the query."""
        return 500, {"Content-Type": "text/plain"}, f"Parse error in query:\n{query}".encode()


def test_the_local_engines_address_is_in_no_message_and_no_service_request(
    tiny_path: Path, tmp_path: Path, serve_http: Any  # noqa: F811
) -> None:
    target = serve_http(_EchoingError)
    allowed = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_ALLOWED_SERVICES": target.url + "/sparql"})
    with open_kg(str(tiny_path), allowed) as kg:
        engine = kg.endpoint.url.split("//", 1)[1].split("/", 1)[0]  # 127.0.0.1:PORT
        failed = kg.endpoint.query(f"ASK {{ SERVICE <{target.url}/sparql> {{ ?s ?p ?o }} }}")
        relative = kg.endpoint.query("SELECT (<x> AS ?v) (STR(<>) AS ?here) WHERE {}")
        own = kg.endpoint.query("BASE <http://example.org/people/> SELECT (<x> AS ?v) WHERE {}")
        second_line = kg.endpoint.query("SELECT ?s\nWHERE { ?s ?p ?o } OFFSET 'x'")
    assert target.seen, "the SERVICE target was never called"
    sent = target.seen[0][1]
    assert engine not in sent and sent.startswith(f"BASE <{NEUTRAL_BASE}>")
    assert failed.outcome is Outcome.ENGINE_ERROR and "Parse error in query" in failed.message
    assert engine not in failed.message
    # Relative IRIs resolve against the neutral base, where the guard lets them through at all.
    if relative.outcome is Outcome.OK and relative.table is not None:
        assert relative.table.rows[0]["v"].value == NEUTRAL_BASE + "x"
        assert relative.table.rows[0]["here"].value == NEUTRAL_BASE
    else:
        assert relative.outcome is Outcome.SYNTAX_ERROR and engine not in relative.message
    assert own.table is not None and own.table.rows[0]["v"].value == "http://example.org/people/x"
    # The BASE line before the query does not move the engine's positions.
    assert second_line.outcome is Outcome.SYNTAX_ERROR and second_line.message.startswith("error at 2:")

    # A private engine that cannot be reached is not named either.
    gone = f"127.0.0.1:{free_port()}"
    with RemoteEndpoint(f"http://{gone}/query", allow_self=False, http=HttpOptions(retries=0)) as private:
        lost = private.query("ASK {}")
    assert lost.outcome is Outcome.UNREACHABLE and lost.message.startswith("cannot reach the local engine")
    assert gone not in lost.message


# -- item 10: redirects ------------------------------------------------------------------------------------------------


class _Results(_Handler):
    """A SPARQL endpoint at /sparql with one row; /old moves there, /away moves to another host."""

    elsewhere = ""

    def answer(self, query: str) -> tuple[int, dict[str, str], bytes]:
        """The row, or a redirect."""
        path = urllib.parse.urlsplit(self.path).path
        if path == "/old":
            return 301, {"Location": "/sparql"}, b""
        if path == "/away":
            return 307, {"Location": self.elsewhere + "/sparql"}, b""
        rows = {"head": {"vars": ["v"]}, "results": {"bindings": [{"v": {"type": "literal", "value": "here"}}]}}
        return 200, {"Content-Type": "application/sparql-results+json"}, json.dumps(rows).encode()


class _Canary(_Results):
    """The host a redirect points at: it should never be asked."""


def test_redirects_are_followed_within_the_endpoints_host_only(serve_http: Any) -> None:
    canary = serve_http(_Canary, "127.0.0.2")
    handler = type("Redirecting", (_Results,), {"elsewhere": canary.url})
    endpoint = serve_http(handler)
    with RemoteEndpoint(endpoint.url + "/away", http=HttpOptions(retries=0)) as away:
        refused = away.query("SELECT ?v WHERE { ?s ?p ?v }")
    assert refused.outcome is Outcome.UNREACHABLE and "\n" not in refused.message
    assert refused.message == (
        f"the endpoint redirected to another origin ({canary.url}); only redirects within {endpoint.url} are "
        "followed (SPARQLNAV_ALLOWED_REDIRECTS allows others)"
    )
    assert canary.seen == []
    with RemoteEndpoint(endpoint.url + "/old", http=HttpOptions(retries=0)) as moved:
        same = moved.query("SELECT ?v WHERE { ?s ?p ?v }")
    assert same.outcome is Outcome.OK and same.table is not None and same.table.rows[0]["v"].value == "here"


# -- item 10: results without the variables the query always binds --------------------------------------------------


class _Unbound(_Handler):
    """A broken endpoint: every SELECT answers rows that bind none of the query's variables."""

    def answer(self, query: str) -> tuple[int, dict[str, str], bytes]:
        """Rows of one stray variable (or true for an ASK)."""
        if query.lstrip().upper().startswith("ASK") or "\nASK" in query.upper():
            body: dict[str, Any] = {"head": {}, "boolean": True}
        else:
            row = {"x": {"type": "literal", "value": "1"}}
            body = {"head": {"vars": ["s", "p", "o", "n", "x"]}, "results": {"bindings": [row, row, row]}}
        return 200, {"Content-Type": "application/sparql-results+json"}, json.dumps(body).encode()


def test_results_without_the_expected_variables_fail_no_lookup(tmp_path: Path, serve_http: Any) -> None:
    endpoint = serve_http(_Unbound)
    url = endpoint.url + "/sparql"
    env = {**os.environ, "SPARQLNAV_HOME": str(tmp_path / "cli")}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    cli = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "entity", "<http://example.org/a>", "--kg", url],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert cli.returncode == 0 and "error: 'p'" not in cli.stderr, cli.stderr  # the red team's symptom
    assert "<http://example.org/a>" in cli.stdout and "no outgoing edges" in cli.stdout

    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "lib")})
    indexes = KGIndexes(settings.paths.home, embedding=settings.embedding)
    with open_kg(url, settings) as kg:
        kit = Toolkit(kg, Trace(), indexes=indexes)
        calls: list[tuple[str, dict[str, Any]]] = [
            ("search", {"query": "Alice"}),
            ("get_entity", {"id": "<http://example.org/a>"}),
            ("get_property_examples", {"id": "<http://example.org/p>"}),
            ("get_class_shapes", {"classes": ["Person"]}),
            ("validate_sparql", {"query": "SELECT ?o WHERE { ?s <http://example.org/p> ?o }"}),
            ("find_examples", {"question": QUESTION}),
        ]
        seen = {name: TOOLKIT_TOOLS.call(name, kit, arguments) for name, arguments in calls}
    indexes.close()
    assert all(o.ok for o in seen.values()), {n: o.text for n, o in seen.items() if not o.ok}
    assert "(no outgoing edges)" in seen["get_entity"].text
    assert "(no triples use this property)" in seen["get_property_examples"].text
