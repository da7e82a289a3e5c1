"""What the model reads, round three (issue 37): prompts that promise only what they carry. Each test reads a prompt
as the model receives it, through the real LLM client over HTTP against the scripted OpenAI-compatible server, over
real Oxigraph stores."""

from __future__ import annotations

import re
from pathlib import Path

from scripted_llm import Reply, ScriptedLLM
from sparqlnav.context import Handover
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.retrieval.kg_index import kg_schema
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import shape_docs
from sparqlnav.settings import Settings
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


SHOWS = "http://example.org/performance#"
SHOWS_TTL = "\n".join(
    [f"<{SHOWS}s{i}> a <{SHOWS}Show> ; <{SHOWS}seats> {[0, 5][i % 2]} ; "
     f"<{SHOWS}city> \"{['Lyon ', 'Paris'][i % 2]}\" ; "
     f"<{SHOWS}blurb> \"Act one\\nAct {i}\" ." for i in range(12)]
)  # fmt: skip


def test_schema_view_prefixes_numbers_spaces_and_newlines(
    scripted_llm: ScriptedLLM, tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "shows.ttl"
    path.write_text(SHOWS_TTL, encoding="utf-8")
    with open_kg(str(path), settings) as kg:
        schema = kg_schema(kg)
        with LocalIndex(None, None) as index:
            index.build(shape_docs(schema, labels={}))
            scripted_llm.script([Reply(f"```sparql\nSELECT ?s WHERE {{ ?s a <{SHOWS}Show> }}\n```"), Reply("…")])
            create_retrieve(config(scripted_llm), index=index, schema=schema).run(
                "Which shows are in Lyon?", kg, Trace())
    prompt = str(scripted_llm.requests[0]["messages"][0]["content"])
    assert f"PREFIX performance: <{SHOWS}>" in prompt  # before: `performanc:`, a name cut short
    seats = next(line for line in prompt.splitlines() if "performance:seats" in line and "#" in line)
    assert "values 0, 5" in seats, seats  # before: values "0", "5"
    city = next(line for line in prompt.splitlines() if "performance:city" in line and "#" in line)
    assert '"Lyon ", "Paris" (1 stored with spaces around it: match the quoted text)' in city, city
    blurb = [line for line in prompt.splitlines() if "Act one" in line]
    assert blurb and all("Act one\\nAct" in line for line in blurb), blurb  # before: the newline broke the comment
    assert not any(line.startswith("Act ") for line in prompt.splitlines())
    # the class the question is about is shown (before: "(no schema information)": `show` is a search stop word)
    assert "(no schema information)" not in prompt and "performance:Show {" in prompt
    # the town stored with a trailing space is found and said (before: "Lyon": not found)
    assert '- "Lyon": no thing by this name; the text "Lyon " (stored with spaces around it: match it exactly) as ' \
        "performance:city of 6 performance:Show" in prompt
