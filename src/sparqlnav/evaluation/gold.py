"""Gold answers for an evaluation: the dataset's own when it has them, else its gold SPARQL run once and frozen.

Executed gold answers are kept in a JSON Lines file (one `Gold` per line, the last line per id wins), so
re-runs score against exactly the same answers even if the KG or the engine changes underneath. A gold
query that fails is frozen too, with the reason, except when the endpoint could not be reached at all
(that says nothing about the query; the next run tries again).

A SQL dataset's question (gold `sql`) over a database KG also gets its gold SQL run once, through the evaluation's
`SqlRunner` (`sql_runs`), and frozen beside the SPARQL gold on the same line: an answer that carries SQL is scored
against that result, one that carries SPARQL against the SPARQL gold.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from sparqlnav.datasets import Question
from sparqlnav.evaluation.metrics import check_results
from sparqlnav.evaluation.sql_runs import SqlRunner
from sparqlnav.graph.endpoint import Endpoint, Outcome, QueryResult

GoldSource = Literal["dataset", "executed", "failed"]
GoldProgress = Callable[[Question, "Gold"], None]

XSD = "http://www.w3.org/2001/XMLSchema#"
# Casts that SPARQL 1.1 does not define but some engines (Virtuoso, Jena) accept; Oxigraph rejects them
# as unknown custom functions. Their meaning is an integer cast, so they are read as xsd:integer.
_INTEGER_CASTS = ("int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
                  "unsignedInt", "unsignedLong", "unsignedShort", "unsignedByte")  # fmt: skip
_UNSUPPORTED_CAST = re.compile(
    r"custom function <" + re.escape(XSD) + r"(" + "|".join(_INTEGER_CASTS) + r")> is not supported"
)


@dataclass(frozen=True)
class Gold:
    """The gold answer of one question, where it came from, and why it is missing when it is."""

    id: str
    results: dict[str, Any] | None
    source: GoldSource
    sparql: str | None = None
    error: str | None = None
    note: str | None = None
    values_only: bool = False
    outcome: str | None = None  # of the gold query, when it was run
    sql: str | None = None  # a SQL dataset's gold SQL, run against the database
    sql_results: dict[str, Any] | None = None  # its result (SPARQL JSON form, see `sql_runs`)
    sql_error: str | None = None  # why there is none
    sql_note: str | None = None  # e.g. the result was cut at a cap

    @property
    def ok(self) -> bool:
        """True when there is a gold answer to score against."""
        return self.results is not None

    def to_json(self) -> dict[str, Any]:
        """Plain data (one line of the frozen gold file)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Gold:
        """Read one line of the frozen gold file."""
        return cls(
            id=str(data["id"]),
            results=data.get("results"),
            source=data.get("source", "executed"),
            sparql=data.get("sparql"),
            error=data.get("error"),
            note=data.get("note"),
            values_only=bool(data.get("values_only", False)),
            outcome=data.get("outcome"),
            sql=data.get("sql"),
            sql_results=data.get("sql_results"),
            sql_error=data.get("sql_error"),
            sql_note=data.get("sql_note"),
        )


def gold_file_for(dataset_path: Path, kg_identity: str, home: Path) -> Path:
    """Default frozen-gold file: one per (dataset file contents, KG), under the sparqlnav home."""
    digest = hashlib.sha256(dataset_path.read_bytes())
    digest.update(b"\0" + kg_identity.encode("utf-8"))
    return home / "gold" / f"{dataset_path.stem}-{digest.hexdigest()[:16]}.jsonl"


def load_frozen(path: Path) -> dict[str, Gold]:
    """Gold answers frozen earlier (empty when the file does not exist; a torn last line is ignored)."""
    if not path.is_file():
        return {}
    found: dict[str, Gold] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            gold = Gold.from_json(json.loads(line))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut short by a crash; that question is executed again
        found[gold.id] = gold
    return found


