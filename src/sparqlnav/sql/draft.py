"""A SELECT under construction (QueryAgent's SQL transfer, queryagent.txt §5): a base table, joins along columns
(and anti-joins: rows with no partner), conditions (IN / NOT IN lists too), groups and aggregates, the year or
month of a date column, an order and a limit, the answer's columns; rendered as one statement after each edit.
Every edit returns a new draft, so a step that is not kept leaves the last one untouched.

SQL as text only: which tables and columns exist is the builder's business (`strategies/builder/sql_tools`); this
module never talks to a database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal

AggregateFunction = Literal["count", "sum", "avg", "min", "max"]
FUNCTIONS: tuple[AggregateFunction, ...] = ("count", "sum", "avg", "min", "max")
OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "LIKE", "NOT LIKE", "IN", "NOT IN", "IS NULL", "IS NOT NULL")
UNARY = ("IS NULL", "IS NOT NULL")
LISTS = ("IN", "NOT IN")
Dialect = Literal["sqlite", "postgresql"]
DatePartName = Literal["year", "month"]
DATE_PARTS: tuple[DatePartName, ...] = ("year", "month")


def quote_name(name: str) -> str:
    """A name in double quotes (SQLite and PostgreSQL alike)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """A text as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def quote_table(name: str) -> str:
    """A table's name as SQL: `schema.table` (a PostgreSQL table outside `public`) as two quoted names."""
    schema, dot, table = name.partition(".")
    return f"{quote_name(schema)}.{quote_name(table)}" if dot and table else quote_name(name)


@dataclass(frozen=True)
class ColumnRef:
    """A column of one table of the query, by the table's name in the query (its alias)."""

    alias: str
    column: str

    def sql(self) -> str:
        """As SQL."""
        return f"{quote_name(self.alias)}.{quote_name(self.column)}"

    @property
    def shown(self) -> str:
        """As the model writes it: alias.column."""
        return f"{self.alias}.{self.column}"


@dataclass(frozen=True)
class DatePart:
    """The year or month of a date column, as a whole number: a DATE, a timestamp or 'YYYY-MM-DD…' text alike."""

    column: ColumnRef
    part: DatePartName
    dialect: Dialect

    @property
    def name(self) -> str:
        """Its output column's name: year_ord_date, month_ord_date."""
        return f"{self.part}_{re.sub(r'[^A-Za-z0-9_]', '_', self.column.column)}"

    def sql(self) -> str:
        """The expression: SQLite's strftime reads ISO text and dates alike; PostgreSQL casts text to a date first."""
        if self.dialect == "postgresql":
            return f"CAST(EXTRACT({self.part.upper()} FROM CAST({self.column.sql()} AS DATE)) AS INTEGER)"
        return f"CAST(strftime('{'%Y' if self.part == 'year' else '%m'}', {self.column.sql()}) AS INTEGER)"

    @property
    def shown(self) -> str:
        """As the model writes it: year(orders.ord_date)."""
        return f"{self.part}({self.column.shown})"


@dataclass(frozen=True)
class SqlAggregate:
    """COUNT/SUM/AVG/MIN/MAX of a column (COUNT of rows when `column` is None), named by `name` in the result."""

    function: AggregateFunction
    column: ColumnRef | None
    distinct: bool = False

    @property
    def name(self) -> str:
        """Its output column's name: count_rows, count_distinct_id, avg_salary …"""
        what = "rows" if self.column is None else self.column.column
        return f"{self.function}_{'distinct_' if self.distinct else ''}{re.sub(r'[^A-Za-z0-9_]', '_', what)}"

    def sql(self) -> str:
        """The aggregate expression, without its name."""
        inner = "*" if self.column is None else (("DISTINCT " if self.distinct else "") + self.column.sql())
        return f"{self.function.upper()}({inner})"

    @property
    def shown(self) -> str:
        """As the model sees it."""
        return self.name


Selectable = ColumnRef | DatePart | SqlAggregate


