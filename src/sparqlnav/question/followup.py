"""A follow-up read without an LLM: "When was it discovered?" after "When was helium discovered?", "What is his email
address?" after "Who is the manager of Heinrich Hoch?", "Where was he born?" after "Who discovered neon?", or "What
about neon?" after "Who discovered argon?". A pronoun stands for a thing of its kind: "he" and "she" for a person,
"it" for anything else. It is the last answer's thing of that kind when there was one (the manager, neon's
discoverer), else the thing of that kind the last question named (helium; Marie Curie after "Which prize did Marie
Curie win?"); the question is then asked again with that name in the pronoun's place. Several people in the last
answer make "he" ambiguous, and the user is asked which one. "What about X?" asks the last question again about X.
Anything less certain is left to an LLM, and the user is told.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sparqlnav.context import Turn
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.question.intent import PERSON_WORDS, analyse
from sparqlnav.question.linking import link, type_labels
from sparqlnav.question.words import tokenize

__all__ = ["NEEDS_A_NAME", "Ambiguous", "Reading", "pronoun", "read_followup"]

_PRONOUN = re.compile(r"\b(it|its|he|him|his|she|her|hers|they|them|their|theirs)\b", re.IGNORECASE)
_POSSESSIVE = frozenset({"its", "his", "their", "theirs", "hers"})
_PERSONAL = frozenset({"he", "him", "his", "she", "her", "hers"})  # stand for a person
_IMPERSONAL = frozenset({"it", "its"})  # stand for anything but a person
# "her" before a noun is possessive ("her email"); before these it is an object ("did they hire her in …").
_AFTER_OBJECT_HER = frozenset({"in", "on", "at", "to", "from", "by", "with", "for", "and", "or", "?", ""})
# "What about neon?", "How about neon?", "And neon?": the last question again, about another thing.
_ELLIPSIS = re.compile(r"^\s*(?:(?:what|how)\s+about|and)\s+(?P<name>[^?]+?)\s*\??\s*$", re.IGNORECASE)
NEEDS_A_NAME = (
    "This reads as a follow-up ('{word}'), and without an LLM sparqlnav cannot tell what it refers to: ask again "
    "with its name, or configure an LLM (OPENAI_BASE_URL, SPARQLNAV_LLM_MODEL)."
)


@dataclass(frozen=True)
class Reading:
    """The follow-up asked with a name in the pronoun's place, and what the pronoun was taken to mean."""

    question: str
    word: str  # the pronoun as written ("what about" for an ellipsis)
    label: str  # what it was read as
    iri: str  # '' when the name is the user's own words ("What about neon?")
    because: str  # "the last answer", "named in the last question", "the last question asked about it"


@dataclass(frozen=True)
class Ambiguous:
    """A pronoun that may stand for any of several things of the last answer ("he" after two discoverers)."""

    word: str
    labels: tuple[str, ...]
    example: str  # the follow-up asked about the first of them, for the user to copy

    def text(self) -> str:
        """What the user is told: who the pronoun may be, and a question to ask instead."""
        names = self.labels[0] if len(self.labels) == 1 else ", ".join(self.labels[:-1]) + f" or {self.labels[-1]}"
        return (f"'{self.word}' could be {names} (the last answer named each): ask again with one name, as in "
                f"\"{self.example}\".")


def pronoun(question: str) -> str | None:
    """The first pronoun of the question that may point back at an earlier turn, if any."""
    m = _PRONOUN.search(question)
    return m.group(1) if m else None


def read_followup(question: str, turn: Turn, kg: KnowledgeGraph) -> Reading | Ambiguous | None:
    """The question with its first pronoun (or an ellipsis, "What about X?") replaced by what the last turn was
    about; Ambiguous when several things of the last answer fit; None when nothing can be read."""
    if pronoun(question) is None:
        return _ellipsis(question, turn, kg)
    m = _PRONOUN.search(question)
    assert m is not None
    word = m.group(1)
    kind = word.lower()
    if kind in _PERSONAL or kind in _IMPERSONAL:
        wanted = kind in _PERSONAL
        persons = _persons(kg, turn)
        fits = [(iri, label) for iri, label in turn.things if (iri in persons) == wanted]
        if len(fits) > 1:
            labels = tuple(label or kg.prefixes.compact(iri) for iri, label in fits)
            return Ambiguous(word, labels, _replaced(question, m, labels[0]))
        if fits:
            iri, label, because = fits[0][0], fits[0][1] or kg.prefixes.compact(fits[0][0]), "the last answer"
        else:
            named = _named(kg, turn.question)
            people = _people(kg, [iri for iri, _ in named])
            kept = [(iri, label) for iri, label in named if (iri in people) == wanted]
            if not kept:
                return None
            (iri, label), because = kept[0], "named in the last question"
    elif turn.focus:
        iri, label, because = turn.focus, turn.focus_label or turn.focus, "the last answer"
    else:
        named = _named(kg, turn.question)
        if not named:
            return None
        (iri, label), because = named[0], "named in the last question"
    return Reading(_replaced(question, m, label), word, label, iri, because)


def _replaced(question: str, m: re.Match[str], label: str) -> str:
    """The question with the pronoun `m` found replaced by `label` (with 's where the pronoun was possessive)."""
    word = m.group(1).lower()
    after = question[m.end():].split()
    possessive = word in _POSSESSIVE or (
        word == "her" and (after[0].strip("?,.!").lower() if after else "") not in _AFTER_OBJECT_HER
    )
    name = f"{label}'s" if possessive else label
    return question[: m.start()] + name + question[m.end():]


def _ellipsis(question: str, turn: Turn, kg: KnowledgeGraph) -> Reading | None:
    """ "What about neon?" as the last question asked about neon: its pronoun, else the first thing it named, in
    neon's place; None when the question is no ellipsis or the last one named nothing."""
    m = _ELLIPSIS.match(question)
    if m is None:
        return None
    name = m.group("name")
    said = pronoun(turn.question)
    if said is not None:
        p = _PRONOUN.search(turn.question)
        assert p is not None
        asked = _replaced(turn.question, p, name)
    else:
        linking = link(kg, turn.question)
        things = [e for e in linking.entities if e.kind != "class" and e.mention.first >= 0]
        if not things:
            return None
        first, last = linking.tokens[things[0].mention.first], linking.tokens[things[0].mention.last]
        asked = turn.question[: first.start] + name + turn.question[last.end:]
    word = question[: m.start("name")].strip().lower()
    return Reading(asked, word, name, "", "the last question asked about it")


def _named(kg: KnowledgeGraph, question: str) -> list[tuple[str, str]]:
    """The things (not classes) a question names, best first, as (IRI, label)."""
    return [(e.iri, e.label) for e in link(kg, question).entities if e.kind != "class"]


def _persons(kg: KnowledgeGraph, turn: Turn) -> set[str]:
    """The things of the last answer that are people: all of them when the question asked "who" (the user took
    them for people, whatever the graph calls them: a zoo's keepers), else those the graph types as people."""
    iris = [iri for iri, _ in turn.things]
    if iris and analyse(tokenize(turn.question)).answer == "person":
        return set(iris)
    return _people(kg, iris)


def _people(kg: KnowledgeGraph, iris: Sequence[str]) -> set[str]:
    """Those of some things whose type's name says a person (human, person, author, …)."""
    if not iris:
        return set()
    types = type_labels(kg, iris)
    return {iri for iri, labels in types.items()
            if any(w in PERSON_WORDS for label in labels for w in re.findall(r"[a-z]+", label.lower()))}
