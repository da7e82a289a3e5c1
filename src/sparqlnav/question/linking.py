"""Entity and relation linking: find what a question mentions and which things and properties of a
knowledge graph those mentions name.

Entity linking proposes mentions (quoted strings, codes such as `M558-2275045`, capitalised spans and
word n-grams), looks each up in the KG's name index and scores every candidate by how well the mention
matches the name, how specific the mention is and how connected the thing is. With an LLM client, a
SPAGHETTI-style pass (spaghetti.txt §3.1, appendix A) adds the mentions the LLM lists, each with a short
description used to choose between namesakes.

Relation linking ranks properties by word overlap of their labels, aliases and local names with the
question, favours the relations the linked entities actually have, blends in embedding similarity when
an embedder is given, and keeps the top 40 (queryagent.txt appendix B.3).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, Field
from rapidfuzz import fuzz

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.names import Kind, LabelIndex, NameHit
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.question.words import (
    WordToken,
    is_code,
    is_stopword,
    name_similarity,
    name_words,
    stem,
    tokenize,
    word_similarity,
)
from sparqlnav.tools.lookup import LookupFailed, property_iri, relations

if TYPE_CHECKING:
    from sparqlnav.llm import LLMClient
    from sparqlnav.trace import Trace

MentionSource = Literal["quoted", "code", "capitalised", "ngram", "llm"]
Direction = Literal["out", "in"]

MAX_NGRAM = 5
HITS_PER_MENTION = 6
MIN_ENTITY_SCORE = 0.55
RELATION_LIMIT = 40


_BREAKS = re.compile(r"[\"“”‘’',;:()]")  # what ends a run of capitalised words
_QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”|‘([^’]{2,80})’|(?<!\w)'([^']{2,80})'(?!\w)")




@dataclass(frozen=True)
class Mention:
    """A span of the question that may name something; `first`/`last` are token indices (inclusive)."""

    text: str
    first: int
    last: int
    source: MentionSource
    description: str = ""

    @property
    def positions(self) -> frozenset[int]:
        """Token indices the mention covers (empty for an LLM mention not found in the question)."""
        if self.first < 0:
            return frozenset()
        return frozenset(range(self.first, self.last + 1))


_SOURCE_RANK: dict[MentionSource, int] = {
    "llm": 0,
    "quoted": 1,
    "code": 2,
    "capitalised": 3,
    "ngram": 4,
}


def find_mentions(question: str, *, max_ngram: int = MAX_NGRAM) -> list[Mention]:
    """Quoted strings, codes, capitalised spans and content n-grams of a question, one per span."""
    tokens = tokenize(question)
    found: dict[tuple[int, int], Mention] = {}

    def add(first: int, last: int, source: MentionSource) -> None:
        text = question[tokens[first].start : tokens[last].end]
        prev = found.get((first, last))
        if prev is None or _SOURCE_RANK[source] < _SOURCE_RANK[prev.source]:
            found[(first, last)] = Mention(text, first, last, source)

    for m in _QUOTED.finditer(question):
        start, end = m.span()
        inside = [i for i, t in enumerate(tokens) if t.start >= start and t.end <= end]
        if inside:
            add(inside[0], inside[-1], "quoted")
    for i, t in enumerate(tokens):
        if is_code(t.text) and not t.text.isdigit():
            add(i, i, "code")
    # Capitalised runs ("Data Services", "Bill of Materials"); a sentence-initial word only when it is not
    # a question or stop word.
    def joined(a: int, b: int) -> bool:
        """Whether tokens a and b (a < b) may be one name: nothing but spaces between them, no quote or comma
        (`Town 'Name'` is a word and a quoted name, not a name `Town 'Name`)."""
        return not _BREAKS.search(question[tokens[a].end : tokens[b].start])

    i = 0
    while i < len(tokens):
        if _capitalised(tokens[i].text) and not (is_stopword(tokens[i].text)):
            j = i
            while j + 1 < len(tokens):
                nxt = tokens[j + 1].text
                if _capitalised(nxt) and not is_stopword(nxt) and joined(j, j + 1):
                    j += 1
                elif (
                    nxt.lower() in ("of", "de", "von", "van", "der", "la", "le", "and", "&")
                    and j + 2 < len(tokens)
                    and _capitalised(tokens[j + 2].text)
                    and joined(j, j + 2)
                ):
                    if nxt.lower() in ("and", "&"):
                        # "Portugal and Spain" is two names as often as "Procter and Gamble" is one: both are kept
                        add(i, j, "capitalised")
                        k = j + 2
                        while k + 1 < len(tokens) and _capitalised(tokens[k + 1].text) and joined(k, k + 1):
                            k += 1
                        add(j + 2, k, "capitalised")
                    j += 2
                else:
                    break
            add(i, j, "capitalised")
            i = j + 1
        else:
            i += 1
    for n in range(1, max_ngram + 1):
        for first in range(0, len(tokens) - n + 1):
            last = first + n - 1
            words = tokens[first : last + 1]
            if is_stopword(words[0].text) or is_stopword(words[-1].text):
                continue
            if n == 1 and (len(words[0].text) < 2 or words[0].text.isdigit()):
                continue
            add(first, last, "ngram")
    return sorted(found.values(), key=lambda m: (m.first, m.last))


def _capitalised(word: str) -> bool:
    return word[:1].isupper() or (is_code(word) and any(c.isupper() for c in word))


# --------------------------------------------------------------------------- entities


@dataclass(frozen=True)
class EntityCandidate:
    """A thing (entity or class) a mention may name, with the evidence for it."""

    iri: str
    kind: Kind
    label: str
    description: str
    mention: Mention
    matched: str
    similarity: float
    degree: int
    score: float
    explained: frozenset[int] | None = None  # the mention's tokens the name accounts for

    @classmethod
    def of(
        cls, hit: NameHit, mention: Mention, similarity: float, score: float, explained: frozenset[int] | None
    ) -> EntityCandidate:
        """A candidate from a name-index hit and what scoring found."""
        return cls(hit.iri, hit.kind, hit.label, hit.description, mention, hit.matched, similarity, hit.degree, score, explained)

    @property
    def positions(self) -> frozenset[int]:
        """Question tokens this candidate explains (the whole mention unless fewer were matched)."""
        return self.explained if self.explained is not None else self.mention.positions


def _mention_weight(mention: Mention, tokens: Sequence[WordToken]) -> float:
    """Longer, capitalised, quoted or coded mentions are more likely to be names."""
    words = [t for t in tokens[mention.first : mention.last + 1]] if mention.first >= 0 else []
    content = [w for w in words if not is_stopword(w.text)]
    weight = 0.82 + 0.04 * min(len(content), 4)
    if mention.source in ("quoted", "code", "llm"):
        weight += 0.06
    elif mention.source == "capitalised" or any(_capitalised(w.text) for w in content):
        weight += 0.04
    return min(1.0, weight)


def _popularity(degree: int) -> float:
    return min(1.0, math.log1p(degree) / 12)


def score_hit(
    mention: Mention, hit: NameHit, tokens: Sequence[WordToken]
) -> tuple[float, float, frozenset[int] | None]:
    """(similarity, score, explained tokens) of a name-index hit for a mention."""
    if hit.field == "description":
        sim = 0.5 * min(1.0, hit.score)
    else:
        sim = max(
            name_similarity(mention.text, hit.matched), name_similarity(mention.text, hit.label)
        )
    score = sim * _mention_weight(mention, tokens) + 0.04 * _popularity(hit.degree)
    return sim, round(score, 4), _explained(mention, hit, tokens)


def _explained(mention: Mention, hit: NameHit, tokens: Sequence[WordToken]) -> frozenset[int] | None:
    """The mention's tokens that match a word of the name; None when all do (or none clearly does)."""
    if mention.first < 0:
        return None
    words = [w.lower() for n in (hit.matched, hit.label) for w in name_words(n)]
    span = range(mention.first, mention.last + 1)
    hits = frozenset(
        i for i in span if any(word_similarity(tokens[i].text, w) >= 0.8 for w in words)
    )
    content = frozenset(i for i in span if not is_stopword(tokens[i].text))
    if not hits or hits >= content:
        return None
    return hits


