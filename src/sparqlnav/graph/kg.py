"""A knowledge graph as the rest of sparqlnav sees it: an endpoint bundled with what lookup needs
(vocabulary, prefixes, names). `sparqlnav.graph.opening` makes one from a `--kg` value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.endpoint import Endpoint
from sparqlnav.graph.names import Names
from sparqlnav.graph.vocab import WIKIDATA, Vocabulary
from sparqlnav.sparql.prefixes import WIKIDATA as WIKIDATA_PREFIXES
from sparqlnav.sparql.prefixes import PrefixMap

PREPARE_SPARQL = "prepare_sparql"  # the key in `KnowledgeGraph.extra` of what makes a graph ready for SPARQL


class KGError(SparqlnavError):
    """A `--kg` value that cannot be opened; the message is one line."""


class SparqlPreparation(Protocol):
    """What makes a graph ready for SPARQL on demand (a database's graph copy), and what that would cost."""

    def __call__(self) -> object:
        """Make it (KGError when it cannot be made)."""
        ...

    @property
    def made(self) -> bool:
        """Whether it was made already."""
        ...

    def rows(self) -> int:
        """How many rows making it would copy."""
        ...


@dataclass
class KnowledgeGraph:
    """An endpoint plus what tools need to talk about its contents."""

    name: str
    endpoint: Endpoint
    vocab: Vocabulary
    prefixes: PrefixMap
    names: Names
    description: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    def sparql_ready(self) -> None:
        """Make what SPARQL needs when it is made on demand (a database's graph copy, `PREPARE_SPARQL` in `extra`):
        a SPARQL strategy calls it before it starts; KGError when it cannot be made (a database too big to copy)."""
        prepare = self.extra.get(PREPARE_SPARQL)
        if callable(prepare):
            prepare()

    def sparql_cost(self) -> int:
        """Rows a SPARQL query would first have to copy (0: the graph is ready for SPARQL now)."""
        prepare = self.extra.get(PREPARE_SPARQL)
        if prepare is None or getattr(prepare, "made", True):
            return 0
        rows = getattr(prepare, "rows", None)
        return int(rows()) if callable(rows) else 0

    def close(self) -> None:
        """Stop processes and close connections."""
        self.endpoint.close()
        close_names = getattr(self.names, "close", None)
        if callable(close_names):
            close_names()

    def __enter__(self) -> KnowledgeGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wikidata_prefixes() -> PrefixMap:
    """Prefixes for Wikidata."""
    return PrefixMap.default({**WIKIDATA_PREFIXES, **WIKIDATA.prefixes()})
