"""The query builder's ERASER triggers (feedback/builder.py), one at a time: each fires on its case, names
what went wrong, and stays silent on the correct step next to it."""

from __future__ import annotations

from typing import Any

import pytest

from sparqlnav.feedback.builder import BuildView
from sparqlnav.feedback.checker import Feedback
from sparqlnav.feedback.eraser import StepContext
from sparqlnav.feedback.memory import Memory
from sparqlnav.llm import ToolCall
from sparqlnav.sparql.draft import Draft, Fact, parse_term
from sparqlnav.sparql.prefixes import PrefixMap
from sparqlnav.strategies.builder import BUILD_TOOLS

PV = "http://ld.company.org/prod-vocab/"
PRODI = "http://ld.company.org/prod-instances/"
PREFIXES = PrefixMap.default({"pv": PV, "prodi": PRODI})
HOCH = "prodi:empl-Heinrich.Hoch"
FEEDBACK = Feedback()


def term(text: str) -> Any:
    found = parse_term(text, PREFIXES)
    assert found is not None
    return found


# A draft with one fact: Heinrich Hoch's manager is ?manager.
DRAFT = Draft().add_fact(Fact(term(HOCH), term("pv:hasManager"), term("?manager")))
SHOWN = {PRODI + "empl-Heinrich.Hoch": frozenset({PV + "hasManager", PV + "memberOf"})}


def step(tool: str, view: BuildView | None = None, **arguments: Any) -> StepContext:
    memory = Memory(PREFIXES)
    memory.note_text(HOCH)  # linked in the question
    call = ToolCall(id="c1", name=tool, arguments=arguments)
    return StepContext(memory, BUILD_TOOLS.specs(), call=call, build=view or BuildView(DRAFT, SHOWN, (HOCH,)))


def fired(ctx: StepContext) -> list[str]:
    return [g.id for g in FEEDBACK.check(ctx)]


def text(ctx: StepContext, gid: str) -> str:
    return next(g.text for g in FEEDBACK.check(ctx) if g.id == gid)


def test_every_builder_trigger_is_in_the_one_catalogue() -> None:
    for gid in (
        "relations_unknown_target", "relations_empty", "fact_two_new_variables", "relation_not_shown",
        "fact_empty_after_relations", "fact_empty_without_relations", "filter_before_relations",
        "filter_bad_operator", "filter_bad_left", "unknown_variable", "aggregation_missing",
    ):  # fmt: skip
        assert gid in FEEDBACK.catalogue and gid in FEEDBACK.detectors


def test_get_relations_on_a_target_that_never_appeared() -> None:
    ctx = step("get_relations", target="prodi:empl-Someone.Else")
    assert fired(ctx) == ["relations_unknown_target"]
    assert "prodi:empl-Someone.Else" in text(ctx, "relations_unknown_target")
    assert "?manager" in text(ctx, "relations_unknown_target")  # offered instead
    assert fired(step("get_relations", target="?manager")) == []
    assert fired(step("get_relations", target=HOCH)) == []
    assert fired(step("get_relations", target="?nobody")) == ["relations_unknown_target"]


def test_get_relations_that_finds_nothing() -> None:
    view = BuildView(DRAFT, SHOWN, (HOCH,), relations_found=0)
    assert fired(step("get_relations", view, target=HOCH)) == ["relations_empty"]
    view.relations_found = 9
    assert fired(step("get_relations", view, target=HOCH)) == []


def test_add_fact_with_two_new_variables() -> None:
    ctx = step("add_fact", head="?a", relation="pv:memberOf", tail="?b")
    assert fired(ctx) == ["fact_two_new_variables"]
    assert "?a" in text(ctx, "fact_two_new_variables") and "?manager" in text(ctx, "fact_two_new_variables")
    assert fired(step("add_fact", head="?manager", relation="pv:memberOf", tail="?dept")) == []


