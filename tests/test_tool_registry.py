"""One registry, three faces: the tools an MCP client lists, the tool specs the explore agent sends a model, and
the HTTP tool routes all come from `tools.registry` (same names, descriptions and arguments); and a tool
called through each face gives the same observation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from mcp import Client

import test_serve
from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.strategies.explore import Explore
from sparqlnav.tools.registry import TOOLKIT_TOOLS, Registry, tool
from sparqlnav.tools.toolkit import Observation, Toolkit
from sparqlnav.trace import Trace
from test_mcp import documented, run, text_of
from test_serve import MANAGER_OF_ALICE

tiny_path = test_serve.tiny_path
tiny = test_serve.tiny
__all__ = ["documented", "tiny", "tiny_path"]  # fixtures shared with the other face tests

CONTRACT = ["search", "get_entity", "get_property_examples", "execute_sparql"]  # docs/design.md
FACE_ARGUMENTS = {"kg"}  # what MCP and HTTP add: the server may offer several KGs


def declared(registry: Registry) -> dict[str, tuple[str, list[str]]]:
    """name -> (description, parameter names) as the registry declares them."""
    return {t.name: (t.description, [p.name for p in t.params]) for t in registry}


def mcp_tools(settings: Settings, kg: KnowledgeGraph) -> dict[str, tuple[str, list[str]]]:
    """What a real MCP client lists at /mcp of a real server."""
    listed: dict[str, tuple[str, list[str]]] = {}

    async def body(client: Client) -> None:
        for t in (await client.list_tools()).tools:
            listed[t.name] = (t.description or "", list(t.input_schema["properties"]))

    with background(create_app(settings, ServeConfig(), kgs={"tiny": kg})) as url:
        run(url + "/mcp", body)
    return listed


def http_tools(settings: Settings, kg: KnowledgeGraph) -> dict[str, tuple[str, list[str]]]:
    """The tool routes as the app's OpenAPI document describes them."""
    with TestClient(create_app(settings, ServeConfig(mcp=False, allowed_hosts=("testserver",)), kgs={"tiny": kg})) as client:
        doc = client.get("/openapi.json").json()
    out: dict[str, tuple[str, list[str]]] = {}
    for path, ops in doc["paths"].items():
        if not path.startswith("/api/tools/"):
            continue
        op = ops["post"]
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
        out[path.removeprefix("/api/tools/")] = (op["description"], list(schema["properties"]))
    return out


def explore_specs(scripted_llm: ScriptedLLM, kg: KnowledgeGraph) -> dict[str, tuple[str, list[str]]]:
    """The tool specs a real explore run sent the (scripted) model."""
    scripted_llm.script(
        [
            Reply(text="Thought: run it", tool_calls=[Call("execute_sparql", {"query": MANAGER_OF_ALICE})]),
            Reply(text="Thought: done", tool_calls=[Call("stop", {})]),
            Reply(text="Bob Baumeister manages Alice."),
        ]
    )
    llm = LLMConfig(model=scripted_llm.model, base_url=scripted_llm.base_url, api_key="test")
    with Explore(llm) as agent:
        answer = agent.run("Who manages Alice?", kg, Trace())
    assert answer.status == "answered" and scripted_llm.problems == []
    sent = scripted_llm.requests[0]["tools"]
    return {
        t["function"]["name"]: (t["function"]["description"], list(t["function"]["parameters"]["properties"]))
        for t in sent
    }


def test_every_face_offers_the_registry_tools(
    settings: Settings, documented: KnowledgeGraph, scripted_llm: ScriptedLLM
) -> None:
    registry = declared(TOOLKIT_TOOLS)
    assert list(registry)[:4] == CONTRACT
    assert registry["get_entity"][1] == ["id"] and registry["execute_sparql"][1] == ["query"]
    assert len({d for d, _ in registry.values()}) == len(registry)  # each description is its own

    listed = mcp_tools(settings, documented)
    routes = http_tools(settings, documented)
    sent = explore_specs(scripted_llm, documented)

    for face in (listed, routes):
        assert set(face) == set(registry)  # no LLM here: no `ask`
        for name, (description, params) in registry.items():
            assert face[name][0] == description, name
            assert [p for p in face[name][1] if p not in FACE_ARGUMENTS] == params, name
            assert set(face[name][1]) - set(params) == FACE_ARGUMENTS, name
    assert list(sent) == [*CONTRACT, "stop", "give_up"]
    for name in CONTRACT:
        assert sent[name] == registry[name], name
    assert sent["stop"][1] == ["step", "note"]  # optional: an earlier query (issue 14); a note for the writer
    assert sent["give_up"][1] == ["reason"]  # the graph does not hold the answer: say what is missing


def test_a_tool_gives_the_same_observation_through_every_face(
    settings: Settings, documented: KnowledgeGraph
) -> None:
    direct = TOOLKIT_TOOLS.call("get_class_shapes", Toolkit(documented, Trace()), {"classes": ["ex:Person"]})
    assert not direct.ok and "no retrieval index" in direct.text  # a toolkit given no indexes says so

    app = create_app(settings, ServeConfig(), kgs={"tiny": documented})
    got: dict[str, Any] = {}

    async def body(client: Client) -> None:
        for name, args in (("get_class_shapes", {"classes": ["ex:Person"]}), ("search", {"query": "Carol"})):
            result = await client.call_tool(name, args)
            got[name] = (result.is_error, text_of(result))

    with background(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        run(url + "/mcp", body)
        shapes = client.post("/api/tools/get_class_shapes", json={"classes": ["ex:Person"]}).json()
        found = client.post("/api/tools/search", json={"query": "Carol", "kg": "tiny"}).json()
        broken = client.post("/api/tools/execute_sparql", json={"query": "SELECT ?s WHERE { ?s "}).json()
        missing = client.post("/api/tools/get_entity", json={})
        wrong_kg = client.post("/api/tools/search", json={"query": "Carol", "kg": "other"})
    assert shapes["ok"] and shapes["text"].startswith("ex:Person {") and "ex:memberOf [ ex:Team ]" in shapes["text"]
    assert got["get_class_shapes"] == (False, shapes["text"])
    assert found == {"tool": "search", "kg": "tiny", "ok": True, "text": got["search"][1]}
    assert "ex:carol 'Carol Castellano'" in found["text"]
    assert broken["ok"] is False and broken["text"].startswith("The query failed — syntax_error: error at 1:")
    assert missing.status_code == 422 and missing.json()["detail"] == "id: Field required"
    assert wrong_kg.status_code == 400 and "unknown KG 'other'" in wrong_kg.json()["detail"]


def test_a_tool_is_declared_from_a_typed_function() -> None:
    def needs_words(kit: Toolkit, query: str) -> Observation:
        """A tool whose argument says nothing about itself."""
        return Observation(query)

    with pytest.raises(TypeError, match=r"needs_words\(query\): annotate it"):
        tool(needs_words)
    explore = TOOLKIT_TOOLS["get_entity"]
    assert explore.hooks == frozenset({"prune"}) and "prune" not in explore.parameters()["properties"]
    assert TOOLKIT_TOOLS["find_examples"].parameters() == {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "a question in plain language"},
            "k": {"type": "integer", "description": "how many examples (1 to 20)", "default": 5},
        },
        "required": ["question"],
    }
    unknown = TOOLKIT_TOOLS.call("nope", None, {})  # type: ignore[arg-type]  # never reaches a toolkit
    assert not unknown.ok and unknown.text.startswith("there is no tool 'nope'")
