"""The `auto` cascade end to end: the real CK25 graph in Oxigraph, real lexical, retrieve (real index, schema and
validator) and explore, the real LLM client over HTTP against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import Answer, run_question
from sparqlnav.context import RunContext
from sparqlnav.datasets import Question, load_dataset
from sparqlnav.evaluation.runner import ExampleSplits
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable, Term
from sparqlnav.llm import LLMConfig
from sparqlnav.question.intent import analyse
from sparqlnav.question.words import tokenize
from sparqlnav.retrieval.embed import default_embedder
from sparqlnav.retrieval.examples import examples_from_dataset
from sparqlnav.retrieval.kg_index import kg_schema
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import example_doc, shape_docs
from sparqlnav.settings import CascadeSettings, Settings
from sparqlnav.strategies import auto, explore, lexical, make_strategy, retrieve
from sparqlnav.strategies.lexical import LexicalStrategy
from sparqlnav.trace import Trace

pytestmark = pytest.mark.data

PV = "PREFIX pv: <http://ld.company.org/prod-vocab/>\n"
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"
# Per category, the lightest and heaviest item, but of a category that does not exist: valid, and empty.
EMPTY_QUERY = PV + (
    "SELECT ?cat (MIN(?w) AS ?minWeight) (MAX(?w) AS ?maxWeight)\nWHERE {\n"
    "  ?catItem a pv:ProductCategory ; pv:name ?cat .\n"
    "  ?hw a pv:Hardware ; pv:hasCategory ?catItem ; pv:weight_g ?w .\n"
    '  FILTER(?cat = "Lightbulbs")\n}\nGROUP BY ?cat'
)


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=30, max_retries=0)


def first_user(request: dict[str, Any]) -> str:
    return str(next(m["content"] for m in request["messages"] if m["role"] == "user"))


@pytest.fixture(scope="module")
def ck25_questions(data_dir: Path) -> list[Question]:
    return load_dataset(data_dir / "ck25" / "questions.yml").questions


@pytest.fixture(scope="module")
def ck25_retrieval(ck25: KnowledgeGraph, data_dir: Path, ck25_questions: list[Question]) -> Iterator[dict[str, Any]]:
    """The CK25 index (its own examples, leave-one-out) and schema, as retrieve's options."""
    path = data_dir / "ck25" / "questions.yml"
    schema = kg_schema(ck25)
    with LocalIndex(None, default_embedder()) as index:
        index.build([example_doc(e) for e in examples_from_dataset(path)]
                    + shape_docs(schema, labels=ck25.names.labels_of(schema.class_names)))
        splits = ExampleSplits.from_folds([[q.id] for q in ck25_questions], ck25_questions)
        yield {"index": index, "schema": schema, "example_splits": splits}


def cascade(server: ScriptedLLM, retrieval: dict[str, Any], settings: Settings) -> auto.Auto:
    llm = config(server)
    return auto.Auto(lexical.create(), explore.create(llm, max_total_actions=4),
                     retrieve.create(llm, settings=settings, **retrieval), settings.cascade)


def question(questions: list[Question], number: int) -> Question:
    return next(q for q in questions if q.id.startswith(f"ck25:{number}-"))


def values(answer: Answer) -> set[str]:
    assert answer.results is not None
    return {t.value for t in answer.results.values()}


def reference(kg: KnowledgeGraph, q: Question) -> set[str]:
    table = kg.endpoint.query(q.sparql or "").table
    assert table is not None
    return {t.value for t in table.values()}


def calls_by_stage(trace: Trace) -> list[int]:
    """LLM requests served between escalations: one count per stage, in order."""
    counts = [0]
    for event in trace:
        if event.kind == "escalate":
            counts.append(0)
        elif event.kind == "llm_call" and event.data.get("served", True):
            counts[-1] += 1
    return counts


def test_an_easy_question_is_answered_by_lexical_with_no_escalation(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieval: dict[str, Any], settings: Settings,
    ck25_questions: list[Question],
) -> None:
    easy = question(ck25_questions, 3)  # Who is the manager of Heinrich Hoch?
    with cascade(scripted_llm, ck25_retrieval, settings) as strategy:
        answer = run_question(strategy, easy.question, ck25, Trace())
    assert answer.status == "answered" and answer.strategy == "auto→lexical"
    assert values(answer) == reference(ck25, easy) != set()
    assert answer.trace.of_kind("escalate") == [] and answer.extra["path"] == ["lexical"]
    assert answer.usage.llm_calls == scripted_llm.served == 0  # ≤ 2: lexical needs no model at all
    assert (answer.confidence or 0) >= settings.cascade.lexical_confidence


