"""What one lexical run's query generation and scoring share: the budgeted graph, the linked question
and its intent, and cached property names."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sparqlnav.graph.endpoint import Endpoint, EndpointWrapper, Outcome, QueryResult
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import Term
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.question.intent import Intent
from sparqlnav.question.linking import Linking, property_names
from sparqlnav.question.words import WordToken
from sparqlnav.trace import Trace


class BudgetedEndpoint(EndpointWrapper):
    """An endpoint that refuses queries once a deadline has passed and caps each one's time limit."""

    def __init__(self, inner: Endpoint, deadline: float, per_query_s: float) -> None:
        super().__init__(inner)
        self.deadline = deadline
        self.per_query_s = per_query_s

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Run within what is left of the budget, or report a timeout without running."""
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            return QueryResult(sparql, Outcome.TIMEOUT, message="the time budget is spent")
        limit = min(left, self.per_query_s, timeout_s if timeout_s is not None else left)
        return self.inner.query(sparql, timeout_s=limit)


@dataclass
class Context:
    """The budgeted graph and the linked question; every query of the run goes through `query`."""

    kg: KnowledgeGraph
    trace: Trace
    deadline: float
    budget_s: float
    linking: Linking
    intent: Intent
    content: set[int]  # positions of the question's content words
    queries: int = 0
    _names_cache: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        wb = self.kg.vocab.wikibase
        self.type_pred = self.kg.vocab.types[0]
        self.subclass_pred = (
            wb.direct_iri("P279") if wb else "http://www.w3.org/2000/01/rdf-schema#subClassOf"
        )
        self.skip_preds = set(self.kg.vocab.descriptions) | set(self.kg.vocab.aliases)
        self.wb = wb

    @property
    def tokens(self) -> list[WordToken]:
        """The question's tokens."""
        return self.linking.tokens

    # -- plumbing ----------------------------------------------------------------------------
    def remaining(self) -> float:
        """Seconds left in the budget."""
        return self.deadline - time.monotonic()

    def query(self, sparql: str) -> QueryResult | None:
        """Run one query within the budget; None when the budget is spent."""
        if self.remaining() <= 0.05:
            return None
        self.queries += 1
        return self.kg.endpoint.query(sparql)

    def rows(self, sparql: str) -> list[dict[str, Term]]:
        """The rows of a query, or none when it failed or the budget is spent."""
        res = self.query(sparql)
        if res is None or not res.ok or res.table is None:
            return []
        return res.table.rows

    def usable_predicate(self, iri: str, *, hop: int = 1) -> bool:
        """Whether a predicate can carry an answer; `hop=2` also admits the route into statement nodes."""
        if iri in self.skip_preds:
            return False
        wb = self.wb
        if wb:
            if iri.startswith((wb.direct, wb.statement, wb.qualifier)):
                return True
            if iri.startswith(wb.claim):
                return (
                    hop == 2
                )  # p:P… leads to a statement node: never an answer, a route to a qualifier
        return not iri.startswith("http://wikiba.se/ontology#")

    def is_claim(self, iri: str) -> bool:
        """A Wikibase `p:` predicate (subject → statement node)."""
        wb = self.wb
        return bool(
            wb
            and iri.startswith(wb.claim)
            and not iri.startswith((wb.direct, wb.statement, wb.qualifier))
        )

    def names(self, iri: str, label: str | None = None) -> tuple[str, ...]:
        """A property's names (label first), cached for the run."""
        if iri not in self._names_cache:
            self._names_cache[iri] = tuple(property_names(self.kg, iri, label))
        return self._names_cache[iri]

    def label(self, iri: str) -> str:
        """The display name of an IRI."""
        return self.names(iri)[0] if self.names(iri) else humanise(local_name(iri))

