"""Honest confidence for `lexical` (issue 13, item 0): questions it cannot answer end `not_found` with the best
guess kept aside, a word that matches nothing in the graph is not answered with something nearby, a question
asking for what the query does not do (negation, comparing two things, a proportion, a rank, …) is not answered
with the easier question's answer, and the threshold comes from the settings (SPARQLNAV_LEXICAL_THRESHOLD), on
the real demo and CK25 graphs."""

from __future__ import annotations

import pytest

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.question.intent import analyse
from sparqlnav.question.words import tokenize
from sparqlnav.settings import ConfigError, LexicalSettings, Settings
from sparqlnav.strategies import make_strategy
from sparqlnav.strategies.lexical import DEFAULT_THRESHOLD, LexicalStrategy
from sparqlnav.strategies.lexical.scoring import UNSUPPORTED_FACTOR
from sparqlnav.strategies.lexical.strategy import _Run
from sparqlnav.trace import Trace

STRATEGY = LexicalStrategy(budget_s=60.0)  # the default threshold; a generous budget (see test_lexical)


def assert_declined(answer_status: str, answer: object) -> None:
    """A not-found answer: no query or results as the answer, the best guess kept aside below the threshold."""
    from sparqlnav.answer import Answer

    assert isinstance(answer, Answer)
    assert answer_status == "not_found"
    assert answer.results is None and answer.sparql is None
    assert answer.text.startswith("I could not find an answer")
    assert answer.confidence is not None and answer.confidence < DEFAULT_THRESHOLD
    guess = answer.extra["best_guess"]
    assert guess["confidence"] == answer.confidence
    assert guess["sparql"].lstrip().startswith("PREFIX") and ("SELECT" in guess["sparql"] or "ASK" in guess["sparql"])
    assert guess["results"]["head"] is not None
    assert answer.to_json()["results"] is None


@pytest.mark.data
def test_salary_on_ck25_is_not_answered_with_something_nearby(ck25: KnowledgeGraph) -> None:
    answer = STRATEGY.run("What is the salary of Heinrich Hoch?", ck25, Trace())
    assert_declined(answer.status, answer)
    # CK25 has no salaries: the word matches nothing any candidate query could use
    assert answer.extra["explained"]["unmatched"] == ["salary"]
    assert answer.trace.of_kind("answer")[-1].data["status"] == "not_found"


@pytest.mark.data
def test_most_employees_on_ck25_is_not_answered_with_every_department(ck25: KnowledgeGraph) -> None:
    answer = STRATEGY.run("Which department has the most employees?", ck25, Trace())
    assert_declined(answer.status, answer)
    assert "employees" in answer.extra["explained"]["unexplained"]


def test_a_person_the_demo_graph_does_not_know_is_not_found(demo: KnowledgeGraph) -> None:
    answer = STRATEGY.run("In which department is Ms. Brant?", demo, Trace())
    assert_declined(answer.status, answer)
    assert "Q27" not in answer.text


@pytest.mark.data
def test_the_same_person_on_ck25_is_answered(ck25: KnowledgeGraph) -> None:
    answer = STRATEGY.run("In which department is Ms. Brant?", ck25, Trace())
    assert answer.status == "answered" and answer.confidence is not None
    assert answer.confidence >= DEFAULT_THRESHOLD
    assert answer.results is not None
    assert {t.value for t in answer.results.values()} == {"http://ld.company.org/prod-instances/dept-73191"}
    assert answer.extra["explained"]["unexplained"] == [] and "best_guess" not in answer.extra


def test_a_left_out_word_lowers_the_confidence(demo: KnowledgeGraph) -> None:
    whole = STRATEGY.run("Who discovered oxygen?", demo, Trace())
    partial = STRATEGY.run("Who discovered oxygen in a submarine?", demo, Trace())
    assert whole.status == "answered" and whole.confidence == 1.0
    assert partial.confidence is not None and partial.confidence < DEFAULT_THRESHOLD
    assert partial.status == "not_found"
    assert "submarine" in partial.extra["explained"]["unexplained"]
    # the guess kept aside is the answer to the part it understood
    assert partial.extra["best_guess"]["answer"] == whole.text


def test_threshold_comes_from_the_settings(sn_home: object) -> None:
    default = Settings.from_env({"SPARQLNAV_HOME": str(sn_home)})
    assert default.lexical.threshold == LexicalSettings().threshold == DEFAULT_THRESHOLD
    strict = Settings.from_env({"SPARQLNAV_HOME": str(sn_home), "SPARQLNAV_LEXICAL_THRESHOLD": "0.95"})
    assert strict.lexical.threshold == 0.95
    built = make_strategy("lexical", None, settings=strict)
    assert isinstance(built, LexicalStrategy) and built.threshold == 0.95
    auto = make_strategy("auto", None, settings=strict)  # no LLM: auto is lexical, with the setting
    assert isinstance(auto, LexicalStrategy) and auto.threshold == 0.95
    explicit = make_strategy("lexical", None, settings=strict, threshold=0.2)
    assert isinstance(explicit, LexicalStrategy) and explicit.threshold == 0.2
    with pytest.raises(ConfigError, match="SPARQLNAV_LEXICAL_THRESHOLD='2'"):
        Settings.from_env({"SPARQLNAV_HOME": str(sn_home), "SPARQLNAV_LEXICAL_THRESHOLD": "2"})


