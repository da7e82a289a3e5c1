"""The SQL writer: retrieve's sibling for databases (issue 35). One request writes the SQL, with no tools: the
tables that matter ranked against the question (the rest by name), their columns with real values from the live
database (`sql.introspect`, read without copying anything), what the question names looked up in the data (which
column holds a town's name, stored with a trailing space), the dialect. The statement runs read-only and bounded
(`sql.run_sql`); an error, an empty result or an answer of the wrong shape goes back once for a fix; then the
answer writer (`ending.finish`) words the rows. `auto` on a database runs it first and the step-by-step builder
after it when its answer is not to be trusted."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from string import Template
from typing import Any

from sparqlnav.answer import Answer, Strategy
from sparqlnav.context import EMPTY, RunContext
from sparqlnav.graph.direct_mapping import Table
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.relational import Database, relational_of
from sparqlnav.graph.results import ResultTable
from sparqlnav.llm import LLMClient, LLMConfig, Message
from sparqlnav.llm.usage import trace_recorder
from sparqlnav.question.fit import projection_mismatch
from sparqlnav.question.intent import analyse
from sparqlnav.question.linking import find_mentions
from sparqlnav.question.words import stem, tokenize
from sparqlnav.retrieval.sql_examples import SqlExample, closest_sql_examples, kept_sql_examples
from sparqlnav.settings import Settings
from sparqlnav.sql.draft import quote_literal, quote_name
from sparqlnav.sql.executor import Caps
from sparqlnav.sql.introspect import (
    SAMPLE_ROWS,
    ColumnProfile,
    DatabaseProfile,
    TableProfile,
    profile_database,
)
from sparqlnav.sql.results import result_table
from sparqlnav.sql.run import run_traced
from sparqlnav.sql.values import TextColumn, stored_in
from sparqlnav.strategies.ending import finish
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.trace import Trace

__all__ = ["SqlWriter", "create", "extract_sql", "schema_view"]

FULL_TABLES = 6  # tables shown with their columns; the others by name
SEARCHED_COLUMNS = 60  # text columns searched for a name the question gives (bounded queries, small tables only)
_BLOCK = re.compile(r"```([A-Za-z]*)[ \t]*\n(.*?)```", re.DOTALL)
_BARE = re.compile(r"((?:WITH|SELECT)\b.*)", re.IGNORECASE | re.DOTALL)


def extract_sql(text: str) -> str | None:
    """The SQL of a reply: the last `sql` code block, else the last code block, else a bare SELECT."""
    blocks = _BLOCK.findall(text or "")
    tagged = [body for lang, body in blocks if lang.lower() in ("sql", "sqlite", "postgresql", "postgres")]
    body = (tagged or [b for _lang, b in blocks] or [None])[-1]
    if body is None:
        found = _BARE.search(text or "")
        body = found.group(1) if found else None
    return body.strip().rstrip(";").strip() if body and body.strip() else None


def _words(text: str) -> set[str]:
    return {stem(w) for w in re.findall(r"[A-Za-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " "))
            if len(w) > 2}


def ranked_tables(profile: DatabaseProfile, question: str) -> list[TableProfile]:
    """The tables, those whose names, columns and listed values share most words with the question first."""
    asked = _words(question)

    def score(t: TableProfile) -> tuple[float, int]:
        own = len(asked & _words(t.name)) * 3
        cols = sum(len(asked & _words(c.name)) for c in t.columns)
        vals = sum(1 for c in t.columns for v in c.values if _words(v) & asked)
        return own + cols + vals, t.rows or 0

    return sorted(profile.tables, key=lambda t: score(t), reverse=True)


def schema_view(profile: DatabaseProfile, question: str, full: int = FULL_TABLES,
                holding: Sequence[str] = ()) -> tuple[str, list[TableProfile]]:
    """The prompt's tables: the best-ranked in full (and the tables `holding` what the question names, and those
    their foreign keys reach), the rest by name."""
    ranked = ranked_tables(profile, question)
    chosen = ranked[:full]
    chosen += [t for t in ranked[full:] if t.name in holding]  # a named value's table is needed whatever its rank
    names = {t.name for t in chosen}
    for t in list(chosen):  # a join needs the table at the other end of the arrow
        for c in t.columns:
            target = c.references.split(".", 1)[0]
            if target and target not in names and len(chosen) < full + 3:
                chosen += [x for x in profile.tables if x.name == target]
                names.add(target)
    blocks = [_table_block(t) for t in chosen]
    rest = [t.name for t in profile.tables if t.name not in names]
    if rest:
        blocks.append("Other tables (ask for none of their columns unless needed): " + ", ".join(rest))
    return "\n\n".join(blocks), chosen


def _table_block(t: TableProfile) -> str:
    rows = "?" if t.rows is None else (f"{t.rows:,}" if t.exact else f"about {t.rows:,}")
    head = f"{quote_name(t.name)} ({rows} rows" + (f"; key {', '.join(t.key)}" if t.key else "") + ")"
    return head + "\n" + "\n".join(f"  {_column_line(c)}" for c in t.columns)


def _column_line(c: ColumnProfile) -> str:
    line = f"{c.name} {c.type or 'untyped'}"
    if c.references:
        line += f" → {c.references}"
    if c.values:
        shown = ", ".join(quote_literal(v) if c.text else v for v in c.values)
        line += f"  -- values {shown}"
    elif c.samples:
        line += f"  -- e.g. {', '.join(quote_literal(v) for v in c.samples)} ({c.distinct:,}+ distinct)"
    elif c.smallest or c.largest:
        line += f"  -- from {c.smallest} to {c.largest}"
    if c.spaced:
        line += f"; {c.spaced} stored with spaces around them"
    if c.empty:  # a NULL is how "not yet" or "none" is often stored: say so, or a model compares with a date
        line += f"; {c.empty:,} empty (NULL)" + ("" if c.empty < SAMPLE_ROWS else " or more")
    return line


@dataclass(frozen=True)
class NamedValue:
    """A name of the question and where the data holds it."""

    mention: str
    places: tuple[tuple[str, str, str], ...]  # (table, column, the value as stored)
    in_parts: bool = False  # its words stored apart ("Beatriz Vogel": a first and a last name)
    within: bool = False  # stored only inside longer texts ("Tovey Go" in "Tovey Go 600 Headphones")


def named_values(database: Database, tables: Sequence[TableProfile], question: str, trace: Trace) -> list[NamedValue]:
    """For each name the question marks (quoted, capitalised, a code), the text columns of `tables` that hold it,
    compared without case and surrounding spaces: small tables by one bounded query each, big ones by the values the
    profile listed."""
    mentions = [_as_named(m.text, question) for m in find_mentions(question)
                if m.source in ("quoted", "code", "capitalised")]
    if tables and mentions and question.split()[0] in mentions:
        mentions = mentions[1:] if len(mentions) > 1 else mentions  # "Which …", "List …": a capital, not a name
    found: list[NamedValue] = []
    for mention in dict.fromkeys(mentions[:4]):
        places = _places(database, tables, mention)
        words = mention.split()
        if not places and len(words) == 2:
            # a person's name kept in two columns of one table: each word where it is stored
            first, last = _places(database, tables, words[0]), _places(database, tables, words[1])
            both = [(a, b) for a in first for b in last if a[0] == b[0] and a[1] != b[1]]
            if both:
                found.append(NamedValue(mention, both[0], in_parts=True))
                continue
        if not places:  # part of a longer stored text ("Tovey Go" of "Tovey Go 600 Headphones")
            inside = stored_in(database, _text_columns(tables), mention, limit=2, within=True)
            if inside:
                found.append(NamedValue(mention, tuple((p.table, p.column, p.stored) for p in inside), within=True))
                continue
        found.append(NamedValue(mention, tuple(places[:3])))
    if found:
        trace.emit("observation", text="\n".join(_named_line(n) for n in found), tool="resolve_names")
    return found


def _as_named(mention: str, question: str) -> str:
    """A mention as the data would store it: without a possessive ("Walter Young's" → "Walter Young") and with a
    sign the word splitter left out ("AB" of "blood type AB-" → "AB-")."""
    bare = re.sub(r"[’']s$", "", mention)
    found = re.search(re.escape(bare) + r"([+-]+)(?![\w])", question)
    return bare + found.group(1) if found else bare


def _text_columns(tables: Sequence[TableProfile]) -> list[TextColumn]:
    """The text columns of `tables` (not foreign keys), in the tables' order, at most SEARCHED_COLUMNS of them."""
    return [TextColumn(t.name, c.name, t.rows) for t in tables for c in t.columns
            if c.text and not c.references][:SEARCHED_COLUMNS]


