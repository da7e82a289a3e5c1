"""SPINACH's rollback and action budgets (spinach.txt §4.2), end to end: the real LLM client over HTTP
against the scripted server, the real toolkit over the demo KG's Oxigraph store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scripted_llm import Reply, ScriptedLLM
from sparqlnav.graph.kg import KnowledgeGraph
from test_explore import OXYGEN_QUERY, act, ask, gold_demo, kinds, messages, values

QUESTION = "Who discovered oxygen?"
EMPTY_QUERY = (
    "SELECT ?discoverer WHERE { ?discoverer wdt:P61 wd:Q8 }"  # direction reversed: no rows
)
# Fifteen distinct lookups, for runs that only spend actions.
WORDS = [
    "oxygen",
    "discoverer",
    "Marie Curie",
    "Nobel Prize",
    "chemistry",
    "physics",
    "Paris",
    "Poland",
    "award",
    "element",
    "hydrogen",
    "nitrogen",
    "carbon",
    "scientist",
    "university",
]


def calls_in(request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls (name, arguments) of the history a request carries."""
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for m in request["messages"]
        for c in m.get("tool_calls") or []
    ]


def text_of(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


def searches(words: list[str]) -> list[Reply]:
    return [act("search", query=w) for w in words]


# ---------------------------------------------------------------- the cut


def test_a_repetition_cycle_rolls_back_every_step_of_the_cycle(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        QUESTION,
        [
            act("search", query="oxygen"),
            act("search", query="discoverer"),
            act("get_entity", "Read oxygen's page.", id="wd:Q8"),  # step 3: the cycle starts
            act("get_property_examples", id="wdt:P61"),
            act("search", query="Priestley"),
            act("get_entity", "Read it again.", id="wd:Q8"),  # step 3's action again
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
        prune_over=10_000,
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    (rollback,) = kinds(answer, "rollback")
    assert rollback["guideline"] == "repeated_action" and rollback["step"] == 6
    assert rollback["removed"] == 3 and rollback["back_to"] == 2
    assert rollback["text"].endswith("3 step(s) removed, 2 kept")
    cycle = [o["text"] for o in kinds(answer, "observation")[2:5]]  # what steps 3 to 5 showed
    assert len(cycle) == 3 and "Priestley" in cycle[2]
    removed = [
        ("get_entity", {"id": "wd:Q8"}),
        ("get_property_examples", {"id": "wdt:P61"}),
        ("search", {"query": "Priestley"}),
    ]
    # The request that led to the repetition still carried the cycle...
    before = scripted_llm.requests[5]
    assert calls_in(before)[2:] == removed and all(t in text_of(before) for t in cycle)
    # ...the next one no longer does: only steps 1 and 2, then a note saying why.
    after = scripted_llm.requests[6]
    assert calls_in(after) == [("search", {"query": "oxygen"}), ("search", {"query": "discoverer"})]
    assert not any(t in text_of(after) for t in cycle)
    roles = [m["role"] for m in after["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    assert after["messages"][-1]["content"].startswith(
        "Note: your last action was discarded and the state went back to before step 3 "
        "(3 step(s) removed). You already took the action get_entity"
    )
    # Exploration goes on from step 3; the removed steps never come back.
    assert kinds(answer, "action")[6]["step"] == 3
    assert calls_in(scripted_llm.requests[7])[2:] == [("execute_sparql", {"query": OXYGEN_QUERY})]
    assert answer.extra["actions"] == 3 and answer.extra["actions_total"] == 8


@pytest.mark.parametrize(
    ("bad", "feedback"),
    [
        (EMPTY_QUERY, "empty_result"),
        ("SELECT ?d WHERE { wd:Q8 wdt:P61 ?d", "syntax_error"),  # fails: the brace is not closed
    ],
)
def test_a_stop_after_an_empty_or_failed_query_removes_that_query_s_step(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph, bad: str, feedback: str
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        QUESTION,
        [
            act("stop", "I know it already."),  # no query ran yet: nothing to remove
            act("search", query="oxygen"),
            act("search", query="discoverer"),
            act("execute_sparql", query=bad),
            act("stop", "Nothing found, I give up."),
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    first, second = kinds(answer, "rollback")
    assert (first["step"], first["removed"], first["back_to"]) == (1, 0, 0)
    assert (second["step"], second["removed"], second["back_to"]) == (4, 1, 2)
    assert second["guideline"] == "stop_without_results"
    assert [f["id"] for f in kinds(answer, "feedback")] == [
        "stop_without_results",
        feedback,
        "stop_without_results",
    ]
    # Only a removal says so in the note.
    assert messages(scripted_llm, 1)[-1]["content"].startswith(
        "Note: your last action was discarded. stop() takes"
    )
    assert ("execute_sparql", {"query": bad}) in calls_in(scripted_llm.requests[4])
    after = scripted_llm.requests[5]
    assert calls_in(after) == [("search", {"query": "oxygen"}), ("search", {"query": "discoverer"})]
    assert after["messages"][-1]["content"].startswith(
        "Note: your last action was discarded and the state went back to before step 3 "
        "(1 step(s) removed). stop() takes the last query you ran as the final answer, "
        "but the last query (step 3)"
    )
    assert answer.extra["actions"] == 3 and answer.extra["rollbacks"] == 2


# ---------------------------------------------------------------- budgets


def test_rolled_back_actions_give_their_budget_back(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    # The paper's example: take 9 actions, be rolled back by 4, take 10 more (the last one stop).
    answer = ask(
        scripted_llm,
        demo,
        QUESTION,
        [
            *searches(WORDS[:9]),
            act("search", query=WORDS[5]),  # step 6 again: steps 6 to 9 go
            *searches(WORDS[5:13]),
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    assert [r["removed"] for r in kinds(answer, "rollback")] == [4]
    # 20 actions taken, more than 15; 14 kept plus stop(): 15 effective actions.
    assert answer.extra["actions_total"] == 20 and answer.extra["actions"] == 14
    policy = [r for r in scripted_llm.requests if r.get("tools")]
    assert len(policy) == 20 and max(len(calls_in(r)) for r in policy) == 14


def test_the_state_never_holds_more_than_15_actions(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    answer = ask(
        scripted_llm,
        demo,
        QUESTION,
        [
            *searches(WORDS[:12]),
            act("search", query=WORDS[2]),  # back to before step 3: 10 removed, 2 kept
            *searches(WORDS[2:15]),  # 13 more: 15 in the state, and no 16th is asked for
        ],
    )
    assert answer.status == "budget_exhausted" and answer.results is None
    assert answer.extra["stopped"] == "the budget of 15 actions is used up"
    assert answer.extra["actions"] == 15 and answer.extra["actions_total"] == 26
    assert [r["removed"] for r in kinds(answer, "rollback")] == [10]
    assert len(scripted_llm.requests) == 26
    assert max(len(calls_in(r)) for r in scripted_llm.requests) == 14  # before the 15th action


def test_no_run_takes_more_than_30_actions(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    cycle = [*searches(WORDS[:10]), act("search", query=WORDS[0])]  # 10 steps, then all removed
    answer = ask(scripted_llm, demo, QUESTION, [*cycle, *cycle, *searches(WORDS[:8])])
    assert answer.status == "budget_exhausted"
    assert (
        answer.extra["stopped"] == "the budget of 30 actions in total (with rollbacks) is used up"
    )
    assert answer.extra["actions_total"] == 30 and answer.extra["actions"] == 8
    assert [(r["removed"], r["back_to"]) for r in kinds(answer, "rollback")] == [(10, 0)] * 2
    assert len(scripted_llm.requests) == 30  # the 31st action is never asked for


# ---------------------------------------------------------------- memory follows the state


def test_memory_guidelines_forget_removed_steps(
    scripted_llm: ScriptedLLM, demo: KnowledgeGraph
) -> None:
    rerun = "select ?discoverer\nwhere { ?discoverer wdt:P61 wd:Q8 }"  # EMPTY_QUERY, relaid out
    answer = ask(
        scripted_llm,
        demo,
        QUESTION,
        [
            act("search", query="oxygen"),
            act("search", query="discoverer"),
            act("execute_sparql", query=EMPTY_QUERY),
            act("stop"),  # rolled back: step 3 and its failed query are forgotten
            act("execute_sparql", query=rerun),  # so this is no rerun of a known failure: it runs
            act("execute_sparql", query=EMPTY_QUERY),  # but this reruns the new step 3: refused
            act("execute_sparql", query=OXYGEN_QUERY),
            act("stop"),
            Reply(text="Scheele and Priestley."),
        ],
    )
    assert answer.status == "answered" and values(answer) == gold_demo("demo-01")
    fired = [(f["step"], f["id"]) for f in kinds(answer, "feedback")]
    assert fired == [
        (3, "empty_result"),
        (4, "stop_without_results"),
        (3, "empty_result"),  # the rerun reached the engine
        (4, "rerun_unchanged"),  # the guideline fires about a step still in the state...
    ]
    assert "step 3" in kinds(answer, "feedback")[3]["text"]
    # ...and the engine saw the empty query twice (the first run and the rerun), never the third.
    # Not the search's class lookups, nor absent_iri's check of an empty query's identifiers.
    ran = [s["query"] for s in kinds(answer, "sparql") if "VALUES ?s" not in s["query"] and "VALUES ?i" not in s["query"]]
    checks = [s["query"] for s in kinds(answer, "sparql") if "VALUES ?i" in s["query"]]
    assert len(checks) == 2  # after each empty run: its identifiers all exist, so no absent_iri
    assert len(ran) == 3 and ran[1].endswith(rerun) and ran[2].endswith(OXYGEN_QUERY)