def mention_candidates(
    kg: KnowledgeGraph,
    question: str,
    mentions: Sequence[Mention],
    *,
    per_mention: int = 5,
    min_score: float = MIN_ENTITY_SCORE,
) -> list[EntityCandidate]:
    """Every mention's best candidates, ranked within the mention (an IRI may appear under several)."""
    tokens = tokenize(question)
    out: list[EntityCandidate] = []
    for mention in mentions:
        hits = _search(kg, mention.text)
        scored: list[EntityCandidate] = []
        for hit in hits:
            sim, score, explained = score_hit(mention, hit, tokens)
            if score < min_score:
                continue
            scored.append(EntityCandidate.of(hit, mention, sim, score, explained))
        scored.sort(key=lambda c: (-c.score, -c.degree, c.iri))
        out.extend(scored[:per_mention])
    return out


def _search(kg: KnowledgeGraph, text: str) -> list[NameHit]:
    """Name-index hits for a mention and, when it ends in a plural, for its singular too (a
    prefix search for "elements" does not find the alias "element")."""
    hits = kg.names.search(text, limit=HITS_PER_MENTION, kinds=("entity", "class"))
    words = text.split()
    last = words[-1] if words else ""
    if len(last) > 3 and last.lower().endswith("s") and not last.lower().endswith("ss"):
        singular = " ".join(
            [*words[:-1], stem(last) if stem(last) != last.lower() else last[:-1]]
        )
        seen = {h.iri for h in hits}
        extra = kg.names.search(singular, limit=HITS_PER_MENTION, kinds=("entity", "class"))
        hits += [h for h in extra if h.iri not in seen]
    return hits


