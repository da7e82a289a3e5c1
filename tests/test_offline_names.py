"""Issue 36, item 2: things without labels get names. A class whose things carry no rdfs:label (or skos/schema
name) is named by the property that names it in the data — text, nearly one value per thing, its own name saying
so (`name`, `title`, the class's own name, `<class>_name`), never a key — and answers, search and labels use it.
Fixtures of our own: a small fleet graph in the style of relational data published as RDF."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyoxigraph as ox
import pytest

from sparqlnav.graph.name_properties import name_properties, names_things
from sparqlnav.graph.opening import open_kg
from sparqlnav.graph.vocab import Vocabulary
from sparqlnav.settings import Settings

EX = "http://example.org/fleet/"
FLEET = f"""@prefix ex: <{EX}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<{EX}carrier/uid=1> a ex:Carrier ; ex:uid 1 ; ex:code "XYZ" ; ex:carrier "Air Lumen" ; ex:country "Norway" .
<{EX}carrier/uid=2> a ex:Carrier ; ex:uid 2 ; ex:code "QRT" ; ex:carrier "Blue Meridian" ; ex:country "Chile" .
<{EX}carrier/uid=3> a ex:Carrier ; ex:uid 3 ; ex:code "KLM2" ; ex:carrier "Cobalt Wings" ; ex:country "Norway" .
<{EX}kind/k7> a ex:Kind ; ex:kind_code "K7" ; ex:kindName "Turboprop" .
<{EX}kind/k8> a ex:Kind ; ex:kind_code "K8" ; ex:kindName "Narrow body" .
<{EX}kind/k9> a ex:Kind ; ex:kind_code "K9" ; ex:kindName "Wide body" .
<{EX}gate/g1> a ex:Gate ; ex:gate_code "A1" ; ex:status "open" .
<{EX}gate/g2> a ex:Gate ; ex:gate_code "A2" ; ex:status "open" .
<{EX}plane/p1> a ex:Plane ; ex:title "ignored: planes have labels" ; ex:operatedBy <{EX}carrier/uid=1> ;
    ex:ofKind <{EX}kind/k7> ; rdfs:label "Spirit of Oslo" .
<{EX}plane/p2> a ex:Plane ; ex:operatedBy <{EX}carrier/uid=2> ; ex:ofKind <{EX}kind/k8> ; rdfs:label "Andes Runner" .
<{EX}plane/p3> a ex:Plane ; ex:operatedBy <{EX}carrier/uid=1> ; ex:ofKind <{EX}kind/k8> ; rdfs:label "Fjord Hopper" .
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fleet") / "fleet.ttl"
    path.write_text(FLEET)
    return path


def test_the_naming_property_is_picked_from_the_data_never_a_key(fleet: Path) -> None:
    store = ox.Store()
    store.load(path=str(fleet), format=ox.RdfFormat.TURTLE)
    chosen = {p.cls.removeprefix(EX): p.predicate.removeprefix(EX) for p in name_properties(store, Vocabulary().labels)}
    # the class's own name and `<class>Name`; a gate has only a code and a category: no name; planes have labels
    assert chosen == {"Carrier": "carrier", "Kind": "kindName"}
    assert names_things(EX + "full_name", EX + "Person") and names_things(EX + "ships", EX + "Ship")
    # the plainest of two naming properties: `country` of Country over `officialName` (the bench's countries graph)
    both = ox.Store()
    both.load(input=f"""@prefix ex: <{EX}> .
        ex:n1 a ex:Country ; ex:officialName "Kingdom of Norway" ; ex:country "Norway" .
        ex:n2 a ex:Country ; ex:officialName "Republic of Chile" ; ex:country "Chile" .""", format=ox.RdfFormat.TURTLE)
    assert [p.predicate for p in name_properties(both, Vocabulary().labels)] == [EX + "country"]
    assert not names_things(EX + "name_code", EX + "Kind") and not names_things(EX + "uid", EX + "Carrier")


@pytest.mark.parametrize(("question", "answer"), [
    ("Which carrier has the code 'XYZ'?", "The answer is Air Lumen."),  # before: "The answer is uid=1."
    ("Which kind has the kind code K8?", "The answer is Narrow body."),  # before: "The answer is k8."
])  # fmt: skip
def test_answers_name_things_by_their_name_property(fleet: Path, tmp_path: Path, question: str, answer: str) -> None:
    done = subprocess.run([sys.executable, "-m", "sparqlnav", "ask", question, "--kg", str(fleet)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"SPARQLNAV_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == answer


def test_search_and_labels_use_the_names_and_keep_real_labels(fleet: Path, tmp_path: Path) -> None:
    with open_kg(str(fleet), Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home")})) as kg:
        labels = kg.names.labels_of([f"{EX}carrier/uid=2", f"{EX}kind/k9", f"{EX}plane/p1", f"{EX}gate/g1"])
        hits = kg.names.search("Cobalt Wings", limit=1)
    assert labels[f"{EX}carrier/uid=2"] == "Blue Meridian" and labels[f"{EX}kind/k9"] == "Wide body"
    assert labels[f"{EX}plane/p1"] == "Spirit of Oslo"  # a real label stays, whatever else names it
    assert labels.get(f"{EX}gate/g1") != "open"  # a category is no name
    assert hits and hits[0].iri == f"{EX}carrier/uid=3"
