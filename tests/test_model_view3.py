"""What the model reads, round three (issue 37): prompts that promise only what they carry. Each test reads a prompt
as the model receives it, through the real LLM client over HTTP against the scripted OpenAI-compatible server, over
real Oxigraph stores."""

from __future__ import annotations

import re

from scripted_llm import Reply, ScriptedLLM
from sparqlnav.context import Handover
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.retrieval.kg_index import kg_schema
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import shape_docs
from sparqlnav.strategies.retrieve import create as create_retrieve
from sparqlnav.trace import Trace

PV = "http://ld.company.org/prod-vocab/"


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)


def test_retrieve_without_examples_promises_no_examples(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    schema = kg_schema(ck25)
    query = f'PREFIX pv: <{PV}>\nSELECT ?e WHERE {{ ?e pv:memberOf ?d . ?d pv:name "Marketing" }}'
    with LocalIndex(None, None) as index:  # the index holds shapes only: no example can be retrieved
        index.build(shape_docs(schema, labels=ck25.names.labels_of(schema.class_names)))
        scripted_llm.script([Reply(f"```sparql\n{query}\n```"), Reply("They are …")])
        create_retrieve(config(scripted_llm), index=index, schema=schema).run(
            "Who works in Marketing?", ck25, Trace()
        )
    prompt = str(scripted_llm.requests[0]["messages"][0]["content"])
    # before: "using reference examples and schema information that were retrieved", "appear in the examples or
    # in the schema", "the namespaces the examples and the schema use" — with no example anywhere in the request
    assert not re.search(r"\bexamples?\b", prompt, re.I), re.findall(r".*\bexamples?\b.*", prompt, re.I)
    assert "using the schema information below, computed from the graph" in prompt
    assert "Use only classes and predicates that appear in the schema below" in prompt


def test_a_handover_without_a_query_says_nothing_of_reusing_it() -> None:
    bare = Handover(strategy="lexical", reason="its answer was of another type than the question asks for")
    text = bare.to_prompt()
    assert "Use what is right in it" not in text  # before: "Use what is right in it; do not repeat what failed."
    assert text == "An earlier attempt (lexical) was not trusted: its answer was of another type than the question asks for."
    with_query = Handover(strategy="lexical", reason="no rows", sparql="SELECT ?x WHERE { ?x a <urn:C> }")
    assert with_query.to_prompt().endswith("Use what is right in it; do not repeat what failed.")
