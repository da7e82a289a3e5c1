"""The hybrid strategy against a scripted OpenAI-compatible server, the real demo KG and the bundled demo corpus;
`index --docs` on HTML fixtures; free-text metrics."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scripted_llm import Delay, Error, Reply, ScriptedLLM, Step
from sparqlnav.answer import Answer, run_question
from sparqlnav.evaluation.metrics import answer_em, answer_superset, score_text
from sparqlnav.evaluation.score import score_lines
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.llm import LLMConfig
from sparqlnav.retrieval.documents import DocumentCorpus, file_docs
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.strategies.hybrid import create, demo_docs
from sparqlnav.trace import Trace

FIXTURES = Path(__file__).parent / "fixtures" / "hybrid_html"
_BLOCK = re.compile(r"^\[(E\d+)\] \((\w+), ([^)]*)\)\n(.*?)(?=\n\n\[E\d+\]|\Z)", re.S | re.M)
_DOC = re.compile(r"^\[(D\d+)\] \([^)]*\)\n(.*?)(?=\n\n\[D\d+\]|\Z)", re.S | re.M)


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalIndex]:
    """The demo corpus in an in-memory lexical index."""
    corpus = DocumentCorpus(tmp_path_factory.mktemp("corpus") / "documents.json")
    corpus.update([demo_docs()])
    index = LocalIndex(None)
    index.build(corpus.documents())
    yield index
    index.close()


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)


def _system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def _user(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def router(
    facts: dict[str, str],
    *,
    claims: list[str] | None = None,
    supported: dict[str, str] | None = None,
    answer: str = "",
    cite: tuple[str, ...] = (),
    claims_step: Step | None = None,
    kg_step: Step | None = None,
) -> Callable[[dict[str, Any]], Step]:
    """A scripted model that answers each prompt by what it is: a reducer keeps the fact whose key occurs in the
    source; the claims step states `claims`; the verifier supports a claim when its key (`supported`) occurs in
    a document; the combiner writes `answer` citing each evidence item whose text holds one of `cite`."""

    def step(body: dict[str, Any]) -> Step:
        system, user = _system(body), _user(body)
        if system.startswith("You read one piece"):
            source = user.split("\n\nSource", 1)[1]
            found = [fact for key, fact in facts.items() if key in source]
            return Reply(found[0] if found else "IRRELEVANT")
        if system.startswith("You answer a question from what you know"):
            return claims_step or Reply(json.dumps({"answer": "from memory", "claims": claims or []}))
        if system.startswith("You check claims"):
            listed = re.findall(r"^(\d+)\. (.*)$", user.split("\n\nEvidence:", 1)[0], re.M)
            docs = dict(_DOC.findall(user.split("\n\nEvidence:\n", 1)[1]))
            verdicts = []
            for number, claim in listed:
                key = (supported or {}).get(claim)
                ids = [d for d, text in docs.items() if key and key in text]
                verdicts.append({"claim": int(number), "supported": bool(ids), "evidence": ids[:1]})
            return Reply(json.dumps({"verdicts": verdicts}))
        if system.startswith("You write the final answer"):
            blocks = _BLOCK.findall(user)
            ids = [ident for ident, _kind, _ref, text in blocks if any(c in text for c in cite)]
            return Reply(answer + "".join(f"[{i}]" for i in ids) + ".")
        if kg_step is not None:
            return kg_step
        return Error(500, f"unexpected prompt: {system[:60]}")

    return step


def ask(server: ScriptedLLM, kg: KnowledgeGraph, index: LocalIndex, question: str, **options: Any) -> Answer:
    options.setdefault("kg_strategy", "lexical")
    strategy = create(config(server), index=index, **options)
    return run_question(strategy, question, kg, Trace())


def cited(answer: Answer) -> list[dict[str, Any]]:
    """The evidence items the answer cites; asserts every sentence cites at least one that exists."""
    evidence = {e["id"]: e for e in answer.extra["evidence"]}
    for sentence in [s for s in re.split(r"(?<=\.)\s+", answer.text.strip()) if s]:
        ids = re.findall(r"\[(E\d+)\]", sentence)
        assert ids, f"uncited statement: {sentence!r}"
        assert all(i in evidence for i in ids), f"citation of missing evidence in {sentence!r}"
    ids = set(re.findall(r"\[(E\d+)\]", answer.text))
    assert {e["id"] for e in answer.extra["evidence"] if e["used"]} == ids
    return [evidence[i] for i in sorted(ids)]


def test_a_question_answered_only_from_a_table(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                               demo_index: LocalIndex) -> None:
    scripted_llm.script([router({"kryptos": "In Ramsay's table, krypton comes from the Greek kryptos, hidden."},
                                answer="The name krypton means hidden", cite=("hidden",))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "What does the Greek word behind the name krypton mean?")
    assert scripted_llm.problems == []
    used = cited(answer)
    assert [(e["kind"], e["ref"]) for e in used] == [("table", "people/william-ramsay.html#table-noble-gases")]
    assert "kryptos" in used[0]["source"] and "Meaning: hidden" in used[0]["source"]
    assert answer.status == "answered" and "hidden" in answer.text
    # One `evidence` trace event per item, with the same ids, kinds and refs.
    events = [(e.data["id"], e.data["type"], e.data["ref"]) for e in answer.trace.of_kind("evidence")]
    assert events == [(e["id"], e["kind"], e["ref"]) for e in answer.extra["evidence"]]



def test_the_short_answer_line_is_kept_apart_for_exact_match(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                                             demo_index: LocalIndex) -> None:
    # EM compares a quiz-style answer, as SPAGHETTI's does; the sentences for people keep their citations.
    scripted_llm.script([router({"kryptos": "In Ramsay's table, krypton comes from the Greek kryptos, hidden."},
                                answer="**Short answer:** hidden [E1]\nThe name krypton means hidden",
                                cite=("hidden",))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "What does the Greek word behind the name krypton mean?")
    assert answer.extra["short_answer"] == "hidden"
    assert "Short answer" not in answer.text and answer.text.startswith("The name krypton means hidden[E")
    assert cited(answer)[0]["kind"] == "table"
    assert answer_em(["hidden"], answer.extra["short_answer"]) and not answer_em(["hidden"], answer.text)

def test_a_question_answered_only_from_text(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                            demo_index: LocalIndex) -> None:
    fact = "Moissan isolated fluorine by electrolysing potassium hydrogen fluoride in liquid hydrogen fluoride."
    scripted_llm.script([router({"electrolysing a solution of potassium hydrogen fluoride": fact},
                                answer="By electrolysis of potassium hydrogen fluoride", cite=("electrolysing",))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "How did Henri Moissan isolate fluorine?")
    used = cited(answer)
    assert [(e["kind"], e["ref"]) for e in used] == [("text", "elements/fluorine.html#fluorine-1")]
    assert answer_superset(["electrolysis"], answer.text)


def test_a_question_answered_only_from_the_kg(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                              demo_index: LocalIndex) -> None:
    scripted_llm.script([router({}, answer="Gold has atomic number 79", cite=("79",))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "What is the atomic number of gold?")
    used = cited(answer)
    assert [e["kind"] for e in used] == ["kg"]
    assert "The knowledge graph (demo) says the answer is" in used[0]["text"] and "79" in used[0]["text"]
    # The answer keeps the KG path's query and rows.
    assert answer.sparql is not None and "1086" in answer.sparql
    assert answer.results is not None and answer.results.to_sparql_json()["results"]["bindings"][0]["a"]["value"] == "79"
    assert {e["kind"] for e in answer.extra["evidence"]} == {"kg"}  # the reducers dropped every document


def test_a_question_that_needs_two_sources(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                           demo_index: LocalIndex) -> None:
    facts = {"Discovered by: Pierre Curie, Marie Curie": "The infobox names Pierre Curie and Marie Curie as discoverers.",
             "processing pitchblende": "The Curies found polonium while processing pitchblende."}
    scripted_llm.script([router(facts, answer="Pierre and Marie Curie, while processing pitchblende",
                                cite=("discoverers", "processing pitchblende"))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "Who discovered polonium and which ore were they processing?",
                 sources=("text", "tables"))
    used = cited(answer)
    assert {(e["kind"], e["ref"]) for e in used} == {("infobox", "elements/polonium.html#infobox"),
                                                     ("text", "elements/polonium.html#polonium-1")}
    assert answer_superset(["Curie", "pitchblende"], answer.text)
    assert answer.sparql is None and answer.extra["sources"] == ["text", "tables"]


def test_verification_drops_an_unsupported_claim(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                                 demo_index: LocalIndex) -> None:
    true = "Iodine was found by Bernard Courtois in seaweed ash."
    false = "Iodine was first found in 1850 in a salt mine in Bavaria."
    scripted_llm.script([router({}, claims=[true, false], supported={true: "ash of seaweed"},
                                answer="Courtois found it in seaweed ash", cite=("seaweed",))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "Where did Bernard Courtois find iodine?", sources=("claims",))
    claims = [e for e in answer.extra["evidence"] if e["kind"] == "claim"]
    assert [c["text"] for c in claims] == [true]
    assert claims[0]["ref"] == "claim:elements/iodine.html#iodine-1"
    dropped = [e.data["text"] for e in answer.trace.of_kind("feedback") if e.data.get("ok") is False]
    assert dropped == [f"claim dropped: {false}"]
    assert [e["kind"] for e in cited(answer)] == ["claim"]


def test_a_citation_of_missing_evidence_is_removed(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                                   demo_index: LocalIndex) -> None:
    scripted_llm.script([router({}, answer="Gold has atomic number 79 [E7]", cite=("79",))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "What is the atomic number of gold?", sources=("kg",))
    assert "[E7]" not in answer.text and [e["id"] for e in cited(answer)] == ["E1"]
    assert any("E7" in str(e.data.get("message")) for e in answer.trace.of_kind("info"))


def test_an_llm_error_in_one_branch_leaves_the_others(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                                      demo_index: LocalIndex) -> None:
    scripted_llm.script([router({"kryptos": "Krypton comes from the Greek kryptos, hidden."},
                                answer="Krypton means hidden", cite=("hidden",), claims_step=Error(500, "model down"))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "What does the Greek word behind the name krypton mean?")
    assert answer.status == "answered" and "hidden" in answer.text
    assert list(answer.extra["failed"]) == ["claims"] and "500" in answer.extra["failed"]["claims"]
    assert [e.data["branch"] for e in answer.trace.of_kind("error")] == ["claims"]
    assert [e["kind"] for e in cited(answer)] == ["table"]
    # The combiner is told which source failed.
    combine = next(r for r in scripted_llm.requests if _system(r).startswith("You write the final answer"))
    assert "Sources that failed: claims" in _user(combine)


def test_a_kg_path_past_its_deadline_leaves_the_documents(scripted_llm: ScriptedLLM, demo: KnowledgeGraph,
                                                          demo_index: LocalIndex) -> None:
    # The KG path is the retrieve strategy here; its model answers too late.
    scripted_llm.script([router({"Date of isolation: 26 June 1886": "The infobox dates the isolation to 26 June 1886."},
                                answer="On 26 June 1886", cite=("1886",),
                                kg_step=Delay(3.0, Reply("too late")))] * 30)
    answer = ask(scripted_llm, demo, demo_index, "When was fluorine first isolated?", kg_strategy="retrieve",
                 kg_deadline_s=0.5, sources=("kg", "tables"))
    assert answer.extra["failed"] == {"kg": "no answer within 0.5 s"}
    assert answer.status == "answered" and answer.sparql is None
    assert [e["kind"] for e in cited(answer)] == ["infobox"]


def test_no_documents_is_a_reported_failure(scripted_llm: ScriptedLLM, demo: KnowledgeGraph) -> None:
    scripted_llm.script([router({}, answer="Gold has atomic number 79", cite=("79",))] * 30)
    with LocalIndex(None) as empty:
        answer = ask(scripted_llm, demo, empty, "What is the atomic number of gold?", sources=("kg", "text"))
    assert "no passage documents are indexed" in answer.extra["failed"]["text"]
    assert [e["kind"] for e in cited(answer)] == ["kg"]


# ------------------------------------------------------------------------------------------ documents


def test_a_linearised_table_has_the_papers_format() -> None:
    docs = {d.meta["ref"]: d for d in file_docs(FIXTURES / "gadolinite.html", "gadolinite.html")}
    # Section title, the two sentences before, one `column: cell` line per row, the two sentences after.
    assert docs["gadolinite.html#table-analyses"].content == (
        "Analyses ; Their results are summarised below. Each found a new earth.\n"
        "Year: 1794, Chemist: Johan Gadolin, Earth found: yttria.\n"
        "Year: 1843, Chemist: Carl Gustaf Mosander, Earth found: terbia.\n"
        "The yttria of 1794 later proved to be a mixture. Mosander split it in 1843."
    )
    assert docs["gadolinite.html#infobox"].content == (
        "Gadolinite ;\nCategory: Silicate mineral\nNamed after: Johan Gadolin\nFound at: Ytterby, Sweden"
    )
    texts = " ".join(d.content for d in docs.values())
    assert "menu text" not in texts and "script text" not in texts and "test wiki" not in texts
    assert docs["gadolinite.html#analyses-1"].meta["section"] == "Analyses"
    assert docs["gadolinite.html#analyses-1"].title == "Gadolinite"


def test_markdown_tables_are_linearised_too() -> None:
    docs = {d.meta["ref"]: d for d in file_docs(demo_docs() / "spectroscopy.md", "spectroscopy.md")}
    table = docs["spectroscopy.md#table-lines-that-named-elements"]
    assert table.kind == "table"
    assert table.content.splitlines()[1] == "Element: caesium, Year: 1860, Line colour: blue, Name from: Latin caesius, sky blue."


def _sn(home: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "sparqlnav", *args, "--json"], capture_output=True, text=True,
                          env=env, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_index_docs_counts_and_is_incremental(tmp_path: Path) -> None:
    folder = tmp_path / "pages"
    folder.mkdir()
    for page in FIXTURES.iterdir():
        (folder / page.name).write_bytes(page.read_bytes())
    first = _sn(tmp_path / "home", "index", "--kg", "demo", "--embedder", "none", "--docs", str(folder))
    assert (first["passages"], first["tables"], first["infoboxes"]) == (4, 2, 2)
    assert first["shapes"] > 0 and (first["files"], first["files_read"]) == (2, 2)
    again = _sn(tmp_path / "home", "index", "--kg", "demo", "--embedder", "none", "--docs", str(folder))
    assert (again["files_read"], again["files_unchanged"], again["added"], again["updated"]) == (0, 2, 0, 0)
    # A changed page is read again; the other is not.
    page = folder / "ytterby.html"
    page.write_text(page.read_text().replace("closed in 1933", "closed in 1933. It is now a heritage site"))
    changed = _sn(tmp_path / "home", "index", "--kg", "demo", "--embedder", "none", "--docs", str(folder))
    # Its passage and the table whose context sentence changed are updated; nothing else is.
    assert (changed["files_read"], changed["files_unchanged"], changed["updated"], changed["added"]) == (1, 1, 2, 0)
    # Refreshing examples and shapes keeps the documents.
    plain = _sn(tmp_path / "home", "index", "--kg", "demo", "--embedder", "none")
    assert (plain["passages"], plain["tables"], plain["infoboxes"]) == (4, 2, 2)


# ------------------------------------------------------------------------------------------ metrics


def test_free_text_metrics() -> None:
    assert answer_em(["Marie Curie"], "marie curie.") and not answer_em(["Marie Curie"], "It was Marie Curie [E1].")
    assert answer_superset(["Marie Curie"], "It was Marie Curie [E1].")
    assert answer_superset(["Curie", "pitchblende"], "The Curies... no") is False
    assert not answer_superset(["19"], "It has 190 protons")  # words, not substrings of numbers
    judged = score_text(["79"], "Seventy-nine", question="Atomic number of gold?", judge=lambda q, g, p: p == "Seventy-nine")
    assert (judged.em, judged.superset, judged.judge) == (0.0, 0.0, True)
    lines = [json.dumps({"id": "a", "question": "q", "gold": ["hidden"], "answer": "It means hidden [E2]."}),
             json.dumps({"id": "b", "question": "q", "gold": ["hidden"], "answer": "hidden"})]
    report = score_lines(lines)
    assert report.answers == {"count": 2, "em": 0.5, "superset": 1.0, "judge": None}
    # An eval line keeps hybrid's short answer: EM and Superset compare it, the judge reads the whole answer.
    shown = score_text(["hidden"], "The name means hidden [E1].", short="hidden",
                       question="q", judge=lambda q, g, p: p.startswith("The name"))
    assert (shown.em, shown.superset, shown.judge) == (1.0, 1.0, True)
