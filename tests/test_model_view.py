"""What the model sees (issue 14): the schema digest and the prefixes that matter, entity pages both ways,
feedback that fires only when it helps, finishing with an earlier query, and retrieve's complete context.
The real LLM client talks over HTTP to a scripted OpenAI-compatible server; the graphs are real Oxigraph stores."""

from __future__ import annotations

from typing import Any

import pytest

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import Answer
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm.client import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.strategies.explore import create as create_explore
from sparqlnav.tools.digest import Digests
from sparqlnav.trace import Trace

PV = "http://ld.company.org/prod-vocab/"
PRODI = "http://ld.company.org/prod-instances/"
DEPARTMENTS = "SELECT ?d ?name WHERE { ?d a pv:Department ; pv:name ?name }"


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(
        model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0, retry_backoff_s=0
    )


def act(tool: str, **arguments: Any) -> Reply:
    return Reply(text="", tool_calls=[Call(tool, arguments)])


@pytest.fixture(scope="module")
def digests() -> Digests:
    """One holder for the module: each KG is profiled once."""
    return Digests()


def explore(
    server: ScriptedLLM, kg: KnowledgeGraph, question: str, script: list[Any], digests: Digests, settings: Settings
) -> Answer:
    server.script(script)
    with create_explore(config(server), digests=digests, settings=settings) as strategy:
        answer = strategy.run(question, kg, Trace())
    assert server.problems == [] and server.remaining == 0
    return answer


def feedback_ids(answer: Answer) -> list[str]:
    return [str(e.data["id"]) for e in answer.trace.of_kind("feedback")]


# ---------------------------------------------------------------- the system prompt


def test_ck25_system_prompt_has_the_digest_and_only_the_prefixes_that_matter(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    answer = explore(
        scripted_llm,
        ck25,
        "Which departments are there?",
        [act("execute_sparql", query=DEPARTMENTS), act("stop"), Reply(text="Six departments.")],
        digests,
        settings,
    )
    assert answer.status == "answered" and len(answer.results or []) == 6
    system = scripted_llm.requests[0]["messages"][0]["content"]
    for cls in ("pv:Employee (47)", "pv:Department (6)", "pv:Hardware (1000)", "pv:ProductCategory (26)"):
        assert cls in system
    assert "pv:memberOf → pv:Department" in system and "← pv:memberOf from pv:Employee" in system
    assert f"pv: <{PV}>" in system and f"prodi: <{PRODI}>" in system
    for unused in ("graphdb:", "shui:", "qudt:", "sesame:", "ns2:"):
        assert unused not in system
    assert len(system) < 6000  # the ~90 declared prefixes alone were about 5 kB


# ---------------------------------------------------------------- finishing with an earlier query



def test_stop_with_a_step_ends_with_that_steps_query(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, digests: Digests, settings: Settings
) -> None:
    wanted = DEPARTMENTS
    later = "SELECT (COUNT(?e) AS ?n) WHERE { ?e a pv:Employee }"
    answer = explore(
        scripted_llm,
        ck25,
        "Which departments are there?",
        [
            act("execute_sparql", query=wanted),
            act("search", query="Employee"),
            act("execute_sparql", query=later),
            act("stop", step=2),  # a search: refused, the run goes on
            act("stop", step=1),
            Reply(text="Six departments."),
        ],
        digests,
        settings,
    )
    assert answer.status == "answered" and answer.sparql is not None
    assert answer.sparql.endswith(wanted) and len(answer.results or []) == 6
    assert feedback_ids(answer) == ["stop_without_results"] and answer.trace.of_kind("rollback") == []
    # The model saw the step number under the rows it could choose.
    tool_texts = [m["content"] for m in scripted_llm.requests[3]["messages"] if m["role"] == "tool"]
    assert tool_texts[0].endswith("[step 1]") and tool_texts[2].endswith("[step 3]")
    refused = [m["content"] for m in scripted_llm.requests[4]["messages"] if m["role"] == "tool"][-1]
    assert "you named step 2, which ran no query" in refused
