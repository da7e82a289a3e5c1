"""What a question names, looked up in the graph before a query is written for it: for each name, the things it
may be (with their classes, or, for a thing without a class, the properties that point at it) and the text values
stored under it (with the properties holding them), or that the graph has neither.

Lexical linking finds the names (quoted strings, codes, capitalised spans, and phrases that match a thing's name
closely) and the graph's name search finds the things: the local name index, or the endpoint's text index on a big
graph. Two short queries add classes, uses and stored values. No LLM call. A writer without lookup tools otherwise
guesses identifiers from the pattern of a sample value (`ontology:CommonL` → `ontology:AbyssalL`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sparqlnav.graph.endpoint import Endpoint
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.names import Kind, LabelIndex
from sparqlnav.graph.results import Term
from sparqlnav.graph.schema import META_NAMESPACES
from sparqlnav.graph.vocab import label_adds
from sparqlnav.question.linking import EntityCandidate, Mention, find_mentions, mention_candidates
from sparqlnav.question.words import name_words, word_similarity
from sparqlnav.sparql.prefixes import PrefixMap
from sparqlnav.tools.lookup import classes_of

MAX_NAMES = 8  # lines in a prompt: the best names only
PER_NAME = 3  # things shown for one name
CLOSE = 0.15  # a thing scoring within this of a name's best is an alternative worth showing
SAME_WORD = 0.95  # a lower-case phrase is a name only when each of its words is a word of the thing's name
LOOKUP_SECONDS = 5.0  # per query: the lookups are hints, skipped on a slow endpoint
SUBJECTS = 2000  # subjects read per lookup (a value or a country may have millions)
_NAMED_SOURCES = ("quoted", "code", "capitalised")
# Words for an attribute every thing has: a phrase ending in one names a column, not a thing.
_COLUMN_WORDS = frozenset({"id", "ids", "identifier", "identifiers", "uid", "key", "keys", "pk"})
# Codes that are quantities or ranks, not names: "10th", "50mm", "15x15".
_QUANTITY = re.compile(r"^\d+(?:[a-z]{1,3}|x\d+)$", re.I)


@dataclass(frozen=True)
class Use:
    """A property holding a value (or pointing at a thing), with the class of the subjects and how many there are."""

    property: str
    subject_class: str | None
    count: int


@dataclass(frozen=True)
class Thing:
    """A thing a name may be: its IRI, name, classes, and for a thing without a class what points at it."""

    iri: str
    label: str
    kind: Kind
    score: float
    classes: tuple[str, ...] = ()
    uses: tuple[Use, ...] = ()
    statements: int | None = None  # its own statements, counted when a name may be several things


@dataclass(frozen=True)
class Named:
    """One name of the question, with the things and stored text values it may be."""

    mention: str
    things: tuple[Thing, ...] = ()
    values: tuple[Use, ...] = ()  # the name stored as a text value: where
    value_text: str = ""  # the text as stored (the name, or its title-cased form)
    values_checked: bool = False  # whether stored values were looked up at all (a failed query says nothing)

    @property
    def found(self) -> bool:
        """Whether the graph has anything by this name."""
        return bool(self.things or self.values)


@dataclass(frozen=True)
class NamedThings:
    """What a question names, resolved against one graph."""

    names: tuple[Named, ...] = ()
    queries: int = 0

    def lines(self, prefixes: PrefixMap) -> list[str]:
        """One line per name, for a prompt."""
        return [_line(n, prefixes) for n in self.names]

    def to_json(self) -> list[dict[str, Any]]:
        """Plain data for traces."""
        return [
            {
                "mention": n.mention,
                "things": [{"iri": t.iri, "label": t.label, "kind": t.kind, "score": t.score,
                            "classes": list(t.classes)} for t in n.things],
                "values": [{"property": u.property, "class": u.subject_class, "count": u.count} for u in n.values],
                "found": n.found,
            }
            for n in self.names
        ]


def named_things(
    kg: KnowledgeGraph, question: str, *, endpoint: Endpoint | None = None, limit: int = MAX_NAMES
) -> NamedThings:
    """The names of `question` and what each may be in `kg` (`endpoint`: where to run the lookups, e.g. traced)."""
    endpoint = endpoint or kg.endpoint
    mentions = find_mentions(question)
    if not isinstance(kg.names, LabelIndex):
        # A remote name search costs a query per phrase: only the names a writer marks as names are looked up.
        mentions = [m for m in mentions if m.source in _NAMED_SOURCES]
    candidates = mention_candidates(kg, question, mentions, per_mention=PER_NAME + 2)
    chosen = _choose(mentions, candidates, limit)
    if not chosen:
        return NamedThings()
    queries = 0
    things = [t for _m, cands in chosen for t in cands if t.kind == "entity"]
    classes = classes_of(_on(kg, endpoint), [t.iri for t in things]) if things else {}
    queries += 1 if things else 0
    untyped = [t.iri for t in things if t.iri not in classes]
    named = [m for m, cands in chosen if m.source in _NAMED_SOURCES]
    forms = {m.text: _forms(m.text, kg.vocab.languages) for m in named}
    uses: dict[str, list[Use]] | None = {}
    if untyped or forms:
        uses = _uses(kg, endpoint, untyped, [f for fs in forms.values() for f in fs])
        queries += 1
    out = []
    for mention, cands in chosen:
        shown = tuple(
            Thing(c.iri, c.label, c.kind, c.score, tuple(classes.get(c.iri, ())),
                  tuple((uses or {}).get(Term.uri(c.iri).n3(), ())))
            for c in cands
        )
        stored: list[Use] = []
        text = ""
        for form in forms.get(mention.text, []):
            found = (uses or {}).get(form.n3(), [])
            if found and not stored:
                stored, text = found, form.value
        out.append(Named(mention.text, shown, tuple(stored), text, uses is not None and mention.text in forms))
    # One name, two identifiers of one kind ("Caypup" and "caypup", both beasts): say which holds the data. (Two
    # people called Sabrina have names of their own.)
    several = [t.iri for n in out for t in n.things if t.kind == "entity" and any(
        o is not t and o.kind == "entity" and o.classes == t.classes and o.label.casefold() == t.label.casefold()
        for o in n.things)]
    if several:
        counts = _statements(endpoint, several)
        queries += 1
        out = [replace(n, things=tuple(replace(t, statements=counts.get(t.iri, 0)) if t.iri in several else t
                                       for t in n.things)) if counts else n for n in out]
    return NamedThings(tuple(out), queries)


def _statements(endpoint: Endpoint, iris: Sequence[str]) -> dict[str, int]:
    """How many statements each IRI is the subject of ({} when the query fails)."""
    values = " ".join(f"<{i}>" for i in iris)
    result = endpoint.query(f"SELECT ?s (COUNT(*) AS ?n) WHERE {{ VALUES ?s {{ {values} }} ?s ?p ?o }} GROUP BY ?s",
                            timeout_s=LOOKUP_SECONDS)
    if not result.ok or result.table is None:
        return {}
    return {row["s"].value: int(row["n"].value) for row in result.table.rows
            if "s" in row and "n" in row and row["n"].value.isdigit()}


def _on(kg: KnowledgeGraph, endpoint: Endpoint) -> KnowledgeGraph:
    """`kg` with its queries sent through `endpoint` (a traced one)."""
    return kg if endpoint is kg.endpoint else replace(kg, endpoint=endpoint)


def _choose(
    mentions: Sequence[Mention], candidates: Sequence[EntityCandidate], limit: int
) -> list[tuple[Mention, list[EntityCandidate]]]:
    """The names to show, best first, none overlapping another: marked names (quoted, codes, capitalised) whether or
    not anything matches them, and phrases that match a thing's name closely; each with its best candidates."""
    by_mention: dict[Mention, list[EntityCandidate]] = {}
    for c in candidates:
        by_mention.setdefault(c.mention, []).append(c)
    ranked: list[tuple[float, Mention, list[EntityCandidate]]] = []
    for m in mentions:
        if _names_a_column(m):
            continue
        cands = sorted(by_mention.get(m, []), key=lambda c: (-c.score, -c.degree, c.iri))
        if m.source not in _NAMED_SOURCES:
            # A phrase of the question is a name only when it is a thing's name ("chaotic evil", not "products" for
            # the Production department); classes are in the shapes already.
            cands = [c for c in cands if c.kind == "entity" and _names_it(m, c)]
            if not cands:
                continue
        elif not cands and not _looks_like_a_name(m):
            continue
        best = cands[0].score if cands else 0.0
        kept = [c for c in cands if c.score >= best - CLOSE][:PER_NAME]
        ranked.append((best, m, kept))
    # Best first; a quoted name before what overlaps it (the writer's own marking says where a name ends).
    ranked.sort(key=lambda r: (-r[0], r[1].source != "quoted", r[1].first))
    taken: set[int] = set()
    said: set[str] = set()
    chosen: list[tuple[Mention, list[EntityCandidate]]] = []
    for _best, m, kept in ranked:
        if m.positions & taken or m.text.lower() in said:
            continue  # a word already part of a name, or a name said twice ("product … product")
        taken |= m.positions
        said.add(m.text.lower())
        chosen.append((m, kept))
        if len(chosen) >= limit:
            break
    # In the question's order: the writer reads them against it.
    return sorted(chosen, key=lambda pair: pair[0].first)


