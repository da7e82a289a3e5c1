"""What the query builder shows the feedback module around one step (the build strategy fills it; other
strategies leave `StepContext.build` empty, so the builder's detectors stay silent for them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sparqlnav.sparql.draft import Aggregation, Draft


@dataclass
class BuildView:
    """What the builder knows around one step: before it runs (draft, relations shown, what the question
    wants) and after (rows of the draft, relations found)."""

    draft: Draft
    relations: Mapping[str, frozenset[str]] = field(default_factory=dict)  # target → relation IRIs shown
    linked: tuple[str, ...] = ()  # entities linked in the question, as the model was shown them
    wanted: tuple[Aggregation, ...] = ()  # aggregations the question asks for (any one will do)
    fired: frozenset[str] = frozenset()  # guideline ids fired earlier in the run
    rows: int | None = None  # after add_*/set_answer: rows the draft returned (None: it did not run)
    relations_found: int | None = None  # after get_relations
