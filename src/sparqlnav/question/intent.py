"""What a question asks for, read from its words alone: the answer type (who → a person, when → a date,
how many → a count, yes/no → a boolean), superlatives ("the heaviest"), comparisons ("more than 5"),
year conditions ("discovered in 1898"), aggregates, and the operations a bounded query shape cannot carry
(negation, comparing two things, proportions, ranks below the top, alternatives, grouping). Used by the lexical
strategy; no LLM, no graph."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sparqlnav.graph.results import XSD
from sparqlnav.question.words import WordToken, is_stopword, word_set

AnswerType = Literal["count", "boolean", "person", "date", "place", "number", "thing"]

PERSON_WORDS = word_set(
    """
    person people human employee manager agent author writer actor actress scientist chemist
    physicist politician artist individual staff member user customer player character director
    researcher professor student engineer worker inventor discoverer
    """
)
DATE_TYPES = frozenset(
    XSD + t for t in ("date", "dateTime", "gYear", "gYearMonth", "dateTimeStamp")
)
BOOLEAN_STARTERS = word_set(
    """
    is are was were does do did has have had can could will would should
    """
)

# Superlative words: direction and the attribute words they usually refer to.
SUPERLATIVES: dict[str, tuple[str, tuple[str, ...]]] = {
    "cheapest": ("ASC", ("price", "cost")),
    "costliest": ("DESC", ("price", "cost")),
    "highest": ("DESC", ("height",)),
    "lowest": ("ASC", ("height",)),
    "largest": ("DESC", ("size", "area", "population", "volume")),
    "biggest": ("DESC", ("size", "area", "population", "volume")),
    "smallest": ("ASC", ("size", "area", "population", "volume")),
    "heaviest": ("DESC", ("weight", "mass")),
    "lightest": ("ASC", ("weight", "mass")),
    "longest": ("DESC", ("length", "duration")),
    "shortest": ("ASC", ("length", "duration")),
    "tallest": ("DESC", ("height",)),
    "oldest": ("ASC", ("birth", "inception", "date", "founded", "year", "age")),
    "youngest": ("DESC", ("birth", "inception", "date", "year", "age")),
    "earliest": ("ASC", ("date", "time", "year")),
    "latest": ("DESC", ("date", "time", "year")),
    "newest": ("DESC", ("date", "time", "year", "inception")),
    "rarest": ("ASC", ("count", "frequency")),  # the fewest occurrences, never the most
    "fastest": ("DESC", ("speed",)),
    "slowest": ("ASC", ("speed",)),
    "greatest": ("DESC", ()),
    "maximum": ("DESC", ()),
    "max": ("DESC", ()),
    "minimum": ("ASC", ()),
    "min": ("ASC", ()),
    "top": ("DESC", ()),
}
COMPARATORS: dict[str, str] = {
    "more than": ">",
    "greater than": ">",
    "higher than": ">",
    "larger than": ">",
    "bigger than": ">",
    "over": ">",
    "above": ">",
    "exceeding": ">",
    "at least": ">=",
    "less than": "<",
    "fewer than": "<",
    "lower than": "<",
    "smaller than": "<",
    "below": "<",
    "under": "<",
    "at most": "<=",
    "exactly": "=",
}
# "discovered in 1898": a condition on the year of a date
YEAR_WORDS: dict[str, str] = {
    "in": "year=",
    "during": "year=",
    "before": "year<",
    "after": "year>",
    "since": "year>=",
}
NUMBER = re.compile(r"^-?\d+(?:[.,]\d+)?$")
# Small numbers as people write them in a condition ("more than one", "at least two").
NUMBER_WORDS = {w: float(n) for n, w in enumerate(
    ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"))}
# Units a rate is measured in: "kilometres per litre" is one measure, not a figure per group.
UNIT_WORDS = word_set(
    """
    km kilometre kilometres kilometer kilometers mile miles metre metres meter meters m cm mm kg g gram grams
    kilogram kilograms tonne tonnes ton tons pound pounds lb lbs litre litres liter liters l gallon gallons
    second seconds minute minutes hour hours day days week weeks month months year years euro euros eur dollar
    dollars usd cent cents calorie calories kcal watt watts kwh mph kmh beat beats goal goals point points
    """
)
# Operations on the answer that are not a fact, a numeric condition, an ordering or one aggregate: English
# function words, the same for any graph.
OperationKind = Literal["negation", "comparison", "proportion", "rank", "alternative", "grouping"]
OPERATION_WORDS: dict[str, OperationKind] = {
    **dict.fromkeys(("not", "no", "non", "never", "without", "except", "neither", "nor", "none"), "negation"),
    **dict.fromkeys(("than", "same", "different", "differ", "superior", "inferior"), "comparison"),
    **dict.fromkeys(("percentage", "percent", "proportion", "ratio", "fraction"), "proportion"),
    **dict.fromkeys(("second", "third", "fourth", "fifth", "2nd", "3rd", "4th", "5th"), "rank"),
    "or": "alternative",
    **dict.fromkeys(("per", "each"), "grouping"),
}




@dataclass(frozen=True)
class Superlative:
    """An ordering the question asks for ("cheapest", "most expensive", "most common")."""

    direction: str
    hints: tuple[str, ...]
    positions: frozenset[int]
    counting: bool  # "most products", "most common": order by how often, not by a value
    limit: int = 1
    common: bool = False  # "the most common X": X is the value counted across subjects


@dataclass(frozen=True)
class Comparison:
    """A numeric condition ("more than 10", "between 3 and 7")."""

    op: str
    value: float
    positions: frozenset[int]
    hint_positions: frozenset[int]


@dataclass(frozen=True)
class Operation:
    """Something the question asks to do with the answers beyond facts, one numeric condition, one ordering
    or one aggregate ("not", "more … than", "what percentage", "the second most", "… or …", "per")."""

    kind: OperationKind
    word: str
    position: int


@dataclass(frozen=True)
class Intent:
    """What kind of answer the question wants and which modifiers it asks for."""

    answer: AnswerType
    positions: frozenset[int]  # tokens the analysis itself explains ("how many", "cheapest")
    superlative: Superlative | None = None
    comparisons: tuple[Comparison, ...] = ()
    plural: bool = False
    focus: tuple[int, ...] = ()  # the noun the answer is ("which *elements*", "what *products*")
    aggregate: str | None = None  # AVG, SUM, MIN or MAX of a value ("what is the average speed …")
    aggregate_positions: frozenset[int] = frozenset()
    operations: tuple[Operation, ...] = ()
    # "list the bands *and* their home cities": two things asked together, one column each
    pair: tuple[frozenset[int], frozenset[int]] | None = None
    # "what is the *city* of the *venue* with …": the value asked (X) of the things the rest picks out (Y)
    head_of: tuple[frozenset[int], frozenset[int]] | None = None


def analyse(tokens: Sequence[WordToken]) -> Intent:
    """The answer type and modifiers of a question, from its words alone."""
    words = [t.lower for t in tokens]
    used: set[int] = set()
    answer: AnswerType = "thing"
    for i, w in enumerate(words[:-1]):
        if w == "how" and words[i + 1] == "many":
            answer = "count"
            used |= {i, i + 1}
        elif w == "how" and words[i + 1] == "much":
            answer = "number"
            used |= {i, i + 1}
        elif (
            w == "number"
            and i > 0
            and words[i - 1] == "the"
            and i + 1 < len(words)
            and words[i + 1] == "of"
        ):
            answer = "count"
            used.add(i)
    if answer == "count" and words and words[0] in BOOLEAN_STARTERS:
        answer = "boolean"  # "Is the number of X greater than …?" compares counts but asks yes or no
    if answer == "thing":
        first = words[0] if words else ""
        if first in BOOLEAN_STARTERS:
            answer = "boolean"
        elif "who" in words[:3] or "whom" in words[:3]:
            answer = "person"
        elif "when" in words[:3] or any(
            words[i] in ("what", "which") and words[i + 1] in ("year", "date", "day", "time")
            for i in range(min(3, len(words) - 1))
        ):
            answer = "date"
            used |= {i for i, w in enumerate(words[:4]) if w in ("year", "date", "day", "time")}
        elif "where" in words[:3]:
            answer = "place"
    superlative = _superlative(words)
    if superlative:
        used |= superlative.positions
    comparisons = _comparisons(tokens)
    for c in comparisons:
        used |= c.positions
    plural = any(w.endswith("s") and not w.endswith("ss") for w in words[1:3]) or answer == "count"
    focus: list[int] = []
    starts = [i for i, w in enumerate(words[:3]) if w in ("which", "what")]
    if starts and answer not in ("count", "boolean"):
        j = starts[0] + 1
        while j < len(words) and not is_stopword(words[j]) and len(focus) < 3:
            focus.append(j)
            j += 1
    aggregate, agg_positions = _aggregate(words, superlative, counting=answer == "count")
    if answer == "count":  # "how many … in total": the count says "total"
        used |= {i for i, w in enumerate(words) if w in ("total", "altogether")}
    if aggregate:
        used |= agg_positions
        answer = "number" if answer == "thing" else answer
    return Intent(
        answer,
        frozenset(used),
        superlative,
        tuple(comparisons),
        plural,
        tuple(focus),
        aggregate,
        agg_positions,
        _operations(words, comparisons, superlative),
        _pair(words),
        _head_of(words),
    )


# How a request for a list or a value begins ("list the …", "what are the …", "give me the …").
# Imperatives ask as "what is" does (issue 36: "Tell me the height of the tallest tower" was answered with a tower).
_REQUESTS = (("list",), ("show",), ("show", "me"), ("show", "us"), ("give", "me"), ("give", "us"), ("give",),
             ("tell", "me"), ("tell", "us"), ("find",), ("find", "me"), ("return",), ("get",), ("get", "me"),
             ("display",), ("provide",), ("name",), ("what", "are"), ("what", "were"), ("what", "is"), ("what", "was"),
             ("which", "are"), ("which", "is"), ("whats",))
_DETERMINERS = frozenset({"the", "a", "an", "all", "each", "every", "their", "its", "his", "her", "whose"})


def _noun_run(words: Sequence[str], start: int, limit: int = 3) -> tuple[frozenset[int], int]:
    """The positions of a run of at most `limit` content words from `start` (after determiners), and where it ends."""
    i = start
    while i < len(words) and words[i] in _DETERMINERS:
        i += 1
    run: list[int] = []
    while i < len(words) and len(run) < limit and words[i].isalpha() and not is_stopword(words[i]):
        run.append(i)
        i += 1
    return frozenset(run), i


def _after_request(words: Sequence[str]) -> int | None:
    """Where the thing asked for starts, after a request's opening words; None when the question opens otherwise."""
    for opening in sorted(_REQUESTS, key=len, reverse=True):
        if tuple(words[: len(opening)]) == opening:
            return len(opening)
    return None


