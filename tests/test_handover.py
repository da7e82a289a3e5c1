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



def test_a_kept_aside_ask_is_handed_over_as_yes_or_no() -> None:
    """Relay players read "It gave: 1 row(s)" for a lexical ASK and could not tell what it had said."""
    from sparqlnav.answer import Answer
    from sparqlnav.strategies.auto import outcome_of
    from sparqlnav.trace import Trace

    guess = {"sparql": "ASK { ?s ?p ?o }", "results": {"head": {}, "boolean": False}, "confidence": 0.1}
    answer = Answer("Is it?", "lexical", None, None, "not found", Trace(), status="not_found",
                    extra={"best_guess": guess})
    assert outcome_of(answer) == "no, but the strategy was not sure it answers the question"
    rows = {"sparql": "SELECT ?a WHERE {}", "results": {"head": {"vars": ["a"]}, "results": {"bindings": [{}]}}}
    assert outcome_of(Answer("Q", "lexical", None, None, "", Trace(), status="not_found",
                             extra={"best_guess": rows})).startswith("1 row(s), but")
