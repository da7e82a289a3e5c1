"""Entity and relation linking on real Oxigraph stores: the bundled demo KG and (when the benchmark data is
present) CK25; the LLM-assisted pass against a real local OpenAI-compatible server."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from scripted_llm import Reply, ScriptedLLM
from sparqlnav.datasets import load_dataset
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.names import LabelIndex
from sparqlnav.llm import LLMClient, LLMConfig
from sparqlnav.question.linking import (
    EntityCandidate,
    find_mentions,
    link,
    link_entities,
    link_relations,
    relation_match,
)
from sparqlnav.question.words import is_code, name_similarity, tokenize, word_similarity
from sparqlnav.trace import Trace

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("SPARQLNAV_DATA", REPO.parent / "shared" / "data"))
WD = "https://demo.sparqlnav.org/entity/"
WDT = "https://demo.sparqlnav.org/prop/direct/"
PI = "http://ld.company.org/prod-instances/"
PV = "http://ld.company.org/prod-vocab/"


# The `settings`, `demo` and `ck25` fixtures come from conftest.py (one store per test session).


# --------------------------------------------------------------------------- words and mentions


def test_tokenize_keeps_codes_and_offsets() -> None:
    tokens = tokenize("Which department is responsible for the Sensor Switch M558-2275045?")
    assert [t.text for t in tokens][-3:] == ["Sensor", "Switch", "M558-2275045"]
    code = tokens[-1]
    assert (code.start, code.end) == (54, 66)
    assert is_code("M558-2275045") and is_code("Q42") and not is_code("Sensor")


def test_mentions_cover_quotes_codes_capitals_and_ngrams() -> None:
    mentions = find_mentions('Is "Data Services" the owner of U990 and of Sensor Switch products?')
    by_text = {m.text: m.source for m in mentions}
    assert by_text["Data Services"] == "quoted"
    assert by_text["U990"] == "code"
    assert by_text["Sensor Switch"] == "capitalised"
    assert by_text["products"] == "ngram"
    assert "the" not in by_text and "Is" not in by_text  # stop words never stand alone
    assert not any(m.text.startswith("of ") or m.text.endswith(" the") for m in mentions)


def test_word_similarity_handles_inflections_prefixes_and_typos() -> None:
    assert word_similarity("Suppliers", "supplier") == 0.95
    assert word_similarity("reliable", "reliability") == 0.85
    assert word_similarity("telephone", "phone") == 0.85
    assert word_similarity("born", "birth") == 0.85  # the small synonym table
    assert word_similarity("pontiometer", "potentiometer") > 0.8
    assert word_similarity("U990", "U990-5234138") == 0.95
    assert word_similarity("department", "manager") == 0.0


def test_name_similarity_prefers_exact_and_specific_names() -> None:
    assert name_similarity("Sensor", "Sensor") == 1.0
    assert name_similarity("Sensor", "N558-1730215 - Sensor Adjustment") < 0.8
    assert name_similarity("Sensor Switch M558-2275045", "M558-2275045 - Sensor Switch") == 1.0
    assert name_similarity("elements", "chemical element") > 0.75
    assert name_similarity("orc language", "Orc L") > name_similarity("orc language", "Orca")


def test_relation_match_reports_the_words_it_explains() -> None:
    tokens = tokenize("Who is the manager of Heinrich Hoch?")
    exact = relation_match(["has manager", "hasManager"], tokens)
    partial = relation_match(["has product manager"], tokens)
    assert exact.positions == frozenset({3})
    assert exact.score > partial.score > 0
    assert relation_match(["email"], tokens).score == 0.0
    assert relation_match(["dex"], tokenize("average dexterity"), abbreviations=True).score > 0


# --------------------------------------------------------------------------- demo KG


def test_entities_on_the_demo_kg(demo: KnowledgeGraph) -> None:
    top = link_entities(demo, "Who discovered oxygen?")[0]
    assert (top.iri, top.kind, top.mention.text) == (WD + "Q8", "entity", "oxygen")
    einstein = link_entities(demo, "Which element is named after Albert Einstein?")
    assert einstein[0].iri == WD + "Q1076"
    assert einstein[0].positions == frozenset({5, 6})


def test_plural_mentions_find_singular_aliases(demo: KnowledgeGraph) -> None:
    # "elements" is not a prefix of the alias "element"; the singular is searched too
    found = {e.iri: e for e in link_entities(demo, "How many elements are there in period 2?")}
    element = found[WD + "Q201"]
    assert element.kind == "class" and element.mention.text == "elements"


def test_relations_on_the_demo_kg(demo: KnowledgeGraph) -> None:
    question = "Who discovered oxygen?"
    rels = link_relations(demo, question, link_entities(demo, question))
    assert rels[0].iri == WDT + "P61"  # discoverer or inventor, as a direct claim
    assert rels[0].positions == frozenset({1})
    assert "neighbour" in rels[0].evidence and "out" in rels[0].directions
    assert len(rels) <= 40


def test_link_bundles_everything(demo: KnowledgeGraph) -> None:
    result = link(demo, "Where was Carl Wilhelm Scheele born?")
    assert result.entities[0].iri == WD + "Q1010"
    assert result.relations[0].iri == WDT + "P19"  # place of birth: alias "born in"
    assert result.candidates and result.seconds > 0
    data = result.to_json()
    assert data["entities"][0]["label"] == "Carl Wilhelm Scheele"  # type: ignore[index]


def test_llm_mentions_with_descriptions(demo: KnowledgeGraph, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.script(
        [
            Reply(
                '{"entities": [{"name": "Madame Curie", "description": "Polish-born French physicist and chemist"}]}',
                input_tokens=321,
                output_tokens=17,
            )
        ]
    )
    config = LLMConfig(
        model="scripted-model", base_url=scripted_llm.base_url, api_key="k", timeout_s=5
    )
    trace = Trace()
    with LLMClient(config) as client:
        result = link(demo, "What did Madame Curie discover?", llm=client, trace=trace)
    from_llm = [c for c in result.candidates if c.mention.source == "llm"]
    assert from_llm and from_llm[0].iri == WD + "Q1060"
    assert from_llm[0].mention.description == "Polish-born French physicist and chemist"
    assert result.entities[0].iri == WD + "Q1060"
    [call] = trace.of_kind("llm_call")
    assert call.data["input_tokens"] == 321 and trace.usage.llm_calls == 1
    assert "entity disambiguation" in scripted_llm.requests[0]["messages"][0]["content"]


# --------------------------------------------------------------------------- CK25


@pytest.mark.data
def test_ck25_known_entities(ck25: KnowledgeGraph) -> None:
    cases = {
        "What is the telephone of Baldwin Dirksen?": PI + "empl-Baldwin.Dirksen%40company.org",
        "Which department is responsible for the Sensor Switch M558-2275045?": PI
        + "hw-M558-2275045",
        "Who is the manager of the Data Services department?": PI + "dept-41622",
        "From which countries are the BOM parts of our SkySync MechWave delivered?": PI + "bom-17",
    }
    for question, iri in cases.items():
        entities = [e for e in link_entities(ck25, question) if e.kind == "entity"]
        assert entities[0].iri == iri, question
    # a partial code still finds its product, as the best candidate of its mention
    result = link(ck25, "What products are compatible with the U990 LCD Inductor?")
    mention = [c for c in result.candidates if c.mention.text == "U990 LCD Inductor"]
    assert mention[0].iri == PI + "hw-U990-5234138"


@pytest.mark.data
def test_ck25_relations(ck25: KnowledgeGraph) -> None:
    question = "What is the telephone of Baldwin Dirksen?"
    assert link_relations(ck25, question, link_entities(ck25, question))[0].iri == PV + "phone"
    question = "Who has expertise in Transistors?"
    assert (
        link_relations(ck25, question, link_entities(ck25, question))[0].iri
        == PV + "areaOfExpertise"
    )


@pytest.mark.data
@pytest.mark.slow
def test_ck25_reference_entities_are_found(ck25: KnowledgeGraph) -> None:
    """Most entity IRIs of the reference queries are the best candidate of some mention."""
    questions = load_dataset(DATA / "ck25" / "questions.yml").questions
    assert isinstance(ck25.names, LabelIndex)
    found = total = 0
    for q in questions:
        body = re.sub(r"(?i)PREFIX\s+[\w\-.]*:\s*<[^>]*>", " ", q.sparql or "")
        gold = [
            iri
            for iri in dict.fromkeys(re.findall(r"<(https?://[^>\s]+)>", body))
            if (item := ck25.names.item(iri)) is not None and item.kind == "entity"
        ]
        if not gold:
            continue
        best = _best_per_mention(link(ck25, q.question).candidates)
        total += len(gold)
        found += sum(1 for iri in gold if iri in best)
    assert total >= 25
    assert found / total >= 0.85


def _best_per_mention(candidates: list[EntityCandidate]) -> set[str]:
    """The IRIs ranked first for some mention."""
    best: dict[tuple[int, int], EntityCandidate] = {}
    for c in candidates:
        key = (c.mention.first, c.mention.last)
        if key not in best or c.score > best[key].score:
            best[key] = c
    return {c.iri for c in best.values()}


class KeywordEmbedder:
    """A tiny real embedder: one dimension per concept, a text scores 1 on each concept it names."""

    CONCEPTS = (("origin", "birthplace", "born", "birth"), ("found", "discover", "discovered"))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [
            [1.0 if any(w in text.lower() for w in words) else 0.0 for words in self.CONCEPTS]
            + [0.1]
            for text in texts
        ]


def test_embedder_similarity_lifts_an_unnamed_relation(demo: KnowledgeGraph) -> None:
    question = "What is the origin of Carl Wilhelm Scheele?"  # no word of "place of birth"
    entities = link_entities(demo, question)
    plain = link_relations(demo, question, entities)
    embedded = link_relations(demo, question, entities, embedder=KeywordEmbedder())
    rank = [r.iri for r in embedded].index(WDT + "P19")
    assert rank < [r.iri for r in plain].index(WDT + "P19")
    assert "embedding" in embedded[rank].evidence