@dataclass(frozen=True)
class SqlValue:
    """A value a condition compares with: a number or a text."""

    value: int | float | Decimal | str

    @property
    def is_number(self) -> bool:
        """Whether it is a number (not a text)."""
        return not isinstance(self.value, str)

    def sql(self) -> str:
        """As SQL: a number as written, a text in single quotes."""
        if isinstance(self.value, str):
            return quote_literal(self.value)
        return str(self.value)


@dataclass(frozen=True)
class SqlValues:
    """The list an IN / NOT IN condition compares with."""

    values: tuple[SqlValue, ...]

    def sql(self) -> str:
        """As SQL: (v1, v2, …)."""
        return "(" + ", ".join(v.sql() for v in self.values) + ")"


@dataclass(frozen=True)
class TableRef:
    """A table in the query under a name (its own name, or `name_2` when it is joined a second time)."""

    table: str
    alias: str

    def sql(self) -> str:
        """FROM/JOIN form."""
        if self.alias == self.table:
            return quote_table(self.table)
        return f"{quote_table(self.table)} AS {quote_name(self.alias)}"


@dataclass(frozen=True)
class SqlJoin:
    """A table joined on `left = right` (`left` a column of the query so far, `right` one of the new table)."""

    ref: TableRef
    left: ColumnRef
    right: ColumnRef
    conditions: tuple[SqlCondition, ...] = ()  # an anti-join's own conditions (inside its NOT EXISTS)

    def not_exists(self) -> str:
        """As an anti-join: NOT EXISTS a partner (meeting its own conditions)."""
        inner = " AND ".join([f"{self.right.sql()} = {self.left.sql()}", *(c.sql() for c in self.conditions)])
        return f"NOT EXISTS (SELECT 1 FROM {self.ref.sql()} WHERE {inner})"


@dataclass(frozen=True)
class SqlCondition:
    """`left op right`; on an aggregate it is a HAVING condition."""

    left: Selectable
    op: str
    right: SqlValue | SqlValues | ColumnRef | None  # None for IS NULL / IS NOT NULL; SqlValues for IN / NOT IN

    def sql(self) -> str:
        """As SQL."""
        left = self.left.sql()
        if self.right is None:
            return f"{left} {self.op}"
        op = "<>" if self.op == "!=" else self.op
        return f"{left} {op} {self.right.sql()}"


@dataclass(frozen=True)
class SqlOrdering:
    """ORDER BY one column or aggregate."""

    key: Selectable
    descending: bool


