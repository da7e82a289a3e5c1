"""What a new user trips on, round two (issue 40), the items left after tests/test_newcomer2.py: follow-ups that
point at the answer (item 2), `validate` on a file's own and misspelt namespaces (item 7), explore's feedback on a
date compared with a plain text (item 10), and the names and start questions a user reads (item 12). Each on a
small file of the test's own: a chemistry Turtle file, test_newcomer2's zoo, a Wikidata-shaped file, a library
SQLite database."""

from __future__ import annotations

from pathlib import Path

import httpx

from scripted_llm import Call, Reply, ScriptedLLM
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.opening import open_kg
from sparqlnav.llm import LLMConfig
from sparqlnav.settings import Settings
from sparqlnav.strategies import explore
from sparqlnav.tools.digest import Digests
from sparqlnav.trace import Trace
from test_cli import run
from test_newcomer2 import library, zoo

# Neon and argon have two discoverers each (as in the demo graph), polonium one; boron is there to be misread.
CHEMISTRY = """\
@prefix ex: <http://example.org/chem#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:Element a rdfs:Class ; rdfs:label "chemical element" .
ex:Person a rdfs:Class ; rdfs:label "person" .
ex:Prize a rdfs:Class ; rdfs:label "prize" .
ex:City a rdfs:Class ; rdfs:label "city" .
ex:Period a rdfs:Class ; rdfs:label "period" .
ex:neon a ex:Element ; rdfs:label "neon" ; ex:discoveredBy ex:ramsay , ex:travers ; ex:period ex:period2 .
ex:boron a ex:Element ; rdfs:label "boron" ; ex:discoveredBy ex:davy ; ex:period ex:period2 .
ex:argon a ex:Element ; rdfs:label "argon" ; ex:discoveredBy ex:ramsay , ex:rayleigh ; ex:period ex:period3 .
ex:polonium a ex:Element ; rdfs:label "polonium" ; ex:discoveredBy ex:curie ; ex:period ex:period6 .
ex:period2 a ex:Period ; rdfs:label "period 2" .
ex:period3 a ex:Period ; rdfs:label "period 3" .
ex:period6 a ex:Period ; rdfs:label "period 6" .
ex:ramsay a ex:Person ; rdfs:label "William Ramsay" ; ex:birthPlace ex:glasgow ; ex:award ex:nobelChemistry .
ex:travers a ex:Person ; rdfs:label "Morris Travers" ; ex:birthPlace ex:london .
ex:rayleigh a ex:Person ; rdfs:label "Lord Rayleigh" ; ex:birthPlace ex:langford ; ex:award ex:nobelPhysics .
ex:curie a ex:Person ; rdfs:label "Marie Curie" ; ex:birthPlace ex:warsaw ; ex:award ex:nobelPhysics .
ex:davy a ex:Person ; rdfs:label "Humphry Davy" ; ex:birthPlace ex:penzance ; ex:award ex:copley .
ex:glasgow a ex:City ; rdfs:label "Glasgow" .
ex:london a ex:City ; rdfs:label "London" .
ex:langford a ex:City ; rdfs:label "Langford Grove" .
ex:warsaw a ex:City ; rdfs:label "Warsaw" .
ex:penzance a ex:City ; rdfs:label "Penzance" .
ex:nobelChemistry a ex:Prize ; rdfs:label "Nobel Prize in Chemistry" .
ex:nobelPhysics a ex:Prize ; rdfs:label "Nobel Prize in Physics" .
ex:copley a ex:Prize ; rdfs:label "Copley Medal" .
ex:discoveredBy rdfs:label "discovered by" ; skos:altLabel "discoverer" .
ex:birthPlace rdfs:label "place of birth" ; skos:altLabel "born in" .
ex:award rdfs:label "award received" .
ex:period rdfs:label "period" .
"""


def chemistry(tmp_path: Path) -> Path:
    """Elements, their discoverers, the discoverers' birthplaces and prizes."""
    path = tmp_path / "chemistry.ttl"
    path.write_text(CHEMISTRY, encoding="utf-8")
    return path


