"""A question's words: tokens with their offsets, stop words, codes, synonyms, and how alike two words or two
names are (inflections, prefixes, typos, abbreviations). Linking, intent and feedback read words this way."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from sparqlnav.graph.vocab import humanise


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of `text` (for word lists written as prose)."""
    return frozenset(text.split())


# Grammatical words and question words: never a mention on their own, never the edge of one.
STOPWORDS = word_set(
    """
    a an the this that these those there here of in on at to for from by with without about into
    onto over under between among through during before after above below up down out off than
    then as per via within across against along around behind beside besides near toward towards
    upon and or nor but not no yes if so also only just even both either neither each every all
    any some many much more most less least few several such own same other another is are was
    were be been being am do does did done doing has have had having can could will would shall
    should may might must i me my mine we us our ours you your yours he him his she her hers it
    its they them their theirs one ones someone something anyone anything everyone everything
    who whom whose what which when where why how whats whos give list show tell find get let
    please want need know mr mrs ms dr prof sir
    """
)

# A little generic English so that "born" finds "date of birth" and "wrote" finds "author".
SYNONYMS: dict[str, tuple[str, ...]] = {
    "born": ("birth",),
    "birthday": ("birth",),
    "died": ("death",),
    "die": ("death",),
    "dead": ("death",),
    "wrote": ("author",),
    "written": ("author",),
    "writer": ("author",),
    "married": ("spouse",),
    "wife": ("spouse",),
    "husband": ("spouse",),
    "discovered": ("discoverer", "discovery"),
    "invented": ("inventor", "invention"),
    "founded": ("founder", "founding", "inception"),
    "created": ("creator", "creation", "inception"),
    "telephone": ("phone",),
    "mail": ("email",),
    "boss": ("manager",),
    "cost": ("price",),
    "costs": ("price",),
    "cheap": ("price",),
    "expensive": ("price",),
    "weigh": ("weight", "mass"),
    "weighs": ("weight", "mass"),
    "heavy": ("weight", "mass"),
    "tall": ("height",),
    "high": ("height",),
    "wide": ("width",),
    "deep": ("depth",),
    "long": ("length",),
    "old": ("age",),
    "live": ("residence",),
    "lives": ("residence",),
    "located": ("location",),
    "speak": ("language",),
    "speaks": ("language",),
    "speaking": ("language",),
    "population": ("inhabitants",),
    "inhabitants": ("population",),
    "deliver": ("supplier",),
    "delivers": ("supplier",),
    "supplies": ("supplier",),
}

_TOKEN = re.compile(r"\w+(?:[-'’.@/]\w+)*")
_LETTER_DIGIT = re.compile(r"(?=.*\d)(?=.*[A-Za-z])|\d+[-/.]\d+")


@dataclass(frozen=True)
class WordToken:
    """A word of the question with its character offsets."""

    text: str
    start: int
    end: int

    @property
    def lower(self) -> str:
        """The lower-cased word."""
        return self.text.lower()