def _names_it(mention: Mention, candidate: EntityCandidate) -> bool:
    """Whether the mention and one of the candidate's names have the same words (inflections aside; a one-letter
    word of the name, BESTIARY's `Abyssal L`, does not count): "product" is not "Product Management"."""
    said = name_words(mention.text)
    for name in dict.fromkeys((candidate.matched, candidate.label)):
        words = [w for w in name_words(name) if len(w) > 1]
        if words and all(any(word_similarity(m, w) >= SAME_WORD for w in words) for m in said) and all(
                any(word_similarity(m, w) >= SAME_WORD for m in said) for w in words):
            return True
    return False


def _looks_like_a_name(mention: Mention) -> bool:
    """Whether a marked mention that matched nothing is worth saying "not found" of: not a capital that starts the
    question, a quantity ("10th"), single letters, a plural acronym ("IDs"), or two names joined by "and" (each
    is looked up on its own)."""
    text = mention.text
    if mention.source == "quoted":
        return True
    if (mention.first == 0 and mention.first == mention.last) or _QUANTITY.match(text):
        return False
    if re.search(r"\s(?:and|&)\s", text):
        return False
    return any(len(w) >= 3 for w in name_words(text)) and not re.fullmatch(r"[A-Z]{2,}s", text)


def _names_a_column(mention: Mention) -> bool:
    """"id", "owner id", "the key": a word for an attribute of every thing, not the name of one (relay players were
    shown three arbitrary things of a class for each "X id")."""
    words = name_words(mention.text)
    return mention.source != "quoted" and bool(words) and words[-1].lower() in _COLUMN_WORDS


