"""Question/SQL pairs a user has for a database (issue 35): `index --examples` on a database keeps them under
`<home>/sql/`, one file per database, and the SQL writer shows the few closest to the question (BM25 over the
questions: no model is loaded to answer). They are read from the same benchmark files as SPARQL examples (JSON,
YAML: a question with `sql`); a pair whose SQL the guard refuses is refused with the file named, before anything is
kept."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sparqlnav.datasets import DatasetFormatError, load_dataset
from sparqlnav.graph.relational import Database
from sparqlnav.retrieval.examples import DATASET_SUFFIXES, ExamplesError
from sparqlnav.retrieval.similarity import bm25_scores
from sparqlnav.sql.guard import refusal

__all__ = ["SqlExample", "closest_sql_examples", "keep_sql_examples", "kept_sql_examples", "load_sql_examples"]

SHOWN = 3  # pairs shown to the SQL writer: enough to show the house style, few enough to stay cheap


@dataclass(frozen=True)
class SqlExample:
    """One question with the SQL that answers it on the database."""

    question: str
    sql: str


def load_sql_examples(paths: Iterable[Path | str], dialect: str) -> list[SqlExample]:
    """The pairs with SQL in benchmark files (others are skipped); ExamplesError for a file that cannot be read or
    a query the guard refuses (`dialect`: sqlite or postgresql)."""
    found: list[SqlExample] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_file() or path.suffix.lower() not in DATASET_SUFFIXES:
            raise ExamplesError(f"{path}: SQL examples come in a question file "
                                f"({', '.join(sorted(DATASET_SUFFIXES))}) whose questions carry `sql`")
        try:
            dataset = load_dataset(path)
        except DatasetFormatError as exc:
            raise ExamplesError(str(exc)) from None
        for q in dataset.questions:
            if not q.sql:
                continue
            refused = refusal(q.sql, "postgresql" if dialect == "postgresql" else "sqlite")
            if refused is not None:
                raise ExamplesError(f"{path}: the SQL of {q.id!r} is refused: {refused}")
            found.append(SqlExample(q.question, q.sql.strip()))
    return list(dict.fromkeys(found))


def _path(home: Path, database: Database) -> Path:
    return home / "sql" / f"examples-{hashlib.sha256(database.shown.encode()).hexdigest()[:16]}.json"


def keep_sql_examples(home: Path, database: Database, examples: Sequence[SqlExample]) -> Path:
    """Keep the database's pairs (replacing those kept before); the file's path."""
    path = _path(home, database)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps({"database": database.shown, "examples": [asdict(e) for e in examples]}),
                       encoding="utf-8")
    partial.replace(path)
    return path


def kept_sql_examples(home: Path, database: Database) -> list[SqlExample]:
    """The database's kept pairs (none when none were kept or the file is damaged)."""
    try:
        data = json.loads(_path(home, database).read_text(encoding="utf-8"))
        return [SqlExample(str(e["question"]), str(e["sql"])) for e in data["examples"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def closest_sql_examples(examples: Sequence[SqlExample], question: str, k: int = SHOWN) -> list[SqlExample]:
    """The `k` pairs whose questions share most words with this one (none that share no word)."""
    if not examples:
        return []
    scores = bm25_scores(question, [e.question for e in examples])
    return [examples[i] for i in sorted(range(len(examples)), key=lambda i: -scores[i])[:k] if scores[i] > 0]