def tokenize(text: str) -> list[WordToken]:
    """Words (codes and hyphenated names kept whole) with their offsets."""
    return [WordToken(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def is_stopword(word: str) -> bool:
    """A grammatical or question word."""
    return word.lower() in STOPWORDS


def is_code(word: str) -> bool:
    """Identifiers such as `M558-2275045`, `Q42` or `2024-01`: letters mixed with digits."""
    return bool(_LETTER_DIGIT.match(word)) and len(word) >= 2


def content_positions(tokens: Sequence[WordToken]) -> list[int]:
    """Indices of the tokens that carry meaning (not stopwords, not punctuation)."""
    return [i for i, t in enumerate(tokens) if not is_stopword(t.text)]


def stem(word: str) -> str:
    """A crude English stem: enough to equate `suppliers`/`supplier` and `discovered`/`discover`."""
    w = word.lower()
    for suffix, repl in (
        ("ies", "y"),
        ("sses", "ss"),
        ("es", ""),
        ("s", ""),
        ("ing", ""),
        ("ed", ""),
    ):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            base = w[: -len(suffix)] + repl
            if suffix == "es" and not base.endswith(("s", "x", "z", "ch", "sh")):
                base = w[:-1]  # "categories" is handled above; "sizes" → "size"
            return base
    return w


# Prefixes that make a word mean something else than its stem: no match by suffix across them.
MEANING_PREFIXES = frozenset(
    [
        "un", "non", "dis", "anti", "under", "over", "sub", "super", "counter", "mis",
        "semi", "multi", "inter", "ultra", "in", "im", "il", "ir", "de",
    ]
)


def word_similarity(a: str, b: str) -> float:
    """How surely two words mean the same (1 equal, ~0.9 inflections and prefixes, 0 unrelated)."""
    x, y = a.lower(), b.lower()
    if x == y:
        return 1.0
    if not x or not y:
        return 0.0
    if stem(x) == stem(y):
        return 0.95
    # "-ed" takes a silent e with it: "cared" is "cares" ("care"), as "discovered" is "discovers"
    if (x.endswith("ed") and stem(x) + "e" == stem(y)) or (y.endswith("ed") and stem(y) + "e" == stem(x)):
        return 0.95
    if y in SYNONYMS.get(x, ()) or x in SYNONYMS.get(y, ()):
        return 0.85
    short, long_ = (x, y) if len(x) <= len(y) else (y, x)
    if is_code(short) and long_.startswith(short) and not long_[len(short)].isalnum():
        return 0.95  # the first part of a code: "U990" for "U990-5234138"
    if len(short) >= 4:
        prefix = 0
        for c1, c2 in zip(short, long_, strict=False):
            if c1 != c2:
                break
            prefix += 1
        # "reliable"/"reliability", "expert"/"expertise", "located"/"location"
        if prefix >= 5 and prefix >= 0.75 * len(short):
            return 0.85
        # "telephone"/"phone", but not a word a prefix turns into another ("undercommon", "nonprofit", "unsafe")
        # ("city" is half of "capacity" and no form of it)
        if long_.endswith(short) and len(short) > 0.5 * len(long_) and long_[: -len(short)] not in MEANING_PREFIXES:
            return 0.85
    if len(short) >= 5:
        ratio = fuzz.ratio(x, y) / 100
        if ratio >= 0.85:  # typos: "pontiometer"/"potentiometer"
            return 0.9 * ratio
    return 0.0


def name_words(name: str) -> list[str]:
    """The content words of a name (a label, alias or humanised local name)."""
    if " " not in name and re.search(r"[a-z][A-Z]|_", name):
        name = humanise(name)  # a local name such as `hasManager`
    words = [t.text for t in tokenize(name)]
    content = [w for w in words if not is_stopword(w)]
    return content or words


def name_similarity(mention: str, name: str) -> float:
    """How well a mention matches a name: whole-string likeness or word overlap in both directions."""
    m_norm = " ".join(w.lower() for w in name_words(mention))
    n_norm = " ".join(w.lower() for w in name_words(name))
    if not m_norm or not n_norm:
        return 0.0
    if m_norm == n_norm:
        return 1.0
    m_words, n_words = m_norm.split(), n_norm.split()
    m_cover = sum(max(_name_word(w, v) for v in n_words) for w in m_words) / len(m_words)
    n_cover = sum(max(_name_word(w, v) for w in m_words) for v in n_words) / len(n_words)
    # the mention's words being found matters more than the name's extra words ("elements" is a
    # fine mention of "chemical element"), but extra words still cost
    token_sim = (
        0.65 * m_cover + 0.35 * n_cover
        if m_cover >= 0.8
        else 2 * m_cover * n_cover / (m_cover + n_cover or 1)
    )
    chars = fuzz.ratio(m_norm, n_norm) / 100
    sim = max(token_sim, chars if chars >= 0.8 else 0.0)
    # A shared identifier is decisive: "M558-2275045" names "M558-2275045 - Sensor Switch".
    codes = [w for w in m_words if is_code(w) and len(w) >= 4]
    if codes and all(c in n_words for c in codes):
        sim = max(sim, 0.9 + 0.1 * n_cover)
    return min(1.0, sim)


def _name_word(mention_word: str, name_word: str) -> float:
    """Word similarity, plus: a one-letter name word abbreviates a longer mention word (`Orc L` for
    "orc language")."""
    if len(name_word) == 1 and name_word.isalpha() and len(mention_word) > 2:
        return 0.8 if mention_word.lower().startswith(name_word.lower()) else 0.0
    return word_similarity(mention_word, name_word)