def _forms(text: str, languages: Iterable[str]) -> list[Term]:
    """The literals a name may be stored as: as written and title-cased, plain and in the graph's languages, and
    plain with a space after or before it (text exported from a fixed-width column: "Lyon ")."""
    out: list[Term] = []
    for written in dict.fromkeys([text, text.title()]):
        for lang in dict.fromkeys(["", *languages]):
            out.append(Term.literal(written, lang=lang or None))
    for written in dict.fromkeys([text, text.title()]):
        out += [Term.literal(written + " "), Term.literal(" " + written)]
    return out


def _uses(
    kg: KnowledgeGraph, endpoint: Endpoint, iris: Sequence[str], literals: Sequence[Term]
) -> dict[str, list[Use]] | None:
    """For each IRI and literal (by its N3 form), the properties pointing at it or holding it, with the subjects'
    class, most used first; None when the query fails. Names and descriptions are left out (search found those)."""
    values = " ".join([*(f"<{i}>" for i in iris), *(t.n3() for t in literals)])
    typing = kg.vocab.type_predicate
    query = (
        f"SELECT ?o ?p ?c (COUNT(?s) AS ?n) WHERE {{ {{ SELECT ?o ?s ?p WHERE {{ VALUES ?o {{ {values} }} ?s ?p ?o }} "
        f"LIMIT {SUBJECTS} }} OPTIONAL {{ ?s <{typing}> ?c }} }} GROUP BY ?o ?p ?c ORDER BY DESC(?n) LIMIT 200"
    )
    result = endpoint.query(query, timeout_s=LOOKUP_SECONDS)
    if not result.ok or result.table is None:
        return None
    skip = set(kg.vocab.text_predicates)
    found: dict[str, list[Use]] = {}
    for row in result.table.rows:
        if "o" not in row or "p" not in row or row["p"].value in skip:
            continue
        c = row["c"].value if "c" in row and not row["c"].value.startswith(META_NAMESPACES) else None
        n = int(row["n"].value) if "n" in row and row["n"].value.isdigit() else 0
        merged = found.setdefault(row["o"].n3(), [])
        same = next((u for u in merged if u.property == row["p"].value), None)
        if same is None:
            merged.append(Use(row["p"].value, c, n))
        elif same.subject_class is None and c is not None:
            merged[merged.index(same)] = Use(same.property, c, max(same.count, n))
    return found