def test_a_follow_up_points_at_the_person_the_answer_named(tmp_path: Path) -> None:
    """Item 2, in `chat`: "Where was he born?" after "Who discovered neon?" was read as neon's birthplace, answered
    "Did you mean 'boron'? If so: …"; "What about neon?" after another element's question gave neon's period."""
    typed = ("Who discovered neon?\nWhere was he born?\n"
             "Who discovered polonium?\nWhere was she born?\n"
             "Who discovered argon?\nWhat about neon?\n")
    res = run("chat", "--kg", str(chemistry(tmp_path)), home=tmp_path / "home", stdin=typed)
    assert res.returncode == 0, res.stderr
    said = [line for line in res.stdout.splitlines() if line.strip()]
    assert said == [
        "The answers are Morris Travers and William Ramsay.",
        "I cannot tell who you mean: 'he' could be Morris Travers or William Ramsay (the last answer named each): "
        "ask again with one name, as in \"Where was Morris Travers born?\".",
        "The answer is Marie Curie.",
        "The answer is Warsaw.",
        "The answers are William Ramsay and Lord Rayleigh.",
        "The answers are Morris Travers and William Ramsay.",
    ], res.stdout
    assert "boron" not in res.stdout


def test_she_after_a_laureates_prize_is_the_laureate_not_the_prize(tmp_path: Path) -> None:
    """Item 2, in the UI (`/api/ask` in one conversation): "Where was she born?" after "Which prize did Marie Curie
    receive?" listed the birthplaces of every laureate of that prize."""
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    with open_kg(str(chemistry(tmp_path)), settings) as kg, \
            background(create_app(settings, ServeConfig(mcp=False), kgs={"chemistry": kg})) as url:
        first = httpx.post(f"{url}/api/ask", json={"question": "Which prize did Marie Curie receive?",
                                                   "kg": "chemistry", "strategy": "lexical"}, timeout=120).json()
        assert first["answer"] == "The answer is Nobel Prize in Physics."
        second = httpx.post(f"{url}/api/ask", json={"question": "Where was she born?", "kg": "chemistry",
                                                    "strategy": "lexical", "conversation": first["conversation"]},
                            timeout=120).json()
    assert second["answer"] == "The answer is Warsaw."
    follow = [e["data"]["text"] for e in second["trace"] if e["kind"] == "info" and "follow-up" in e["data"]["text"]]
    assert follow == ["a follow-up: 'she' read as Marie Curie (named in the last question): Where was Marie Curie "
                      "born?"]


def test_validate_counts_the_files_namespace_as_used_and_names_the_closest_namespace(tmp_path: Path) -> None:
    """Item 7: `validate` warned that the file's own namespace was one "zoo.ttl does not use"; a typo in a prefix's
    IRI (`zoo/` for `zoo#`) was a warning with exit 0 and no suggestion, where a typo in a local name is an error
    with "closest: ex:weightKg"."""
    home, kg = tmp_path / "home", str(zoo(tmp_path))
    res = run("validate", "SELECT ?a WHERE { ?a ex:weightKG ?w }", "--kg", kg, home=home)
    assert res.returncode == 1
    assert "unknown_prefix" not in res.stdout and "does not use" not in res.stdout, res.stdout
    assert "error [unknown_predicate] line 2: ex:weightKG is not a predicate of this endpoint (closest: ex:weightKg)" \
        in res.stdout
    res = run("validate", "PREFIX ex: <http://example.org/zoo/> SELECT ?a WHERE { ?a ex:weightKg ?w }", "--kg", kg,
              home=home)
    assert res.returncode == 1, res.stdout
    assert res.stdout.splitlines()[0] == (
        "error [unknown_predicate] line 1: <http://example.org/zoo/weightKg> is not a predicate of this endpoint, in "
        "the namespace <http://example.org/zoo/>, which it does not use (closest namespace: "
        "<http://example.org/zoo#>) (closest: ex:weightKg)")
    res = run("validate", "PREFIX ex: <http://example.org/zoo/> SELECT ?a WHERE { ?a a ex:Animal }", "--kg", kg,
              home=home)
    assert res.returncode == 1 and "(closest: ex:Animal (animal))" in res.stdout, res.stdout