def best_per_iri(candidates: Iterable[EntityCandidate], limit: int = 30) -> list[EntityCandidate]:
    """One candidate per IRI (its best mention), ranked by score, then by longer mentions."""
    best: dict[str, EntityCandidate] = {}
    for cand in candidates:
        prev = best.get(cand.iri)
        if prev is None or (cand.score, len(cand.positions)) > (prev.score, len(prev.positions)):
            best[cand.iri] = cand
    ranked = sorted(best.values(), key=lambda c: (-c.score, -len(c.positions), -c.degree, c.iri))
    return ranked[:limit]


def link_entities(
    kg: KnowledgeGraph,
    question: str,
    *,
    mentions: Sequence[Mention] | None = None,
    limit: int = 30,
    per_mention: int = 3,
    min_score: float = MIN_ENTITY_SCORE,
) -> list[EntityCandidate]:
    """Ranked entity and class candidates for the question (best mention per IRI)."""
    mentions = list(mentions) if mentions is not None else find_mentions(question)
    cands = mention_candidates(kg, question, mentions, per_mention=per_mention, min_score=min_score)
    return best_per_iri(cands, limit)


# --------------------------------------------------------------------------- LLM-assisted mentions


class LLMEntity(BaseModel):
    """One entity the LLM sees in the question."""

    name: str = Field(description="the entity as written in the question (or its full name)")
    description: str = Field(default="", description="what it is, at most 10 words")


class LLMEntities(BaseModel):
    """The LLM's list of entities in a question."""

    entities: list[LLMEntity] = Field(default_factory=list)


LLM_MENTION_PROMPT = """You are a named entity recognition and entity disambiguation system. You are given a
question and you list all entities in the question with a brief description for each entity. Each
description is at most 10 words. Include generic things the question is about when they are named
(a chemical element, a country, a product category), not question words.

Question: what year lebron james came to the nba?
Entities: LeBron James — American basketball player (born 1984); National Basketball Association — North
American professional sports league

Question: what form of government was practiced in sparta?
Entities: Sparta — city-state in ancient Greece

Question: Who discovered the element with atomic number 8?
Entities: chemical element — a species of atoms with a given number of protons
"""


def llm_mentions(llm: LLMClient, question: str, *, trace: Trace | None = None) -> list[Mention]:
    """SPAGHETTI-style mentions: the LLM names each entity and describes it in ≤10 words."""
    from sparqlnav.llm import Message, trace_recorder

    reply = llm.chat_json(
        [Message.system(LLM_MENTION_PROMPT), Message.user(f"Question: {question}")],
        LLMEntities,
        purpose="entity mentions",
        record=trace_recorder(trace) if trace is not None else None,
    )
    tokens = tokenize(question)
    out: list[Mention] = []
    for ent in reply.value.entities:
        name = ent.name.strip()
        if not name:
            continue
        first, last = _locate(name, tokens)
        desc = " ".join(ent.description.split()[:10])
        out.append(Mention(name, first, last, "llm", desc))
    return out


