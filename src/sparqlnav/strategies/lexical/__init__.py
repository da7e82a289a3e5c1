"""The `lexical` strategy: answers simple questions with no LLM, in the spirit of QAnswer.

It links the question's words to entities, classes, literal values and properties, enumerates queries of
a bounded shape over them (one and two hops in either direction, intersections of two entities, a type
constraint, COUNT for "how many", ASK for yes/no, ORDER BY … LIMIT 1 for superlatives, numeric filters),
runs the most promising ones within a time budget, and ranks the answers by how much of the question the
query explains and how well the answer fits what was asked (who → a person, when → a date, how many → a
number). Below a confidence threshold it says "not found" rather than guess.
"""

from sparqlnav.strategies.lexical.candidates import Candidate
from sparqlnav.strategies.lexical.context import BudgetedEndpoint
from sparqlnav.strategies.lexical.strategy import (
    DEFAULT_BUDGET_S,
    DEFAULT_THRESHOLD,
    LexicalStrategy,
    create,
)

__all__ = ["DEFAULT_BUDGET_S", "DEFAULT_THRESHOLD", "BudgetedEndpoint", "Candidate", "LexicalStrategy", "create"]
