"""The SQL builder's step functions (QueryAgent's transfer to SQL, queryagent.txt §5), declared with the shared
`tool()` machinery like the SPARQL builder's (`builder/tools.py`): tools over the schema and the data (tables,
columns with types, values of a column, foreign keys) and edits of one SELECT (a table, a join, a condition, a
group, an aggregate, an order and limit, the answer's columns) and an undo of the last kept edit. After every edit
the SELECT runs through `sparqlnav.sql.run_sql` (read-only, bounded) and the observation shows its first rows; an
edit after which it fails or returns nothing is not kept. The run's `SqlBuilder` is the keyword-only hook `builder`, never shown to a
model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import Field

from sparqlnav.feedback.view import SqlStepRun
from sparqlnav.graph.direct_mapping import Table
from sparqlnav.graph.relational import Database
from sparqlnav.sql import SqlResult
from sparqlnav.sql.draft import (
    DATE_PARTS,
    FUNCTIONS,
    LISTS,
    OPERATORS,
    UNARY,
    ColumnRef,
    DatePart,
    Selectable,
    SqlAggregate,
    SqlCondition,
    SqlDraft,
    SqlJoin,
    SqlOrdering,
    SqlValue,
    SqlValues,
    TableRef,
    quote_literal,
    quote_name,
    quote_table,
)
from sparqlnav.sql.executor import Caps
from sparqlnav.sql.run import run_traced
from sparqlnav.sql.values import Place, TextColumn, stored_in
from sparqlnav.tools.registry import Registry, tool
from sparqlnav.tools.toolkit import Observation, Toolkit
from sparqlnav.trace import Trace

SHOWN_ROWS = 5
SHOWN_VALUES = 12  # distinct values get_values lists
NUMBER_KINDS = frozenset({"integer", "decimal", "double"})


@dataclass(frozen=True)
class SqlEdit:
    """What one edit did: the run of the edited SELECT (kept or not), its rows, and what the edit resolved (for
    the feedback: the columns compared, the answer's columns, the first table's rows)."""

    run: SqlStepRun
    result: SqlResult | None
    compared: tuple[str, str, str, str] | None = None
    answer: tuple[str, ...] = ()
    base_rows: int | None = None
    shared: tuple[int, int] | None = None  # a join that returned nothing: rows meeting a partner, as stored/trimmed
    elsewhere: tuple[Place, ...] = ()  # a condition's text that matched nothing: other columns that hold it


class SqlBuilder:
    """One run's SELECT under construction over one database, with its schema."""

    def __init__(self, database: Database, tables: Sequence[Table], trace: Trace, caps: Caps) -> None:
        self.database = database
        self.tables = {t.name: t for t in tables}
        self.trace = trace
        self.caps = caps
        # a table with generated columns is previewed by its stored ones: `SELECT *` computes the others (issue 39)
        self.draft = SqlDraft(columns_of=tuple((t.name, tuple(c.name for c in t.columns))
                                               for t in self.tables.values() if t.hidden))
        self.last: SqlEdit | None = None  # the latest kept run
        self._kept: list[tuple[SqlDraft, SqlEdit | None, str]] = []  # before each kept edit: draft, run, what
        self.finished = False
        self.tie: str | None = None  # at execute: rows tied on an order key the answer does not return
        self._counts: dict[str, int | None] = {}

    @property
    def column_kinds(self) -> dict[str, dict[str, str]]:
        """Table → column → the kind its declared type names."""
        return {t.name: {c.name: c.kind for c in t.columns} for t in self.tables.values()}

    # ------------------------------------------------------------ running

    def run_sql(self, sql: str, *, purpose: str = "draft") -> tuple[SqlResult | None, str | None]:
        """Run one SELECT (recorded as a `sql` event); the result, or the error's one line."""
        return run_traced(self.database, sql, self.caps, self.trace, purpose=purpose)

    def row_count(self, table: str) -> int | None:
        """How many rows a table has (asked once)."""
        if table not in self._counts:
            result, _ = self.run_sql(f"SELECT COUNT(*) FROM {quote_table(table)}", purpose="row count")
            self._counts[table] = int(str(result.rows[0][0])) if result and result.rows else None
        return self._counts[table]

    # ------------------------------------------------------------ schema and data

    def get_tables(self) -> Observation:
        """Every table with its rows, columns and types, key and foreign keys."""
        lines = [f"{len(self.tables)} table(s):"]
        for t in self.tables.values():
            rows = self.row_count(t.name)
            lines.append(f"- {t.name} ({'?' if rows is None else rows} rows): {self._columns_line(t)}")
        return Observation("\n".join(lines), tuple(self.tables))

    def _columns_line(self, t: Table) -> str:
        parts = []
        for c in t.columns:
            extra = " key" if c.name in t.key else ""
            fk = next((f for f in t.foreign_keys if c.name in f.columns), None)
            if fk is not None:
                extra += f" → {fk.target}.{fk.referenced[fk.columns.index(c.name)]}"
            parts.append(f"{c.name} {c.kind}{extra}")
        return ", ".join(parts)

    def get_columns(self, table: str) -> Observation:
        """One table's columns with their types, and the foreign keys from and to it."""
        found = self.tables.get(table.strip())
        if found is None:
            return self._no_table(table)
        lines = [f"{found.name} ({self.row_count(found.name)} rows):"]
        for c in found.columns:
            declared = f" ({c.declared})" if c.declared else ""
            lines.append(f"  {c.name}: {c.kind}{declared}{' — primary key' if c.name in found.key else ''}")
        lines += self._links(found.name)
        return Observation("\n".join(lines), found)

    def _links(self, table: str | None = None) -> list[str]:
        out = []
        for t in self.tables.values():
            for fk in t.foreign_keys:
                if table is None or table in (t.name, fk.target):
                    pairs = ", ".join(f"{t.name}.{a} = {fk.target}.{b}" for a, b in zip(fk.columns, fk.referenced,
                                                                                       strict=True))
                    out.append(f"  join: {pairs}")
        return out

    def get_foreign_keys(self) -> Observation:
        """Every foreign key: which columns join which tables."""
        links = self._links()
        text = "Foreign keys (join along them with add_join):\n" + "\n".join(links) if links else (
            "The database declares no foreign key: join on columns whose values match (look with get_values).")
        return Observation(text, links)

    def get_values(self, column: str, containing: str = "") -> Observation:
        """The most frequent values of a column (those containing a text, when given), with counts, and its range."""
        ref = self._column(column, anywhere=True)
        if isinstance(ref, str):
            return Observation(ref, None, ok=False)
        col, table = ref.sql(), quote_table(self.tables[self._table_of(ref)].name)
        alias = quote_name(ref.alias)
        where = ""
        if containing.strip():
            pattern = "'%" + containing.strip().lower().replace("'", "''") + "%'"
            where = f" WHERE LOWER(CAST({col} AS TEXT)) LIKE {pattern}"
        frequent = (f"SELECT {col}, COUNT(*) AS n FROM {table} AS {alias}{where} GROUP BY {col} "
                    f"ORDER BY n DESC, {col} LIMIT {SHOWN_VALUES}")
        # How many distinct values the list is drawn from (NULL is one of the listed, not of COUNT DISTINCT).
        text = f"CAST({col} AS TEXT)"
        summary = (f"SELECT COUNT(DISTINCT {col}), COUNT({col}), COUNT(*), MIN({col}), MAX({col}), "
                   f"(SELECT COUNT(DISTINCT {col}) + MAX(CASE WHEN {col} IS NULL THEN 1 ELSE 0 END) "
                   f"FROM {table} AS {alias}{where}), "
                   f"SUM(CASE WHEN {text} <> TRIM({text}) THEN 1 ELSE 0 END) FROM {table} AS {alias}")
        listed, error = self.run_sql(frequent, purpose="values")
        totals, error2 = self.run_sql(summary, purpose="values")
        if listed is None or totals is None:
            return Observation(f"get_values failed: {error or error2}", None, ok=False)
        distinct, filled, rows, low, high, matching, spaced = totals.rows[0]
        kind = self.column_kinds[self._table_of(ref)].get(ref.column, "")
        # Text columns too: the smallest and largest say how values are written (codes, dates as text, case).
        head = (f"{ref.shown} ({kind}): {distinct} distinct value(s) in {filled} of {rows} rows"
                + (f"; from {_shown(low)} to {_shown(high)}" if filled else ""))
        if int(str(spaced or 0)):  # '  FR' never equals 'FR': a comparison or a join must take the value as stored
            head += (f"\n{spaced} value(s) are stored with spaces before or after them (as the quotes show): compare "
                     "with them as stored, or with LIKE.")
        if not listed.rows:
            return Observation(head + (f"\nNo value contains {containing!r}." if where else ""), listed)
        what = f"Values containing {containing!r}" if where else "Most frequent values"
        values = ", ".join(f"{_shown(v)} ×{n}" for v, n in listed.rows)
        more = int(str(matching or 0)) - len(listed.rows)
        if more > 0:
            values += f" … and {more} more value(s)" + ("" if where else " (get_values with containing finds one)")
        return Observation(f"{head}\n{what}: {values}", listed)

    # ------------------------------------------------------------ resolving names

    def _no_table(self, table: str) -> Observation:
        return Observation(f"there is no table {table!r}; the tables are {', '.join(self.tables)}", None, ok=False)

    def _table_of(self, ref: ColumnRef) -> str:
        for t in (*self.draft.tables, *(j.ref for j in self.draft.unmatched)):
            if t.alias == ref.alias:
                return t.table
        return ref.alias  # a table outside the query, named as itself (get_values)

    def _column(self, text: str, *, anywhere: bool = False) -> ColumnRef | str:
        """`alias.column` or a `column` only one table of the query has (`anywhere`: any table of the database);
        else why not, in one line."""
        raw = text.strip().strip('"')
        # An anti-joined table is named too: a condition on it goes inside its NOT EXISTS.
        in_query = {t.alias: t.table for t in (*self.draft.tables, *(j.ref for j in self.draft.unmatched))}
        scope = {**({t: t for t in self.tables} if anywhere else {}), **in_query}
        alias, dot, name = raw.rpartition(".")
        if dot:
            alias = alias.strip('"')
            name = name.strip('"')
            if alias not in scope:
                if alias in self.tables:
                    return f"{alias} is not in the query yet: add it with add_join first"
                return f"there is no table {alias!r} in the query (tables: {', '.join(scope) or 'none yet'})"
            table = self.tables[scope[alias]]
            if name not in {c.name for c in table.columns}:
                return f"{table.name} has no column {name!r}; its columns: {', '.join(c.name for c in table.columns)}"
            return ColumnRef(alias, name)
        owners = [a for a, t in scope.items() if raw in {c.name for c in self.tables[t].columns}]
        if len(owners) == 1:
            return ColumnRef(owners[0], raw)
        if not owners:
            return f"no table {'of the query ' if not anywhere else ''}has a column {raw!r}: write table.column"
        return f"{raw!r} is a column of {', '.join(owners)}: write which, as table.column"

    def _selectable(self, text: str) -> Selectable | str:
        """A column of the query, or one of its aggregates by name (count_rows, avg_salary …)."""
        raw = text.strip()
        for a in self.draft.aggregates:
            if raw.lower() in (a.name, a.sql().lower()):
                return a
        for d in (*self.draft.groups, *self.draft.answer):
            if isinstance(d, DatePart) and "".join(raw.lower().split()) in (d.name, d.shown.lower()):
                return d
        return self._new_aggregate(raw) or self._column(raw)

    def _new_aggregate(self, raw: str) -> SqlAggregate | None:
        """An aggregate named as its result column (sum_amount, count_rows, count_distinct_id) though not added."""
        fn, _, rest = raw.strip().lower().partition("_")
        if fn not in FUNCTIONS or not rest:
            return None
        if fn == "count" and rest == "rows":
            return SqlAggregate("count", None)
        distinct = rest.startswith("distinct_")
        name = rest.removeprefix("distinct_") if distinct else rest
        found = [self._column(f"{t.alias}.{c.name}") for t in self.draft.tables for c in self.tables[t.table].columns
                 if c.name.lower() == name]
        refs = [f for f in found if isinstance(f, ColumnRef)]
        return SqlAggregate(fn, refs[0], distinct) if len(refs) == 1 and (fn == "count" or not distinct) else None

    def _part(self, column: str, part: str) -> ColumnRef | DatePart | str:
        """A column, or its year or month (`part`), else why not."""
        ref = self._column(column)
        if isinstance(ref, str) or not part.strip():
            return ref
        name = part.strip().lower()
        if name not in DATE_PARTS:
            return f"part is {' or '.join(DATE_PARTS)}, not {part!r}"
        return DatePart(ref, name, self.database.kind)  # checked against DATE_PARTS

    def _kind(self, ref: Selectable) -> str:
        if isinstance(ref, DatePart):
            return "integer"
        if isinstance(ref, SqlAggregate):
            if ref.function in ("count", "sum", "avg") or ref.column is None:
                return "decimal"
            return self._kind(ref.column)
        return self.column_kinds.get(self._table_of(ref), {}).get(ref.column, "")

    # ------------------------------------------------------------ edits

    def add_table(self, table: str) -> Observation:
        """Start the query from a table."""
        found = self.tables.get(table.strip())
        if found is None:
            return self._no_table(table)
        if self.draft.base is not None:
            return Observation(f"the query already starts from {self.draft.base.table}: add more tables with add_join",
                               None, ok=False)
        return self._apply(self.draft.with_base(found.name), "table")

    def add_join(self, from_column: str, to_column: str, keep: str = "matched") -> Observation:
        """Join a table on `from_column = to_column` (`to_column` a column of the table joined, or just that
        table's name when one foreign key links it to the query); `keep="unmatched"` keeps instead the rows that
        have no such partner (NOT EXISTS), and the table's columns stay out of the query."""
        way = keep.strip().lower() or "matched"
        if way not in ("matched", "unmatched"):
            return Observation(f"keep is matched or unmatched, not {keep!r}", None, ok=False)
        if self.draft.base is None:
            return Observation("the query has no table yet: start with add_table", None, ok=False)
        target = to_column.strip()
        table, dot, column = target.rpartition(".")
        if not dot:
            table, column = target, ""
        table = table.strip('"')
        if table not in self.tables:
            return self._no_table(table)
        left: ColumnRef | str
        if column:
            left = self._column(from_column)
        else:  # a foreign key between the query and the table names the columns
            found = self._foreign_key_to(table, from_column)
            if isinstance(found, str):
                return Observation(found, None, ok=False)
            left, column = found
        if isinstance(left, str):
            return Observation(left, None, ok=False)
        if column not in {c.name for c in self.tables[table].columns}:
            return Observation(f"{table} has no column {column!r}", None, ok=False)
        alias = self.draft.alias_for(table)
        join = SqlJoin(TableRef(table, alias), left, ColumnRef(alias, column))
        if way == "unmatched":
            return self._without_partner(join)
        base = self.draft.base.table
        obs = self._apply(self.draft.with_join(join), "join")
        note = f"\n{table} joins as {alias}: write its columns as {alias}.column." if alias != table else ""
        if isinstance(obs.value, SqlEdit):  # the first table's rows tell a join that multiplies them
            shared = self._shared(left, ColumnRef(alias, column)) if obs.value.run.rows == 0 else None
            if shared is not None and shared[0] == 0:
                note += f"\n{left.shown} and {table}.{column} share no stored value" + (
                    f"; {shared[1]} row(s) would meet a partner with the spaces around the values trimmed: one side "
                    "stores them with spaces (look with get_values)." if shared[1] else
                    ": they do not hold the same thing (look at both with get_values).")
            edit = SqlEdit(obs.value.run, obs.value.result, base_rows=self.row_count(base), shared=shared)
            return Observation(obs.text + note, edit, ok=obs.ok)
        return obs

    def _without_partner(self, join: SqlJoin) -> Observation:
        """An anti-join. Kept even when every row has a partner: only a condition on the partner (added next, inside
        the NOT EXISTS) says which partners count ("countries that do not speak French")."""
        draft = self.draft.without_partner(join)
        sql = draft.render()
        result, error = self.run_sql(sql)
        alias = join.ref.alias
        said = (f"\nOnly a partner in {alias} meeting a condition should count (\"do not speak French\")? "
                f"add_condition on {alias}.column puts it inside the NOT EXISTS.")
        if result is None:
            edit = SqlEdit(SqlStepRun(sql, None, error, kept=False), result)
            return Observation(self._run_text(edit) + "\nThe join was not kept.", edit)
        self._kept.append((self.draft, self.last, f"rows without a partner in {join.ref.table}"))
        self.draft = draft
        edit = SqlEdit(SqlStepRun(sql, len(result.rows), None), result)
        if not result.rows:  # kept, but not the best query so far: `last` stays the previous one
            return Observation(self._run_text(edit) + f"\nKept for now, though every row has a partner in {alias}."
                               + said + " Or undo it.", edit)
        self.last = edit
        return Observation(self._run_text(edit) + said, edit)

    def _shared(self, left: ColumnRef, right: ColumnRef) -> tuple[int, int] | None:
        """How many rows of `left`'s table meet a partner on `right`'s column: as stored, and with spaces trimmed."""
        near, far = quote_table(self._table_of(left)), quote_table(self._table_of(right))
        a, b = f"{quote_name('l')}.{quote_name(left.column)}", f"{quote_name('r')}.{quote_name(right.column)}"
        sql = (f"SELECT (SELECT COUNT(*) FROM {near} AS \"l\" WHERE {a} IN (SELECT {b} FROM {far} AS \"r\")), "
               f"(SELECT COUNT(*) FROM {near} AS \"l\" WHERE TRIM(CAST({a} AS TEXT)) IN "
               f"(SELECT TRIM(CAST({b} AS TEXT)) FROM {far} AS \"r\"))")
        result, _ = self.run_sql(sql, purpose="join values")
        if result is None or not result.rows:
            return None
        return int(str(result.rows[0][0])), int(str(result.rows[0][1]))

    def _foreign_key_to(self, table: str, hint: str) -> tuple[ColumnRef, str] | str:
        options: list[tuple[ColumnRef, str]] = []
        for ref in self.draft.tables:
            t = self.tables[ref.table]
            for fk in t.foreign_keys:  # the query's table refers to the new one
                if fk.target == table and len(fk.columns) == 1:
                    options.append((ColumnRef(ref.alias, fk.columns[0]), fk.referenced[0]))
            for fk in self.tables[table].foreign_keys:  # the new table refers to the query's
                if fk.target == ref.table and len(fk.columns) == 1:
                    options.append((ColumnRef(ref.alias, fk.referenced[0]), fk.columns[0]))
        options = list(dict.fromkeys(options))  # a foreign key the schema declares twice is one way to join
        if hint.strip():
            chosen = self._column(hint)
            options = [o for o in options if o[0] == chosen]
        if len(options) == 1:
            return options[0]
        if not options:
            return f"no foreign key links {table} to the query: name both columns, from_column and {table}.column"
        listed = "; ".join(f"{a.shown} = {table}.{b}" for a, b in options)
        return f"several foreign keys link {table} to the query ({listed}): name the columns"

    def add_condition(self, column: str, op: str, value: Any = None, part: str = "") -> Observation:
        """Keep the rows where `column op value` holds (a condition on an aggregate keeps groups; `part`: on the
        year or month of a date column)."""
        if self.draft.base is None:
            return Observation("the query has no table yet: start with add_table", None, ok=False)
        left = self._part(column, part) if part.strip() else self._selectable(column)
        if isinstance(left, str):
            return Observation(left, None, ok=False)
        op = " ".join(op.upper().split()) if op.strip().isalpha() or " " in op.strip() else op.strip()
        op = "!=" if op == "<>" else op
        if op not in OPERATORS:
            return Observation(f"unknown operator {op!r}: use one of {', '.join(OPERATORS)}", None, ok=False)
        kind = self._kind(left)
        right: SqlValue | SqlValues | ColumnRef | None = None
        value_kind = ""
        if op in LISTS:
            listed = _as_list(value)
            if not listed:
                return Observation(f"{op} needs a list of values, e.g. [\"a\", \"b\"]", None, ok=False)
            values = tuple(self._literal(v, kind) for v in listed)
            right = SqlValues(values)
            value_kind = "decimal" if all(v.is_number for v in values) else "string"
        elif op not in UNARY:
            if value is None or (isinstance(value, str) and not value.strip()):
                return Observation(f"{op} needs a value", None, ok=False)
            right = self._value(value, kind)
            value_kind = self._kind(right) if isinstance(right, ColumnRef) else (
                "decimal" if right.is_number else "string")
        compared = (left.column.shown if isinstance(left, DatePart) else left.shown, kind, op, value_kind)
        obs = self._apply(self.draft.with_condition(SqlCondition(left, op, right)), "condition")
        if isinstance(obs.value, SqlEdit):
            elsewhere: tuple[Place, ...] = ()
            if obs.value.run.rows == 0 and op == "=" and isinstance(right, SqlValue) and not right.is_number:
                elsewhere = self._stored_elsewhere(str(right.value), left)
            note = "".join(f"\n{quote_literal(p.stored.strip())} is stored in {p.shown} (as {quote_literal(p.stored)}): "
                           "is that the column the question means?" for p in elsewhere)
            return Observation(obs.text + note, SqlEdit(obs.value.run, obs.value.result, compared=compared,
                                                         elsewhere=elsewhere), ok=obs.ok)
        return obs

    def _stored_elsewhere(self, text: str, compared: Selectable) -> tuple[Place, ...]:
        """Other text columns of the database that hold `text` ("Young" a doctor's last name, not a patient's)."""
        if not isinstance(compared, ColumnRef):
            return ()
        table = next((t.table for t in self.draft.tables if t.alias == compared.alias), compared.alias)
        columns = [TextColumn(t.name, c.name, self.row_count(t.name)) for t in self.tables.values()
                   for c in t.columns if c.kind in ("string", "untyped") and (t.name, c.name) != (table, compared.column)]
        return tuple(stored_in(self.database, columns, text, limit=2))

    def _literal(self, value: Any, kind: str) -> SqlValue:
        """One value of a list: a number or a text, never a column."""
        found = self._value(value, kind)
        return found if isinstance(found, SqlValue) else SqlValue(str(value))

    def _value(self, value: Any, kind: str) -> SqlValue | ColumnRef:
        """A value as the model wrote it: a JSON number is a number; a text in quotes is a text; a text naming a
        column of the query (alias.column) is that column; a text that reads as a number is one for a number column."""
        if isinstance(value, bool):
            return SqlValue(int(value))
        if isinstance(value, (int, float)):
            return SqlValue(value)
        text = str(value)
        stripped = text.strip()
        if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
            return SqlValue(stripped[1:-1])
        if "." in stripped and not _number(stripped):
            ref = self._column(stripped)
            if isinstance(ref, ColumnRef):
                return ref
        number = _number(stripped)
        if number is not None and kind in NUMBER_KINDS:
            return SqlValue(number)
        return SqlValue(text)

    def add_group(self, column: str, part: str = "") -> Observation:
        """Group the rows by a column (`part`: by the year or month of a date column)."""
        ref = self._part(column, part)
        if isinstance(ref, str):
            return Observation(ref, None, ok=False)
        if ref in self.draft.groups:
            return Observation(f"the query already groups by {ref.shown}", None, ok=False)
        obs = self._apply(self.draft.with_group(ref), "group")
        if isinstance(ref, DatePart) and obs.ok and isinstance(obs.value, SqlEdit) and obs.value.run.kept:
            return Observation(obs.text + f"\nIts column is {ref.name}: order by or answer with that name.", obs.value)
        return obs

    def add_aggregate(self, function: str, column: str = "*", distinct: bool = False) -> Observation:
        """Add COUNT/SUM/AVG/MIN/MAX of a column (COUNT of rows for `*`)."""
        fn = function.strip().lower()
        if fn not in FUNCTIONS:
            return Observation(f"unknown function {function!r}: use one of {', '.join(FUNCTIONS)}", None, ok=False)
        if self.draft.base is None:
            return Observation("the query has no table yet: start with add_table", None, ok=False)
        ref: ColumnRef | None = None
        if column.strip() not in ("", "*"):
            found = self._column(column)
            if isinstance(found, str):
                return Observation(found, None, ok=False)
            ref = found
        elif fn != "count":
            return Observation(f"{fn} needs a column", None, ok=False)
        aggregate = SqlAggregate(fn, ref, bool(distinct) and ref is not None)
        if aggregate in self.draft.aggregates:
            return Observation(f"the query already has {aggregate.name}", None, ok=False)
        return self._apply(self.draft.with_aggregate(aggregate), "aggregate")

    def set_order(self, by: str, direction: str = "asc", limit: int = 0) -> Observation:
        """Order the rows by a column or an aggregate, and keep the first `limit` (0: all)."""
        key = self._selectable(by)
        if isinstance(key, str):
            return Observation(key, None, ok=False)
        way = direction.strip().lower()
        if way not in ("asc", "desc"):
            return Observation("direction is asc or desc", None, ok=False)
        try:
            n = int(limit)
        except (TypeError, ValueError):
            return Observation(f"limit must be a whole number, not {limit!r}", None, ok=False)
        if n < 0:
            return Observation("limit must be 0 (no limit) or more", None, ok=False)
        return self._apply(self.draft.with_order(SqlOrdering(key, way == "desc"), n or None), "order")

    def set_answer_columns(self, columns: Sequence[str], distinct: bool = False) -> Observation:
        """Make the query return these columns and aggregates, in this order (each row once when `distinct`)."""
        if isinstance(columns, str):
            columns = [c for c in columns.split(",") if c.strip()]
        chosen: list[Selectable] = []
        for text in columns:
            found = self._selectable(str(text))
            if isinstance(found, str):
                return Observation(found, None, ok=False)
            if found not in chosen:
                chosen.append(found)
        if not chosen:
            return Observation("name at least one column", None, ok=False)
        obs = self._apply(self.draft.with_answer(tuple(chosen), bool(distinct)), "answer")
        if isinstance(obs.value, SqlEdit):
            shown = tuple(c.shown for c in chosen if isinstance(c, ColumnRef))
            return Observation(obs.text, SqlEdit(obs.value.run, obs.value.result, answer=shown), ok=obs.ok)
        return obs

    def execute(self) -> Observation:
        """Finish when the query runs and returns something."""
        if self.draft.base is None:
            return Observation("the query has no table yet: start with add_table", None, ok=False)
        sql = self.draft.render()
        result, error = self.run_sql(sql)
        edit = SqlEdit(SqlStepRun(sql, None if result is None else len(result.rows), error), result)
        if result is None or not result.rows:
            return Observation(self._run_text(edit) + "\nNot finished: the query must return the answer.", edit,
                               ok=False)
        self.last, self.finished = edit, True
        self.tie = self._tie()
        said = f"\n{self.tie}" if self.tie else ""
        return Observation(self._run_text(edit) + said + "\nDone: this query is the final answer.", edit)

    def _tie(self) -> str | None:
        """When the rows are ordered by a key the answer does not return: how many rows share the first key's value,
        and how many of them the limit kept (the answer writer's rule on ties needs it; it sees only the answer)."""
        d = self.draft
        if d.order is None or not d.answer or d.order.key in d.answer:
            return None
        probe = d.with_answer((*d.answer, d.order.key), d.distinct).with_order(d.order, None)
        result, _ = self.run_sql(probe.render(), purpose="ties")
        if result is None or not result.rows or result.truncated:
            return None
        first = result.rows[0][-1]
        tied = sum(1 for row in result.rows if row[-1] == first)
        if tied < 2:
            return None
        kept = min(tied, d.limit) if d.limit is not None else tied
        cut = f"; the limit of {d.limit} returns {kept} of them" if kept < tied else ""
        return (f"The rows are ordered by {d.order.key.shown}, which the answer does not return: {tied} rows share "
                f"its {'largest' if d.order.descending else 'smallest'} value, {_shown(first)}, so they tie{cut}.")

    def undo(self) -> Observation:
        """Take back the last kept edit: the query is as it was before it."""
        if not self._kept:
            return Observation("there is no kept step to undo", None, ok=False)
        self.draft, self.last, what = self._kept.pop()
        if self.last is None:
            return Observation(f"Undone: the {what}. The query is empty again: start with add_table.", None)
        return Observation(f"Undone: the {what}. The query is again:\n" + self._run_text(self.last), self.last)

    def _apply(self, draft: SqlDraft, what: str) -> Observation:
        sql = draft.render()
        result, error = self.run_sql(sql)
        rows = None if result is None else len(result.rows)
        if result is None or not result.rows:  # not kept: every kept edit leaves a query that returns rows
            edit = SqlEdit(SqlStepRun(sql, rows, error, kept=False), result)
            note = f"\nThe {what} was not kept: the query went back to its previous version."
            return Observation(self._run_text(edit) + note, edit)
        self._kept.append((self.draft, self.last, what))
        self.draft = draft
        self.last = SqlEdit(SqlStepRun(sql, rows, None), result)
        return Observation(self._run_text(self.last), self.last)

    @staticmethod
    def _run_text(edit: SqlEdit) -> str:
        out = [f"SQL:\n{edit.run.sql}"]
        result = edit.result
        if result is None:
            return "\n".join([*out, f"It failed — {edit.run.error}"])
        if not result.rows:
            return "\n".join([*out, "It returned no rows."])
        more = " (cut at the cap)" if result.truncated else ""
        out.append(f"It returned {len(result.rows)} row(s){more}:")
        out.append(markdown(result, SHOWN_ROWS))
        return "\n".join(out)


