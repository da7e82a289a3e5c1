"""The Python API: ask a knowledge graph a question in one call."""

from __future__ import annotations

from sparqlnav.answer import Answer, Strategy, run_question
from sparqlnav.context import Turn
from sparqlnav.conversation import Conversation
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.strategies import make_strategy
from sparqlnav.trace import Listener, Trace


def ask(
    question: str,
    *,
    kg: str | KnowledgeGraph = "demo",
    strategy: str | Strategy = "auto",
    settings: Settings | None = None,
    llm: LLMConfig | None = None,
    timeout: float | None = None,
    on_event: Listener | None = None,
    conversation: Conversation | None = None,
    refine: int | None = None,
) -> Answer:
    """Answer `question` over `kg` (a `--kg` value or an open graph) with `strategy` (a name or an instance).

    `settings` and `llm` default to the environment (SPARQLNAV_*, OPENAI_BASE_URL, SPARQLNAV_LLM_MODEL); with
    no LLM configured, `auto` answers with the lexical strategy. `timeout` is the time limit per SPARQL query
    of a graph opened here. `on_event` sees every trace event as it happens. With `conversation`, the question
    is a follow-up: its earlier turns (up to turn `refine` when given) come before it, and the answer is added
    as its next turn. A graph or strategy made here is closed before returning; one passed in is left to its
    owner.
    """
    context = conversation.context(refine) if conversation is not None else None
    settings = settings if settings is not None else Settings.from_env()
    if isinstance(strategy, str):
        chosen = make_strategy(strategy, llm if llm is not None else settings.llm, settings=settings)
    else:
        chosen = strategy
    trace = Trace()
    if on_event is not None:
        trace.subscribe(on_event)
    try:
        graph = kg if isinstance(kg, KnowledgeGraph) else open_kg(kg, settings.with_timeout(timeout))
        try:
            answer = run_question(chosen, question, graph, trace, context)
            if conversation is not None:
                conversation.add(Turn.of(answer, graph))
            return answer
        finally:
            if graph is not kg:
                graph.close()
    finally:
        close = getattr(chosen, "close", None)
        if chosen is not strategy and callable(close):
            close()


__all__ = ["ask"]
