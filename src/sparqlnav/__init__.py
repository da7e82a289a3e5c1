"""sparqlnav: answer natural-language questions over knowledge graphs by writing, checking and running SPARQL.

    import sparqlnav
    answer = sparqlnav.ask("Who discovered oxygen?")
    print(answer.sparql, answer.results, answer.text)

The names below live in their own modules; each is imported on first use, so that `import sparqlnav` (which
also runs before any `import sparqlnav.<module>`) stays cheap: the API's modules pull in httpx, pydantic
and pyoxigraph.
"""

from __future__ import annotations

from sparqlnav.errors import SparqlnavError
from sparqlnav.version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING's run-time value, without importing typing (~10 ms)
if TYPE_CHECKING:
    from typing import Any

    from sparqlnav.answer import Answer, run_question
    from sparqlnav.api import ask
    from sparqlnav.conversation import Conversation, ConversationError, ConversationStore
    from sparqlnav.datasets import DatasetFormatError
    from sparqlnav.evaluation.report import ReportError
    from sparqlnav.evaluation.runner import EvalError
    from sparqlnav.evaluation.score import ScoreFileError
    from sparqlnav.graph.kg import KGError, KnowledgeGraph
    from sparqlnav.graph.opening import open_kg
    from sparqlnav.graph.store import LoadError
    from sparqlnav.llm import BudgetExceeded, LLMConfig, LLMError, LLMOutputError
    from sparqlnav.retrieval.embed import EmbedderUnavailable
    from sparqlnav.retrieval.examples import ExamplesError
    from sparqlnav.retrieval.index import IndexUnavailable
    from sparqlnav.retrieval.kg_index import SchemaUnavailable
    from sparqlnav.settings import Settings
    from sparqlnav.sparql.guard import Refused
    from sparqlnav.sparql.parser import SparqlSyntaxError
    from sparqlnav.strategies import StrategyUnavailable
    from sparqlnav.tools.lookup import LookupFailed
    from sparqlnav.trace import Event, Trace, Usage

_LAZY: dict[str, str] = {
    "ask": "sparqlnav.api",
    "open_kg": "sparqlnav.graph.opening",
    "run_question": "sparqlnav.answer",
    "Answer": "sparqlnav.answer",
    "Conversation": "sparqlnav.conversation",
    "ConversationStore": "sparqlnav.conversation",
    "KnowledgeGraph": "sparqlnav.graph.kg",
    "Trace": "sparqlnav.trace",
    "Event": "sparqlnav.trace",
    "Usage": "sparqlnav.trace",
    "Settings": "sparqlnav.settings",
    "LLMConfig": "sparqlnav.llm",
    # errors, all under SparqlnavError
    "KGError": "sparqlnav.graph.kg",
    "LoadError": "sparqlnav.graph.store",
    "LLMError": "sparqlnav.llm",
    "BudgetExceeded": "sparqlnav.llm",
    "LLMOutputError": "sparqlnav.llm",
    "StrategyUnavailable": "sparqlnav.strategies",
    "LookupFailed": "sparqlnav.tools.lookup",
    "Refused": "sparqlnav.sparql.guard",
    "SparqlSyntaxError": "sparqlnav.sparql.parser",
    "IndexUnavailable": "sparqlnav.retrieval.index",
    "SchemaUnavailable": "sparqlnav.retrieval.kg_index",
    "EmbedderUnavailable": "sparqlnav.retrieval.embed",
    "ExamplesError": "sparqlnav.retrieval.examples",
    "DatasetFormatError": "sparqlnav.datasets",
    "EvalError": "sparqlnav.evaluation.runner",
    "ReportError": "sparqlnav.evaluation.report",
    "ScoreFileError": "sparqlnav.evaluation.score",
    "ConversationError": "sparqlnav.conversation",
}

__all__ = [
    "Answer",
    "BudgetExceeded",
    "Conversation",
    "ConversationError",
    "ConversationStore",
    "DatasetFormatError",
    "EmbedderUnavailable",
    "EvalError",
    "Event",
    "ExamplesError",
    "IndexUnavailable",
    "KGError",
    "KnowledgeGraph",
    "LLMConfig",
    "LLMError",
    "LLMOutputError",
    "LoadError",
    "LookupFailed",
    "Refused",
    "ReportError",
    "SchemaUnavailable",
    "ScoreFileError",
    "Settings",
    "SparqlSyntaxError",
    "SparqlnavError",
    "StrategyUnavailable",
    "Trace",
    "Usage",
    "__version__",
    "ask",
    "open_kg",
    "run_question",
]


def __getattr__(name: str) -> Any:
    """Import an exported name from its module on first use."""
    # Imported here, not above: importing importlib costs more than the rest of this file.
    from importlib import import_module

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sparqlnav' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups find it directly
    return value


def __dir__() -> list[str]:
    """The exported names, for completion."""
    return sorted({*globals(), *__all__})