def _pair(words: Sequence[str]) -> tuple[frozenset[int], frozenset[int]] | None:
    """"list the bands and their home cities", "what are the names and capacities of the venues": two things asked
    for side by side at the head of a request, joined by "and"; or anywhere, a second column asked of the first
    by "their"/"its": "the countries of Asia with their capitals", "Lena's orders and their dates", "which
    languages …, and what are their codes"."""
    joined = _joined_runs(words, "and")
    if joined is not None:
        return joined
    for i, w in enumerate(words):
        if w not in ("their", "its") or i == 0:
            continue
        before = words[max(0, i - 3):i]
        if not before or (before[-1] not in ("with", "and") and tuple(before[-3:]) not in _ASKING_AGAIN):
            continue
        second, _ = _noun_run(words, i + 1)
        if not second:
            continue
        start = _after_request(words)
        first, _ = _noun_run(words, start) if start is not None else (frozenset(), 0)
        focus = [j for j in range(min(3, len(words))) if words[j] in ("which", "what")]
        if not first and focus:
            first, _ = _noun_run(words, focus[0] + 1)
        return (first, second) if first else None
    return None


# "…, and what are their codes": the second column asked again after a first question
_ASKING_AGAIN = frozenset({("and", "what", "are"), ("and", "what", "is"), ("and", "what", "were"), ("and", "what", "was")})


