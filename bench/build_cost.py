"""Build (QueryAgent) against explore (SPINACH) on the same CK25 questions: QueryAgent's cost figures per
question — TPQ (seconds), QPQ (SPARQL queries), CPQ (LLM cost) — plus LLM calls and input tokens.

A scripted OpenAI-compatible server on 127.0.0.1 replays, for each strategy, the right steps a careful model
would take (build: get_relations → add_fact … → execute; explore: search → get_entity → execute_sparql → stop),
then the answer call. Everything else is real: the LLM client over HTTP, the tools over CK25 in the managed
Oxigraph process, feedback, trace. Tokens are estimated as characters / 4 of each request (messages and tool
specs) and reply; CPQ prices them at a nominal $0.15 / $0.60 per million input / output tokens. TPQ is the
wall time with an LLM that answers at once, so it measures everything but the model.

Run: SPARQLNAV_DATA=../shared/data .venv/bin/python bench/build_cost.py [--runs 3] [--out bench/results/build.md]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted server lives with the tests

from scripted_llm import Call, Reply, ScriptedLLM  # noqa: E402
from sparqlnav.answer import Strategy  # noqa: E402
from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.llm import LLMConfig, ModelPrice  # noqa: E402
from sparqlnav.settings import Settings  # noqa: E402
from sparqlnav.strategies.builder import create as create_build  # noqa: E402
from sparqlnav.strategies.explore import create as create_explore  # noqa: E402
from sparqlnav.trace import Trace  # noqa: E402

PRODI = "http://ld.company.org/prod-instances/"
HOCH = f"<{PRODI}empl-Heinrich.Hoch%40company.org>"
SENSOR, SWITCH, OSC = "prodi:prod-cat-Sensor", "prodi:prod-cat-Switch", "prodi:prod-cat-Oscillator"
Steps = list[tuple[str, dict[str, str]]]

# question → (build steps, explore steps); the final queries agree with the CK25 reference answers.
QUESTIONS: dict[str, tuple[Steps, Steps]] = {
    "Who is the manager of Heinrich Hoch?": (
        [("get_relations", {"target": HOCH}),
         ("add_fact", {"head": HOCH, "relation": "pv:hasManager", "tail": "?manager"}),
         ("set_answer", {"var": "?manager"}), ("execute", {})],
        [("search", {"query": "Heinrich Hoch"}), ("get_entity", {"id": HOCH}),
         ("execute_sparql", {"query": f"SELECT ?manager WHERE {{ {HOCH} pv:hasManager ?manager }}"}), ("stop", {})],
    ),
    "How many Sensor Switches do we offer?": (
        [("get_relations", {"target": SENSOR}),
         ("add_fact", {"head": "?p", "relation": "pv:hasCategory", "tail": SENSOR}),
         ("add_fact", {"head": "?p", "relation": "pv:hasCategory", "tail": SWITCH}),
         ("add_count", {"var": "?p"}), ("execute", {})],
        [("search", {"query": "Sensor Switch"}), ("get_property_examples", {"id": "pv:hasCategory"}),
         ("execute_sparql", {"query": f"SELECT (COUNT(DISTINCT ?p) AS ?n) WHERE {{ ?p pv:hasCategory {SENSOR}, {SWITCH} }}"}),
         ("stop", {})],
    ),
    "What is the cheapest Oscillator we have?": (
        [("get_relations", {"target": OSC}),
         ("add_fact", {"head": "?item", "relation": "pv:hasCategory", "tail": OSC}),
         ("get_relations", {"target": "?item"}),
         ("add_fact", {"head": "?item", "relation": "pv:price", "tail": "?price"}),
         ("get_relations", {"target": "?price"}),
         ("add_fact", {"head": "?price", "relation": "pv:amount", "tail": "?amount"}),
         ("set_answer", {"var": "?item"}), ("add_min", {"var": "?amount"}), ("execute", {})],
        [("search", {"query": "Oscillator"}), ("get_property_examples", {"id": "pv:hasCategory"}),
         ("get_property_examples", {"id": "pv:price"}),
         ("execute_sparql", {"query": f"SELECT ?item WHERE {{ ?item pv:hasCategory {OSC} ; pv:price/pv:amount ?a }} "
                                      "ORDER BY ASC(?a) LIMIT 1"}),
         ("stop", {})],
    ),
    "Which oscillators are less than 12 mm deep?": (
        [("get_relations", {"target": OSC}),
         ("add_fact", {"head": "?item", "relation": "pv:hasCategory", "tail": OSC}),
         ("get_relations", {"target": "?item"}),
         ("add_fact", {"head": "?item", "relation": "pv:depth_mm", "tail": "?depth"}),
         ("add_filter", {"left": "?depth", "op": "<", "right": "12"}),
         ("set_answer", {"var": "?item"}), ("execute", {})],
        [("search", {"query": "oscillator"}), ("get_property_examples", {"id": "pv:depth_mm"}),
         ("execute_sparql", {"query": f"SELECT ?item WHERE {{ ?item pv:hasCategory {OSC} ; pv:depth_mm ?d FILTER(?d < 12) }}"}),
         ("stop", {})],
    ),
}  # fmt: skip
PRICE = ModelPrice(input=0.15, output=0.60)  # USD per million tokens, nominal


def sized(reply: Reply) -> Callable[[dict[str, Any]], Reply]:
    """The reply, reporting tokens estimated from the request and the reply (characters / 4)."""

    def step(body: dict[str, Any]) -> Reply:
        sent = len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("tools", [])))
        said = len(reply.text or "") + sum(len(json.dumps(c.arguments)) for c in reply.tool_calls)
        return Reply(reply.text, reply.tool_calls, input_tokens=sent // 4, output_tokens=max(1, said // 4))

    return step


def script(steps: Steps) -> list[Callable[[dict[str, Any]], Reply]]:
    calls = [sized(Reply(text=f"Step {i + 1}.", tool_calls=[Call(t, a)])) for i, (t, a) in enumerate(steps)]
    return [*calls, sized(Reply(text="The answer, in one sentence."))]


def measure(name: str, make: Callable[[LLMConfig], Strategy], kg: Any, runs: int) -> dict[str, float]:
    per_q: list[dict[str, float]] = []
    with ScriptedLLM() as server:
        llm = LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", max_retries=0,
                        prices={"scripted-model": PRICE})  # fmt: skip
        strategy = make(llm)
        for run in range(runs + 1):  # the first run warms up
            for question, (build_steps, explore_steps) in QUESTIONS.items():
                server.script(script(build_steps if name == "build" else explore_steps))
                started = time.perf_counter()
                answer = strategy.run(question, kg, Trace())
                seconds = time.perf_counter() - started
                assert answer.status == "answered", (name, question, answer.status, answer.text)
                assert server.problems == [] and server.remaining == 0
                if run:
                    u = answer.usage
                    per_q.append({"tpq": seconds, "qpq": u.sparql_queries, "cpq": u.cost_usd,
                                  "calls": u.llm_calls, "input": u.input_tokens})  # fmt: skip
        close = getattr(strategy, "close", None)
        if close:
            close()
    return {k: statistics.mean(q[k] for q in per_q) for k in per_q[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "build.md")
    args = parser.parse_args()
    data = Path(os.environ.get("SPARQLNAV_DATA") or ROOT.parent / "shared" / "data")
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"SPARQLNAV_HOME": home})
        with open_kg(str(data / "ck25" / "prod-inst.ttl"), settings) as kg:
            rows = {
                "build": measure("build", lambda llm: create_build(llm), kg, args.runs),
                "explore": measure("explore", lambda llm: create_explore(llm, prune_over=10_000), kg, args.runs),
            }
    lines = [
        "# Build (QueryAgent) vs explore: cost per question on CK25",
        "",
        "Machine: 2 cores. CK25 (prod-inst.ttl) in the managed Oxigraph process. Questions: "
        + "; ".join(f"“{q}”" for q in QUESTIONS)
        + ". A scripted OpenAI-compatible server replays the right steps for each strategy (see QUESTIONS in "
        "bench/build_cost.py), then the answer call; it answers at once, so TPQ is everything but the model. "
        "Tokens are characters / 4 of each request and reply; CPQ prices them at a nominal $0.15 / $0.60 per "
        f"million input / output tokens. Mean over {args.runs} runs of the {len(QUESTIONS)} questions after one "
        "warm-up run. Explore's entity pruning is off (no page here is long enough to need it).",
        "",
        f"Run: `SPARQLNAV_DATA=../shared/data .venv/bin/python bench/build_cost.py --runs {args.runs}`",
        "",
        "| strategy | TPQ (s) | QPQ (SPARQL queries) | CPQ (USD) | LLM calls | input tokens |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['tpq']:.3f} | {r['qpq']:.1f} | {r['cpq']:.6f} | {r['calls']:.1f} | {r['input']:.0f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
