"""What sparqlnav learns about a remote endpoint before its first question, by cheap probes only: its size
(VoID `void:triples`, else a count that must finish in seconds), its text index, and its schema terms from VoID.
Remembered as `endpoint.json` beside the endpoint's other files under the sparqlnav home."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sparqlnav.graph.endpoint import Endpoint
from sparqlnav.graph.search import SchemaTerm, TextSearch, detect_search
from sparqlnav.graph.vocab import Vocabulary

PROBE_TIMEOUT_S = 5.0
SCHEMA_TERMS_CAP = 5_000
VOID = "http://rdfs.org/ns/void#"
PROFILE_VERSION = 1


@dataclass
class EndpointProfile:
    """An endpoint's size (None: it would not say in time), where that came from, and how to search it."""

    triples: int | None
    size_from: str  # "void", "count" or "unknown"
    search: TextSearch
    schema_terms: list[SchemaTerm] = field(default_factory=list)
    checked_at: float = 0.0

    def is_small(self, max_triples: int) -> bool:
        """Whether names may be downloaded into a local index: only when the endpoint is known to be small."""
        return self.triples is not None and self.triples <= max_triples

    def to_json(self) -> dict[str, object]:
        """Plain data for endpoint.json."""
        data = asdict(self)
        data["search"] = self.search.value
        data["version"] = PROFILE_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, object]) -> EndpointProfile:
        """Read endpoint.json's data (raises ValueError/KeyError/TypeError when it is not one)."""
        if data.get("version") != PROFILE_VERSION:
            raise ValueError("another profile version")
        triples = data["triples"]
        terms = data.get("schema_terms") or []
        if not isinstance(terms, list):
            raise TypeError("schema_terms")
        return cls(
            triples=int(triples) if isinstance(triples, int) else None,
            size_from=str(data["size_from"]),
            search=TextSearch(str(data["search"])),
            schema_terms=[SchemaTerm(str(t["iri"]), t["kind"], str(t.get("label", ""))) for t in terms],
            checked_at=float(str(data.get("checked_at", 0.0))),
        )


def endpoint_size(endpoint: Endpoint) -> tuple[int | None, str]:
    """(triples, source): VoID's largest `void:triples`, else a COUNT that must answer within a few seconds."""
    res = endpoint.query(
        f"SELECT (MAX(?n) AS ?triples) WHERE {{ ?d <{VOID}triples> ?n }}", timeout_s=PROBE_TIMEOUT_S
    )
    value = res.table.rows[0].get("triples") if res.ok and res.table and res.table.rows else None
    if value is not None and value.value.isdigit():
        return int(value.value), "void"
    res = endpoint.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", timeout_s=PROBE_TIMEOUT_S)
    value = res.table.rows[0].get("n") if res.ok and res.table and res.table.rows else None
    if value is not None and value.value.isdigit() and not (res.table and res.table.truncated):
        return int(value.value), "count"
    return None, "unknown"


def void_schema_terms(endpoint: Endpoint, vocab: Vocabulary) -> list[SchemaTerm]:
    """Properties and classes the endpoint's VoID names (property and class partitions), with labels when given."""
    label = vocab.labels[0]
    terms: list[SchemaTerm] = []
    for var, pred, kind in (("p", "property", "property"), ("c", "class", "class")):
        res = endpoint.query(
            f"SELECT DISTINCT ?{var} ?l WHERE {{ ?part <{VOID}{pred}> ?{var} OPTIONAL {{ ?{var} <{label}> ?l }} }} "
            f"LIMIT {SCHEMA_TERMS_CAP}",
            timeout_s=PROBE_TIMEOUT_S,
        )
        seen: set[str] = set()
        for row in res.table.rows if res.ok and res.table else []:
            term = row.get(var)
            if term is not None and term.kind == "uri" and term.value not in seen:
                seen.add(term.value)
                terms.append(SchemaTerm(term.value, kind, row["l"].value if "l" in row else ""))  # type: ignore[arg-type]
    return terms


def probe_endpoint(endpoint: Endpoint, vocab: Vocabulary) -> EndpointProfile:
    """Learn an endpoint's size, text search and VoID schema terms (a handful of queries of a few seconds each)."""
    triples, source = endpoint_size(endpoint)
    return EndpointProfile(
        triples=triples,
        size_from=source,
        search=detect_search(endpoint, vocab),
        schema_terms=void_schema_terms(endpoint, vocab),
        checked_at=time.time(),
    )


def load_or_probe(path: Path, endpoint: Endpoint, vocab: Vocabulary) -> EndpointProfile:
    """The remembered profile at `path`, or a fresh probe written there."""
    try:
        return EndpointProfile.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    profile = probe_endpoint(endpoint, vocab)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(profile.to_json(), indent=1), encoding="utf-8")
    tmp.replace(path)
    return profile


__all__ = ["EndpointProfile", "endpoint_size", "load_or_probe", "probe_endpoint", "void_schema_terms"]