def _line(name: Named, prefixes: PrefixMap) -> str:
    """`- "Boggard": ontology:Boggard (a ontology:Beast), or ontology:BoggardL (a ontology:Language)`."""
    head = f'- "{name.mention}": '
    if not name.found:
        why = "no thing and no stored text has this name" if name.values_checked else "no thing has this name"
        return head + f"not found ({why}): do not make up an identifier for it"
    parts = [_thing(t, prefixes) for t in name.things]
    text = ", or ".join(parts)
    if name.values:
        spaced = name.value_text != name.value_text.strip()
        written = f'the text "{name.value_text}"' + (" (stored with spaces around it: match it exactly)" if spaced else "")
        stored = f"{written} as " + ", ".join(_use(u, prefixes) for u in name.values[:2])
        text = f"{text}; also {stored}" if text else f"no thing by this name; {stored}"
    return head + text


def _thing(t: Thing, prefixes: PrefixMap) -> str:
    label = f' "{t.label}"' if label_adds(t.iri, t.label) else ""
    facts = "" if t.statements is None else f", {t.statements:,} statement{'s' if t.statements != 1 else ''}"
    if t.kind == "class":
        return f"{prefixes.compact(t.iri)}{label} (a class)"
    if t.classes:
        return f"{prefixes.compact(t.iri)}{label} (a {', '.join(prefixes.compact(c) for c in t.classes)}{facts})"
    if t.uses:
        return f"{prefixes.compact(t.iri)}{label} (no class; a " + ", ".join(
            _use(u, prefixes) for u in t.uses[:2]) + f"{facts})"
    return f"{prefixes.compact(t.iri)}{label}" + (f" ({facts[2:]})" if facts else "")


def _use(u: Use, prefixes: PrefixMap) -> str:
    """`pv:country of 3 pv:Supplier`."""
    of = f" of {u.count:,} {prefixes.compact(u.subject_class)}" if u.subject_class else f" ({u.count:,} uses)"
    return prefixes.compact(u.property) + of


__all__ = ["Named", "NamedThings", "Thing", "Use", "named_things"]
