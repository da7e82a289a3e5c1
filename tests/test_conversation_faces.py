"""Two-turn conversations on the real CK25 graph through every face, with the real LLM client against the scripted
OpenAI-compatible server: `sparqlnav chat` fed through stdin, HTTP `/api/ask` and `/api/ask/stream` (ids,
refine, a user's SPARQL edit, another token's id refused), and MCP `ask`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from test_conversation import (
    EMAIL,
    FIRST,
    MANAGER_QUERY,
    PI,
    SECOND,
    assert_second_turn_builds_on_the_first,
    first_user,
    two_turns,
)
from test_serve import sse_events

pytestmark = pytest.mark.data
KUTTNER = PI + "empl-Waldtraud.Kuttner%40company.org"


def llm_of(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model=server.model, base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)


def values(answer: dict[str, Any]) -> set[str]:
    """Every value in an answer object's SPARQL JSON results."""
    return {cell["value"] for row in answer["results"]["results"]["bindings"] for cell in row.values()}


# ------------------------------------------------------------------ the terminal


def test_chat_on_the_terminal_through_stdin(scripted_llm: ScriptedLLM, data_dir: Path, sn_home: Path) -> None:
    scripted_llm.script([
        *two_turns(),
        Reply(tool_calls=[Call("execute_sparql", {"query": MANAGER_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply("Waldtraud Kuttner, again."),
    ])
    env = {
        **os.environ,
        "SPARQLNAV_HOME": str(sn_home),
        "OPENAI_BASE_URL": scripted_llm.base_url,
        "OPENAI_API_KEY": "test-key",
        "SPARQLNAV_LLM_MODEL": "scripted-model",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    typed = f"{FIRST}\n{SECOND}\n/new\n{FIRST}\n/quit\nnever asked\n"
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "chat", "--kg", str(data_dir / "ck25" / "prod-inst.ttl"), "-s", "explore",
         "-v"],
        input=typed, capture_output=True, text=True, env=env, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0 and len(scripted_llm.requests) == 9
    first_sparql = done.stdout.split("SPARQL", 1)[1].split("\n", 1)[1].split("┏", 1)[0].strip()
    assert_second_turn_builds_on_the_first(scripted_llm, first_sparql)
    assert "Turn 1" not in first_user(scripted_llm.requests[6])  # /new started over
    assert EMAIL in done.stdout and f"Her email address is {EMAIL}." in done.stdout
    assert done.stdout.count("Waldtraud Kuttner") >= 3  # the manager twice in the table, and the answers
    # with -v the steps are shown as in `ask -v`, each question echoed, /new acknowledged
    assert "execute_sparql" in done.stderr and f"? {SECOND}" in done.stderr
    assert "new conversation" in done.stderr and "never asked" not in done.stderr


# ------------------------------------------------------------------ HTTP


@pytest.fixture
def served(settings: Settings, ck25: KnowledgeGraph, scripted_llm: ScriptedLLM) -> Any:
    """A real server over CK25 with the scripted LLM; yields (base URL, the app's service)."""

    def start(token: str | None = None) -> Any:
        app = create_app(settings, ServeConfig(token=token), kgs={"ck25": ck25}, llm=llm_of(scripted_llm))
        return app, background(app)

    return start


def test_http_conversation_follow_up_refine_and_edit(served: Any, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script([
        *two_turns(),
        # the refine of turn 1, and a question after the user's edit
        Reply(tool_calls=[Call("execute_sparql", {"query": MANAGER_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply("Waldtraud Kuttner; her name is Waldtraud."),
        Reply(tool_calls=[Call("execute_sparql", {"query": MANAGER_QUERY})]),
        Reply(tool_calls=[Call("stop", {})]),
        Reply("Done."),
    ])
    app, server = served()
    with server as url, httpx.Client(base_url=url, timeout=60) as http:
        one = http.post("/api/ask", json={"question": FIRST, "strategy": "explore"})
        assert one.status_code == 200, one.text
        first = one.json()
        ident = first["conversation"]
        assert len(ident) == 32 and first["turn"] == 1 and values(first) == {KUTTNER}

        with http.stream(
            "POST", "/api/ask/stream", json={"question": SECOND, "strategy": "explore", "conversation": ident}
        ) as resp:
            assert resp.status_code == 200
            events = list(sse_events(resp.iter_lines()))
        name, second = events[-1]
        assert name == "answer" and second["conversation"] == ident and second["turn"] == 2
        assert values(second) == {EMAIL}
        assert_second_turn_builds_on_the_first(scripted_llm, first["sparql"])

        refined = http.post(
            "/api/ask", json={"question": "Only her first name", "strategy": "explore", "conversation": ident, "refine": 1}
        ).json()
        assert refined["turn"] == 3
        prompt = first_user(scripted_llm.requests[6])
        assert "The user refines the last turn above: start from its query." in prompt
        assert f"Question: {FIRST}" in prompt and EMAIL not in prompt  # turn 2 is not what is refined

        edit = "SELECT ?email WHERE { ?p <http://ld.company.org/prod-vocab/email> ?email } LIMIT 3"
        after = http.post(
            "/api/ask", json={"question": "Sort them", "strategy": "explore", "conversation": ident, "sparql": edit}
        ).json()
        assert after["turn"] == 5  # the edit is turn 4
        prompt = first_user(scripted_llm.requests[9])
        assert "Turn 4. Question: (the user edited the query)" in prompt and edit in prompt
        assert prompt.index(edit) < prompt.index("Question: Sort them")
        assert len(app.state.service.conversations.get(ident).turns) == 5

        gone = http.post("/api/ask", json={"question": "x", "conversation": "0" * 32})
        assert gone.status_code == 404 and "no conversation" in gone.json()["detail"]
        bad = http.post("/api/ask", json={"question": "x", "conversation": ident, "refine": 9})
        assert bad.status_code == 422 and "no turn 9 to refine" in bad.json()["detail"]
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0


def test_http_refuses_a_conversation_of_another_token(served: Any, scripted_llm: ScriptedLLM) -> None:
    app, server = served(token="secret-a")
    store = app.state.service.conversations
    theirs = store.create(owner="someone else")
    auth = {"Authorization": "Bearer secret-a"}
    with server as url, httpx.Client(base_url=url, timeout=60, headers=auth) as http:
        refused = http.post("/api/ask", json={"question": FIRST, "conversation": theirs.id})
        assert refused.status_code == 403 and "another client" in refused.json()["detail"]
        streamed = http.post("/api/ask/stream", json={"question": FIRST, "conversation": theirs.id})
        assert streamed.status_code == 403
        scripted_llm.script(two_turns()[:3])
        mine = http.post("/api/ask", json={"question": FIRST, "strategy": "explore"}).json()
    owned = store.get(mine["conversation"], owner=store_owner("secret-a"))
    assert owned.owner is not None and "secret-a" not in owned.owner  # a digest, never the token itself
    assert scripted_llm.requests and len(scripted_llm.requests) == 3  # the refused ones never ran


def store_owner(token: str) -> str:
    from sparqlnav.faces.routes_ask import owner_of

    return owner_of(token)


# ------------------------------------------------------------------ MCP


def test_mcp_ask_with_a_conversation(served: Any, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(two_turns())
    _, server = served()

    async def talk(client: Client) -> None:
        one = await client.call_tool("ask", {"question": FIRST, "strategy": "explore"})
        text = "\n".join(c.text for c in one.content if getattr(c, "type", "") == "text")
        assert "Waldtraud Kuttner" in text
        ident = text.rsplit("Conversation: ", 1)[1].split()[0]
        assert len(ident) == 32
        two = await client.call_tool("ask", {"question": SECOND, "strategy": "explore", "conversation": ident})
        reply = "\n".join(c.text for c in two.content if getattr(c, "type", "") == "text")
        assert EMAIL in reply and f"Conversation: {ident} (turn 2;" in reply
        first_sparql = text.split("SPARQL:\n", 1)[1].split("\n\n", 1)[0]
        assert_second_turn_builds_on_the_first(scripted_llm, first_sparql)
        unknown = await client.call_tool("ask", {"question": SECOND, "conversation": "f" * 32})
        assert unknown.is_error and "no conversation" in json.dumps([c.text for c in unknown.content])

    async def main(url: str) -> None:
        async with Client(url + "/mcp") as client:
            await talk(client)

    with server as url:
        asyncio.run(main(url))


def test_mcp_and_http_share_a_clients_conversations_when_auth_is_on(served: Any, scripted_llm: ScriptedLLM) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    scripted_llm.script(two_turns())
    app, server = served(token="secret-a")
    store = app.state.service.conversations
    theirs = store.create(owner="someone else")
    auth = {"Authorization": "Bearer secret-a"}

    async def main(url: str, ident: str) -> None:
        async with httpx2.AsyncClient(headers=auth, timeout=60) as http, Client(
            streamable_http_client(url + "/mcp", http_client=http)
        ) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert "ctx" not in json.dumps(listed["ask"].input_schema)  # the SDK's context is not an argument
            two = await client.call_tool("ask", {"question": SECOND, "strategy": "explore", "conversation": ident})
            reply = "\n".join(c.text for c in two.content if getattr(c, "type", "") == "text")
            assert not two.is_error and EMAIL in reply and f"Conversation: {ident} (turn 2;" in reply
            refused = await client.call_tool("ask", {"question": SECOND, "conversation": theirs.id})
            assert refused.is_error and "another client" in json.dumps([c.text for c in refused.content])

    with server as url, httpx.Client(base_url=url, timeout=60, headers=auth) as http:
        # Started over HTTP with the token, followed up over MCP with the same token: the same client.
        first = http.post("/api/ask", json={"question": FIRST, "strategy": "explore"}).json()
        asyncio.run(main(url, first["conversation"]))
    talk = store.get(first["conversation"], owner=store_owner("secret-a"))
    assert [t.question for t in talk.turns] == [FIRST, SECOND]
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
