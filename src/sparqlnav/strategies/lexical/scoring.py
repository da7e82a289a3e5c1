"""How well a candidate query explains the question before it runs (coverage, link quality, shape) and
how well its answer fits what was asked after (who → a person, when → a date, how many → a number)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sparqlnav.graph.names import LabelIndex
from sparqlnav.graph.results import XSD, ResultTable, Term
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.question.intent import DATE_TYPES, NUMBER, PERSON_WORDS
from sparqlnav.question.words import is_stopword, word_similarity
from sparqlnav.strategies.lexical.candidates import UNNAMED_ORDER, Candidate
from sparqlnav.strategies.lexical.context import Context

# Scores (coverage, link quality, answer fit) run from about 0.2 for a stray guess to about 1.25 for a
# query that explains every word with sure links and fits the asked-for answer type.
CONFIDENCE_FLOOR = 0.2
CONFIDENCE_CEILING = 1.25
# What leaving question words out costs the confidence (chosen on DEMO, CK25 and BESTIARY together; the
# threshold is calibrated and measured across them in bench/results/lexical_calibration.md).
UNEXPLAINED_FACTOR = 0.6  # per content word the query does not explain
UNMATCHED_FACTOR = 0.3  # when some content word matches nothing any candidate query could use
PARTIAL_ASK_FACTOR = 0.2  # an ASK that leaves words out: yes/no about another question is a coin toss
# What asking for something the query does not do costs (per thing): the query answers an easier question, so
# whatever its other evidence, the confidence stays at most 0.05 (see bench/results/lexical_failures.md).
UNSUPPORTED_FACTOR = 0.05
LOOSE_FACTOR = 0.25  # per entity the question names by less than half of its name ("creatures" → a named creature)
# Per misreading: a query that reads the question's words as something else answers another question, however
# well it scores (issue 24: a fresh user's CK25 questions got three such answers at 0.65–0.88).
MISREAD_FACTOR = 0.1
_NAMING = frozenset({"name", "label", "title", "id", "identifier", "code", "email", "pref label", "alt label"})
_ASKED_AFTER = ("how many", "which", "what")
_NAME_WORDS = frozenset({"name", "names", "label", "labels", "title", "titles"})  # what a thing's label is
_NAMING_WORDS = _NAME_WORDS | {"id", "ids", "identifier", "identifiers", "code", "codes"}
NAME_TYPO = 0.75  # a word beside a thing's mention this like one of its name's words is that word misspelt
_KIND_WORDS = frozenset({"type", "types", "kind", "kinds", "class", "classes", "sort", "sorts", "category",
                         "categories"})
_KEY_WORDS = frozenset({"id", "ids", "identifier", "identifiers", "code", "codes", "key", "keys", "number",
                        "numbers"})
_KEY_NAME = re.compile(r"(^|[\s_-])(id|code|key)$")  # a relation named as a key column: "doctor_id", "ord id"
_COUNT_WORDS = frozenset({"count", "number", "total", "amount"})  # words a COUNT answers


@dataclass(frozen=True)
class QuestionCoverage:
    """What one run knows about its best candidate: how much of the question it explains and how well."""

    score: float
    prior: float
    coverage: float  # share of the content words the query explains
    link_quality: float  # mean link score of the query's parts
    weakest: float  # its weakest link
    fit: float  # how well the answer fits the asked-for type
    margin: float  # lead over the best query with a different answer
    rows: int
    form: str
    unexplained: tuple[str, ...]  # content words the query leaves out
    unmatched: tuple[str, ...]  # content words no candidate query could use: nothing in the graph matched them
    unsupported: tuple[str, ...] = ()  # what the question asks for that the query does not do ("negation: not")
    loose: tuple[str, ...] = ()  # entities named by less than half of their name's words
    misread: tuple[str, ...] = ()  # the question's words read as something else: a hop, an entity

    def to_json(self) -> dict[str, object]:
        """Plain data for `Answer.extra` and benchmarks."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass
