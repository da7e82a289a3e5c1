"""Usage is recorded by the LLM client, one `llm_call` event per request it sends: a run's counted LLM
calls equal the requests the scripted server answered, retries and unusable replies included. Real
client over HTTP against tests/scripted_llm.py, real strategies over the demo KG in real Oxigraph."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from scripted_llm import Call, Error, Hang, Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import (
    CallRecord,
    LLMClient,
    LLMConfig,
    Message,
    ModelPrice,
    trace_recorder,
)
from sparqlnav.question.linking import link
from sparqlnav.retrieval.examples import Example
from sparqlnav.retrieval.kg_index import kg_schema
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import example_doc, shape_docs
from sparqlnav.strategies import explore, retrieve
from sparqlnav.trace import Trace

WD = "https://demo.sparqlnav.org/entity/"
CURIE_QUESTION = "When did Marie Curie receive the Nobel Prize in Chemistry?"
CURIE_QUERY = (
    "SELECT ?year WHERE {\n  wd:Q1060 p:P166 ?statement .\n  ?statement ps:P166 wd:Q423 ;\n"
    "             pq:P585 ?date .\n  BIND(YEAR(?date) AS ?year)\n}"
)
OXYGEN_QUERY = "SELECT ?discoverer WHERE { wd:Q8 wdt:P61 ?discoverer }"


def config(server: ScriptedLLM, **overrides: Any) -> LLMConfig:
    values: dict[str, Any] = {
        "model": "scripted-model",
        "base_url": server.base_url,
        "api_key": "test-key",
        "timeout_s": 10,
        "max_retries": 2,
        "retry_backoff_s": 0,
    }
    values.update(overrides)
    return LLMConfig(**values)


def act(tool: str, thought: str = "", **arguments: Any) -> Reply:
    return Reply(text=thought, tool_calls=[Call(tool, arguments)])


def calls(trace: Trace) -> list[dict[str, Any]]:
    return [e.data for e in trace.of_kind("llm_call")]


def assert_counts_match(answer: Answer, server: ScriptedLLM, served: int) -> None:
    """The run counted exactly the requests the server answered, one event each."""
    assert server.problems == [] and server.remaining == 0
    assert server.served == served
    assert answer.trace.usage.llm_calls == server.served
    assert len(answer.trace.of_kind("llm_call")) == server.served


def run_explore(
    server: ScriptedLLM,
    kg: KnowledgeGraph,
    question: str,
    llm: dict[str, Any] | None = None,
    **options: Any,
) -> Answer:
    with explore.create(config(server, **(llm or {})), **options) as strategy:
        return strategy.run(question, kg, Trace())


# ---------------------------------------------------------------- explore


def test_explore_counts_prune_calls_and_a_prune_whose_output_fails(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    scripted_llm.script(
        [
            act("search", query="Marie Curie"),
            act("get_entity", id="wd:Q1060"),
            Reply(text='{"keep": ["wdt:P166", "wdt:P31"]}', input_tokens=70, output_tokens=8),
            act("get_entity", id="wd:Q423"),
            Reply(text="I would keep the awards, probably.", input_tokens=60, output_tokens=7),
            act("execute_sparql", query=CURIE_QUERY),
            act("stop"),
            Reply(text="In 1911."),
        ]
    )
    answer = run_explore(scripted_llm, demo, CURIE_QUESTION, prune_over=1)

    assert answer.status == "answered" and answer.text == "In 1911."
    assert_counts_match(answer, scripted_llm, 8)
    recorded = calls(answer.trace)
    assert [c["purpose"] for c in recorded] == ["policy"] * 2 + ["prune", "policy", "prune"] + [
        "policy"
    ] * 2 + ["answer"]
    assert [c["outcome"] for c in recorded if c["purpose"] == "prune"] == ["ok", "unparseable"]
    failed = recorded[4]
    assert (failed["input_tokens"], failed["output_tokens"], failed["served"]) == (60, 7, True)
    assert "expected a JSON object" in failed["error"]
    assert any("entity not pruned" in str(e.data["message"]) for e in answer.trace.of_kind("info"))
    # The failed prune's tokens were spent, so usage has them: 6 policy/answer replies of 10+5.
    usage = answer.trace.usage
    assert (usage.input_tokens, usage.output_tokens) == (6 * 10 + 70 + 60, 6 * 5 + 8 + 7)


def test_explore_counts_a_500_and_a_429_each_as_a_request(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    scripted_llm.script(
        [
            Error(500, "overloaded"),
            act("search", query="oxygen"),
            Error(429, "slow down", headers={"Retry-After": "0"}),
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ]
    )
    prices = {"scripted-model": ModelPrice(input=2.0, output=8.0)}
    answer = run_explore(scripted_llm, demo, "Who discovered oxygen?", llm={"prices": prices})

    assert answer.status == "answered"
    assert_counts_match(answer, scripted_llm, 6)
    recorded = calls(answer.trace)
    assert [(c["attempt"], c["outcome"], c.get("status_code")) for c in recorded] == [
        (1, "http_error", 500),
        (2, "ok", None),
        (1, "http_error", 429),
        (2, "ok", None),
        (1, "ok", None),
        (1, "ok", None),
    ]
    assert "HTTP 500: overloaded" in recorded[0]["error"]
    assert answer.trace.usage.input_tokens == 4 * 10  # errors carry no tokens
    # ... and cost a known nothing, so a priced run's cost stays trustworthy.
    assert all(c["cost_known"] for c in recorded) and recorded[0]["cost_usd"] == 0.0
    assert answer.trace.usage.cost_usd == pytest.approx(4 * (10 * 2.0 + 5 * 8.0) / 1e6)


def test_concurrent_runs_on_shared_clients_each_record_their_own_requests(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        if "tools" not in body:
            return Reply(text="Scheele and Priestley.")
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return act("execute_sparql", query=OXYGEN_QUERY) if turns == 0 else act("stop")

    runs = 6
    scripted_llm.script([respond] * (3 * runs))
    with explore.create(config(scripted_llm)) as strategy, ThreadPoolExecutor(3) as pool:
        answers = list(
            pool.map(lambda _: strategy.run("Who discovered oxygen?", demo, Trace()), range(runs))
        )
    assert scripted_llm.served == 3 * runs
    for answer in answers:
        assert answer.status == "answered"
        assert [c["purpose"] for c in calls(answer.trace)] == ["policy", "policy", "answer"]
        assert answer.trace.usage.llm_calls == 3
    assert sum(a.trace.usage.llm_calls for a in answers) == scripted_llm.served


# ---------------------------------------------------------------- retrieve


@pytest.fixture(scope="module")
def demo_index(demo: KnowledgeGraph) -> Iterator[tuple[LocalIndex, Any]]:
    schema = kg_schema(demo)
    with LocalIndex(None, None) as index:
        # One example, so the decomposition runs (retrieve skips it when the index holds none).
        any_count = Example("any", "How many statements are there?", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        index.build([*shape_docs(schema, labels=demo.names.labels_of(schema.class_names)), example_doc(any_count)])
        yield index, schema


def test_retrieve_counts_decompose_repair_generate_fix_and_explain(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph, demo_index: tuple[LocalIndex, Any]
) -> None:
    index, schema = demo_index
    wrong = "SELECT ?discoverer WHERE { wd:Q8 wdt:P99999 ?discoverer }"
    scripted_llm.script(
        [
            Reply("Sub-questions: who discovered it.", input_tokens=50, output_tokens=9),
            Reply(json.dumps({"sub_questions": ["discoverer of oxygen"], "classes": ["chemical element"]})),
            Error(503, "busy"),
            Reply(f"```sparql\n{wrong}\n```", input_tokens=300, output_tokens=20),
            Reply(f"```sparql\n{OXYGEN_QUERY}\n```", input_tokens=400, output_tokens=20),
            Reply("Carl Wilhelm Scheele and Joseph Priestley.", input_tokens=100, output_tokens=12),
        ]
    )
    strategy = retrieve.create(config(scripted_llm), index=index, schema=schema)
    answer = strategy.run("Who discovered oxygen?", demo, Trace())

    assert answer.status == "answered" and answer.text.startswith("Carl Wilhelm Scheele")
    assert_counts_match(answer, scripted_llm, 6)
    recorded = calls(answer.trace)
    assert [(c["purpose"], c["attempt"], c["outcome"]) for c in recorded] == [
        ("decompose", 1, "unparseable"),
        ("decompose", 1, "ok"),  # the repair is a new call, not a retry
        ("generate", 1, "http_error"),
        ("generate", 2, "ok"),
        ("fix 1", 1, "ok"),
        ("explain", 1, "ok"),
    ]
    assert answer.extra["fixes"] == 1
    assert answer.trace.usage.input_tokens == 50 + 10 + 300 + 400 + 100


# ---------------------------------------------------------------- linking


def test_linking_records_its_llm_requests_through_the_client(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    mentions = {"entities": [{"name": "Madame Curie", "description": "Polish-born French physicist"}]}
    scripted_llm.script([Error(500), Reply(json.dumps(mentions), input_tokens=321, output_tokens=17)])
    trace = Trace()
    with LLMClient(config(scripted_llm)) as client:
        result = link(demo, "What did Madame Curie discover?", llm=client, trace=trace)
    assert result.entities[0].iri == WD + "Q1060"
    assert scripted_llm.served == 2
    assert trace.usage.llm_calls == len(trace.of_kind("llm_call")) == scripted_llm.served
    assert [(c["purpose"], c["attempt"], c["outcome"]) for c in calls(trace)] == [
        ("entity mentions", 1, "http_error"),
        ("entity mentions", 2, "ok"),
    ]
    assert trace.usage.input_tokens == 321


# ---------------------------------------------------------------- what is not a served request


def test_a_timeout_and_a_cache_hit_are_recorded_but_not_counted(
    scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    scripted_llm.script([Hang(), Reply("ok", input_tokens=40, output_tokens=4)])
    question = [Message.user("Who discovered oxygen?")]
    records: list[CallRecord] = []
    trace = Trace()
    record = trace_recorder(trace)

    def both(call: CallRecord) -> None:
        records.append(call)
        record(call)

    cfg = config(scripted_llm, timeout_s=0.5, cache_dir=tmp_path / "cache")
    with LLMClient(cfg) as client:
        client.chat(question, purpose="first", record=both)
        client.chat(question, purpose="again", record=both)
    assert [(r.purpose, r.attempt, r.outcome, r.served) for r in records] == [
        ("first", 1, "timeout", False),
        ("first", 2, "ok", True),
        ("again", 1, "cached", False),
    ]
    assert records[2].input_tokens == 40  # what the replayed reply cost once, for information
    assert scripted_llm.served == 1 and len(scripted_llm.requests) == 2
    assert trace.usage.llm_calls == scripted_llm.served
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (40, 4)
    assert [e.data["cached"] for e in trace.of_kind("llm_call")] == [False, False, True]


# ---------------------------------------------------------------- the CLI's usage


def test_ask_json_usage_equals_the_requests_served(scripted_llm: ScriptedLLM, sn_home: Path) -> None:
    scripted_llm.script(
        [
            Error(500, "overloaded", headers={"Retry-After": "0"}),
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ]
    )
    env = {
        **os.environ,
        "SPARQLNAV_HOME": str(sn_home),
        "OPENAI_BASE_URL": scripted_llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "SPARQLNAV_LLM_MODEL": "scripted-model",
    }
    cmd = [sys.executable, "-m", "sparqlnav", "ask", "Who discovered oxygen?", "-s", "explore", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["answer"] == "Scheele and Priestley."
    assert scripted_llm.served == 4
    assert out["usage"]["llm_calls"] == scripted_llm.served
    assert sum(e["kind"] == "llm_call" for e in out["trace"]) == scripted_llm.served
