"""Explore's input tokens per question on the 12 CK25 questions of issue 14 (ids 1 4 6 9 13 15 18 22 26 30 36
47), before and after the digest and prefix diet, with a scripted OpenAI-compatible server replaying one fixed
run per question: search the question's words, read the entity the reference query names (else pv:Department),
run the reference query, stop, answer. Everything else is real (client over HTTP, Oxigraph, toolkit, feedback).

"before" = the system prompt as it was: every prefix the file declares and no schema digest (the same agent with
a `Digests` that knows nothing but the graph's prefixes); "after" = the digest and only the prefixes that matter.
Observations are today's in both (entity pages both ways), so the difference is the system prompt's.
Tokens are characters / 4 of each request's messages and tool specs (what the model would read).

Run: SPARQLNAV_DATA=/work/shared/data .venv/bin/python bench/explore_tokens.py [--out bench/results/explore_tokens.md]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted server lives with the tests

from scripted_llm import Call, Reply, ScriptedLLM  # noqa: E402
from sparqlnav.datasets import load_dataset  # noqa: E402
from sparqlnav.graph.kg import KnowledgeGraph  # noqa: E402
from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.llm import LLMConfig  # noqa: E402
from sparqlnav.settings import Settings  # noqa: E402
from sparqlnav.strategies.explore import Explore  # noqa: E402
from sparqlnav.tools.digest import Digest, Digests  # noqa: E402
from sparqlnav.trace import Trace  # noqa: E402

IDS = ["1", "4", "6", "9", "13", "15", "18", "22", "26", "30", "36", "47"]
_IRI = re.compile(r"<(http://ld\.company\.org/prod-instances/[^>]+)>")


class NoDigest(Digests):
    """The prompt before issue 14: every declared prefix, no digest."""

    def get(self, kg: KnowledgeGraph) -> Digest:
        """All of the graph's prefixes and nothing else."""
        return Digest(prefixes={p: ns for p, ns in kg.prefixes.items() if p})


def tokens(body: dict[str, Any]) -> int:
    """Characters / 4 of what the model would read."""
    return len(json.dumps(body.get("messages", []), ensure_ascii=False) + json.dumps(body.get("tools", []))) // 4


def script(question: str, query: str) -> list[Any]:
    """One fixed run for a question."""
    found = _IRI.search(query)
    entity = f"<{found.group(1)}>" if found else "pv:Department"
    words = " ".join(w for w in re.findall(r"[A-Za-z]+", question) if len(w) > 3)[:40]

    def step(tool: str, **args: Any) -> Any:
        return lambda body: Reply(text="next step", tool_calls=[Call(tool, args)], input_tokens=tokens(body))

    return [
        step("search", query=words),
        step("get_entity", id=entity),
        step("execute_sparql", query=query),
        step("stop"),
        lambda body: Reply(text="The answer.", input_tokens=tokens(body)),
    ]


def main() -> None:
    """Run both variants and write the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "explore_tokens.md"))
    args = parser.parse_args()
    data = Path(os.environ.get("SPARQLNAV_DATA") or ROOT.parent / "shared" / "data")
    questions = {q.id.split(":")[1].split("-")[0]: q for q in load_dataset(data / "ck25" / "questions.yml").questions}
    rows: list[tuple[str, int, int, int, int]] = []
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"SPARQLNAV_HOME": home})
        with open_kg(str(data / "ck25" / "prod-inst.ttl"), settings) as kg, ScriptedLLM() as server:
            llm = LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", max_retries=0)
            variants = {"before": NoDigest(), "after": Digests()}
            for qid in IDS:
                q = questions[qid]
                measured: dict[str, tuple[int, int]] = {}
                for name, digests in variants.items():
                    server.requests.clear()
                    server.script(script(q.question, q.sparql or ""))
                    with Explore(llm, digests=digests, settings=settings) as agent:
                        usage = agent.run(q.question, kg, Trace()).trace.finish()
                    system = len(server.requests[0]["messages"][0]["content"]) // 4
                    measured[name] = (usage.input_tokens, system)
                rows.append((qid, *measured["before"], *measured["after"]))
    n = len(rows)
    mean = [sum(r[i] for r in rows) / n for i in range(1, 5)]
    lines = [
        "# Explore input tokens per question (CK25, issue 14)",
        "",
        "Scripted runs (search, get_entity, execute_sparql with the reference query, stop, answer: 5 LLM calls);",
        "tokens are characters / 4 of each request. Run: `SPARQLNAV_DATA=/work/shared/data .venv/bin/python bench/explore_tokens.py`.",
        "",
        "| question | input before | system prompt before | input after | system prompt after |",
        "|---|---|---|---|---|",
        *[f"| ck25:{r[0]} | {r[1]:,} | {r[2]:,} | {r[3]:,} | {r[4]:,} |" for r in rows],
        f"| **mean** | {mean[0]:,.0f} | {mean[1]:,.0f} | {mean[2]:,.0f} | {mean[3]:,.0f} |",
        "",
        "The digest adds what the data holds (classes, properties, ranges) and the prefix diet removes ~80 unused",
        "declarations; the system prompt is sent with every call, so its size counts once per LLM call.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
