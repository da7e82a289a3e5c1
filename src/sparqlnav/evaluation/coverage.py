"""Whether a graph is the one a dataset was written for: do the IRIs its reference queries name occur in it?

A dataset run on the wrong graph (CK25's questions on the demo KG) scores 0 everywhere and looks like a
failed strategy; checking a sample of the queries' IRIs first lets the CLI say so before the run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sparqlnav.graph.endpoint import Endpoint
from sparqlnav.sparql.guard import tokens
from sparqlnav.sparql.prefixes import WELL_KNOWN

# Standard vocabularies are used by every dataset and need not occur in the data: they prove nothing.
_COMMON_NAMESPACES = tuple(WELL_KNOWN.values())


@dataclass(frozen=True)
class Coverage:
    """How many of the sampled IRIs of a dataset's queries the graph contains."""

    checked: list[str]
    found: list[str]

    @property
    def missing(self) -> list[str]:
        """Sampled IRIs the graph does not contain."""
        return [i for i in self.checked if i not in self.found]

    @property
    def poor(self) -> bool:
        """Fewer than half the sampled IRIs occur: the graph is likely not the dataset's."""
        return bool(self.checked) and len(self.found) * 2 < len(self.checked)


def query_iris(query: str) -> list[str]:
    """IRIs a query names (written in full or as prefixed names of its own prefixes), in order, once each."""
    prefixes: dict[str, str] = {}
    found: list[str] = []
    toks = tokens(query)
    for i, t in enumerate(toks):
        before = [x.text.upper() for x in toks[max(0, i - 2) : i]]
        if t.kind == "iri" and before[-2:-1] == ["PREFIX"] and toks[i - 1].kind == "pname":
            prefixes[toks[i - 1].text[:-1]] = t.text[1:-1]  # a declaration, not a term
            continue
        if t.kind == "iri" and before[-1:] != ["BASE"]:
            iri = t.text[1:-1]
        elif t.kind == "pname" and t.text.partition(":")[0] in prefixes and before[-1:] != ["PREFIX"]:
            prefix, _, local = t.text.partition(":")
            iri = prefixes[prefix] + local
        else:
            continue
        if iri and not iri.startswith(_COMMON_NAMESPACES) and iri not in found:
            found.append(iri)
    return found


def dataset_coverage(
    queries: Iterable[str | None], endpoint: Endpoint, *, sample: int = 40, timeout_s: float = 15.0
) -> Coverage | None:
    """Which of (up to `sample` of) the queries' IRIs occur in the graph; None when the graph cannot say."""
    checked: list[str] = []
    for query in queries:
        for iri in query_iris(query or ""):
            if iri not in checked and len(checked) < sample and ">" not in iri and '"' not in iri:
                checked.append(iri)
    if not checked:
        return None
    values = " ".join(f"<{i}>" for i in checked)
    result = endpoint.query(
        f"SELECT DISTINCT ?i WHERE {{ VALUES ?i {{ {values} }} "
        "{ ?i ?p ?o } UNION { ?s ?i ?o } UNION { ?s ?p ?i } }",
        timeout_s=timeout_s,
    )
    if not result.ok or result.table is None:
        return None  # a timeout or an engine error says nothing about the graph
    found = {row["i"].value for row in result.table.rows if "i" in row}
    return Coverage(checked, [i for i in checked if i in found])
