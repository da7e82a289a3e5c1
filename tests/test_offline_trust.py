"""Issue 36, item 1: the answer's type agrees with the question, whatever the question's form. An imperative
("Tell me / Give me / Find / Return …") asks as "what is" does; a thing given where a value of it was asked, a
counted thing where a year was asked, one column where two were asked, is no answer, and its guess is not shown as
"Probably" (it answers another question). Our own harbour graph, no label anywhere (names by class-named
properties, issue 36 item 2); lexical with no LLM, through the CLI as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EX = "http://example.org/harbour/"
HARBOUR = f"""@prefix ex: <{EX}> .
ex:b1 a ex:Bridge ; ex:bridge "Gull Span" ; ex:length 820 .
ex:b2 a ex:Bridge ; ex:bridge "Tern Crossing" ; ex:length 415 .
ex:b3 a ex:Bridge ; ex:bridge "Mill Footbridge" ; ex:length 60 .
ex:s1 a ex:Vessel ; ex:vessel "Morning Wren" ; ex:tonnage 1200 ; ex:builtIn 1987 ; ex:registry "HB-204" .
ex:s2 a ex:Vessel ; ex:vessel "Grey Heron" ; ex:tonnage 5400 ; ex:builtIn 2011 ; ex:registry "HB-377" .
ex:s3 a ex:Vessel ; ex:vessel "Little Auk" ; ex:tonnage 310 ; ex:builtIn 2019 ; ex:registry "HB-412" .
ex:l1 a ex:Launch ; ex:launch "Spring launch" ; ex:year 2019 ; ex:of ex:s3 .
ex:l2 a ex:Launch ; ex:launch "Autumn launch" ; ex:year 2019 ; ex:of ex:s2 .
ex:l3 a ex:Launch ; ex:launch "Winter launch" ; ex:year 2011 ; ex:of ex:s1 .
"""


@pytest.fixture(scope="module")
def harbour(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("harbour")
    (folder / "harbour.ttl").write_text(HARBOUR)
    return folder / "harbour.ttl", folder / "home"


def ask(harbour: tuple[Path, Path], question: str) -> str:
    path, home = harbour
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    done = subprocess.run([sys.executable, "-m", "sparqlnav", "ask", question, "--kg", str(path)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**env, "SPARQLNAV_HOME": str(home), "NO_COLOR": "1", "SPARQLNAV_LLM_MODEL": ""})  # fmt: skip
    return done.stdout


@pytest.mark.parametrize("question", ["Tell me the length of the longest bridge.",
                                      "Give me the length of the longest bridge."])
def test_an_imperative_asking_a_value_gets_the_value_not_the_thing(harbour: tuple[Path, Path], question: str) -> None:
    """Before: "The answer is Gull Span." (a bridge, trusted); then no answer (the bridge answers another question);
    now the length, read from the longest bridge (item 4: said with how the question was read)."""
    said = ask(harbour, question)
    assert said.splitlines()[0].startswith("Probably: The answer is 820. I read 'bridge' as the class Bridge, "
                                           "'length' as the property length, 'longest' as the largest length.")
    assert "Gull Span" not in said


def test_things_given_where_a_year_is_asked_are_no_answer(harbour: tuple[Path, Path]) -> None:
    said = ask(harbour, "Which year saw the most launches?")
    assert said.startswith("I could not find an answer in this knowledge graph.")
    assert "Probably" not in said and "The answer is" not in said.splitlines()[0]


def test_two_values_asked_and_one_thing_given_is_no_answer(harbour: tuple[Path, Path]) -> None:
    said = ask(harbour, "Find the tonnage and registry of the newest vessel.")
    assert said.startswith("I could not find an answer") and "Probably" not in said


def test_a_thing_is_named_by_its_class_named_property_not_its_key(harbour: tuple[Path, Path]) -> None:
    said = ask(harbour, "Which vessel has the registry HB-377?")
    assert said.splitlines()[0] == "The answer is Grey Heron."  # before: "The answer is s2."
