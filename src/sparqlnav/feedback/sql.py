"""ERASER detectors for the SQL builder (QueryAgent's SQL transfer, queryagent.txt §5): each reads what the
database answered to the edited SELECT, or the schema's column kinds, and names one guideline of the shared
catalogue (guidelines.yaml, its SQL section). Silent for every other strategy: they leave `StepContext.sql` empty.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparqlnav.feedback.view import SqlView
from sparqlnav.question.words import tokenize, word_similarity

if TYPE_CHECKING:
    from sparqlnav.feedback.eraser import FeedbackOptions, StepContext

Details = Mapping[str, object]
EDITS = ("add_table", "add_join", "add_condition", "add_group", "add_aggregate", "set_order", "set_answer_columns")
NUMERIC_KINDS = frozenset({"integer", "decimal", "double"})
# A column that names or describes a row answers "which …?" without being asked for by its own name.
_NAME_LIKE = re.compile(r"(name|title|label)s?$", re.I)  # name, first_name, PlayerName, title
SAME_WORD = 0.85  # word_similarity at which a column's word is the question's (plurals, inflections)


def _view(ctx: StepContext, *tools: str) -> SqlView | None:
    if ctx.sql is None or ctx.call is None or ctx.call.name not in tools or ctx.call.parse_error:
        return None
    return ctx.sql


def sql_execution_error(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The edited SELECT failed in the database (an unknown column, a type error, the time limit)."""
    view = _view(ctx, *EDITS)
    if view is None or view.run is None or view.run.error is None:
        return None
    return {"message": view.run.error}


def sql_empty_result(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The edited SELECT ran and returned no row."""
    view = _view(ctx, *EDITS)
    if view is None or view.run is None or view.run.rows != 0:
        return None
    hint = ""
    if view.compared is not None:
        hint = f" Look at the stored values with get_values(\"{view.compared[0]}\") and compare with one as stored."
    return {"hint": hint}


def sql_type_mismatch(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A condition compares a text column with a number, or a number column with a text that is no number."""
    view = _view(ctx, "add_condition")
    if view is None or view.compared is None:
        return None
    column, kind, op, value_kind = view.compared
    if op.upper() in ("LIKE", "NOT LIKE") and kind == "string":
        return None
    numeric, other = kind in NUMERIC_KINDS, value_kind in NUMERIC_KINDS
    if value_kind in ("", "untyped") or kind in ("untyped", "") or numeric == other:
        return None
    if kind in ("date", "datetime", "time") and value_kind == "string":
        return None  # a date compared with its text ('2020-01-31') is how SQL writes dates
    return {"column": column, "kind": _kind_words(kind), "value": _kind_words(value_kind)}


def _kind_words(kind: str) -> str:
    return {"integer": "a whole number", "decimal": "a number", "double": "a number", "string": "a text",
            "boolean": "a yes/no", "date": "a date", "datetime": "a date and time", "time": "a time"}.get(kind, kind)


def sql_join_multiplies(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A join made the query return more rows than its first table has: each row met several partners."""
    view = _view(ctx, "add_join")
    if view is None or view.run is None or view.run.rows is None or view.base_rows is None:
        return None
    if view.run.rows <= view.base_rows or (view.previous_rows is not None and view.run.rows <= view.previous_rows):
        return None
    base = view.draft.base.table if view.draft.base else "the first table"
    return {"rows": view.run.rows, "base": base, "base_rows": view.base_rows}


def sql_aggregation_missing(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """execute() while the question asks for a count or an extreme and the query has none (said once a run)."""
    view = _view(ctx, "execute")
    if view is None or not view.wanted or "sql_aggregation_missing" in view.fired:
        return None
    draft = view.draft
    functions = {a.function for a in draft.aggregates}
    ordered = draft.order is not None and draft.limit is not None
    for want in view.wanted:
        if want in functions:
            return None
        if want == "max" and ordered and draft.order is not None and draft.order.descending:
            return None
        if want == "min" and ordered and draft.order is not None and not draft.order.descending:
            return None
    tools = {"count": "add_aggregate(\"count\", …)", "max": "add_aggregate(\"max\", …) or set_order(…, \"desc\", 1)",
             "min": "add_aggregate(\"min\", …) or set_order(…, \"asc\", 1)"}
    return {"tools": " or ".join(tools[w] for w in view.wanted)}


def sql_unasked_column(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """set_answer_columns returns a column the question does not ask for (not a name, not a word of it)."""
    view = _view(ctx, "set_answer_columns")
    if view is None or not view.answer:
        return None
    words = [t.text.lower() for t in tokenize(view.question)]
    extra = [c for c in view.answer if not _asked(c, words)]
    return {"columns": ", ".join(extra)} if extra else None


def _asked(column: str, words: list[str]) -> bool:
    table, _, name = column.rpartition(".")
    if _NAME_LIKE.search(name):
        return True
    # The table's own name in a column's (PlayerCode of Player, employee_id of employees) says whose it is, not what.
    own = re.sub(r"_\d+$", "", table).lower()
    parts = [p for p in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", name)
             if p and p.lower() not in ("id", "is") and word_similarity(p.lower(), own) < SAME_WORD]
    if not parts:  # an `id` column: asked only when the question says id, number, code or key
        return any(w in ("id", "ids", "number", "numbers", "code", "codes", "key") for w in words)
    return any(word_similarity(p.lower(), w) >= SAME_WORD for p in parts for w in words)


SQL_DETECTORS = {
    f.__name__: f
    for f in (
        sql_execution_error,
        sql_empty_result,
        sql_type_mismatch,
        sql_join_multiplies,
        sql_aggregation_missing,
        sql_unasked_column,
    )
}
