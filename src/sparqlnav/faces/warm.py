"""Warm a server at start, so its first question costs what its second does.

Why: a server opened its default graph, started its engine, imported the strategy's modules, compiled the
query guard's lexers and made its LLM clients (and their TLS contexts) on the first question, which then took
about a second more than the next one. Each step here is one the first question would take anyway, and none
asks the LLM anything or writes anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Warmed:
    """What warming did: each step's name and seconds, and the steps that failed (with why)."""

    steps: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def warm(
    open_default: Callable[[], KnowledgeGraph],
    make_strategy: Callable[[], object],
    *,
    llm: LLMConfig | None,
) -> Warmed:
    """Open the default graph (its store, name index and engine), run one trivial query through the guard and the
    engine's HTTP client, look a name up, and make the default strategy (its modules; with `llm`, its LLM clients
    and their TLS contexts). A step that fails is logged and left to the first question, which reports it.

    A retrieval index is not opened here: opening one may mean building it, which a server with an LLM and no
    stored index would then do at every start."""
    steps: dict[str, float] = {}
    failed: dict[str, str] = {}

    def step(name: str, do: Callable[[], object]) -> object | None:
        started = time.monotonic()
        try:
            done = do()
        except (SparqlnavError, OSError, RuntimeError, ValueError) as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
            log.warning("warming: %s failed (%s); the first question will try again", name, failed[name])
            return None
        steps[name] = time.monotonic() - started
        return done

    graph = step("graph", open_default)
    # A database with an LLM is answered in SQL where it lives: its graph copy is not made ahead of a question.
    if isinstance(graph, KnowledgeGraph) and not (llm is not None and graph.sparql_cost() > 0):
        step("engine", lambda: graph.endpoint.query("ASK { }"))
        step("names", lambda: graph.names.search("warm", limit=1))
    step("strategy" if llm is None else "strategy and LLM clients", make_strategy)
    log.info("warmed", extra={"fields": {"seconds": {k: round(v, 3) for k, v in steps.items()}}})
    return Warmed(steps, failed)
