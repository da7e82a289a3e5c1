"""Issue 15's runs and inputs, each as a client meets it: real servers on 127.0.0.1 (uvicorn in this process or
`sparqlnav serve` as its own), a real LLM server that never answers, real Oxigraph, real HTTP and MCP clients.
The only timings asserted are generous hang guards."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from bare_oxigraph import BareOxigraph
from sparqlnav.answer import Answer
from sparqlnav.cancel import RunCancelled
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.service import KGPool
from sparqlnav.graph.endpoint import Outcome, RemoteEndpoint
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.store import LocalGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace
from test_mcp import text_of
from test_serve import EX, MANAGER_OF_ALICE, factory_with, tiny, tiny_path  # noqa: F401 - fixtures

GUARD_S = 30.0  # hang guard: far beyond what any of these waits needs once fixed


def values_product(size: int, factors: int) -> str:
    """A query that counts a cross product of VALUES: slow in proportion to size**factors, on any graph."""
    values = " ".join(str(i) for i in range(size))
    blocks = " ".join(f"VALUES ?v{n} {{ {values} }}" for n in range(factors))
    return f"SELECT (COUNT(*) AS ?n) WHERE {{ {blocks} }}"


def wait_until(condition: Callable[[], bool], guard_s: float = GUARD_S) -> bool:
    """Poll `condition` until it holds or the hang guard runs out."""
    deadline = time.monotonic() + guard_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class HangingLLM:
    """A real HTTP server on 127.0.0.1 that reads each request and never answers; it counts the requests it
    got and the connections still open (a client that hangs up closes one)."""

    def __init__(self) -> None:
        outer = self
        self.requests = 0
        self.open = 0
        self._lock = threading.Lock()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with outer._lock:
                    outer.open += 1
                try:
                    seen = b""
                    while b"\r\n\r\n" not in seen:
                        chunk = self.request.recv(65536)
                        if not chunk:
                            return
                        seen += chunk
                    with outer._lock:
                        outer.requests += 1
                    while self.request.recv(65536):  # the body, then nothing: wait for the client to go
                        pass
                except OSError:
                    pass
                finally:
                    with outer._lock:
                        outer.open -= 1

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> HangingLLM:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def hanging_llm() -> Iterator[HangingLLM]:
    """An LLM that never answers."""
    with HangingLLM() as server:
        yield server


class SlowQuery:
    """A strategy over the real toolkit that runs one slow query and records how that call ended."""

    name = "slow"

    def __init__(self, query: str) -> None:
        self.query = query
        self.ended = threading.Event()
        self.how = ""

    def run(self, question: str, kg: KnowledgeGraph, trace: Trace, context: object = None) -> Answer:
        tools = Toolkit(kg, trace, timeout_s=120)
        trace.emit("thought", text="one big count")
        try:
            ran = tools.execute_sparql(self.query)
            self.how = ran.value.outcome.value
        except RunCancelled:
            self.how = "cancelled"
            raise
        finally:
            self.ended.set()
        return Answer(question, "slow", self.query, ran.value.table, "counted", trace)


# -- item 2: a timed-out request frees its worker --------------------------------------------------


def test_a_timed_out_ask_frees_its_slot_and_hangs_up_on_the_llm(
    settings: Settings, tiny: KnowledgeGraph, hanging_llm: HangingLLM  # noqa: F811
) -> None:
    llm = LLMConfig(model="m", base_url=hanging_llm.base_url, api_key="test")
    # The runs must reach the LLM before the requests give up: a cold process spends ~1.5 s first (lazy imports of
    # the retrieval stack, TLS contexts), so 1.5 s made this test a coin toss when it ran first.
    app = create_app(settings, ServeConfig(max_concurrent=3, request_timeout_s=5.0), kgs={"tiny": tiny}, llm=llm)
    question = {"question": "Who manages Alice Wunderlich?", "strategy": "explore"}
    with background(app) as url, httpx.Client(base_url=url, timeout=GUARD_S) as client:
        with ThreadPoolExecutor(3) as pool:
            codes = [r.status_code for r in pool.map(lambda _: client.post("/api/ask", json=question), range(3))]
        assert codes == [504, 504, 504]
        assert hanging_llm.requests == 3
        health = client.get("/health").json()
        assert health["active_runs"] == 0  # the slots are free the moment the requests gave up
        ran = client.post("/api/sparql", json={"query": MANAGER_OF_ALICE})
        assert ran.status_code == 200, ran.text
        # The runs were cancelled inside their LLM calls: the connections close and the threads return.
        assert wait_until(lambda: hanging_llm.open == 0), f"{hanging_llm.open} LLM connections still open"
        assert wait_until(lambda: client.get("/health").json()["finishing_runs"] == 0)
    assert hanging_llm.requests == 3  # cancelled, not retried


def test_a_timed_out_ask_cancels_its_sparql_query(settings: Settings, tiny: KnowledgeGraph) -> None:  # noqa: F811
    slow = SlowQuery(values_product(400, 3))  # 64 million rows: seconds of work for the engine
    assert isinstance(tiny.endpoint, LocalGraph)
    restarts = tiny.endpoint.server.restarts
    app = create_app(
        settings, ServeConfig(request_timeout_s=1.0), kgs={"tiny": tiny}, strategy_factory=factory_with(slow=slow)
    )
    with background(app) as url, httpx.Client(base_url=url, timeout=GUARD_S) as client:
        r = client.post("/api/ask", json={"question": "How many?", "strategy": "slow"})
        assert r.status_code == 504
        assert slow.ended.wait(GUARD_S)
        assert slow.how == "cancelled"  # not a result that arrived after the request had given up
        # The engine did not compute on to the query's 120 s limit: its process was stopped, and the next query runs.
        assert tiny.endpoint.server.restarts == restarts + 1
        assert tiny.endpoint.query("ASK { ?s ?p ?o }").outcome is Outcome.OK
        assert client.get("/health").json() | {"version": None} == {
            "status": "ok", "version": None, "active_runs": 0, "finishing_runs": 0, "max_concurrent": 64,
            "worker": os.getpid(), "state": "in-process", "worker_runs": 0,
        }


# -- item 4: MCP over HTTP obeys the server's limits --------------------------------------------------


def test_mcp_calls_share_the_api_slots_and_time_limit(
    settings: Settings, tiny: KnowledgeGraph, hanging_llm: HangingLLM  # noqa: F811
) -> None:
    llm = LLMConfig(model="m", base_url=hanging_llm.base_url, api_key="test")
    app = create_app(settings, ServeConfig(max_concurrent=8, request_timeout_s=20), kgs={"tiny": tiny}, llm=llm)
    slow = values_product(100, 3)  # a million rows: a fraction of a second each, longer under load
    seen_active: list[int] = []

    async def one_client(url: str) -> list[tuple[bool, str]]:
        async with Client(url + "/mcp") as client:
            got = await asyncio.gather(*(client.call_tool("execute_sparql", {"query": slow}) for _ in range(3)))
            return [(r.is_error, text_of(r)) for r in got]

    async def load(url: str) -> list[tuple[bool, str]]:
        async def watch(http: httpx.AsyncClient, stop: asyncio.Event) -> None:
            while not stop.is_set():
                seen_active.append((await http.get("/health")).json()["active_runs"])
                await asyncio.sleep(0.05)

        stop = asyncio.Event()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_S) as http:
            watcher = asyncio.create_task(watch(http, stop))
            batches = await asyncio.gather(*(one_client(url) for _ in range(15)))
            stop.set()
            await watcher
        return [r for b in batches for r in b]

    async def ask(url: str) -> tuple[bool, str]:
        async with Client(url + "/mcp") as client:
            got = await asyncio.wait_for(client.call_tool("ask", {"question": "Who manages Alice?", "strategy": "explore"}), GUARD_S)
            return got.is_error, text_of(got)

    with background(app) as url:
        results = asyncio.run(load(url))
        assert len(results) == 45
        busy = [text for error, text in results if error and "busy" in text]
        done = [text for error, text in results if not error]
        assert busy and done and len(busy) + len(done) == 45, {t[:80] for _, t in results}
        assert all("| 1000000 |" in text for text in done)
        assert 0 < max(seen_active) <= 8
        assert httpx.get(url + "/health").json()["active_runs"] == 0

    app = create_app(settings, ServeConfig(request_timeout_s=2.0), kgs={"tiny": tiny}, llm=llm)
    with background(app) as url:
        is_error, text = asyncio.run(ask(url))
        assert is_error and "no answer within the time limit of 2 s" in text
        assert wait_until(lambda: hanging_llm.open == 0)
        assert httpx.get(url + "/health").json()["active_runs"] == 0


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def serve_env(home: Path) -> dict[str, str]:
    """The environment of a `sparqlnav` process under the test home, with no LLM."""
    env = {**os.environ, "SPARQLNAV_HOME": str(home)}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    return env


@contextlib.contextmanager
def serving(args: list[str], home: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`sparqlnav serve` as its own process on a free port; yields its URL and the process."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparqlnav", "serve", *args, "--port", str(port), "--log-level", "warning"],
        env=serve_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: _answers(url) or proc.poll() is not None, 60) and proc.poll() is None, (
            proc.stderr.read() if proc.stderr and proc.poll() is not None else "no answer"
        )
        yield url, proc
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# -- item 5: huge rows stay typed and memory comes back -------------------------------------------------

# One row, one literal of 16 MiB: a string doubled twenty times (any graph can compute it).
HUGE_ROW = (
    'SELECT ?x WHERE { BIND("0123456789abcdef" AS ?a0) '
    + " ".join(f"BIND(CONCAT(?a{i}, ?a{i}) AS ?a{i + 1})" for i in range(20))
    + " BIND(?a20 AS ?x) }"
)


def test_a_huge_row_is_cut_and_memory_comes_back(tiny_path: Path, sn_home: Path) -> None:  # noqa: F811
    with serving(["--kg", f"tiny={tiny_path}"], sn_home) as (url, proc), httpx.Client(base_url=url, timeout=GUARD_S) as client:

        def huge() -> httpx.Response:
            return client.post("/api/sparql", json={"query": HUGE_ROW})

        for _ in range(3):  # warm-up: imports, worker threads, the engine's first queries
            first = huge()
        assert first.status_code == 422 and first.json() == {
            "outcome": "cut",
            "detail": "cut: the result was cut at a cap (max 1048576 bytes per row) before its first complete row",
        }
        before = rss_mb(proc.pid)
        with ThreadPoolExecutor(5) as pool:
            outcomes = [r.json()["outcome"] for r in pool.map(lambda _: huge(), range(50))]
        after = rss_mb(proc.pid)
        assert outcomes == ["cut"] * 50
        assert after - before < 64, f"server memory grew from {before:.0f} MB to {after:.0f} MB"
        small = client.post("/api/sparql", json={"query": MANAGER_OF_ALICE})
        assert small.status_code == 200 and small.json()["outcome"] == "ok"



# -- item 9: SERVICE goes only to this run's graphs unless allowed -----------------------------------------


def _federated(url: str) -> str:
    return f"PREFIX ex: <{EX}> SELECT ?m WHERE {{ SERVICE <{url}> {{ ex:alice ex:manager ?m }} }}"


def test_service_allows_only_this_runs_graphs_by_default(settings: Settings, tiny: KnowledgeGraph, tmp_path: Path) -> None:  # noqa: F811
    other = tmp_path / "other.ttl"
    other.write_text(f"<{EX}x> <{EX}y> <{EX}z> .\n", encoding="utf-8")
    # a real SPARQL endpoint over HTTP to federate with: the small graph's store served by a plain Oxigraph (a
    # graph's own engine is reachable only through its private socket)
    bare = BareOxigraph(tiny.endpoint.info.data_dir)  # type: ignore[attr-defined]
    peer = bare.ensure_running()
    try:
        _federate(settings, other, peer)
    finally:
        bare.stop()


def _federate(settings: Settings, other: Path, peer: str) -> None:
    with open_kg(str(other), settings) as graph:
        wikidata = graph.endpoint.query(_federated(settings.wikidata.sparql))
        assert wikidata.outcome is Outcome.REFUSED
        assert wikidata.message == (
            f"SERVICE <{settings.wikidata.sparql}> is not an allowed endpoint (allowed: none)"
        )
        assert graph.endpoint.url not in graph.endpoint.query(_federated(peer)).message  # its engine's address is private

    allowing = Settings.from_env({"SPARQLNAV_HOME": str(settings.paths.home), "SPARQLNAV_ALLOWED_SERVICES": peer})
    with open_kg(str(other), allowing) as graph:
        ran = graph.endpoint.query(_federated(peer))
        assert ran.outcome is Outcome.OK and [r["m"].value for r in ran.table.rows] == [f"{EX}bob"]

    # A server's graphs may call each other (Wikidata among them when it is one), and nothing else.
    pool = KGPool({"other": str(other), "peer": peer, "wd": "wikidata"}, settings)
    try:
        assert pool.settings.remote.allowed_services == (peer, settings.wikidata.sparql)
        ran = pool.get("other").endpoint.query(_federated(peer))
        assert ran.outcome is Outcome.OK and [r["m"].value for r in ran.table.rows] == [f"{EX}bob"]
    finally:
        pool.close()


# -- item 11: input edges -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["serve", "--kg", "x=/nonexistent.ttl"], "error: --kg x: /nonexistent.ttl does not exist"),
        (["serve", "--port", "99999"], "error: --port 99999 is not a port number (0 to 65535)"),
        (["ask", ""], "error: no question: the question is empty"),
        (["search", "  "], "error: nothing to search for: the text is empty"),
    ],
)
def test_bad_command_lines_end_in_one_line(args: list[str], line: str, sn_home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", *args], env=serve_env(sn_home), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stderr.strip().startswith(line) and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout


class _Garbled(BaseHTTPRequestHandler):
    """A SPARQL endpoint whose results are JSON nested a hundred thousand levels deep."""

    def do_GET(self) -> None:
        body = b'{"head":{"vars":["x"]},"results":{"bindings":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        """Quiet."""


def test_garbled_and_invalid_text_are_typed(settings: Settings, tiny: KnowledgeGraph) -> None:  # noqa: F811
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbled)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with RemoteEndpoint(f"http://127.0.0.1:{server.server_address[1]}/sparql") as endpoint:
            deep = endpoint.query("SELECT ?x WHERE { ?x ?p ?o }")
        assert deep.outcome is Outcome.ENGINE_ERROR and "could not read the endpoint's results" in deep.message
    finally:
        server.shutdown()
        server.server_close()

    app = create_app(settings, ServeConfig(), kgs={"tiny": tiny})
    with background(app) as url, httpx.Client(base_url=url, timeout=GUARD_S) as client:
        lone = client.post(
            "/api/sparql",
            content=b'{"query": "SELECT ?x WHERE { BIND(\\"a\\ud800\\" AS ?x) }"}',
            headers={"Content-Type": "application/json"},
        )
        assert lone.status_code == 400 and lone.json() == {
            "outcome": "syntax_error",
            "detail": "syntax_error: error at character 26: U+D800 is a lone surrogate, not a character",
        }
        root, page = client.get("/"), client.get("/static/index.html")
        assert page.status_code == 200 and page.text == root.text
        assert page.headers["content-security-policy"] == root.headers["content-security-policy"]
        assert "script-src 'self'" in page.headers["content-security-policy"]
