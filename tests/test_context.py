"""A run's context (earlier turns, a cascade's handover) reaches the model: the real strategies over the demo KG,
the real LLM client against the scripted OpenAI-compatible server."""

from __future__ import annotations

from typing import Any

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import run_question
from sparqlnav.context import Handover, RunContext, Turn
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.strategies.explore import create
from sparqlnav.strategies.lexical import create as create_lexical
from sparqlnav.trace import Trace

OXYGEN_QUERY = "SELECT ?discoverer WHERE { wd:Q8 wdt:P61 ?discoverer }"
PRIESTLEY = "https://demo.sparqlnav.org/entity/Q1011"


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)


def first_user(request: dict[str, Any]) -> str:
    return str(next(m["content"] for m in request["messages"] if m["role"] == "user"))


def test_a_turn_summarises_its_answer_with_labels(demo: KnowledgeGraph) -> None:
    answer = create_lexical().run("Who discovered oxygen?", demo, Trace())
    turn = Turn.of(answer, demo)
    assert turn.question == "Who discovered oxygen?" and turn.sparql == answer.sparql
    assert "Joseph Priestley" in turn.results and "Carl Wilhelm Scheele" in turn.results
    text = RunContext(history=(turn,)).with_question("Where was he born?")
    assert text.index("Turn 1. Question: Who discovered oxygen?") < text.index("Question: Where was he born?")
    assert "wdt:P61" in text and answer.text in text


def test_old_turns_give_way_to_the_budget_but_the_last_one_stays() -> None:
    turns = tuple(Turn(f"question {i}", None, "x" * 500, f"answer {i}") for i in range(10))
    kept = RunContext(history=turns).within(1_500)
    assert [t.question for t in kept.history] == ["question 8", "question 9"]
    assert [t.question for t in RunContext(history=turns).within(10).history] == ["question 9"]
    assert not RunContext() and RunContext().with_question("q") == "Question: q"


def test_explore_receives_the_previous_turn_and_a_handover(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    earlier = Turn("Who discovered oxygen?", OXYGEN_QUERY, "| ?discoverer |\n| Joseph Priestley (wd:Q1011) |",
                   "Joseph Priestley and Carl Wilhelm Scheele.")
    handover = Handover("retrieve", "its query returned no rows", sparql="SELECT ?x WHERE { wd:Q8 wdt:P999 ?x }",
                        outcome="no rows", entities=(("wd:Q8", "oxygen"),))
    context = RunContext(history=(earlier,), handover=handover)
    scripted_llm.script([
        Reply(tool_calls=[Call("execute_sparql", {"query": OXYGEN_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply("Joseph Priestley and Carl Wilhelm Scheele."),
    ])
    trace = Trace()
    with create(config(scripted_llm)) as strategy:
        answer = run_question(strategy, "And who else?", demo, trace, context)
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
    first = first_user(scripted_llm.requests[0])
    assert "Turn 1. Question: Who discovered oxygen?" in first and OXYGEN_QUERY in first
    assert "Joseph Priestley and Carl Wilhelm Scheele." in first
    assert "An earlier attempt (retrieve) was not trusted: its query returned no rows." in first
    assert "wdt:P999" in first and "oxygen = wd:Q8" in first
    assert first.rstrip().endswith("Question: And who else?")
    # the answer writer sees the conversation too
    assert "Turn 1. Question: Who discovered oxygen?" in first_user(scripted_llm.requests[2])
    (event,) = trace.of_kind("context")
    assert event.data["turns"] == 1 and event.data["handover"] == "retrieve"
    assert answer.status == "answered" and answer.results is not None
    assert PRIESTLEY in {t.value for t in answer.results.values()}


def test_a_run_without_context_sends_the_question_alone(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    scripted_llm.script([
        Reply(tool_calls=[Call("execute_sparql", {"query": OXYGEN_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply("Joseph Priestley and Carl Wilhelm Scheele."),
    ])
    trace = Trace()
    with create(config(scripted_llm)) as strategy:
        run_question(strategy, "Who discovered oxygen?", demo, trace)
    assert first_user(scripted_llm.requests[0]) == "Question: Who discovered oxygen?"
    assert trace.of_kind("context") == []
