"""The retrieve strategy (SPARQL-LLM) end to end: the real LLM client over HTTP against the scripted
OpenAI-compatible server, real Oxigraph stores, the real index, schema and validator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bare_oxigraph import BareOxigraph
from scripted_llm import Reply, ScriptedLLM
from sparqlnav.datasets import load_questions
from sparqlnav.evaluation.runner import ExampleSplits
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.schema import Schema
from sparqlnav.llm import LLMConfig
from sparqlnav.retrieval.embed import default_embedder
from sparqlnav.retrieval.examples import Example, examples_from_dataset
from sparqlnav.retrieval.kg_index import kg_index_dir, kg_schema
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import example_doc, shape_docs
from sparqlnav.settings import Settings
from sparqlnav.strategies import make_strategy
from sparqlnav.strategies.retrieve import Retrieve, create, extract_query
from sparqlnav.trace import Trace

PV = "PREFIX pv: <http://ld.company.org/prod-vocab/>\n"
SABRINA = "What is the email of Sabrina from Marketing?"


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)


def decomposition(subs: list[str], classes: list[str]) -> Reply:
    return Reply(json.dumps({"sub_questions": subs, "classes": classes}), input_tokens=200, output_tokens=30)


def sparql_reply(query: str, text: str = "Here is the query:") -> Reply:
    return Reply(f"{text}\n\n```sparql\n{query}\n```\n", input_tokens=3000, output_tokens=120)


def system_of(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def last_user(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def values(table: Any, var: str = "result") -> set[str]:
    return {t.value for t in table.column(var)}


def written(answer: Any) -> list[Any]:
    """The queries the model wrote that ran (not the lookups of what the question names)."""
    return [e for e in answer.trace.of_kind("sparql") if e.data.get("purpose") != "lookup"]


@pytest.fixture(scope="module")
def ck25_parts(ck25: KnowledgeGraph, data_dir: Path) -> tuple[list[Example], Schema, ExampleSplits]:
    path = data_dir / "ck25" / "questions.yml"
    examples = examples_from_dataset(path)
    questions = load_questions(path)
    # Leave-one-out: every question is its own fold, so it may see every example but its own.
    splits = ExampleSplits.from_folds([[q.id] for q in questions], questions)
    return examples, kg_schema(ck25), splits


@pytest.fixture(scope="module")
def ck25_index(ck25: KnowledgeGraph, ck25_parts: tuple[list[Example], Schema, ExampleSplits]) -> Iterator[LocalIndex]:
    examples, schema, _ = ck25_parts
    labels = ck25.names.labels_of(schema.class_names)
    with LocalIndex(None, default_embedder()) as index:
        index.build([example_doc(e) for e in examples] + shape_docs(schema, labels=labels))
        yield index


def gold(kg: KnowledgeGraph, query: str) -> set[str]:
    result = kg.endpoint.query(query)
    assert result.table is not None
    return values(result.table)


def test_extract_query_variants() -> None:
    assert extract_query("no query here") == (None, None)
    text = "First\n```sparql\nSELECT ?a WHERE {}\n```\nthen fixed:\n```SPARQL\n# endpoint: https://x.org/sparql\nASK {}\n```"
    assert extract_query(text) == ("# endpoint: https://x.org/sparql\nASK {}", "https://x.org/sparql")
    assert extract_query("```\n#endpoint:<https://y/sparql>\nSELECT * {}\n```") == ("#endpoint:<https://y/sparql>\nSELECT * {}", "https://y/sparql")
    assert extract_query("Try PREFIX a: <x:> SELECT ?s WHERE { ?s a:b ?o }")[0] == "PREFIX a: <x:> SELECT ?s WHERE { ?s a:b ?o }"


@pytest.mark.data
def test_a_wrong_predicate_is_fixed_through_the_validator_and_answers(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_index: LocalIndex, ck25_parts: tuple[list[Example], Schema, ExampleSplits],
) -> None:
    examples, schema, splits = ck25_parts
    own = next(e for e in examples if e.question == SABRINA)
    wrong = PV + (
        'SELECT DISTINCT ?result WHERE {\n  ?department a pv:Department ; pv:name "Marketing" .\n'
        '  ?person a pv:Employee ; pv:memberOf ?department ; pv:emailAddress ?result ; pv:name ?name .\n'
        '  FILTER(CONTAINS(?name, "Sabrina"))\n}'
    )
    fixed = wrong.replace("pv:emailAddress", "pv:email")
    scripted_llm.script([
        decomposition(["email of an employee", "employee of the Marketing department"], ["Employee", "Department"]),
        sparql_reply(wrong),
        sparql_reply(fixed, "Fixed: the email predicate is pv:email."),
        Reply("Sabrina Geiger's email is sabrina.geiger@company.org.", input_tokens=400, output_tokens=20),
    ])
    strategy = create(config(scripted_llm), index=ck25_index, schema=schema, example_splits=splits, k_examples=8)
    answer = strategy.run(SABRINA, ck25, Trace())

    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
    generate, fix, explain = scripted_llm.requests[1:]
    prompt = system_of(generate)
    # No question retrieves its own reference query; the examples shown are other CK25 questions.
    # (Sabrina may appear among the shapes' sample values: data, not the held-out question or its query.)
    assert own.query.strip() not in prompt and SABRINA not in prompt and 'FILTER(CONTAINS(?name, "Sabrina"))' not in prompt
    retrieved = answer.trace.of_kind("observation")[0].data["examples"]
    assert len(retrieved) == 8 and f"example:{own.id}" not in retrieved
    assert all(r.startswith("example:ck25:") for r in retrieved)
    assert "pv:Employee {" in prompt and "pv:email xsd:string" in prompt  # the shape of the class asked for
    # The validator's message went back to the model and named the right predicate.
    assert "pv:emailAddress is not a predicate of this endpoint" in last_user(fix) and "pv:email" in last_user(fix)
    checks = [e.data for e in answer.trace.of_kind("feedback") if e.data.get("source") == "validator"]
    assert [c["ok"] for c in checks] == [False, True]
    # The fixed query ran to the reference answer.
    assert answer.status == "answered" and answer.sparql is not None and "pv:emailAddress" not in answer.sparql
    assert answer.results is not None and values(answer.results) == gold(ck25, own.query) != set()
    assert "sabrina" in last_user(explain).lower() and answer.text.startswith("Sabrina Geiger")
    usage = answer.trace.usage
    # One query written, and the lookups of what the question names (Sabrina, Marketing) count as queries too.
    assert (usage.llm_calls, len(written(answer))) == (4, 1) and usage.sparql_queries == 3
    assert usage.input_tokens == 200 + 3000 + 3000 + 400
    assert [e.data["purpose"] for e in answer.trace.of_kind("llm_call")] == ["decompose", "generate", "fix 1", "explain"]
    assert answer.extra["fixes"] == 1
    assert json.loads(json.dumps(answer.to_json(), default=str))["strategy"] == "retrieve"


@pytest.mark.data
def test_an_empty_result_gets_one_fix_from_the_engine_feedback(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_index: LocalIndex, ck25_parts: tuple[list[Example], Schema, ExampleSplits],
) -> None:
    examples, schema, splits = ck25_parts
    question = "Who is the manager of the Data Services department?"
    first = PV + 'SELECT DISTINCT ?result WHERE {\n  ?d a pv:Department ; pv:name "data services" .\n  ?p pv:memberOf ?d ; pv:hasManager ?result .\n}'
    second = first.replace('"data services"', '"Data Services"')
    scripted_llm.script([
        decomposition(["manager of a department"], ["Manager", "Department"]),
        sparql_reply(first),
        sparql_reply(second),
        Reply("Elena Herzog manages Data Services."),
    ])
    answer = create(config(scripted_llm), index=ck25_index, schema=schema, example_splits=splits).run(question, ck25, Trace())

    runs = written(answer)
    assert [r.data["outcome"] for r in runs] == ["empty", "ok"]
    engine = [e.data for e in answer.trace.of_kind("feedback") if e.data.get("source") == "engine"]
    assert [g["id"] for g in engine] == ["empty_result", "filtered_value"]
    fix_prompt = last_user(scripted_llm.requests[2])
    assert "matched nothing" in fix_prompt and question in fix_prompt
    # The department's name as stored (issue 24: a writer without tools cannot look it up).
    assert 'pv:name compared with "data services": the closest stored values are "Data Services"' in fix_prompt
    reference = next(e.query for e in examples if e.question == question)
    assert answer.status == "answered" and answer.results is not None
    assert values(answer.results) == gold(ck25, reference) == {"http://ld.company.org/prod-instances/empl-Elena.Herzog%40company.org"}
    assert answer.trace.usage.llm_calls == 4


@pytest.mark.data
def test_federation_checks_service_blocks_and_runs_where_the_query_says(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_parts: tuple[list[Example], Schema, ExampleSplits],
    tmp_path: Path, settings: Settings,
) -> None:
    examples, schema, _ = ck25_parts
    partner_ttl = tmp_path / "partner.ttl"
    partner_ttl.write_text(
        "@prefix fin: <http://finance.example/> .\n@prefix prodi: <http://ld.company.org/prod-instances/> .\n"
        "fin:b1 a fin:Budget ; fin:department prodi:dept-85880 ; fin:amount 120000 .\n"
        "fin:b2 a fin:Budget ; fin:department prodi:dept-41622 ; fin:amount 80000 .\n",
        encoding="utf-8",
    )
    with open_kg(str(partner_ttl), settings) as partner:
        # the partner as another server would offer it, over HTTP (a graph's own engine is reachable only through
        # its private socket)
        bare = BareOxigraph(partner.endpoint.info.data_dir)  # type: ignore[attr-defined]
        url = bare.ensure_running()
        partner_schema = kg_schema(partner)
        budget = Example(id="fin-1", question="What is the budget of each department?", endpoint=url,
                         query="PREFIX fin: <http://finance.example/>\nSELECT ?dept ?amount WHERE { ?b a fin:Budget ; fin:department ?dept ; fin:amount ?amount }")
        with LocalIndex(None, None) as index:
            index.build([example_doc(e) for e in [*examples, budget]]
                        + shape_docs(schema) + shape_docs(partner_schema, endpoint=url))
            fin = "PREFIX fin: <http://finance.example/>\n"
            federated = (f"# endpoint: {ck25.endpoint.url}\n" + PV + fin
                         + "SELECT ?amount WHERE {\n  ?d a pv:Department ; pv:name \"Marketing\" .\n"
                         + f"  SERVICE <{url}> {{ ?b a fin:Budget ; fin:dept ?d ; fin:amount ?amount }}\n}}")
            routed = (f"# endpoint: {url}\n" + fin
                      + "SELECT ?amount WHERE { ?b a fin:Budget ; fin:department <http://ld.company.org/prod-instances/dept-85880> ; fin:amount ?amount }")
            scripted_llm.script([
                decomposition(["budget of a department"], ["Budget", "Department"]),
                sparql_reply(federated),
                sparql_reply(routed),
                Reply("Marketing has a budget of 120000."),
            ])
            strategy = create(config(scripted_llm), index=index, schema=schema, schemas={url: partner_schema},
                              settings=settings)
            answer = strategy.run("What is the budget of the Marketing department?", ck25, Trace())
        bare.stop()

    prompt = system_of(scripted_llm.requests[1])
    assert f"# endpoint: {url}" in prompt  # the prompt says which endpoint each example targets
    fix = last_user(scripted_llm.requests[2])
    assert f"in SERVICE <{url}>" in fix and "fin:dept" in fix and "fin:department" in fix
    runs = written(answer)
    assert len(runs) == 1 and runs[0].data["endpoint"] == url  # executed where the query said, not on CK25
    assert answer.status == "answered" and answer.results is not None
    assert values(answer.results, "amount") == {"120000"}
    assert answer.extra["endpoint"] == url


@pytest.mark.data
def test_an_unknown_endpoint_is_not_called(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_index: LocalIndex,
                                           ck25_parts: tuple[list[Example], Schema, ExampleSplits]) -> None:
    _, schema, _ = ck25_parts
    query = "# endpoint: https://evil.example/sparql\n" + PV + "SELECT ?d WHERE { ?d a pv:Department }"
    scripted_llm.script([decomposition([], []), sparql_reply(query), Reply("Six departments.")])
    answer = create(config(scripted_llm), index=ck25_index, schema=schema).run("List the departments", ck25, Trace())
    assert [r.data["endpoint"] for r in answer.trace.of_kind("sparql")] == [ck25.name]
    assert any("no example or schema mentions" in str(e.data.get("message")) for e in answer.trace.of_kind("info"))
    assert answer.results is not None and len(answer.results) == 6


@pytest.mark.data
def test_without_a_query_after_three_fixes_the_run_ends_in_an_error(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_index: LocalIndex, ck25_parts: tuple[list[Example], Schema, ExampleSplits],
) -> None:
    _, schema, _ = ck25_parts
    scripted_llm.script([Reply("not json at all"), Reply("not json either"), *[Reply("I cannot write that.")] * 4])
    answer = create(config(scripted_llm), index=ck25_index, schema=schema).run("Who is the CEO?", ck25, Trace())
    assert answer.status == "error" and answer.sparql is None and written(answer) == []
    assert answer.trace.usage.llm_calls == 6  # decompose + its repair, generate, three fixes
    assert any("not decomposed" in str(e.data.get("message")) for e in answer.trace.of_kind("info"))
    assert "no SPARQL query" in last_user(scripted_llm.requests[-1])


def test_the_index_is_built_on_first_use_and_reopened(scripted_llm: ScriptedLLM, demo: KnowledgeGraph, tmp_path: Path) -> None:
    home = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path)})
    query = "SELECT ?discoverer WHERE { wd:Q8 wdt:P61 ?discoverer }"
    scripted_llm.script([decomposition(["discoverer of oxygen"], ["Element"]), sparql_reply(query), Reply("Priestley.")] * 2)
    first = make_strategy("retrieve", config(scripted_llm), settings=home)
    assert isinstance(first, Retrieve)
    answer = first.run("Who discovered oxygen?", demo, Trace())
    assert any("building one" in str(e.data.get("message")) for e in answer.trace.of_kind("info"))
    assert (kg_index_dir(demo, tmp_path) / "manifest.json").is_file()
    assert answer.status == "answered" and answer.sparql is not None and answer.sparql.startswith("PREFIX wd:")
    again = make_strategy("retrieve", config(scripted_llm), settings=home).run("Who discovered oxygen?", demo, Trace())
    assert not any("building one" in str(e.data.get("message")) for e in again.trace.of_kind("info"))
    assert again.results is not None and values(again.results, "discoverer") == values(answer.results, "discoverer") != set()


def test_create_rejects_unknown_options_and_needs_an_llm() -> None:
    with pytest.raises(ValueError, match="needs an LLM"):
        create(None)
    with pytest.raises(TypeError, match="unknown retrieve options: k"):
        create(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"), k=3)


def _cli(*args: str, home: Path, llm: ScriptedLLM | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(var, None)
    if llm is not None:
        env.update(OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="k", SPARQLNAV_LLM_MODEL="scripted-model")
    return subprocess.run([sys.executable, "-m", "sparqlnav", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


@pytest.mark.data
@pytest.mark.slow
def test_cli_index_then_ask_with_the_retrieve_strategy(scripted_llm: ScriptedLLM, data_dir: Path, tmp_path: Path) -> None:
    kg = str(data_dir / "ck25" / "prod-inst.ttl")
    questions = str(data_dir / "ck25" / "questions.yml")
    built = _cli("index", "--kg", kg, "--examples", questions, "--embedder", "none", "--json", home=tmp_path)
    assert built.returncode == 0, built.stderr
    stats = json.loads(built.stdout)
    assert stats["examples"] == 50 and stats["added"] == stats["total"] and stats["shapes"] >= 10
    rebuilt = _cli("index", "--kg", kg, "--examples", questions, "--embedder", "none", "--json", home=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    again = json.loads(rebuilt.stdout)
    assert again["unchanged"] == again["total"] and again["embedded"] == 0
    query = PV + "SELECT DISTINCT ?result WHERE { <http://ld.company.org/prod-instances/empl-Baldwin.Dirksen%40company.org> pv:phone ?result }"
    scripted_llm.script([decomposition(["telephone of a person"], ["Employee"]), sparql_reply(query), Reply("+49 1234.")])
    asked = _cli("ask", "What is the telephone of Baldwin Dirksen?", "--kg", kg, "--strategy", "retrieve", "--json",
                 home=tmp_path, llm=scripted_llm)
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    assert out["strategy"] == "retrieve" and out["status"] == "answered" and out["results"]["results"]["bindings"]
    assert out["usage"]["llm_calls"] == 3 and out["answer"] == "+49 1234."
    assert "What is the telephone of Baldwin Dirksen?" in system_of(scripted_llm.requests[1])  # its own example is shown: no split here
    bad = _cli("index", "--kg", kg, "--examples", str(tmp_path / "missing.yml"), home=tmp_path)
    assert bad.returncode == 1 and "no such file" in bad.stderr


def test_a_retrieval_failure_ends_the_run_with_an_error(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    from sparqlnav.retrieval.embed import OpenAIEmbedder
    from test_index import DOCS, _EmbeddingServer

    with _EmbeddingServer() as server:
        embedder = OpenAIEmbedder("tiny-embed", base_url=server.url)
        index = LocalIndex(None, embedder)
        index.build(DOCS)
    # The embedding server is gone: the question cannot be embedded for dense retrieval.
    scripted_llm.script([decomposition(["genes"], ["Gene"])])
    answer = create(config(scripted_llm), index=index).run("Which genes?", demo, Trace())
    assert answer.status == "error" and answer.text.startswith("Retrieval failed: embedding server failed")
    assert answer.trace.usage.llm_calls == 1 and answer.trace.of_kind("error")
    index.close()
    embedder.close()


TOULOUSE = "Which suppliers do we have in Toulouse?"
TOULOUSE_QUERY = PV + 'SELECT DISTINCT ?result WHERE {\n  ?product pv:hasSupplier ?result .\n  ?result pv:addressLocality "Toulouse" .\n}'


@pytest.mark.data
def test_a_count_for_a_which_question_goes_back_once_and_the_second_query_is_kept(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_index: LocalIndex, ck25_parts: tuple[list[Example], Schema, ExampleSplits],
) -> None:
    _examples, schema, splits = ck25_parts
    counting = PV + ('SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {\n  ?product pv:hasSupplier ?s .\n'
                     '  ?s pv:addressLocality "Toulouse" .\n}')
    scripted_llm.script([
        decomposition(["suppliers located in Toulouse"], ["Supplier"]),
        sparql_reply(counting),
        sparql_reply(TOULOUSE_QUERY),
        Reply("These suppliers are in Toulouse."),
    ])
    answer = create(config(scripted_llm), index=ck25_index, schema=schema, example_splits=splits).run(TOULOUSE, ck25, Trace())

    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
    assert [e.data["purpose"] for e in answer.trace.of_kind("llm_call")] == ["decompose", "generate", "engine fix", "explain"]
    assert [r.data["outcome"] for r in written(answer)] == ["ok", "ok"]
    shape = [e.data for e in answer.trace.of_kind("feedback") if e.data.get("id") == "answer_shape"]
    assert len(shape) == 1 and "only a count" in shape[0]["text"]
    fix_prompt = last_user(scripted_llm.requests[2])
    assert "do not fit the question" in fix_prompt and "only a count" in fix_prompt and TOULOUSE in fix_prompt
    assert answer.status == "answered" and answer.sparql is not None and "COUNT" not in answer.sparql
    assert answer.results is not None and values(answer.results) == gold(ck25, TOULOUSE_QUERY) != set()


@pytest.mark.data
def test_a_result_of_the_right_shape_goes_straight_to_the_explanation(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_index: LocalIndex, ck25_parts: tuple[list[Example], Schema, ExampleSplits],
) -> None:
    _examples, schema, splits = ck25_parts
    scripted_llm.script([
        decomposition(["suppliers located in Toulouse"], ["Supplier"]),
        sparql_reply(TOULOUSE_QUERY),
        Reply("These suppliers are in Toulouse."),
    ])
    answer = create(config(scripted_llm), index=ck25_index, schema=schema, example_splits=splits).run(TOULOUSE, ck25, Trace())

    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
    assert [e.data["purpose"] for e in answer.trace.of_kind("llm_call")] == ["decompose", "generate", "explain"]
    assert [e.data.get("id") for e in answer.trace.of_kind("feedback") if e.data.get("id")] == []
    assert answer.status == "answered" and values(answer.results) == gold(ck25, TOULOUSE_QUERY)