class Scorer:
    """Scores the candidates of one run."""

    ctx: Context
    _types: dict[str, set[str]] = field(default_factory=dict)

    # -- scoring -----------------------------------------------------------------------------
    def coverage(self, c: Candidate) -> float:
        """The part of the question's content words the candidate explains."""
        if not self.ctx.content:
            return 1.0
        return len(self.ctx.content & c.positions) / len(self.ctx.content)

    def prior(self, c: Candidate) -> float:
        """How promising a candidate is before it runs: coverage, link quality, shape against intent."""
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
        intent = self.ctx.intent.answer
        if intent == "count" and c.form != "count" and not c.show_count:
            prior -= 0.08
        if intent == "boolean" and c.form != "ask":
            prior -= 0.15
        if intent not in ("count", "boolean") and c.form not in ("select", "aggregate"):
            prior -= 0.3
        if self.ctx.intent.aggregate and c.form != "aggregate":
            prior -= 0.1
        elif c.form == "aggregate" and not self.ctx.intent.aggregate:
            prior -= 0.3
        if self.ctx.intent.superlative and not (c.order or c.group_count):
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
        intent = self.ctx.intent.answer
        if c.form == "ask":
            return 1.0 if intent == "boolean" else 0.0
        if c.form == "count" or c.show_count:
            return 1.0 if intent == "count" else 0.1
        if c.form == "aggregate":
            return 1.0 if self.ctx.intent.aggregate else 0.1
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
        """The head words of the labels of some answers' classes and superclasses (one query, cached): a Hardware
        item is a product too, a product category is no product, a city is no human for being a "human settlement"."""
        wanted = [t.value for t in iris if t.value not in self._types]
        if wanted:
            values = " ".join(f"<{i}>" for i in wanted)
            typing, sub = f"<{self.ctx.type_pred}>", f"<{self.ctx.subclass_pred}>"
            rows = self.ctx.rows(
                f"SELECT DISTINCT ?a ?t ?up WHERE {{ VALUES ?a {{ {values} }} "
                f"{{ ?a {typing} ?t }} UNION {{ ?a {typing}/{sub}+ ?t BIND(true AS ?up) }} }} LIMIT 500"
            )
            types: dict[str, dict[str, bool]] = {i: {} for i in wanted}
            for r in rows:
                if "a" in r and "t" in r:
                    seen = types.setdefault(r["a"].value, {})
                    seen[r["t"].value] = seen.get(r["t"].value, True) and "up" in r
            labels = self.ctx.kg.names.labels_of({t for ts in types.values() for t in ts})
            for iri, ts in types.items():
                found: set[str] = set()
                for t, up in ts.items():
                    named = [w.lower() for w in re.findall(r"[A-Za-z]+", labels.get(t) or humanise(local_name(t)))]
                    # a compound class is a kind of its last word: a "product category" is a category, not a product
                    found |= set(named[-1:] if up or len(named) > 1 else named)
                self._types[iri] = found
        return {t.value: self._types.get(t.value, set()) for t in iris}

    def type_fit(self, c: Candidate) -> float:
        """How well the answers' types fit who-questions and the noun the question asks for."""
        assert c.result is not None
        if c.form != "select":
            return c.fit
        iris = answer_iris(c)
        focus = [self.ctx.tokens[i].text for i in self.ctx.intent.focus]
        if self.ctx.intent.answer == "person":
            if not iris:
                return c.fit
            types = self.type_words(iris)
            known = [ws for ws in types.values() if ws]
            if not known:
                return c.fit
            share = sum(1 for ws in known if ws & PERSON_WORDS) / len(known)
            c.person_share = share
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

    def focus_explained(self, c: Candidate) -> set[int]:
        """The words after "which/what" that the answers' types explain: the noun they name and what follows it
        ("which band played"), never a word before it ("which Scottish players": a condition the query may have
        left out; "which carrier took order 3" answered with orders). All of them when the graph types none of the
        answers (nothing to tell them apart by)."""
        focus = set(self.ctx.intent.focus)
        iris = answer_iris(c)
        known = [ws for ws in self.type_words(iris).values() if ws] if iris else []
        if not known:
            return focus
        words = {w for ws in known for w in ws}
        person = bool(words & PERSON_WORDS)
        named = [i for i in sorted(focus)
                 if any(word_similarity(self.ctx.tokens[i].text, w) >= 0.85 for w in words)
                 or (person and self.ctx.tokens[i].text.lower() in PERSON_WORDS)]
        # the noun and what follows it ("which band *played*"), not the words before it ("which *Scottish* players")
        return {i for i in focus if named and i >= named[0]}

    def named_in_answers(self, c: Candidate, positions: set[int]) -> set[int]:
        """The asked-for words every answer's own name says ("which units …" answered Unit 01, Unit 09)."""
        iris = [v.value for v in answer_iris(c)]
        labels = self.ctx.kg.names.labels_of(iris) if iris and c.form == "select" else {}
        if not labels or len(labels) < len(iris):
            return set()
        names = [re.findall(r"[A-Za-z]+", label) for label in labels.values()]
        return {i for i in positions
                if all(any(word_similarity(self.ctx.tokens[i].text, w) >= 0.85 for w in name) for name in names)}

    def margin(self, best: Candidate, executed: Sequence[Candidate]) -> float:
        """How far the best query is ahead of the best one that gives a different answer."""
        others = [
            c
            for c in executed
            if c is not best and c.result is not None and not _same_answer(c.result, best.result)
        ]
        return best.score - others[0].score if others else 0.25

    def evidence(self, best: Candidate, executed: Sequence[Candidate], enumerated: Sequence[Candidate]) -> QuestionCoverage:
        """What the confidence is computed from, for the best candidate."""
        scores = [min(1.0, p.score) for p in best.parts]
        reachable: frozenset[int] = frozenset()
        for c in enumerated:
            reachable |= c.positions
        words = self.ctx.tokens
        explained = set(best.positions)
        if best.form == "select" and best.fit >= 0.99:
            # every answer is of the kind the question asks for ("which elements …"): the noun is explained
            explained |= self.focus_explained(best)
        if best.form == "count" or best.show_count:
            # "the number of …", "… in total": the count itself says them
            explained |= {i for i in self.ctx.content if words[i].lower in _COUNT_WORDS}
        described = self.described_words(best)
        explained |= {
            i
            for i in self.ctx.content - explained
            if any(word_similarity(words[i].text, w) >= 0.85 for w in described)
        }
        explained |= self.named_in_answers(best, set(self.ctx.intent.focus) - explained)
        for p in best.parts:
            # a thing's own name explains a word next to its mention (a misspelt "Hienrich" beside "Hoch"), no other
            if p.kind != "entity" or not p.positions:
                continue
            name = re.findall(r"[A-Za-z]+", p.text)
            explained |= {i for i in self.ctx.content - explained
                          if min(abs(i - j) for j in p.positions) == 1
                          and any(word_similarity(words[i].text, w) >= NAME_TYPO for w in name)}
        return QuestionCoverage(
            score=best.score,
            prior=best.prior,
            coverage=round(self.coverage(best), 4),
            link_quality=round(sum(scores) / len(scores), 4) if scores else 0.0,
            weakest=round(min(scores), 4) if scores else 0.0,
            fit=best.fit,
            margin=round(self.margin(best, executed), 4),
            rows=best.rows,
            form=best.form,
            unexplained=tuple(words[i].text for i in sorted(self.ctx.content - explained)),
            unmatched=tuple(words[i].text for i in sorted(self.ctx.content - explained - reachable)),
            # a number or code the question gives is a condition: left out, the query answers a wider question
            unsupported=self.unsupported(best) + tuple(
                f"a condition left out: {words[i].text}" for i in sorted(self.ctx.content - explained)
                if any(ch.isdigit() for ch in words[i].text)),
            loose=self.loose(best),
            misread=self.misread(best) + self.asked_unsaid(best, explained),
        )

    def asked_unsaid(self, c: Candidate, explained: set[int]) -> tuple[str, ...]:
        """The noun a which/what question asks for is nowhere in the query ("what grade is referee X" answered with
        the matches X refereed): whatever it returns is of another kind."""
        focus = set(self.ctx.intent.focus)
        if c.form != "select" or not focus or focus & explained:
            return ()
        return (f"the asked '{' '.join(self.ctx.tokens[i].text for i in sorted(focus))}' is in no part of its query",)

    def misread(self, c: Candidate) -> tuple[str, ...]:
        """How the query reads the question's words as something they do not say: a hop of a longer path that only
        the asked-for noun names, through part of the property's name ("products" read as `compatibleProduct` after
        "in the category Sensor" had already found them); an entity named by another word that starts alike
        ("product" for the department "Production")."""
        words = [t.text.lower() for t in self.ctx.tokens]
        asked = self.asked_noun()
        out: list[str] = []
        hops = [p for p in c.parts if p.kind == "relation" and p.text.lower() not in _NAMING]
        if len(hops) >= 2:
            for p in hops:
                # A hop no word names is often implied ("suppliers … deliver Compensators" → has category), so only a
                # hop the asked-for noun names through part of a longer name counts.
                named = [w for w in re.findall(r"[a-z]+", p.text.lower()) if not is_stopword(w)]
                unsaid = [w for w in named if not any(word_similarity(w, q) >= 0.85 for q in words)]
                # the asked noun is a word of the name ("products" in `compatibleProduct`), not its answer type
                # ("what year" → `point in time`)
                partly = any(word_similarity(w, words[i]) >= 0.85 for w in named for i in asked)
                if p.positions and p.positions <= asked and unsaid and partly:
                    out.append(f"a hop the question does not name: {p.text}")
        # the noun a which/what question asks for (not "how many": "how many Harry Potter books" starts a name)
        focus = self.asked_noun() if self.ctx.intent.answer != "count" else frozenset()
        for p in c.parts:
            if p.kind != "entity":
                continue
            name = [w.lower() for w in re.findall(r"[A-Za-z]+", p.text)]
            first, last = min(p.positions, default=0), max(p.positions, default=0)
            # every word from the mention's first to its last is in the name ("states does the United States" is not)
            between = [re.sub(r"['’]s$", "", words[i]) for i in range(first + 1, last)]
            if any(not any(word_similarity(w, n) >= 0.85 for n in name) for w in between):
                # a name is said in one piece: "provinces does China" is no "Province of China"
                out.append(f"named by scattered words: {p.text}")
            kind = p.positions <= focus and all(
                any(word_similarity(words[i], n) >= 0.85 for i in p.positions) for n in name if not is_stopword(n))
            if p.positions & focus and not (
                kind and any(q.startswith("?a ") and q.endswith(f" {p.term}") for q in c.patterns)
            ):
                # "which autonomous community …", "the biggest stadium" (a club of Northwood Stadium): the noun asked
                # for is the answers' kind, not a thing to start from; only a thing named by the noun alone (the
                # concept "Province") may classify the answers
                out.append(f"the asked '{' '.join(words[i] for i in sorted(p.positions & focus))}' read as {p.text}")
            for i in p.positions:
                # "Geier's" is Geier, "aquan-speaking" holds Aquan, "zombies" is zombie: only a word that is the
                # start of a longer name word, and no form of one, is another word ("product" → Production).
                said = re.sub(r"['’]s$", "", words[i])
                for part in (w for w in re.split(r"[^a-z]+", said) if len(w) >= 4):
                    if any(word_similarity(x, w) >= 0.95 for w in name for x in (part, part.rstrip("s"))):
                        continue
                    if any(w.startswith(part) and len(w) > len(part) for w in name):
                        out.append(f"named by another word: '{self.ctx.tokens[i].text}' for {p.text}")
        return tuple(out) + self.misread_answer(c)

    def misread_answer(self, c: Candidate) -> tuple[str, ...]:
        """How the answer column is not what the question asks for: two things asked and one column given ("the bands
        and their home cities"); the counted things given for a grouped count ("which year had the most concerts" → a
        concert); the things given where a value of theirs was asked ("the city of the venue with …" → the venue);
        a value given where a superlative asked for a thing ("the most expensive concert" → a price)."""
        intent = self.ctx.intent
        if c.form == "count":
            return self.counted_values(c) + self.counted_class(c)
        if c.form == "ask":
            return self.text_for_link(c) + self.never_has(c)
        if c.form != "select" or c.result is None or c.show_count:
            return ()
        words = [t.text.lower() for t in self.ctx.tokens]
        values = c.result.column("a")
        iris = answer_iris(c)
        out: list[str] = []

        def said(positions: frozenset[int] | Sequence[int]) -> str:
            return " ".join(self.ctx.tokens[i].text for i in sorted(positions))

        def typed_as(positions: frozenset[int] | Sequence[int]) -> bool:
            """Every typed answer has a type named by one of these words."""
            known = [ws for ws in self.type_words(iris).values() if ws] if iris else []
            return bool(known) and all(
                any(word_similarity(words[i], w) >= 0.85 for i in positions for w in ws) for ws in known
            )

        if intent.pair is not None:
            first, second = intent.pair
            # "the bands and their names": the bands' labels are their names, so one column of things is whole; not
            # "the name and density of …" (two attributes), nor "their codes" (another column than the names)
            naming = {words[i] for i in second} <= _NAME_WORDS
            if not (naming and iris):
                out.append(f"two things asked, one column given: {said(first)} and {said(second)}")
        sup = intent.superlative
        if sup is not None and sup.counting and not sup.common and intent.focus:
            counted = frozenset({max(sup.positions)})
            if typed_as(counted) and not typed_as(intent.focus):
                out.append(f"the counted {said(counted)} given where a {said(intent.focus)} was asked")
        if sup is not None and sup.counting and not sup.common and c.group_count:
            out += self.counted_kind(c, max(sup.positions))
        if c.group_count:
            out += self.one_each(c)
        if intent.answer == "date" and values and not any(
            v.kind == "literal" and (v.datatype in DATE_TYPES or re.match(r"^\d{4}(-\d\d)?", v.value)) for v in values
        ):
            out.append("things given where a date or year was asked")  # "which year had the most …" → a concert
        asked = set(words)
        if c.order and re.search(r"\?y\b", " ".join(c.patterns)) and intent.head_of is None \
                and intent.answer not in ("number", "date"):
            # "which is the largest landlocked country?" answered with its `landlocked` value: the top thing's
            # attribute is an answer only to "the X of the …est Y"
            out.append("a value of the top thing given where the thing was asked")
        if values and any(re.search(rf"<{re.escape(self.ctx.type_pred)}>\s+\?a$", p) for p in c.patterns) \
                and not asked & _KIND_WORDS:
            out.append("classes given where no kind was asked")  # "who supervises X?" → the supervisor's class
        keys = [p for p in c.parts if p.kind == "relation" and _KEY_NAME.search(p.text.lower())]
        if keys and values and all(v.kind == "literal" for v in values) and not asked & _KEY_WORDS:
            out.append(f"a key given: {keys[0].text}")  # "who is X's doctor?" → doctor_id 41
        if intent.answer != "boolean" and values and all(v.datatype == XSD + "boolean" for v in values):
            out.append("yes/no values given where no yes/no was asked")  # "the organic orchards" → true, false
        if intent.answer == "place" and iris and any(ws & PERSON_WORDS for ws in self.type_words(iris).values()):
            out.append("people given where a place was asked")
        focus = frozenset(intent.focus)
        kinds = [e for e in self.ctx.linking.entities if e.kind == "class" and e.positions & focus and e.score >= 0.8]
        # the class the noun's last word names ("which product *category*": categories, not products)
        kind = max(kinds, key=lambda e: (max(e.positions), len(e.positions), e.score), default=None)
        if kind is not None and iris and intent.pair is None and not typed_as(kind.positions & focus):
            # "which clubs were relegated" answered with seasons: the graph has a class the noun names, and the
            # answers are typed as something else
            given = sorted({w for ws in self.type_words(iris).values() for w in ws})[:3]
            if given:
                out.append(f"{' '.join(given)} given where {said(kind.positions & focus)} was asked")
        if intent.head_of is not None:
            head, owner = intent.head_of
            if not {words[i] for i in head} <= _NAMING_WORDS and typed_as(owner) and not typed_as(head):
                out.append(f"the {said(owner)} given where its {said(head)} was asked")
        elif sup is not None and not sup.counting and values:
            after = [i for i in range(max(sup.positions) + 1, len(words)) if not is_stopword(words[i])][:1]
            named_class = after and any(p.kind == "class" and after[0] in p.positions for p in c.parts)
            if named_class and (not iris or not typed_as(after)):
                out.append(f"a value given where the {said(after)} was asked")
        return tuple(out)

    def counted_values(self, c: Candidate) -> tuple[str, ...]:
        """A count of the distinct numbers or yes/no values of an attribute ("how many beds …" counted how many
        different bed numbers there are): the question asks for the number itself, or for things."""
        # Only a value some property holds can be a number; things of a class ("how many persons") are not asked.
        typing = f"<{self.ctx.type_pred}>"
        if not any(p.endswith(" ?a") and p.split()[1] not in (typing, "a") for p in c.patterns):
            return ()
        rows = self.ctx.rows(f"SELECT ?a WHERE {{ {' . '.join(c.patterns)} }} LIMIT 20")
        values = [r["a"] for r in rows if "a" in r]
        if values and all(v.kind == "literal" and (_is_number(v) or v.datatype == XSD + "boolean") for v in values):
            named = next((p.text for p in c.parts if p.kind == "relation"), "an attribute")
            return (f"counted the values of {named} (numbers or yes/no), not things",)
        return ()

    def one_each(self, c: Candidate) -> tuple[str, ...]:
        """A grouped count where no group counts more than one ("which ward has the most beds" counting each ward's
        own id): the order says nothing and its top is any of them."""
        rows = self.ctx.rows(f"SELECT (MAX(?n) AS ?most) WHERE {{ SELECT ?a (COUNT(DISTINCT ?x) AS ?n) WHERE "
                             f"{{ {' . '.join(c.patterns)} }} GROUP BY ?a }}")
        most = rows[0].get("most") if rows else None
        if most is not None and most.value.strip() in ("0", "1"):
            return ("every answer counted once: the most of nothing",)
        return ()

    def never_has(self, c: Candidate) -> tuple[str, ...]:
        """A false yes/no whose subject has no value at all for the property asked about, or whose value that
        property never holds for anything: "No" would say the value is another one, but the graph says nothing
        there ("is the referee Elite?" on a match's property, or on the referee's code)."""
        if c.result is None or c.result.boolean is not False or len(c.patterns) != 1:
            return ()
        m = re.match(r"^(<[^<>\s]+>)\s+(<[^<>\s]+>)\s+(.+)$", c.patterns[0])
        if m is None:
            return ()
        subject, prop, value = m.groups()
        res = self.ctx.query(f"ASK {{ {subject} {prop} ?any }}")
        if res is not None and res.table is not None and res.table.boolean is False:
            return (f"{self.ctx.label(prop[1:-1])} never said of {self.ctx.label(subject[1:-1])}",)
        if not value.startswith("?"):
            # "is the referee Elite?" asked of the referee's code: no one's code is "Elite", so the value is another
            # property's and "No" says nothing
            res = self.ctx.query(f"ASK {{ ?s {prop} {value} }}")
            if res is not None and res.table is not None and res.table.boolean is False:
                return (f"no {self.ctx.label(prop[1:-1])} is {value}",)
        return ()

    def counted_class(self, c: Candidate) -> tuple[str, ...]:
        """A count of things of another class than the one the question counts ("how many patients …" counting
        visits): the graph has a class the counted noun names, and the counted things are typed otherwise."""
        asked = self.asked_noun()
        if not any(e.kind == "class" and e.positions & asked and e.score >= 0.8 for e in self.ctx.linking.entities):
            return ()
        if any(p.kind == "class" and p.positions & asked for p in c.parts):
            return ()  # the query itself types what it counts by the class the noun names
        rows = self.ctx.rows(f"SELECT DISTINCT ?a WHERE {{ {' . '.join(c.patterns)} }} LIMIT 20")
        counted = [r["a"] for r in rows if "a" in r and r["a"].kind == "uri"]
        known = [ws for ws in self.type_words(counted).values() if ws] if counted else []
        words = [self.ctx.tokens[i].text.lower() for i in sorted(asked)]
        if known and not all(any(word_similarity(q, w) >= 0.85 for q in words for w in ws) for ws in known):
            kinds = sorted({w for ws in known for w in ws})[:3]
            return (f"counted {' '.join(kinds)} where the question counts {' '.join(words)}",)
        return ()

    def text_for_link(self, c: Candidate) -> tuple[str, ...]:
        """A yes/no asking whether a property holds a text, where the property links to things: it is false
        whatever the data says ("is the referee Elite?" asked as a link to the text "Elite")."""
        out: list[str] = []
        for pattern in c.patterns:
            m = re.match(r'^\S+\s+<([^<>\s]+)>\s+"', pattern)
            if m is None:
                continue
            prop = m.group(1)
            if self._holds(prop, "isIRI") is True and self._holds(prop, "isLiteral") is False:
                out.append(f"a text where {self.ctx.label(prop)} links to things")
        return tuple(out)

    def _holds(self, prop: str, test: str) -> bool | None:
        """Whether some value of a property passes `isIRI` or `isLiteral` (None when the query failed)."""
        res = self.ctx.query(f"ASK {{ ?s <{prop}> ?o FILTER({test}(?o)) }}")
        return res.table.boolean if res is not None and res.table is not None else None

    def counted_kind(self, c: Candidate, noun: int) -> tuple[str, ...]:
        """A grouped count whose counted things are of another kind than the question counts ("which season had the
        most goals?" counting the season's matches)."""
        m = re.search(r"COUNT\(DISTINCT (\?\w+)\)", c.sparql())
        if m is None:
            return ()
        var = m.group(1)
        rows = self.ctx.rows(f"SELECT DISTINCT {var} WHERE {{ {' . '.join(c.patterns)} }} LIMIT 20")
        counted = [r[var[1:]] for r in rows if var[1:] in r and r[var[1:]].kind == "uri"]
        known = [ws for ws in self.type_words(counted).values() if ws] if counted else []
        word = self.ctx.tokens[noun].text.lower()
        if known and not any(word_similarity(word, w) >= 0.85 for ws in known for w in ws):
            kinds = sorted({w for ws in known for w in ws})[:3]
            return (f"counted {' '.join(kinds)} where the question counts {self.ctx.tokens[noun].text}",)
        return ()

    def asked_noun(self) -> frozenset[int]:
        """The positions of the noun the answer is: the intent's focus, else the first content word after "how
        many" ("how many *products* are …")."""
        if self.ctx.intent.focus:
            return frozenset(self.ctx.intent.focus)
        words = [t.text.lower() for t in self.ctx.tokens]
        for i in range(len(words) - 2):
            if (words[i], words[i + 1]) == ("how", "many") and not is_stopword(words[i + 2]):
                return frozenset({i + 2})
        sup = self.ctx.intent.superlative
        if sup is not None and not sup.counting and words[:1] in (["what"], ["which"]):
            # "what is the biggest *stadium*"
            after = [i for i in range(max(sup.positions) + 1, len(words)) if not is_stopword(words[i])][:1]
            return frozenset(after)
        return frozenset()

    def loose(self, c: Candidate) -> tuple[str, ...]:
        """The query's entities the question names by less than half of their name's words: a general word
        linked to one specific thing ("creatures" → "Dream Spectre Nightmare Creature")."""
        asked = [t.text for t in self.ctx.tokens]
        out: list[str] = []
        for p in c.parts:
            if p.kind != "entity":
                continue
            name = [w for w in re.findall(r"[A-Za-z0-9]+", p.text) if not is_stopword(w)]
            said = sum(1 for w in name if any(word_similarity(w, t) >= 0.85 for t in asked))
            if 2 * said < len(name):
                out.append(p.text)
        return tuple(out)

    def unsupported(self, c: Candidate) -> tuple[str, ...]:
        """What the question asks for that the query does not do: an operation no bounded shape carries
        (negation, comparing two things, a proportion, a rank below the top, alternatives, grouping), or an
        asked-for count, yes/no, ordering, aggregate or numeric condition the query leaves out (or orders by an
        attribute nothing names), or people or things asked for and none among the answers. Each is a different,
        harder question than the one answered."""
        intent = self.ctx.intent
        out = [f"{o.kind}: {o.word}" for o in intent.operations]
        if intent.answer == "count" and c.form != "count" and not c.show_count and c.fit < 0.8:
            out.append("count")
        if intent.answer == "boolean" and c.form != "ask":
            out.append("yes/no")
        if intent.answer != "boolean" and c.form == "ask":
            out.append("not a yes/no question")
        sup = intent.superlative
        ordered = c.order is not None or c.group_count or c.aggregate in ("MIN", "MAX")
        if sup is not None and not ordered and not intent.aggregate:
            out.append("superlative")
        if c.order and any(p.kind == "modifier" and p.score <= UNNAMED_ORDER for p in c.parts):
            out.append("superlative: by an attribute no word names")  # "the rarest" ordered by strength
        # MIN and MAX are also an ordering with LIMIT 1; AVG and SUM only the aggregate itself
        if (intent.aggregate in ("AVG", "SUM") and c.aggregate != intent.aggregate) or (
            intent.aggregate in ("MIN", "MAX") and not ordered
        ):
            out.append(f"aggregate: {intent.aggregate}")
        if len(c.filters) < len(intent.comparisons):
            out.append("numeric condition")
        if intent.answer == "person" and c.form == "select" and c.person_share == 0.0:
            out.append("answer type: no person among the answers")
        if (
            intent.answer == "thing"
            and intent.focus
            and c.form == "select"
            and c.result is not None
            and not any(v.kind == "uri" for v in c.result.column("a"))
        ):
            # "which elements …", "what creatures …" answered with plain values (as type_fit reads it)
            out.append("answer type: values where things were asked")
        return tuple(out)

    def described_words(self, c: Candidate) -> set[str]:
        """The words of the names, aliases and descriptions of the IRIs a query uses: what the graph itself says
        they mean ("atomic mass" names a mass property; a phase property is described "at standard temperature
        and pressure")."""
        words: set[str] = set()
        # a thing's own name explains no other word ("how many states does the United States have")
        things = {p.term for p in c.parts if p.kind == "entity" and p.term}
        for iri in dict.fromkeys(re.findall(r"<([^<>\s]+)>", c.sparql())):
            if f"<{iri}>" in things:
                item = self.ctx.kg.names.item(iri) if isinstance(self.ctx.kg.names, LabelIndex) else None
                description = item.description if item is not None else ""
                words |= {w.lower() for w in re.findall(r"[A-Za-z]+", description or "") if len(w) > 2}
                continue
            texts = list(self.ctx.names(iri))
            pid = self.ctx.wb.property_id(iri) if self.ctx.wb else None
            entity = self.ctx.wb.entity_iri(pid) if self.ctx.wb and pid else iri  # wdt:P515 is described as wd:P515
            item = self.ctx.kg.names.item(entity) if isinstance(self.ctx.kg.names, LabelIndex) else None
            if item is not None:
                texts += [item.label, item.description]
            words |= {w.lower() for t in texts for w in re.findall(r"[A-Za-z]+", t or "") if len(w) > 2}
        return words

    def confidence(
        self, best: Candidate | None, executed: Sequence[Candidate], evidence: QuestionCoverage | None = None
    ) -> float:
        """The best score mapped to [0, 1], a little higher when no rival answer comes close, and discounted
        for every question word the query leaves out: a query that ignores a word of the question answers
        another question (calibrated in bench/lexical_calibration.py)."""
        if best is None:
            return 0.0
        raw = (best.score - CONFIDENCE_FLOOR) / (CONFIDENCE_CEILING - CONFIDENCE_FLOOR)
        raw = max(0.0, min(1.0, raw + 0.5 * min(0.2, self.margin(best, executed))))
        if evidence is not None:
            raw *= UNEXPLAINED_FACTOR ** len(evidence.unexplained)
            if evidence.unmatched:
                raw *= UNMATCHED_FACTOR  # nothing in the graph matches a word: "salary" where there are none
            if best.form == "ask" and evidence.unexplained:
                raw *= PARTIAL_ASK_FACTOR  # yes/no about part of the question is a coin toss
            raw *= UNSUPPORTED_FACTOR ** len(evidence.unsupported)
            raw *= LOOSE_FACTOR ** len(evidence.loose)
            raw *= MISREAD_FACTOR ** len(evidence.misread)
        return round(raw, 4)


def answer_iris(c: Candidate, most: int = 20) -> list[Term]:
    """The first things (IRIs) among a candidate's answers: what the type checks look at."""
    return [v for v in c.result.column("a") if v.kind == "uri"][:most] if c.result is not None else []


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