def _head_of(words: Sequence[str]) -> tuple[frozenset[int], frozenset[int]] | None:
    """"what is the city of the venue with …": the value asked for (city) and the things it belongs to (venue)."""
    return _joined_runs(words, "of")


def _joined_runs(words: Sequence[str], joiner: str) -> tuple[frozenset[int], frozenset[int]] | None:
    """The two runs of content words at the head of a request that `joiner` joins ("X and Y", "X of Y")."""
    start = _after_request(words)
    if start is None:
        return None
    first, end = _noun_run(words, start)
    if not first or end >= len(words) or words[end] != joiner:
        return None
    second, _ = _noun_run(words, end + 1)
    return (first, second) if second else None


def _operations(
    words: Sequence[str], comparisons: Sequence[Comparison], superlative: Superlative | None
) -> tuple[Operation, ...]:
    """The operations of OPERATION_WORDS the question asks for; "than" in a numeric condition ("more than 5",
    "more than one") is that condition's, "per" between a unit and another ("kilometres per litre") is a measure,
    and an ordinal counts only beside a superlative ("the second most common")."""
    numeric: set[int] = set()
    for c in comparisons:
        numeric |= c.positions
    out: list[Operation] = []
    for i, w in enumerate(words):
        kind = OPERATION_WORDS.get(w)
        if w.endswith(("n't", "n’t")) or (w.startswith("non-") and len(w) > 4):
            kind = "negation"
        if kind is None or i in numeric:
            continue
        if kind == "rank" and superlative is None:
            continue
        if w == "per" and 0 < i < len(words) - 1 and words[i - 1] in UNIT_WORDS and words[i + 1] in UNIT_WORDS:
            continue
        out.append(Operation(kind, w, i))
    return tuple(out)


