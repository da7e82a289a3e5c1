"""Explore strategy benchmark: what the agent itself costs per step when the LLM costs nothing, and how
the prompt grows with the history (with and without compaction).

A scripted OpenAI-compatible server on 127.0.0.1 answers instantly with a fixed 14-action exploration
of the demo KG (then stop() and the answer). Everything else is real: the LLM client over HTTP, the
toolkit over the managed Oxigraph process, feedback, trace.

Run: .venv/bin/python bench/explore_overhead.py [--runs 20] [--out bench/results/explore.md]
Prompt tokens are estimated as characters / 4 of the request's messages and tool specs (the scripted
server reports that number back as prompt_tokens); a real tokenizer gives somewhat different counts.
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
from sparqlnav.feedback.catalogue import Guideline, Stage  # noqa: E402
from sparqlnav.feedback.checker import Feedback  # noqa: E402
from sparqlnav.feedback.eraser import StepContext  # noqa: E402
from sparqlnav.graph.kg import KnowledgeGraph  # noqa: E402
from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.llm import LLMConfig  # noqa: E402
from sparqlnav.settings import Settings  # noqa: E402
from sparqlnav.strategies.explore import Explore, ExploreOptions  # noqa: E402
from sparqlnav.trace import Trace  # noqa: E402

QUESTION = "Which elements did Marie Curie discover, and when?"
ACTIONS: list[tuple[str, dict[str, str]]] = [
    ("search", {"query": "Marie Curie"}),
    ("get_entity", {"id": "wd:Q1060"}),
    ("search", {"query": "discoverer"}),
    ("get_property_examples", {"id": "wdt:P61"}),
    ("execute_sparql", {"query": "SELECT ?e WHERE { ?e wdt:P61 wd:Q1060 }"}),
    ("get_entity", {"id": "wd:Q84"}),
    ("get_entity", {"id": "wd:Q88"}),
    ("search", {"query": "time of discovery"}),
    ("execute_sparql", {"query": "SELECT ?e ?t WHERE { ?e wdt:P61 wd:Q1060 ; wdt:P575 ?t }"}),
    ("search", {"query": "polonium"}),
    ("search", {"query": "radium"}),
    ("get_property_examples", {"id": "wdt:P575"}),
    (
        "execute_sparql",
        {
            "query": "SELECT ?e ?label ?t WHERE { ?e wdt:P61 wd:Q1060 ; wdt:P575 ?t ; rdfs:label ?label }"
        },
    ),
    (
        "execute_sparql",
        {
            "query": "SELECT ?e ?t WHERE { ?e wdt:P61 wd:Q1060 . OPTIONAL { ?e wdt:P575 ?t } } ORDER BY ?t"
        },
    ),
    ("stop", {}),
]


def estimate_tokens(body: dict[str, Any]) -> int:
    """Characters / 4 of what the model would read."""
    return (
        len(
            json.dumps(body.get("messages", []), ensure_ascii=False)
            + json.dumps(body.get("tools", []))
        )
        // 4
    )


def reply_for(tool: str, args: dict[str, str], step: int) -> Callable[[dict[str, Any]], Reply]:
    """A scripted step that reports the request's estimated size as its prompt tokens."""
    thought = f"Step {step}: next I use {tool} to check one more assumption about the graph."

    def answer(body: dict[str, Any]) -> Reply:
        return Reply(
            text=thought,
            tool_calls=[Call(tool, args)],
            input_tokens=estimate_tokens(body),
            output_tokens=30,
        )

    return answer


def final_answer(body: dict[str, Any]) -> Reply:
    return Reply(
        text="Marie Curie discovered polonium and radium, both in 1898.",
        input_tokens=estimate_tokens(body),
    )


class TimedFeedback(Feedback):
    """Feedback that adds up the time its checks take."""

    seconds = 0.0

    def check(self, ctx: StepContext, stage: Stage | None = None) -> list[Guideline]:
        t = time.perf_counter()
        try:
            return super().check(ctx, stage)
        finally:
            TimedFeedback.seconds += time.perf_counter() - t


def make_agent(server: ScriptedLLM, **options: Any) -> Explore:
    """A strategy instance; like `sparqlnav serve` and `eval`, the timing runs reuse one."""
    llm = LLMConfig(model="scripted", base_url=server.base_url, api_key="x", max_retries=0)
    return Explore(llm, ExploreOptions(**options), feedback=TimedFeedback())