def _locate(name: str, tokens: Sequence[WordToken]) -> tuple[int, int]:
    """The token span of the question best matching `name`, or (-1, -1)."""
    words = [t.lower for t in tokenize(name)]
    if not words:
        return -1, -1
    best, span = 0.0, (-1, -1)
    n = len(words)
    for size in {max(1, n - 1), n, n + 1}:
        for first in range(0, len(tokens) - size + 1):
            text = " ".join(t.lower for t in tokens[first : first + size])
            sim = fuzz.ratio(text, " ".join(words)) / 100
            if sim > best:
                best, span = sim, (first, first + size - 1)
    return span if best >= 0.75 else (-1, -1)


def link_llm_entities(
    kg: KnowledgeGraph,
    question: str,
    mentions: Sequence[Mention],
    *,
    per_mention: int = 3,
) -> list[EntityCandidate]:
    """Candidates for LLM mentions, chosen by name and by how their descriptions and types fit the LLM's."""
    tokens = tokenize(question)
    out: list[EntityCandidate] = []
    for mention in mentions:
        hits = _search(kg, mention.text)
        if not hits:
            continue
        types = type_labels(kg, [h.iri for h in hits]) if mention.description else {}
        scored = []
        for hit in hits:
            sim, score, explained = score_hit(mention, hit, tokens)
            if mention.description:
                context = " ".join([hit.description, *types.get(hit.iri, [])])
                fit = (
                    fuzz.token_set_ratio(mention.description.lower(), context.lower()) / 100
                    if context
                    else 0.0
                )
                score = round(0.75 * score + 0.25 * fit, 4)
            if score >= MIN_ENTITY_SCORE:
                scored.append(EntityCandidate.of(hit, mention, sim, score, explained))
        scored.sort(key=lambda c: (-c.score, -c.degree, c.iri))
        out.extend(scored[:per_mention])
    return out


def type_labels(kg: KnowledgeGraph, iris: Sequence[str]) -> dict[str, list[str]]:
    """Labels of the types of some IRIs (one query)."""
    type_pred = kg.vocab.types[0]
    values = " ".join(f"<{i}>" for i in iris)
    res = kg.endpoint.query(
        f"SELECT ?e ?t WHERE {{ VALUES ?e {{ {values} }} ?e <{type_pred}> ?t }} LIMIT 200"
    )
    if not res.ok or res.table is None:
        return {}
    pairs = [(r["e"].value, r["t"].value) for r in res.table.rows if "e" in r and "t" in r]
    labels = kg.names.labels_of(t for _, t in pairs)
    out: dict[str, list[str]] = {}
    for e, t in pairs:
        out.setdefault(e, []).append(labels.get(t) or humanise(local_name(t)))
    return out


# --------------------------------------------------------------------------- relations


class LinkingEmbedder(Protocol):
    """Turns texts into vectors (any model); used to compare a question with property names."""

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text."""
        ...


@dataclass(frozen=True)
class RelationMatch:
    """How a property's names match a question: a score and the question tokens they explain."""

    score: float
    positions: frozenset[int]


def relation_match(
    names: Iterable[str],
    tokens: Sequence[WordToken],
    exclude: Iterable[int] = (),
    *,
    abbreviations: bool = False,
) -> RelationMatch:
    """Word overlap of a property's names with the question tokens not in `exclude`; with
    `abbreviations`, a short name such as `dex` also matches the word it starts (`dexterity`)."""
    skip = set(exclude)
    usable = [(i, t) for i, t in enumerate(tokens) if i not in skip and not is_stopword(t.text)]
    best = RelationMatch(0.0, frozenset())
    for weight, name in _weighted(names):
        words = name_words(name)
        if not words or not usable:
            continue
        hit_positions: set[int] = set()
        total, top = 0.0, 0.0
        for w in words:
            sims = [
                (
                    max(
                        word_similarity(w, t.text),
                        _abbreviation(w, t.text) if abbreviations else 0.0,
                    ),
                    i,
                )
                for i, t in usable
            ]
            sim = max(s for s, _ in sims)
            if sim >= 0.8:
                # every question word this name word explains counts ("supplier" and "deliver")
                hit_positions.update(i for s, i in sims if s >= 0.8)
                total += sim
                top = max(top, sim)
        if top == 0.0:
            continue
        score = weight * (0.55 * total / len(words) + 0.45 * top)
        if score > best.score:
            best = RelationMatch(round(score, 4), frozenset(hit_positions))
    return best


