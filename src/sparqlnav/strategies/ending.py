"""How a run ends, the same for every strategy: the final answer's words (written by the LLM from the question,
the query and its rows, or plainly when no LLM time is left), the `answer` event in the trace, and the Answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from string import Template
from typing import Any

from sparqlnav.answer import Answer, Status
from sparqlnav.context import RunContext
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable, shown_labels
from sparqlnav.llm import BudgetExceeded, LLMError, LLMReply, Message
from sparqlnav.question.wording import Asked, for_people, unit_labels, yes_no
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.trace import Trace

ANSWER_ROWS = 10  # rows (first and last) the answer writer sees of a long list; a plain answer names the first ones
# A list up to this many rows is shown to the answer writer whole, so "list all …" can be answered with all of it
# (it saw the first and last 10 of 19 before, issue 37); a longer one is shown in part and the writer says so.
ANSWER_WHOLE = 100
HIDDEN_ROWS = ("the reader sees the whole result as a table under your answer: name only rows shown here and say "
               "how many there are")
Chat = Callable[[list[Message], str], LLMReply]  # messages, purpose -> reply (the strategy's own accounting)


def plain_answer(table: ResultTable, kg: KnowledgeGraph, question: str = "") -> str:
    """The result in words without an LLM: the boolean, or the first values with their labels, literals worded for
    people by what the question asks (a year for "In what year…")."""
    if table.boolean is not None:
        return yes_no(table.boolean)
    labels = shown_labels(table, kg.names, head=ANSWER_ROWS, tail=0, whole=0)
    labels |= unit_labels((t for row in table.rows[:ANSWER_ROWS] for t in row.values()), kg.names)
    asked = Asked.of(question)
    rows = [
        [for_people(term, asked, labels) if term is not None and term.kind == "literal" else cell
         for term, cell in zip((row.get(v) for v in table.vars), shown, strict=True)]
        for row, shown in zip(table.rows, table.display_rows(kg.prefixes, labels), strict=True)
    ]  # fmt: skip
    shown = "; ".join(", ".join(cell for cell in row if cell) for row in rows[:ANSWER_ROWS])
    more = f" (and {len(rows) - ANSWER_ROWS} more)" if len(rows) > ANSWER_ROWS else ""
    return f"The query returned: {shown}{more}"


def writer_view(table: ResultTable, kg: KnowledgeGraph, *, rows: int = ANSWER_ROWS, labelled: bool = True) -> str:
    """The result as a writer of the answer's words reads it: whole up to ANSWER_WHOLE rows, else the first and last
    `rows` with the rest said to be in the table the reader sees (`labelled`: labels beside IRIs)."""
    labels = shown_labels(table, kg.names, head=rows, tail=rows, whole=ANSWER_WHOLE) if labelled else {}
    return table.to_markdown(kg.prefixes, labels, head=rows, tail=rows, whole=ANSWER_WHOLE, others=HIDDEN_ROWS)


def write_answer(
    chat: Chat, kg: KnowledgeGraph, context: RunContext, question: str, sparql: str, table: ResultTable,
    note: str | None = None, language: str = "SPARQL",
) -> str:
    """The answer in words, written by the LLM from the question (after its context), the query, its rows and the
    query's author's last note (a reading it chose, a doubt it found while exploring)."""
    result = writer_view(table, kg)
    said = f"\n\nThe query's author noted: {note.strip()}" if note and note.strip() else ""
    # A cascade's handover was for writing the query; the words come from this query's rows alone.
    user = f"{context.without_handover().with_question(question)}\n\n{language}:\n{sparql}\n\nResult:\n{result}{said}"
    # The rule on the note only when a note comes: a promised note that never comes reads as a missing part.
    rule = prompt_text("explore_answer_note.md").strip() if said else ""
    system = Template(prompt_text("explore_answer.md")).safe_substitute(language=language, note_rule=rule).strip()
    messages = [Message.system(system), Message.user(user)]
    return chat(messages, "answer").text.strip()


def worded(
    chat: Chat,
    kg: KnowledgeGraph,
    trace: Trace,
    context: RunContext,
    question: str,
    sparql: str,
    table: ResultTable,
    note: str | None = None,
    language: str = "SPARQL",
) -> tuple[str, str | None]:
    """The answer's words and, when the LLM failed while writing them, the error (said in the trace)."""
    try:
        return write_answer(chat, kg, context, question, sparql, table, note, language), None
    except BudgetExceeded:  # no LLM time left to phrase it: show the result itself
        return plain_answer(table, kg, question), None
    except LLMError as exc:
        trace.emit("error", message=str(exc))
        return f"The answer could not be written: {exc}", str(exc)


def conclude(
    trace: Trace,
    *,
    question: str,
    strategy: str,
    sparql: str | None,
    results: ResultTable | None,
    text: str,
    status: Status,
    error: str | None = None,
    extra: Mapping[str, Any] | None = None,
    sql: str | None = None,
) -> Answer:
    """Record the `answer` event and return the Answer (`sql`: the final query when it is SQL)."""
    trace.emit("answer", text=text, status=status, sparql=sparql, **({"sql": sql} if sql is not None else {}))
    return Answer(
        question=question,
        strategy=strategy,
        sparql=sparql,
        results=results,
        text=text,
        trace=trace,
        status=status,
        error=error,
        extra=dict(extra or {}),
        sql=sql,
    )


def last_thought(trace: Trace) -> str | None:
    """The agent's last recorded thought (build's only channel to the writer: the reading it chose, a doubt)."""
    thoughts = trace.of_kind("thought")
    return str(thoughts[-1].data.get("text", "")) or None if thoughts else None


def finish(
    chat: Chat,
    kg: KnowledgeGraph,
    trace: Trace,
    context: RunContext,
    *,
    question: str,
    strategy: str,
    status: Status,
    sparql: str | None,
    table: ResultTable | None,
    text: str | None = None,
    error: str | None = None,
    reason: str | None = None,
    extra: Mapping[str, Any] | None = None,
    note: str | None = None,
    sql: str | None = None,
) -> Answer:
    """End an agent's run on its best query (SPARQL, or `sql`): the answer written from it (unless `text` is given)
    with the agent's `note` for the writer, marked as not confirmed when a budget ended the run (`reason`),
    recorded and returned."""
    query, language = (sql, "SQL") if sql is not None else (sparql, "SPARQL")
    if text is None and query is not None and table is not None:
        text, failed = worded(chat, kg, trace, context, question, query, table, note, language)
        if failed is not None:
            status, error = "error", failed
    if status == "budget_exhausted" and query is not None:
        text = f"Best answer so far ({reason}; not confirmed by the agent): {text}"
    extra = {**(extra or {}), **({"stopped": reason} if reason else {})}
    return conclude(
        trace, question=question, strategy=strategy, sparql=sparql, results=table, text=text or "", status=status,
        error=error, extra=extra, sql=sql,
    )
