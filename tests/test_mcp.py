"""The MCP server through the official SDK's own client: streamable HTTP at /mcp of a real server, and stdio
through the `sparqlnav mcp` command; the `ask` tool runs the explore agent against a scripted LLM server."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import test_serve
from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.mcp import SingleKG, create_mcp_server
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from test_serve import EX, MANAGER_OF_ALICE

BASE_TOOLS = {"search", "get_entity", "get_property_examples", "execute_sparql"}
ALL_TOOLS = BASE_TOOLS | {"find_examples", "get_class_shapes", "validate_sparql", "ask"}
tiny_path = test_serve.tiny_path  # the shared small graph (fixtures)
tiny = test_serve.tiny
EXAMPLE = """
@prefix sh: <http://www.w3.org/ns/shacl#> .
ex:query-team a sh:SPARQLExecutable, sh:SPARQLSelectExecutable ;
  rdfs:comment "Which team is a person a member of?"@en ;
  sh:select "PREFIX ex: <http://example.org/tiny/> SELECT ?person ?team WHERE { ?person ex:memberOf ?team }" .
"""


@pytest.fixture(scope="module")
def documented(tmp_path_factory: pytest.TempPathFactory, settings: Settings) -> Iterator[KnowledgeGraph]:
    """The small graph plus one example query it publishes about itself (SHACL, as SIB endpoints do)."""
    path = tmp_path_factory.mktemp("documented") / "documented.ttl"
    path.write_text(test_serve.TINY + EXAMPLE, encoding="utf-8")
    with open_kg(str(path), settings) as graph:
        yield graph


def text_of(result: Any) -> str:
    """The text of a tool result."""
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def run(target: Any, body: Callable[[Client], Awaitable[None]]) -> None:
    """Connect the SDK client to `target` and run `body` with it."""

    async def main() -> None:
        async with Client(target) as client:
            await body(client)

    asyncio.run(main())


def test_tools_over_streamable_http(settings: Settings, documented: KnowledgeGraph) -> None:
    async def body(client: Client) -> None:
        names = {t.name for t in (await client.list_tools()).tools}
        assert BASE_TOOLS | {"validate_sparql"} <= names and "ask" not in names  # no LLM here

        found = await client.call_tool("search", {"query": "Carol Castelano"})
        assert not found.is_error and "ex:carol 'Carol Castellano'" in text_of(found)

        page = await client.call_tool("get_entity", {"id": "ex:alice"})
        assert not page.is_error and "ex:bob (Bob Baumeister)" in text_of(page)

        examples = await client.call_tool("get_property_examples", {"id": "ex:manager"})
        assert not examples.is_error and "ex:alice" in text_of(examples) and "ex:bob" in text_of(examples)

        ran = await client.call_tool("execute_sparql", {"query": MANAGER_OF_ALICE})
        assert not ran.is_error and "ex:bob (Bob Baumeister)" in text_of(ran)

        broken = await client.call_tool("execute_sparql", {"query": "SELECT ?s WHERE { ?s "})
        assert broken.is_error and "syntax_error: error at 1:" in text_of(broken)

        refused = await client.call_tool("execute_sparql", {"query": "DELETE WHERE { ?s ?p ?o }"})
        assert refused.is_error and "refused" in text_of(refused)

        unknown = await client.call_tool("get_entity", {"id": "nope:thing"})
        assert unknown.is_error and "cannot resolve 'nope:thing'" in text_of(unknown)

        wrong_kg = await client.call_tool("search", {"query": "Alice", "kg": "other"})
        assert wrong_kg.is_error and "unknown KG 'other'" in text_of(wrong_kg)

        checked = await client.call_tool("validate_sparql", {"query": "SELECT ?x WHERE { ?x ex:manger ?y }"})
        assert not checked.is_error
        assert "ex:manger is not a predicate" in text_of(checked) and "ex:manager" in text_of(checked)
        assert f"PREFIX ex: <{EX}>" in text_of(checked)  # the missing prefix was repaired
        fine = await client.call_tool("validate_sparql", {"query": MANAGER_OF_ALICE})
        assert text_of(fine) == "no issues"

        examples = await client.call_tool("find_examples", {"question": "What team does Carol belong to?"})
        assert not examples.is_error
        assert "Which team is a person a member of?" in text_of(examples)
        assert "SELECT ?person ?team WHERE { ?person ex:memberOf ?team }" in text_of(examples)

        shapes = await client.call_tool("get_class_shapes", {"classes": ["ex:Person", "team"]})
        assert not shapes.is_error
        person, team = text_of(shapes).split("\n\n")
        assert person.startswith("ex:Person {") and "ex:memberOf [ ex:Team ]" in person and "ex:manager [ ex:Person ]" in person
        assert team.startswith("ex:Team {")

    app = create_app(settings, ServeConfig(), kgs={"tiny": documented})
    with background(app) as url:
        run(url + "/mcp", body)


def test_tool_list_covers_every_tool(settings: Settings, tiny: KnowledgeGraph) -> None:
    _, tools = create_mcp_server(SingleKG(tiny), settings=settings)
    assert set(tools.offered) | set(tools.missing) == ALL_TOOLS
    assert tools.missing["ask"] == "no LLM configured"
    assert set(tools.offered) == ALL_TOOLS - {"ask"}  # validation and retrieval are in this build


@pytest.mark.slow
def test_tools_over_stdio(tiny_path: Path, sn_home: Path) -> None:
    env = {**os.environ, "SPARQLNAV_HOME": str(sn_home)}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "sparqlnav", "mcp", "--kg", str(tiny_path)], env=env)

    async def body(client: Client) -> None:
        assert {t.name for t in (await client.list_tools()).tools} >= BASE_TOOLS
        ran = await client.call_tool("execute_sparql", {"query": f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s a <{EX}Person> }}"})
        assert not ran.is_error and "| 3 |" in text_of(ran)
        broken = await client.call_tool("execute_sparql", {"query": "SELECT ?s WHERE { ?s"})
        assert broken.is_error and "syntax_error: error at 1:" in text_of(broken)

    run(params, body)


def explore_script(question_query: str) -> Callable[[dict[str, Any]], Reply]:
    """The scripted LLM's policy: search, run the query, stop; without tools it writes the answer."""

    def step(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return Reply(text="Alice's manager is Bob Baumeister.")
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        calls = [Call("search", {"query": "Alice"}), Call("execute_sparql", {"query": question_query}), Call("stop", {})]
        return Reply(text=f"Thought: step {done + 1}", tool_calls=[calls[min(done, 2)]])

    return step


def test_ask_tool_with_an_llm(settings: Settings, tiny: KnowledgeGraph, scripted_llm: ScriptedLLM) -> None:
    pytest.importorskip("sparqlnav.strategies.explore")
    scripted_llm.script([explore_script(MANAGER_OF_ALICE)] * 4)
    llm = LLMConfig(model=scripted_llm.model, base_url=scripted_llm.base_url, api_key="test")

    async def body(client: Client) -> None:
        assert "ask" in {t.name for t in (await client.list_tools()).tools}
        got = await client.call_tool("ask", {"question": "Who manages Alice?", "strategy": "explore"})
        assert not got.is_error, text_of(got)
        text = text_of(got)
        assert text.startswith("Alice's manager is Bob Baumeister.")
        assert MANAGER_OF_ALICE in text and "ex:bob (Bob Baumeister)" in text
        bad = await client.call_tool("ask", {"question": "Who?", "strategy": "magic"})
        assert bad.is_error and "unknown strategy 'magic'" in text_of(bad)

    app = create_app(settings, ServeConfig(), kgs={"tiny": tiny}, llm=llm)
    with background(app) as url:
        run(url + "/mcp", body)
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
