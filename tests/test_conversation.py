"""Conversations: turns kept and handed to the next question; the store's bounds (count, expiry, owner, disk);
a two-turn conversation on the real CK25 graph through `sparqlnav.ask` with the real LLM client against the
scripted server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sparqlnav
from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.context import Turn
from sparqlnav.conversation import (
    Conversation,
    ConversationError,
    ConversationNotFound,
    ConversationRefused,
    ConversationStore,
)
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings

PI = "http://ld.company.org/prod-instances/"
MANAGER_QUERY = "SELECT ?manager WHERE { prodi:empl-Heinrich.Hoch%40company.org pv:hasManager ?manager }"
EMAIL_QUERY = "SELECT ?email WHERE { prodi:empl-Waldtraud.Kuttner%40company.org pv:email ?email }"
EMAIL = "Waldtraud.Kuttner@company.org"
FIRST = "Who is the manager of Heinrich Hoch?"
SECOND = "What is her email address?"


def two_turns() -> list[Reply]:
    """The scripted model's replies to the two questions: explore runs the right query, stops, answers."""
    return [
        Reply(tool_calls=[Call("execute_sparql", {"query": MANAGER_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply("Waldtraud Kuttner."),
        Reply(tool_calls=[Call("execute_sparql", {"query": EMAIL_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply(f"Her email address is {EMAIL}."),
    ]


def first_user(request: dict[str, Any]) -> str:
    """The first user message of a chat request."""
    return str(next(m["content"] for m in request["messages"] if m["role"] == "user"))


def assert_second_turn_builds_on_the_first(server: ScriptedLLM, first_sparql: str) -> None:
    """The second question's first LLM request holds the first turn's final SPARQL (its prefixes declared) and
    answer, before the question."""
    assert server.problems == []
    assert len(server.requests) >= 6
    assert "Turn 1" not in first_user(server.requests[0])
    second = first_user(server.requests[3])
    assert f"Turn 1. Question: {FIRST}" in second
    assert "Heinrich.Hoch%40company.org" in first_sparql and "pv:hasManager ?manager" in first_sparql
    assert first_sparql.strip() in second and "Answer: Waldtraud Kuttner." in second
    assert "Waldtraud Kuttner" in second.split("Result (answered):")[1]  # the rows, with labels
    assert second.rstrip().endswith(f"Question: {SECOND}")


def turn(n: int, size: int = 100) -> Turn:
    return Turn(f"question {n}", f"SELECT * WHERE {{ ?s ?p {n} }}", "x" * size, f"answer {n}")


# ------------------------------------------------------------------ the conversation and its store


def test_context_refine_and_edit() -> None:
    talk = Conversation()
    assert not talk.context()
    talk.add(turn(1))
    talk.add(turn(2))
    assert [t.question for t in talk.context().history] == ["question 1", "question 2"]
    refined = talk.context(refine=1)
    assert [t.question for t in refined.history] == ["question 1"]
    assert "The user refines the last turn above: start from its query." in refined.with_question("only 3")
    with pytest.raises(ConversationError, match="no turn 3 to refine: this conversation has 2 turn"):
        talk.context(refine=3)
    assert talk.edited("SELECT ?x WHERE { ?x a <urn:Edited> }") == 3
    text = talk.context().with_question("and sort them")
    assert "Turn 3. Question: (the user edited the query)" in text
    assert "SELECT ?x WHERE { ?x a <urn:Edited> }" in text
    assert text.index("<urn:Edited>") < text.index("Question: and sort them")


def test_long_conversations_keep_the_last_turns_within_the_budget() -> None:
    talk = Conversation()
    for n in range(1, 41):
        talk.add(turn(n, size=900))
    kept = talk.context(max_chars=4_000).history
    assert [t.question for t in kept] == ["question 38", "question 39", "question 40"]  # each takes ~1,000
    assert sum(t.size() for t in kept) <= 4_000
    assert len(talk.context().to_prompt()) <= 8_000 + 200  # the default budget, plus the heading


def test_the_store_is_bounded_lru_and_expires() -> None:
    now = [1000.0]
    store = ConversationStore(max_count=3, ttl_s=60, clock=lambda: now[0])
    a, b, c = (store.create() for _ in range(3))
    store.get(a.id)  # a is now the most recently used
    d = store.create()
    assert len(store) == 3
    with pytest.raises(ConversationNotFound):
        store.get(b.id)  # the least recently used went first
    assert {store.get(x.id).id for x in (a, c, d)} == {a.id, c.id, d.id}
    now[0] += 30
    store.get(d.id)
    now[0] += 45  # a and c were last used 75 s ago, d 45 s ago
    with pytest.raises(ConversationNotFound, match="expired"):
        store.get(a.id)
    assert store.get(d.id) is d and len(store) == 1
    with pytest.raises(ValueError):
        ConversationStore(max_count=0)


def test_an_owned_conversation_is_refused_to_others() -> None:
    store = ConversationStore()
    mine = store.create(owner="token-a")
    assert store.get(mine.id, owner="token-a") is mine
    with pytest.raises(ConversationRefused):
        store.get(mine.id, owner="token-b")
    with pytest.raises(ConversationRefused):
        store.get(mine.id)  # no token is another client too
    assert isinstance(ConversationRefused("x"), sparqlnav.SparqlnavError)


def test_conversations_on_disk_survive_a_restart_within_their_bounds(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_CONVERSATIONS": "disk", "SPARQLNAV_CONVERSATIONS_MAX": "2"}
    )
    store = ConversationStore.from_settings(settings)
    assert store.directory == tmp_path / "conversations" and store.max_count == 2
    kept = store.create(owner="o")
    store.add_turn(kept, turn(1))
    gone = store.create()
    third = store.create()  # pushes `kept` out of the store and off the disk
    assert sorted(p.stem for p in store.directory.glob("*.json")) == sorted([gone.id, third.id])
    store.add_turn(third, turn(7))

    again = ConversationStore.from_settings(settings)  # a restarted server
    assert len(again) == 0
    back = again.get(third.id)
    assert [t.question for t in back.turns] == ["question 7"] and back.turns[0] == turn(7)
    with pytest.raises(ConversationNotFound):
        again.get(kept.id)
    with pytest.raises(ConversationNotFound):
        again.get("../../etc/passwd")
    assert Settings.from_env({"SPARQLNAV_HOME": str(tmp_path)}).conversations.on_disk is False


# ------------------------------------------------------------------ two turns on CK25 through the Python API


@pytest.mark.data
def test_ask_with_a_conversation_on_ck25(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, settings: Settings) -> None:
    llm = LLMConfig(model="scripted-model", base_url=scripted_llm.base_url, api_key="k", timeout_s=10, max_retries=0)
    scripted_llm.script(two_turns())
    talk = Conversation()
    first = sparqlnav.ask(FIRST, kg=ck25, strategy="explore", llm=llm, settings=settings, conversation=talk)
    assert first.results is not None
    assert {t.value for t in first.results.values()} == {PI + "empl-Waldtraud.Kuttner%40company.org"}
    second = sparqlnav.ask(SECOND, kg=ck25, strategy="explore", llm=llm, settings=settings, conversation=talk)
    assert_second_turn_builds_on_the_first(scripted_llm, first.sparql or "")
    assert scripted_llm.remaining == 0
    assert second.status == "answered" and second.results is not None
    assert {t.value for t in second.results.values()} == {EMAIL}
    assert [t.question for t in talk.turns] == [FIRST, SECOND]
    assert talk.turns[1].sparql == second.sparql and EMAIL in talk.turns[1].results
