"""Cascade cost on CK25: `auto` vs `explore` vs `retrieve` — F1, LLM calls and input tokens per question — and
the measurements behind the cascade's thresholds (SPARQLNAV_AUTO_LEXICAL_CONFIDENCE, SPARQLNAV_AUTO_SINGULAR_ROWS).

The model is a scripted OpenAI-compatible server on 127.0.0.1 that replays each question's reference SPARQL
(the best any model could write): retrieve's generate and fix steps reply with it, explore runs it and stops.
So F1 here is an upper bound that only the strategies' own handling can lower (and lexical, which runs no
model); what differs is what each path costs. Everything else is real: the LLM client over HTTP, the CK25
store in Oxigraph, the retrieval index (CK25's own examples, leave-one-out: no question sees its own query),
the validator, lexical. Input tokens are estimated as characters / 4 of each request (messages and tool
specs); the server reports that estimate back, so the numbers are the ones the traces record.

With a real model (../shared/tools/RELAY.md), run `sparqlnav eval` with `--strategy auto|retrieve|explore`
instead; this script is the reproducible, model-free measurement.

Run: SPARQLNAV_DATA=/work/shared/data .venv/bin/python bench/cascade_cost.py [--limit N] [--out bench/results/cascade.md]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted server lives with the tests

from scripted_llm import Call, Reply, ScriptedLLM  # noqa: E402
from sparqlnav.answer import Answer, Strategy, run_question  # noqa: E402
from sparqlnav.datasets import Question, load_dataset  # noqa: E402
from sparqlnav.evaluation.gold import Gold, freeze_gold  # noqa: E402
from sparqlnav.evaluation.runner import ExampleSplits, make_record  # noqa: E402
from sparqlnav.graph.kg import KnowledgeGraph  # noqa: E402
from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.llm import LLMConfig  # noqa: E402
from sparqlnav.retrieval.embed import default_embedder  # noqa: E402
from sparqlnav.retrieval.examples import examples_from_dataset  # noqa: E402
from sparqlnav.retrieval.kg_index import kg_schema  # noqa: E402
from sparqlnav.retrieval.local import LocalIndex  # noqa: E402
from sparqlnav.retrieval.records import example_doc, shape_docs  # noqa: E402
from sparqlnav.settings import CascadeSettings, Settings  # noqa: E402
from sparqlnav.strategies import auto, explore, lexical, retrieve  # noqa: E402
from sparqlnav.strategies.prompts import prompt_text  # noqa: E402
from sparqlnav.trace import Trace  # noqa: E402

QUESTION_LINE = re.compile(r"^Question: (.*)$", re.M)
EXPLORE_ACTIONS = 4  # the scripted explorer runs the reference, then stops; a failed one gives up soon
TARGET_PRECISION = 0.8  # lexical answers kept by the cascade must be right this often (F1 ≥ 0.5)


def estimate_tokens(body: dict[str, Any]) -> int:
    """Characters / 4 of what the model would read."""
    text = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
    return (text + len(json.dumps(body.get("tools", [])))) // 4 if "tools" in body else text // 4


class ReferenceModel:
    """Answers every strategy's requests as a model that knows each question's reference query would."""

    def __init__(self, queries: dict[str, str]) -> None:
        self.queries = queries
        self.decompose = prompt_text("retrieve_decompose.md")
        self.explain = prompt_text("retrieve_explain.md")

    def question_of(self, body: dict[str, Any]) -> str:
        users = [str(m["content"]) for m in body["messages"] if m["role"] == "user"]
        for text in users:
            found = QUESTION_LINE.findall(text)
            if found:
                return str(found[-1]).strip()
        raise AssertionError(f"no question in {users[:1]}")

    def __call__(self, body: dict[str, Any]) -> Reply:
        tokens = estimate_tokens(body)
        messages = body["messages"]
        system = str(messages[0]["content"]) if messages and messages[0]["role"] == "system" else ""
        if "tools" in body:  # explore's policy: run the reference, then stop
            ran = sum(1 for m in messages if m["role"] == "tool")
            query = self.queries[self.question_of(body)]
            if ran == 0:
                return Reply("I run the query.", [Call("execute_sparql", {"query": query})], input_tokens=tokens,
                             output_tokens=len(query) // 4 + 10)
            return Reply("That answers it.", [Call("stop", {})], input_tokens=tokens, output_tokens=10)
        if "response_format" in body or system.startswith(self.decompose.strip()):  # retrieve's decompose
            return Reply(json.dumps({"sub_questions": [], "classes": []}), input_tokens=tokens, output_tokens=12)
        if system.startswith(self.explain.strip()) or "SPARQL:\n" in str(messages[-1]["content"]):
            return Reply("Here is the answer.", input_tokens=tokens, output_tokens=6)  # explain / explore's answer
        query = self.queries[self.question_of(body)]  # retrieve's generate, fix and engine fix
        return Reply(f"```sparql\n{query}\n```", input_tokens=tokens, output_tokens=len(query) // 4 + 4)


@dataclass
class Row:
    """One question under one strategy."""

    qid: str
    f1: float
    calls: int
    input_tokens: int
    status: str
    confidence: float | None
    path: str
    reason: str | None


def run_all(strategy: Strategy, questions: Sequence[Question], golds: dict[str, Gold], kg: KnowledgeGraph,
            name: str) -> list[Row]:
    rows = []
    started = time.monotonic()
    for q in questions:
        trace = Trace()
        answer: Answer = run_question(strategy, q.question, kg, trace)
        record = make_record(q, golds[q.id], answer.to_json(), trace)
        escalations = answer.extra.get("escalations") or []
        rows.append(Row(q.id, float(record.get("f1") or 0.0), answer.usage.llm_calls, answer.usage.input_tokens,
                        answer.status, answer.confidence, "→".join(answer.extra.get("path", [name])),
                        escalations[-1]["reason"] if escalations else None))
    print(f"{name}: {len(rows)} questions in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return rows


def summary(rows: Sequence[Row]) -> tuple[float, float, float]:
    return (statistics.mean(r.f1 for r in rows), statistics.mean(r.calls for r in rows),
            statistics.mean(r.input_tokens for r in rows))


def simulate(lexical_rows: Sequence[Row], llm_rows: Sequence[Row], threshold: float) -> tuple[float, float, float, int, float]:
    """auto at a lexical threshold, from lexical alone and the cascade's LLM part: F1, calls, tokens, lexical
    answers kept and their precision."""
    chosen = [lx if lx.status == "answered" and (lx.confidence or 0) >= threshold else llm
              for lx, llm in zip(lexical_rows, llm_rows, strict=True)]
    kept = [lx for lx in lexical_rows if lx.status == "answered" and (lx.confidence or 0) >= threshold]
    precision = sum(r.f1 >= 0.5 for r in kept) / len(kept) if kept else 1.0
    f1, calls, tokens = summary(chosen)
    return f1, calls, tokens, len(kept), precision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cascade.md")
    args = parser.parse_args()
    data = Path(os.environ.get("SPARQLNAV_DATA") or ROOT.parent / "shared" / "data")
    home = Path(os.environ.get("SPARQLNAV_HOME") or tempfile.mkdtemp(prefix="sparqlnav-cascade-"))
    settings = Settings.from_env({"SPARQLNAV_HOME": str(home)})
    path = data / "ck25" / "questions.yml"
    questions = load_dataset(path).questions[: args.limit]
    server = ScriptedLLM().start()
    server.script([ReferenceModel({q.question: q.sparql or "" for q in questions})] * 100_000)
    llm = LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=60, max_retries=0)
    try:
        with open_kg(str(data / "ck25" / "prod-inst.ttl"), settings) as kg, \
                LocalIndex(None, default_embedder()) as index:
            schema = kg_schema(kg)
            index.build([example_doc(e) for e in examples_from_dataset(path)]
                        + shape_docs(schema, labels=kg.names.labels_of(schema.class_names)))
            splits = ExampleSplits.from_folds([[q.id] for q in questions], questions)
            golds = freeze_gold(questions, kg.endpoint, None)

            def retriever() -> retrieve.Retrieve:
                return retrieve.create(llm, index=index, schema=schema, example_splits=splits, settings=settings)

            def explorer() -> Strategy:
                return explore.create(llm, max_total_actions=EXPLORE_ACTIONS)

            def cascade(options: CascadeSettings) -> Strategy:
                return auto.Auto(lexical.create(), explorer(), retriever(), options)

            lexical_rows = run_all(lexical.create(), questions, golds, kg, "lexical")
            # The cascade's LLM part: keeping lexical only at confidence 1.0 (kept at any threshold) shows what every
            # escalated question costs.
            never = CascadeSettings(lexical_confidence=1.0, singular_rows=settings.cascade.singular_rows)
            llm_rows = run_all(cascade(never), questions, golds, kg, "auto (lexical kept only at confidence 1.0)")
            write(args.out, questions, golds, kg, settings, lexical_rows, llm_rows,
                  run_all(retriever(), questions, golds, kg, "retrieve"),
                  run_all(explorer(), questions, golds, kg, "explore"),
                  lambda: run_all(cascade(settings.cascade), questions, golds, kg, "auto"))
    finally:
        server.stop()


def write(out: Path, questions: Sequence[Question], golds: dict[str, Gold], kg: KnowledgeGraph,
          settings: Settings, lexical_rows: list[Row], llm_rows: list[Row], retrieve_rows: list[Row],
          explore_rows: list[Row], run_auto: Callable[[], list[Row]]) -> None:
    lines = ["# Cascade cost on CK25", "",
             f"{len(questions)} CK25 questions; scripted model replaying the reference SPARQL (bench/cascade_cost.py);",
             "input tokens estimated as characters / 4 of each request. F1 is the eval's headline F1.",
             "Explore runs the reference query at once and stops, so its cost here is a lower bound; a real",
             "exploration takes many more steps (and auto pays it only for the questions it escalates).", ""]
    # -- the lexical threshold: lowest at which kept lexical answers are right ≥ TARGET_PRECISION of the time
    lines += ["## Lexical threshold (SPARQLNAV_AUTO_LEXICAL_CONFIDENCE)", "",
              "auto simulated from lexical alone and the cascade's LLM part (a run keeping lexical only at confidence 1.0);",
              "precision is measured on the questions it is chosen on (CK25 only): rerun when lexical changes.",
              "",
              "| threshold | lexical kept | their precision (F1 ≥ 0.5) | auto F1 | LLM calls / q | input tokens / q |",
              "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    best: float | None = None
    for step in range(0, 21):
        t = round(step * 0.05, 2)
        f1, calls, tokens, kept, precision = simulate(lexical_rows, llm_rows, t)
        lines.append(f"| {t:.2f} | {kept} | {precision:.2f} | {f1:.3f} | {calls:.2f} | {tokens:.0f} |")
        if best is None and kept and precision >= TARGET_PRECISION:
            best = t
    lines += ["", f"Lowest threshold whose kept lexical answers are right ≥ {TARGET_PRECISION:.0%} of the time: "
              f"**{best}** (default in settings: {settings.cascade.lexical_confidence}).", "",
              f"Lexical's own threshold (SPARQLNAV_LEXICAL_THRESHOLD, {settings.lexical.threshold}) comes first: "
              "a threshold here at or below it keeps every answer lexical gives. When that is already right "
              f"≥ {TARGET_PRECISION:.0%} of the time, a higher bar only buys LLM calls, so the default is 0.", ""]
    # -- rows for questions asking for one thing
    one = [(q, len(g.results["results"]["bindings"])) for q in questions
           if auto.asks_for_one(q.question) and (g := golds[q.id]).results and "results" in g.results]
    most = max((n for _, n in one), default=0)
    lines += ["## Rows for a question asking for one thing (SPARQLNAV_AUTO_SINGULAR_ROWS)", "",
              f"{len(one)} CK25 questions ask for one thing (`auto.asks_for_one`); their gold answers have "
              f"{sorted(n for _, n in one)} rows: the largest, **{most}**, is the smallest limit that distrusts "
              f"none of them (default in settings: {settings.cascade.singular_rows}).", ""]
    auto_rows = run_auto()
    lines += ["## auto vs retrieve vs explore", "",
              "| strategy | F1 | LLM calls / q | input tokens / q |", "| --- | ---: | ---: | ---: |"]
    for name, rows in (("auto", auto_rows), ("retrieve", retrieve_rows), ("explore", explore_rows),
                       ("lexical", lexical_rows)):
        f1, calls, tokens = summary(rows)
        lines.append(f"| {name} | {f1:.3f} | {calls:.2f} | {tokens:.0f} |")
    paths: dict[str, int] = {}
    for r in auto_rows:
        paths[r.path] = paths.get(r.path, 0) + 1
    lines += ["", "auto's paths: " + ", ".join(f"{p} ×{n}" for p, n in sorted(paths.items(), key=lambda x: -x[1])), "",
              "## auto per question", "", "| question | path | F1 | calls | input tokens | last escalation |",
              "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in auto_rows:
        reason = (r.reason or "").replace("|", "/").replace("\n", " ")[:110]
        lines.append(f"| {r.qid.split(':')[-1]} | {r.path} | {r.f1:.2f} | {r.calls} | {r.input_tokens} | {reason} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