WIKIDATA_SHAPED = """\
@prefix wd: <http://www.wikidata.org/entity/> .
@prefix wdt: <http://www.wikidata.org/prop/direct/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
wd:Q42 wdt:P31 wd:Q5 ; wdt:P19 wd:Q350 ; rdfs:label "Douglas Adams"@en .
wd:Q5 rdfs:label "human"@en .
wd:Q350 rdfs:label "Cambridge"@en .
wd:P31 rdfs:label "instance of"@en .
wd:P19 rdfs:label "place of birth"@en .
"""


def test_a_direct_property_reads_as_its_entity(tmp_path: Path) -> None:
    """Item 12: in a file in Wikidata's layout (no `wikibase:directClaim` declared), wdt:P31 read as "P31" while its
    entity wd:P31 reads "instance of"."""
    path = tmp_path / "adams.ttl"
    path.write_text(WIKIDATA_SHAPED, encoding="utf-8")
    home = tmp_path / "home"
    page = run("entity", "wd:Q42", "--kg", str(path), home=home)
    assert page.returncode == 0, page.stderr
    assert "  wdt:P31 (instance of): wd:Q5 (human)" in page.stdout.splitlines(), page.stdout
    found = run("search", "instance of", "--kg", str(path), home=home)
    assert "  wdt:P31 'instance of' (1 uses)" in found.stdout.splitlines(), found.stdout


def test_start_questions_do_not_ask_for_key_columns(tmp_path: Path) -> None:
    """Item 12: the start page (`GET /api/examples`) of a database asked "List the books with their author id.":
    a key column, which identifies rows and says nothing a person reads."""
    from fastapi.testclient import TestClient

    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    with open_kg(str(library(tmp_path)), settings) as kg:
        kg.sparql_ready()  # the graph copy its schema is read from, as after the first question over SPARQL
        app = create_app(settings, ServeConfig(mcp=False, allowed_hosts=("testserver",)), kgs={"library": kg})
        with TestClient(app) as client:
            body = client.get("/api/examples", params={"kg": "library"}).json()
    assert body["source"] == "schema"
    assert body["questions"] == ["How many books are there?", "List the books with their author.",
                                 "How many authors are there?", "List the authors with their country."]


def test_explore_is_told_a_date_is_compared_with_plain_text(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    """Item 10: explore's agent compared an xsd:date with the plain text "2016-12-31" and was told "No stored value is
    spelled as your text… (LCASE, CONTAINS)"; the datatype is the problem."""
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})
    head = "PREFIX ex: <http://example.org/zoo#>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
    guess = head + 'SELECT ?a WHERE { ?a ex:arrived ?d FILTER(?d <= "2016-12-31") }'
    fixed = head + 'SELECT ?a WHERE { ?a ex:arrived ?d FILTER(?d <= "2016-12-31"^^xsd:date) }'
    config = LLMConfig(model="scripted-model", base_url=scripted_llm.base_url, api_key="k", timeout_s=10,
                       max_retries=0)
    scripted_llm.script([
        Reply("I compare the arrival dates.", [Call("execute_sparql", {"query": guess})]),
        Reply("Now as a date.", [Call("execute_sparql", {"query": fixed})]),
        Reply("That is the one.", [Call("stop", {})]),
        Reply("Simba arrived by the end of 2016."),
    ])
    with open_kg(str(zoo(tmp_path)), settings) as kg, \
            explore.create(config, digests=Digests(), settings=settings) as strategy:
        answer = strategy.run("Which animals arrived by the end of 2016?", kg, Trace())
    assert scripted_llm.problems == [] and scripted_llm.remaining == 0
    told = str(scripted_llm.requests[1]["messages"][-1]["content"])
    assert ('A plain text never equals nor orders with a typed value: ex:arrived holds xsd:date values, and '
            '"2016-12-31" is plain text: write it "2016-12-31"^^xsd:date.') in told, told
    assert "No stored value is spelled as your text" not in told
    assert answer.status == "answered" and answer.results is not None and len(answer.results) == 1
