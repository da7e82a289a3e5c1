"""`sparqlnav serve --workers 3` with a real Redis (a private `redis-server`) as the shared state store, over CK25,
with the real LLM client against the scripted server: a conversation whose two turns are answered by two different
worker processes continues; a rate limit counts across workers; a worker stopped mid-stream ends that stream with
an error event and the conversation continues on another worker; several workers without a shared store refuse to
start in one line. Each response names the process that answered (X-Sparqlnav-Worker, and `worker` in /health)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from private_redis import PrivateRedis
from scripted_llm import Call, Hang, Reply, ScriptedLLM
from sparqlnav.conversation import Conversation
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.redis_state import RedisState
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import Settings
from test_conversation import (
    EMAIL,
    EMAIL_QUERY,
    FIRST,
    SECOND,
    first_user,
    two_turns,
)
from test_serve import sse_events

pytestmark = [pytest.mark.data, pytest.mark.slow]

WORKERS = 3
RATE = 6  # requests a minute per client: bursts of 6, then one every 10 s


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def redis_server() -> Iterator[PrivateRedis]:
    with PrivateRedis() as server:
        yield server


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


class Served:
    """A `sparqlnav serve --workers N` process tree on a free port."""

    def __init__(self, proc: subprocess.Popen[str], base: str, log: Path, home: Path) -> None:
        self.proc, self.base, self.log, self.home = proc, base, log, home

    def client(self, client_ip: str) -> httpx.Client:
        """A client with one connection, presenting `client_ip` through the trusted proxy header."""
        return httpx.Client(
            base_url=self.base, timeout=120, headers={"X-Forwarded-For": client_ip},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )  # fmt: skip

    def on_worker(self, client_ip: str, *, pid: int | None = None, avoid: set[int] = frozenset(), tries: int = 200) -> tuple[int, httpx.Client]:  # type: ignore[assignment]
        """A client whose connection is held by a worker (`pid`, or any not in `avoid`), found by asking /health
        on new connections (the kernel hands each to one of the processes accepting on the port)."""
        for _ in range(tries):
            c = self.client(client_ip)
            got = int(c.get("/health").json()["worker"])
            if (pid is None or got == pid) and got not in avoid:
                return got, c
            c.close()
        raise AssertionError(f"no connection reached a worker {pid or f'other than {avoid}'} in {tries} tries")

    def pids(self) -> set[int]:
        """The workers seen answering /health on fresh connections."""
        seen = set()
        for _ in range(60):
            with httpx.Client(base_url=self.base, timeout=10) as c:
                seen.add(int(c.get("/health").json()["worker"]))
        return seen


def serve(home: Path, llm: ScriptedLLM, data_dir: Path, *, workers: int, state_url: str | None) -> tuple[subprocess.Popen[str], str, Path]:
    port = _free_port()
    env = {
        **os.environ,
        "SPARQLNAV_HOME": str(home),
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "SPARQLNAV_LLM_MODEL": "scripted-model",
        "SPARQLNAV_LLM_RETRIES": "0",
        "SPARQLNAV_ENGINE_IDLE": "5",  # the kept engine ends soon after the test lets go of it
    }
    env.pop("SPARQLNAV_STATE_URL", None)
    if state_url:
        env["SPARQLNAV_STATE_URL"] = state_url
    log = home / f"serve-{port}.log"
    command = [
        sys.executable, "-m", "sparqlnav", "serve", "--workers", str(workers), "--port", str(port),
        "--kg", f"ck25={data_dir / 'ck25' / 'prod-inst.ttl'}", "--strategy", "explore",
        "--rate-limit", str(RATE), "--trusted-proxy", "127.0.0.1", "--log-format", "json",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}", log


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_server: PrivateRedis, llm: ScriptedLLM, data_dir: Path) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("workers-home")
    proc, base, log = serve(home, llm, data_dir, workers=WORKERS, state_url=redis_server.url(1))
    server = Served(proc, base, log, home)
    try:
        deadline = time.monotonic() + 240
        ready: set[int] = set()
        while len(ready) < WORKERS:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"not {WORKERS} ready workers: {ready}\n{log.read_text()[-3000:]}"
            try:
                with httpx.Client(base_url=base, timeout=5) as c:
                    r = c.get("/ready")
                    if r.status_code == 200:
                        ready.add(int(r.json()["worker"]))
            except httpx.HTTPError:
                time.sleep(0.2)
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the supervisor and its workers, started in their own session
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def ask(client: httpx.Client, **body: Any) -> tuple[int, dict[str, Any]]:
    """POST /api/ask; the answering worker's pid and the answer object."""
    r = client.post("/api/ask", json=body)
    assert r.status_code == 200, r.text
    return int(r.headers["x-sparqlnav-worker"]), r.json()


