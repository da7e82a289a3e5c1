"""LLM waits end (issue 15 item 3): real servers on 127.0.0.1 that never answer, or answer one byte at a
time, against the real client, strategies, eval runner and `sparqlnav eval` process."""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from io import BufferedIOBase
from pathlib import Path

import pytest

from sparqlnav.datasets import load_dataset
from sparqlnav.evaluation.gold import freeze_gold
from sparqlnav.evaluation.runner import run_eval
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import demo_path
from sparqlnav.llm import BudgetExceeded, CallRecord, LLMClient, LLMConfig, LLMError, Message
from sparqlnav.settings import ConfigError, Settings
from sparqlnav.strategies import explore
from sparqlnav.trace import Trace

QUESTION = [Message.user("Say hello.")]
HANG_GUARD_S = 30.0  # far above every deadline here: only catches a wait that does not end
COMPLETION = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
    }
).encode()


class StallingLLM:
    """An HTTP server that reads each request in full, then never answers (`drip_every=None`) or sends a
    valid chat completion one byte every `drip_every` seconds."""

    def __init__(self, drip_every: float | None = None) -> None:
        self.drip_every = drip_every
        self.requests = 0
        self.bytes_sent = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                length = 0
                while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                self.rfile.read(length)
                with owner._lock:
                    owner.requests += 1
                owner.answer(self.wfile)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(self, out: BufferedIOBase) -> None:
        """Hang until stopped, or drip the whole response."""
        if self.drip_every is None:
            self.stopping.wait(120)
            return
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(COMPLETION)}\r\n\r\n"
        for byte in head.encode() + COMPLETION:
            if self.stopping.wait(self.drip_every):
                return
            try:
                out.write(bytes([byte]))
            except OSError:
                return  # the client gave up and closed the connection
            with self._lock:
                self.bytes_sent += 1

    def __enter__(self) -> StallingLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def hanging() -> Iterator[StallingLLM]:
    """A real LLM server that reads requests and never answers."""
    with StallingLLM() as server:
        yield server


def config(server: StallingLLM, **extra: object) -> LLMConfig:
    return LLMConfig.model_validate(
        {"model": "m", "base_url": server.base_url, "api_key": "k", "retry_backoff_s": 0, **extra}
    )


def test_a_hanging_server_ends_at_each_deadline_with_the_attempts_counted(hanging: StallingLLM) -> None:
    records: list[CallRecord] = []
    started = time.monotonic()
    with LLMClient(config(hanging, timeout_s=0.8, max_retries=2)) as client, pytest.raises(LLMError) as info:
        client.chat(QUESTION, record=records.append)
    assert time.monotonic() - started < HANG_GUARD_S
    assert not isinstance(info.value, BudgetExceeded)
    assert "failed after 3 attempt(s): no answer within 0.8 s" in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.attempts == 3 and hanging.requests == 3
    assert [(r.attempt, r.outcome) for r in records] == [(1, "timeout"), (2, "timeout"), (3, "timeout")]


def test_a_server_dripping_bytes_trips_the_overall_deadline() -> None:
    # One byte every 0.2 s: each read is quick, so a per-read timeout of 1.5 s would never trip.
    with StallingLLM(drip_every=0.2) as drip:
        records: list[CallRecord] = []
        started = time.monotonic()
        with (
            LLMClient(config(drip, timeout_s=1.5, max_retries=0)) as client,
            pytest.raises(LLMError, match=r"failed after 1 attempt\(s\): no answer within 1\.5 s") as info,
        ):
            client.chat(QUESTION, record=records.append)
        assert time.monotonic() - started < HANG_GUARD_S
        assert drip.bytes_sent >= 3  # the server was sending all along
        assert drip.bytes_sent < len(COMPLETION)  # and the client left before the end
        assert info.value.attempts == 1 and drip.requests == 1
        assert [r.outcome for r in records] == ["timeout"]


def test_a_dripped_answer_within_the_deadline_still_arrives() -> None:
    with StallingLLM(drip_every=0.001) as drip, LLMClient(config(drip, timeout_s=20, max_retries=0)) as client:
        assert client.chat(QUESTION).text == "hello"
    assert drip.bytes_sent > len(COMPLETION)