def run_once(server: ScriptedLLM, kg: KnowledgeGraph, agent: Explore) -> tuple[float, Trace]:
    """One question; the wall time of `run` and its trace."""
    server.script(
        [reply_for(tool, args, i + 1) for i, (tool, args) in enumerate(ACTIONS)] + [final_answer]
    )
    trace = Trace()
    t = time.perf_counter()
    answer = agent.run(QUESTION, kg, trace)
    wall = time.perf_counter() - t
    assert answer.status == "answered" and server.problems == [], (answer.text, server.problems)
    found = (
        {t.value.rsplit("/", 1)[-1] for t in answer.results.column("e")}
        if answer.results
        else set()
    )
    assert found == {"Q84", "Q88"}, found
    return wall, trace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "explore.md")
    args = parser.parse_args()
    steps = len(ACTIONS)  # policy calls per run (14 actions + stop)

    with (
        tempfile.TemporaryDirectory() as home,
        ScriptedLLM() as server,
        open_kg("demo", Settings.from_env({"SPARQLNAV_HOME": home})) as kg,
    ):
        setup = []
        for _ in range(
            5
        ):  # what a fresh instance costs once (the CLI's `ask` pays it per question)
            t = time.perf_counter()
            fresh = make_agent(server)
            fresh.clients()
            setup.append(time.perf_counter() - t)
            fresh.close()
        agent = make_agent(server)
        run_once(server, kg, agent)  # warm-up: starts the Oxigraph process, fills caches
        walls, llm_s, sparql_s, feedback_s = [], [], [], []
        for _ in range(args.runs):
            TimedFeedback.seconds = 0.0
            wall, trace = run_once(server, kg, agent)
            walls.append(wall)
            llm_s.append(sum(e.data["latency_s"] for e in trace.of_kind("llm_call")))
            sparql_s.append(sum(e.data["seconds"] for e in trace.of_kind("sparql")))
            feedback_s.append(TimedFeedback.seconds)
        agent.close()
        tokens: dict[str, list[int]] = {}
        for name, opts in (
            ("no compaction", {"max_context_tokens": 10**9}),
            ("default (16,000-token budget)", {}),
            (
                "tight (1,500-token budget, last 3 kept)",
                {"max_context_tokens": 1500, "keep_recent": 3},
            ),
        ):
            with make_agent(server, **opts) as sized:
                _, trace = run_once(server, kg, sized)
            tokens[name] = [
                e.data["input_tokens"]
                for e in trace.of_kind("llm_call")
                if e.data["purpose"] == "policy"
            ]

    med = statistics.median
    non_llm = [w - llm for w, llm in zip(walls, llm_s, strict=True)]
    ms = 1000.0
    rows = [
        ("wall time per question (15 policy calls + 1 answer call)", f"{med(walls) * ms:.1f} ms"),
        (
            "**wall time per step**, LLM client included (zero-latency local server)",
            f"**{med(walls) / steps * ms:.1f} ms**",
        ),
        (
            "… LLM client round trip per call (openai SDK + local HTTP; the server answers at once)",
            f"{med(llm_s) / (steps + 1) * ms:.1f} ms",
        ),
        (
            "**non-LLM overhead per step** (wall − LLM client round trips)",
            f"**{med(non_llm) / steps * ms:.1f} ms**",
        ),
        (
            "… of which SPARQL (lookups and queries, engine round trips), per step",
            f"{med(sparql_s) / steps * ms:.1f} ms",
        ),
        ("… of which feedback checks, per step", f"{med(feedback_s) / steps * ms:.2f} ms"),
        ("non-LLM overhead per question", f"{med(non_llm) * ms:.1f} ms"),
        (
            "one-off: a new strategy instance with its two LLM clients (TLS setup)",
            f"{med(setup) * ms:.1f} ms",
        ),
    ]
    lines = [
        "# Explore strategy overhead",
        "",
        f"Machine: {os.cpu_count()} cores. Demo KG, question “{QUESTION}”. A scripted OpenAI-compatible",
        "server on 127.0.0.1 answers every request at once with a fixed exploration of 14 actions (5 searches,",
        "3 entity pages, 2 property-example lookups, 4 queries; see `ACTIONS` in bench/explore_overhead.py),",
        "then stop() and the answer call. Everything else is real: the openai client over HTTP, the toolkit",
        "over the managed Oxigraph process, feedback, trace. One strategy instance serves all runs (as",
        f"`serve` and `eval` do). Median of {args.runs} runs after one warm-up run.",
        "Target: ≤ 50 ms non-LLM overhead per step.",
        "",
        "Run: `.venv/bin/python bench/explore_overhead.py [--runs 20]`",
        "",
        "| what | median |",
        "| --- | --- |",
        *[f"| {a} | {b} |" for a, b in rows],
        "",
        "## Prompt tokens per step as the history grows",
        "",
        "Estimated as characters / 4 of each policy request (messages and tool specs); the scripted",
        "server reports that estimate back as `prompt_tokens`, so these are the numbers the trace records.",
        "Compaction replaces the oldest observations (never the latest `keep_recent`) by their first lines,",
        "only while the estimate is above `max_context_tokens`; thoughts, actions and the latest",
        "observations are never cut, so a tight budget is a floor the prompt cannot go under.",
        "",
        "| step | " + " | ".join(tokens) + " |",
        "| ---: | " + " | ".join("---:" for _ in tokens) + " |",
    ]
    for i in range(steps):
        lines.append(f"| {i + 1} | " + " | ".join(f"{v[i]:,}" for v in tokens.values()) + " |")
    lines.append("| **sum** | " + " | ".join(f"**{sum(v):,}**" for v in tokens.values()) + " |")
    lines.append("")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