def _aggregate(
    words: Sequence[str], superlative: Superlative | None, *, counting: bool = False
) -> tuple[str | None, frozenset[int]]:
    """AVG/SUM anywhere; MIN/MAX when the question asks for the value itself ("what is the maximum …"). In a
    question that counts, "in total" is the count's, not a SUM ("how many … in total")."""
    for i, w in enumerate(words):
        if w in ("average", "mean", "avg"):
            return "AVG", frozenset({i})
        if w == "sum" or (w == "total" and not counting):
            return "SUM", frozenset({i})
    asks_value = (
        len(words) > 2 and words[0] in ("what", "whats") and words[1] in ("is", "was", "s", "are")
    )
    if asks_value and superlative and not superlative.counting:
        first = min(superlative.positions)
        nxt = words[first + 1] if first + 1 < len(words) else ""
        # "the maximum constitution", "the highest value": a value; "the most expensive service": a thing
        value_word = words[first] in ("maximum", "minimum", "max", "min") or nxt in (
            "value",
            "values",
            "number",
            "amount",
            "level",
        )
        if value_word and all(
            w in ("what", "whats", "is", "was", "s", "are", "the") for w in words[:first]
        ):
            return ("MAX" if superlative.direction == "DESC" else "MIN"), superlative.positions
    return None, frozenset()