def _places(database: Database, tables: Sequence[TableProfile], text: str) -> list[tuple[str, str, str]]:
    """The text columns of `tables` holding `text` (case and surrounding spaces aside): those whose listed values
    include it, then the others searched (small tables only; the best-ranked tables first, SEARCHED_COLUMNS at
    most): a value may sit in a table the question does not name ("Small Appliances" in categories)."""
    places: list[tuple[str, str, str]] = []
    listed_whole: set[tuple[str, str]] = set()
    for t in tables:
        for c in t.columns:
            if not c.text or c.references:
                continue
            listed = [v for v in (*c.values, *c.samples) if v.strip().lower() == text.lower()]
            if listed:
                places.append((t.name, c.name, listed[0]))
            if c.values:  # every value of the column is listed: nothing more to search there
                listed_whole.add((t.name, c.name))
    if places:
        return places
    searched = [c for c in _text_columns(tables) if (c.table, c.column) not in listed_whole]
    return [(p.table, p.column, p.stored) for p in stored_in(database, searched, text)]


def _named_line(n: NamedValue) -> str:
    if n.within:
        return (f'- "{n.mention}": no value is just that; it is part of '
                + "; ".join(f"{quote_literal(v)} in {t}.{c}" for t, c, v in n.places) + " (match with LIKE)")
    if n.in_parts:
        return (f'- "{n.mention}": stored in parts in {n.places[0][0]}: '
                + " and ".join(f"{quote_literal(v)} in {t}.{c}" for t, c, v in n.places))
    if not n.places:
        return f'- "{n.mention}": no text column holds it as a whole value'
    said = "; ".join(f"stored as {quote_literal(v)} in {t}.{c}"
                     + (" (with spaces around it: compare as stored or with TRIM)" if v != v.strip() else "")
                     for t, c, v in n.places)
    return f'- "{n.mention}": {said}'


