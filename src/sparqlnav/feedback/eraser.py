"""ERASER-style feedback: detectors read the environment after each action (the engine, the tool-call
interpreter, the run's memory) and pick a targeted guideline from a catalogue only when something is wrong.

Any strategy can use it: build a `StepContext` for the action, call `Feedback.check`, show the returned
guidelines to the model, then `Memory.record` the step. The catalogue is data (`feedback/guidelines.yaml`, read
by `feedback/catalogue`); each guideline id names exactly one detector. This module holds the step under check and
the general detectors (the builders' own are in `feedback/builder` and `feedback/sql`); the run's memory they
consult is `feedback/memory`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

from sparqlnav.feedback.catalogue import Details
from sparqlnav.feedback.memory import (
    Memory,
    Record,
    canonical_query,
    query_iris,
    unknown_prefixes,
)
from sparqlnav.feedback.view import BuildView, SqlView
from sparqlnav.graph.endpoint import Outcome, QueryResult
from sparqlnav.graph.vocab import Vocabulary
from sparqlnav.llm import ToolCall, ToolSpec
from sparqlnav.question.fit import asks_for_one, projection_mismatch
from sparqlnav.question.intent import analyse
from sparqlnav.question.words import tokenize
from sparqlnav.sparql.guard import SparqlToken, declared_prefixes, tokens
from sparqlnav.sparql.prefixes import WELL_KNOWN, PrefixMap
from sparqlnav.tools.lookup import EntityPage
from sparqlnav.tools.toolkit import Observation

DEFAULT_LARGE_ROWS = 500
DEFAULT_SINGULAR_ROWS = 7  # the cascade's default (CascadeSettings.singular_rows, measured on CK25)
# Namespaces of shared vocabularies: using their terms needs no prior observation.
VOCABULARY_NAMESPACES = tuple(WELL_KNOWN.values())
ABSENT_CHECKED = 12  # identifiers of one query checked for existence
FILTERED_CHECKED = 3  # texts of one query whose closest stored values are looked up
_AGGREGATE = re.compile(r"\b(COUNT|SUM|AVG|MIN|MAX|SAMPLE|GROUP_CONCAT)\s*\(", re.I)
_NAME_VAR = re.compile(r"(label|name|title)s?$", re.I)
# A cast to a number or date: `xsd:integer(`, `<http://www.w3.org/2001/XMLSchema#decimal>(`.
_CAST = re.compile(r"(?:\bxsd:|<http://www\.w3\.org/2001/XMLSchema#)(?:integer|int|long|short|decimal|double|float"
                   r"|dateTime|date|time|gYear|boolean|nonNegativeInteger|positiveInteger)>?\s*\(")


# ---------------------------------------------------------------- catalogue


# ---------------------------------------------------------------- the step under check


@dataclass
class StepContext:
    """Everything detectors may look at for one action: the call, what it ran and returned, and memory."""

    memory: Memory
    tools: Sequence[ToolSpec] = ()
    call: ToolCall | None = None  # None: the model made no tool call
    extra_calls: int = 0  # further calls in the same reply (not run)
    finishing: bool = False  # the action ends the run (stop)
    query: str | None = None  # the SPARQL the action runs, if any
    observation: Observation | None = None  # None before the action runs
    result: QueryResult | None = None
    build: BuildView | None = None  # the query builder's state (the build strategy only)
    sql: SqlView | None = None  # the SQL builder's state (the build strategy's SQL target only)
    question: str | None = None  # set when the step's result is meant as the answer (its shape is checked)
    # Which of some identifiers the graph lacks (the strategy's toolkit asks the graph); asked only when a query
    # matched nothing, once per step.
    absent_of: Callable[[Sequence[str]], list[str]] | None = None
    # The stored values of a property closest to a text (the toolkit's `closest_values`), asked only when a query
    # that filters a property on a text matched nothing.
    values_of: Callable[[str, str], list[str]] | None = None
    # The one non-text datatype of a property's stored values (the toolkit's `value_datatype`), asked only when such
    # a query compares the property with a plain text.
    datatype_of: Callable[[str], str | None] | None = None
    _absent: list[str] | None = field(default=None, repr=False)
    _datatypes: dict[str, str | None] = field(default_factory=dict, repr=False)

    def absent_iris(self) -> list[str]:
        """The identifiers of the step's query that occur nowhere in the graph (asked once; none without a way)."""
        if self._absent is None:
            iris = query_iris(self.query or "", self.prefixes, self.memory.vocab)
            wanted = [i for i in iris if not i.startswith(VOCABULARY_NAMESPACES)][:ABSENT_CHECKED]
            self._absent = self.absent_of(wanted) if self.absent_of is not None and wanted else []
        return self._absent

    def typed(self, compared: Compared) -> str | None:
        """The datatype a plain text is compared against (the property's values are all of it), else None."""
        if not compared.plain or self.datatype_of is None:
            return None
        if compared.prop not in self._datatypes:
            self._datatypes[compared.prop] = self.datatype_of(compared.prop)
        return self._datatypes[compared.prop]

    @property
    def prefixes(self) -> PrefixMap:
        """The graph's prefixes."""
        return self.memory.prefixes

    @property
    def spec(self) -> ToolSpec | None:
        """The spec of the called tool, if it exists."""
        name = self.call.name if self.call else None
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True)
class FeedbackOptions:
    """Thresholds of the detectors."""

    large_rows: int = DEFAULT_LARGE_ROWS
    singular_rows: int = DEFAULT_SINGULAR_ROWS  # more rows than this do not answer "who is the …"


