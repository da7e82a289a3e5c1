"""Benchmark dataset files read into `Question` records: QALD JSON, text2sparql YAML (+ gold value sets), SPINACH
JSON, plain lists, SQL sets. A format concern both evaluation (the questions it runs) and retrieval (examples from
a dataset file) read.

Every format becomes a list of `Question` records. The format is detected from the content,
not the file name: JSON, then JSON Lines, then YAML are tried, and the parsed structure decides.

* QALD JSON: ``{"dataset": {"id"}, "questions": [{"id", "question": [{"language", "string"}],
  "query": {"sparql"}, "answers": [<SPARQL JSON results>]}]}`` (QALD-10, BESTIARY).
* text2sparql YAML: ``{"dataset": {"id", "prefix"}, "questions": [{"id", "question": {lang:
  text}, "features": [...], "query": {"sparql"}}]}`` (TEXT2SPARQL'25 CK25 and DBpedia tracks).
  The challenge's gold answers are a separate JSON file keyed ``<prefix>:<id>-<lang>`` holding
  ``{lexical value: relevance}``; it is found next to the YAML as
  ``<prefix>_true_result_set.json`` unless given. Such a value set has lost rows, columns and
  term types, so it is turned into a one-column table (IRIs guessed from the lexical form) and
  the question is flagged ``gold_values_only``: only set-based metrics are meaningful for it.
* SPINACH JSON: a list of ``{"id", "question", "sparql"[, "title", "url"]}`` (SPINACH dev/test and
  the QALD/WikiWebQuestions sets SPINACH ships), or SPINACH agent outputs ``{"question",
  "gold_sparql", "gold_answer_tuple", ...}`` whose gold rows become the gold results.
* plain: a JSON list or JSON Lines of ``{"question", "sparql"}`` with optional ``id``, ``tags``,
  ``language`` and gold results under ``gold``, ``results`` or ``answer``.
* SQL: the same records with a gold ``sql`` query (``{"id", "question", "sql", "sparql", "tags"}``: SQL for the
  database itself, SPARQL for its direct-mapped graph, either may be missing), for a database KG. A yes/no's SQL is
  ``SELECT EXISTS (...) AS answer`` and its SPARQL an ASK. Every record has ``sql``: the format is ``sql``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from sparqlnav.errors import SparqlnavError

DatasetFormat = Literal["qald", "text2sparql", "spinach", "spinach-output", "plain", "sql"]

_ABSOLUTE_IRI = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://\S*|urn:\S+)$")
_PROLOGUE = re.compile(
    r"(?is)^\s*(?:(?:#[^\n]*\n)|(?:PREFIX\s+[^\s:]*:\s*<[^>]*>)|(?:BASE\s*<[^>]*>)|\s+)*"
)
_GOLD_KEYS = ("gold", "results", "answer")


class DatasetFormatError(SparqlnavError, ValueError):
    """The file is not in any dataset format we know, or is malformed for its format."""


@dataclass(frozen=True, slots=True)
class Question:
    """One benchmark question with its reference query and, when known, gold results."""

    id: str
    question: str
    sparql: str | None
    gold_results: dict[str, Any] | None = None
    tags: tuple[str, ...] = ()
    language: str = "en"
    gold_values_only: bool = False
    sql: str | None = None  # gold SQL over the database the graph is mapped from (SQL datasets)


@dataclass(frozen=True, slots=True)
class Dataset:
    """Questions loaded from one file, with the detected format and the dataset's name."""

    name: str
    format: DatasetFormat
    questions: list[Question] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)


