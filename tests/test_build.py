"""The build strategy (QueryAgent) end to end: the real LLM client over HTTP against a scripted OpenAI-compatible
server, the real builder tools over the CK25 graph in a real Oxigraph store, and the faces that run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.retrieval.embed import default_embedder
from sparqlnav.strategies import available, make_strategy
from sparqlnav.strategies.builder import Builder, create, wanted_aggregations
from sparqlnav.tools.digest import Digests
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace

PV = "http://ld.company.org/prod-vocab/"
PRODI = "http://ld.company.org/prod-instances/"
HOCH = f"<{PRODI}empl-Heinrich.Hoch%40company.org>"
KUTTNER = f"{PRODI}empl-Waldtraud.Kuttner%40company.org"
OSCILLATOR = "prodi:prod-cat-Oscillator"


def config(server: ScriptedLLM, **overrides: Any) -> LLMConfig:
    values: dict[str, Any] = {"model": "scripted-model", "base_url": server.base_url, "api_key": "k",
                              "timeout_s": 10, "max_retries": 0, "retry_backoff_s": 0}  # fmt: skip
    return LLMConfig(**{**values, **overrides})


def act(tool: str, thought: str = "", **arguments: Any) -> Reply:
    """A policy reply: a thought and one native tool call."""
    return Reply(text=thought, tool_calls=[Call(tool, arguments)])


DIGESTS = Digests()  # one holder for the module: each KG's schema digest is made once


def ask(server: ScriptedLLM, kg: KnowledgeGraph, question: str, script: list[Any], **options: Any) -> Answer:
    server.script(script)
    options.setdefault("digests", DIGESTS)
    with create(config(server), embedder=None, **options) as strategy:
        answer = strategy.run(question, kg, Trace())
    answer.trace.finish()
    assert server.problems == []
    assert server.remaining == 0, "the run did not use the whole script"
    return answer


def tools_called(answer: Answer) -> list[str]:
    return [e.data["tool"] for e in answer.trace.of_kind("action")]


def feedback_by_step(answer: Answer) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for e in answer.trace.of_kind("feedback"):
        out.setdefault(e.data["step"], []).append(e.data["id"])
    return out


def values(answer: Answer) -> set[str]:
    assert answer.results is not None
    return {t.value for t in answer.results.values()}


def gold(kg: KnowledgeGraph, query: str) -> set[str]:
    result = kg.endpoint.query(f"PREFIX pv: <{PV}>\n{query}")
    assert result.ok and result.table is not None and not result.table.is_empty
    return {t.value for t in result.table.values()}


MANAGER = [
    act("get_relations", "Look around Heinrich Hoch.", target=HOCH),
    act("add_fact", "pv:hasManager leads to his manager.", head=HOCH, relation="pv:hasManager", tail="?manager"),
    act("set_answer", "The manager is the answer.", var="?manager"),
    act("execute", "The query returns his manager."),
    Reply(text="Heinrich Hoch's manager is Waldtraud Kuttner."),
]


# ---------------------------------------------------------------- the four question paths


def test_manager_question_through_relations_fact_answer_execute(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    answer = ask(scripted_llm, ck25, "Who is the manager of Heinrich Hoch?", MANAGER)
    assert answer.status == "answered" and answer.strategy == "build"
    assert values(answer) == {KUTTNER} == gold(ck25, f"SELECT ?m WHERE {{ {HOCH} pv:hasManager ?m }}")
    assert tools_called(answer) == ["get_relations", "add_fact", "set_answer", "execute"]
    assert answer.text == "Heinrich Hoch's manager is Waldtraud Kuttner."
    assert answer.sparql is not None and "SELECT DISTINCT ?manager" in answer.sparql
    assert feedback_by_step(answer) == {}  # every step was right: ERASER stays silent
    # The first message names the linked entity; every step ran the draft and showed it.
    first = scripted_llm.requests[0]["messages"][1]["content"]
    assert first.startswith("Question: Who is the manager of Heinrich Hoch?") and HOCH in first  # printed whole: the engine misreads its compact form
    observations = [e.data["text"] for e in answer.trace.of_kind("observation")]
    assert "→ pv:hasManager (has manager)" in observations[0] and "10 found" in observations[0]
    assert "It returned 1 row(s)" in observations[1] and "(Waldtraud Kuttner)" in observations[1]
    u = answer.usage
    assert (u.llm_calls, u.sparql_queries) == (5, 5)  # 4 steps + the answer; 2 relation lookups + 3 draft runs


def test_count_question_through_add_count(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    sensor, switch = "prodi:prod-cat-Sensor", "prodi:prod-cat-Switch"
    answer = ask(
        scripted_llm,
        ck25,
        "How many Sensor Switches do we offer?",
        [
            act("get_relations", target=sensor),
            act("add_fact", head="?product", relation="pv:hasCategory", tail=sensor),
            act("add_fact", head="?product", relation="pv:hasCategory", tail=switch),
            act("add_count", var="?product"),
            act("execute"),
            Reply(text="We offer 3 sensor switches."),
        ],
    )
    assert answer.status == "answered" and feedback_by_step(answer) == {}
    assert values(answer) == {"3"} == gold(
        ck25, f"SELECT (COUNT(DISTINCT ?p) AS ?n) WHERE {{ ?p pv:hasCategory {sensor.replace('prodi:', '<' + PRODI)}>, "
        f"{switch.replace('prodi:', '<' + PRODI)}> }}"
    )
    assert answer.sparql is not None and "COUNT(DISTINCT ?product)" in answer.sparql


SUPERLATIVE = [
    act("get_relations", target=OSCILLATOR),
    act("add_fact", head="?item", relation="pv:hasCategory", tail=OSCILLATOR),
    act("get_relations", target="?item"),
    act("add_fact", head="?item", relation="pv:price", tail="?price"),
    act("get_relations", target="?price"),
    act("add_fact", head="?price", relation="pv:amount", tail="?amount"),
    act("set_answer", var="?item"),
    act("add_min", var="?amount"),
    act("execute"),
    Reply(text="The cheapest oscillator is …"),
]


def test_superlative_question_through_add_min(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    answer = ask(scripted_llm, ck25, "What is the cheapest Oscillator we have?", SUPERLATIVE)
    assert answer.status == "answered" and feedback_by_step(answer) == {}
    cheapest = gold(
        ck25,
        f"SELECT ?r WHERE {{ ?r pv:hasCategory <{PRODI}prod-cat-Oscillator> ; pv:price/pv:amount ?a }} ORDER BY ASC(?a) LIMIT 1",
    )
    assert values(answer) == cheapest and len(cheapest) == 1
    assert answer.sparql is not None and "ORDER BY ASC(?amount)\nLIMIT 1" in answer.sparql


def test_superlative_question_through_add_max(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    script = [*SUPERLATIVE[:7], act("add_max", var="?amount"), act("execute"), Reply(text="…")]
    answer = ask(scripted_llm, ck25, "What is the most expensive Oscillator we have?", script)
    dearest = gold(
        ck25,
        f"SELECT ?r WHERE {{ ?r pv:hasCategory <{PRODI}prod-cat-Oscillator> ; pv:price/pv:amount ?a }} ORDER BY DESC(?a) LIMIT 1",
    )
    assert values(answer) == dearest and feedback_by_step(answer) == {}


def test_comparison_question_through_add_filter(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    answer = ask(
        scripted_llm,
        ck25,
        "Which oscillators are less than 12 mm deep?",
        [
            act("get_relations", target=OSCILLATOR),
            act("add_fact", head="?item", relation="pv:hasCategory", tail=OSCILLATOR),
            act("get_relations", target="?item"),
            act("add_fact", head="?item", relation="pv:depth_mm", tail="?depth"),
            act("add_filter", left="?depth", op="<", right="12"),
            act("set_answer", var="?item"),
            act("execute"),
            Reply(text="Eight oscillators are less than 12 mm deep."),
        ],
    )
    assert answer.status == "answered" and feedback_by_step(answer) == {}
    shallow = gold(ck25, f"SELECT ?i WHERE {{ ?i pv:hasCategory <{PRODI}prod-cat-Oscillator> ; pv:depth_mm ?d FILTER(?d < 12) }}")
    assert values(answer) == shallow and len(shallow) == 8
    assert answer.sparql is not None and "FILTER(?depth < 12)" in answer.sparql


# ---------------------------------------------------------------- ERASER in the loop


def test_guidelines_fire_on_wrong_steps_and_reach_the_next_observation(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        ck25,
        "Who is the manager of Heinrich Hoch?",
        [
            act("get_relations", target=HOCH),  # 1: right
            act("add_fact", head="?boss", relation="pv:hasManager", tail=HOCH),  # 2: nobody has him as manager
            act("add_fact", head=HOCH, relation="pv:hasSupplier", tail="?x"),  # 3: a relation never shown
            act("add_fact", head=HOCH, relation="pv:hasManager", tail="?manager"),  # 4: right
            act("add_filter", left="?manager", op="pv:memberOf", right="?dept"),  # 5: not an operator
            act("set_answer", var="?manager"),  # 6: right
            act("execute"),
            Reply(text="Waldtraud Kuttner."),
        ],
    )
    assert feedback_by_step(answer) == {
        2: ["fact_empty_after_relations"],
        3: ["relation_not_shown"],
        5: ["filter_bad_operator"],
    }
    assert values(answer) == {KUTTNER}
    # Each guideline is in the observation the model reads next (the tool message of that step) …
    for step, gid in ((2, "fact_empty_after_relations"), (3, "relation_not_shown"), (5, "filter_bad_operator")):
        tool_messages = [m for m in scripted_llm.requests[step]["messages"] if m["role"] == "tool"]
        assert f"Guideline ({gid})" in tool_messages[-1]["content"]
    # … and a correct step's observation carries none.
    tool_messages = [m for m in scripted_llm.requests[6]["messages"] if m["role"] == "tool"]
    assert [("Guideline" in m["content"]) for m in tool_messages] == [False, True, True, False, True, False]
    # The empty fact was not kept, the unseen relation and the bad filter were not run.
    assert "was not kept" in tool_messages[1]["content"]
    assert tool_messages[2]["content"].startswith("The action was not run.")
    assert "pv:hasManager" in tool_messages[2]["content"]  # the guideline offers the relations that were shown
    assert answer.extra["guidelines"] == {"fact_empty_after_relations": 1, "relation_not_shown": 1, "filter_bad_operator": 1}


def test_missing_count_is_pointed_out_once_before_execute(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    sensor = "prodi:prod-cat-Sensor"
    answer = ask(
        scripted_llm,
        ck25,
        "How many Sensor Switches do we offer?",
        [
            act("get_relations", target=sensor),
            act("add_fact", head="?product", relation="pv:hasCategory", tail=sensor),
            act("execute"),  # no count yet: blocked with a guideline
            act("add_count", var="?product"),
            act("execute"),
            Reply(text="…"),
        ],
    )
    assert feedback_by_step(answer) == {3: ["aggregation_missing"]}
    assert answer.sparql is not None and "COUNT(DISTINCT ?product)" in answer.sparql


def test_text_react_mode_builds_the_same_query(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    def react(tool: str, **args: Any) -> Reply:
        return Reply(text=f"Thought: next.\nAction: {tool}\nAction Input: {json.dumps(args)}")

    scripted_llm.script(
        [
            react("get_relations", target=HOCH),
            react("add_fact", head=HOCH, relation="pv:hasManager", tail="?manager"),
            react("set_answer", var="?manager"),
            react("execute"),
            Reply(text="Waldtraud Kuttner."),
        ]
    )
    with create(config(scripted_llm, tool_mode="react"), embedder=None) as strategy:
        answer = strategy.run("Who is the manager of Heinrich Hoch?", ck25, Trace())
    assert scripted_llm.problems == [] and "tools" not in scripted_llm.requests[0]
    assert values(answer) == {KUTTNER} and tools_called(answer) == ["get_relations", "add_fact", "set_answer", "execute"]


def test_step_budget_ends_with_the_best_query_so_far(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    answer = ask(scripted_llm, ck25, "Who is the manager of Heinrich Hoch?", [*MANAGER[:2], Reply(text="…")], max_steps=2)
    assert answer.status == "budget_exhausted" and values(answer) == {KUTTNER}
    assert answer.extra["stopped"] == "the budget of 2 steps is used up"


def test_wanted_aggregations_follow_the_question() -> None:
    assert wanted_aggregations("How many Sensor Switches do we offer?") == ("count",)
    assert wanted_aggregations("What is the cheapest Oscillator we have?") == ("min",)
    assert wanted_aggregations("What is the most expensive service we offer?") == ("max",)
    assert wanted_aggregations("Who is the manager of Heinrich Hoch?") == ()


# ---------------------------------------------------------------- relation ranking


RANKED = {  # question → its gold query's relation
    "Who is the manager of Heinrich Hoch?": "hasManager",
    "How many Sensor Switches do we offer?": "hasCategory",
    "What is the cheapest Oscillator we have?": "price",
    "In which department is Ms. Brant?": "memberOf",
    "Who is our Sensor expert?": "areaOfExpertise",
    "How many suppliers do we have in France?": "addressCountry",
}


@pytest.mark.parametrize("embedded", [True, False], ids=["embedder", "bm25"])
def test_relation_ranking_keeps_40_shuffled_with_the_gold_relation(ck25: KnowledgeGraph, embedded: bool) -> None:
    # No single CK25 entity has more than 17 relations, so the target is a variable bound to every labelled
    # thing (products, people, suppliers, categories, …): 69 relations in its two directions.
    embedder = default_embedder() if embedded else None
    if embedded and embedder is None:
        pytest.skip("no embedder installed")
    for question, relation in RANKED.items():
        builder = Builder(Toolkit(ck25, Trace()), question, embedder=lambda: embedder)
        builder.add_fact("?x", "rdfs:label", "?name")
        every = builder._relations(builder.draft.facts[0].head)
        assert isinstance(every, list) and len(every) == 69
        obs = builder.get_relations("?x")
        shown = obs.value.shown
        assert obs.value.found == 69 and len(shown) == 40 and len(set(shown)) == 40
        assert set(shown) <= set(every)
        assert PV + relation in {r.iri for r in shown}, question
        assert "69 found; the 40 most similar to the question are listed" in obs.text
        ranked = builder.rank(every)  # the same 40, in another shuffle
        assert set(ranked) == set(shown) and ranked != shown
        by_score = Builder(Toolkit(ck25, Trace()), question, embedder=lambda: embedder, keep=40)
        by_score.random.shuffle = lambda items: None  # type: ignore[method-assign,assignment]
        assert set(by_score.rank(every)) == set(shown) and by_score.rank(every) != shown  # shuffled, not by score


def test_few_relations_are_all_shown_unranked(ck25: KnowledgeGraph) -> None:
    builder = Builder(Toolkit(ck25, Trace()), "Who is the manager of Heinrich Hoch?")
    obs = builder.get_relations(HOCH)
    assert obs.value.found == len(obs.value.shown) == 10 and "most similar" not in obs.text
    assert {(r.iri, r.direction) for r in obs.value.shown} >= {(PV + "hasManager", "out"), (PV + "hasProductManager", "in")}


# ---------------------------------------------------------------- faces


def test_build_is_a_registered_strategy() -> None:
    assert "build" in available()
    assert make_strategy("build", LLMConfig(model="m", base_url="http://127.0.0.1:9/v1")).name == "build"


def test_http_ask_and_the_ui_picker_offer_build(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, settings: Any) -> None:
    from fastapi.testclient import TestClient

    from sparqlnav.faces.http import ServeConfig, create_app

    scripted_llm.script(MANAGER)
    app = create_app(settings, ServeConfig(allowed_hosts=("testserver",)), kgs={"ck25": ck25}, llm=config(scripted_llm))
    with TestClient(app) as client:
        assert "build" in client.get("/api/info").json()["strategies"]  # what the web UI's picker lists
        r = client.post("/api/ask", json={"question": "Who is the manager of Heinrich Hoch?", "strategy": "build"})
        assert r.status_code == 200, r.text
        body = r.json()
    assert body["strategy"] == "build" and body["status"] == "answered"
    assert [b["manager"]["value"] for b in body["results"]["results"]["bindings"]] == [KUTTNER]
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0


def test_cli_ask_with_strategy_build(scripted_llm: ScriptedLLM, data_dir: Any, sn_home: Any) -> None:
    scripted_llm.script(MANAGER)
    env = {**os.environ, "OPENAI_BASE_URL": scripted_llm.base_url, "OPENAI_API_KEY": "k",
           "SPARQLNAV_LLM_MODEL": "scripted-model", "SPARQLNAV_HOME": str(sn_home)}  # fmt: skip
    kg = str(data_dir / "ck25" / "prod-inst.ttl")
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "ask", "Who is the manager of Heinrich Hoch?", "--kg", kg,
         "--strategy", "build", "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["strategy"] == "build" and out["answer"] == "Heinrich Hoch's manager is Waldtraud Kuttner."
    assert out["usage"]["llm_calls"] == 5


def test_mcp_ask_with_strategy_build(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, settings: Any) -> None:
    from mcp import Client

    from sparqlnav.faces.http import ServeConfig, background, create_app
    from test_mcp import run, text_of

    scripted_llm.script(MANAGER)

    async def body(client: Client) -> None:
        got = await client.call_tool("ask", {"question": "Who is the manager of Heinrich Hoch?", "strategy": "build"})
        assert not got.is_error, text_of(got)
        assert text_of(got).startswith("Heinrich Hoch's manager is Waldtraud Kuttner.")

    app = create_app(settings, ServeConfig(allowed_hosts=("testserver",)), kgs={"ck25": ck25}, llm=config(scripted_llm))
    with background(app) as url:
        run(url + "/mcp", body)
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0


def test_eval_with_strategy_build_on_selected_ck25_ids(
    scripted_llm: ScriptedLLM, data_dir: Any, sn_home: Any, tmp_path: Any
) -> None:
    # Selecting questions by id: a copy of questions.yml with only those entries (the relay run does this for 12).
    import yaml

    dataset = yaml.safe_load((data_dir / "ck25" / "questions.yml").read_text(encoding="utf-8"))
    dataset["questions"] = [q for q in dataset["questions"] if q["id"] in {3}]
    subset = tmp_path / "ck25-3.yml"
    subset.write_text(yaml.safe_dump(dataset, allow_unicode=True, sort_keys=False), encoding="utf-8")
    scripted_llm.script(MANAGER)
    env = {**os.environ, "OPENAI_BASE_URL": scripted_llm.base_url, "OPENAI_API_KEY": "k",
           "SPARQLNAV_LLM_MODEL": "scripted-model", "SPARQLNAV_HOME": str(sn_home)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "eval", str(subset), "--kg", str(data_dir / "ck25" / "prod-inst.ttl"),
         "--strategy", "build", "-j", "1", "--no-plots", "--out", str(tmp_path / "run"), "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["macro_f1"] == 1.0
    (line,) = (tmp_path / "run" / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["usage"]["llm_calls"] == 5