Detector = Callable[[StepContext, FeedbackOptions], Details | None]


def _clip(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_names(ctx: StepContext) -> str:
    return ", ".join(f"{t.name}()" for t in ctx.tools) or "(none)"


def _example(spec: ToolSpec | None) -> str:
    if spec is None:
        return "tool({})"
    props = (spec.parameters.get("properties") or {}).keys()
    args = json.dumps({p: "…" for p in props}, ensure_ascii=False)
    return f"{spec.name}({args})"


def _expected(spec: ToolSpec) -> str:
    props = spec.parameters.get("properties") or {}
    if not props:
        return "no arguments"
    return ", ".join(
        f"{name} ({(schema or {}).get('type', 'any')})" for name, schema in props.items()
    )


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


# -- interpreter


def no_action(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The reply made no tool call; the text names the tool that finishes this strategy's run."""
    if ctx.call is not None:
        return None
    offered = {t.name for t in ctx.tools}
    finish = next((name for name in ("stop", "execute") if name in offered), "stop")
    return {"tools": _tool_names(ctx), "finish": finish}


def malformed_call(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The call's arguments (or the action text) could not be parsed."""
    if ctx.call is None or ctx.call.parse_error is None:
        return None
    return {
        "tool": ctx.call.name or "the action",
        "error": ctx.call.parse_error,
        "example": _example(ctx.spec),
    }


def unknown_tool(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The call names a tool that does not exist."""
    if ctx.call is None or ctx.spec is not None or not ctx.call.name:
        return None
    return {"tool": ctx.call.name, "tools": _tool_names(ctx)}


def missing_argument(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A required argument is absent or blank."""
    spec = ctx.spec
    if ctx.call is None or spec is None or ctx.call.parse_error is not None or ctx.finishing:
        return None
    required = spec.parameters.get("required") or []
    missing = [
        r
        for r in required
        if r not in ctx.call.arguments
        or (isinstance(ctx.call.arguments[r], str) and not ctx.call.arguments[r].strip())
    ]
    if not missing:
        return None
    return {"tool": spec.name, "missing": ", ".join(missing), "example": _example(spec)}


def wrong_argument(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """Arguments the tool does not take, or values of the wrong JSON type."""
    spec = ctx.spec
    if ctx.call is None or spec is None or ctx.call.parse_error is not None or ctx.finishing:
        return None
    props: dict[str, Any] = spec.parameters.get("properties") or {}
    problems = []
    for name, value in ctx.call.arguments.items():
        if name not in props:
            problems.append(f"unknown argument {name!r}")
            continue
        wanted = (props[name] or {}).get("type")
        types = _JSON_TYPES.get(wanted) if isinstance(wanted, str) else None
        if (
            value is not None
            and types
            and (not isinstance(value, types) or (bool not in types and isinstance(value, bool)))
        ):
            problems.append(f"{name} must be a {wanted}, not {type(value).__name__}")
    if not problems:
        return None
    return {
        "tool": spec.name,
        "problems": "; ".join(problems),
        "expected": _expected(spec),
        "example": _example(spec),
    }


def several_actions(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The reply held more than one call."""
    if ctx.call is None or ctx.extra_calls <= 0:
        return None
    return {"count": ctx.extra_calls + 1, "tool": ctx.call.name}


# -- memory


def repeated_action(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The same tool with the same arguments was already used in this run."""
    # A builder step edits a draft, so the same call after other edits is a different step.
    if ctx.call is None or ctx.finishing or ctx.call.parse_error is not None or ctx.build is not None \
            or ctx.sql is not None:
        return None
    first = ctx.memory.find(Record(ctx.call.name, dict(ctx.call.arguments)).key)
    if first is None:
        return None
    args = json.dumps(ctx.call.arguments, ensure_ascii=False)
    return {"action": f"{ctx.call.name}({args[:200]})", "step": first + 1}


def _describe_failure(rec: Record) -> str:
    r = rec.result
    if r is None:
        return "failed"
    if r.outcome in (Outcome.EMPTY, Outcome.OK):
        return "returned no rows"
    return f"failed ({r.outcome.value})"


def rerun_unchanged(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A query that failed before is sent again with only cosmetic differences."""
    if ctx.query is None or ctx.call is None:
        return None
    canon = canonical_query(ctx.query, ctx.prefixes)
    exact = " ".join(ctx.query.split())
    for i, rec in enumerate(ctx.memory.records):
        if rec.query is None or rec.answered:
            continue
        if " ".join(rec.query.split()) == exact:
            continue  # the very same text: that is a repeated action, not a rerun
        if canonical_query(rec.query, ctx.prefixes) == canon:
            return {"step": i + 1, "outcome": _describe_failure(rec)}
    return None


def stop_without_results(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """stop() while the last query did not produce an answer."""
    if not ctx.finishing:
        return None
    named = ctx.call.arguments.get("step") if ctx.call is not None else None
    if named is not None:  # stop(step=N): the query of that step becomes the answer
        records = ctx.memory.records
        if not isinstance(named, int) or not 1 <= named <= len(records) or records[named - 1].query is None:
            return {"problem": f"you named step {named}, which ran no query; name a step that ran execute_sparql"}
        if not records[named - 1].answered:
            return {"problem": f"you named step {named}, whose query {_describe_failure(records[named - 1])}"}
        return None
    last = ctx.memory.last_query()
    if last is None:
        return {"problem": "no query has been run yet"}
    step, rec = last
    if rec.answered:
        return None
    return {"problem": f"the last query (step {step}) {_describe_failure(rec)}"}


def stop_answer_shape(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """stop() on a query whose rows do not fit the question (ten rows for "the cheapest"); said once, since the
    model may know better (a second stop is taken)."""
    if not ctx.finishing or ctx.question is None:
        return None
    records = ctx.memory.records
    if any(r.tool == "stop" for r in records):
        return None
    named = ctx.call.arguments.get("step") if ctx.call is not None else None
    if isinstance(named, int) and 1 <= named <= len(records):
        step, rec = named, records[named - 1]
    else:
        last = ctx.memory.last_query()
        if last is None:
            return None
        step, rec = last
    r = rec.result
    if not rec.answered or r is None or r.table is None:
        return None
    mismatch = projection_mismatch(analyse(tokenize(ctx.question)), r.table, opts.singular_rows,
                                   one=asks_for_one(ctx.question), query=rec.query)
    return {"problem": mismatch, "step": step} if mismatch else None


def absent_iri(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The query matched nothing (no rows, a false ASK, or only zeros) and names identifiers that occur nowhere in
    the graph: that, not the data, is why (a relay model's ASK over a guessed `ontology:Dhampir` said "false")."""
    r = ctx.result
    if ctx.query is None or r is None or ctx.absent_of is None or not _matched_nothing(r):
        return None
    missing = ctx.absent_iris()
    if not missing:
        return None
    return {"iris": ", ".join(ctx.prefixes.compact(i) for i in missing[:8])}


def filtered_value(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The query matched nothing and compares a property's values with a text (`?x pv:city "Lyon"`, `FILTER(?c =
    "New York")`, `CONTAINS(?c, …)`) that no stored value is spelled as: the property's closest stored values,
    quoted as stored (a writer without tools guessed "Lyon" for "Lyon " and "New York" for "NewYork")."""
    r = ctx.result
    if ctx.query is None or r is None or ctx.values_of is None or not _matched_nothing(r):
        return None
    lines = []
    for compared in literal_filters(ctx.query, ctx.prefixes)[:FILTERED_CHECKED]:
        if ctx.typed(compared) is not None:
            continue  # its spelling is not the problem, its datatype is: typed_value says so
        prop, text = compared.prop, compared.text
        close = ctx.values_of(prop, text)
        if close and text not in close:
            shown = ", ".join(json.dumps(v, ensure_ascii=False) for v in close)
            lines.append(f'{ctx.prefixes.compact(prop)} compared with "{text}": the closest stored values are {shown}')
    return {"values": "; ".join(lines)} if lines else None


def typed_value(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The query matched nothing and compares a property's typed values (xsd:date, xsd:integer) with a plain text
    (`FILTER(?d < "2016-12-31")`): a plain text never equals nor orders with a typed value, however it is spelled
    (an explore run was told to compare loosely, LCASE and CONTAINS, for a date)."""
    r = ctx.result
    if ctx.query is None or r is None or ctx.datatype_of is None or not _matched_nothing(r):
        return None
    lines = []
    for compared in literal_filters(ctx.query, ctx.prefixes)[:FILTERED_CHECKED]:
        datatype = ctx.typed(compared)
        if datatype is not None:
            typed = ctx.prefixes.compact(datatype)
            lines.append(f'{ctx.prefixes.compact(compared.prop)} holds {typed} values, and "{compared.text}" is plain '
                         f'text: write it "{compared.text}"^^{typed}')
    return {"values": "; ".join(lines)} if lines else None


class Compared(NamedTuple):
    """A text a query compares a property's values with, and whether it is written plain (no datatype, no
    language)."""

    prop: str
    text: str
    plain: bool


def literal_filters(query: str, prefixes: PrefixMap) -> list[Compared]:
    """The texts a query compares properties with: a triple's literal object, and a text in a FILTER beside a
    variable that a triple binds as a property's value (equality, CONTAINS, STRSTARTS, REGEX; regex anchors
    dropped)."""
    toks = tokens(query)
    declared = declared_prefixes(toks)

    def iri(t: SparqlToken) -> str | None:
        if t.kind == "iri":
            return t.text[1:-1]
        if t.kind == "pname":
            prefix, _, local = t.text.rstrip(".").partition(":")
            ns = declared.get(prefix) or prefixes.mapping.get(prefix)
            return ns + local if ns else None
        return None

    def plain(at: int, within: Sequence[SparqlToken]) -> bool:
        # `"…"^^xsd:date` and `"…"@en` are not plain text
        after = within[at + 1] if at + 1 < len(within) else None
        return after is None or not (after.kind == "langtag" or after.text == "^")

    found: dict[Compared, None] = {}
    bound: dict[str, str] = {}  # variable → the property whose values it holds
    for i, (before, t) in enumerate(pairwise(toks)):
        prop = iri(before) if before.kind in ("iri", "pname") else None
        if prop is None:
            continue
        if t.kind in ("string", "lstring"):
            found[Compared(prop, _unquote(t.text), plain(i + 1, toks))] = None
        elif t.kind == "var":
            bound.setdefault(t.text[1:], prop)
    for i, t in enumerate(toks):
        if not (t.kind == "word" and t.text.upper() == "FILTER"):
            continue
        group = _group_after(toks, i + 1)
        props = [bound[x.text[1:]] for x in group if x.kind == "var" and x.text[1:] in bound]
        for j, x in enumerate(group):
            if x.kind not in ("string", "lstring"):
                continue
            text = _unquote(x.text).strip("^$")
            if props and len(text.strip(".*")) >= 2:
                found[Compared(props[0], text.strip(".*"), plain(j, group))] = None
    return list(found)


def _group_after(toks: Sequence[SparqlToken], i: int) -> Sequence[SparqlToken]:
    """The tokens of the bracketed group that starts at or after `i` (a FILTER's condition)."""
    while i < len(toks) and toks[i].text not in ("(", "{"):
        i += 1
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind == "other" and toks[j].text in ("(", "{"):
            depth += 1
        elif toks[j].kind == "other" and toks[j].text in (")", "}"):
            depth -= 1
            if depth == 0:
                return toks[i:j + 1]
    return toks[i:]


def _unquote(text: str) -> str:
    """A string token's text without its quotes (escapes read as written)."""
    quote = 3 if text[:3] in ('"""', "'''") else 1
    return text[quote:-quote] if len(text) >= 2 * quote else text


def _matched_nothing(r: QueryResult) -> bool:
    """No rows, a false ASK, or one row of zeros (COUNT or SUM over nothing)."""
    if _no_rows(r):
        return True
    table = r.table
    if not r.ok or table is None:
        return False
    if table.boolean is not None:
        return table.boolean is False
    if len(table.rows) != 1 or not table.rows[0]:
        return False
    return all(_is_zero(t.value) for t in table.rows[0].values())


def _is_zero(text: str) -> bool:
    try:
        return float(text) == 0
    except ValueError:
        return False


def unseen_iri(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The query ran and matched nothing (no rows, or an ASK that is false), and names graph-specific IRIs that no
    observation showed (rows confirm the names exist, and a failed query has its own guideline: a warning then is
    noise). A false ASK over a misremembered identifier would otherwise be answered "No"."""
    r = ctx.result
    if ctx.query is None or r is None or not (_no_rows(r) or (r.ok and r.table is not None and r.table.boolean is False)):
        return None
    if ctx.absent_of is not None and ctx.absent_iris():
        return None  # absent_iri says more: the graph lacks them, not just this run's observations
    seen = ctx.memory.seen
    unseen = [
        i
        for i in query_iris(ctx.query, ctx.prefixes, ctx.memory.vocab)
        if not i.startswith(VOCABULARY_NAMESPACES) and i not in seen
    ]
    if not unseen:
        return None
    return {"iris": ", ".join(ctx.prefixes.compact(i) for i in unseen[:8])}


def _rows(ctx: StepContext) -> QueryResult | None:
    r = ctx.result
    if r is None or r.outcome is not Outcome.OK or r.table is None or r.table.is_boolean:
        return None
    return r if r.table.rows else None


def _never_bound(ctx: StepContext) -> list[str]:
    """The selected variables no returned row binds."""
    r = _rows(ctx)
    if r is None or r.table is None:
        return []
    return [v for v in r.table.vars if not any(v in row for row in r.table.rows)]


def unbound_projection(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """Rows came back, but some selected variable has no value in any of them (and no failed cast explains it)."""
    never = [v for v in _never_bound(ctx) if _cast_of(ctx.query or "", v) is None]
    return {"vars": ", ".join("?" + v for v in never)} if never else None


def failed_cast(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """Rows came back, but a selected variable bound by a cast (or an aggregate or BIND over one) has no value in
    any of them: the cast failed on a value that is not a number (`xsd:integer("null")` emptied a MIN), which a
    relay model was told was a misspelt variable."""
    found = [(v, cast) for v in _never_bound(ctx) if (cast := _cast_of(ctx.query or "", v)) is not None]
    if not found:
        return None
    return {"vars": ", ".join("?" + v for v, _ in found), "cast": found[0][1]}


def _cast_of(query: str, var: str, depth: int = 3) -> str | None:
    """The cast (`xsd:integer(?h)`) the expression bound to `?var` (`… AS ?var`) applies, directly or through a
    variable bound the same way (BIND(xsd:integer(?h) AS ?n) … MIN(?n) AS ?m); None when there is none."""
    expression = _bound_expression(query, var)
    if expression is None or depth == 0:
        return None
    cast = _CAST.search(expression)
    if cast is not None:
        return _clip(_balanced(expression, cast.start()), 80)
    return next((c for inner in dict.fromkeys(re.findall(r"[?$](\w+)", expression))
                 if inner != var and (c := _cast_of(query, inner, depth - 1)) is not None), None)


def _bound_expression(query: str, var: str) -> str | None:
    """The text of the expression in `( … AS ?var)` (a SELECT expression or a BIND)."""
    found = re.search(rf"\bAS\s+[?$]{re.escape(var)}\b", query, re.I)
    if found is None:
        return None
    depth, i = 0, found.start() - 1
    while i >= 0:
        if query[i] == ")":
            depth += 1
        elif query[i] == "(":
            if depth == 0:
                return query[i + 1 : found.start()]
            depth -= 1
        i -= 1
    return None


def _balanced(text: str, start: int) -> str:
    """From `start` to the parenthesis that closes the first one opened after it."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:].strip()


def filter_alone(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A group `{ FILTER(...) }` with no pattern of its own (a relay model wrote `{ FILTER(...) } UNION { ... }`
    and got a plausible but silently short result)."""
    if ctx.query is None or ctx.result is None:
        return None
    toks = tokens(ctx.query)
    for i, t in enumerate(toks):
        if t.kind == "other" and t.text == "{":
            end = _filters_only(toks, i + 1)
            if end is not None:
                snippet = " ".join(x.text for x in toks[i:end + 1])
                return {"group": _clip(snippet, 120)}
    return None


def _filters_only(toks: Sequence[SparqlToken], i: int) -> int | None:
    """The index of the `}` closing a group that starts at `i` and holds one or more FILTERs and nothing else."""
    seen = False
    while i < len(toks) and toks[i].kind == "word" and toks[i].text.upper() == "FILTER":
        i += 1
        # FILTER(...), FILTER regex(...), FILTER NOT EXISTS { ... }: words, then one bracketed group.
        while i < len(toks) and toks[i].kind in ("word", "pname"):
            i += 1
        if i >= len(toks) or toks[i].text not in "({":
            return None
        depth = 0
        while i < len(toks):
            if toks[i].kind == "other" and toks[i].text in "({[":
                depth += 1
            elif toks[i].kind == "other" and toks[i].text in ")}]":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        i += 1
        seen = True
    return i if seen and i < len(toks) and toks[i].kind == "other" and toks[i].text == "}" else None


def labels_only(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """Every returned value is a literal, and those literals are names or labels."""
    r = _rows(ctx)
    if r is None or r.table is None or ctx.query is None or _AGGREGATE.search(ctx.query):
        return None
    table = r.table
    if any(t.kind != "literal" for row in table.rows for t in row.values()):
        return None
    vocab = ctx.memory.vocab or Vocabulary()
    uses_label = bool(set(query_iris(ctx.query, ctx.prefixes)) & set(vocab.labels))
    named = [v for v in table.vars if _NAME_VAR.search(v)]
    if not (uses_label or named):
        return None
    return {"vars": ", ".join("?" + v for v in (named or table.vars))}


def answer_shape(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The result meant as the answer does not fit what the question asks for (a count for "which", many
    rows for "the", no number for "how many", no date for "when", yes/no for anything else)."""
    r = ctx.result
    if ctx.question is None or r is None or r.outcome is not Outcome.OK or r.table is None or r.table.is_empty:
        return None
    question = ctx.question
    mismatch = projection_mismatch(analyse(tokenize(question)), r.table, opts.singular_rows,
                                   one=asks_for_one(question), query=ctx.query)
    return {"problem": mismatch} if mismatch else None


# -- engine


def _outcome(ctx: StepContext, *outcomes: Outcome) -> QueryResult | None:
    r = ctx.result
    return r if r is not None and r.outcome in outcomes else None


def undeclared_prefix(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The query failed and uses a prefix nobody declared."""
    if ctx.query is None or _outcome(ctx, Outcome.SYNTAX_ERROR, Outcome.ENGINE_ERROR) is None:
        return None
    missing = unknown_prefixes(ctx.query, ctx.prefixes)
    if not missing:
        return None
    known = ", ".join(f"{p}:" for p, _ in sorted(ctx.prefixes.items()))
    return {"prefixes": ", ".join(f"{p}:" for p in missing), "known": known}


def syntax_error(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The engine rejected the query's syntax (an undeclared prefix has its own guideline)."""
    r = _outcome(ctx, Outcome.SYNTAX_ERROR)
    if r is None or (ctx.query and unknown_prefixes(ctx.query, ctx.prefixes)):
        return None
    return {"message": _clip(r.message)}


def empty_result(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A SELECT ran and matched nothing."""
    r = ctx.result
    if r is None:
        return None
    empty = _no_rows(r)
    # A query that asks for an absence (NOT EXISTS, MINUS) is often run to see nothing: relay models checking
    # "no Encoder lacks a category" got the whole how-to-debug text three times per question.
    if not empty or (ctx.query and _asks_for_absence(ctx.query)):
        return None
    # Only the tools this step offers: a step without tools (retrieve's fix) was told to "run it on its own or look
    # at get_property_examples", which it cannot.
    offered = {t.name for t in ctx.tools}
    ways = [way for tool, way in (("execute_sparql", "run it on its own"),
                                  ("get_property_examples", "look at get_property_examples")) if tool in offered]
    return {"how": f" ({', or '.join(ways)})" if ways else ""}


def _no_rows(r: QueryResult) -> bool:
    """The query ran and matched no rows (a false ASK is an answer, not this)."""
    return r.outcome is Outcome.EMPTY or (r.outcome is Outcome.OK and r.table is not None and r.table.is_empty)


def _asks_for_absence(query: str) -> bool:
    words = [t.text.upper() for t in tokens(query) if t.kind == "word"]
    return "MINUS" in words or ("NOT", "EXISTS") in pairwise(words)


def timeout(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The query hit the time limit."""
    r = _outcome(ctx, Outcome.TIMEOUT)
    return {"message": _clip(r.message)} if r else None


def oversized_result(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A cap cut the result, or it is longer than any answer needs."""
    r = _rows(ctx)
    if r is None or r.table is None:
        return None
    if not r.table.truncated and len(r.table) <= opts.large_rows:
        return None
    cap = f" (cut by the {r.table.cap} cap)" if r.table.truncated and r.table.cap else ""
    return {"rows": len(r.table), "cap": cap}


def refused(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The guard refused the query."""
    r = _outcome(ctx, Outcome.REFUSED)
    return {"message": _clip(r.message)} if r else None


def engine_error(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """The engine failed or could not be reached."""
    r = _outcome(ctx, Outcome.ENGINE_ERROR, Outcome.UNREACHABLE)
    if r is None or (ctx.query and unknown_prefixes(ctx.query, ctx.prefixes)):
        return None
    return {"message": _clip(r.message)}


def lookup_failed(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """A non-SPARQL tool reported failure."""
    obs = ctx.observation
    if obs is None or obs.ok or ctx.result is not None or ctx.call is None or ctx.build is not None \
            or ctx.sql is not None:
        return None  # builder steps have their own guidelines
    seen = sorted(ctx.memory.seen)  # an identifier the model was shown makes the best example
    example = ctx.prefixes.compact(seen[0]) if seen else "prefix:name"
    return {"tool": ctx.call.name, "message": _clip(obs.text), "example_id": example}


def unknown_entity(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """An entity page with no edges at all: none of its own and none pointing at it (a thing other records refer to
    without a record of its own is an identifier of the graph; relay players were told it was not, and searched)."""
    obs = ctx.observation
    if obs is None or not isinstance(obs.value, EntityPage) or obs.value.edges or obs.value.incoming:
        return None
    return {"id": ctx.prefixes.compact(obs.value.iri)}


STEP_DETECTORS: dict[str, Detector] = {
    f.__name__: f
    for f in (
        no_action,
        malformed_call,
        unknown_tool,
        missing_argument,
        wrong_argument,
        several_actions,
        repeated_action,
        rerun_unchanged,
        stop_without_results,
        undeclared_prefix,
        syntax_error,
        empty_result,
        timeout,
        oversized_result,
        refused,
        engine_error,
        lookup_failed,
        unknown_entity,
        stop_answer_shape,
        absent_iri,
        filtered_value,
        typed_value,
        unseen_iri,
        unbound_projection,
        failed_cast,
        filter_alone,
        labels_only,
        answer_shape,
    )
}