def _examples_block(examples: Sequence[SqlExample]) -> str:
    """The closest question/SQL pairs the user gave for this database, when there are any."""
    if not examples:
        return ""
    pairs = "\n\n".join(f"Question: {e.question}\n```sql\n{e.sql}\n```" for e in examples)
    return f"\n## Questions answered on this database before, with their SQL\n\n{pairs}\n"


class SqlWriter:
    """One request for the SQL, one fix when it fails or finds nothing, the answer in words."""

    name = "sql"
    in_sql = True  # answers on the database itself: no graph copy is made for it

    def __init__(self, llm: LLMConfig, settings: Settings | None = None) -> None:
        self.llm = llm
        self.settings = settings or Settings.from_env()

    def run(self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None) -> Answer:
        """Answer in SQL on the database the graph names."""
        context = context if context is not None else EMPTY
        relational = relational_of(kg)
        client = LLMClient(self.llm)
        record = trace_recorder(trace)
        budget = client.question_budget(context.seconds_left(self.llm.budget_s))

        def chat(messages: list[Message], purpose: str) -> Any:
            return client.chat(messages, purpose=purpose, record=record, budget=budget)

        try:
            if relational is None:
                why = "the SQL writer needs a database (--kg sqlite:///path/file.db or postgresql://user@host/db)"
                trace.emit("error", message=why)
                return finish(chat, kg, trace, context, question=question, strategy=self.name, status="error",
                              sparql=None, table=None, text=why, error=why)
            return self._go(question, kg, trace, context, relational.database, relational.tables, chat)
        finally:
            client.close()

    def _go(self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext, database: Database,
            tables_read: Sequence[Table], chat: Any) -> Answer:
        started = time.monotonic()
        # the catalogue was read when the graph opened: only the stamp is checked again
        profile = profile_database(database, self.settings.paths.home / "sql", tables_read)
        trace.emit("info", message=f"read the database: {len(profile.tables)} tables, {profile.rows:,} rows "
                                   f"({time.monotonic() - started:.2f} s)")
        named = named_values(database, ranked_tables(profile, question), question, trace)
        tables, chosen = schema_view(profile, question, holding=[t for n in named for t, _, _ in n.places])
        named_block = ("\n## What the question names, looked up in the data\n\n" + "\n".join(map(_named_line, named))
                       if named else "")
        examples = closest_sql_examples(kept_sql_examples(self.settings.paths.home, database), question)
        if examples:
            trace.emit("info", message=f"{len(examples)} of the database's example questions shown with their SQL")
        dialect = "SQLite" if database.kind == "sqlite" else "PostgreSQL"
        system = Template(prompt_text("write_sql.md")).safe_substitute(
            dialect=dialect, tables=tables, named=named_block, examples=_examples_block(examples))
        messages = [Message.system(system), Message.user(context.with_question(question))]
        sql, table, problem = None, None, None
        for attempt in range(2):
            reply = chat(messages, "generate" if attempt == 0 else "fix")
            messages.append(reply.as_message())
            sql = extract_sql(reply.text)
            if sql is None:
                problem = "the reply held no SQL query"
                outcome, details = "gave nothing to run.", "Write the query in one ```sql code block."
            else:
                table, error = self._run(database, sql, trace)
                problem = error or self._doubt(question, table)
                if problem is None:
                    break
                outcome = f"failed: {error}" if error else f"{self._said(table)}."
                details = "" if error else f"Why that may not answer the question: {problem}."
            if attempt == 0:
                fix = Template(prompt_text("write_sql_fix.md")).safe_substitute(
                    outcome=outcome, details=details, question=question)
                messages.append(Message.user(fix))
        extra: dict[str, Any] = {"tables_shown": [t.name for t in chosen]}
        if problem is not None:
            extra["unsure"] = problem
        if sql is None or table is None:
            why = problem or "no query"
            return finish(chat, kg, trace, context, question=question, strategy=self.name, status="error",
                          sparql=None, table=None, text=f"No answer: {why}.", error=why, extra=extra, sql=sql)
        if table.is_empty:  # nothing for the answer writer to word (and a cascade goes on from here)
            return finish(chat, kg, trace, context, question=question, strategy=self.name, status="not_found",
                          sparql=None, table=table, text="The query found no rows.", extra=extra, sql=sql)
        return finish(chat, kg, trace, context, question=question, strategy=self.name, status="answered",
                      sparql=None, table=table, extra=extra, sql=sql)

    def _run(self, database: Database, sql: str, trace: Trace) -> tuple[ResultTable | None, str | None]:
        limits = self.settings.limits
        result, error = run_traced(database, sql, Caps(limits.timeout_s, limits.max_rows, limits.max_bytes), trace,
                                   purpose="answer")
        return (result_table(result) if result is not None else None), error

    def _doubt(self, question: str, table: ResultTable | None) -> str | None:
        if table is None:
            return None
        if table.is_empty:
            return "it returned no rows"
        return projection_mismatch(analyse(tokenize(question)), table, self.settings.cascade.singular_rows)

    @staticmethod
    def _said(table: ResultTable | None) -> str:
        if table is None or table.is_empty:
            return "returned no rows: check the values compared (as stored: case, spaces) and the joins"
        return f"returned {len(table)} row(s) with the columns {', '.join(table.vars)}"

    def close(self) -> None:
        """Nothing held between questions."""


def create(llm: LLMConfig | None, *, settings: Settings | None = None) -> Strategy:
    """The SQL writer; it needs an LLM."""
    if llm is None:
        raise ValueError("the SQL writer needs an LLM (set OPENAI_BASE_URL and SPARQLNAV_LLM_MODEL)")
    return SqlWriter(llm, settings)
