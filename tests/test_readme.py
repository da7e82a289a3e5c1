"""The README's promises: its demo questions are answered correctly without an LLM, and CI runs its test command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import demo_path
from sparqlnav.strategies import make_strategy
from sparqlnav.trace import Trace

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def readme_demo_questions() -> list[str]:
    section = README.split("Demo questions the bundled KG answers", 1)[1].split("###", 1)[0]
    return re.findall(r"^- (.+\?)$", section, flags=re.MULTILINE)


def test_readme_lists_demo_questions_that_have_answers() -> None:
    listed = readme_demo_questions()
    known = {q["question"] for q in json.loads(demo_path().with_name("questions.json").read_text())}
    assert len(listed) >= 5 and set(listed) <= known


@pytest.mark.parametrize("question", readme_demo_questions())
def test_readme_demo_questions_are_answered_without_an_llm(question: str, demo: KnowledgeGraph) -> None:
    entry = next(q for q in json.loads(demo_path().with_name("questions.json").read_text()) if q["question"] == question)
    answer = make_strategy("auto", None, budget_s=60).run(question, demo, Trace())
    assert answer.strategy == "lexical" and answer.status == "answered"
    assert answer.results is not None
    if answer.results.is_boolean:
        assert answer.results.boolean is entry["answer"] or [answer.results.boolean] == entry["answer"]
    else:
        got = {t.value for t in answer.results.values()}
        assert got == {str(v) for v in entry["answer"]}


def test_ci_runs_the_readme_test_command() -> None:
    quickstart = README.split("## Quickstart", 1)[1].split("## ", 1)[0]
    commands = re.findall(r"```bash\n(.+?)\n```", quickstart, flags=re.DOTALL)
    assert len(commands) == 2 and "sparqlnav ask" in commands[0]
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_readme_python_api_examples_run_as_shown(sn_home: Path) -> None:
    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.+?)\n```", section, flags=re.DOTALL)
    assert len(blocks) == 2 and "sparqlnav.ask('Who discovered oxygen?')" in blocks[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SPARQLNAV_"))}
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(blocks)],
        env={**env, "SPARQLNAV_HOME": str(sn_home)},  # no LLM configured, as for a new user
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    demo = "https://demo.sparqlnav.org/entity/"
    assert f"{demo}Q1010" in done.stdout and f"{demo}Q1011" in done.stdout  # Scheele and Priestley
    assert any(line.startswith("The answers are Joseph Priestley and Carl Wilhelm Scheele. ") for line in lines)
    assert lines[-2:] == ["Yes.", "There are 4."]