# English words ending in -est that are no superlative ("latest" is one, with its own entry in SUPERLATIVES)
_NOT_SUPERLATIVE = word_set(
    """
    interest interests request forest contest suggest latest harvest harvests honest modest manifest invest digest
    protest arrest inquest conquest earnest southwest northwest midwest tempest bequest behest
    """
)


def _superlative(words: Sequence[str]) -> Superlative | None:
    limit = 1
    for i, w in enumerate(words):
        if w in ("top", "first") and i + 1 < len(words) and words[i + 1].isdigit():
            limit = max(1, min(100, int(words[i + 1])))
        m = re.fullmatch(r"top-?(\d+)", w)
        if m:
            limit = max(1, min(100, int(m.group(1))))
    for i, w in enumerate(words):
        nxt = [j for j in range(i + 1, min(i + 4, len(words))) if not is_stopword(words[j])]
        if w in ("most", "least") and i > 0 and words[i - 1] == "at":
            continue  # "at least two", "at most 3": a comparison (COMPARATORS), not an extreme
        if w in ("most", "least", "fewest"):
            direction = "ASC" if w in ("least", "fewest") else "DESC"
            if not nxt:
                continue
            j = nxt[0]
            counting = words[j] in ("common", "popular", "frequent", "often", "used") or (
                words[j].endswith("s") and not words[j].endswith("ss") and j == i + 1
            )
            hints: tuple[str, ...] = (words[j],) if not counting else ()
            positions = frozenset({i, j} if hints or counting else {i})
            common = words[j] in ("common", "popular", "frequent", "often", "used")
            return Superlative(direction, hints, positions, counting, limit, common)
        if w in SUPERLATIVES or (
            w.endswith("est")
            and len(w) > 5
            and w not in _NOT_SUPERLATIVE
            and not is_stopword(w)
        ):
            spec: tuple[str, tuple[str, ...]] = SUPERLATIVES.get(w, ("DESC", (w[:-3],)))
            direction, hints = spec
            if w == "top" and limit == 1:
                continue
            extra = tuple(words[j] for j in nxt[:1])
            return Superlative(direction, hints + extra, frozenset({i}), False, limit)
    return None


def _comparisons(tokens: Sequence[WordToken]) -> list[Comparison]:
    words = [t.lower for t in tokens]
    out: list[Comparison] = []
    for i in range(len(words)):
        if (
            words[i] == "between"
            and i + 3 < len(words)
            and NUMBER.match(words[i + 1])
            and words[i + 2] == "and"
            and NUMBER.match(words[i + 3])
        ):
            low, high = float(words[i + 1].replace(",", ".")), float(words[i + 3].replace(",", "."))
            pos = frozenset(range(i, i + 4))
            hint = frozenset(range(max(0, i - 3), i))
            out += [Comparison(">=", low, pos, hint), Comparison("<=", high, pos, hint)]
            continue
        if (
            words[i] in YEAR_WORDS
            and i + 1 < len(words)
            and re.fullmatch(r"1\d{3}|20\d{2}", words[i + 1])
        ):
            pos = frozenset({i, i + 1})
            hint = frozenset(range(max(0, i - 3), i))
            out.append(Comparison(YEAR_WORDS[words[i]], float(words[i + 1]), pos, hint))
            continue
        for phrase, op in COMPARATORS.items():
            parts = phrase.split()
            n = len(parts)
            if words[i : i + n] == parts and i + n < len(words) and (
                NUMBER.match(words[i + n]) or words[i + n] in NUMBER_WORDS
            ):
                after = words[i + n]
                value = NUMBER_WORDS[after] if after in NUMBER_WORDS else float(after.replace(",", "."))
                pos = frozenset(range(i, i + n + 1))
                hint = frozenset(range(max(0, i - 3), i)) | frozenset(
                    range(i + n + 1, min(len(words), i + n + 3))
                )
                out.append(Comparison(op, value, pos, hint))
                break
    return out
