"""What a finished run's steps come to, for a summary line: the SPARQL and the SQL queries it ran, and which of
them gave the answer (its number among the queries of its language, as the steps list them). A database answered
in SQL runs no SPARQL: counting SPARQL queries alone said "0 queries · no query gave the answer". The CLI prints
`text()`; the HTTP answer object carries `to_json()` as `steps`, from which the web UI's Steps line says the same
(faces/web/app.js, `stepsSummary`)."""

from __future__ import annotations

from dataclasses import dataclass

from sparqlnav.answer import Answer
from sparqlnav.sparql.guard import declared_prefixes, tokens


@dataclass(frozen=True)
class StepsSummary:
    """How many SPARQL and SQL queries a run ran, and the language and number of the one that gave the answer."""

    sparql_queries: int
    sql_queries: int
    answered_by: tuple[str, int] | None  # ("SPARQL" | "SQL", its 1-based number among that language's queries)

    def to_json(self) -> dict[str, object]:
        """For the HTTP answer object: the counts and, when known, which query gave the answer."""
        language, number = self.answered_by if self.answered_by is not None else (None, None)
        return {"sparql_queries": self.sparql_queries, "sql_queries": self.sql_queries,
                "answered_by": {"language": language, "number": number} if language is not None else None}

    def text(self) -> str:
        """`3 queries`, `9 SQL queries`, or both, then which one gave the answer: `answer from SQL query #9`."""
        counts = []
        if self.sparql_queries or not self.sql_queries:
            counts.append(_count(self.sparql_queries, "query", "queries"))
        if self.sql_queries:
            counts.append(_count(self.sql_queries, "SQL query", "SQL queries"))
        if self.answered_by is None:
            return " · ".join(counts)
        language, number = self.answered_by
        return " · ".join([*counts, f"answer from {'SQL query' if language == 'SQL' else 'query'} #{number}"])


def steps_summary(answer: Answer) -> StepsSummary:
    """The queries `answer`'s run ran and which gave the answer (the last run of the answer's own text)."""
    sparql = [str(e.data.get("query", "")) for e in answer.trace.of_kind("sparql")]
    sql = [str(e.data.get("query", "")) for e in answer.trace.of_kind("sql")]
    answered_by: tuple[str, int] | None = None
    if answer.sql is not None:
        number = _last_match(_words(answer.sql), [_words(q) for q in sql])
        answered_by = ("SQL", number) if number else None
    elif answer.sparql is not None:
        number = _last_match(_sparql_tokens(answer.sparql), [_sparql_tokens(q) for q in sparql])
        answered_by = ("SPARQL", number) if number else None
    return StepsSummary(len(sparql), len(sql), answered_by)


def _last_match(target: object, ran: list[object]) -> int:
    """The 1-based number of the last of `ran` equal to `target`; 0 for none (a strategy's final run is the one that
    answered: the SQL builder runs its draft again on `execute`)."""
    return max((i + 1 for i, q in enumerate(ran) if q == target), default=0)


def _words(sql: str) -> str:
    """A SQL statement with its spacing squashed (the writer and the builder format what they run alike)."""
    return " ".join(sql.split()).rstrip(";").strip()


def _sparql_tokens(query: str) -> tuple[str, ...]:
    """A SPARQL query as its tokens, PREFIX lines dropped and prefixed names written as <IRI>s: strategies may run
    full IRIs and show the query with prefixes."""
    toks = tokens(query)
    declared = declared_prefixes(toks)
    out: list[str] = []
    skip = 0
    for i, t in enumerate(toks):
        if skip:
            skip -= 1
            continue
        if t.kind == "word" and t.text.upper() == "PREFIX" and i + 2 < len(toks) and toks[i + 1].kind == "pname":
            skip = 2
            continue
        prefix, _, local = t.text.partition(":")
        out.append(f"<{declared[prefix]}{local}>" if t.kind == "pname" and prefix in declared else t.text)
    return tuple(out)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


__all__ = ["StepsSummary", "steps_summary"]