def markdown(result: SqlResult, head: int) -> str:
    """The first rows as a Markdown table (and how many more there are)."""
    lines = ["| " + " | ".join(result.columns) + " |", "|" + "---|" * len(result.columns)]
    for row in result.rows[:head]:
        lines.append("| " + " | ".join(_shown(v).replace("|", "\\|") for v in row) + " |")
    if len(result.rows) > head:
        lines.append(f"… {len(result.rows) - head} more row(s)")
    return "\n".join(lines)


def _shown(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return repr(value) if len(value) <= 80 else repr(value[:77] + "...")
    return str(value)


def _as_list(value: Any) -> list[Any]:
    """An IN list as the model sent it: a JSON list, or a text of comma-separated values."""
    if isinstance(value, (list, tuple)):
        return [v for v in value if v is not None and str(v).strip()]
    if isinstance(value, str):
        return [v.strip() for v in value.strip().strip("()[]").split(",") if v.strip()]
    return [] if value is None else [value]


def _number(text: str) -> int | Decimal | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


# -- the tools, as models see them ----------------------------------------------------------------

Hook = SqlBuilder | None
_NO_BUILDER = Observation("this tool edits a SQL query under construction; only the build strategy holds one", None,
                          ok=False)
ColumnArg = Annotated[str, Field(description="a column as table.column (a table of the query, or as add_join named it)")]


def get_tables(kit: Toolkit, *, builder: Hook = None) -> Observation:
    """List every table with its number of rows and its columns: type, primary key, and → for a foreign key."""
    return builder.get_tables() if builder else _NO_BUILDER


def get_columns(
    kit: Toolkit, table: Annotated[str, Field(description="a table's name")], *, builder: Hook = None
) -> Observation:
    """Show one table's columns with their types and primary key, and the foreign keys from and to it."""
    return builder.get_columns(table) if builder else _NO_BUILDER


def get_values(
    kit: Toolkit,
    column: Annotated[str, Field(description="a column as table.column")],
    containing: Annotated[str, Field(description="only values containing this text (any case); empty: all")] = "",
    *,
    builder: Hook = None,
) -> Observation:
    """Show how a column's values are stored: the most frequent ones with counts (or those containing a text),
    how many distinct values it has, and its smallest and largest."""
    return builder.get_values(column, containing) if builder else _NO_BUILDER


def get_foreign_keys(kit: Toolkit, *, builder: Hook = None) -> Observation:
    """List the foreign keys: which column of which table joins which column of another."""
    return builder.get_foreign_keys() if builder else _NO_BUILDER


def add_table(
    kit: Toolkit, table: Annotated[str, Field(description="the table the question is about")], *, builder: Hook = None
) -> Observation:
    """Start the query from a table (its rows are what the query returns until you choose columns) and run it."""
    return builder.add_table(table) if builder else _NO_BUILDER


def add_join(
    kit: Toolkit,
    to_column: Annotated[str, Field(description="the column of the table to join, as table.column (or only the table's name, to join along its foreign key)")],
    from_column: Annotated[str, Field(description="the column of the query so far it equals, as table.column (leave it out to join along a foreign key)")] = "",
    keep: Annotated[str, Field(description="matched (the rows with a partner, joined) or unmatched (only the rows with no partner there: 'never', 'without any')")] = "matched",
    *,
    builder: Hook = None,
) -> Observation:
    """Join another table where to_column = from_column, and run the query. A table joined a second time gets a
    new name (employees_2), which the observation says. keep="unmatched" keeps instead the rows with no partner."""
    return builder.add_join(from_column, to_column, keep) if builder else _NO_BUILDER


def add_condition(
    kit: Toolkit,
    column: ColumnArg,
    op: Annotated[str, Field(description="one of = != < <= > >= LIKE, NOT LIKE, IN, NOT IN, IS NULL, IS NOT NULL")],
    value: Annotated[str | float | list[str | float] | None, Field(description="a number, a text as stored ('%' for any text in LIKE), another column as table.column, or a list for IN / NOT IN; nothing for IS NULL")] = None,
    part: Annotated[str, Field(description="year or month: compare that part of a date column, as a number; empty: the column itself")] = "",
    *,
    builder: Hook = None,
) -> Observation:
    """Keep only the rows where `column op value` holds, and run the query. On an aggregate (count_rows,
    avg_price …) it keeps the groups where it holds."""
    return builder.add_condition(column, op, value, part) if builder else _NO_BUILDER


def add_group(
    kit: Toolkit,
    column: ColumnArg,
    part: Annotated[str, Field(description="year or month: group by that part of a date column; empty: the column itself")] = "",
    *,
    builder: Hook = None,
) -> Observation:
    """Group the rows by a column (one row per value), for aggregates per group, and run the query."""
    return builder.add_group(column, part) if builder else _NO_BUILDER


def add_aggregate(
    kit: Toolkit,
    function: Annotated[str, Field(description="count, sum, avg, min or max")],
    column: Annotated[str, Field(description="a column as table.column; * counts rows")] = "*",
    distinct: Annotated[bool, Field(description="count each distinct value once")] = False,
    *,
    builder: Hook = None,
) -> Observation:
    """Add an aggregate (per group when the query groups) and run the query; its result column is named like
    count_rows, count_distinct_id or avg_salary."""
    return builder.add_aggregate(function, column, distinct) if builder else _NO_BUILDER


def set_order(
    kit: Toolkit,
    by: Annotated[str, Field(description="a column as table.column, or an aggregate's name (count_rows)")],
    direction: Annotated[str, Field(description="asc (smallest first) or desc (largest first)")] = "asc",
    limit: Annotated[int, Field(description="keep only the first rows (0: all)")] = 0,
    *,
    builder: Hook = None,
) -> Observation:
    """Order the rows and keep the first `limit` of them (the largest: desc with limit 1), and run the query."""
    return builder.set_order(by, direction, limit) if builder else _NO_BUILDER


def set_answer_columns(
    kit: Toolkit,
    columns: Annotated[list[str], Field(description="the columns (table.column) and aggregates (count_rows, sum_amount) the answer needs, in order")],
    distinct: Annotated[bool, Field(description="return each row once (a list without repeats)")] = False,
    *,
    builder: Hook = None,
) -> Observation:
    """Make the query return only these columns (an aggregate named here is added), and run it."""
    return builder.set_answer_columns(columns, distinct) if builder else _NO_BUILDER


def undo(kit: Toolkit, *, builder: Hook = None) -> Observation:
    """Take back the last kept step (a wrong table, join, condition …): the query is as it was before it."""
    return builder.undo() if builder else _NO_BUILDER


def execute(kit: Toolkit, *, builder: Hook = None) -> Observation:
    """Finish: the current query becomes the final answer. Call it once the query returns the answer."""
    return builder.execute() if builder else _NO_BUILDER


# Names and arguments are a contract (docs/design.md).
SQL_BUILD_TOOLS: Registry = Registry(
    tool(fn)
    for fn in (get_tables, get_columns, get_values, get_foreign_keys, add_table, add_join, add_condition, add_group,
               add_aggregate, set_order, set_answer_columns, undo, execute)
)
"""What the build strategy offers the model for a SQL target."""