def _abbreviation(short: str, word: str) -> float:
    """0.8 when `short` (3–4 letters) abbreviates `word` by its start: `int` → `intelligence`."""
    a, b = short.lower(), word.lower()
    if 3 <= len(a) <= 4 and a.isalpha() and len(b) >= 2 * len(a) and b.startswith(a):
        return 0.8
    return 0.0


def _weighted(names: Iterable[str]) -> list[tuple[float, str]]:
    """The first name (the label) counts fully, later ones (aliases, local names) a little less."""
    out = []
    for i, n in enumerate(dict.fromkeys(n for n in names if n)):
        out.append((1.0 if i == 0 else 0.95, n))
    return out


@dataclass(frozen=True)
class RelationCandidate:
    """A property that may express a relation the question asks about."""

    iri: str
    label: str
    score: float
    positions: frozenset[int]
    lexical: float
    evidence: tuple[str, ...] = ()
    directions: tuple[Direction, ...] = ()


def property_names(kg: KnowledgeGraph, iri: str, label: str | None = None) -> list[str]:
    """Label, aliases and humanised local name of a property (any of its IRI forms)."""
    names: list[str] = []
    wb = kg.vocab.wikibase
    entity = iri
    if wb:
        pid = wb.property_id(iri)
        if pid:
            entity = wb.entity_iri(pid)
    if label:
        names.append(label)
    index = kg.names
    if isinstance(index, LabelIndex):
        found = index.label_of(entity) or index.label_of(iri)
        if found:
            names.append(found)
        names.extend(index.aliases_of(entity))
    else:
        names.extend(kg.names.labels_of([entity, iri]).values())
    local = humanise(local_name(iri))
    if local and not (wb and wb.property_id(iri)):
        names.append(local)
    return list(dict.fromkeys(n for n in names if n))


def link_relations(
    kg: KnowledgeGraph,
    question: str,
    entities: Sequence[EntityCandidate] = (),
    *,
    embedder: LinkingEmbedder | None = None,
    limit: int = RELATION_LIMIT,
    max_entities: int = 4,
) -> list[RelationCandidate]:
    """Properties ranked for the question: name overlap, presence around linked entities, embeddings."""
    tokens = tokenize(question)
    pool: dict[str, dict[str, object]] = {}  # predicate IRI → {label, evidence, directions}

    wb = kg.vocab.wikibase

    def note(
        iri: str, label: str | None, evidence: str, direction: Direction | None = None
    ) -> None:
        # every Wikibase form of a property (wd:, p:, ps:, pq:) is ranked as its direct claim
        pid = wb.property_id(iri) if wb else None
        pred = wb.direct_iri(pid) if wb and pid else property_iri(kg, iri)
        entry = pool.setdefault(pred, {"label": label, "evidence": set(), "directions": set()})
        if label and not entry["label"]:
            entry["label"] = label
        ev = entry["evidence"]
        assert isinstance(ev, set)
        ev.add(evidence)
        if direction:
            dirs = entry["directions"]
            assert isinstance(dirs, set)
            dirs.add(direction)

    for mention in find_mentions(question, max_ngram=3):
        if mention.last - mention.first > 2:
            continue
        for hit in kg.names.search(mention.text, limit=5, kinds=("property",)):
            if hit.field != "description":
                note(hit.iri, hit.label, "name")
    seen: set[str] = set()
    for ent in entities:
        if ent.kind != "entity" or ent.iri in seen or len(seen) >= max_entities:
            continue
        seen.add(ent.iri)
        try:
            rel = relations(kg, ent.iri)
        except LookupFailed:
            continue
        for p, _ in rel.outgoing:
            note(p, rel.labels.get(p), "neighbour", "out")
        for p, _ in rel.incoming:
            note(p, rel.labels.get(p), "neighbour", "in")
    skip = _skip_predicates(kg)
    cands: list[RelationCandidate] = []
    names_of = {
        iri: property_names(kg, iri, str(e["label"]) if e["label"] else None)
        for iri, e in pool.items()
    }
    cosines = _cosines(
        embedder, question, {iri: names[0] for iri, names in names_of.items() if names}
    )
    for iri, entry in pool.items():
        if iri in skip:
            continue
        names = names_of[iri]
        match = relation_match(names, tokens)
        evidence = tuple(sorted(entry["evidence"]))  # type: ignore[call-overload]
        score = match.score
        if "neighbour" in evidence:
            score += 0.1
        if iri in cosines:
            score = max(score, 0.9 * cosines[iri]) + 0.05 * cosines[iri]
            evidence = (*evidence, "embedding")
        cands.append(
            RelationCandidate(
                iri,
                names[0] if names else humanise(local_name(iri)),
                round(score, 4),
                match.positions,
                match.score,
                evidence,
                tuple(sorted(entry["directions"])),  # type: ignore[call-overload]
            )
        )
    cands.sort(key=lambda c: (-c.score, c.iri))
    return cands[:limit]


