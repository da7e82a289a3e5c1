"""Each guideline trigger of the feedback module, on real query results from the demo KG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparqlnav.feedback.catalogue import Guideline, load_catalogue, render_guidelines
from sparqlnav.feedback.checker import DETECTORS, Feedback
from sparqlnav.feedback.eraser import FeedbackOptions, StepContext
from sparqlnav.feedback.memory import Memory, Record, canonical_query, iris_in_text, query_iris
from sparqlnav.graph.endpoint import Outcome, QueryResult
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import ToolCall
from sparqlnav.sparql.prefixes import declare_prefixes
from sparqlnav.strategies.explore import EXPLORE_TOOLS as EXPLORE_REGISTRY
from sparqlnav.tools.lookup import EntityPage
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace

EXPLORE_TOOLS = EXPLORE_REGISTRY.specs()  # what the agent offers the model
WD = "https://demo.sparqlnav.org/entity/"
DISCOVERERS_OF_OXYGEN = "SELECT ?who WHERE { wd:Q8 wdt:P61 ?who }"


@pytest.fixture(scope="module")
def tools(demo: KnowledgeGraph) -> Toolkit:
    return Toolkit(demo, Trace())


@pytest.fixture
def memory(demo: KnowledgeGraph) -> Memory:
    return Memory(demo.prefixes, demo.vocab)


def call(name: str, raw: str | None = None, **arguments: Any) -> ToolCall:
    if raw is not None:
        return ToolCall(
            id="c1", name=name, raw_arguments=raw, parse_error="arguments are not valid JSON"
        )
    return ToolCall(id="c1", name=name, arguments=arguments)


def fired(ctx: StepContext, stage: Any = None, options: FeedbackOptions | None = None) -> list[str]:
    return [g.id for g in Feedback(options=options).check(ctx, stage)]


def ran(tools: Toolkit, memory: Memory, query: str, **kw: Any) -> StepContext:
    """A context for an execute_sparql step, after it really ran on the demo KG."""
    full = declare_prefixes(query, tools.kg.prefixes.mapping).query
    obs = tools.execute_sparql(full)
    ctx = StepContext(
        memory, EXPLORE_TOOLS, call=call("execute_sparql", query=query), query=full, **kw
    )
    ctx.observation, ctx.result = obs, obs.value
    return ctx


def see(memory: Memory, tools: Toolkit, text: str) -> None:
    """Record a search step whose observation the model saw."""
    obs = tools.search(text)
    memory.record(Record("search", {"query": text}), obs.text)


# -- the catalogue


def test_catalogue_is_data_with_one_detector_per_guideline() -> None:
    catalogue = load_catalogue()
    assert list(catalogue) == list(DETECTORS)  # same ids, same order
    assert {g.source for g in catalogue.values()} == {"engine", "interpreter", "memory"}
    for g in catalogue.values():
        assert g.trigger and g.text and "\n" not in g.text
    assert catalogue["malformed_call"].blocks and not catalogue["empty_result"].blocks


def test_a_catalogue_without_a_detector_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        "- {id: made_up, source: memory, stage: after, trigger: never, text: hello}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="made_up"):
        Feedback(load_catalogue(path))


def test_render_fills_details_and_keeps_unknown_placeholders() -> None:
    g = Guideline("x", "engine", "after", False, "t", "at {where}: {message}")
    shown = g.render({"message": "boom"})
    assert shown.text == "at {where}: boom" and shown.details == {"message": "boom"}
    assert render_guidelines([shown]) == "Guideline (x): at {where}: boom"


# -- interpreter


def test_no_action(memory: Memory) -> None:
    ctx = StepContext(memory, EXPLORE_TOOLS, call=None)
    (g,) = Feedback().check(ctx, "before")
    assert g.id == "no_action" and "execute_sparql()" in g.text and g.blocks
    assert g.text.endswith("call stop().")


def test_no_action_names_the_builders_finishing_tool(memory: Memory) -> None:
    from sparqlnav.strategies.builder import BUILD_TOOLS

    (g,) = Feedback().check(StepContext(memory, BUILD_TOOLS.specs(), call=None), "before")
    assert g.id == "no_action" and g.text.endswith("call execute().") and "stop()" not in g.text


def test_malformed_call(memory: Memory) -> None:
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("execute_sparql", raw='{"query": "SELECT'))
    (g,) = Feedback().check(ctx, "before")
    assert g.id == "malformed_call"
    assert "arguments are not valid JSON" in g.text and 'execute_sparql({"query": "…"})' in g.text


def test_unknown_tool(memory: Memory) -> None:
    assert fired(StepContext(memory, EXPLORE_TOOLS, call=call("get_wikidata_entry", id="Q8"))) == [
        "unknown_tool"
    ]
    assert fired(StepContext(memory, EXPLORE_TOOLS, call=call("get_entity", id="wd:Q8"))) == []


def test_missing_argument(memory: Memory) -> None:
    for args in ({}, {"query": "   "}):
        ctx = StepContext(memory, EXPLORE_TOOLS, call=call("search", **args))
        (g,) = Feedback().check(ctx)
        assert g.id == "missing_argument" and "query" in g.text


def test_wrong_argument(memory: Memory) -> None:
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("get_entity", id=8, lang="en"))
    (g,) = Feedback().check(ctx)
    assert g.id == "wrong_argument"
    assert "unknown argument 'lang'" in g.text and "id must be a string, not int" in g.text


def test_several_actions_does_not_block(memory: Memory) -> None:
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("search", query="oxygen"), extra_calls=2)
    (g,) = Feedback().check(ctx, "before")
    assert g.id == "several_actions" and not g.blocks and "3 actions" in g.text


# -- memory


def test_repeated_action_ignores_whitespace(memory: Memory) -> None:
    memory.record(Record("search", {"query": "oxygen"}))
    memory.record(Record("execute_sparql", {"query": "SELECT ?x\nWHERE { ?x ?p ?o }"}))
    again = StepContext(
        memory, EXPLORE_TOOLS, call=call("execute_sparql", query="SELECT ?x WHERE {  ?x ?p ?o }")
    )
    (g,) = Feedback().check(again, "before")
    assert g.id == "repeated_action" and "step 2" in g.text
    other = StepContext(memory, EXPLORE_TOOLS, call=call("search", query="oxygen discoverer"))
    assert fired(other, "before") == []


def test_rerun_unchanged_after_a_failure(tools: Toolkit, memory: Memory) -> None:
    failed = ran(tools, memory, "SELECT ?who WHERE { wd:Q8 wdt:P999 ?who }")
    assert failed.result is not None and failed.result.outcome is Outcome.EMPTY
    memory.record(
        Record("execute_sparql", {"query": "x"}, query=failed.query, result=failed.result)
    )
    # Same query, other layout, keyword case and a prefixed name written out in full.
    rerun = "select ?who where {\n  <https://demo.sparqlnav.org/entity/Q8> wdt:P999 ?who\n}"
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("execute_sparql", query=rerun), query=rerun)
    assert "rerun_unchanged" in fired(ctx, "before")
    assert canonical_query(rerun, memory.prefixes) == canonical_query(
        failed.query or "", memory.prefixes
    )
    changed = rerun.replace("P999", "P61")
    ctx = StepContext(
        memory, EXPLORE_TOOLS, call=call("execute_sparql", query=changed), query=changed
    )
    assert "rerun_unchanged" not in fired(ctx, "before")


def test_a_rerun_of_a_query_that_worked_is_not_flagged(tools: Toolkit, memory: Memory) -> None:
    ok = ran(tools, memory, DISCOVERERS_OF_OXYGEN)
    memory.record(Record("execute_sparql", {"query": "x"}, query=ok.query, result=ok.result))
    again = "SELECT  ?who  WHERE { wd:Q8 wdt:P61 ?who . }"
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("execute_sparql", query=again), query=again)
    assert "rerun_unchanged" not in fired(ctx, "before")


def test_stop_without_results(tools: Toolkit, memory: Memory) -> None:
    stop = StepContext(memory, EXPLORE_TOOLS, call=call("stop"), finishing=True)
    (g,) = Feedback().check(stop, "before")
    assert g.id == "stop_without_results" and "no query has been run" in g.text
    empty = ran(tools, memory, "SELECT ?who WHERE { wd:Q8 wdt:P999 ?who }")
    memory.record(Record("execute_sparql", {}, query=empty.query, result=empty.result))
    assert "step 1) returned no rows" in Feedback().check(stop, "before")[0].text
    good = ran(tools, memory, DISCOVERERS_OF_OXYGEN)
    memory.record(Record("execute_sparql", {}, query=good.query, result=good.result))
    memory.record(Record("search", {"query": "oxygen"}))  # a later lookup does not hide the query
    assert fired(stop, "before") == []


def test_unseen_iri(tools: Toolkit, memory: Memory) -> None:
    ctx = ran(tools, memory, "SELECT ?who WHERE { wd:Q8 wdt:P61 ?who . ?who wdt:P27 wd:Q999999 }")
    assert ctx.result is not None and ctx.result.table is not None and ctx.result.table.is_empty
    unseen = [g for g in Feedback().check(ctx, "after") if g.id == "unseen_iri"]
    assert len(unseen) == 1 and "wd:Q8, wd:P61, wd:P27, wd:Q999999" in unseen[0].text
    see(memory, tools, "oxygen")  # shows wd:Q8
    see(memory, tools, "discoverer")  # shows wd:P61: wdt:P61 is the same property
    see(memory, tools, "country of citizenship")
    assert {WD + "Q8", WD + "P61"} <= memory.seen
    assert "wd:Q999999" in Feedback().check(ctx, "after")[1].text
    memory.truncate(1)  # a rollback forgets what the dropped steps showed
    assert "wd:P61" in next(g for g in Feedback().check(ctx, "after") if g.id == "unseen_iri").text
    # A query that returned rows confirms its names: no warning, and later queries count them as seen.
    good = ran(tools, memory, DISCOVERERS_OF_OXYGEN)
    assert "unseen_iri" not in fired(good, "after")
    memory.record(Record("execute_sparql", {}, query=good.query, result=good.result))
    assert WD + "P61" in memory.seen


def test_absent_iri_names_the_identifiers_the_graph_lacks(tools: Toolkit, memory: Memory) -> None:
    # A false ASK over a guessed identifier read as "No" (a relay model's ASK over a guessed BESTIARY creature).
    ctx = ran(tools, memory, "ASK { wd:Q8 wdt:P61 wd:Q999999 }", absent_of=tools.absent)
    assert ctx.result is not None and ctx.result.table is not None and ctx.result.table.boolean is False
    (g,) = Feedback().check(ctx, "after")  # unseen_iri gives way: the graph lacks it, not just this run's steps
    assert g.id == "absent_iri" and g.text.startswith("wd:Q999999 occur nowhere in this graph")
    # A count of nothing is nothing too.
    zero = ran(tools, memory, "SELECT (COUNT(?w) AS ?n) WHERE { wd:Q999999 wdt:P61 ?w }", absent_of=tools.absent)
    assert fired(zero, "after") == ["absent_iri"]
    # Identifiers the graph has, and a false ASK: no absent_iri (unseen_iri, from memory, still speaks).
    known = ran(tools, memory, "ASK { wd:Q1 wdt:P31 wd:Q213 }", absent_of=tools.absent)
    assert fired(known, "after") == ["unseen_iri"]
    # Rows: nothing to explain, and the graph is not asked.
    asked: list[list[str]] = []
    rows = ran(tools, memory, DISCOVERERS_OF_OXYGEN, absent_of=lambda iris: asked.append(list(iris)) or [])
    assert fired(rows, "after") == [] and asked == []


def test_unseen_iri_ignores_shared_vocabularies_and_prefix_lines(memory: Memory) -> None:
    query = (
        "PREFIX ex: <https://demo.sparqlnav.org/entity/>\n"
        "SELECT ?x ?l WHERE { ?x a owl:Class ; rdfs:label ?l . ?x schema:description ?d }"
    )
    assert query_iris(query, memory.prefixes) == [
        "http://www.w3.org/2002/07/owl#Class",
        "http://www.w3.org/2000/01/rdf-schema#label",
        "http://schema.org/description",
    ]
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("execute_sparql", query=query), query=query)
    ctx.result = QueryResult(query, Outcome.EMPTY)
    assert "unseen_iri" not in fired(ctx, "after")


def test_iris_in_question_count_as_seen(demo: KnowledgeGraph) -> None:
    memory = Memory(demo.prefixes, demo.vocab)
    memory.note_text("What did <https://demo.sparqlnav.org/entity/Q1060> discover?")
    assert WD + "Q1060" in memory.seen
    assert iris_in_text("1774-08-01T00:00:00Z (wd:Q8).", demo.prefixes) == {WD + "Q8"}


def test_unbound_projection(tools: Toolkit, memory: Memory) -> None:
    ctx = ran(tools, memory, "SELECT ?who ?whom WHERE { wd:Q8 wdt:P61 ?who }")
    assert fired(ctx, "after") == ["unbound_projection"]
    assert "?whom" in Feedback().check(ctx, "after")[0].text
    assert fired(ran(tools, memory, DISCOVERERS_OF_OXYGEN), "after") == []


def test_filter_alone_in_a_group(tools: Toolkit, memory: Memory) -> None:
    # A relay model's trap: the first branch's FILTER sees no ?n, so it adds nothing, and the rows look plausible.
    memory.note_text("wd:Q8 wdt:P61 wd:Q1010 wd:Q1011 rdfs:label")
    trap = (
        "SELECT ?who WHERE { wd:Q8 wdt:P61 ?who . ?who rdfs:label ?n . "
        '{ FILTER(CONTAINS(?n, "Priestley")) } UNION { FILTER(CONTAINS(?n, "Scheele")) } }'
    )
    ctx = ran(tools, memory, trap)
    assert ctx.result is not None and ctx.result.ok and ctx.result.table is not None and ctx.result.table.is_empty
    (g,) = [g for g in Feedback().check(ctx, "after") if g.id == "filter_alone"]
    assert '{ FILTER ( CONTAINS ( ?n , "Priestley" ) ) }' in g.text and "joined with ||" in g.text
    # FILTERs next to the patterns that bind their variables are what the guideline asks for: silence.
    fixed = (
        "SELECT ?who WHERE { wd:Q8 wdt:P61 ?who . ?who rdfs:label ?n . "
        'FILTER(CONTAINS(?n, "Priestley") || CONTAINS(?n, "Scheele")) }'
    )
    assert "filter_alone" not in fired(ran(tools, memory, fixed), "after")
    absent = "SELECT ?who WHERE { wd:Q8 wdt:P61 ?who FILTER NOT EXISTS { ?who wdt:P31 wd:Q5 } }"
    assert "filter_alone" not in fired(ran(tools, memory, absent), "after")
    alone = "SELECT ?who WHERE { wd:Q8 wdt:P61 ?who { FILTER NOT EXISTS { ?who wdt:P31 wd:Q5 } } }"
    assert "filter_alone" in fired(ran(tools, memory, alone), "after")


def test_labels_only(tools: Toolkit, memory: Memory) -> None:
    labels = ran(tools, memory, "SELECT ?name WHERE { wd:Q8 wdt:P61 ?who . ?who rdfs:label ?name }")
    (g,) = Feedback().check(labels, "after")
    assert g.id == "labels_only" and "?name" in g.text
    both = ran(
        tools, memory, "SELECT ?who ?name WHERE { wd:Q8 wdt:P61 ?who . ?who rdfs:label ?name }"
    )
    assert fired(both, "after") == []
    literal = ran(tools, memory, "SELECT ?n WHERE { wd:Q79 wdt:P1086 ?n }")  # a number is no label
    assert fired(literal, "after") == []
    count = ran(tools, memory, "SELECT (COUNT(?l) AS ?label) WHERE { ?x rdfs:label ?l }")
    assert fired(count, "after") == []


def test_answer_shape_only_for_a_result_meant_as_the_answer(tools: Toolkit, memory: Memory) -> None:
    counting = "SELECT (COUNT(?who) AS ?n) WHERE { wd:Q8 wdt:P61 ?who }"
    which = "Which people discovered oxygen?"
    (g,) = Feedback().check(ran(tools, memory, counting, question=which), "after")
    assert g.id == "answer_shape" and "only a count" in g.text
    # The same count answers "how many"; without a question (an exploring step) nothing is said.
    assert fired(ran(tools, memory, counting, question="How many people discovered oxygen?"), "after") == []
    assert fired(ran(tools, memory, counting), "after") == []
    assert fired(ran(tools, memory, DISCOVERERS_OF_OXYGEN, question=which), "after") == []
    # Two discoverers for a question asking for one: over a limit of one row, not over the default seven.
    one = "Who is the discoverer of oxygen?"
    assert fired(ran(tools, memory, DISCOVERERS_OF_OXYGEN, question=one), "after") == []
    narrow = FeedbackOptions(singular_rows=1)
    (g,) = Feedback(options=narrow).check(ran(tools, memory, DISCOVERERS_OF_OXYGEN, question=one), "after")
    assert g.id == "answer_shape" and "the result has 2 rows" in g.text


# -- engine


def test_syntax_error_carries_the_engine_message(tools: Toolkit, memory: Memory) -> None:
    ctx = ran(tools, memory, "SELECT ?who WHERE { wd:Q8 wdt:P61 ?who ")
    (g,) = Feedback().check(ctx, "after")
    assert g.id == "syntax_error" and ctx.result is not None
    assert ctx.result.message.startswith("error at 3:")  # after the two PREFIX lines
    assert ctx.result.message[:40] in g.text and len(g.text) < 600  # clipped, not the whole list


def test_undeclared_prefix_replaces_the_generic_syntax_guideline(
    tools: Toolkit, memory: Memory
) -> None:
    ctx = ran(tools, memory, "SELECT ?who WHERE { wd:Q8 dbo:discoverer ?who }")
    assert ctx.result is not None and ctx.result.outcome is Outcome.SYNTAX_ERROR
    (g,) = Feedback().check(ctx, "after")
    assert g.id == "undeclared_prefix" and "dbo:" in g.text and "wdt:" in g.text


def test_empty_result(tools: Toolkit, memory: Memory) -> None:
    # Nothing showed wd:Q8 or wd:P999 before: an empty result also names them (issue 14: unseen_iri now
    # fires after the query, only when it matched nothing).
    assert fired(ran(tools, memory, "SELECT ?who WHERE { wd:Q8 wdt:P999 ?who }"), "after") == [
        "empty_result",
        "unseen_iri",
    ]
    # A false ASK is an answer, not an empty result; but over identifiers nothing showed, "No" may only mean a
    # misremembered name, so unseen_iri speaks.
    assert fired(ran(tools, memory, "ASK { wd:Q1 wdt:P31 wd:Q213 }"), "after") == ["unseen_iri"]
    memory.note_text("wd:Q1 (hydrogen) wdt:P31 (instance of) wd:Q213")  # as an observation would show them
    assert fired(ran(tools, memory, "ASK { wd:Q1 wdt:P31 wd:Q213 }"), "after") == []
    # Nor is nothing from a query that asks for an absence: the model ran it to see none.
    absent = "SELECT ?x WHERE { ?x wdt:P31 ?c FILTER NOT EXISTS { ?x ?p ?o } }"
    assert "empty_result" not in fired(ran(tools, memory, absent), "after")
    absent = "SELECT ?x WHERE { ?x wdt:P31 ?c MINUS { ?x wdt:P31 ?c } }"
    assert "empty_result" not in fired(ran(tools, memory, absent), "after")


@pytest.mark.slow
def test_timeout(demo: KnowledgeGraph, memory: Memory) -> None:
    query = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"
    result = demo.endpoint.query(query, timeout_s=0.5)
    ctx = StepContext(
        memory, EXPLORE_TOOLS, call=call("execute_sparql", query=query), query=query, result=result
    )
    (g,) = Feedback().check(ctx, "after")
    assert g.id == "timeout" and "0.5 s" in g.text


def test_oversized_result(tools: Toolkit, memory: Memory) -> None:
    ctx = ran(tools, memory, "SELECT ?s ?p ?o WHERE { ?s ?p ?o }")
    got = Feedback(options=FeedbackOptions(large_rows=100)).check(ctx, "after")
    assert [x.id for x in got] == ["oversized_result"]
    assert ctx.result is not None and f"returned {len(ctx.result.table or [])} rows" in got[0].text
    assert fired(ctx, "after") == ["oversized_result"]  # 5,000+ rows exceed the default too
    small = ran(tools, memory, "SELECT ?o WHERE { wd:Q8 wdt:P61 ?o }")
    assert fired(small, "after", FeedbackOptions(large_rows=100)) == []


def test_refused_update(tools: Toolkit, memory: Memory) -> None:
    ctx = ran(tools, memory, "DELETE WHERE { ?s ?p ?o }")
    (g,) = Feedback().check(ctx, "after")
    assert g.id == "refused" and "DELETE" in g.text


def test_engine_error(memory: Memory) -> None:
    query = "SELECT * WHERE { ?s ?p ?o }"
    result = QueryResult(query, Outcome.UNREACHABLE, message="connection refused by 127.0.0.1:9")
    ctx = StepContext(
        memory, EXPLORE_TOOLS, call=call("execute_sparql", query=query), query=query, result=result
    )
    (g,) = Feedback().check(ctx, "after")
    assert g.id == "engine_error" and "connection refused" in g.text


def test_lookup_failed_and_unknown_entity(tools: Toolkit, memory: Memory) -> None:
    obs = tools.get_entity("nosuchprefix:thing")
    ctx = StepContext(
        memory, EXPLORE_TOOLS, call=call("get_entity", id="nosuchprefix:thing"), observation=obs
    )
    (g,) = Feedback().check(ctx, "after")
    assert g.id == "lookup_failed" and "cannot resolve 'nosuchprefix:thing'" in g.text
    assert "such as prefix:name" in g.text
    see(memory, tools, "oxygen")
    example = tools.kg.prefixes.compact(sorted(memory.seen)[0])
    assert example.startswith("wd:") and example in tools.search("oxygen").text  # seen in that search
    assert f"such as {example}," in Feedback().check(ctx, "after")[0].text
    obs = tools.get_entity("wd:Q99999999")
    ctx = StepContext(
        memory, EXPLORE_TOOLS, call=call("get_entity", id="wd:Q99999999"), observation=obs
    )
    (g,) = Feedback().check(ctx, "after")
    assert g.id == "unknown_entity" and "wd:Q99999999" in g.text
    # a thing the graph refers to without statements of its own is one of its identifiers: no "probably not"
    referred = "<http://wikiba.se/ontology#Time>"
    obs = tools.get_entity(referred)
    assert isinstance(obs.value, EntityPage) and not obs.value.edges and obs.value.incoming
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("get_entity", id=referred), observation=obs)
    assert fired(ctx, "after") == []
    obs = tools.get_entity("wd:Q8")
    ctx = StepContext(memory, EXPLORE_TOOLS, call=call("get_entity", id="wd:Q8"), observation=obs)
    assert fired(ctx, "after") == []


def test_a_good_query_fires_nothing(tools: Toolkit, memory: Memory) -> None:
    see(memory, tools, "oxygen")
    see(memory, tools, "discoverer")
    ctx = ran(tools, memory, DISCOVERERS_OF_OXYGEN)
    assert fired(ctx) == []
    assert ctx.result is not None and {t.value for t in ctx.result.table.column("who")} == {  # type: ignore[union-attr]
        WD + "Q1010",
        WD + "Q1011",
    }
