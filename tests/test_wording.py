"""Answers in people's terms (issue 17, item 9): years for "In what year…", dates in words, units kept, Yes/No;
the results keep the raw values."""

from __future__ import annotations

from pathlib import Path

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.results import XSD, Term
from sparqlnav.question.wording import Asked, for_people
from sparqlnav.settings import Settings
from sparqlnav.strategies.ending import plain_answer
from sparqlnav.strategies.lexical import LexicalStrategy
from sparqlnav.trace import Trace

STRATEGY = LexicalStrategy(budget_s=60.0)  # generous: the budget only cuts the search short
DEMO = "PREFIX wd: <https://demo.sparqlnav.org/entity/> PREFIX wdt: <https://demo.sparqlnav.org/prop/direct/> "


def test_a_year_question_reads_a_year_and_the_results_keep_the_date(demo: KnowledgeGraph) -> None:
    year = STRATEGY.run("In what year was fluorine discovered?", demo, Trace())
    # (a confidence under 0.9 puts "Probably:" before it and the query after: the words themselves are these)
    assert year.status == "answered" and "The answer is 1886." in year.text
    assert year.results is not None and [t.value for t in year.results.column("a")] == ["1886-06-26T00:00:00Z"]
    when = STRATEGY.run("When was Dmitri Mendeleev born?", demo, Trace())
    assert "The answer is 8 February 1834." in when.text


def test_yes_no_and_plain_answers_read_for_people(demo: KnowledgeGraph) -> None:
    no = STRATEGY.run("Is hydrogen an alkali metal?", demo, Trace())
    assert no.text == "No." and no.results is not None and no.results.boolean is False
    asked = demo.endpoint.query(DEMO + "ASK { wd:Q2 wdt:P31/wdt:P279* wd:Q213 }").table  # helium, a noble gas
    assert asked is not None and plain_answer(asked, demo, "Is helium a noble gas?") == "Yes"
    dates = demo.endpoint.query(DEMO + "SELECT ?d WHERE { wd:Q9 wdt:P575 ?d }").table
    assert dates is not None
    assert plain_answer(dates, demo, "In what year was fluorine discovered?") == "The query returned: 1886"
    assert plain_answer(dates, demo, "When was fluorine discovered?") == "The query returned: 26 June 1886"
    assert dates.rows[0]["d"].value == "1886-06-26T00:00:00Z"  # the table itself is untouched


def test_numbers_keep_their_units(tmp_path: Path, settings: Settings) -> None:
    ttl = tmp_path / "bars.ttl"
    ttl.write_text(
        "@prefix ex: <http://example.org/> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:bar rdfs:label "steel bar" ; ex:mass "12.5"^^ex:kilogram ; ex:length "3"^^ex:metre .\n'
        'ex:kilogram rdfs:label "kg" .\n'
    )
    with open_kg(str(ttl), settings) as graph:
        table = graph.endpoint.query("SELECT ?m ?l WHERE { ?b <http://example.org/mass> ?m ; <http://example.org/length> ?l }").table
        assert table is not None
        # A labelled unit by its label, an unlabelled one by its name.
        assert plain_answer(table, graph, "How heavy and long is the steel bar?") == "The query returned: 12.5 kg, 3 metre"
    assert for_people(Term.literal("-0043-03-15T00:00:00Z", XSD + "dateTime"), Asked(year=True)) == "44 BC"
    assert for_people(Term.literal("1774-08-01T14:30:00Z", XSD + "dateTime"), Asked()) == "1 August 1774, 14:30"
    assert for_people(Term.literal("true", XSD + "boolean"), Asked.of("Is it liquid?")) == "Yes"