def values(answer: dict[str, Any]) -> set[str]:
    return {cell["value"] for row in answer["results"]["results"]["bindings"] for cell in row.values()}


def test_two_turns_answered_by_two_workers_continue_one_conversation(served: Served, llm: ScriptedLLM) -> None:
    llm.script(two_turns())
    before = len(llm.requests)
    a, first_client = served.on_worker("10.0.0.1")
    with closing(first_client):
        pid1, first = ask(first_client, question=FIRST)
    b, second_client = served.on_worker("10.0.0.1", avoid={a})
    with closing(second_client):
        pid2, second = ask(second_client, question=SECOND, conversation=first["conversation"])
    assert pid1 == a and pid2 == b and pid1 != pid2  # two processes
    assert first["turn"] == 1 and second["turn"] == 2 and second["conversation"] == first["conversation"]
    assert EMAIL in values(second) and "Waldtraud" in first["answer"]
    # the second worker handed the first worker's turn to the model, before the question
    requests = llm.requests[before:]
    assert llm.problems == [] and len(requests) == 6
    follow_up = first_user(requests[3])
    assert f"Turn 1. Question: {FIRST}" in follow_up and "Answer: Waldtraud Kuttner." in follow_up
    assert follow_up.rstrip().endswith(f"Question: {SECOND}")


