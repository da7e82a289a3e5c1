"""The web UI keeps a conversation, in a real headless Chromium against a real server and the scripted LLM: a
follow-up in the same thread carries the first turn, "Refine" on an earlier answer builds on that turn only, an
edited query goes with the next question, and "New conversation" starts over. Screenshot under artifacts/ui/."""

from __future__ import annotations

import json
from typing import Any

import pytest

import test_serve
import test_ui
from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from test_serve import EX, MANAGER_OF_ALICE

tiny_path = test_serve.tiny_path  # the shared small graph (fixtures)
tiny = test_serve.tiny
browser_page = test_ui.browser_page

Q1 = "Who is the manager of Alice Wunderlich?"
Q2 = "Which team is he in?"
Q3 = "And who manages Carol Castellano?"
Q4 = "Only the names, please"
Q5 = "How old is Bob Baumeister?"
EDITED = f"PREFIX ex: <{EX}>\nSELECT ?who WHERE {{ ?who ex:manager ex:bob }}"
PLAN = {  # question -> (the query the model runs, its answer)
    Q1: (MANAGER_OF_ALICE, "Alice's manager is Bob Baumeister."),
    Q2: (f"PREFIX ex: <{EX}> SELECT ?team WHERE {{ ex:bob ex:memberOf ?team }}", "Bob is in the Rockets."),
    Q3: (f"PREFIX ex: <{EX}> SELECT ?m WHERE {{ ex:carol ex:manager ?m }}", "Carol's manager is Bob Baumeister too."),
    Q4: (EDITED, "Alice Wunderlich and Carol Castellano."),
    Q5: (f"PREFIX ex: <{EX}> SELECT ?age WHERE {{ ex:bob ex:age ?age }}", "Bob is 51."),
}


def current(body: dict[str, Any]) -> str:
    """The question a request is about: the one named last in its messages."""
    text = json.dumps(body["messages"])
    return max(PLAN, key=lambda q: text.rfind("Question: " + q))


def policy(body: dict[str, Any]) -> Reply:
    """Run the planned query, stop, then answer; whatever the order of questions."""
    query, answer = PLAN[current(body)]
    if not body.get("tools"):
        return Reply(text=answer)
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    return Reply(tool_calls=[Call("execute_sparql", {"query": query}) if done == 0 else Call("stop", {})])


def first_request_of(server: ScriptedLLM, question: str) -> str:
    """The first user message of the first request about `question`."""
    for body in server.requests:
        if current(body) == question:
            return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))
    raise AssertionError(f"no request about {question!r}")


@pytest.mark.slow
def test_ui_keeps_the_thread_refines_and_starts_over(
    settings: Settings, tiny: KnowledgeGraph, scripted_llm: ScriptedLLM, browser_page: Any
) -> None:
    page = browser_page
    scripted_llm.script([policy] * 15)
    llm = LLMConfig(model=scripted_llm.model, base_url=scripted_llm.base_url, api_key="test")
    app = create_app(settings, ServeConfig(strategy="explore"), kgs={"tiny": tiny}, llm=llm)
    shots = test_ui.artifacts()

    def ask(question: str, turns_done: int) -> None:
        page.fill("#question", question)
        page.click("#ask-button")
        page.wait_for_selector(f".turn:nth-of-type({turns_done}).done, .turn.failed", timeout=30_000)
        assert page.locator(".turn.failed").count() == 0, page.inner_text("#chat")

    with background(app) as url:
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]")
        page.select_option("#strategy", "explore")
        ask(Q1, 1)
        ask(Q2, 2)  # a follow-up in the same thread
        assert page.eval_on_selector_all(".turn", "els => els.map(e => e.dataset.turn)") == ["1", "2"]
        assert page.inner_text(".turn:nth-of-type(2) .answer-text") == "Bob is in the Rockets."
        follow_up = first_request_of(scripted_llm, Q2)
        assert f"Turn 1. Question: {Q1}" in follow_up and "Alice's manager is Bob Baumeister." in follow_up

        page.click(".turn:nth-of-type(1) button.refine")  # refine the first answer, not the last
        assert page.inner_text("#refine-chip").startswith("Refining turn #1")
        assert page.locator(".turn.refining").count() == 1
        ask(Q3, 3)
        assert "refines #1" in page.inner_text(".turn:nth-of-type(3) .question-row")
        assert page.inner_text(".turn:nth-of-type(3) .answer-text") == "Carol's manager is Bob Baumeister too."
        assert page.locator("#refine-chip").is_hidden()
        refined = first_request_of(scripted_llm, Q3)
        assert "The user refines the last turn above: start from its query." in refined
        assert f"Question: {Q1}" in refined and Q2 not in refined
        # the whole thread in one picture: steps folded, the window as tall as the chat
        page.evaluate("document.querySelectorAll('.steps').forEach(d => { d.open = false; })")
        page.set_viewport_size({"width": 1280, "height": 1900})
        page.screenshot(path=str(shots / "conversation.png"))
        page.set_viewport_size({"width": 1280, "height": 1000})

        editor = page.locator(".turn:nth-of-type(3) .sparql-block textarea")
        editor.fill(EDITED)
        page.click(".turn:nth-of-type(3) .sparql-block button.run")
        page.wait_for_selector(".turn:nth-of-type(3) .results-table a.iri:has-text('Carol Castellano')")
        assert page.locator("#edit-chip").is_visible()
        ask(Q4, 4)
        after_edit = first_request_of(scripted_llm, Q4)
        assert "(the user edited the query)" in after_edit and EDITED in after_edit
        assert page.eval_on_selector_all(".turn", "els => els.map(e => e.dataset.turn)")[-1] == "5"  # the edit is #4

        page.click("#new-conversation")
        assert page.locator(".turn").count() == 0 and page.locator("#welcome").count() == 1
        ask(Q5, 1)
        assert "Turn 1" not in first_request_of(scripted_llm, Q5)  # started over
        assert page.eval_on_selector_all(".turn", "els => els.map(e => e.dataset.turn)") == ["1"]
    assert page.outside == [] and page.problems == []
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
    assert (shots / "conversation.png").stat().st_size > 10_000
