"""Candidate queries of a bounded shape over the question's linked entities, literal values, classes
and relations: one and two hops, intersections, type constraints, counts, ASK, superlatives, filters."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sparqlnav.graph.results import XSD, ResultTable, Term
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.question.intent import NUMBER, Comparison, Superlative
from sparqlnav.question.linking import EntityCandidate, relation_match
from sparqlnav.question.words import WordToken
from sparqlnav.strategies.lexical.context import Context

Direction = Literal["out", "in"]
Form = Literal["select", "count", "ask", "aggregate"]

MAX_ANCHORS = 4
MAX_CLASSES = 2
# How much a query's shape alone justifies a relation no question word names.
UNNAMED_TYPED = 0.55  # the only relation from the anchor to things of the asked-for class
UNNAMED_JOIN = 0.45  # a relation that joins two linked anchors
UNNAMED_HOP = 0.35  # one hop of a two-hop path whose other hop is named
UNNAMED_ORDER = 0.15  # an attribute to order by that no question word names


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
    person_share: float | None = None  # for who-questions: the share of typed answers that are people

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
            # each thing's value once: a join that repeats a thing (a member with three partners) must not weigh
            # its value three times in an average or a total
            inner = where.replace("\n", "\n  ")
            return f"SELECT ({self.aggregate}(?v) AS ?value) WHERE {{\n  SELECT DISTINCT ?a ?v WHERE {inner}\n}}"
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


@dataclass
class Candidates:
    """Builds the candidate queries of one run; `prior` scores each before it runs."""

    ctx: Context
    prior: Callable[[Candidate], float]
    _rel_cache: dict[tuple[str, str], list[Rel]] = field(default_factory=dict)
    _attrs: dict[tuple[str, str], list[tuple[tuple[str, ...], str]]] = field(default_factory=dict)

    # -- anchors -----------------------------------------------------------------------------
    def anchors(self, entities: Sequence[EntityCandidate]) -> list[Anchor]:
        """The linked entities and literal values a query may start from, best first."""
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
            for m in self.ctx.linking.mentions
            if m.source in ("quoted", "capitalised", "code") and m.first >= 0
        ]
        values: dict[str, tuple[str, frozenset[int]]] = {}  # N3 → (text, positions)
        for m in mentions:
            for text in {m.text, m.text.title()}:
                for term in (_literal_n3(text, None), _literal_n3(text, "en")):
                    values.setdefault(term, (text, m.positions))
        modifiers = self.ctx.intent.positions
        for i, t in enumerate(self.ctx.tokens):
            if i in modifiers or not NUMBER.match(t.text) or "," in t.text:
                continue
            values.setdefault(t.text, (t.text, frozenset({i})))  # xsd:integer or xsd:decimal
            values.setdefault(_literal_n3(t.text, None), (t.text, frozenset({i})))
        if not values:
            return []
        text_preds = set(self.ctx.kg.vocab.text_predicates)
        rows = self.ctx.rows(
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
        """The usable properties around an anchor, in both directions, with each one's share of its triples."""
        key = (anchor.term, "1")
        if key in self._rel_cache:
            return self._rel_cache[key]
        found: list[Rel] = []
        queries: list[tuple[Direction, str]] = [("in", f"?s ?p {anchor.term}")]
        if anchor.kind == "entity":
            queries.insert(0, ("out", f"{anchor.term} ?p ?o"))
        for direction, pattern in queries:
            rows = self.ctx.rows(
                f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {pattern} }} GROUP BY ?p LIMIT 300"
            )
            counts = {r["p"].value: _int(r.get("n")) for r in rows if "p" in r}
            total = sum(counts.values()) or 1
            found += [Rel(p, direction, "", (), n / total) for p, n in counts.items()]
        out = [self.named(r) for r in found if self.ctx.usable_predicate(r.iri)]
        self._rel_cache[key] = out
        return out

    def named(self, rel: Rel) -> Rel:
        """The relation with its names and display label."""
        names = self.ctx.names(rel.iri)
        return replace(rel, label=names[0] if names else humanise(local_name(rel.iri)), names=names)

    def rel_part(self, rel: Rel, exclude: Iterable[int], unnamed: float = 0.1) -> Part:
        """The relation as a query part; `unnamed` is its score when no question word names it (how much
        the query's shape alone justifies it)."""
        m = relation_match(rel.names, self.ctx.tokens, exclude)
        return Part("relation", rel.label, m.positions, m.score if m.score > 0 else unnamed)

    # -- enumeration -------------------------------------------------------------------------
    def enumerate(self, anchors: list[Anchor], classes: list[EntityCandidate]) -> list[Candidate]:
        """Every candidate query over the anchors and classes, ranked by prior."""
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
            if self.ctx.remaining() > 0.3 * self.ctx.budget_s:
                for c in self.two_hops(anchor, a_part):
                    add(c)
        for i, a1 in enumerate(top):
            for a2 in top[i + 1 :]:
                if a1.positions & a2.positions or self.ctx.remaining() < 0.3 * self.ctx.budget_s:
                    continue
                for c in self.intersections(a1, a2):
                    add(c)
        for cls in classes:
            add(
                Candidate(
                    "class",
                    (f"?a <{self.ctx.type_pred}> <{cls.iri}>",),
                    (Part("class", cls.label, cls.positions, cls.score),),
                )
            )
        if self.ctx.intent.superlative and self.ctx.intent.superlative.counting:
            for c in self.counting_superlatives(classes):
                add(c)
        if self.ctx.intent.answer == "boolean":
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
                        patterns=(*c.patterns, f"?a <{self.ctx.type_pred}> <{cls.iri}>"),
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
        self.ctx.trace.emit(
            "thought",
            text=f"{len(ranked)} candidate queries; running the most promising within {self.ctx.budget_s:g} s.",
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
            rows = self.ctx.rows(
                f"SELECT ?p (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {pat} . ?a <{self.ctx.type_pred}> <{cls.iri}> }} GROUP BY ?p LIMIT 50"
            )
            for r in rows:
                if "p" not in r or not self.ctx.usable_predicate(r["p"].value):
                    continue
                rel = self.named(Rel(r["p"].value, direction, "", ()))
                # the class justifies a relation no word names
                rp = self.rel_part(rel, anchor.positions | cls.positions, UNNAMED_TYPED)
                pattern = pat.replace("?p", f"<{rel.iri}>")
                out.append(
                    Candidate(
                        "typed one-hop " + direction,
                        (pattern, f"?a <{self.ctx.type_pred}> <{cls.iri}>"),
                        (a_part, rp, c_part),
                    )
                )
        return out

    def two_hops(self, anchor: Anchor, a_part: Part) -> list[Candidate]:
        """Paths of two hops from the anchor (through Wikibase statement nodes too)."""
        out: list[Candidate] = []
        shapes = [("out", "out"), ("out", "in"), ("in", "out"), ("in", "in")]
        for d1, d2 in shapes:
            if d1 == "out" and anchor.kind == "literal":
                continue
            first = f"{anchor.term} ?p1 ?x" if d1 == "out" else f"?x ?p1 {anchor.term}"
            second = "?x ?p2 ?a" if d2 == "out" else "?a ?p2 ?x"
            rows = self.ctx.rows(
                f"SELECT ?p1 ?p2 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {first} . {second} . "
                f"FILTER(isIRI(?x) || isBlank(?x)) FILTER(?a != {anchor.term}) }} GROUP BY ?p1 ?p2 LIMIT 400"
                if anchor.kind == "entity"
                else f"SELECT ?p1 ?p2 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {first} . {second} }} GROUP BY ?p1 ?p2 LIMIT 400"
            )
            for r in rows:
                if "p1" not in r or "p2" not in r:
                    continue
                p1, p2 = r["p1"].value, r["p2"].value
                via_statement = self.ctx.is_claim(p1)
                if not (
                    self.ctx.usable_predicate(p1, hop=2)
                    and self.ctx.usable_predicate(p2, hop=2 if via_statement else 1)
                ):
                    continue
                if p1 == p2 and d1 != d2:
                    continue  # back to where we started
                if (
                    self.ctx.wb
                    and self.ctx.wb.property_id(p1)
                    and self.ctx.wb.property_id(p1) == self.ctx.wb.property_id(p2)
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
        """Things related to both anchors (and n-ary statements joining them)."""
        out: list[Candidate] = []
        p1, p2 = a1.part(), a2.part()
        for d1 in ("out", "in"):
            for d2 in ("out", "in"):
                if (d1 == "out" and a1.kind == "literal") or (d2 == "out" and a2.kind == "literal"):
                    continue
                t1 = f"{a1.term} ?p1 ?a" if d1 == "out" else f"?a ?p1 {a1.term}"
                t2 = f"{a2.term} ?p2 ?a" if d2 == "out" else f"?a ?p2 {a2.term}"
                rows = self.ctx.rows(
                    f"SELECT ?p1 ?p2 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {t1} . {t2} }} GROUP BY ?p1 ?p2 LIMIT 100"
                )
                for r in rows:
                    if "p1" not in r or "p2" not in r:
                        continue
                    if not (
                        self.ctx.usable_predicate(r["p1"].value)
                        and self.ctx.usable_predicate(r["p2"].value)
                    ):
                        continue
                    if d1 == d2 == "out" and self.ctx.type_pred in (r["p1"].value, r["p2"].value):
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
        if self.ctx.intent.answer == "boolean" and a1.kind == "entity":
            rows = self.ctx.rows(
                f"SELECT DISTINCT ?p WHERE {{ {a1.term} ?p {a2.term} }} LIMIT 20"
            ) + self.ctx.rows(f"SELECT DISTINCT ?p WHERE {{ {a2.term} ?p {a1.term} }} LIMIT 20")
            for r in rows:
                if "p" in r and self.ctx.usable_predicate(r["p"].value):
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
            rows = self.ctx.rows(
                f"SELECT ?p1 ?p2 ?p3 (COUNT(DISTINCT ?a) AS ?n) WHERE {{ {first.term} ?p1 ?x . "
                f"?x ?p2 {second.term} . ?x ?p3 ?a . FILTER(?p3 != ?p2 && ?a != {first.term}) }} "
                "GROUP BY ?p1 ?p2 ?p3 LIMIT 100"
            )
            for r in rows:
                if not all(k in r for k in ("p1", "p2", "p3")):
                    continue
                p1, p2, p3 = r["p1"].value, r["p2"].value, r["p3"].value
                hop = 2 if self.ctx.is_claim(p1) else 1
                if not (
                    self.ctx.usable_predicate(p1, hop=2)
                    and self.ctx.usable_predicate(p2, hop=hop)
                    and self.ctx.usable_predicate(p3, hop=hop)
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
        sup = self.ctx.intent.superlative
        assert sup is not None
        out: list[Candidate] = []
        mod = Part(
            "modifier", f"{'most' if sup.direction == 'DESC' else 'least'}", sup.positions, 1.0
        )
        counted = [c for c in classes if c.positions & sup.positions]
        for rc in self.ctx.linking.relations[:12]:
            if rc.lexical < 0.5 or not self.ctx.usable_predicate(rc.iri):
                continue
            rel_out = Rel(rc.iri, "out", rc.label, self.ctx.names(rc.iri, rc.label))
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
                        ((pattern, f"?a <{self.ctx.type_pred}> <{cls.iri}>"), (rp, mod, c_part))
                    )
                for cls in counted:
                    c_part = Part("class", cls.label, cls.positions, cls.score)
                    variants += [
                        ((*pats, f"?x <{self.ctx.type_pred}> <{cls.iri}>"), (*parts, c_part))
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
                            show_count=self.ctx.intent.answer == "count",
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
        type_path = f"<{self.ctx.type_pred}>/<{self.ctx.subclass_pred}>*"
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
        named = [r for r in self.ctx.linking.relations if r.lexical >= 0.5][:5]
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
        """The ranked candidates plus their aggregate and attribute-modified variants."""
        intent = self.ctx.intent
        out = list(ranked)
        sets = [c for c in ranked if c.form == "select" and not c.order and not c.group_count]
        if intent.answer == "count":
            mod = Part("modifier", "how many", intent.positions, 1.0)
            out += [
                self.rescored(replace(c, form="count", parts=(*c.parts, mod))) for c in sets[:40]
            ]
        if intent.answer == "boolean":
            mod = Part("modifier", "yes/no", frozenset(), 1.0)
            # "Is Japan landlocked?" asks the value of a yes/no property, not whether it has one
            true = f"!isLiteral(?a) || datatype(?a) != <{XSD}boolean> || ?a"
            out += [self.rescored(replace(c, form="ask", parts=(*c.parts, mod), filters=(*c.filters, true)))
                    for c in sets[:40]]
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
        agg = self.ctx.intent.aggregate
        assert agg is not None
        out: list[Candidate] = []
        for base in bases:
            if self.ctx.remaining() < 0.25 * self.ctx.budget_s:
                break
            wanted = [t for i, t in enumerate(self.ctx.tokens) if i not in base.positions]
            for preds, label in self.attributes(base, "?a", wanted):
                names = tuple(n for p in preds for n in self.ctx.names(p))
                m = relation_match(names, self.ctx.tokens, base.positions, abbreviations=True)
                if m.score < 0.5:
                    continue
                mod = Part(
                    "modifier",
                    f"{agg} {label}",
                    self.ctx.intent.aggregate_positions | m.positions,
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
        """The candidate with its prior computed again."""
        c.prior = self.prior(c)
        return c

    def attributes(
        self, base: Candidate, var: str, wanted: Sequence[WordToken] = ()
    ) -> list[tuple[tuple[str, ...], str]]:
        """Numeric or date attributes of `var` in a base query: direct ones, and those one value node
        away (a price node's amount) unless a direct one already matches the `wanted` words."""
        where = " . ".join(base.patterns)
        key = (where, var)
        if key not in self._attrs:
            dates = f"<{XSD}date>, <{XSD}dateTime>, <{XSD}gYear>"
            direct: list[tuple[tuple[str, ...], str]] = [
                ((r["p"].value,), self.ctx.label(r["p"].value))
                for r in self.ctx.rows(
                    f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {where} . {var} ?p ?val . "
                    f"FILTER(isNumeric(?val) || datatype(?val) IN ({dates})) }} GROUP BY ?p LIMIT 100"
                )
                if "p" in r and self.ctx.usable_predicate(r["p"].value)
            ]
            self._attrs[key] = direct
        found = list(self._attrs[key])
        named = any(
            relation_match(self.ctx.names(preds[0]), wanted, abbreviations=True).score >= 0.8
            for preds, _ in found
        )
        if named:
            return found
        deep_key = (where, var + "/deep")
        if deep_key not in self._attrs:
            deep: list[tuple[tuple[str, ...], str]] = []
            for r in self.ctx.rows(
                f"SELECT ?p ?q (COUNT(*) AS ?n) WHERE {{ {where} . {var} ?p ?node . ?node ?q ?val . "
                f"FILTER(!isLiteral(?node)) FILTER(isNumeric(?val)) }} GROUP BY ?p ?q LIMIT 100"
            ):
                if "p" in r and "q" in r and self.ctx.usable_predicate(r["p"].value, hop=2):
                    p, q = r["p"].value, r["q"].value
                    deep.append(((p, q), f"{self.ctx.label(p)} / {self.ctx.label(q)}"))
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
        hint_tokens = [WordToken(h, -1, -1) for h in sup.hints] if sup else []
        for base in bases:
            if self.ctx.remaining() < 0.25 * self.ctx.budget_s:
                break
            # ?x: the node before the answers; ?y: the thing whose attribute an extension answers ("the title of
            # the oldest book" orders the books, not their titles)
            variables = ["?a"] + [v for v in ("?x", "?y") if any(re.search(rf"\{v}\b", p) for p in base.patterns)]
            for var in variables if sup else ["?a"]:
                wanted = [t for i, t in enumerate(self.ctx.tokens) if i not in base.positions]
                attrs = self.attributes(base, var, [*wanted, *hint_tokens])
                if sup:
                    for preds, label in attrs:
                        names = tuple(n for p in preds for n in self.ctx.names(p))
                        hint = relation_match(names, hint_tokens, abbreviations=True)
                        own = relation_match(names, self.ctx.tokens, base.positions, abbreviations=True)
                        score = max(hint.score, own.score, UNNAMED_ORDER) - (0.05 * (len(preds) - 1))
                        if len(preds) > 1 and not self.names_value(preds[-1], hint_tokens, base.positions) and \
                                relation_match(self.ctx.names(preds[0]), hint_tokens, abbreviations=True).score < 0.5:
                            # "borders the most countries" is no order by the neighbours' longitude: the hop is
                            # named by the question, the value ordered by by nothing ("cheapest" names a price
                            # node, whose amount is its value)
                            score = UNNAMED_ORDER
                        direction = sup.direction
                        if "birth" in sup.hints and "age" in re.findall(r"[a-z]+", label.lower()):
                            # "the oldest" is the earliest birth or date, but the greatest age
                            direction = "DESC" if direction == "ASC" else "ASC"
                        mod = Part(
                            "modifier",
                            f"{direction} {label}",
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
                                order=direction,
                                limit=sup.limit,
                            )
                        )
                if comparisons:
                    out += self.filtered(base, attrs, comparisons)
        for c in out:
            c.prior = self.prior(c)
        return out

    def names_value(self, pred: str, hints: Sequence[WordToken], used: frozenset[int]) -> bool:
        """Whether a superlative's hints or the question's own words (beyond `used`) name the value property."""
        names = tuple(self.ctx.names(pred))
        return max(relation_match(names, hints, abbreviations=True).score,
                   relation_match(names, self.ctx.tokens, used, abbreviations=True).score) >= 0.5

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
                t if i in comp.hint_positions else WordToken("", -1, -1)
                for i, t in enumerate(self.ctx.tokens)
            ]
            best: tuple[float, tuple[str, ...], str, frozenset[int]] | None = None
            for preds, label in attrs:
                names = tuple(n for p in preds for n in self.ctx.names(p))
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
        named = [r for r in self.ctx.linking.relations if r.lexical >= 0.5]
        hop_bases = [
            c for c in ranked if any(r.positions & (self.ctx.content - c.positions) for r in named)
        ]
        for base in hop_bases[:8]:
            if self.ctx.remaining() < 0.3 * self.ctx.budget_s:
                break
            uncovered = self.ctx.content - base.positions
            renamed = tuple(re.sub(r"\?a\b", "?y", p) for p in base.patterns)
            inner = " . ".join(renamed)
            for direction in ("out", "in"):
                pat = "?y ?p ?a" if direction == "out" else "?a ?p ?y"
                for r in self.ctx.rows(
                    f"SELECT ?p (COUNT(DISTINCT ?a) AS ?n) (SAMPLE(?a) AS ?v) WHERE {{ {inner} . {pat} . "
                    f"FILTER(!isLiteral(?y) && ?a != ?y) }} GROUP BY ?p LIMIT 100"
                ):
                    if "p" not in r or not self.ctx.usable_predicate(r["p"].value):
                        continue
                    rel = self.named(Rel(r["p"].value, direction, "", ()))
                    rp = self.rel_part(rel, self.ctx.content - uncovered, 0.0)
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
                    sample = r.get("v")
                    if direction == "out" and sample is not None and sample.datatype == XSD + "boolean":
                        # "the organic orchards": a yes/no property the question says of the things is a condition
                        # on them, not a column of true and false
                        out.append(replace(base, shape=f"yes/no {base.shape}",
                                           patterns=(*base.patterns, f"?a <{rel.iri}> true"), parts=(*base.parts, rp)))
        for anchor in anchors:
            bases = [
                c
                for c in ranked
                if anchor.positions & (self.ctx.content - c.positions)
                and not anchor.positions & c.positions
            ]
            for base in bases[:4]:
                if self.ctx.remaining() < 0.3 * self.ctx.budget_s:
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
                for r in self.ctx.rows(
                    f"SELECT DISTINCT ?p WHERE {{ {where} . {pat} .{guard} }} LIMIT 20"
                ):
                    hop = 2 if node == "?x" else 1
                    if "p" not in r or not self.ctx.usable_predicate(r["p"].value, hop=hop):
                        continue
                    if r["p"].value == self.ctx.type_pred and (node != "?a" or direction == "out"):
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


def _int(term: Term | None) -> int:
    try:
        return int(term.value) if term is not None else 0
    except ValueError:
        return 0
