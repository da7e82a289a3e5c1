"""Lexical matching: the terms BM25 counts in a text (stems, no stop words), a name read as words, and BM25's
two constants, shared by every lexical scorer."""

from __future__ import annotations

import re

BM25_K1 = 1.2
BM25_B = 0.75

_STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has", "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "that", "the", "their", "them", "these", "this", "those", "to", "was", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with", "all", "any", "each", "give", "list", "show", "me", "find", "get", "return", "retrieve", "select", "query", "sparql"]
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word stems for BM25: camelCase and snake_case split, stop words dropped, plurals folded."""
    out: list[str] = []
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        w = word.lower()
        if w in _STOP or (len(w) < 2 and not w.isdigit()):
            continue
        out.append(_stem(w))
    return out


_UNCHANGED = frozenset({"species", "series", "analysis", "status", "virus", "genus", "corpus"})


def _stem(w: str) -> str:
    # Plural folding only: stronger stemming merges too many biological names.
    if w in _UNCHANGED:
        return w
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def words_of(iri_or_name: str) -> str:
    """The local name of an IRI as words: `up:Disease_Annotation` → `Disease Annotation`."""
    local = re.split(r"[/#:]", iri_or_name.rstrip("/#>"))[-1]
    return " ".join(_CAMEL.sub(" ", local.replace("_", " ")).split())

