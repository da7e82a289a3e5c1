"""What the model reads, round three (issue 37): prompts that promise only what they carry. Each test reads a prompt
as the model receives it, through the real LLM client over HTTP against the scripted OpenAI-compatible server, over
real Oxigraph stores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.answer import run_question
from sparqlnav.context import Handover
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.question.intent import analyse
from sparqlnav.question.named import named_things
from sparqlnav.question.words import tokenize
from sparqlnav.retrieval.kg_index import kg_schema
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import shape_docs
from sparqlnav.settings import Settings
from sparqlnav.strategies import auto, explore, lexical
from sparqlnav.strategies.check import AnswerCheck
from sparqlnav.strategies.retrieve import create as create_retrieve
from sparqlnav.trace import Trace

PV = "http://ld.company.org/prod-vocab/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"


def config(server: ScriptedLLM) -> LLMConfig:
    return LLMConfig(model="scripted-model", base_url=server.base_url, api_key="k", timeout_s=10, max_retries=0)


def test_retrieve_without_examples_promises_no_examples(scripted_llm: ScriptedLLM, ck25: KnowledgeGraph) -> None:
    schema = kg_schema(ck25)
    query = f'PREFIX pv: <{PV}>\nSELECT ?e WHERE {{ ?e pv:memberOf ?d . ?d pv:name "Marketing" }}'
    with LocalIndex(None, None) as index:  # the index holds shapes only: no example can be retrieved
        index.build(shape_docs(schema, labels=ck25.names.labels_of(schema.class_names)))
        scripted_llm.script([Reply(f"```sparql\n{query}\n```"), Reply("They are …")])
        create_retrieve(config(scripted_llm), index=index, schema=schema).run(
            "Who works in Marketing?", ck25, Trace()
        )
    prompt = str(scripted_llm.requests[0]["messages"][0]["content"])
    # before: "using reference examples and schema information that were retrieved", "appear in the examples or
    # in the schema", "the namespaces the examples and the schema use" — with no example anywhere in the request
    assert not re.search(r"\bexamples?\b", prompt, re.I), re.findall(r".*\bexamples?\b.*", prompt, re.I)
    assert "using the schema information below, computed from the graph" in prompt
    assert "Use only classes and predicates that appear in the schema below" in prompt


def test_a_handover_without_a_query_says_nothing_of_reusing_it() -> None:
    bare = Handover(strategy="lexical", reason="its answer was of another type than the question asks for")
    text = bare.to_prompt()
    assert "Use what is right in it" not in text  # before: "Use what is right in it; do not repeat what failed."
    assert text == "An earlier attempt (lexical) was not trusted: its answer was of another type than the question asks for."
    verdict = Handover(strategy="lexical", reason="a model said it does not answer the question: it counts rows.")
    assert verdict.to_prompt().endswith("it counts rows.")  # before: "it counts rows.." (the check's own stop)
    with_query = Handover(strategy="lexical", reason="no rows", sparql="SELECT ?x WHERE { ?x a <urn:C> }")
    assert with_query.to_prompt().endswith("Use what is right in it; do not repeat what failed.")


SHOWS = "http://example.org/performance#"
SHOWS_TTL = "\n".join(
    [f"<{SHOWS}s{i}> a <{SHOWS}Show> ; <{SHOWS}seats> {[0, 5][i % 2]} ; "
     f"<{SHOWS}city> \"{['Lyon ', 'Paris'][i % 2]}\" ; "
     f"<{SHOWS}blurb> \"Act one\\nAct {i}\" ." for i in range(12)]
)  # fmt: skip


def test_schema_view_prefixes_numbers_spaces_and_newlines(
    scripted_llm: ScriptedLLM, tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "shows.ttl"
    path.write_text(SHOWS_TTL, encoding="utf-8")
    with open_kg(str(path), settings) as kg:
        schema = kg_schema(kg)
        with LocalIndex(None, None) as index:
            index.build(shape_docs(schema, labels={}))
            scripted_llm.script([Reply(f"```sparql\nSELECT ?s WHERE {{ ?s a <{SHOWS}Show> }}\n```"), Reply("…")])
            create_retrieve(config(scripted_llm), index=index, schema=schema).run(
                "Which shows are in Lyon?", kg, Trace())
    prompt = str(scripted_llm.requests[0]["messages"][0]["content"])
    assert f"PREFIX performance: <{SHOWS}>" in prompt  # before: `performanc:`, a name cut short
    seats = next(line for line in prompt.splitlines() if "performance:seats" in line and "#" in line)
    assert "values 0, 5" in seats, seats  # before: values "0", "5"
    city = next(line for line in prompt.splitlines() if "performance:city" in line and "#" in line)
    assert '"Lyon ", "Paris" (1 stored with spaces around it: match the quoted text)' in city, city
    blurb = [line for line in prompt.splitlines() if "Act one" in line]
    assert blurb and all("Act one\\nAct" in line for line in blurb), blurb  # before: the newline broke the comment
    assert not any(line.startswith("Act ") for line in prompt.splitlines())
    # the class the question is about is shown (before: "(no schema information)": `show` is a search stop word)
    assert "(no schema information)" not in prompt and "performance:Show {" in prompt
    # the town stored with a trailing space is found and said (before: "Lyon": not found)
    assert '- "Lyon": no thing by this name; the text "Lyon " (stored with spaces around it: match it exactly) as ' \
        "performance:city of 6 performance:Show" in prompt


# ---------------------------------------------------------------- reasons that help (issue 37)


@pytest.mark.parametrize(("question", "reading"), [
    ("Which players scored more than one goal?", "a comparison with 1, no operation"),
    ("Which cars do more than 15 kilometres per litre?", "a comparison, and 'per' is part of a unit"),
    ("How many goals were scored in total?", "a count, not a sum"),
    ("What is the average salary per department?", "a real grouping"),
])
def test_the_question_is_read_as_people_mean_it(question: str, reading: str) -> None:
    intent = analyse(tokenize(question))
    kinds = [(o.kind, o.word) for o in intent.operations]
    if reading.startswith("a comparison"):
        assert kinds == [] and intent.comparisons and intent.comparisons[0].op == ">", kinds
        assert intent.comparisons[0].value == (1.0 if "one" in question else 15.0)
    elif reading == "a count, not a sum":
        assert intent.answer == "count" and intent.aggregate is None  # before: aggregate SUM
    else:
        assert kinds == [("grouping", "per")] and intent.aggregate == "AVG"


def test_a_handover_names_what_the_query_does_not_do_in_words(
    scripted_llm: ScriptedLLM, ck25: KnowledgeGraph, settings: Settings
) -> None:
    question = "Which products are not in the category Sensor?"
    scripted_llm.script([Reply("Giving up.", [Call("give_up", {"reason": "cannot tell"})])])
    llm = config(scripted_llm)
    cascade = auto.Auto(lexical.create(), explore.create(llm, max_total_actions=4), None, settings.cascade,
                        check=AnswerCheck(llm))
    with cascade:
        run_question(cascade, question, ck25, Trace())
    handed = "\n".join(str(m["content"]) for m in scripted_llm.requests[0]["messages"] if m["role"] == "user")
    assert 'the question asks for what its query does not do: a negation ("not")' in handed, handed
    assert "negation: not" not in handed  # before: the code, which players read as an instruction


def test_presentation_words_are_not_named_as_left_out(ck25: KnowledgeGraph) -> None:
    question = "Return the names of the products in the category Sensor in descending order of price, please."
    answer = lexical.create().run(question, ck25, Trace())
    left = set(answer.extra["explained"]["unexplained"]) | set(answer.extra["explained"]["unmatched"])
    assert not left & {"Return", "descending", "order"}, left
    counted = lexical.create().run("How many products are in the category Sensor in total?", ck25, Trace())
    assert "total" not in counted.extra["explained"]["unmatched"]  # before: "nothing in the graph matches 'total'"
    assert not counted.extra["explained"]["unsupported"]  # before: "aggregate: SUM" on a count


def test_every_unsupported_code_reads_as_words() -> None:
    from sparqlnav.strategies.check import unsupported_in_words

    codes = ["count", "yes/no", "not a yes/no question", "superlative", "superlative: by an attribute no word names",
             "numeric condition", "answer type: no person among the answers",
             "answer type: values where things were asked", "aggregate: AVG", "negation: without", "grouping: per"]
    for code in codes:
        said = unsupported_in_words(code)
        assert said != code and ":" not in said, (code, said)


# ---------------------------------------------------------------- what the question names (issue 37)

EX = "http://example.org/town#"
TOWNS_TTL = "\n".join([
    *(f'<{EX}o{i}> a <{EX}Owner> ; <{RDFS_LABEL}> "owner id {i}" .' for i in range(1, 4)),
    f'<{EX}shop1> a <{EX}Shop> ; <{RDFS_LABEL}> "Corner Store" ; <{EX}owner> <{EX}o1> ; <{EX}town> "Lyon" .',
    f'<{EX}shop2> a <{EX}Shop> ; <{RDFS_LABEL}> "Big Market" ; <{EX}owner> <{EX}o2> ; <{EX}town> "Paris" .',
])


def test_names_are_names(tmp_path: Path, settings: Settings) -> None:
    path = tmp_path / "towns.ttl"
    path.write_text(TOWNS_TTL, encoding="utf-8")
    with open_kg(str(path), settings) as kg:
        column = named_things(kg, "What is the owner id of the shop Corner Store?")
        quoted = named_things(kg, "Which shops are in the Town 'Lyon'?")
        pair = named_things(kg, "Which shops are in Lyon and Paris?")
    # before: "owner id" → the three owners labelled "owner id N", shown as identifiers to use as they are
    assert [n.mention for n in column.names] == ["Corner Store"]
    # before: `Town 'Lyon` → not found; now the quoted name, found as the stored text
    assert ("Lyon", "Lyon") in [(n.mention, n.value_text) for n in quoted.names]
    assert not any("'" in n.mention for n in quoted.names), quoted.names
    # before: "Lyon and Paris" looked up as one name (not found)
    assert [(n.mention, n.value_text) for n in pair.names] == [("Lyon", "Lyon"), ("Paris", "Paris")]


@pytest.mark.parametrize("rows", [40, 150])
def test_the_answer_writer_sees_a_long_list_whole_or_is_told_where_the_rest_is(
    scripted_llm: ScriptedLLM, tmp_path: Path, rows: int
) -> None:
    """The answer writer saw the first and last 10 rows of any longer list and could not give all of one asked for
    whole; now a list up to 100 rows comes whole, and a longer one says the reader has the rest (no query advice)."""
    import sqlite3

    from sparqlnav.strategies import write_sql

    db = tmp_path / "towns.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE towns (id INTEGER PRIMARY KEY, name TEXT)")
    con.executemany("INSERT INTO towns VALUES (?, ?)", [(i, f"Town{i:03d}") for i in range(rows)])
    con.commit()
    con.close()
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    scripted_llm.script([Reply("```sql\nSELECT name FROM towns ORDER BY name\n```"), Reply("All of them.")])
    with open_kg(f"sqlite://{db}", settings) as kg:
        run_question(write_sql.create(config(scripted_llm), settings=settings), "List all towns.", kg, Trace())
    seen = str(scripted_llm.requests[1]["messages"][-1]["content"])
    shown = set(re.findall(r"Town\d{3}", seen))
    assert "FILTER" not in seen and "LIMIT/OFFSET" not in seen
    if rows == 40:
        assert len(shown) == 40 and "(40 rows.)" in seen
    else:
        assert len(shown) == 20  # before: 20 too, and "a FILTER or LIMIT/OFFSET shows others" to a writer of words
        assert ("150 rows in total; the first 10 and last 10 are shown; the reader sees the whole result as a "
                "table under your answer: name only rows shown here and say how many there are.") in seen


def test_a_question_naming_no_class_gets_the_main_classes_not_no_schema(
    scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    """Relay players (issue 37's after run) still got "(no schema information)" when the question's words named no
    class ("which elemental ones have a rating above 10?"); the graph's biggest classes are shown instead."""
    ex = "http://example.org/fauna#"
    rows = "\n".join(f"ex:c{i} a ex:Creature ; rdfs:label \"Creature {i}\" ; ex:rating {i} ; ex:lives ex:h{i % 2} ."
                     for i in range(12))
    graph = tmp_path / "fauna.ttl"
    graph.write_text(f"@prefix ex: <{ex}> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n{rows}\n"
                     'ex:h0 a ex:Habitat ; rdfs:label "Marsh" .\nex:h1 a ex:Habitat ; rdfs:label "Cliff" .\n')
    with open_kg(str(graph), Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})) as kg:
        schema = kg_schema(kg)
        with LocalIndex(None, None) as index:
            index.build(shape_docs(schema, labels=kg.names.labels_of(schema.class_names)))
            query = f"PREFIX ex: <{ex}>\nSELECT ?c WHERE {{ ?c ex:rating ?r FILTER(?r > 10) }}"
            scripted_llm.script([Reply(f"```sparql\n{query}\n```"), Reply("Creature 11.")])
            create_retrieve(config(scripted_llm), index=index, schema=schema).run(
                "Which zorblaxes have a quux above 10?", kg, Trace())
    prompt = str(scripted_llm.requests[-2]["messages"][0]["content"])
    assert "(no schema information)" not in prompt
    assert prompt.index("ex:Creature") < prompt.index("ex:Habitat")  # the biggest class first