def test_add_fact_with_a_relation_get_relations_never_showed() -> None:
    ctx = step("add_fact", head=HOCH, relation="pv:phone", tail="?phone")
    assert fired(ctx) == ["relation_not_shown"]
    assert "pv:hasManager" in text(ctx, "relation_not_shown")  # the ones that were shown
    assert fired(step("add_fact", head=HOCH, relation="pv:memberOf", tail="?dept")) == []


@pytest.mark.parametrize(
    ("shown", "gid"),
    [(SHOWN, "fact_empty_after_relations"), ({"?other": frozenset({PV + "memberOf"})}, "fact_empty_without_relations")],
)
def test_add_fact_with_an_empty_result(shown: dict[str, frozenset[str]], gid: str) -> None:
    view = BuildView(DRAFT, shown, (HOCH,), rows=0)
    ctx = step("add_fact", view, head=HOCH, relation="pv:memberOf", tail="?dept")
    assert fired(ctx) == [gid]
    assert "pv:memberOf" in text(ctx, gid)
    view.rows = 1
    assert fired(step("add_fact", view, head=HOCH, relation="pv:memberOf", tail="?dept")) == []


def test_add_filter_before_get_relations() -> None:
    view = BuildView(DRAFT, {}, (HOCH,))
    assert fired(step("add_filter", view, left="?manager", op="!=", right=HOCH)) == ["filter_before_relations"]
    assert fired(step("add_filter", left="?manager", op="!=", right=HOCH)) == []


def test_add_filter_with_an_invalid_operator() -> None:
    ctx = step("add_filter", left="?manager", op="pv:memberOf", right="?dept")
    assert fired(ctx) == ["filter_bad_operator"]
    assert "pv:memberOf" in text(ctx, "filter_bad_operator") and "<=" in text(ctx, "filter_bad_operator")
    for op in ("=", "!=", "<", "<=", ">", ">="):
        assert fired(step("add_filter", left="?manager", op=op, right="5")) == []


def test_add_filter_with_an_invalid_first_argument() -> None:
    assert fired(step("add_filter", left=HOCH, op="=", right="?manager")) == ["filter_bad_left"]
    assert fired(step("add_filter", left="?price", op="<", right="5")) == ["filter_bad_left"]


def test_set_answer_or_aggregate_on_a_variable_not_in_the_query() -> None:
    for tool in ("set_answer", "add_count", "add_max", "add_min"):
        ctx = step(tool, var="?boat")
        assert fired(ctx) == ["unknown_variable"]
        assert "?boat" in text(ctx, "unknown_variable") and "?manager" in text(ctx, "unknown_variable")
        assert fired(step(tool, var="?manager")) == []


def test_finishing_without_the_aggregation_the_question_asks_for() -> None:
    view = BuildView(DRAFT, SHOWN, (HOCH,), wanted=("count",))
    ctx = step("execute", view)
    assert fired(ctx) == ["aggregation_missing"]
    assert "add_count()" in text(ctx, "aggregation_missing")
    # said once: a model that is sure may finish anyway
    assert fired(step("execute", BuildView(DRAFT, SHOWN, (HOCH,), ("count",), frozenset({"aggregation_missing"})))) == []
    counted = DRAFT.set_aggregate("count", "?manager")
    assert fired(step("execute", BuildView(counted, SHOWN, (HOCH,), wanted=("count",)))) == []
    assert fired(step("execute")) == []  # the question wants no aggregation


def test_wrong_number_of_arguments_and_unknown_actions_use_the_shared_interpreter_guidelines() -> None:
    assert fired(step("add_fact", head="?manager", relation="pv:memberOf")) == ["missing_argument"]
    assert fired(step("add_fact", head="?manager", relation="pv:memberOf", tail="?d", extra="x")) == [
        "wrong_argument"
    ]
    assert fired(step("add_relation", head="?manager")) == ["unknown_tool"]


def test_builder_triggers_are_silent_outside_the_builder() -> None:
    memory = Memory(PREFIXES)
    ctx = StepContext(memory, BUILD_TOOLS.specs(), call=ToolCall(id="c", name="add_filter", arguments={"left": "x", "op": "~", "right": "y"}))
    assert [g for g in fired(ctx) if g.startswith(("filter_", "relation", "fact_"))] == []