def test_an_empty_retrieve_query_escalates_to_explore_which_gets_it_and_answers(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieval: dict[str, Any], settings: Settings,
    ck25_questions: list[Question],
) -> None:
    hard = question(ck25_questions, 31)  # Per product category, what's our lightest and heaviest hardware item?
    scripted_llm.script([
        Reply(json.dumps({"sub_questions": ["weight of hardware per category"], "classes": ["Hardware"]}),
              input_tokens=200, output_tokens=20),
        Reply(f"```sparql\n{EMPTY_QUERY}\n```", input_tokens=3000, output_tokens=100),  # generate
        Reply(f"```sparql\n{EMPTY_QUERY}\n```", input_tokens=3100, output_tokens=100),  # engine fix: no better
        Reply("I run the query.", [Call("execute_sparql", {"query": hard.sparql})], input_tokens=5000, output_tokens=80),
        Reply("That answers it.", [Call("stop", {})], input_tokens=6000, output_tokens=10),
        Reply("Per category, the lightest and heaviest items are listed.", input_tokens=700, output_tokens=15),
    ])
    with cascade(scripted_llm, ck25_retrieval, settings) as strategy:
        answer = run_question(strategy, hard.question, ck25, Trace())
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0

    escalations = [e.data for e in answer.trace.of_kind("escalate")]
    assert [(e["from"], e["to"]) for e in escalations] == [("lexical", "retrieve"), ("retrieve", "explore")]
    assert escalations[1]["reason"] == "its query found nothing" and escalations[1]["sparql"] == EMPTY_QUERY
    # Explore's first request carries the failed query, what it gave, and why it was not trusted.
    first = next(r for r in scripted_llm.requests if "tools" in r)
    text = first_user(first)
    assert "An earlier attempt (retrieve) was not trusted: its query found nothing." in text
    assert EMPTY_QUERY in text and "It gave: no rows" in text and text.rstrip().endswith(f"Question: {hard.question}")
    # Explore answered, right.
    assert answer.status == "answered" and answer.strategy == "auto→explore"
    assert answer.extra["path"] == ["lexical", "retrieve", "explore"]
    assert values(answer) == reference(ck25, hard) != set()
    # One trace, usage summing every stage: lexical none, retrieve three, explore three = what the server served.
    assert calls_by_stage(answer.trace) == [0, 3, 3]
    assert answer.usage.llm_calls == scripted_llm.served == 6
    assert answer.usage.input_tokens == 200 + 3000 + 3100 + 5000 + 6000 + 700
    assert answer.usage.output_tokens == 20 + 100 + 100 + 80 + 10 + 15


def test_the_stages_share_one_llm_time_budget(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieval: dict[str, Any], settings: Settings,
    ck25_questions: list[Question],
) -> None:
    # A cascade once gave every stage the whole budget: a question could take three. Here nothing is left of it
    # (a deadline already past), so no stage may send a request: lexical answers nothing sure, the others stop.
    hard = question(ck25_questions, 31)
    past = RunContext(deadline=time.monotonic() - 1.0)
    assert past.seconds_left(300.0) == 0.0 and RunContext().seconds_left(300.0) == 300.0
    assert RunContext(deadline=time.monotonic() + 1e9).seconds_left(300.0) == 300.0
    with cascade(scripted_llm, ck25_retrieval, settings) as strategy:
        answer = run_question(strategy, hard.question, ck25, Trace(), past)
    assert scripted_llm.requests == []
    assert answer.extra["path"] == ["lexical", "retrieve", "explore"] and answer.status == "budget_exhausted"
    assert "LLM time budget used up" in answer.text
    # Auto sets the deadline from the LLM budget when the caller gave none.
    built = make_strategy("auto", config(scripted_llm), settings=settings)
    assert isinstance(built, auto.Auto) and built.budget_s == config(scripted_llm).budget_s


