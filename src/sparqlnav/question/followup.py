"""A follow-up's pronouns read without an LLM: "When was it discovered?" after "When was helium discovered?", or
"What is his email address?" after "Who is the manager of Heinrich Hoch?". A pronoun stands for the last answer
when that was one thing (the manager), else for the thing the last question named (helium); the question is then
asked again with that name in the pronoun's place. Anything less certain is left to an LLM, and the user is told.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparqlnav.context import Turn
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.question.linking import link

__all__ = ["NEEDS_A_NAME", "Reading", "pronoun", "read_followup"]

_PRONOUN = re.compile(r"\b(it|its|he|him|his|she|her|hers|they|them|their|theirs)\b", re.IGNORECASE)
_POSSESSIVE = frozenset({"its", "his", "their", "theirs", "hers"})
# "her" before a noun is possessive ("her email"); before these it is an object ("did they hire her in …").
_AFTER_OBJECT_HER = frozenset({"in", "on", "at", "to", "from", "by", "with", "for", "and", "or", "?", ""})
NEEDS_A_NAME = (
    "This reads as a follow-up ('{word}'), and without an LLM sparqlnav cannot tell what it refers to: ask again "
    "with its name, or configure an LLM (OPENAI_BASE_URL, SPARQLNAV_LLM_MODEL)."
)


@dataclass(frozen=True)
class Reading:
    """The follow-up asked with a name in the pronoun's place, and what the pronoun was taken to mean."""

    question: str
    word: str  # the pronoun as written
    label: str  # what it was read as
    iri: str
    because: str  # "the last answer" or "named in the last question"


def pronoun(question: str) -> str | None:
    """The first pronoun of the question that may point back at an earlier turn, if any."""
    m = _PRONOUN.search(question)
    return m.group(1) if m else None


def read_followup(question: str, turn: Turn, kg: KnowledgeGraph) -> Reading | None:
    """The question with its first pronoun replaced by what the last turn was about; None when that is unclear."""
    word = pronoun(question)
    if word is None:
        return None
    if turn.focus:
        iri, label, because = turn.focus, turn.focus_label or turn.focus, "the last answer"
    else:
        things = [e for e in link(kg, turn.question).entities if e.kind != "class"]
        if not things:
            return None
        iri, label, because = things[0].iri, things[0].label, "named in the last question"
    m = _PRONOUN.search(question)
    assert m is not None
    after = question[m.end():].split()
    possessive = word.lower() in _POSSESSIVE or (
        word.lower() == "her" and (after[0].strip("?,.!").lower() if after else "") not in _AFTER_OBJECT_HER
    )
    name = f"{label}'s" if possessive else label
    return Reading(question[: m.start()] + name + question[m.end():], word, label, iri, because)
