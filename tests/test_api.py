"""The public Python API: `sparqlnav.ask`, the names `sparqlnav` exports, one exception tree, unique class names."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import sparqlnav
from sparqlnav.graph.kg import KnowledgeGraph

PACKAGE = Path(sparqlnav.__file__).parent
DEMO = "https://demo.sparqlnav.org/entity/"


def public_classes(root: Path) -> dict[str, list[str]]:
    """Module-level public class names of every module under `root`, with the modules defining each."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(path.relative_to(root).as_posix())
    return found


def test_public_class_names_are_unique_across_the_package() -> None:
    classes = public_classes(PACKAGE)
    assert len(classes) > 100  # the walk really saw the package
    assert {"Answer", "Trace", "Usage", "LLMUsage", "NameHit", "IndexHit", "RequestGuard"} <= classes.keys()
    duplicates = {name: where for name, where in classes.items() if len(where) > 1}
    assert duplicates == {}


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a fresh user: a private home, no LLM configured, no stray sparqlnav settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SPARQLNAV_"))}
    return {**env, "SPARQLNAV_HOME": str(home)}


def test_ask_in_a_fresh_python_process_answers_the_demo_question(tmp_path: Path) -> None:
    code = "import sparqlnav; a = sparqlnav.ask('Who discovered oxygen?'); print(a.sparql, a.results)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(tmp_path), capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert "SELECT" in done.stdout and "wdt:P61" in done.stdout  # the query: discoverer (P61) of oxygen
    assert f"{DEMO}Q1011" in done.stdout  # Joseph Priestley
    assert f"{DEMO}Q1010" in done.stdout  # Carl Wilhelm Scheele
    assert (tmp_path / "stores").is_dir()  # the demo store was built under the given home, nowhere else


def test_ask_over_an_open_graph_reports_events_and_usage(demo: KnowledgeGraph) -> None:
    seen: list[sparqlnav.Event] = []
    answer = sparqlnav.ask("Who discovered oxygen?", kg=demo, strategy="lexical", on_event=seen.append)
    assert isinstance(answer, sparqlnav.Answer)
    assert answer.question == "Who discovered oxygen?" and answer.strategy == "lexical"
    assert answer.text == "The answers are Joseph Priestley and Carl Wilhelm Scheele."
    assert answer.results is not None
    assert {t.value for t in answer.results.values()} == {f"{DEMO}Q1010", f"{DEMO}Q1011"}
    # Every event reached the listener, in order; usage is the trace's, counted from those events.
    assert [e.seq for e in seen] == [e.seq for e in answer.trace] == list(range(len(answer.trace)))
    assert answer.usage is answer.trace.usage
    assert answer.usage.sparql_queries == len(answer.trace.of_kind("sparql")) > 0
    assert answer.usage.llm_calls == 0 and answer.usage.seconds > 0
    # The `ask --json` contract keeps the text under "answer".
    assert answer.to_json()["answer"] == answer.text
    # A graph passed in belongs to the caller: still open.
    assert demo.endpoint.query("ASK { ?s ?p ?o }").ok


def test_asking_for_a_strategy_that_needs_an_llm_without_one_is_a_sparqlnav_error(
    demo: KnowledgeGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(sparqlnav.SparqlnavError, match="needs an LLM") as info:
        sparqlnav.ask("Who discovered oxygen?", kg=demo, strategy="explore")
    assert type(info.value) is sparqlnav.StrategyUnavailable


def test_every_exported_name_resolves() -> None:
    assert sparqlnav.__version__ == "0.1.0"
    for name in sparqlnav.__all__:
        assert getattr(sparqlnav, name) is not None, name
    assert sparqlnav.open_kg.__module__ == "sparqlnav.graph.opening"
    assert sparqlnav.Settings.__module__ == "sparqlnav.settings"
    assert sparqlnav.LLMConfig.__module__ == "sparqlnav.llm.config"
    assert sparqlnav.Trace.__module__ == "sparqlnav.trace"
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = sparqlnav.no_such_thing  # type: ignore[attr-defined]


def test_every_exception_sparqlnav_defines_is_a_sparqlnav_error() -> None:
    exceptions: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(sparqlnav.__path__, "sparqlnav."):
        if info.name == "sparqlnav.__main__":  # runs the CLI when imported
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == info.name:
                exceptions[f"{info.name}.{name}"] = obj
    assert len(exceptions) >= 18  # the walk really found them
    public = {k: v for k, v in exceptions.items() if not k.rsplit(".", 1)[1].startswith("_")}
    assert [k for k, v in public.items() if not issubclass(v, sparqlnav.SparqlnavError)] == []
    exported = [getattr(sparqlnav, n) for n in sparqlnav.__all__]
    assert {e for e in exported if isinstance(e, type) and issubclass(e, Exception)} >= {
        sparqlnav.KGError, sparqlnav.LLMError, sparqlnav.BudgetExceeded, sparqlnav.StrategyUnavailable,
        sparqlnav.LookupFailed, sparqlnav.SchemaUnavailable, sparqlnav.SparqlSyntaxError, sparqlnav.EvalError,
    }
    # Errors that were ValueErrors or KeyErrors still are, for callers that catch those.
    assert issubclass(sparqlnav.DatasetFormatError, ValueError) and issubclass(sparqlnav.ScoreFileError, ValueError)


def test_import_sparqlnav_stays_cheap(tmp_path: Path) -> None:
    code = (
        "import sys, sparqlnav; heavy = ['httpx', 'pydantic', 'pyoxigraph', 'numpy', 'typing', 'sparqlnav.api'];"
        " print([m for m in heavy if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
