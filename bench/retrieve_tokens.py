"""The size of retrieve's generation prompt on every question of CK25 and BESTIARY (issue 31: its budget is ~3k input
tokens, and the block of what the question names must stay short).

A scripted OpenAI-compatible server answers: the decomposition is the question itself with the classes its reference
query names (a stand-in for a decomposition that names the right classes), the generated query is the reference
query, the explanation a word. Everything else is real (client over HTTP, Oxigraph, the index of the dataset's own
examples, leave-one-out, and shapes, with the default embedder). Tokens are characters / 4 of the generation
request's messages, as in bench/explore_tokens.py.

Run: SPARQLNAV_DATA=/work/shared/data .venv/bin/python bench/retrieve_tokens.py [--out FILE]
To measure another build, put its `src` first: PYTHONPATH=/path/to/other/src .venv/bin/python bench/retrieve_tokens.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted server lives with the tests

from scripted_llm import Reply, ScriptedLLM  # noqa: E402
from sparqlnav.datasets import load_questions  # noqa: E402
from sparqlnav.evaluation.runner import ExampleSplits  # noqa: E402
from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.llm import LLMConfig  # noqa: E402
from sparqlnav.retrieval.embed import default_embedder  # noqa: E402
from sparqlnav.retrieval.examples import examples_from_dataset  # noqa: E402
from sparqlnav.retrieval.kg_index import kg_schema  # noqa: E402
from sparqlnav.retrieval.local import LocalIndex  # noqa: E402
from sparqlnav.retrieval.records import example_doc, shape_docs  # noqa: E402
from sparqlnav.settings import Settings  # noqa: E402
from sparqlnav.strategies.retrieve import create  # noqa: E402
from sparqlnav.trace import Trace  # noqa: E402

DATASETS = {
    "CK25": ("ck25/prod-inst.ttl", "ck25/questions.yml"),
    "BESTIARY": ("bestiary/beastiary_kg.rdf", "bestiary/beastiary_with_qald_format.json"),
}
NAMED = "## What the question names"


def tokens(body: dict[str, Any]) -> int:
    """Characters / 4 of the request's messages."""
    return len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4


def measure(name: str, data: Path, home: Path) -> dict[str, Any]:
    """Generation-prompt sizes over a dataset's questions."""
    graph, questions_file = DATASETS[name]
    settings = Settings.from_env({"SPARQLNAV_HOME": str(home)})
    questions = load_questions(data / questions_file)
    examples = examples_from_dataset(data / questions_file)
    splits = ExampleSplits.from_folds([[q.id] for q in questions], questions)
    now: dict[str, str] = {}

    def answer(body: dict[str, Any]) -> Reply:
        system = str(body["messages"][0]["content"])
        if system.startswith("You prepare a question for retrieval"):
            return Reply(json.dumps({"sub_questions": [now["question"]], "classes": now["classes"].split()}))
        if system.startswith("You explain"):
            return Reply("Done.")
        return Reply(f"```sparql\n{now['query']}\n```")

    sizes: list[int] = []
    named: list[tuple[int, int]] = []  # (lines, tokens) of the block of what the question names
    with open_kg(str(data / graph), settings) as kg, ScriptedLLM() as server:
        schema = kg_schema(kg)
        with LocalIndex(None, default_embedder()) as index:
            index.build([example_doc(e) for e in examples]
                        + shape_docs(schema, labels=kg.names.labels_of(schema.class_names)))
            config = LLMConfig(model="m", base_url=server.base_url, api_key="k", timeout_s=30, max_retries=0)
            strategy = create(config, index=index, schema=schema, example_splits=splits)
            for q in questions:
                query = q.sparql or "ASK {}"
                classes = [c for c in schema.class_names if f"<{c}>" in query or schema.compact(c) in query]
                now.update(question=q.question, query=query,
                           classes=" ".join(re.split(r"[/#:]", c)[-1] for c in classes))
                first = len(server.requests)
                server.script([answer] * 8)  # decompose, generate, fixes, explain: whatever the run asks for
                strategy.run(q.question, kg, Trace())
                generate = next(r for r in server.requests[first:]
                                if str(r["messages"][0]["content"]).startswith("You write SPARQL"))
                sizes.append(tokens(generate))
                prompt = str(generate["messages"][0]["content"])
                if NAMED in prompt:
                    block = prompt.split(NAMED, 1)[1]
                    named.append((sum(line.startswith('- "') for line in block.splitlines()), len(block) // 4))
    return {
        "dataset": name,
        "questions": len(sizes),
        "mean": round(statistics.mean(sizes)),
        "median": round(statistics.median(sizes)),
        "max": max(sizes),
        "over_3k": sum(s > 3000 for s in sizes),
        "with_names": len(named),
        "names_lines_max": max((n for n, _ in named), default=0),
        "names_tokens_mean": round(statistics.mean(t for _, t in named)) if named else 0,
        "names_tokens_max": max((t for _, t in named), default=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the table here too")
    args = parser.parse_args()
    data = Path(os.environ.get("SPARQLNAV_DATA") or ROOT.parent / "shared" / "data")
    with tempfile.TemporaryDirectory() as home:
        rows = [measure(name, data, Path(home)) for name in DATASETS]
    head = ["dataset", "questions", "mean", "median", "max", "over_3k", "with_names", "names_lines_max",
            "names_tokens_mean", "names_tokens_max"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
