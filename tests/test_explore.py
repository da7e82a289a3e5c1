"""The explore strategy end to end: the real LLM client over HTTP against a scripted OpenAI-compatible
server, the real toolkit over real Oxigraph stores (the demo KG and CK25)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scripted_llm import Call, Error, Hang, Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import demo_path
from sparqlnav.llm import LLMConfig
from sparqlnav.sparql.prefixes import declare_prefixes
from sparqlnav.strategies import make_strategy
from sparqlnav.strategies.explore import Explore, ExploreOptions, create, thought_of
from sparqlnav.trace import Event, Trace

WD = "https://demo.sparqlnav.org/entity/"
PRODI = "http://ld.company.org/prod-instances/"
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
        "max_retries": 0,
        "retry_backoff_s": 0,
    }
    values.update(overrides)
    return LLMConfig(**values)


def act(tool: str, thought: str = "", **arguments: Any) -> Reply:
    """A policy reply: a thought and one native tool call."""
    return Reply(text=thought, tool_calls=[Call(tool, arguments)])


def ask(
    server: ScriptedLLM,
    kg: KnowledgeGraph,
    question: str,
    script: list[Any],
    llm: dict[str, Any] | None = None,
    **options: Any,
) -> Answer:
    server.script(script)
    with create(config(server, **(llm or {})), **options) as strategy:
        answer = strategy.run(question, kg, Trace())
    answer.trace.finish()
    assert server.problems == []
    assert server.remaining == 0, "the run did not use the whole script"
    return answer


def kinds(answer: Answer, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in answer.trace.of_kind(kind)]  # type: ignore[arg-type]


def values(answer: Answer) -> set[str]:
    assert answer.results is not None
    return {t.value for t in answer.results.values()}


def messages(server: ScriptedLLM, index: int) -> list[dict[str, Any]]:
    return list(server.requests[index]["messages"])


def gold_demo(qid: str) -> set[str]:
    questions = json.loads((demo_path().parent / "questions.json").read_text(encoding="utf-8"))
    return {str(a) for a in next(q for q in questions if q["id"] == qid)["answer"]}


# ---------------------------------------------------------------- a full run


def test_full_run_on_the_demo_kg_reaches_the_gold_answer(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph, tmp_path: Path
) -> None:
    live: list[Event] = []
    scripted_llm.script(
        [
            act("search", "First find Marie Curie.", query="Marie Curie"),
            act("get_entity", "Read her page to see how awards are recorded.", id="wd:Q1060"),
            Reply(text='{"keep": ["wdt:P166", "wdt:P31"]}'),  # the pruning call
            act("search", "Find the prize's identifier.", query="Nobel Prize in Chemistry"),
            act("execute_sparql", "Read the date qualifier of that award.", query=CURIE_QUERY),
            act("stop", "The query returns the year."),
            Reply(text="Marie Curie received the Nobel Prize in Chemistry in 1911."),
        ]
    )
    strategy = make_strategy("explore", config(scripted_llm), prune_over=10)
    trace = Trace()
    trace.subscribe(live.append)
    answer = strategy.run(CURIE_QUESTION, demo, trace)

    assert answer.status == "answered" and answer.error is None
    assert values(answer) == gold_demo("demo-06") == {"1911"}
    assert answer.sparql is not None and answer.sparql.startswith(
        "PREFIX p: <https://demo.sparqlnav.org/prop/>"
    )
    assert answer.sparql.endswith(CURIE_QUERY)  # the model's query, made runnable on its own
    assert answer.text == "Marie Curie received the Nobel Prize in Chemistry in 1911."
    # Every identifier the query used had been observed: no guideline fired, no rollback.
    assert kinds(answer, "feedback") == [] and kinds(answer, "rollback") == []
    assert [a["tool"] for a in kinds(answer, "action")] == [
        "search",
        "get_entity",
        "search",
        "execute_sparql",
        "stop",
    ]
    assert next(t["text"] for t in kinds(answer, "thought")) == "First find Marie Curie."
    assert [c["purpose"] for c in kinds(answer, "llm_call")] == ["policy"] * 2 + ["prune"] + [
        "policy"
    ] * 3 + ["answer"]
    # The big entity page was pruned to what the model asked to keep.
    page = kinds(answer, "observation")[1]["text"]
    assert "wdt:P166 (award received)" in page and "pq:P585" in page and "1911" in page
    assert "wdt:P19" not in page and "properties left out as irrelevant" in page
    # The policy samples as SPINACH does; pruning and answering use the configured temperature.
    assert (
        scripted_llm.requests[0]["temperature"] == 1.0 and scripted_llm.requests[0]["top_p"] == 0.9
    )
    assert (
        scripted_llm.requests[2]["temperature"] == 0.0 and "top_p" not in scripted_llm.requests[2]
    )
    assert [t["function"]["name"] for t in scripted_llm.requests[0]["tools"]] == [
        "search",
        "get_entity",
        "get_property_examples",
        "execute_sparql",
        "stop",
        "give_up",
    ]
    # The answer prompt is grounded in the final result.
    assert "| 1911 |" in messages(scripted_llm, 6)[-1]["content"]
    # Usage, live delivery and JSONL.
    usage = answer.trace.finish()
    assert (usage.llm_calls, usage.input_tokens, usage.output_tokens) == (7, 70, 35)
    # Three for the entity page (out, qualifiers, incoming), one per search naming its hits' classes, one
    # execute_sparql: every query a tool runs is in the trace.
    assert usage.sparql_queries == 6
    assert [e.seq for e in live] == [e.seq for e in answer.trace.events]
    trace.save(tmp_path / "trace.jsonl")
    again = Trace.load(tmp_path / "trace.jsonl")
    assert [e.kind for e in again] == [e.kind for e in answer.trace]
    out = answer.to_json()
    assert out["results"]["results"]["bindings"][0]["year"]["value"] == "1911"
    assert out["extra"] == {"actions": 4, "actions_total": 5, "rollbacks": 0, "guidelines": {}}


def test_the_react_text_mode_runs_the_same_agent(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [
            Reply(text='Thought: Look oxygen up.\nAction: search({"query": "oxygen"})'),
            Reply(text='Thought: And the property.\nAction: search(query="discoverer")'),
            Reply(
                text=f"Thought: Now the query.\nAction: execute_sparql({json.dumps({'query': OXYGEN_QUERY})})"
            ),
            Reply(text="Thought: That is the answer.\nAction: stop()"),
            Reply(text="Oxygen was discovered by Carl Wilhelm Scheele and Joseph Priestley."),
        ],
        llm={"tool_mode": "react"},
    )
    assert answer.status == "answered"
    assert values(answer) == gold_demo("demo-01")
    assert [t["text"] for t in kinds(answer, "thought")][:2] == [
        "Look oxygen up.",
        "And the property.",
    ]
    first = scripted_llm.requests[0]
    assert "tools" not in first and "### execute_sparql" in first["messages"][0]["content"]
    # The history goes back as text: the second request carries the first observation.
    assert (
        "Observation (search):\nEntities matching 'oxygen'"
        in messages(scripted_llm, 1)[-1]["content"]
    )


# ---------------------------------------------------------------- rollbacks


def test_a_repeated_action_is_rolled_back(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [
            act("search", query="oxygen"),
            act("search", query="discoverer"),
            act("search", "Search again.", query="  oxygen "),  # the same action as step 1
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    (rollback,) = kinds(answer, "rollback")
    assert rollback["guideline"] == "repeated_action" and rollback["step"] == 3
    # The cycle began at step 1, so the state goes back to before step 1 (SPINACH §4.2).
    assert rollback["back_to"] == 0 and rollback["removed"] == 2
    assert "repeated an earlier action" in rollback["reason"]
    feedback = kinds(answer, "feedback")
    # The searches that showed wd:Q8 and wd:P61 were removed, but the query returned rows, which confirms
    # its identifiers: unseen_iri stays silent (issue 14).
    assert [f["id"] for f in feedback] == ["repeated_action"]
    assert "step 1" in feedback[0]["text"]
    # The repeated search never ran, and the state the model sees next is the one before the cycle,
    # plus a one-time note saying why its action was discarded.
    assert len(kinds(answer, "observation")) == 3
    after = messages(scripted_llm, 3)
    assert [m["role"] for m in after] == ["system", "user", "user"]
    assert after[-1]["content"].startswith(
        "Note: your last action was discarded and the state went back to before step 1 "
        "(2 step(s) removed). You already took"
    )
    assert messages(scripted_llm, 4)[-1]["role"] == "tool"  # the note is not repeated
    assert answer.extra["actions"] == 1 and answer.extra["actions_total"] == 5


def test_stop_without_results_is_rolled_back(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    wrong = "SELECT ?discoverer WHERE { ?discoverer wdt:P61 wd:Q8 }"  # direction reversed
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [
            act("search", query="oxygen"),
            act("search", query="discoverer"),
            act("execute_sparql", query=wrong),
            act("stop", "Nothing found, I give up."),
            act("get_property_examples", "Check the direction.", id="wdt:P61"),
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    assert "wd:Q8 wdt:P61 ?discoverer" in (answer.sparql or "")
    (rollback,) = kinds(answer, "rollback")
    assert rollback["guideline"] == "stop_without_results" and rollback["step"] == 4
    assert [f["id"] for f in kinds(answer, "feedback")] == ["empty_result", "stop_without_results"]
    note = messages(scripted_llm, 4)[-1]["content"]
    assert "the last query (step 3) returned no rows" in note
    assert answer.extra["rollbacks"] == 1 and answer.extra["guidelines"]["empty_result"] == 1


# ---------------------------------------------------------------- interpreter feedback


def test_malformed_call_and_wrong_arguments_get_guidelines(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [
            Reply(
                tool_calls=[Call("execute_sparql", '{"query": "SELECT ?x WHERE {')]
            ),  # broken JSON
            act("get_entity", entity="wd:Q8"),  # wrong argument name, and `id` missing
            act("get_wikidata_entry", id="Q8"),  # no such tool
            Reply(text="I think it was Priestley."),  # no tool call at all
            act("search", query="oxygen"),
            act("search", query="discoverer"),
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    fired = [(f["step"], f["id"]) for f in kinds(answer, "feedback")]
    assert fired == [
        (1, "malformed_call"),
        (2, "missing_argument"),
        (2, "wrong_argument"),
        (3, "unknown_tool"),
        (4, "no_action"),
    ]
    # Nothing was run for those steps: only the search's class lookup and the last query reached the engine.
    ran = [s["query"].split("SELECT")[1] for s in kinds(answer, "sparql")]
    assert ran[-1] == OXYGEN_QUERY.split("SELECT")[1] and len(ran) == 2 and "VALUES ?s" in ran[0]
    # The guideline is the observation the model gets back, on the tool call it made.
    second = messages(scripted_llm, 1)
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == json.dumps(
        {"malformed_arguments": '{"query": "SELECT ?x WHERE {'}
    )
    assert second[-1]["role"] == "tool" and "Guideline (malformed_call)" in second[-1]["content"]
    third = messages(scripted_llm, 2)[-1]["content"]
    assert "The action was not run." in third and "get_entity needs the argument id" in third
    assert "unknown argument 'entity'" in third
    fifth = messages(scripted_llm, 4)
    assert fifth[-2] == {"role": "assistant", "content": "I think it was Priestley."}
    assert fifth[-1]["role"] == "user" and "Guideline (no_action)" in fifth[-1]["content"]


# ---------------------------------------------------------------- the LLM misbehaving


def test_429_then_200_is_retried(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [
            Error(429, "rate limited", headers={"Retry-After": "0"}),
            act("search", query="oxygen"),
            act("search", query="discoverer"),
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
        llm={"max_retries": 2},
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    assert len(scripted_llm.requests) == 6
    assert scripted_llm.requests[0] == scripted_llm.requests[1]  # the same request, sent again
    # The refused attempt was served too: it is counted, as its own request marked attempt 1.
    assert answer.trace.finish().llm_calls == 6
    first, retried = kinds(answer, "llm_call")[:2]
    assert (first["attempt"], first["outcome"], first["status_code"]) == (1, "http_error", 429)
    assert (retried["attempt"], retried["outcome"]) == (2, "ok")


def test_a_server_that_never_answers_ends_with_a_clear_error(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [act("search", query="oxygen"), Hang()],
        llm={"timeout_s": 0.5},
    )
    assert answer.status == "error" and answer.results is None
    assert answer.error is not None and "\n" not in answer.error
    assert "failed after 1 attempt(s): no answer within 0.5 s" in answer.error
    assert kinds(answer, "error")[0]["message"] == answer.error
    assert answer.text.startswith("The LLM failed:")


def test_a_server_error_ends_the_run_and_keeps_the_best_query(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [act("execute_sparql", query=OXYGEN_QUERY), Error(401, "invalid api key")],
    )
    assert answer.status == "error" and "HTTP 401: invalid api key" in (answer.error or "")
    assert values(answer) == gold_demo("demo-01")


# ---------------------------------------------------------------- budgets


def test_budget_exhaustion_returns_the_best_answer_so_far(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen, and where were they born?",
        [
            act("execute_sparql", query=OXYGEN_QUERY),
            act("search", query="place of birth"),
            act(
                "execute_sparql",
                query="SELECT ?d ?place WHERE { wd:Q8 wdt:P61 ?d . ?d wdt:P999 ?place }",
            ),
            Reply(text="Scheele and Priestley discovered oxygen."),  # the answer call
        ],
        max_actions=3,
    )
    assert answer.status == "budget_exhausted" and answer.error is None
    assert values(answer) == gold_demo("demo-01")  # the last query that returned rows
    assert "wd:Q8 wdt:P61 ?discoverer" in (answer.sparql or "")
    assert answer.text == (
        "Best answer so far (the budget of 3 actions is used up; not confirmed by the agent): "
        "Scheele and Priestley discovered oxygen."
    )
    assert answer.extra["stopped"] == "the budget of 3 actions is used up"
    assert kinds(answer, "answer")[0]["status"] == "budget_exhausted"


def test_the_total_budget_counts_rolled_back_actions(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        "Who discovered oxygen?",
        [act("search", query="oxygen")] + [act("search", query="oxygen")] * 3,
        max_total_actions=4,
    )
    assert answer.status == "budget_exhausted" and answer.sparql is None and answer.results is None
    # Each repetition empties the state, so the search after it is a fresh action again (§4.2).
    assert [r["removed"] for r in kinds(answer, "rollback")] == [1, 1]
    assert answer.extra["actions_total"] == 4 and answer.extra["actions"] == 0
    assert answer.text == (
        "No answer: the budget of 4 actions in total (with rollbacks) is used up "
        "before any query returned a result."
    )


def test_the_run_time_budget_stops_the_run(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    answer = ask(scripted_llm, demo, "Who discovered oxygen?", [], max_seconds=0.0)
    assert answer.status == "budget_exhausted" and "LLM time budget used up" in answer.text
    assert scripted_llm.requests == []


# ---------------------------------------------------------------- context compaction


def test_older_observations_are_compacted_only_when_needed(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    script = [
        act("get_entity", id="wd:Q1060"),
        act("get_entity", id="wd:Q1008"),
        act("get_entity", id="wd:Q8"),
        act("execute_sparql", query=OXYGEN_QUERY),
        act("stop"),
        Reply(text="Scheele and Priestley."),
    ]
    ask(scripted_llm, demo, "Who discovered oxygen?", list(script), keep_recent=1, prune_over=1000)
    roomy = [json.dumps(r["messages"]) for r in scripted_llm.requests]
    assert all("observation shortened" not in r for r in roomy)
    with ScriptedLLM() as tight_server:
        ask(
            tight_server,
            demo,
            "Who discovered oxygen?",
            list(script),
            keep_recent=1,
            prune_over=1000,
            max_context_tokens=600,
        )
        tight = [r["messages"] for r in tight_server.requests]
    # The fourth request holds three pages; only the latest stays whole.
    tools = [m["content"] for m in tight[3] if m["role"] == "tool"]
    assert (
        len(tools) == 3
        and "observation shortened" in tools[0]
        and "observation shortened" in tools[1]
    )
    assert (
        "observation shortened" not in tools[2] and "wdt:P61 (discoverer or inventor)" in tools[2]
    )
    assert len(json.dumps(tight[3])) < len(roomy[3])


# ---------------------------------------------------------------- a KG nobody wrote for the agent


CK25_RUNS: dict[int, tuple[str, list[Reply]]] = {
    1: (
        "In which department is Ms. Brant?",
        [
            act("search", "Find Ms. Brant.", query="Brant"),
            act(
                "get_entity",
                "Karen Brant is the only woman.",
                id="prodi:empl-Karen.Brant%40company.org",
            ),
            act("search", "Check the department class.", query="department"),
            act(
                "execute_sparql",
                query="SELECT ?department WHERE {\n  prodi:empl-Karen.Brant%40company.org pv:memberOf ?department .\n"
                "  ?department a pv:Department .\n}",
            ),
            act("stop"),
            Reply(text="Ms. Brant is in the Engineering department."),
        ],
    ),
    2: (
        "What is the telephone of Baldwin Dirksen?",
        [
            act("search", query="Baldwin Dirksen"),
            act("search", query="telephone"),
            act(
                "execute_sparql",
                query="SELECT ?phone WHERE { <http://ld.company.org/prod-instances/empl-Baldwin.Dirksen%40company.org> pv:phone ?phone }",
            ),
            act("stop"),
            Reply(text="His number is +49-6200-33069465."),
        ],
    ),
    3: (
        "Who is the manager of Heinrich Hoch?",
        [
            act("search", query="Heinrich Hoch"),
            act("get_property_examples", "How is a manager linked?", id="pv:hasManager"),
            act(
                "execute_sparql",
                query="SELECT ?manager WHERE { prodi:empl-Heinrich.Hoch%40company.org pv:hasManager ?manager }",
            ),
            act("stop"),
            Reply(text="Waldtraud Kuttner."),
        ],
    ),
}


@pytest.mark.data
@pytest.mark.parametrize("qid", [1, 2, 3])
def test_ck25_questions_1_to_3(
    qid: int, scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, data_dir: Path
) -> None:
    question, script = CK25_RUNS[qid]
    gold = json.loads((data_dir / "ck25" / "ck25_true_result_set.json").read_text(encoding="utf-8"))
    answer = ask(scripted_llm, ck25, question, list(script))
    assert answer.status == "answered"
    assert values(answer) == set(gold[f"ck25:{qid}-en"])
    assert kinds(answer, "feedback") == []  # every identifier came from an observation
    system = messages(scripted_llm, 0)[0]["content"]
    assert "pv: <http://ld.company.org/prod-vocab/>" in system and "Wikidata" not in system


# ---------------------------------------------------------------- helpers and the CLI


def test_helpers(demo: KnowledgeGraph) -> None:
    assert thought_of("Thought: look it up\nAction: search({})") == "look it up"
    assert thought_of("just text") == "just text"
    q = declare_prefixes(
        "PREFIX wd: <urn:x:>\nSELECT * { wd:Q1 wdt:P31 ?c ; rdfs:label 'wdt:no' }", demo.prefixes.mapping
    ).query
    assert q.splitlines()[:2] == [
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>",
        "PREFIX wdt: <https://demo.sparqlnav.org/prop/direct/>",
    ]
    assert "PREFIX wd: <urn:x:>" in q and q.count("PREFIX wd:") == 1
    # Escaped names are written out: Oxigraph rejects some valid ones (a dot on both sides of %40).
    escaped = declare_prefixes(
        "PREFIX pi: <urn:p:>\nSELECT * { pi:empl-Karen.Brant%40company.org wdt:P1 pi:x%40y.org. }",
        demo.prefixes.mapping,
    ).query
    assert escaped == (
        "PREFIX wdt: <https://demo.sparqlnav.org/prop/direct/>\nPREFIX pi: <urn:p:>\n"
        "SELECT * { <urn:p:empl-Karen.Brant%40company.org> wdt:P1 <urn:p:x%40y.org>. }"
    )
    assert demo.endpoint.query(escaped).outcome.value == "empty"
    with pytest.raises(TypeError, match="max_steps"):
        create(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"), max_steps=3)
    assert isinstance(create(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1")), Explore)
    assert ExploreOptions().max_actions == 15 and ExploreOptions().max_total_actions == 30


@pytest.mark.slow
def test_cli_ask_explore_json_and_live_steps(scripted_llm: ScriptedLLM, sn_home: Path) -> None:
    script = [
        act("search", "Look oxygen up.", query="oxygen"),
        act("search", query="discoverer"),
        act("search", query="oxygen"),
        act("execute_sparql", query=OXYGEN_QUERY),
        act("stop"),
        Reply(text="Scheele and Priestley."),
    ]
    env = {
        **os.environ,
        "SPARQLNAV_HOME": str(sn_home),
        "OPENAI_BASE_URL": scripted_llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "SPARQLNAV_LLM_MODEL": "scripted-model",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    cmd = [
        sys.executable,
        "-m",
        "sparqlnav",
        "ask",
        "Who discovered oxygen?",
        "--strategy",
        "explore",
    ]
    scripted_llm.script(script)
    done = subprocess.run(
        [*cmd, "--json"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["strategy"] == "explore" and out["answer"] == "Scheele and Priestley."
    assert {b["discoverer"]["value"] for b in out["results"]["results"]["bindings"]} == gold_demo(
        "demo-01"
    )
    assert out["usage"]["llm_calls"] == 6 and out["usage"]["sparql_queries"] == 2  # the search's classes, the query
    assert [e["kind"] for e in out["trace"]].count("rollback") == 1
    scripted_llm.script(script)
    shown = subprocess.run([*cmd, "-v"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "thought Look oxygen up." in shown.stderr
    assert 'action search({"query": "oxygen"})' in shown.stderr
    assert "rollback the model repeated an earlier action" in shown.stderr
    assert "Scheele and Priestley." in shown.stdout