def engines_under(home: Path) -> list[int]:
    """The Oxigraph engine processes serving a store under `home` (not their keepers and jail launchers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name == "oxigraph" and b"serve-read-only" in argv and any(a.startswith(str(home).encode()) for a in argv):
            found.append(int(entry.name))
    return found


def test_the_workers_query_one_engine_and_one_index(served: Served) -> None:
    """One store server for all workers: every worker's queries reach the same engine process (started once, by
    the supervisor, and kept), and the name and retrieval indexes were built once."""
    pids: set[int] = set()
    for _ in range(3):
        pid, client = served.on_worker("10.0.0.5", avoid=pids)
        with closing(client):
            r = client.post("/api/sparql", json={"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", "kg": "ck25"})
        assert r.status_code == 200 and int(r.headers["x-sparqlnav-worker"]) == pid, r.text
        assert int(r.json()["results"]["results"]["bindings"][0]["n"]["value"]) > 10_000
        pids.add(pid)
    assert len(pids) == WORKERS
    assert len(engines_under(served.home)) == 1
    stores = [p for p in (served.home / "stores").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(stores) == 1 and len(list(stores[0].glob("labels.sqlite*"))) >= 1
    indexes = list(served.home.rglob("schema*.json")) or list(served.home.rglob("*.npy"))
    assert indexes, sorted(str(p.relative_to(served.home)) for p in served.home.rglob("*"))[:40]
    built = [line for line in served.log.read_text().splitlines() if "graph prepared for the workers" in line]
    assert len(built) == 1, built  # by the supervisor, before the workers started


def test_a_rate_limit_counts_across_workers(served: Served) -> None:
    allowed: list[int] = []
    refused: list[int] = []
    seen: set[int] = set()
    for _ in range(RATE + 1):
        # each request on a connection to a worker other than the previous one's
        pid, client = served.on_worker("10.0.0.2", avoid=set(allowed[-1:]))
        with closing(client):
            r = client.get("/api/info")
        seen.add(int(r.headers["x-sparqlnav-worker"]))
        (allowed if r.status_code == 200 else refused).append(pid)
        if r.status_code != 200:
            assert r.status_code == 429 and r.json()["detail"].startswith("rate limit reached"), r.text
    assert len(allowed) == RATE and len(refused) == 1  # one bucket for the client, whichever worker answers
    assert len(seen) >= 2
    # another client has its own allowance
    with closing(served.on_worker("10.0.0.3")[1]) as other:
        assert other.get("/api/info").status_code == 200


def test_a_worker_stopped_mid_stream_ends_it_with_an_error_and_the_conversation_goes_on(served: Served, llm: ScriptedLLM) -> None:
    llm.script([
        *two_turns()[:3],  # turn 1
        Hang(),  # turn 2's first call: the worker is stopped while it waits for the model
        Reply(tool_calls=[Call("execute_sparql", {"query": EMAIL_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply(f"Her email address is {EMAIL}."),
    ])  # fmt: skip
    before = len(llm.requests)
    a, client = served.on_worker("10.0.0.4")
    with closing(client):
        _, first = ask(client, question=FIRST)
        body = {"question": SECOND, "conversation": first["conversation"]}
        with client.stream("POST", "/api/ask/stream", json=body) as r:
            assert r.status_code == 200 and int(r.headers["x-sparqlnav-worker"]) == a
            stream = sse_events(r.iter_lines())
            events = [next(stream)]  # the run has started
            deadline = time.monotonic() + 60
            while len(llm.requests) <= before + 3:  # until its model call is under way (and hangs)
                assert time.monotonic() < deadline, events
                time.sleep(0.05)
            os.kill(a, signal.SIGTERM)  # what a process manager or an orchestrator sends
            events.extend(stream)  # to the stream's end
    names = [n for n, _ in events]
    assert names[0] == "trace" and names[-1] == "error" and "answer" not in names, events
    error = events[-1][1]
    assert error["status"] == 503 and "stopping" in error["detail"] and "ask again" in error["detail"]
    # the conversation continues on another worker, with turn 1 and as turn 2 (the stopped run added none)
    b, other = served.on_worker("10.0.0.4", avoid={a})
    with closing(other):
        pid, second = ask(other, question=SECOND, conversation=first["conversation"])
    assert pid == b != a
    assert second["turn"] == 2 and EMAIL in values(second)
    follow_up = first_user(llm.requests[before + 4])
    assert f"Turn 1. Question: {FIRST}" in follow_up and "Turn 2" not in follow_up
    # uvicorn's process manager replaced the stopped worker
    deadline = time.monotonic() + 120
    while True:
        pids = served.pids()
        if a not in pids and len(pids) == WORKERS:
            break
        assert time.monotonic() < deadline, pids
        time.sleep(1)


def test_a_worker_killed_mid_stream_cuts_it_and_the_conversation_goes_on(served: Served, llm: ScriptedLLM) -> None:
    """SIGKILL leaves no time for a last event: the client sees the stream end without an answer, asks again and
    the conversation (kept in Redis, not in the dead process) continues on another worker."""
    llm.script([
        *two_turns()[:3],
        Hang(),  # the worker is killed while it waits for the model
        Reply(tool_calls=[Call("execute_sparql", {"query": EMAIL_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply(f"Her email address is {EMAIL}."),
    ])  # fmt: skip
    before = len(llm.requests)
    a, client = served.on_worker("10.0.0.6")
    with closing(client):
        _, first = ask(client, question=FIRST)
        body = {"question": SECOND, "conversation": first["conversation"]}
        names = []
        with pytest.raises(httpx.RemoteProtocolError), client.stream("POST", "/api/ask/stream", json=body) as r:
            stream = sse_events(r.iter_lines())
            names.append(next(stream)[0])
            deadline = time.monotonic() + 60
            while len(llm.requests) <= before + 3:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            os.kill(a, signal.SIGKILL)
            names.extend(n for n, _ in stream)
    assert names[0] == "trace" and "answer" not in names and "error" not in names
    b, other = served.on_worker("10.0.0.6", avoid={a})
    with closing(other):
        pid, second = ask(other, question=SECOND, conversation=first["conversation"])
    assert pid == b != a and second["turn"] == 2 and EMAIL in values(second)
    assert f"Turn 1. Question: {FIRST}" in first_user(llm.requests[before + 4])


def test_several_workers_without_a_shared_store_refuse_to_start(tmp_path: Path, llm: ScriptedLLM, data_dir: Path) -> None:
    proc, _, log = serve(tmp_path, llm, data_dir, workers=2, state_url=None)
    assert proc.wait(timeout=60) == 1
    text = log.read_text().strip()
    assert text.splitlines() == [
        "error: --workers 2 needs a state store the workers share: set SPARQLNAV_STATE_URL=redis://HOST:PORT/DB "
        "(without it each worker would keep its own conversations and rate limits)"
    ]


def test_an_unreachable_redis_is_said_in_one_line(tmp_path: Path, llm: ScriptedLLM, data_dir: Path) -> None:
    proc, _, log = serve(tmp_path, llm, data_dir, workers=2, state_url=f"redis://127.0.0.1:{_free_port()}/0")
    assert proc.wait(timeout=60) == 1
    lines = log.read_text().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: SPARQLNAV_STATE_URL: cannot use redis at 127.0.0.1:"), lines


def test_a_redis_that_goes_away_gets_503s_and_the_worker_is_not_ready(settings: Settings, demo: KnowledgeGraph) -> None:
    """Requests that need the shared state get a one-line 503 while Redis is gone (the rate limit, a conversation),
    /ready says 503 with the reason, /health still answers (liveness), and the event loop is not held up."""
    server = PrivateRedis().start()
    state = RedisState.connect(server.url(4))
    try:
        app = create_app(settings, ServeConfig(rate_limit=600), kgs={"demo": demo}, state=state)
        with background(app) as url:
            r = httpx.post(url + "/api/ask", json={"question": "Who discovered oxygen?", "strategy": "lexical"}, timeout=60)
            assert r.status_code == 200 and r.json()["turn"] == 1, r.text
            assert httpx.get(url + "/ready").json() == {"status": "ready", "worker": os.getpid()}
            server.stop()
            r = httpx.post(url + "/api/ask", json={"question": "Who discovered oxygen?", "strategy": "lexical"}, timeout=60)
            assert r.status_code == 503 and r.json()["detail"].startswith("the shared state store (Redis) failed"), r.text
            ready = httpx.get(url + "/ready", timeout=30)
            assert ready.status_code == 503 and ready.json()["detail"].startswith("the shared state store (Redis) failed")
            health = httpx.get(url + "/health", timeout=30)
            assert health.status_code == 200 and health.json()["active_runs"] is None
    finally:
        state.close()
        server.stop()


def test_redis_conversations_keep_their_bounds_and_concurrent_turns(redis_server: PrivateRedis, tmp_path: Path) -> None:
    """The store itself: count bound (least recently used out), expiry, owner, and two workers' copies adding a
    turn each to one conversation (neither is lost)."""
    settings = Settings.from_env({
        "SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_CONVERSATIONS_MAX": "2", "SPARQLNAV_CONVERSATIONS_TTL": "1.5",
    })  # fmt: skip
    state = RedisState.connect(redis_server.url(2))
    try:
        store = state.conversations(settings)
        first, second = store.create("me"), store.create("me")
        copy_a, copy_b = store.get(first.id, "me"), store.get(first.id, "me")  # two workers read the same one
        from sparqlnav.context import Turn

        assert store.add_turn(copy_a, Turn("q1", "SELECT 1", "r", "a1")) == 1
        assert store.add_turn(copy_b, Turn("q2", "SELECT 2", "r", "a2")) == 2
        assert [t.question for t in store.get(first.id, "me").turns] == ["q1", "q2"]
        with pytest.raises(PermissionError):
            store.get(first.id, "someone else")
        store.create("me")  # a third: the least recently used (`second`) goes
        with pytest.raises(KeyError):
            store.get(second.id, "me")
        assert len(store) == 2
        time.sleep(1.7)
        with pytest.raises(KeyError, match="expired"):
            store.get(first.id, "me")
        assert isinstance(Conversation.from_json(json.loads(json.dumps(first.to_json()))), Conversation)
    finally:
        state.close()
