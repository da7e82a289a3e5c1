"""What a cascade hands to its next stage says truthfully what the earlier query gave."""

from __future__ import annotations

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.strategies.auto import outcome_of
from sparqlnav.strategies.lexical import LexicalStrategy
from sparqlnav.trace import Trace


def test_a_guess_kept_aside_is_handed_over_with_its_rows_not_as_no_rows(demo: KnowledgeGraph) -> None:
    # Lexical declines (below its threshold) but its best guess ran and returned rows: a relay model was told
    # "It gave: no rows" for such guesses and then avoided queries that were right.
    answer = LexicalStrategy().run("In which department is Ms. Brant?", demo, Trace())
    assert answer.status == "not_found" and answer.results is None
    guess = answer.extra["best_guess"]
    rows = len(guess["results"]["results"]["bindings"])
    assert rows > 0
    assert outcome_of(answer) == f"{rows} row(s), but the strategy was not sure they answer the question"

