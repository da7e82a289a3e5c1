"""ERASER detectors for the query builder's step functions (queryagent.txt, appendix B table and appendix F):
each reads the builder's reasoning memory (the draft, which relations `get_relations` showed for which
target) and what the knowledge base answered, and names one guideline of the shared catalogue.

The builder fills a `BuildView` on each `StepContext`; other strategies leave it None, so these stay silent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparqlnav.feedback.view import BuildView
from sparqlnav.sparql.draft import OPERATORS, DraftTerm, iri_of, parse_term

if TYPE_CHECKING:
    from sparqlnav.feedback.eraser import FeedbackOptions, StepContext

Details = Mapping[str, object]
AGGREGATIONS = ("add_count", "add_max", "add_min")


def target_key(term: DraftTerm) -> str:
    """How a target is remembered: a variable's name or an entity's IRI."""
    return iri_of(term) or term.text


def _view(ctx: StepContext, *tools: str) -> BuildView | None:
    if ctx.build is None or ctx.call is None or ctx.call.name not in tools or ctx.call.parse_error:
        return None
    return ctx.build


def _arg(ctx: StepContext, name: str) -> str:
    assert ctx.call is not None
    value = ctx.call.arguments.get(name)
    return value.strip() if isinstance(value, str) else ""


def _show(ctx: StepContext, term: DraftTerm) -> str:
    iri = iri_of(term)
    return ctx.prefixes.compact(iri) if iri else term.text


def _variables(view: BuildView) -> str:
    return ", ".join(view.draft.variables()) or "(none yet: add_fact creates them)"


def relations_unknown_target(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """get_relations on something that is neither a variable of the query nor an entity seen so far."""
    view = _view(ctx, "get_relations")
    if view is None:
        return None
    raw = _arg(ctx, "target")
    term = parse_term(raw, ctx.prefixes)
    if term is not None:
        if term.kind == "var" and term.text in view.draft.variables():
            return None
        iri = iri_of(term)
        if iri is not None and iri in ctx.memory.seen:
            return None
    choices = [*view.draft.variables(), *view.linked]
    return {"target": raw or "(nothing)", "choices": ", ".join(choices) or "(none: use search first)"}


def relations_empty(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """get_relations found no relation at all."""
    view = _view(ctx, "get_relations")
    if view is None or view.relations_found != 0:
        return None
    return {"target": _arg(ctx, "target")}


def _fact_terms(ctx: StepContext) -> tuple[DraftTerm, DraftTerm, DraftTerm] | None:
    p = ctx.prefixes
    head, rel, tail = (parse_term(_arg(ctx, k), p) for k in ("head", "relation", "tail"))
    return (head, rel, tail) if head and rel and tail else None


def fact_two_new_variables(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """add_fact whose head and tail are both variables the query does not have yet."""
    view = _view(ctx, "add_fact")
    terms = _fact_terms(ctx) if view else None
    if view is None or terms is None:
        return None
    head, _, tail = terms
    known = view.draft.variables()
    if head.kind == "var" and tail.kind == "var" and head.text not in known and tail.text not in known:
        return {"head": head.text, "tail": tail.text, "vars": _variables(view)}
    return None


def relation_not_shown(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """add_fact with a relation that no get_relations call returned."""
    view = _view(ctx, "add_fact")
    terms = _fact_terms(ctx) if view else None
    if view is None or terms is None:
        return None
    head, rel, tail = terms
    shown = frozenset().union(*view.relations.values()) if view.relations else frozenset()
    if iri_of(rel) in shown:
        return None
    nearby = sorted(view.relations.get(target_key(head), frozenset()) | view.relations.get(target_key(tail), frozenset()))
    if nearby:
        options = ", ".join(ctx.prefixes.compact(i) for i in nearby[:15])
    else:
        options = "none yet for these terms: call get_relations on " + " or ".join(
            _show(ctx, t) for t in (head, tail) if t.kind == "iri" or t.text in view.draft.variables()
        )
    return {"relation": _arg(ctx, "relation"), "options": options}


def _empty_fact(ctx: StepContext) -> tuple[BuildView, tuple[DraftTerm, DraftTerm, DraftTerm]] | None:
    view = _view(ctx, "add_fact")
    terms = _fact_terms(ctx) if view else None
    if view is None or terms is None or view.rows != 0:
        return None
    return view, terms


def fact_empty_after_relations(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """add_fact made the query return nothing although get_relations was asked about its head or tail."""
    found = _empty_fact(ctx)
    if found is None:
        return None
    view, (head, rel, tail) = found
    if target_key(head) not in view.relations and target_key(tail) not in view.relations:
        return None
    return {"fact": f"{_show(ctx, head)} {_show(ctx, rel)} {_show(ctx, tail)}"}


def fact_empty_without_relations(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """add_fact made the query return nothing and get_relations was never asked about its head or tail."""
    found = _empty_fact(ctx)
    if found is None:
        return None
    view, (head, rel, tail) = found
    if target_key(head) in view.relations or target_key(tail) in view.relations:
        return None
    ends = [_show(ctx, t) for t in (head, tail) if t.kind != "literal"]
    return {"fact": f"{_show(ctx, head)} {_show(ctx, rel)} {_show(ctx, tail)}", "ends": " or ".join(ends)}


def filter_before_relations(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """add_filter before any get_relations call."""
    view = _view(ctx, "add_filter")
    if view is None or view.relations:
        return None
    return {}


def filter_bad_operator(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """add_filter with an operator that is not a comparison."""
    view = _view(ctx, "add_filter")
    if view is None or _arg(ctx, "op") in OPERATORS:
        return None
    return {"op": _arg(ctx, "op") or "(nothing)", "ops": " ".join(OPERATORS)}


def filter_bad_left(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """add_filter whose first argument is not a variable of the query."""
    view = _view(ctx, "add_filter")
    if view is None:
        return None
    left = parse_term(_arg(ctx, "left"), ctx.prefixes)
    if left is not None and left.kind == "var" and left.text in view.draft.variables():
        return None
    return {"left": _arg(ctx, "left") or "(nothing)", "vars": _variables(view)}


def unknown_variable(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """set_answer, add_count, add_max or add_min on a variable the query does not have."""
    view = _view(ctx, "set_answer", *AGGREGATIONS)
    if view is None:
        return None
    var = parse_term(_arg(ctx, "var"), ctx.prefixes)
    if var is not None and var.kind == "var" and var.text in view.draft.variables():
        return None
    assert ctx.call is not None
    return {"tool": ctx.call.name, "var": _arg(ctx, "var") or "(nothing)", "vars": _variables(view)}


def aggregation_missing(ctx: StepContext, opts: FeedbackOptions) -> Details | None:
    """execute() while the question asks for a count or an extreme and the query has none (said once a run)."""
    view = _view(ctx, "execute")
    if view is None or not view.wanted or "aggregation_missing" in view.fired:
        return None
    if view.draft.aggregate is not None and view.draft.aggregate[0] in view.wanted:
        return None
    return {"tools": " or ".join(f"add_{w}()" for w in view.wanted)}


BUILD_DETECTORS = {
    f.__name__: f
    for f in (
        relations_unknown_target,
        relations_empty,
        fact_two_new_variables,
        relation_not_shown,
        fact_empty_after_relations,
        fact_empty_without_relations,
        filter_before_relations,
        filter_bad_operator,
        filter_bad_left,
        unknown_variable,
        aggregation_missing,
    )
}
