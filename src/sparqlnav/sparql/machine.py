"""The answer shape for machines: a SELECT without the helper columns that only label another projected
entity (`?xLabel` from Wikidata's label service, `?name` from `?x rdfs:label ?name` / `?x pv:name ?name`), so a
scorer comparing flat sets of values (TEXT2SPARQL) does not count labels as extra answers. A label that is the
answer itself (its entity not projected) is kept.

The decision is made on the parsed query (which triple binds which variable, inside what); the edit is made on
the query's tokens, so its layout, prefixes and comments elsewhere stay as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparqlnav.sparql.guard import SparqlToken, tokens
from sparqlnav.sparql.parser import Iri, SparqlSyntaxError, TriplePattern, Var, parse_query

WIKIBASE_LABEL = "http://wikiba.se/ontology#label"
# Local names of predicates that give a thing its name; a KG's own label predicates can be added.
LABEL_LOCAL_NAMES = frozenset({"label", "prefLabel", "altLabel", "name"})
_LABEL_SUFFIXES = ("Label", "AltLabel", "Description")  # what Wikidata's label service binds


@dataclass(frozen=True)
class MachineQuery:
    """A query in the machine answer shape, and what was taken out of it."""

    query: str
    dropped: tuple[str, ...] = ()  # projected variables removed (names without ?)
    removed_patterns: int = 0  # patterns (triples, OPTIONAL or SERVICE blocks) removed with them

    @property
    def changed(self) -> bool:
        """Whether the query differs from the one given."""
        return bool(self.dropped)


def machine_query(query: str, *, label_predicates: Iterable[str] = (), prefixes: dict[str, str] | None = None) -> MachineQuery:
    """The query without projected label columns of other projected variables (unchanged when it has none or
    does not parse)."""
    try:
        parsed = parse_query(query, prefixes=prefixes)
    except SparqlSyntaxError:
        return MachineQuery(query)
    if parsed.form != "SELECT":
        return MachineQuery(query)
    toks = tokens(query)
    projection = _projection(toks)
    if projection is None:
        return MachineQuery(query)
    projected = {name for name, _ in projection}
    labels = set(label_predicates)
    outer = [p for p in parsed.patterns if not p.scope]
    drops: dict[str, list[tuple[int, int]]] = {}  # variable -> text spans of the patterns that bind it
    for name, _ in projection:
        binding = _label_binding(name, projected, outer, labels)
        if binding is not None:
            # The pattern goes only when something else binds the entity (else it would be left unbound).
            bound = any(binding.subject in (p.subject, p.object) for p in parsed.patterns if p is not binding)
            drops[name] = _pattern_spans(toks, binding, name) if bound else []
    service = _wikibase_service(toks, parsed.services)
    for name, _ in projection:
        base = next((name[: -len(s)] for s in _LABEL_SUFFIXES if name.endswith(s) and len(name) > len(s)), None)
        if service is not None and base in projected and base not in drops and name not in drops and not any(
            p.object == Var(name) for p in parsed.patterns if "SERVICE" not in p.context
        ):
            drops[name] = []
    if not drops:
        return MachineQuery(query)
    cuts: list[tuple[int, int]] = [span for name, pos in projection if name in drops for span in [_token_span(toks, pos)]]
    removed = 0
    for name, spans in drops.items():
        others = [t for i, t in enumerate(toks) if _is_var(t, name) and not _inside(t.pos, [*cuts, *spans])]
        if spans and not others:
            cuts += spans
            removed += 1
    if service is not None:
        label_vars = [n for n, _ in projection if n.endswith(_LABEL_SUFFIXES) and n not in drops]
        uses = [t for t in toks if t.kind == "var" and t.text[1:].endswith(_LABEL_SUFFIXES)
                and not _inside(t.pos, [*cuts, service])]
        if not label_vars and not uses and any(n.endswith(_LABEL_SUFFIXES) for n in drops):
            cuts.append(service)
            removed += 1
    return MachineQuery(_cut(query, cuts), tuple(n for n, _ in projection if n in drops), removed)


def _projection(toks: Sequence[SparqlToken]) -> list[tuple[str, int]] | None:
    """The plain variables the outer SELECT projects, with their token positions (None for SELECT *)."""
    start = next((i for i, t in enumerate(toks) if t.kind == "word" and t.text.upper() == "SELECT"), None)
    if start is None:
        return None
    out: list[tuple[str, int]] = []
    depth = 0
    for i in range(start + 1, len(toks)):
        t = toks[i]
        if depth == 0 and (t.text == "{" or (t.kind == "word" and t.text.upper() in ("WHERE", "FROM"))):
            return out
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        elif depth == 0 and t.text == "*":
            return None
        elif depth == 0 and t.kind == "var":
            out.append((t.text[1:], i))
    return None


def _is_label(pred: object, labels: set[str]) -> bool:
    if not isinstance(pred, Iri):
        return False
    local = pred.value.rsplit("#", 1)[-1].rsplit("/", 1)[-1]
    return pred.value in labels or local in LABEL_LOCAL_NAMES


def _label_binding(name: str, projected: set[str], patterns: Sequence[TriplePattern], labels: set[str]) -> TriplePattern | None:
    """The one label triple `?x <label> ?name` (?x projected too) when it is the only pattern naming ?name."""
    uses = [p for p in patterns if Var(name) in (p.subject, p.object) or p.predicate == Var(name)]
    if len(uses) != 1:
        return None
    p = uses[0]
    ok_context = all(c in ("OPTIONAL", "SERVICE") for c in p.context) and (p.service is None)
    if (
        ok_context
        and p.object == Var(name)
        and isinstance(p.subject, Var)
        and p.subject.name in projected
        and p.subject.name != name
        and _is_label(p.predicate, labels)
    ):
        return p
    return None


def _is_var(t: SparqlToken, name: str) -> bool:
    return t.kind == "var" and t.text[1:] == name


def _token_span(toks: Sequence[SparqlToken], i: int) -> tuple[int, int]:
    return toks[i].pos, toks[i].pos + len(toks[i].text)


def _inside(pos: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _close(toks: Sequence[SparqlToken], i: int) -> int:
    """The index of the `}` that closes the `{` at i."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == "{":
            depth += 1
        elif toks[j].text == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def _end(toks: Sequence[SparqlToken], j: int) -> int:
    """The text end of token j, with a following '.' when there is one."""
    if j + 1 < len(toks) and toks[j + 1].text == ".":
        j += 1
    return toks[j].pos + len(toks[j].text)


def _pattern_spans(toks: Sequence[SparqlToken], pattern: TriplePattern, name: str) -> list[tuple[int, int]]:
    """The text to remove with a label triple: its OPTIONAL block when that holds nothing else, else the triple
    (or its `; <label> ?name` part); nothing when the layout is one this does not recognise."""
    assert isinstance(pattern.subject, Var)
    for i, t in enumerate(toks):
        opening = _enclosing(toks, i) if _is_var(t, name) else None
        if opening is None or i < 2 or toks[i - 1].kind not in ("pname", "iri"):
            continue  # the projection, or not the object of a one-token predicate
        if "OPTIONAL" in pattern.context:
            if opening >= 1 and toks[opening - 1].text.upper() == "OPTIONAL":
                closing = _close(toks, opening)
                inner = {x.text[1:] for x in toks[opening:closing] if x.kind == "var"}
                if inner <= {name, pattern.subject.name}:
                    return [(toks[opening - 1].pos, _end(toks, closing))]
            return []
        after = toks[i + 1].text if i + 1 < len(toks) else "}"
        if after not in (".", "}", ";"):
            return []
        if toks[i - 2].text == ";":  # `… ; <label> ?name`
            return [(toks[i - 2].pos, t.pos + len(t.text))]
        if _is_var(toks[i - 2], pattern.subject.name) and toks[i - 3].text in (".", "{", "}"):
            if after == ";":  # first in a `;` list: the subject stays for the rest
                return [(toks[i - 1].pos, toks[i + 1].pos + 1)]
            return [(toks[i - 2].pos, _end(toks, i))]
        return []
    return []


def _enclosing(toks: Sequence[SparqlToken], i: int) -> int | None:
    """The index of the innermost `{` around token i."""
    depth = 0
    for j in range(i - 1, -1, -1):
        if toks[j].text == "}":
            depth += 1
        elif toks[j].text == "{":
            if depth == 0:
                return j
            depth -= 1
    return None


def _wikibase_service(toks: Sequence[SparqlToken], services: Sequence[object]) -> tuple[int, int] | None:
    """The text span of `SERVICE wikibase:label { … }`, when the query has one."""
    if not any(getattr(s, "endpoint", None) == WIKIBASE_LABEL for s in services):
        return None
    for i, t in enumerate(toks[:-2]):
        if t.kind == "word" and t.text.upper() == "SERVICE":
            target = toks[i + 1].text
            if target.endswith(":label") or target == f"<{WIKIBASE_LABEL}>":
                opening = i + 2 if toks[i + 2].text == "{" else None
                if opening is not None:
                    return t.pos, _end(toks, _close(toks, opening))
    return None


def _cut(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """The text without the spans; a line left blank by a cut goes too."""
    out = text
    for a, b in sorted(set(spans), reverse=True):
        while a > 0 and out[a - 1] in " \t":  # the space before a removed part goes with it
            a -= 1
        out = out[:a] + out[b:]
        start = out.rfind("\n", 0, a) + 1
        end = out.find("\n", a)
        end = len(out) if end < 0 else end
        if not out[start:end].strip():
            out = out[:start] + out[end + 1 :] if end < len(out) else out[: max(0, start - 1)]
    return out
