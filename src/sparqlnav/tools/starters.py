"""Example questions to start with, per KG: the demo's own questions; else the questions of the examples in the
KG's stored retrieval index; else a few written from its schema with templates (class and property names, no
LLM). The web UI's start page shows them (`GET /api/examples`); any face can ask `StarterQuestions.get`."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.relational import key_properties
from sparqlnav.graph.schema import RDF_TYPE, Schema
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.tools.digest import Digests, main_classes

Source = Literal["demo", "index", "schema", "none"]
DEMO_KG = "demo"  # the name open_kg gives the bundled demo graph


@dataclass(frozen=True)
class Starters:
    """A few questions a KG can answer and where they came from."""

    kg: str
    source: Source
    questions: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {"kg": self.kg, "source": self.source, "questions": list(self.questions)}


def demo_questions_path() -> Path:
    """The bundled demo KG's question set."""
    return Path(str(resources.files("sparqlnav") / "data" / "demo" / "questions.json"))


def varied(items: list[tuple[str, str]], limit: int) -> tuple[str, ...]:
    """Up to `limit` questions, one of each kind first (kinds in order of appearance), then the rest in order."""
    seen: set[str] = set()
    first = [q for q, kind in items if not (kind in seen or seen.add(kind))]  # type: ignore[func-returns-value]
    rest = [q for q, _ in items if q not in first]
    return tuple(dict.fromkeys([*first, *rest]))[:limit]


# Nouns English does not count ("How many hardwares" reads wrong): they are counted as items of the thing.
UNCOUNTABLE = frozenset({
    "hardware", "software", "equipment", "information", "data", "furniture", "staff", "personnel", "research",
    "evidence", "money", "news", "luggage", "baggage", "machinery", "merchandise", "clothing", "feedback", "advice",
    "knowledge", "traffic", "weather", "music", "art", "water", "food", "mail", "jewelry", "literature", "media",
})  # fmt: skip
_VERB_START = re.compile(r"^(?:is|are|was|were|can|does|do|did)\b", re.IGNORECASE)


def plural(noun: str) -> str:
    """An English plural good enough for class names (`person` → `persons`, `city` → `cities`, `hardware` →
    `hardware items`)."""
    last = noun.split()[-1].lower()
    if last in UNCOUNTABLE:
        return noun + " items"
    if re.search(r"[^sui]s$", last):
        return noun  # already plural: a class named "Spells"
    if re.search(r"[^aeiou]y$", noun):
        return noun[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", noun):
        return noun + "es"
    return noun + "s"


def _noun(name: str) -> str:
    # "Person" reads as "person" inside a sentence; "DNA" or "IBM Product" keep their capitals.
    return name[0].lower() + name[1:] if len(name) > 1 and name[1].islower() and " " not in name else name


def schema_questions(kg: KnowledgeGraph, schema: Schema, limit: int) -> tuple[str, ...]:
    """Questions from templates over the main classes: how many there are, and one property of each."""
    from sparqlnav.retrieval.bm25 import words_of

    every = main_classes(schema)
    things = [c for c in every if not _value_nodes(schema, c)]
    classes = (things or every)[:limit]
    skip = {RDF_TYPE, *kg.vocab.types, *kg.vocab.labels, *kg.vocab.aliases, *kg.vocab.descriptions,
            *key_properties(kg)}
    candidates = {c: [p.iri for p in schema.classes[c].ranked_predicates() if p.iri not in skip] for c in classes}
    iris = [*classes, *(p for ps in candidates.values() for p in ps[:4])]
    labels = kg.names.labels_of(iris)
    name = {iri: _noun(labels.get(iri) or schema.labels.get(iri) or words_of(iri)) for iri in iris}
    out: list[str] = []
    for c in classes:
        out.append(f"How many {plural(name[c])} are there?")
        # "has category" reads "category"; a property named by a verb ("is compatible with") makes no noun phrase.
        phrases = [_property_noun(name[p]) for p in candidates[c][:4]]
        phrase = next((ph for ph in phrases if ph), None)
        if phrase:
            out.append(f"List the {plural(name[c])} with their {phrase}.")
    return tuple(dict.fromkeys(out))[:limit]


def _value_nodes(schema: Schema, cls: str) -> bool:
    """Whether a class's instances are value nodes of one property: each is the object of that one property once
    (CK25's prices: a product's pv:price, with an amount and a currency) — parts of another thing, which nobody
    counts or lists on their own."""
    info = schema.classes.get(cls)
    if info is None or not info.instances or info.instances < 10:
        return False
    links = [
        (pred.iri, count) for other in schema.classes.values() if other.iri != cls
        for pred in other.predicates.values() for target, count in pred.object_classes.items() if target == cls
    ]  # fmt: skip
    if len({iri for iri, _ in links}) != 1 or any(count is None for _, count in links):
        return False
    total = sum(count or 0 for _, count in links)
    return abs(total - info.instances) <= info.instances // 100


def _property_noun(label: str) -> str | None:
    """A property's name as a noun phrase ('has category' → 'category'); None when it is a verb phrase."""
    words = re.sub(r"^(?:has|have|get)\s+", "", label.strip(), flags=re.IGNORECASE)
    return None if not words or _VERB_START.match(words) else _noun(words)


class StarterQuestions:
    """Each KG's example questions, found once (thread-safe); reads stored indexes and schemas, never builds one."""

    def __init__(self, indexes: KGIndexes | None = None, digests: Digests | None = None) -> None:
        self.indexes = indexes
        self.digests = digests or Digests(indexes)
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str, int], Starters] = {}

    def get(self, kg: KnowledgeGraph, limit: int = 6) -> Starters:
        """Up to `limit` questions for `kg` (none when nothing about it is known)."""
        key = (kg.name, kg.description, limit)
        with self._lock:
            found = self._found.get(key)
        if found is None:
            found = self._find(kg, limit)
            with self._lock:
                found = self._found.setdefault(key, found)
        return found

    def _find(self, kg: KnowledgeGraph, limit: int) -> Starters:
        if kg.name == DEMO_KG:
            data = json.loads(demo_questions_path().read_text(encoding="utf-8"))
            items = [(str(q["question"]), str((q.get("tags") or [""])[0])) for q in data]
            return Starters(kg.name, "demo", varied(items, limit))
        if self.indexes is not None:
            docs = self.indexes.stored_documents(kg, ("example",))
            if docs:
                items = [(d.title or d.text, str(d.meta.get("form", ""))) for d in docs]
                return Starters(kg.name, "index", varied(items, limit))
        schema, _source = self.digests.schema(kg)
        if schema is not None:
            questions = schema_questions(kg, schema, limit)
            if questions:
                return Starters(kg.name, "schema", questions)
        return Starters(kg.name, "none", ())


__all__ = ["StarterQuestions", "Starters", "demo_questions_path", "plural", "schema_questions"]