@dataclass(frozen=True)
class SqlDraft:
    """One SELECT under construction; every edit returns a new draft."""

    base: TableRef | None = None
    joins: tuple[SqlJoin, ...] = ()
    unmatched: tuple[SqlJoin, ...] = ()  # anti-joins: keep the rows with no partner (NOT EXISTS)
    conditions: tuple[SqlCondition, ...] = ()
    groups: tuple[ColumnRef | DatePart, ...] = ()
    aggregates: tuple[SqlAggregate, ...] = ()
    order: SqlOrdering | None = None
    limit: int | None = None
    answer: tuple[Selectable, ...] = ()
    # each table's stored columns: a draft that lists no column selects these, not `*`, which also reads generated
    # columns (a virtual `zeroblob(200000000)` column filled 1.5 GB of memory, issue 39)
    columns_of: tuple[tuple[str, tuple[str, ...]], ...] = ()
    distinct: bool = False  # SELECT DISTINCT: a list without repeats

    @property
    def tables(self) -> tuple[TableRef, ...]:
        """The tables in the query, base first."""
        return ((self.base,) if self.base else ()) + tuple(j.ref for j in self.joins)

    def alias_for(self, table: str) -> str:
        """The name a new use of `table` gets: its own, else `table_2`, `table_3` …"""
        taken = {t.alias for t in self.tables} | {j.ref.alias for j in self.unmatched}
        alias, n = table, 2
        while alias in taken:
            alias, n = f"{table}_{n}", n + 1
        return alias

    def with_base(self, table: str) -> SqlDraft:
        """Start from a table (only on an empty draft)."""
        return replace(self, base=TableRef(table, table))

    def with_join(self, join: SqlJoin) -> SqlDraft:
        """One more joined table."""
        return replace(self, joins=(*self.joins, join))

    def without_partner(self, join: SqlJoin) -> SqlDraft:
        """Keep only the rows that have no partner in another table (its columns stay out of the query)."""
        return replace(self, unmatched=(*self.unmatched, join))

    def with_condition(self, condition: SqlCondition) -> SqlDraft:
        """One more condition; on a column of an anti-joined table it goes inside that table's NOT EXISTS."""
        left = condition.left
        if isinstance(left, ColumnRef) and any(j.ref.alias == left.alias for j in self.unmatched):
            unmatched = tuple(replace(j, conditions=(*j.conditions, condition)) if j.ref.alias == left.alias else j
                              for j in self.unmatched)
            return replace(self, unmatched=unmatched)
        return replace(self, conditions=(*self.conditions, condition))

    def with_group(self, column: ColumnRef | DatePart) -> SqlDraft:
        """One more GROUP BY column."""
        return replace(self, groups=(*self.groups, column))

    def with_aggregate(self, aggregate: SqlAggregate) -> SqlDraft:
        """One more aggregate (returned too when the answer's columns are already chosen)."""
        answer = (*self.answer, aggregate) if self.answer else ()
        return replace(self, aggregates=(*self.aggregates, aggregate), answer=answer)

    def with_order(self, order: SqlOrdering | None, limit: int | None) -> SqlDraft:
        """The order and the limit."""
        return replace(self, order=order, limit=limit)

    def with_answer(self, answer: tuple[Selectable, ...], distinct: bool = False) -> SqlDraft:
        """The columns (and aggregates) the query returns, each row once when `distinct`; an aggregate not added
        yet is added."""
        added = tuple(a for a in answer if isinstance(a, SqlAggregate) and a not in self.aggregates)
        return replace(self, answer=answer, distinct=distinct, aggregates=(*self.aggregates, *added))

    def selected(self) -> tuple[Selectable, ...]:
        """What the SELECT lists: the answer when set; else the groups and aggregates; else nothing (every column)."""
        if self.answer:
            return self.answer
        return (*self.groups, *self.aggregates)

    def render(self) -> str:
        """The draft as one SELECT statement."""
        if self.base is None:
            return ""
        chosen = self.selected()
        if chosen:
            listed = ", ".join(s.sql() + (f" AS {quote_name(s.name)}" if not isinstance(s, ColumnRef) else "")
                               for s in chosen)
        else:
            known = dict(self.columns_of)
            if not self.joins and not known.get(self.base.table):
                listed = "*"
            else:
                listed = ", ".join(
                    ", ".join(f"{quote_name(t.alias)}.{quote_name(c)}" for c in known[t.table]) if known.get(t.table)
                    else f"{quote_name(t.alias)}.*" for t in self.tables)
        lines = [f"SELECT {'DISTINCT ' if self.distinct else ''}{listed}", f"FROM {self.base.sql()}"]
        for j in self.joins:
            lines.append(f"JOIN {j.ref.sql()} ON {j.left.sql()} = {j.right.sql()}")
        where = [c.sql() for c in self.conditions if not isinstance(c.left, SqlAggregate)]
        where += [j.not_exists() for j in self.unmatched]
        having = [c.sql() for c in self.conditions if isinstance(c.left, SqlAggregate)]
        if where:
            lines.append("WHERE " + "\n  AND ".join(where))
        grouped = list(self.groups)
        if self.groups or (self.aggregates and chosen and any(isinstance(s, (ColumnRef, DatePart)) for s in chosen)):
            # A plain column beside an aggregate is grouped by, so the statement runs on PostgreSQL too.
            grouped += [s for s in chosen if isinstance(s, (ColumnRef, DatePart)) and s not in grouped]
        if grouped:
            lines.append("GROUP BY " + ", ".join(c.sql() for c in grouped))
        if having:
            lines.append("HAVING " + "\n  AND ".join(having))
        if self.order is not None:
            key = self.order.key
            shown = quote_name(key.name) if not isinstance(key, ColumnRef) and key in chosen else key.sql()
            lines.append(f"ORDER BY {shown} {'DESC' if self.order.descending else 'ASC'}")
        if self.limit is not None:
            lines.append(f"LIMIT {self.limit}")
        return "\n".join(lines)