def _skip_predicates(kg: KnowledgeGraph) -> set[str]:
    """Predicates that never answer a question by themselves (statement plumbing)."""
    skip: set[str] = set()
    wb = kg.vocab.wikibase
    if wb:
        skip.add("http://wikiba.se/ontology#sitelinks")
    return skip


def _cosines(embedder: LinkingEmbedder | None, question: str, names: dict[str, str]) -> dict[str, float]:
    if embedder is None or not names:
        return {}
    iris = list(names)
    vectors = embedder.embed([question, *(names[i] for i in iris)])
    q = vectors[0]
    return {iri: _cosine(q, v) for iri, v in zip(iris, vectors[1:], strict=True)}


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


# --------------------------------------------------------------------------- together


@dataclass
class Linking:
    """Everything linked for one question."""

    question: str
    tokens: list[WordToken]
    mentions: list[Mention]
    entities: list[EntityCandidate]
    relations: list[RelationCandidate]
    candidates: list[EntityCandidate] = field(
        default_factory=list
    )  # per mention, before de-duplication
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """Plain data for traces."""
        return {
            "entities": [
                {
                    "iri": e.iri,
                    "kind": e.kind,
                    "label": e.label,
                    "mention": e.mention.text,
                    "source": e.mention.source,
                    "score": e.score,
                }
                for e in self.entities
            ],
            "relations": [
                {"iri": r.iri, "label": r.label, "score": r.score} for r in self.relations
            ],
            "seconds": round(self.seconds, 4),
        }


def link(
    kg: KnowledgeGraph,
    question: str,
    *,
    llm: LLMClient | None = None,
    embedder: LinkingEmbedder | None = None,
    trace: Trace | None = None,
    entity_limit: int = 30,
    relation_limit: int = RELATION_LIMIT,
) -> Linking:
    """Entities and relations of a question; with an LLM, its mentions join the lexical ones."""
    started = time.monotonic()
    tokens = tokenize(question)
    mentions = find_mentions(question)
    candidates = mention_candidates(kg, question, mentions)
    notes: list[str] = []
    if llm is not None:
        from sparqlnav.llm import LLMError

        try:
            extra = llm_mentions(llm, question, trace=trace)
        except LLMError as exc:
            notes.append(f"LLM entity mentions failed: {exc}")
        else:
            mentions += extra
            candidates += link_llm_entities(kg, question, extra)
    entities = best_per_iri(
        [c for c in candidates if _within_mention_rank(c, candidates) <= 3], entity_limit
    )
    rels = link_relations(kg, question, entities, embedder=embedder, limit=relation_limit)
    return Linking(
        question, tokens, mentions, entities, rels, candidates, time.monotonic() - started, notes
    )


def _within_mention_rank(cand: EntityCandidate, candidates: Sequence[EntityCandidate]) -> int:
    """1 for the best candidate of its mention, 2 for the next, …"""
    same = [c for c in candidates if c.mention == cand.mention]
    return 1 + sum(1 for c in same if c.score > cand.score)