def test_a_doubting_model_sends_the_question_on_to_explore(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, ck25_retrieval: dict[str, Any], settings: Settings,
    ck25_questions: list[Question],
) -> None:
    hard = question(ck25_questions, 31)
    doubt = "the items are not grouped by category"
    scripted_llm.script([
        Reply(json.dumps({"sub_questions": [], "classes": []})),
        Reply(f"```sparql\n{PV}SELECT ?hw WHERE {{ ?hw a pv:Hardware }} LIMIT 3\n```"),  # valid, not the question
        Reply(f"Three hardware items.\nUNSURE: {doubt}"),  # explain
        Reply("I run the query.", [Call("execute_sparql", {"query": hard.sparql})]),
        Reply("That answers it.", [Call("stop", {})]),
        Reply("Per category, the lightest and heaviest items are listed."),
    ])
    with cascade(scripted_llm, ck25_retrieval, settings) as strategy:
        answer = run_question(strategy, hard.question, ck25, Trace())
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
    escalate = answer.trace.of_kind("escalate")[-1].data
    assert (escalate["from"], escalate["to"], escalate["reason"]) == ("retrieve", "explore", f"the model was unsure: {doubt}")
    text = first_user(next(r for r in scripted_llm.requests if "tools" in r))
    assert "It gave: 3 row(s); its explanation: Three hardware items." in text and "UNSURE" not in text
    assert answer.strategy == "auto→explore" and values(answer) == reference(ck25, hard)
    assert answer.usage.llm_calls == scripted_llm.served == 6


def test_without_an_llm_auto_is_lexical(ck25: KnowledgeGraph) -> None:
    strategy = make_strategy("auto", None)
    assert isinstance(strategy, LexicalStrategy)
    for text in ("Who is the manager of Heinrich Hoch?", "What is the salary of Heinrich Hoch?"):
        got = strategy.run(text, ck25, Trace())
        alone = lexical.create().run(text, ck25, Trace())
        assert (got.strategy, got.status, got.sparql, got.confidence) == ("lexical", alone.status, alone.sparql,
                                                                          alone.confidence)
        assert got.usage.llm_calls == 0 and got.trace.of_kind("escalate") == []


def test_a_result_that_does_not_fit_the_question_is_named() -> None:
    count = ResultTable(["n"], [{"n": Term.literal("12", XSD_INT)}])
    names = ResultTable(["a"], [{"a": Term.uri(f"http://x/{i}")} for i in range(9)])
    yes = ResultTable([], [], boolean=True)

    def mismatch(text: str, table: ResultTable, rows: int = 7) -> str | None:
        return auto.projection_mismatch(analyse(tokenize(text)), table, rows, one=auto.asks_for_one(text))

    assert mismatch("How many suppliers do we have in France?", count) is None
    assert "no number" in (mismatch("How many suppliers do we have in France?", names) or "")
    assert "yes/no" in (mismatch("Who is the manager of Heinrich Hoch?", yes) or "")
    assert mismatch("When was Dmitri born?", names) == "a 'when' question, but the result has no date"
    assert mismatch("What is the salary of Heinrich Hoch?", names) == "the question asks for one thing, the result has 9 rows"
    assert mismatch("What is the salary of Heinrich Hoch?", names, rows=9) is None
    # A count answers "how many", not "which"; a number from a query that does not count may be the answer.
    which = "Which suppliers do we have in Toulouse?"
    counted = auto.projection_mismatch(analyse(tokenize(which)), count, 7, query="SELECT (COUNT(?s) AS ?n) {}")
    assert "only a count" in (counted or "")
    assert auto.projection_mismatch(analyse(tokenize(which)), count, 7, query="SELECT ?n {}") is None
    assert mismatch("Which suppliers do we have in Toulouse?", names) is None  # asks for many
    assert retrieve.split_doubt("Three items.\nUNSURE: not per category") == ("Three items.", "not per category")
    assert retrieve.split_doubt("Bob is the manager.") == ("Bob is the manager.", None)


def test_the_cascade_thresholds_are_settings() -> None:
    chosen = Settings.from_env({"SPARQLNAV_HOME": "/tmp/x", "SPARQLNAV_AUTO_LEXICAL_CONFIDENCE": "0.9",
                                "SPARQLNAV_AUTO_SINGULAR_ROWS": "3"}).cascade
    assert chosen == CascadeSettings(lexical_confidence=0.9, singular_rows=3)
    assert Settings.from_env({"SPARQLNAV_HOME": "/tmp/x"}).cascade == CascadeSettings()
