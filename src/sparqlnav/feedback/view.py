"""What the query builder shows the feedback module around one step (the build strategy fills it; other
strategies leave `StepContext.build` empty, so the builder's detectors stay silent for them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sparqlnav.sparql.draft import Aggregation, Draft
from sparqlnav.sql.draft import SqlDraft


@dataclass
class BuildView:
    """What the builder knows around one step: before it runs (draft, relations shown, what the question
    wants) and after (rows of the draft, relations found)."""

    draft: Draft
    relations: Mapping[str, frozenset[str]] = field(default_factory=dict)  # target → relation IRIs shown
    linked: tuple[str, ...] = ()  # entities linked in the question, as the model was shown them
    wanted: tuple[Aggregation, ...] = ()  # aggregations the question asks for (any one will do)
    fired: frozenset[str] = frozenset()  # guideline ids fired earlier in the run
    rows: int | None = None  # after add_*/set_answer: rows the draft returned (None: it did not run)
    relations_found: int | None = None  # after get_relations


@dataclass(frozen=True)
class SqlStepRun:
    """One execution of a SQL draft: the statement, its row count or error, and whether the step was kept."""

    sql: str
    rows: int | None  # None: it failed
    error: str | None = None
    kept: bool = True


@dataclass
class SqlView:
    """What the SQL builder knows around one step: before it runs (the draft, the schema's column kinds, what the
    question wants) and after (the run, the rows of the base table and of the query before the step, and the
    columns or comparison the step resolved)."""

    draft: SqlDraft
    column_kinds: Mapping[str, Mapping[str, str]]  # table → column → kind (direct_mapping.ValueKind)
    question: str = ""
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # table → its primary key's columns
    wanted: tuple[Aggregation, ...] = ()  # aggregations the question asks for (any one will do)
    fired: frozenset[str] = frozenset()  # guideline ids fired earlier in the run
    previous_rows: int | None = None  # rows the draft returned before the step
    run: SqlStepRun | None = None  # after an edit: the run of the edited draft
    base_rows: int | None = None  # after a join: rows of the query's first table
    compared: tuple[str, str, str, str] | None = None  # after a condition: (column shown, its kind, op, value kind)
    answer: tuple[str, ...] = ()  # after set_answer_columns: the columns chosen, as shown (aggregates excluded)
    shared: tuple[int, int] | None = None  # after a join with no row: rows meeting a partner, as stored / trimmed
    elsewhere: tuple[str, ...] = ()  # after a condition on a text with no row: other columns (table.column) holding it