def _append(path: Path, golds: Iterable[Gold]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for gold in golds:
            handle.write(json.dumps(gold.to_json(), ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def execute_gold(question: Question, endpoint: Endpoint) -> Gold:
    """Run a question's gold SPARQL once; unsupported integer casts are retried as xsd:integer."""
    assert question.sparql is not None
    result = endpoint.query(question.sparql)
    note = None
    if not result.ok and _UNSUPPORTED_CAST.search(result.message):
        rewritten = rewrite_integer_casts(question.sparql)
        retried = endpoint.query(rewritten)
        if retried.ok:
            result = retried
            note = "non-standard integer casts (e.g. xsd:int) read as xsd:integer"
    return _gold_from_result(question, result, note)


def _gold_from_result(question: Question, result: QueryResult, note: str | None) -> Gold:
    if result.ok and result.table is not None:
        if result.table.truncated:
            cap = f"result cut at a cap ({result.table.cap}); gold may be incomplete"
            note = f"{note}; {cap}" if note else cap
        return Gold(
            id=question.id,
            results=result.table.to_sparql_json(),
            source="executed",
            sparql=question.sparql,
            note=note,
            outcome=result.outcome.value,
        )
    return Gold(
        id=question.id,
        results=None,
        source="failed",
        sparql=question.sparql,
        error=f"gold query failed: {result.describe()}",
        outcome=result.outcome.value,
    )


def execute_sql_gold(gold: Gold, sql: str, runner: SqlRunner) -> Gold:
    """`gold` with the result of the question's gold SQL (or why it has none)."""
    run = runner(sql)
    if run.results is None:
        return replace(gold, sql=sql, sql_results=None, sql_error=f"gold SQL failed ({run.outcome}): {run.error}",
                       sql_note=None)
    note = "result cut at a cap; gold may be incomplete" if run.truncated else None
    return replace(gold, sql=sql, sql_results=run.results, sql_error=None, sql_note=note)


def _malformed(results: Mapping[str, Any] | None) -> str | None:
    """Why a dataset's gold answer is not SPARQL JSON results, or None when it is (or is absent)."""
    if results is None:
        return None
    try:
        check_results(results, what="gold")
    except ValueError as exc:
        return str(exc)
    return None


def rewrite_integer_casts(sparql: str) -> str:
    """Replace xsd:int(...)-style casts (prefixed or full IRI) by xsd:integer casts."""
    names = "|".join(_INTEGER_CASTS)
    text = re.sub(r"<" + re.escape(XSD) + r"(?:" + names + r")>\s*\(", f"<{XSD}integer>(", sparql)
    return re.sub(r"\bxsd:(?:" + names + r")\s*\(", "xsd:integer(", text)


def freeze_gold(
    questions: Iterable[Question],
    endpoint: Endpoint,
    path: Path | None,
    *,
    refresh: bool = False,
    progress: GoldProgress | None = None,
    sql: SqlRunner | None = None,
) -> dict[str, Gold]:
    """Gold for every question: dataset answers, else frozen results, else run the gold query now and freeze it.

    `path` None keeps executed answers in memory only. `refresh` re-runs every gold query. With `sql` (the KG is a
    database), a question's gold SQL is run and frozen too.
    """
    frozen = {} if refresh or path is None else load_frozen(path)
    golds: dict[str, Gold] = {}
    fresh: list[Gold] = []
    for question in questions:
        ran = False  # a gold query (SPARQL or SQL) was run for this question: its line is frozen
        malformed = _malformed(question.gold_results)
        if question.gold_results is not None and malformed is None:
            gold = Gold(
                id=question.id,
                results=question.gold_results,
                source="dataset",
                sparql=question.sparql,
                values_only=question.gold_values_only,
            )
        elif not question.sparql:
            gold = Gold(
                id=question.id,
                results=None,
                source="failed",
                error=f"the dataset's gold answer is malformed ({malformed})"
                if malformed
                else "the dataset gives no gold SPARQL"
                if question.sql
                else "the dataset gives neither gold answers nor a gold query",
            )
        elif question.id in frozen and frozen[question.id].sparql == question.sparql:
            gold = frozen[question.id]
        else:
            gold = execute_gold(question, endpoint)
            if malformed:
                why = f"the dataset's answer is malformed ({malformed}); its gold query was run instead"
                gold = replace(gold, note=f"{why}; {gold.note}" if gold.note else why)
            ran = True
        if question.sql and sql is not None:
            before = frozen.get(question.id)
            # A failed gold SQL is run again each time: it is cheap, and a database that was down is no verdict.
            if before is not None and before.sql == question.sql and before.sql_results is not None:
                gold = replace(gold, sql=before.sql, sql_results=before.sql_results, sql_error=before.sql_error,
                               sql_note=before.sql_note)
            else:
                gold, ran = execute_sql_gold(gold, question.sql, sql), True
        # An unreachable endpoint says nothing about the query: do not freeze that failure.
        if ran and gold.outcome != Outcome.UNREACHABLE.value:
            fresh.append(gold)
            if path is not None and len(fresh) >= 20:
                _append(path, fresh)
                fresh = []
        golds[question.id] = gold
        if progress is not None:
            progress(question, gold)
    if path is not None and fresh:
        _append(path, fresh)
    return golds
