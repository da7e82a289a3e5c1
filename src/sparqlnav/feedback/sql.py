"""ERASER detectors for the SQL builder (QueryAgent's SQL transfer, queryagent.txt §5): each reads what the
database answered to the edited SELECT, or the schema's column kinds, and names one guideline of the shared
catalogue (guidelines.yaml, its SQL section). Silent for every other strategy: they leave `StepContext.sql` empty.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparqlnav.feedback.view import SqlView
from sparqlnav.graph.vocab import singular
from sparqlnav.question.wording import Asked
from sparqlnav.question.words import tokenize, word_similarity
from sparqlnav.sql.draft import ColumnRef

if TYPE_CHECKING:
    from sparqlnav.feedback.eraser import FeedbackOptions, StepContext

Details = Mapping[str, object]
EDITS = ("add_table", "add_join", "add_condition", "add_group", "add_aggregate", "set_order", "set_answer_columns")
NUMERIC_KINDS = frozenset({"integer", "decimal", "double"})
# A column that names or describes a row answers "which …?" without being asked for by its own name.
_NAME_LIKE = re.compile(r"(name|title|label)s?$", re.I)  # name, first_name, PlayerName, title
SAME_WORD = 0.85  # word_similarity at which a column's word is the question's (plurals, inflections)
# A question word that asks for a kind of value names the columns holding it ("what was appointment 1042 for?"
# asks for its reason, "when" for a date).
_CUES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = tuple(
    (re.compile(pattern, re.I), frozenset(words.split()))
    for pattern, words in (
        (r"\bwhy\b|\bwhat\b.*\bfor\s*\??\s*$", "reason purpose cause motive"),
        (r"\bwhen\b", "date time day month year at on start end"),
        (r"\bwhere\b", "city place location address country site room"),
        (r"\bhow\s+much\b", "price cost amount total fee value budget salary"),
        (r"\bhow\s+(?:long|old)\b", "duration length days minutes hours years age birth born"),
    )
)


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
    if view is None or view.run is None or view.run.rows != 0 or view.run.kept:
        return None  # kept with no row: an anti-join waiting for the condition on its partner
    if view.shared is not None and view.shared[0] == 0:  # the join itself: its two columns share no value
        return {"hint": "", "none": "", "why": "The two columns of the join share no stored value: the join, not a "
                "spelling or a condition, is what returns nothing (see above)."}
    if view.elsewhere:  # the text is stored, in another column: the condition is on the wrong one
        return {"hint": "", "none": "", "why": f"The text is stored in {' and '.join(view.elsewhere)}, not in "
                f"{view.compared[0] if view.compared else 'the column compared'}: the condition belongs on that "
                "column (join its table), unless the question means another thing."}
    hint = ""
    if view.compared is not None:
        hint = f" Look at the stored values with get_values(\"{view.compared[0]}\") and compare with one as stored."
    # No row may be the answer itself: a count keeps its one row and says 0 (first for a yes/no or "how many").
    count = ("count first: after add_aggregate(\"count\") a condition keeps the count's one row, and 0 says none.")
    if Asked.of(view.question).yes_no or "count" in view.wanted:
        return {"hint": f" If none is the answer (a \"no\", a zero), {count}{hint}", "none": "", "why": SPELLING}
    return {"hint": hint, "none": f" Or no row matches at all: if the question allows that answer, {count}",
            "why": SPELLING}


SPELLING = ("A value may be spelt or capitalised differently in the data, or the condition may belong on another "
            "column or a joined table.")


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
    if "count" in view.wanted and _stored_number(view):
        return None  # "how many beds does the ward have": the number is stored, not counted
    # An order, with a limit or without (ties kept on purpose), picks the largest or the smallest whichever way it
    # runs ("the rarest" may be read either way). "At least two" (a HAVING) is no extreme: see wanted_aggregations.
    functions = {a.function for a in draft.aggregates}
    for want in view.wanted:
        if want in functions or (want in ("max", "min") and draft.order is not None):
            return None
    tools = {"count": "add_aggregate(\"count\", …)",
             "max": "add_aggregate(\"max\", …) or set_order(…, \"desc\") (a limit of 1 drops rows that tie)",
             "min": "add_aggregate(\"min\", …) or set_order(…, \"asc\") (a limit of 1 drops rows that tie)"}
    return {"tools": " or ".join(tools[w] for w in view.wanted)}


def _stored_number(view: SqlView) -> bool:
    """Whether the query returns a number column the question names (wards.beds for "how many beds")."""
    tables = {t.alias: t.table for t in view.draft.tables}
    words = [t.text.lower() for t in tokenize(view.question)]
    chosen = view.draft.selected() or tuple(  # nothing chosen: SELECT * returns every column of the query
        ColumnRef(alias, c) for alias, table in tables.items() for c in view.column_kinds.get(table, {}))
    for col in chosen:
        if isinstance(col, ColumnRef) and col.alias in tables:
            kind = view.column_kinds.get(tables[col.alias], {}).get(col.column, "")
            if kind in NUMERIC_KINDS and _named(col.column, "", words):
                return True
    return False


def sql_unasked_column(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """set_answer_columns returns a column the question does not ask for (not a name, not a word of it)."""
    view = _view(ctx, "set_answer_columns")
    if view is None or not view.answer or Asked.of(view.question).yes_no:
        return None  # a yes/no question's answer is its evidence, whichever columns show it
    words = [t.text.lower() for t in tokenize(view.question)]
    cued = frozenset(w for pattern, cue in _CUES if pattern.search(view.question) for w in cue)
    tables = {t.alias: t.table for t in view.draft.tables}
    extra = [c for c in view.answer
             if not _asked(c, words) and not _cued(c, cued) and not _identity(c, tables, view)]
    return {"columns": ", ".join(extra)} if extra else None


def _cued(column: str, cued: frozenset[str]) -> bool:
    return any(p.lower() in cued for p in _parts(column.rpartition(".")[2]))


def _identity(column: str, tables: Mapping[str, str], view: SqlView) -> bool:
    """The key of a table with no name column is how its rows are named (a transfer's code, an order's id)."""
    alias, _, name = column.rpartition(".")
    table = tables.get(alias)
    if table is None or view.keys.get(table) != (name,):
        return False
    return not any(_names_rows(c, table) for c in view.column_kinds.get(table, {}))


def _names_rows(column: str, table: str) -> bool:
    """Whether a column names the table's own rows (`name`, `title`, `TransferName` of Transfer, `first_name`), not
    another table's (`OtherClubName` of Transfer names a club)."""
    parts = [p.lower() for p in _parts(column)]
    if not parts or not _NAME_LIKE.search(parts[-1]):
        return False
    before = parts[:-1]
    own = singular(re.sub(r"_\d+$", "", table).lower())
    return not before or before in (["first"], ["last"], ["full"], ["display"]) or "".join(before) == own



def _parts(name: str) -> list[str]:
    return [p for p in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", name) if p]


def _asked(column: str, words: list[str]) -> bool:
    table, _, name = column.rpartition(".")
    if _NAME_LIKE.search(name):
        return True
    # The table's own name in a column's (PlayerCode of Player, employee_id of employees) says whose it is, not what.
    return _named(name, re.sub(r"_\d+$", "", table).lower(), words)


def _named(name: str, own: str, words: list[str]) -> bool:
    """Whether a word of the column's name (other than its table's own, `own`) is one of the question's."""
    named = [p for p in _parts(name) if p.lower() not in ("id", "is")]
    parts = [p for p in named if not own or word_similarity(p.lower(), own) < SAME_WORD]
    if not parts and named and len(named) == len(_parts(name)):
        parts = named  # the table's own value, not a reference to its rows (languages.language for "what languages")
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