def load_dataset(
    path: str | Path, *, language: str = "en", gold_path: str | Path | None = None
) -> Dataset:
    """Load a benchmark file, detecting its format; questions lacking ``language`` are skipped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetFormatError(f"{path}: cannot read ({error})") from error
    data = _parse(text, path)
    fmt = detect_format(data)
    if fmt is None:
        raise DatasetFormatError(
            f"{path}: unrecognised dataset format ({_describe(data)}); {_EXPECTED}"
        )
    name = _dataset_name(data, path)
    if fmt == "qald":
        questions = _from_qald(data, language)
    elif fmt == "text2sparql":
        questions = _from_text2sparql(data, language, path, gold_path)
    elif fmt == "spinach-output":
        questions = _from_spinach_output(data, language)
    else:
        questions = _from_records(data, language)
    return Dataset(name=name, format=fmt, questions=questions)


def load_questions(
    path: str | Path, *, language: str = "en", gold_path: str | Path | None = None
) -> list[Question]:
    """The questions of a benchmark file (see `load_dataset`)."""
    return load_dataset(path, language=language, gold_path=gold_path).questions


def detect_format(data: Any) -> DatasetFormat | None:
    """Which dataset format parsed content is in, or None when it is none we know."""
    if isinstance(data, Mapping) and isinstance(data.get("questions"), list):
        first = next((q for q in data["questions"] if isinstance(q, Mapping)), None)
        if first is None:
            return "qald" if isinstance(data.get("dataset"), Mapping) else None
        if isinstance(first.get("question"), list):
            return "qald"
        if isinstance(first.get("question"), Mapping):
            return "text2sparql"
        return None
    if isinstance(data, list) and data and all(isinstance(item, Mapping) for item in data):
        keys = set().union(*(item.keys() for item in data))
        if {"question", "gold_sparql", "gold_answer_tuple"} <= keys:
            return "spinach-output"
        if all("question" in item and isinstance(item.get("sql"), str) for item in data):
            return "sql"
        # Free-text questions (the demo hybrid set) give their answers without a query.
        if all("question" in item and ("sparql" in item or "query" in item or "answer" in item) for item in data):
            return "spinach" if {"title", "url"} <= keys else "plain"
    return None


_EXPECTED = (
    "expected QALD JSON, text2sparql YAML, SPINACH JSON, or a JSON/JSONL list of "
    "{question, sparql} (or {question, answer}, or {question, sql}) objects"
)


# --------------------------------------------------------------------------- parsing


def _parse(text: str, path: Path) -> Any:
    """JSON, else JSON Lines, else YAML."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[0].lstrip().startswith("{"):
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise DatasetFormatError(
                    f"{path}:{number}: not valid JSON ({error.msg})"
                ) from error
        return records
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise DatasetFormatError(f"{path}: neither JSON, JSON Lines nor YAML ({error})") from error


def _describe(data: Any) -> str:
    if isinstance(data, Mapping):
        return f"top level is an object with keys {sorted(map(str, data))[:8]}"
    if isinstance(data, list):
        if not data:
            return "top level is an empty list"
        first = data[0]
        if isinstance(first, Mapping):
            return f"top level is a list of objects with keys {sorted(map(str, first))[:8]}"
        return f"top level is a list of {type(first).__name__}"
    return f"top level is {type(data).__name__}"


def _dataset_name(data: Any, path: Path) -> str:
    if isinstance(data, Mapping) and isinstance(data.get("dataset"), Mapping):
        ident = data["dataset"].get("id")
        if ident:
            return str(ident)
    return path.stem


# --------------------------------------------------------------------------- QALD


def _from_qald(data: Mapping[str, Any], language: str) -> list[Question]:
    questions = []
    for index, item in enumerate(data["questions"]):
        if not isinstance(item, Mapping):
            raise DatasetFormatError(f"QALD question #{index} is not an object")
        text = next(
            (
                str(entry.get("string", ""))
                for entry in item.get("question", [])
                if isinstance(entry, Mapping) and entry.get("language") == language
            ),
            None,
        )
        if not text:
            continue
        query = item.get("query")
        sparql = query.get("sparql") if isinstance(query, Mapping) else None
        answers = item.get("answers") or []
        gold = _unwrap_boolean(answers[0]) if answers and _looks_like_results(answers[0]) else None
        questions.append(
            Question(
                id=str(item.get("id", index)),
                question=text,
                sparql=str(sparql) if sparql else None,
                gold_results=_plain_dict(gold),
                tags=_qald_tags(item),
                language=language,
            )
        )
    return questions


def _qald_tags(item: Mapping[str, Any]) -> tuple[str, ...]:
    tags = [flag for flag in ("aggregation", "onlydbo", "hybrid") if item.get(flag) is True]
    if item.get("answertype"):
        tags.append(f"answertype:{item['answertype']}")
    return tuple(tags)


# --------------------------------------------------------------------------- text2sparql


def _from_text2sparql(
    data: Mapping[str, Any], language: str, path: Path, gold_path: str | Path | None
) -> list[Question]:
    dataset = data.get("dataset")
    prefix = str(dataset.get("prefix") or "") if isinstance(dataset, Mapping) else ""
    gold_sets = _load_gold_sets(gold_path, path, prefix)
    questions = []
    for index, item in enumerate(data["questions"]):
        if not isinstance(item, Mapping) or not isinstance(item.get("question"), Mapping):
            raise DatasetFormatError(f"{path}: question #{index} has no 'question' mapping")
        text = item["question"].get(language)
        if not text:
            continue
        raw_id = item.get("id", index + 1)
        ident = f"{prefix}:{raw_id}-{language}" if prefix else f"{raw_id}-{language}"
        query = item.get("query")
        sparql = (
            str(query.get("sparql")) if isinstance(query, Mapping) and query.get("sparql") else None
        )
        features = tuple(str(f) for f in item.get("features") or ())
        gold = None
        if gold_sets is not None and ident in gold_sets:
            is_ask = "ASK" in features or (sparql is not None and _is_ask(sparql))
            gold = _value_set_to_results(gold_sets[ident], is_ask)
        questions.append(
            Question(
                id=ident,
                question=str(text),
                sparql=sparql,
                gold_results=gold,
                tags=features,
                language=language,
                gold_values_only=gold is not None,
            )
        )
    return questions


def _load_gold_sets(
    gold_path: str | Path | None, path: Path, prefix: str
) -> dict[str, Mapping[str, Any]] | None:
    if gold_path is None:
        candidate = path.with_name(f"{prefix}_true_result_set.json") if prefix else None
        if candidate is None or not candidate.is_file():
            return None
        gold_path = candidate
    gold_path = Path(gold_path)
    try:
        data = json.loads(gold_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetFormatError(f"{gold_path}: cannot read gold result sets ({error})") from error
    if not isinstance(data, Mapping) or not all(isinstance(v, Mapping) for v in data.values()):
        raise DatasetFormatError(
            f"{gold_path}: expected {{'<prefix>:<id>-<lang>': {{value: relevance}}}}"
        )
    return dict(data)


def _is_ask(sparql: str) -> bool:
    body = _PROLOGUE.sub("", sparql, count=1)
    return body[:3].upper() == "ASK"


def _value_set_to_results(values: Mapping[str, Any], is_ask: bool) -> dict[str, Any]:
    """A TEXT2SPARQL ``{value: relevance}`` gold set as SPARQL JSON results."""
    if is_ask:
        return {"head": {}, "boolean": bool(values.get("true", 0))}
    bindings = [
        {"result": {"type": "uri" if _ABSOLUTE_IRI.match(value) else "literal", "value": value}}
        for value, relevance in values.items()
        if relevance
    ]
    return {"head": {"vars": ["result"]}, "results": {"bindings": bindings}}


# --------------------------------------------------------------------------- SPINACH and plain


def _from_spinach_output(data: Sequence[Mapping[str, Any]], language: str) -> list[Question]:
    return [
        Question(
            id=str(item.get("id", index)),
            question=str(item["question"]),
            sparql=str(item["gold_sparql"]) if item.get("gold_sparql") else None,
            gold_results=rows_to_results(item.get("gold_answer_tuple")),
            language=language,
        )
        for index, item in enumerate(data)
    ]


def _from_records(data: Sequence[Mapping[str, Any]], language: str) -> list[Question]:
    questions = []
    for index, item in enumerate(data):
        sparql = item.get("sparql", item.get("query"))
        gold = next((item[k] for k in _GOLD_KEYS if _looks_like_results(item.get(k))), None)
        values_only = False
        answer = item.get("answer")
        if gold is None and isinstance(answer, list | bool):
            # A plain list of answer values (the demo questions): a value set, like TEXT2SPARQL's gold.
            is_ask = isinstance(answer, bool) or (sparql is not None and _is_ask(str(sparql)))
            listed = {str(v).lower() if isinstance(v, bool) else str(v): 1 for v in ([answer] if isinstance(answer, bool) else answer)}
            gold, values_only = _value_set_to_results(listed, is_ask), True
        tags = item.get("tags") or ()
        sql = item.get("sql")
        questions.append(
            Question(
                id=str(item.get("id", index)),
                question=str(item["question"]),
                sparql=str(sparql) if sparql else None,
                gold_results=_plain_dict(gold),
                tags=tuple(str(t) for t in tags)
                if isinstance(tags, list | tuple)
                else (str(tags),),
                language=str(item.get("language", language)),
                gold_values_only=values_only,
                sql=sql if isinstance(sql, str) and sql.strip() else None,
            )
        )
    return questions


def rows_to_results(rows: Any) -> dict[str, Any] | None:
    """SPINACH answer tuples (a list of binding rows, a boolean, or None) as SPARQL JSON results."""
    if rows is None:
        return None
    if isinstance(rows, bool):
        return {"head": {}, "boolean": rows}
    if not isinstance(rows, list):
        raise DatasetFormatError(
            f"answer tuple must be a list, a boolean or null, not {type(rows).__name__}"
        )
    variables: list[str] = []
    for row in rows:
        for var in row:
            if var not in variables:
                variables.append(var)
    return {"head": {"vars": variables}, "results": {"bindings": rows}}


def _looks_like_results(value: Any) -> bool:
    return isinstance(value, Mapping) and (
        "boolean" in value or isinstance(value.get("results"), Mapping)
    )


def _plain_dict(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _unwrap_boolean(results: Mapping[str, Any]) -> Mapping[str, Any]:
    """Some QALD files (BESTIARY) wrap an ASK result inside `bindings`; return the plain boolean result."""
    bindings = (results.get("results") or {}).get("bindings") if isinstance(results.get("results"), Mapping) else None
    if isinstance(bindings, list) and len(bindings) == 1 and isinstance(bindings[0], Mapping) and "boolean" in bindings[0]:
        return {"head": {}, "boolean": bool(bindings[0]["boolean"])}
    return results