def test_the_setting_changes_what_is_answered(demo: KnowledgeGraph, sn_home: object) -> None:
    question = "Which elements are named after a planet?"
    default = STRATEGY.run(question, demo, Trace())
    strict = Settings.from_env({"SPARQLNAV_HOME": str(sn_home), "SPARQLNAV_LEXICAL_THRESHOLD": "0.99"})
    built = make_strategy("lexical", None, settings=strict, budget_s=60.0)
    declined = built.run(question, demo, Trace())
    assert default.status == "answered" and declined.status == "not_found"
    assert default.confidence == declined.confidence and default.confidence is not None
    assert DEFAULT_THRESHOLD <= default.confidence < 0.99


def operations(question: str) -> list[tuple[str, str]]:
    """The (kind, word) of the operations a question asks for."""
    return [(o.kind, o.word) for o in analyse(tokenize(question)).operations]


def test_operations_a_bounded_query_cannot_carry_are_read_from_the_words() -> None:
    assert operations("Which elements were not discovered by Marie Curie?") == [("negation", "not")]
    assert operations("how many creatures with non-neutral alignment speak treant?") == [("negation", "non-neutral")]
    assert operations("Doesn't gold melt?") == [("negation", "doesn't")]
    assert operations("Does gold have a higher atomic number than iron?") == [("comparison", "than")]
    assert operations("do raven and ghoul have the same alignment?") == [("comparison", "same")]
    assert operations("what percentage of wolves have chaotic alignment?") == [("proportion", "percentage")]
    assert operations("what is the second most common alignment?") == [("rank", "second")]
    assert operations("Which suppliers are in France or Germany?") == [("alternative", "or")]
    assert operations("How many products per category?") == [("grouping", "per")]
    # a numeric condition is the comparison's own ("more than 5"), an ordinal without a superlative is a word
    assert operations("Which department has more than 5 employees?") == []
    assert operations("Who discovered the second element?") == []
    assert operations("Who discovered oxygen?") == []


@pytest.mark.parametrize(
    ("question", "unsupported"),
    [
        ("Does gold have a higher atomic number than iron?", "comparison: than"),
        ("Which elements were not discovered by Humphry Davy?", "negation: not"),
        ("What percentage of elements did Humphry Davy discover?", "proportion: percentage"),
        ("Which noble gas has the second highest atomic number?", "rank: second"),
    ],
)
def test_a_question_asking_for_more_than_the_query_does_is_not_found(
    demo: KnowledgeGraph, question: str, unsupported: str
) -> None:
    answer = STRATEGY.run(question, demo, Trace())
    assert_declined(answer.status, answer)
    assert unsupported in answer.extra["explained"]["unsupported"]
    # the cap: whatever the rest of the evidence, a question the query does not answer stays near zero
    assert answer.confidence is not None and answer.confidence <= UNSUPPORTED_FACTOR


def test_the_simple_question_behind_them_stays_answered(demo: KnowledgeGraph) -> None:
    simple = STRATEGY.run("Which elements did Humphry Davy discover?", demo, Trace())
    assert simple.status == "answered" and simple.extra["explained"]["unsupported"] == []
    assert simple.confidence is not None and simple.confidence >= DEFAULT_THRESHOLD
    ordered = STRATEGY.run("Which noble gas has the highest atomic number?", demo, Trace())
    assert ordered.status == "answered" and ordered.extra["explained"]["unsupported"] == []
    assert ordered.results is not None
    assert {t.value for t in ordered.results.values()} == {"https://demo.sparqlnav.org/entity/Q86"}


def test_an_entity_named_by_less_than_half_its_name_is_a_loose_link(demo: KnowledgeGraph) -> None:
    # "women" reaches the sex "female" through an alias: the query answers elements, not the women asked for
    run = _Run(STRATEGY, "Which women discovered chemical elements?", demo, Trace())
    answer = run.answer()
    assert_declined(answer.status, answer)
    [female] = [c for c in run.executed if c.describe().startswith("typed two-hop in-in: female")][:1]
    assert run.scorer.loose(female) == ("female",)
    named = STRATEGY.run("Which elements did Humphry Davy discover?", demo, Trace())
    assert named.extra["explained"]["loose"] == []  # "Humphry Davy": the whole name
