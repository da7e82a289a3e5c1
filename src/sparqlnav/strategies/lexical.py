"""The `lexical` strategy: answers simple questions with no LLM, in the spirit of QAnswer.

It links the question's words to entities, classes, literal values and properties, enumerates queries of
a bounded shape over them (one and two hops in either direction, intersections of two entities, a type
constraint, COUNT for "how many", ASK for yes/no, ORDER BY … LIMIT 1 for superlatives, numeric filters),
runs the most promising ones within a time budget, and ranks the answers by how much of the question the
query explains and how well the answer fits what was asked (who → a person, when → a date, how many → a
number). Below a confidence threshold it says "not found" rather than guess.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sparqlnav.answer import Answer
from sparqlnav.graph.endpoint import Endpoint, EndpointWrapper, Outcome, QueryResult
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import XSD, ResultTable, Term, clip, shown_labels
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.question.intent import (
    DATE_TYPES,
    NUMBER,
    PERSON_WORDS,
    Comparison,
    Superlative,
    analyse,
)
from sparqlnav.question.linking import (
    EntityCandidate,
    Token,
    content_positions,
    link,
    property_names,
    relation_match,
    word_similarity,
)
from sparqlnav.sparql.prefixes import declare_prefixes
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace

Direction = Literal["out", "in"]
Form = Literal["select", "count", "ask", "aggregate"]

DEFAULT_BUDGET_S = 5.0
DEFAULT_THRESHOLD = 0.4
# Scores (coverage, link quality, answer fit) run from about 0.2 for a stray guess to about 1.25 for a
# query that explains every word with sure links and fits the asked-for answer type.
CONFIDENCE_FLOOR = 0.2
CONFIDENCE_CEILING = 1.25
MAX_ANCHORS = 4
MAX_CLASSES = 2
MAX_EXECUTE = 60
QUERY_TIMEOUT_S = 2.0
# How much a query's shape alone justifies a relation no question word names.
UNNAMED_TYPED = 0.55  # the only relation from the anchor to things of the asked-for class
UNNAMED_JOIN = 0.45  # a relation that joins two linked anchors
UNNAMED_HOP = 0.35  # one hop of a two-hop path whose other hop is named



# --------------------------------------------------------------------------- candidate queries


@dataclass(frozen=True)
class Part:
    """One thing a query uses, with the question words it explains and how sure its link is."""

    kind: Literal["entity", "class", "literal", "relation", "modifier"]
    text: str
    positions: frozenset[int]
    score: float
    term: str | None = None  # the N3 term of an entity or literal anchor


@dataclass
class Candidate:
    """A query of bounded shape whose answer variable is ?a."""

    shape: str
    patterns: tuple[str, ...]
    parts: tuple[Part, ...]
    form: Form = "select"
    order: str | None = None  # "ASC"/"DESC" on ?v, or on COUNT(?x) when `group_count`
    group_count: bool = False
    show_count: bool = False  # a counting superlative that also reports the count
    aggregate: str | None = None  # AVG/SUM/MIN/MAX of ?v (form "aggregate")
    filters: tuple[str, ...] = ()
    limit: int | None = None
    prior: float = 0.0
    result: ResultTable | None = None
    score: float = 0.0
    fit: float = 0.0
    rows: int = 0
    penalty: float = 0.0

    def key(self) -> tuple[Any, ...]:
        """Identity for de-duplication."""
        return (
            self.form,
            tuple(sorted(self.patterns)),
            self.order,
            self.group_count,
            self.filters,
            self.limit,
            self.aggregate,
        )

    @property
    def positions(self) -> frozenset[int]:
        """Every question token this query explains."""
        out: frozenset[int] = frozenset()
        for p in self.parts:
            out |= p.positions
        return out

    def sparql(self) -> str:
        """The query text (full IRIs; prefixes are applied for display)."""
        body = " .\n  ".join(self.patterns)
        filters = "".join(f"\n  FILTER({f})" for f in self.filters)
        where = f"{{\n  {body} .{filters}\n}}"
        if self.form == "ask":
            return f"ASK {where}"
        if self.form == "count":
            return f"SELECT (COUNT(DISTINCT ?a) AS ?count) WHERE {where}"
        if self.form == "aggregate":
            return f"SELECT ({self.aggregate}(?v) AS ?value) WHERE {where}"
        if self.group_count:
            if self.show_count:
                return (
                    f"SELECT ?a (COUNT(DISTINCT ?x) AS ?count) WHERE {where}\nGROUP BY ?a\n"
                    f"ORDER BY {self.order}(?count)\nLIMIT {self.limit or 1}"
                )
            return (
                f"SELECT ?a WHERE {where}\nGROUP BY ?a\n"
                f"ORDER BY {self.order}(COUNT(DISTINCT ?x))\nLIMIT {self.limit or 1}"
            )
        tail = ""
        if self.order:
            tail = f"\nORDER BY {self.order}(?v)\nLIMIT {self.limit or 1}"
        elif self.limit:
            tail = f"\nLIMIT {self.limit}"
        return f"SELECT DISTINCT ?a WHERE {where}{tail}"

    def describe(self) -> str:
        """A one-line account of the parts."""
        return f"{self.shape}: " + " · ".join(p.text for p in self.parts)


def _n3(iri: str) -> str:
    return f"<{iri}>"


def _literal_n3(value: str, lang: str | None) -> str:
    text = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"@{lang}' if lang else f'"{text}"'


@dataclass(frozen=True)
class Anchor:
    """A fixed node a query starts from: a linked entity or a literal value found in the graph."""

    term: str  # N3
    label: str
    positions: frozenset[int]
    score: float
    kind: Literal["entity", "literal"]
    iri: str | None = None

    def part(self) -> Part:
        """This anchor as a query part."""
        return Part(self.kind, self.label, self.positions, self.score, self.term)


@dataclass(frozen=True)
class Rel:
    """A property usable from an anchor, in one direction, with its names."""

    iri: str
    direction: Literal["out", "in"]
    label: str
    names: tuple[str, ...]
    share: float = 0.0  # the part of the anchor's triples (in this direction) that use it


# --------------------------------------------------------------------------- the strategy


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
class LexicalStrategy:
    """Link, enumerate bounded-shape queries, run the most promising within a budget, rank, answer."""

    budget_s: float = DEFAULT_BUDGET_S
    threshold: float = DEFAULT_THRESHOLD
    query_timeout_s: float = QUERY_TIMEOUT_S
    max_execute: int = MAX_EXECUTE
    name: str = "lexical"

    def run(self, question: str, kg: KnowledgeGraph, trace: Trace) -> Answer:
        """Answer one question."""
        return _Run(self, question, kg, trace).answer()


def create(llm: object = None, **options: Any) -> LexicalStrategy:
    """Build the strategy; it never uses an LLM (`llm` is accepted for the common factory signature)."""
    allowed = {"budget_s", "threshold", "query_timeout_s", "max_execute"}
    unknown = set(options) - allowed
    if unknown:
        raise TypeError(f"unknown lexical options: {', '.join(sorted(unknown))}")
    return LexicalStrategy(**{k: v for k, v in options.items() if k in allowed})


@dataclass
class _Run:
    strategy: LexicalStrategy
    question: str
    kg_in: KnowledgeGraph
    trace: Trace
    started: float = field(default_factory=time.monotonic)
    executed: list[Candidate] = field(default_factory=list)
    _rel_cache: dict[tuple[str, str], list[Rel]] = field(default_factory=dict)
    _names_cache: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _types: dict[str, set[str]] = field(default_factory=dict)
    _attrs: dict[tuple[str, str], list[tuple[tuple[str, ...], str]]] = field(default_factory=dict)
    queries: int = 0

    def __post_init__(self) -> None:
        self.toolkit = Toolkit(self.kg_in, self.trace)
        self.deadline = self.started + self.strategy.budget_s
        # every query, linking's included, runs through the toolkit (traced) and within the budget
        self.kg = replace(
            self.toolkit.kg,
            endpoint=BudgetedEndpoint(
                self.toolkit.kg.endpoint, self.deadline, self.strategy.query_timeout_s
            ),
        )
        wb = self.kg.vocab.wikibase
        self.type_pred = self.kg.vocab.types[0]
        self.subclass_pred = (
            wb.direct_iri("P279") if wb else "http://www.w3.org/2000/01/rdf-schema#subClassOf"
        )
        self.skip_preds = set(self.kg.vocab.descriptions) | set(self.kg.vocab.aliases)
        self.wb = wb

    # -- plumbing ----------------------------------------------------------------------------
    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def query(self, sparql: str) -> QueryResult | None:
        if self.remaining() <= 0.05:
            return None
        self.queries += 1
        return self.kg.endpoint.query(sparql)

    def rows(self, sparql: str) -> list[dict[str, Term]]:
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
        if iri not in self._names_cache:
            self._names_cache[iri] = tuple(property_names(self.kg, iri, label))
        return self._names_cache[iri]

    def label(self, iri: str) -> str:
        return self.names(iri)[0] if self.names(iri) else humanise(local_name(iri))

    # -- main --------------------------------------------------------------------------------
    def answer(self) -> Answer:
        self.trace.emit("thought", text="Linking the question's words to the graph (no LLM).")
        linking = link(self.kg, self.question)
        self.linking = linking
        self.tokens = linking.tokens
        self.intent = analyse(self.tokens)
        self.content = set(content_positions(self.tokens)) - self._ignorable()
        self.trace.emit(
            "info",
            text=f"intent: {self.intent.answer}"
            + (
                f", superlative {self.intent.superlative.direction}"
                if self.intent.superlative
                else ""
            )
            + (
                f", {len(self.intent.comparisons)} numeric condition(s)"
                if self.intent.comparisons
                else ""
            )
            + (f", {self.intent.aggregate} of a value" if self.intent.aggregate else "")
            + f"; linked in {linking.seconds:.2f} s",
            linking=linking.to_json(),
        )
        anchors = self.anchors(linking.entities)
        classes = [e for e in linking.entities if e.kind == "class"][:MAX_CLASSES]
        self.trace.emit(
            "info",
            text="anchors: "
            + (", ".join(f"{a.label} ({a.score:.2f})" for a in anchors) or "none")
            + "; classes: "
            + (", ".join(f"{c.label} ({c.score:.2f})" for c in classes) or "none"),
        )
        cands = self.enumerate(anchors, classes)
        best = self.execute(cands)
        return self.finish(best)

    def _ignorable(self) -> set[int]:
        """Content words that say nothing about the data ("we", "offer", "available")."""
        filler = {
            "we",
            "offer",
            "available",
            "exist",
            "exists",
            "existing",
            "there",
            "currently",
            "our",
            "kind",
            "type",
            "types",
            "sort",
            "get",
        }
        return {i for i, t in enumerate(self.tokens) if t.lower in filler}

    # -- anchors -----------------------------------------------------------------------------
    def anchors(self, entities: Sequence[EntityCandidate]) -> list[Anchor]:
        out: list[Anchor] = []
        for e in entities:
            if e.kind != "entity":
                continue
            out.append(Anchor(_n3(e.iri), e.label, e.positions, e.score, "entity", e.iri))
        out += self.literal_anchors()
        out.sort(key=lambda a: (-a.score, -len(a.positions), a.term))
        # keep the best few, but never two anchors for exactly the same words unless nearly tied
        chosen: list[Anchor] = []
        for a in out:
            same = [c for c in chosen if c.positions == a.positions]
            if same and a.score < same[0].score - 0.02:
                continue
            if len(same) >= 2:
                continue
            chosen.append(a)
            if len(chosen) >= MAX_ANCHORS + 2:
                break
        return chosen

    def literal_anchors(self) -> list[Anchor]:
        """Capitalised, quoted and coded mentions, and numbers, that occur as literal values (not
        names) in the graph."""
        mentions = [
            m
            for m in self.linking.mentions
            if m.source in ("quoted", "capitalised", "code") and m.first >= 0
        ]
        values: dict[str, tuple[str, frozenset[int]]] = {}  # N3 → (text, positions)
        for m in mentions:
            for text in {m.text, m.text.title()}:
                for term in (_literal_n3(text, None), _literal_n3(text, "en")):
                    values.setdefault(term, (text, m.positions))
        modifiers = self.intent.positions
        for i, t in enumerate(self.tokens):
            if i in modifiers or not NUMBER.match(t.text) or "," in t.text:
                continue
            values.setdefault(t.text, (t.text, frozenset({i})))  # xsd:integer or xsd:decimal
            values.setdefault(_literal_n3(t.text, None), (t.text, frozenset({i})))
        if not values:
            return []
        text_preds = set(self.kg.vocab.text_predicates)
        rows = self.rows(
            f"SELECT ?o ?p (COUNT(*) AS ?n) WHERE {{ VALUES ?o {{ {' '.join(values)} }} ?s ?p ?o }} "
            "GROUP BY ?o ?p LIMIT 200"
        )
        out: dict[str, Anchor] = {}
        for r in rows:
            if "o" not in r or "p" not in r or r["p"].value in text_preds:
                continue
            o = r["o"]
            term = o.n3()
            found = (
                values.get(term) or values.get(_literal_n3(o.value, o.lang)) or values.get(o.value)
            )
            if found is None:
                continue
            text, positions = found
            score = 0.86 + 0.03 * min(3, len(positions))
            out[term] = Anchor(term, text, positions, score, "literal")
        return list(out.values())

    # -- relations around an anchor ----------------------------------------------------------
    def rels(self, anchor: Anchor) -> list[Rel]:
        key = (anchor.term, "1")
        if key in self._rel_cache:
            return self._rel_cache[key]
        found: list[Rel] = []
        queries: list[tuple[Direction, str]] = [("in", f"?s ?p {anchor.term}")]
        if anchor.kind == "entity":
            queries.insert(0, ("out", f"{anchor.term} ?p ?o"))
        for direction, pattern in queries:
            rows = self.rows(
                f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {pattern} }} GROUP BY ?p LIMIT 300"
            )
            counts = {r["p"].value: _int(r.get("n")) for r in rows if "p" in r}
            total = sum(counts.values()) or 1
            found += [Rel(p, direction, "", (), n / total) for p, n in counts.items()]
        out = [self.named(r) for r in found if self.usable_predicate(r.iri)]
        self._rel_cache[key] = out
        return out

    def named(self, rel: Rel) -> Rel:
        names = self.names(rel.iri)
        return replace(rel, label=names[0] if names else humanise(local_name(rel.iri)), names=names)

    def rel_part(self, rel: Rel, exclude: Iterable[int], unnamed: float = 0.1) -> Part:
        """The relation as a query part; `unnamed` is its score when no question word names it (how much
        the query's shape alone justifies it)."""
        m = relation_match(rel.names, self.tokens, exclude)
        return Part("relation", rel.label, m.positions, m.score if m.score > 0 else unnamed)

    # -- enumeration -------------------------------------------------------------------------
    def enumerate(self, anchors: list[Anchor], classes: list[EntityCandidate]) -> list[Candidate]:
        cands: dict[tuple[Any, ...], Candidate] = {}

        def add(c: Candidate) -> None:
            c.prior = self.prior(c)
            k = c.key()
            if k not in cands or cands[k].prior < c.prior:
                cands[k] = c

        top = anchors[:MAX_ANCHORS]
        for anchor in top:
            a_part = anchor.part()
            for rel in self.rels(anchor):
                # an unnamed relation into an anchor that most of its triples use is how things belong
                # to it ("Oscillators": things whose category is Oscillator); any other is a guess
                unnamed = 0.1 + (0.4 * rel.share if rel.direction == "in" else 0.0)
                rp = self.rel_part(rel, anchor.positions, unnamed)
                pattern = (
                    f"{anchor.term} <{rel.iri}> ?a"
                    if rel.direction == "out"
                    else f"?a <{rel.iri}> {anchor.term}"
                )
                add(Candidate("one-hop " + rel.direction, (pattern,), (a_part, rp)))
            for cls in classes:
                if cls.positions & anchor.positions:
                    continue
                for c in self.typed_one_hop(anchor, a_part, cls):
                    add(c)
            if self.remaining() > 0.3 * self.strategy.budget_s:
                for c in self.two_hops(anchor, a_part):
                    add(c)
        for i, a1 in enumerate(top):
            for a2 in top[i + 1 :]:
                if a1.positions & a2.positions or self.remaining() < 0.3 * self.strategy.budget_s:
                    continue
                for c in self.intersections(a1, a2):
                    add(c)
        for cls in classes:
            add(
                Candidate(
                    "class",
                    (f"?a <{self.type_pred}> <{cls.iri}>",),
                    (Part("class", cls.label, cls.positions, cls.score),),
                )
            )
        if self.intent.superlative and self.intent.superlative.counting:
            for c in self.counting_superlatives(classes):
                add(c)
        if self.intent.answer == "boolean":
            for c in self.boolean_checks(top, classes):
                add(c)
        base = sorted(cands.values(), key=lambda c: -c.prior)
        # typed variants of the best untyped sets
        for cls in classes:
            c_part = Part("class", cls.label, cls.positions, cls.score)
            for c in base[:25]:
                if (
                    c.form != "select"
                    or c.shape.startswith(("class", "typed"))
                    or c.positions & cls.positions
                    or not any("?a" in p for p in c.patterns)
                ):
                    continue
                add(
                    replace(
                        c,
                        shape="typed " + c.shape,
                        patterns=(*c.patterns, f"?a <{self.type_pred}> <{cls.iri}>"),
                        parts=(*c.parts, c_part),
                    )
                )
        ranked = sorted(cands.values(), key=lambda c: -c.prior)
        plain = [c for c in ranked if c.form == "select" and not c.order and not c.group_count]
        for c in self.extensions(plain, anchors):
            add(c)
        ranked = sorted(cands.values(), key=lambda c: -c.prior)
        ranked = self.modify(ranked)
        ranked.sort(key=lambda c: -c.prior)
        self.trace.emit(
            "thought",
            text=f"{len(ranked)} candidate queries; running the most promising within {self.strategy.budget_s:g} s.",
        )
        return ranked

    def typed_one_hop(self, anchor: Anchor, a_part: Part, cls: EntityCandidate) -> list[Candidate]:
        """`anchor ?p ?a . ?a a Class`: the class names the answer when no word names the relation."""
        out = []
        c_part = Part("class", cls.label, cls.positions, cls.score)
        for direction in ("out", "in"):
            if direction == "out" and anchor.kind == "literal":
                continue
            pat = f"{anchor.term} ?p ?a" if direction == "out" else f"?a ?p {anchor.term}"
            rows = self.rows(
                f"SELECT ?p (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {pat} . ?a <{self.type_pred}> <{cls.iri}> }} GROUP BY ?p LIMIT 50"
            )
            for r in rows:
                if "p" not in r or not self.usable_predicate(r["p"].value):
                    continue
                rel = self.named(Rel(r["p"].value, direction, "", ()))
                # the class justifies a relation no word names
                rp = self.rel_part(rel, anchor.positions | cls.positions, UNNAMED_TYPED)
                pattern = pat.replace("?p", f"<{rel.iri}>")
                out.append(
                    Candidate(
                        "typed one-hop " + direction,
                        (pattern, f"?a <{self.type_pred}> <{cls.iri}>"),
                        (a_part, rp, c_part),
                    )
                )
        return out

    def two_hops(self, anchor: Anchor, a_part: Part) -> list[Candidate]:
        out: list[Candidate] = []
        shapes = [("out", "out"), ("out", "in"), ("in", "out"), ("in", "in")]
        for d1, d2 in shapes:
            if d1 == "out" and anchor.kind == "literal":
                continue
            first = f"{anchor.term} ?p1 ?x" if d1 == "out" else f"?x ?p1 {anchor.term}"
            second = "?x ?p2 ?a" if d2 == "out" else "?a ?p2 ?x"
            rows = self.rows(
                f"SELECT ?p1 ?p2 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {first} . {second} . "
                f"FILTER(isIRI(?x) || isBlank(?x)) FILTER(?a != {anchor.term}) }} GROUP BY ?p1 ?p2 LIMIT 400"
                if anchor.kind == "entity"
                else f"SELECT ?p1 ?p2 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {first} . {second} }} GROUP BY ?p1 ?p2 LIMIT 400"
            )
            for r in rows:
                if "p1" not in r or "p2" not in r:
                    continue
                p1, p2 = r["p1"].value, r["p2"].value
                via_statement = self.is_claim(p1)
                if not (
                    self.usable_predicate(p1, hop=2)
                    and self.usable_predicate(p2, hop=2 if via_statement else 1)
                ):
                    continue
                if p1 == p2 and d1 != d2:
                    continue  # back to where we started
                if (
                    self.wb
                    and self.wb.property_id(p1)
                    and self.wb.property_id(p1) == self.wb.property_id(p2)
                ):
                    continue  # p:P/ps:P is just the direct claim again
                r1 = self.named(Rel(p1, d1, "", ()))  # type: ignore[arg-type]
                r2 = self.named(Rel(p2, d2, "", ()))  # type: ignore[arg-type]
                part1 = self.rel_part(r1, anchor.positions, UNNAMED_HOP)
                part2 = self.rel_part(r2, anchor.positions | part1.positions, UNNAMED_HOP)
                if not part1.positions and not part2.positions:
                    continue  # two unnamed hops explain nothing
                pat1 = first.replace("?p1", f"<{p1}>")
                pat2 = second.replace("?p2", f"<{p2}>")
                out.append(Candidate(f"two-hop {d1}-{d2}", (pat1, pat2), (a_part, part1, part2)))
        return out

    def intersections(self, a1: Anchor, a2: Anchor) -> list[Candidate]:
        out: list[Candidate] = []
        p1, p2 = a1.part(), a2.part()
        for d1 in ("out", "in"):
            for d2 in ("out", "in"):
                if (d1 == "out" and a1.kind == "literal") or (d2 == "out" and a2.kind == "literal"):
                    continue
                t1 = f"{a1.term} ?p1 ?a" if d1 == "out" else f"?a ?p1 {a1.term}"
                t2 = f"{a2.term} ?p2 ?a" if d2 == "out" else f"?a ?p2 {a2.term}"
                rows = self.rows(
                    f"SELECT ?p1 ?p2 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {t1} . {t2} }} GROUP BY ?p1 ?p2 LIMIT 100"
                )
                for r in rows:
                    if "p1" not in r or "p2" not in r:
                        continue
                    if not (
                        self.usable_predicate(r["p1"].value)
                        and self.usable_predicate(r["p2"].value)
                    ):
                        continue
                    if d1 == d2 == "out" and self.type_pred in (r["p1"].value, r["p2"].value):
                        continue  # sharing a type says nothing
                    r1 = self.named(Rel(r["p1"].value, d1, "", ()))
                    r2 = self.named(Rel(r["p2"].value, d2, "", ()))
                    used = a1.positions | a2.positions
                    q1 = self.rel_part(r1, used, UNNAMED_JOIN)
                    q2 = self.rel_part(r2, used | q1.positions, UNNAMED_JOIN)
                    pats = (t1.replace("?p1", f"<{r1.iri}>"), t2.replace("?p2", f"<{r2.iri}>"))
                    out.append(Candidate("intersection", pats, (p1, p2, q1, q2)))
        out += self.nary(a1, a2)
        # a direct link between the two: for yes/no questions
        if self.intent.answer == "boolean" and a1.kind == "entity":
            rows = self.rows(
                f"SELECT DISTINCT ?p WHERE {{ {a1.term} ?p {a2.term} }} LIMIT 20"
            ) + self.rows(f"SELECT DISTINCT ?p WHERE {{ {a2.term} ?p {a1.term} }} LIMIT 20")
            for r in rows:
                if "p" in r and self.usable_predicate(r["p"].value):
                    rel = self.named(Rel(r["p"].value, "out", "", ()))
                    q = self.rel_part(rel, a1.positions | a2.positions, UNNAMED_JOIN)
                    pat = f"{a1.term} <{rel.iri}> {a2.term}"
                    out.append(Candidate("link", (pat,), (p1, p2, q), form="ask"))
        return out

    def nary(self, a1: Anchor, a2: Anchor) -> list[Candidate]:
        """A value of the node that joins two anchors: a Wikibase statement's qualifier ("when did Curie
        receive the Nobel Prize": Curie p:P166 ?s . ?s ps:P166 Nobel . ?s pq:P585 ?a) or an n-ary
        relation's attribute (a bill of material's part and its quantity)."""
        out: list[Candidate] = []
        for first, second in ((a1, a2), (a2, a1)):
            if first.kind != "entity":
                continue
            rows = self.rows(
                f"SELECT ?p1 ?p2 ?p3 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {first.term} ?p1 ?x . "
                f"?x ?p2 {second.term} . ?x ?p3 ?a . FILTER(?p3 != ?p2 && ?a != {first.term}) }} "
                "GROUP BY ?p1 ?p2 ?p3 LIMIT 100"
            )
            for r in rows:
                if not all(k in r for k in ("p1", "p2", "p3")):
                    continue
                p1, p2, p3 = r["p1"].value, r["p2"].value, r["p3"].value
                hop = 2 if self.is_claim(p1) else 1
                if not (
                    self.usable_predicate(p1, hop=2)
                    and self.usable_predicate(p2, hop=hop)
                    and self.usable_predicate(p3, hop=hop)
                ):
                    continue
                used = first.positions | second.positions
                r1 = self.rel_part(self.named(Rel(p1, "out", "", ())), used, UNNAMED_HOP)
                r2 = self.rel_part(
                    self.named(Rel(p2, "out", "", ())), used | r1.positions, UNNAMED_JOIN
                )
                r3 = self.rel_part(
                    self.named(Rel(p3, "out", "", ())),
                    used | r1.positions | r2.positions,
                    UNNAMED_HOP,
                )
                pats = (f"{first.term} <{p1}> ?x", f"?x <{p2}> {second.term}", f"?x <{p3}> ?a")
                out.append(Candidate("n-ary", pats, (first.part(), second.part(), r1, r2, r3)))
        return out

    def counting_superlatives(self, classes: Sequence[EntityCandidate]) -> list[Candidate]:
        """ "Which X has the most Ys", "the most common Z": group by the answer, order by how many."""
        sup = self.intent.superlative
        assert sup is not None
        out: list[Candidate] = []
        mod = Part(
            "modifier", f"{'most' if sup.direction == 'DESC' else 'least'}", sup.positions, 1.0
        )
        counted = [c for c in classes if c.positions & sup.positions]
        for rc in self.linking.relations[:12]:
            if rc.lexical < 0.5 or not self.usable_predicate(rc.iri):
                continue
            rel_out = Rel(rc.iri, "out", rc.label, self.names(rc.iri, rc.label))
            rp = self.rel_part(rel_out, sup.positions)
            patterns = (
                [f"?x <{rc.iri}> ?a"] if sup.common else [f"?a <{rc.iri}> ?x", f"?x <{rc.iri}> ?a"]
            )
            for pattern in patterns:
                variants: list[tuple[tuple[str, ...], tuple[Part, ...]]] = [((pattern,), (rp, mod))]
                for cls in classes:
                    if cls.positions & (rp.positions | sup.positions):
                        continue
                    c_part = Part("class", cls.label, cls.positions, cls.score)
                    variants.append(
                        ((pattern, f"?a <{self.type_pred}> <{cls.iri}>"), (rp, mod, c_part))
                    )
                for cls in counted:
                    c_part = Part("class", cls.label, cls.positions, cls.score)
                    variants += [
                        ((*pats, f"?x <{self.type_pred}> <{cls.iri}>"), (*parts, c_part))
                        for pats, parts in list(variants)
                    ]
                for pats, parts in variants:
                    out.append(
                        Candidate(
                            "most",
                            pats,
                            parts,
                            order=sup.direction,
                            group_count=True,
                            show_count=self.intent.answer == "count",
                            limit=sup.limit,
                        )
                    )
        return out

    def boolean_checks(
        self, anchors: Sequence[Anchor], classes: Sequence[EntityCandidate]
    ) -> list[Candidate]:
        """Yes/no questions: is the anchor of the class, is one anchor linked to the other."""
        out: list[Candidate] = []
        mod = Part("modifier", "yes/no", frozenset(), 1.0)
        type_path = f"<{self.type_pred}>/<{self.subclass_pred}>*"
        entities = [a for a in anchors if a.kind == "entity"]
        for a in entities:
            for cls in classes:
                if cls.positions & a.positions:
                    continue
                c_part = Part("class", cls.label, cls.positions, cls.score)
                out.append(
                    Candidate(
                        "is-a",
                        (f"{a.term} {type_path} <{cls.iri}>",),
                        (a.part(), c_part, mod),
                        form="ask",
                    )
                )
        named = [r for r in self.linking.relations if r.lexical >= 0.5][:5]
        for a1 in entities:
            for a2 in anchors:
                if a1.positions & a2.positions or (a2.kind == "entity" and a1.term >= a2.term):
                    continue
                used = a1.positions | a2.positions
                for r in named:
                    rel = self.named(Rel(r.iri, "out", "", ()))
                    rp = self.rel_part(rel, used)
                    pats = [f"{a1.term} <{r.iri}> {a2.term}"]
                    if a2.kind == "entity":
                        pats.append(f"{a2.term} <{r.iri}> {a1.term}")
                    for pat in pats:
                        out.append(
                            Candidate("link", (pat,), (a1.part(), a2.part(), rp, mod), form="ask")
                        )
                unnamed = Part("relation", "some relation", frozenset(), UNNAMED_JOIN)
                out.append(
                    Candidate(
                        "link",
                        (f"{a1.term} ?p {a2.term}",),
                        (a1.part(), a2.part(), unnamed, mod),
                        form="ask",
                    )
                )
        return out

    # -- modifiers: count, ask, superlative, numeric filters ---------------------------------
    def modify(self, ranked: list[Candidate]) -> list[Candidate]:
        intent = self.intent
        out = list(ranked)
        sets = [c for c in ranked if c.form == "select" and not c.order and not c.group_count]
        if intent.answer == "count":
            mod = Part("modifier", "how many", intent.positions, 1.0)
            out += [
                self.rescored(replace(c, form="count", parts=(*c.parts, mod))) for c in sets[:40]
            ]
        if intent.answer == "boolean":
            mod = Part("modifier", "yes/no", frozenset(), 1.0)
            out += [self.rescored(replace(c, form="ask", parts=(*c.parts, mod))) for c in sets[:40]]
        sup = intent.superlative
        if sup and not sup.counting:
            out += self.attribute_modifiers(sets[:10], sup=sup)
        if intent.comparisons:
            out += self.attribute_modifiers(sets[:10], comparisons=intent.comparisons)
        if intent.aggregate:
            out += self.aggregates(sets[:10])
        return out

    def aggregates(self, bases: Sequence[Candidate]) -> list[Candidate]:
        """AVG/SUM/MIN/MAX of the attribute a remaining word names, over the answers of a base query."""
        agg = self.intent.aggregate
        assert agg is not None
        out: list[Candidate] = []
        for base in bases:
            if self.remaining() < 0.25 * self.strategy.budget_s:
                break
            wanted = [t for i, t in enumerate(self.tokens) if i not in base.positions]
            for preds, label in self.attributes(base, "?a", wanted):
                names = tuple(n for p in preds for n in self.names(p))
                m = relation_match(names, self.tokens, base.positions, abbreviations=True)
                if m.score < 0.5:
                    continue
                mod = Part(
                    "modifier",
                    f"{agg} {label}",
                    self.intent.aggregate_positions | m.positions,
                    m.score - 0.05 * (len(preds) - 1),
                )
                out.append(
                    replace(
                        base,
                        shape=f"{agg.lower()} {base.shape}",
                        patterns=(*base.patterns, self.attribute_path("?a", preds, "?v", "?m")),
                        parts=(*base.parts, mod),
                        form="aggregate",
                        aggregate=agg,
                    )
                )
        for c in out:
            c.prior = self.prior(c)
        return out

    def rescored(self, c: Candidate) -> Candidate:
        c.prior = self.prior(c)
        return c

    def attributes(
        self, base: Candidate, var: str, wanted: Sequence[Token] = ()
    ) -> list[tuple[tuple[str, ...], str]]:
        """Numeric or date attributes of `var` in a base query: direct ones, and those one value node
        away (a price node's amount) unless a direct one already matches the `wanted` words."""
        where = " . ".join(base.patterns)
        key = (where, var)
        if key not in self._attrs:
            dates = f"<{XSD}date>, <{XSD}dateTime>, <{XSD}gYear>"
            direct: list[tuple[tuple[str, ...], str]] = [
                ((r["p"].value,), self.label(r["p"].value))
                for r in self.rows(
                    f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {where} . {var} ?p ?val . "
                    f"FILTER(isNumeric(?val) || datatype(?val) IN ({dates})) }} GROUP BY ?p LIMIT 100"
                )
                if "p" in r and self.usable_predicate(r["p"].value)
            ]
            self._attrs[key] = direct
        found = list(self._attrs[key])
        named = any(
            relation_match(self.names(preds[0]), wanted, abbreviations=True).score >= 0.8
            for preds, _ in found
        )
        if named:
            return found
        deep_key = (where, var + "/deep")
        if deep_key not in self._attrs:
            deep: list[tuple[tuple[str, ...], str]] = []
            for r in self.rows(
                f"SELECT ?p ?q (COUNT(*) AS ?n) WHERE {{ {where} . {var} ?p ?node . ?node ?q ?val . "
                f"FILTER(!isLiteral(?node)) FILTER(isNumeric(?val)) }} GROUP BY ?p ?q LIMIT 100"
            ):
                if "p" in r and "q" in r and self.usable_predicate(r["p"].value, hop=2):
                    p, q = r["p"].value, r["q"].value
                    deep.append(((p, q), f"{self.label(p)} / {self.label(q)}"))
            self._attrs[deep_key] = deep
        return found + self._attrs[deep_key]

    @staticmethod
    def attribute_path(var: str, preds: tuple[str, ...], value: str, node: str) -> str:
        """Triple patterns binding `value` to the attribute `preds` of `var`."""
        if len(preds) == 1:
            return f"{var} <{preds[0]}> {value}"
        return f"{var} <{preds[0]}> {node} . {node} <{preds[1]}> {value}"

    def attribute_modifiers(
        self,
        bases: Sequence[Candidate],
        *,
        sup: Superlative | None = None,
        comparisons: Sequence[Comparison] = (),
    ) -> list[Candidate]:
        """Order by (or filter on) a numeric or date attribute of the answers (or of the node before them)."""
        out: list[Candidate] = []
        hint_tokens = [Token(h, -1, -1) for h in sup.hints] if sup else []
        for base in bases:
            if self.remaining() < 0.25 * self.strategy.budget_s:
                break
            variables = ["?a"] + (["?x"] if any("?x" in p for p in base.patterns) else [])
            for var in variables if sup else ["?a"]:
                wanted = [t for i, t in enumerate(self.tokens) if i not in base.positions]
                attrs = self.attributes(base, var, [*wanted, *hint_tokens])
                if sup:
                    for preds, label in attrs:
                        names = tuple(n for p in preds for n in self.names(p))
                        hint = relation_match(names, hint_tokens, abbreviations=True)
                        own = relation_match(names, self.tokens, base.positions, abbreviations=True)
                        score = max(hint.score, own.score, 0.15) - (0.05 * (len(preds) - 1))
                        mod = Part(
                            "modifier",
                            f"{sup.direction} {label}",
                            sup.positions | own.positions,
                            score,
                        )
                        out.append(
                            replace(
                                base,
                                shape=f"superlative {base.shape}",
                                patterns=(
                                    *base.patterns,
                                    self.attribute_path(var, preds, "?v", "?m"),
                                ),
                                parts=(*base.parts, mod),
                                order=sup.direction,
                                limit=sup.limit,
                            )
                        )
                if comparisons:
                    out += self.filtered(base, attrs, comparisons)
        for c in out:
            c.prior = self.prior(c)
        return out

    def filtered(
        self,
        base: Candidate,
        attrs: Sequence[tuple[tuple[str, ...], str]],
        comparisons: Sequence[Comparison],
    ) -> list[Candidate]:
        """One query with every numeric condition on the attribute named near it."""
        patterns = list(base.patterns)
        parts = list(base.parts)
        filters = list(base.filters)
        bound: dict[tuple[str, ...], str] = {}
        for comp in comparisons:
            near_tokens = [
                t if i in comp.hint_positions else Token("", -1, -1)
                for i, t in enumerate(self.tokens)
            ]
            best: tuple[float, tuple[str, ...], str, frozenset[int]] | None = None
            for preds, label in attrs:
                names = tuple(n for p in preds for n in self.names(p))
                m = relation_match(names, near_tokens, base.positions, abbreviations=True)
                score = m.score - 0.05 * (len(preds) - 1)
                if m.score >= 0.5 and (best is None or score > best[0]):
                    best = (score, preds, label, m.positions)
            if best is None:
                continue
            score, preds, label, positions = best
            if preds not in bound:
                n = len(bound) + 1
                bound[preds] = f"?v{n}"
                patterns.append(self.attribute_path("?a", preds, f"?v{n}", f"?m{n}"))
            value = int(comp.value) if comp.value.is_integer() else comp.value
            if comp.op.startswith("year"):
                filters.append(f"YEAR({bound[preds]}) {comp.op[4:]} {value}")
            else:
                filters.append(f"{bound[preds]} {comp.op} {value}")
            parts.append(
                Part("modifier", f"{label} {comp.op} {value}", comp.positions | positions, score)
            )
        if not bound:
            return []
        return [
            replace(
                base,
                shape=f"filtered {base.shape}",
                patterns=tuple(patterns),
                parts=tuple(parts),
                filters=tuple(filters),
            )
        ]

    # -- extensions: one more named hop, or one more anchor ----------------------------------
    def extensions(self, ranked: Sequence[Candidate], anchors: Sequence[Anchor]) -> list[Candidate]:
        """Grow the best sets by what they leave unexplained: a hop from the answers along a relation a
        remaining word names ("the *name* of the Network expert from Marketing"), or a link from the
        answers or from the query's anchor to another anchor ("which supplier *in France* delivers
        Compensators", "the email of Sabrina *from Marketing*")."""
        out: list[Candidate] = []
        named = [r for r in self.linking.relations if r.lexical >= 0.5]
        hop_bases = [
            c for c in ranked if any(r.positions & (self.content - c.positions) for r in named)
        ]
        for base in hop_bases[:8]:
            if self.remaining() < 0.3 * self.strategy.budget_s:
                break
            uncovered = self.content - base.positions
            renamed = tuple(re.sub(r"\?a\b", "?y", p) for p in base.patterns)
            inner = " . ".join(renamed)
            for direction in ("out", "in"):
                pat = "?y ?p ?a" if direction == "out" else "?a ?p ?y"
                for r in self.rows(
                    f"SELECT ?p (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {inner} . {pat} . "
                    f"FILTER(!isLiteral(?y) && ?a != ?y) }} GROUP BY ?p LIMIT 100"
                ):
                    if "p" not in r or not self.usable_predicate(r["p"].value):
                        continue
                    rel = self.named(Rel(r["p"].value, direction, "", ()))
                    rp = self.rel_part(rel, self.content - uncovered, 0.0)
                    if not rp.positions & uncovered:
                        continue
                    out.append(
                        replace(
                            base,
                            shape=f"extended {base.shape}",
                            patterns=(*renamed, pat.replace("?p", f"<{rel.iri}>")),
                            parts=(*base.parts, rp),
                        )
                    )
        for anchor in anchors:
            bases = [
                c
                for c in ranked
                if anchor.positions & (self.content - c.positions)
                and not anchor.positions & c.positions
            ]
            for base in bases[:4]:
                if self.remaining() < 0.3 * self.strategy.budget_s:
                    break
                out += self.constrained(base, anchor)
        for c in out:
            c.prior = self.prior(c)
        return out

    def constrained(self, base: Candidate, anchor: Anchor) -> list[Candidate]:
        """The base query with one more triple linking its answer, or its own anchor, to `anchor`."""
        out: list[Candidate] = []
        where = " . ".join(base.patterns)
        nodes = ["?a"] + [p.term for p in base.parts if p.kind == "entity" and p.term]
        if "?x" in where:
            nodes.append("?x")
        for node in nodes:
            directions: tuple[Direction, ...] = (
                ("out", "in") if anchor.kind == "entity" else ("in",)
            )
            for direction in directions:
                pat = (
                    f"{anchor.term} ?p {node}" if direction == "out" else f"{node} ?p {anchor.term}"
                )
                guard = " FILTER(!isLiteral(?a))" if node == "?a" else ""
                for r in self.rows(
                    f"SELECT DISTINCT ?p WHERE {{ {where} . {pat} .{guard} }} LIMIT 20"
                ):
                    hop = 2 if node == "?x" else 1
                    if "p" not in r or not self.usable_predicate(r["p"].value, hop=hop):
                        continue
                    if r["p"].value == self.type_pred and (node != "?a" or direction == "out"):
                        continue  # sharing a type with an anchor says nothing
                    rel = self.named(Rel(r["p"].value, direction, "", ()))
                    rp = self.rel_part(rel, base.positions | anchor.positions, UNNAMED_JOIN)
                    out.append(
                        replace(
                            base,
                            shape=f"constrained {base.shape}",
                            patterns=(*base.patterns, pat.replace("?p", f"<{rel.iri}>")),
                            parts=(*base.parts, anchor.part(), rp),
                        )
                    )
        return out

    # -- scoring -----------------------------------------------------------------------------
    def coverage(self, c: Candidate) -> float:
        if not self.content:
            return 1.0
        return len(self.content & c.positions) / len(self.content)

    def prior(self, c: Candidate) -> float:
        scores = [min(1.0, p.score) for p in c.parts]
        link_quality = sum(scores) / len(scores) if scores else 0.0
        weakest = min(scores) if scores else 0.0
        overlap = self._overlap(c)
        triples = len(c.patterns) - sum(1 for p in c.parts if p.kind == "class")
        prior = (
            0.6 * self.coverage(c)
            + 0.2 * link_quality
            + 0.2 * weakest
            - 0.04 * max(0, triples - 1)
            - 0.1 * overlap
        )
        intent = self.intent.answer
        if intent == "count" and c.form != "count" and not c.show_count:
            prior -= 0.08
        if intent == "boolean" and c.form != "ask":
            prior -= 0.15
        if intent not in ("count", "boolean") and c.form not in ("select", "aggregate"):
            prior -= 0.3
        if self.intent.aggregate and c.form != "aggregate":
            prior -= 0.1
        elif c.form == "aggregate" and not self.intent.aggregate:
            prior -= 0.3
        if self.intent.superlative and not (c.order or c.group_count):
            prior -= 0.05
        return round(prior, 4)

    @staticmethod
    def _overlap(c: Candidate) -> int:
        """Parts explaining the same words twice (two links for one mention) are suspicious."""
        seen: set[int] = set()
        clashes = 0
        for p in c.parts:
            if p.kind in ("entity", "literal", "class") and p.positions & seen:
                clashes += 1
            if p.kind in ("entity", "literal", "class"):
                seen |= p.positions
        return clashes

    def fit(self, c: Candidate, table: ResultTable) -> float:
        """How well the result's values fit the expected answer type (0–1)."""
        intent = self.intent.answer
        if c.form == "ask":
            return 1.0 if intent == "boolean" else 0.0
        if c.form == "count" or c.show_count:
            return 1.0 if intent == "count" else 0.1
        if c.form == "aggregate":
            return 1.0 if self.intent.aggregate else 0.1
        values = table.column("a")
        if not values:
            return 0.0
        iris = [v for v in values if v.kind == "uri"]
        literals = [v for v in values if v.kind == "literal"]
        if intent == "count":
            numeric = len(values) == 1 and literals and _is_number(literals[0])
            return 0.8 if numeric else 0.0
        if intent == "boolean":
            return 0.2
        if intent == "date":
            dates = [
                v
                for v in literals
                if v.datatype in DATE_TYPES or re.match(r"^\d{4}(-\d\d)?", v.value)
            ]
            return len(dates) / len(values)
        if intent == "number":
            return sum(1 for v in literals if _is_number(v)) / len(values)
        if intent == "person":
            return 0.7 if iris else 0.1
        if intent == "place":
            return 0.8 if iris else 0.2
        return 0.8 if iris or literals else 0.3

    def type_words(self, iris: Sequence[Term]) -> dict[str, set[str]]:
        """The words of the type labels of some answers (one query, cached)."""
        wanted = [t.value for t in iris if t.value not in self._types]
        if wanted:
            values = " ".join(f"<{i}>" for i in wanted)
            rows = self.rows(
                f"SELECT DISTINCT ?a ?t WHERE {{ VALUES ?a {{ {values} }} ?a <{self.type_pred}> ?t }} LIMIT 500"
            )
            types: dict[str, set[str]] = {i: set() for i in wanted}
            for r in rows:
                if "a" in r and "t" in r:
                    types.setdefault(r["a"].value, set()).add(r["t"].value)
            labels = self.kg.names.labels_of({t for ts in types.values() for t in ts})
            for iri, ts in types.items():
                self._types[iri] = {
                    w.lower()
                    for t in ts
                    for w in re.findall(r"[A-Za-z]+", labels.get(t) or humanise(local_name(t)))
                }
        return {t.value: self._types.get(t.value, set()) for t in iris}

    def type_fit(self, c: Candidate) -> float:
        """How well the answers' types fit who-questions and the noun the question asks for."""
        assert c.result is not None
        if c.form != "select":
            return c.fit
        values = c.result.column("a")
        iris = [v for v in values if v.kind == "uri"][:20]
        focus = [self.tokens[i].text for i in self.intent.focus]
        if self.intent.answer == "person":
            if not iris:
                return c.fit
            types = self.type_words(iris)
            known = [ws for ws in types.values() if ws]
            if not known:
                return c.fit
            share = sum(1 for ws in known if ws & PERSON_WORDS) / len(known)
            return 0.6 + 0.4 * share
        if focus:
            if not iris:
                return 0.3  # "which elements …" answered with plain values
            types = self.type_words(iris)
            known = [ws for ws in types.values() if ws]
            if not known:
                return c.fit
            person_focus = any(f.lower() in PERSON_WORDS for f in focus)
            share = sum(
                1
                for ws in known
                if any(word_similarity(f, w) >= 0.85 for f in focus for w in ws)
                or (person_focus and ws & PERSON_WORDS)
            ) / len(known)
            return 0.6 + 0.4 * share
        return c.fit

    def execute(self, cands: list[Candidate]) -> Candidate | None:
        tried = 0
        for c in cands:
            if tried >= self.strategy.max_execute or self.remaining() <= 0.05:
                break
            if self.executed and c.prior < self.executed_best_prior() - 0.35:
                break
            tried += 1
            res = self.query(c.sparql())
            if res is None or not res.ok or res.table is None:
                continue
            table = res.table
            if c.form != "ask" and (
                table.is_empty or (not table.column("a") and c.form == "select")
            ):
                continue
            if (
                c.form == "count"
                and table.rows
                and table.rows[0].get("count", Term.literal("0")).value == "0"
            ):
                continue
            if c.form == "aggregate" and not (table.rows and "value" in table.rows[0]):
                continue
            c.result = table
            c.rows = len(table.rows)
            c.fit = self.fit(c, table)
            size_penalty = 0.0
            if c.form == "select" and not self.intent.plural and c.rows > 1:
                size_penalty = min(0.12, 0.04 * math.log10(c.rows))
            if c.form == "ask" and table.boolean is False:
                size_penalty += 0.1  # a false ASK only says this shape found nothing
            c.score = round(c.prior + 0.25 * c.fit - size_penalty, 4)
            c.penalty = size_penalty
            self.executed.append(c)
        self.executed.sort(key=lambda c: -c.score)
        # second look, at the leaders only: do the answers' types fit what was asked?
        for c in self.executed[:10]:
            if self.remaining() <= 0.05:
                break
            c.fit = self.type_fit(c)
            c.score = round(c.prior + 0.25 * c.fit - c.penalty, 4)
        self.executed.sort(key=lambda c: -c.score)
        if not self.executed:
            return None
        return self.executed[0]

    def executed_best_prior(self) -> float:
        return max(c.prior for c in self.executed)

    # -- answer ------------------------------------------------------------------------------
    def finish(self, best: Candidate | None) -> Answer:
        runners = self.executed[1:6]
        if runners:
            self.trace.emit(
                "info",
                text="runners-up: "
                + "; ".join(f"{c.describe()} ({c.score:.2f}, {c.rows} rows)" for c in runners[:3]),
                candidates=[
                    {
                        "score": c.score,
                        "rows": c.rows,
                        "shape": c.describe(),
                        "sparql": self.display(c),
                    }
                    for c in runners
                ],
            )
        confidence = self.confidence(best)
        if best is None or best.result is None or confidence < self.strategy.threshold:
            text = "I could not find an answer in this knowledge graph."
            if best is not None:
                text += f" (The best guess, {best.describe()}, scored {confidence:.2f}, below the threshold {self.strategy.threshold:.2f}.)"
            self.trace.emit("answer", text=text, status="not_found", confidence=confidence)
            return Answer(
                self.question,
                self.strategy.name,
                self.display(best) if best else None,
                None,
                text,
                self.trace,
                status="not_found",
                confidence=confidence,
            )
        self.trace.emit("thought", text=f"Best query ({best.describe()}), score {best.score:.2f}.")
        text = self.sentence(best)
        self.trace.emit("answer", text=text, status="answered", confidence=confidence)
        return Answer(
            self.question,
            self.strategy.name,
            self.display(best),
            best.result,
            text,
            self.trace,
            status="answered",
            confidence=confidence,
            extra={
                "shape": best.shape,
                "score": best.score,
                "coverage": round(self.coverage(best), 4),
                "fit": best.fit,
                "margin": round(self.margin(best), 4),
                "linking_seconds": round(self.linking.seconds, 4),
            },
        )

    def margin(self, best: Candidate) -> float:
        """How far the best query is ahead of the best one that gives a different answer."""
        others = [
            c
            for c in self.executed
            if c is not best and c.result is not None and not _same_answer(c.result, best.result)
        ]
        return best.score - others[0].score if others else 0.25

    def confidence(self, best: Candidate | None) -> float:
        """The best score mapped to [0, 1], a little higher when no rival answer comes close."""
        if best is None:
            return 0.0
        raw = (best.score - CONFIDENCE_FLOOR) / (CONFIDENCE_CEILING - CONFIDENCE_FLOOR)
        return round(max(0.0, min(1.0, raw + 0.5 * min(0.2, self.margin(best)))), 4)

    def display(self, c: Candidate) -> str:
        """The query with the KG's prefixes applied."""
        text = c.sparql()
        prefixes = self.kg.prefixes

        def compact(m: re.Match[str]) -> str:
            short = prefixes.compact(m.group(1))
            return short if not short.startswith("<") else m.group(0)

        body = re.sub(r"<([^<>\s]+)>", compact, text)
        return declare_prefixes(body, prefixes.mapping).query

    def sentence(self, c: Candidate) -> str:
        table = c.result
        assert table is not None
        if c.form == "ask":
            return "Yes." if table.boolean else "No."
        if c.form == "count":
            n = table.rows[0].get("count") if table.rows else None
            return f"There are {n.value if n else 0}."
        if c.form == "aggregate":
            value = table.rows[0]["value"].value
            what = {"AVG": "average", "SUM": "total", "MIN": "minimum", "MAX": "maximum"}
            return f"The {what.get(c.aggregate or '', 'value')} is {_round(value)}."
        values = table.column("a")
        labels = shown_labels(table, self.kg.names, head=10, tail=0)  # every row binds ?a
        shown = [_show(v, labels) for v in values[:10]]
        more = len(values) - len(shown)
        listed = ", ".join(shown[:-1]) + (" and " if len(shown) > 1 else "") + shown[-1]
        if more > 0:
            listed = ", ".join(shown) + f" and {more} more"
        if len(values) == 1:
            return f"The answer is {listed}."
        return (
            f"The answers are {listed} ({len(values)} in total)."
            if more > 0
            else f"The answers are {listed}."
        )


def _show(term: Term, labels: dict[str, str]) -> str:
    if term.kind == "uri":
        return labels.get(term.value) or humanise(local_name(term.value)) or term.value
    return clip(term.value, 80)


def _round(value: str) -> str:
    """A computed number shown with at most four decimals."""
    try:
        number = float(value)
    except ValueError:
        return value
    return str(int(number)) if number.is_integer() else f"{number:.4f}".rstrip("0")


def _int(term: Term | None) -> int:
    try:
        return int(term.value) if term is not None else 0
    except ValueError:
        return 0


def _is_number(term: Term) -> bool:
    return bool(NUMBER.match(term.value.strip())) or (
        (term.datatype or "").startswith(XSD)
        and term.datatype
        in (
            XSD + "integer",
            XSD + "decimal",
            XSD + "double",
            XSD + "float",
            XSD + "int",
            XSD + "long",
        )
    )


def _same_answer(a: ResultTable | None, b: ResultTable | None) -> bool:
    if a is None or b is None:
        return False
    if a.is_boolean or b.is_boolean:
        return a.boolean == b.boolean
    return {t for t in a.values()} == {t for t in b.values()}


__all__ = ["Candidate", "LexicalStrategy", "create"]