def test_the_budget_caps_retries(hanging: StallingLLM) -> None:
    # Ten retries of 1 s each would take 11 s; the 2.5 s budget ends them after about three.
    records: list[CallRecord] = []
    with (
        LLMClient(config(hanging, timeout_s=1, max_retries=10, budget_s=2.5)) as client,
        pytest.raises(BudgetExceeded, match="LLM time budget") as info,
    ):
        client.chat(QUESTION, record=records.append)
    assert 2 <= info.value.attempts <= 4
    assert hanging.requests == info.value.attempts == len(records)
    assert {r.outcome for r in records} == {"timeout"}
    assert sum(r.latency_s for r in records) < 2.5 + 0.5  # the attempts' own waits fit in the budget


def test_explore_gets_the_configured_budget_per_question(hanging: StallingLLM, demo: KnowledgeGraph) -> None:
    agent = explore.create(config(hanging, timeout_s=1, max_retries=10, budget_s=2))
    try:
        answer = agent.run("Who discovered oxygen?", demo, Trace())
    finally:
        agent.close()
    assert answer.status == "budget_exhausted"
    assert answer.text.startswith("No answer: LLM time budget would run out while retrying")
    assert 2 <= hanging.requests <= 3


def test_the_waits_are_settings() -> None:
    base = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "SPARQLNAV_LLM_MODEL": "m"}
    default = Settings.from_env(base).llm
    assert default is not None and (default.timeout_s, default.max_retries, default.budget_s) == (120.0, 4, 300.0)
    env = {**base, "SPARQLNAV_LLM_TIMEOUT": "7.5", "SPARQLNAV_LLM_RETRIES": "1", "SPARQLNAV_LLM_BUDGET": "90"}
    llm = Settings.from_env(env).llm
    assert llm is not None and (llm.timeout_s, llm.max_retries, llm.budget_s) == (7.5, 1, 90.0)
    for name, bad in [("SPARQLNAV_LLM_TIMEOUT", "nan"), ("SPARQLNAV_LLM_RETRIES", "-1"), ("SPARQLNAV_LLM_BUDGET", "0")]:
        with pytest.raises(ConfigError, match=name):
            Settings.from_env({**base, name: bad})


def test_eval_stops_after_the_same_llm_error_on_consecutive_questions(
    hanging: StallingLLM, demo: KnowledgeGraph, tmp_path: Path
) -> None:
    questions = load_dataset(demo_path().with_name("questions.json")).questions
    assert len(questions) >= 6
    golds = freeze_gold(questions, demo.endpoint, None)
    out = tmp_path / "run"
    cfg = config(hanging, timeout_s=0.5, max_retries=0)
    summary = run_eval(questions, golds, demo, [explore.create(cfg)], out, workers=1, plots=False, stop_after=3)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 3  # three questions on disk, then no more
    # One wait per question: the three, plus at most the one the worker had taken meanwhile (not recorded).
    assert 3 <= hanging.requests <= 4
    assert summary["complete"] is False
    assert "3 questions in a row failed on the same LLM error (no answer within 0.5 s)" in summary["stopped"]
    assert "stopped early" in (out / "report.md").read_text()
    # Resumed with the early stop off: every remaining question is asked, and the stop is forgotten.
    again = run_eval(questions, golds, demo, [explore.create(cfg)], out, workers=1, plots=False, stop_after=0)
    assert again["stopped"] is None and again["counts"]["done"] == len(questions)
    assert hanging.requests >= len(questions)


@pytest.mark.slow
def test_the_eval_command_stops_a_dead_llm_and_says_so(hanging: StallingLLM, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SPARQLNAV_HOME": str(tmp_path / "home"),
        "OPENAI_BASE_URL": hanging.base_url,
        "OPENAI_API_KEY": "k",
        "SPARQLNAV_LLM_MODEL": "m",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "eval", str(demo_path().with_name("questions.json")), "--kg", "demo",
         "--strategy", "explore", "--llm-timeout", "0.5", "--llm-retries", "1", "-j", "1", "--out", str(out),
         "--no-plots"],
        capture_output=True, text=True, env=env, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "stopped early: 3 questions in a row failed on the same LLM error (no answer within 0.5 s)" in done.stderr
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 3
    assert 3 * 2 <= hanging.requests <= 4 * 2  # each question: the request and its one retry
    assert json.loads((out / "summary.json").read_text())["stopped"].startswith("stopped early")
