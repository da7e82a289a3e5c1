"""A run's memory: the steps it kept (`Record`) and every IRI an observation or the question showed (`Memory`),
and the IRIs a query or a text names, compared as one identifier whatever their spelling."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparqlnav.graph.endpoint import Outcome, QueryResult
from sparqlnav.graph.vocab import Vocabulary
from sparqlnav.sparql.guard import SparqlToken, declared_prefixes, tokens
from sparqlnav.sparql.prefixes import PrefixMap, undeclared_prefixes


def normalise_arguments(arguments: Mapping[str, Any]) -> str:
    """A canonical text of tool arguments: sorted keys, runs of whitespace in strings collapsed."""

    def norm(v: Any) -> Any:
        if isinstance(v, str):
            return " ".join(v.split())
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(dict(arguments)), sort_keys=True, ensure_ascii=False)


@dataclass
class Record:
    """One step the run kept: the action, the query it ran, and how that went."""

    tool: str
    arguments: dict[str, Any]
    query: str | None = None
    result: QueryResult | None = None
    ok: bool = True

    @property
    def key(self) -> str:
        """What makes two actions the same."""
        return f"{self.tool}:{normalise_arguments(self.arguments)}"

    @property
    def answered(self) -> bool:
        """The step ran a query that produced rows or a boolean."""
        r = self.result
        return (
            r is not None
            and r.outcome is Outcome.OK
            and r.table is not None
            and not r.table.is_empty
        )


@dataclass
class Memory:
    """What the run did and saw so far: kept steps, and every IRI an observation (or the question) showed."""

    prefixes: PrefixMap = field(default_factory=PrefixMap.default)
    vocab: Vocabulary | None = None
    records: list[Record] = field(default_factory=list)
    _seen: list[set[str]] = field(default_factory=list, init=False)  # IRIs shown by each record
    _base: set[str] = field(default_factory=set, init=False)

    def note_text(self, text: str) -> None:
        """Count the IRIs in `text` (e.g. the question) as seen from the start."""
        self._base |= iris_in_text(text, self.prefixes, self.vocab)

    def record(self, record: Record, observation_text: str = "") -> None:
        """Keep a step and what its observation showed (a query that returned rows confirms its own IRIs)."""
        self.records.append(record)
        seen = iris_in_text(observation_text, self.prefixes, self.vocab)
        if record.answered and record.query:
            seen |= set(query_iris(record.query, self.prefixes, self.vocab))
        self._seen.append(seen)

    def find(self, key: str) -> int | None:
        """The 0-based index of the first kept record whose action has this `Record.key`, if any."""
        return next((i for i, rec in enumerate(self.records) if rec.key == key), None)

    def truncate(self, keep: int) -> None:
        """Forget every step after the first `keep` (a rollback)."""
        del self.records[keep:]
        del self._seen[keep:]

    @property
    def seen(self) -> set[str]:
        """Every IRI shown so far."""
        return self._base.union(*self._seen)

    def last_query(self) -> tuple[int, Record] | None:
        """The latest step that ran a query, with its 1-based step number."""
        for i in range(len(self.records) - 1, -1, -1):
            if self.records[i].query is not None:
                return i + 1, self.records[i]
        return None


def normalise_iri(iri: str, vocab: Vocabulary | None) -> str:
    """Wikibase property forms (wdt:/p:/ps:/pq:) are the same identifier as their property entity."""
    wb = vocab.wikibase if vocab else None
    if wb:
        pid = wb.property_id(iri)
        if pid:
            return wb.entity_iri(pid)
    return iri


def _iris(toks: Sequence[SparqlToken], prefixes: PrefixMap, declared: Mapping[str, str]) -> Iterable[str]:
    skip: set[int] = set()
    for i, t in enumerate(toks):  # the namespace IRIs of PREFIX/BASE lines are not uses
        if t.kind == "word" and t.text.upper() in ("PREFIX", "BASE"):
            skip.update((i + 1, i + 2))
    for i, t in enumerate(toks):
        if i in skip:
            continue
        if t.kind == "iri":
            yield t.text[1:-1]
        elif t.kind == "pname":
            name = t.text.rstrip(".")  # a pname never ends in '.': that dot ends the triple
            prefix, _, local = name.partition(":")
            ns = declared.get(prefix) or (prefixes.mapping.get(prefix) if prefix else None)
            if ns:
                yield ns + local


def iris_in_text(text: str, prefixes: PrefixMap, vocab: Vocabulary | None = None) -> set[str]:
    """IRIs written in a text, as `<iri>` or as prefixed names with a known prefix (normalised)."""
    if not text:
        return set()
    toks = tokens(text)
    return {normalise_iri(i, vocab) for i in _iris(toks, prefixes, declared_prefixes(toks))}


def query_iris(query: str, prefixes: PrefixMap, vocab: Vocabulary | None = None) -> list[str]:
    """IRIs a query uses, in order of first use (normalised, PREFIX namespaces left out)."""
    toks = tokens(query)
    seen: dict[str, None] = {}
    for iri in _iris(toks, prefixes, declared_prefixes(toks)):
        seen.setdefault(normalise_iri(iri, vocab), None)
    return list(seen)


def canonical_query(query: str, prefixes: PrefixMap) -> str:
    """A query without layout, comments, prefix declarations and keyword case: equal means same query."""
    toks = tokens(query)
    declared = declared_prefixes(toks)
    out: list[str] = []
    skip = 0
    for t in toks:
        if skip:
            skip -= 1
            continue
        if t.kind == "word" and t.text.upper() == "PREFIX":
            skip = 2
            continue
        if t.kind == "word":
            out.append(t.text.upper())
        elif t.kind == "pname":
            prefix, _, local = t.text.partition(":")
            ns = declared.get(prefix) or prefixes.mapping.get(prefix)
            out.append(f"<{ns}{local}>" if ns else t.text)
        else:
            out.append(t.text)
    return " ".join(out)


def unknown_prefixes(query: str, prefixes: PrefixMap) -> list[str]:
    """Prefixes a query uses that it does not declare and that `prefixes` does not know."""
    return [p for p in undeclared_prefixes(query) if p not in prefixes.mapping]
