"""Strategies: ways of answering a question over a KG. Each is a module; this registry builds them by name."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from sparqlnav.errors import SparqlnavError

if TYPE_CHECKING:
    from sparqlnav.answer import Strategy
    from sparqlnav.llm import LLMConfig
    from sparqlnav.settings import Settings

# name -> (module, needs an LLM)
REGISTRY: dict[str, tuple[str, bool]] = {
    "lexical": ("sparqlnav.strategies.lexical", False),
    "explore": ("sparqlnav.strategies.explore", True),
    "retrieve": ("sparqlnav.strategies.retrieve", True),
    "build": ("sparqlnav.strategies.builder", True),
    "sql": ("sparqlnav.strategies.write_sql", True),  # one request writes SQL on a database (issue 35)
    "hybrid": ("sparqlnav.strategies.hybrid", True),
    "auto": ("sparqlnav.strategies.auto", False),  # the cascade; with no LLM, lexical alone
}


class StrategyUnavailable(SparqlnavError):
    """A strategy that cannot run here (unknown, not built yet, or needing an LLM that is not configured)."""


def available() -> list[str]:
    """Names of strategies whose module exists."""
    names = []
    for name, (module, _) in REGISTRY.items():
        try:
            import_module(module)
        except ImportError:
            continue
        names.append(name)
    return names


def settings_options(name: str, settings: Settings) -> dict[str, object]:
    """The options a strategy takes from the settings: the lexical threshold, and the settings themselves for
    the strategies that read more of them (retrieve, explore, build, hybrid, the cascade)."""
    if name == "lexical":
        return {"threshold": settings.lexical.threshold}
    if name == "auto":
        return {"settings": settings, "threshold": settings.lexical.threshold}
    if name in ("retrieve", "explore", "hybrid", "build", "sql"):
        return {"settings": settings}
    return {}


def make_strategy(
    name: str, llm: LLMConfig | None, *, settings: Settings | None = None, **options: object
) -> Strategy:
    """Build a strategy by name (`auto`: the cascade of strategies/auto.py; lexical alone without an LLM). With
    `settings`, the strategy also gets the options they set (explicit `options` win)."""
    if name not in REGISTRY:
        raise StrategyUnavailable(f"unknown strategy {name!r} (choose from {', '.join(available())})")
    module_name, needs_llm = REGISTRY[name]
    if needs_llm and llm is None:
        raise StrategyUnavailable(
            f"the {name} strategy needs an LLM: set OPENAI_BASE_URL, OPENAI_API_KEY and SPARQLNAV_LLM_MODEL "
            f"(any OpenAI-compatible server), or use --strategy lexical"
        )
    try:
        module = import_module(module_name)
    except ImportError as exc:
        raise StrategyUnavailable(f"the {name} strategy is not available in this build ({exc})") from None
    factory: Callable[..., Strategy] = module.create
    if settings is not None:
        options = {**settings_options(name, settings), **options}
    return factory(llm=llm, **options)
