"""Schema: reading VoID (files written here and the real UniProt/PubChem descriptions), computing statistics
through SPARQL (an in-memory store and a real Oxigraph server), shapes, JSON cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox
import pytest

from sparqlnav.graph.endpoint import rows_as_dicts
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.schema import (
    RDF_TYPE,
    Schema,
    StoreRunner,
    compute_schema,
    namespace_of,
    schema_from_void_file,
)

EX = "http://example.org/voc#"
XSD = "http://www.w3.org/2001/XMLSchema#"

# Two named graphs describe ex:Person (their counts add up); ex:Person ex:knows ex:Person, ex:name is a
# string (void-ext datatype partition), a linkset adds ex:worksFor → ex:Company, a graph-level partition
# lists ex:comment used on untyped subjects.
VOID_TTL = """
@prefix void: <http://rdfs.org/ns/void#> .
@prefix void-ext: <http://ldf.fi/void-ext#> .
@prefix sd: <http://www.w3.org/ns/sparql-service-description#> .
@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix ex: <http://example.org/voc#> .

<http://example.org/sparql> a sd:Service ; sd:endpoint <http://example.org/sparql> .
<http://example.org/g1> a sd:NamedGraph ; sd:name <http://example.org/g1> ; sd:graph _:g1 .
<http://example.org/g2> a sd:NamedGraph ; sd:name <http://example.org/g2> ; sd:graph _:g2 .

_:g1 a sd:Graph ;
  void:classPartition _:p1 , _:c1 ;
  void:propertyPartition [ void:property ex:comment ; void:triples "7"^^xsd:long ] .
_:g2 a sd:Graph ; void:classPartition _:p2 .

_:p1 void:class ex:Person ; void:entities "10"^^xsd:long ;
  void:propertyPartition [ void:property ex:knows ; void:triples "30"^^xsd:long ;
                           void:classPartition [ void:class ex:Person ; void:triples "30"^^xsd:long ] ] ,
                         [ void:property ex:name ; void:triples "10"^^xsd:long ;
                           void-ext:datatypePartition [ void-ext:datatype xsd:string ] ] .
_:p2 void:class ex:Person ; void:entities "5"^^xsd:long ;
  void:propertyPartition [ void:property ex:knows ; void:triples "4"^^xsd:long ;
                           void:classPartition [ void:class ex:Person ; void:triples "4"^^xsd:long ] ] .
_:c1 void:class ex:Company ; void:entities "2"^^xsd:long ;
  void:propertyPartition [ void:property ex:label ; void:triples "2"^^xsd:long ] .

[] a void:Linkset ; void:linkPredicate ex:worksFor ; void:subjectsTarget _:p1 ; void:objectsTarget _:c1 ;
   void:triples "9"^^xsd:long .

[] sh:prefix "ex" ; sh:namespace "http://example.org/voc#"^^xsd:anyURI .
"""

DATA_TTL = """
@prefix ex: <http://example.org/voc#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix d: <http://example.org/data/> .

ex:Person rdfs:label "person"@en .
ex:City rdfs:label "city" .
d:alice a ex:Person ; ex:name "Alice" ; ex:age 30 ; ex:livesIn d:paris ; ex:knows d:bob .
d:bob a ex:Person ; ex:name "Bob" ; ex:livesIn d:rome .
d:carol a ex:Person ; ex:name "Carol"@en .
d:paris a ex:City ; ex:name "Paris" .
d:rome a ex:City ; ex:name "Rome" ; ex:population 2800000 .
d:loose ex:note "untyped subject" .
"""


@pytest.fixture
def void_file(tmp_path: Path) -> Path:
    path = tmp_path / "void.ttl"
    path.write_text(VOID_TTL, encoding="utf-8")
    return path


@pytest.fixture
def data_store() -> ox.Store:
    store = ox.Store()
    store.load(DATA_TTL, format=ox.RdfFormat.TURTLE)
    return store


def test_read_void_file_sums_graphs_and_reads_partitions(void_file: Path) -> None:
    s = schema_from_void_file(void_file)
    person = s.classes[EX + "Person"]
    assert person.instances == 15
    assert sorted(person.graphs) == ["http://example.org/g1", "http://example.org/g2"]
    assert person.predicates[EX + "knows"].triples == 34
    assert person.predicates[EX + "knows"].object_classes == {EX + "Person": 34}
    assert person.predicates[EX + "knows"].objects_fully_typed()
    assert person.predicates[EX + "name"].datatypes == {XSD + "string": None}
    assert person.predicates[EX + "worksFor"].object_classes == {
        EX + "Company": 9
    }  # from the linkset
    assert s.classes[EX + "Company"].instances == 2
    assert s.predicates[EX + "comment"] == 7  # graph-level partition, no class
    assert s.predicates[EX + "knows"] == 34
    assert s.endpoint == "http://example.org/sparql"
    assert s.prefixes["ex"] == EX
    assert s.has_class(EX + "Company") and not s.has_class(EX + "Nope")
    assert s.namespaces[EX] >= 6
    assert s.source == "void:void.ttl"


def test_sole_domain_needs_counts_that_prove_it(void_file: Path) -> None:
    s = schema_from_void_file(void_file)
    # ex:name is only used on ex:Person, and Person's 10 triples are all of them.
    assert s.sole_domains[EX + "name"] == EX + "Person"
    # ex:comment has no class at all.
    assert EX + "comment" not in s.sole_domains


def test_compute_full_schema_from_a_store(data_store: ox.Store) -> None:
    steps: list[tuple[int, int, str]] = []
    s = compute_schema(
        StoreRunner(data_store),
        prefixes={"ex": EX},
        progress=lambda d, t, m: steps.append((d, t, m)),
    )
    person = s.classes[EX + "Person"]
    assert person.instances == 3
    assert person.predicates[EX + "name"].triples == 3
    assert person.predicates[EX + "name"].datatypes == {
        XSD + "string": 2,
        "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString": 1,
    }
    assert person.predicates[EX + "livesIn"].object_classes == {EX + "City": 2}
    assert person.predicates[EX + "livesIn"].objects_fully_typed()
    assert person.predicates[EX + "knows"].object_classes == {EX + "Person": 1}
    assert s.classes[EX + "City"].predicates[EX + "population"].datatypes == {XSD + "integer": 1}
    assert s.predicates[EX + "note"] == 1  # untyped subjects still count as predicates
    assert s.predicates[RDF_TYPE] == 5
    assert s.labels == {EX + "Person": "person", EX + "City": "city"}
    assert s.source == "computed:full" and not s.sampled
    assert steps[-1][0] == steps[-1][1] and [d for d, _, _ in steps[:5]] == [0, 1, 2, 3, 4]


def test_compute_sampled_schema_reports_progress_per_class(data_store: ox.Store) -> None:
    steps: list[str] = []
    s = compute_schema(
        StoreRunner(data_store),
        mode="sampled",
        per_class_sample=1,
        progress=lambda d, t, m: steps.append(m),
    )
    assert s.sampled and s.source == "computed:sampled"
    assert set(s.classes) == {EX + "Person", EX + "City"}
    assert s.classes[EX + "Person"].instances == 3
    # One sampled person: its triples only (name, type and maybe more), never more than the full counts.
    name = s.classes[EX + "Person"].predicates[EX + "name"]
    assert name.triples == 1
    assert any(m.startswith("sampling http://example.org/voc#Person") for m in steps)
    explicit = compute_schema(StoreRunner(data_store), mode="sampled", classes=[EX + "City"])
    assert set(explicit.classes) == {EX + "City"}
    assert explicit.classes[EX + "City"].predicates[EX + "name"].triples == 2


def test_shapes_rank_predicates_and_keep_the_top_fraction(data_store: ox.Store) -> None:
    s = compute_schema(
        StoreRunner(data_store), prefixes={"ex": EX, "d": "http://example.org/data/"}
    )
    shape = s.shape(EX + "Person")
    assert shape.splitlines()[0] == "ex:Person {  # person"
    assert shape.splitlines()[1] == "  a [ ex:Person ] ;"
    # name (3 triples) before livesIn (2) before age/knows (1); one datatype → bare, mixed → bracketed
    assert shape.index("ex:name [ xsd:string rdf:langString ]") < shape.index(
        "ex:livesIn [ ex:City ]"
    )
    assert shape.index("ex:livesIn [ ex:City ]") < shape.index("ex:age xsd:integer")
    assert shape.endswith("\n}")
    top = s.shape(EX + "Person", top_fraction=0.25)
    assert "ex:name" in top and "ex:livesIn" not in top and "ex:age" not in top
    counted = s.shape(EX + "Person", counts=True)
    assert (
        "# person; 3 instances" in counted
        and "ex:name [ xsd:string rdf:langString ] ;  # 3" in counted
    )
    shapes = s.shapes()
    assert list(shapes) == [EX + "Person", EX + "City"]  # most instances first


def test_json_round_trip(tmp_path: Path, void_file: Path) -> None:
    s = schema_from_void_file(void_file)
    path = tmp_path / "cache" / "schema.json"
    s.save(path)
    back = Schema.load(path)
    assert back.classes == s.classes
    assert back.predicates == s.predicates
    assert back.linksets == s.linksets
    assert (back.prefixes, back.endpoint, back.type_predicates, back.source) == (
        s.prefixes,
        s.endpoint,
        s.type_predicates,
        s.source,
    )
    assert back.shape(EX + "Person") == s.shape(EX + "Person")
    with pytest.raises(ValueError, match="version"):
        Schema.from_json({"version": 999})


def test_namespace_of() -> None:
    assert namespace_of("http://purl.uniprot.org/core/Protein") == "http://purl.uniprot.org/core/"
    assert (
        namespace_of("http://www.w3.org/2000/01/rdf-schema#label")
        == "http://www.w3.org/2000/01/rdf-schema#"
    )
    assert namespace_of("urn:isbn:123") == "urn:isbn:"


def test_real_uniprot_void(data_dir: Path) -> None:
    s = schema_from_void_file(data_dir / "void" / "void_uniprot.ttl")
    up = "http://purl.uniprot.org/core/"
    protein = s.classes[up + "Protein"]
    # Active entries (uniprot graph) plus obsolete ones (obsolete graph).
    assert protein.instances == 441_535_859
    assert sorted(protein.graphs) == [
        "http://sparql.uniprot.org/obsolete",
        "http://sparql.uniprot.org/uniprot",
    ]
    assert set(protein.predicates[up + "sequence"].object_classes) >= {
        up + "Simple_Sequence",
        up + "Modified_Sequence",
    }
    assert protein.predicates[up + "mnemonic"].datatypes == {XSD + "string": None}
    assert protein.predicates[up + "reviewed"].datatypes == {XSD + "boolean": None}
    assert len(s.classes) > 150 and len(s.predicates) > 300 and len(s.linksets) > 500
    assert s.endpoint == "https://sparql.uniprot.org/sparql"
    assert s.prefixes["up"] == up and "" not in s.prefixes
    shape = s.shape(up + "Protein", top_fraction=0.25)
    assert shape.startswith("up:Protein {\n  a [ up:Protein ] ;\n  rdfs:seeAlso [")
    assert len(shape.splitlines()) == 2 + 1 + (len(protein.predicates) - 1 + 3) // 4


def test_real_pubchem_void(data_dir: Path) -> None:
    s = schema_from_void_file(data_dir / "void" / "void_pubchem.ttl")
    vocab = "http://rdf.ncbi.nlm.nih.gov/pubchem/vocabulary#"
    compound = s.classes[vocab + "Compound"]
    assert compound.instances is None  # PubChem's VoID has no statistics
    assert vocab + "molecular_weight" in compound.predicates
    assert len(s.classes) == 63
    assert s.endpoint == "https://pubchem.ncbi.nlm.nih.gov/sparql"
    assert "vocab:molecular_weight ." in s.shape(vocab + "Compound")


class _EndpointRunner:
    """The lead's endpoint seen as a QueryRunner."""

    def __init__(self, graph: KnowledgeGraph) -> None:
        self.graph = graph

    def select(self, sparql: str) -> list[dict[str, str]]:
        result = self.graph.endpoint.query(sparql)
        assert result.ok, result.describe()
        return rows_as_dicts(result)


@pytest.fixture
def ck25_runner(ck25: KnowledgeGraph) -> Iterator[_EndpointRunner]:
    yield _EndpointRunner(ck25)


def test_compute_schema_through_a_real_oxigraph_server(ck25_runner: _EndpointRunner) -> None:
    pv = "http://ld.company.org/prod-vocab/"
    s = compute_schema(ck25_runner)
    employee = s.classes[pv + "Employee"]
    assert employee.instances and employee.instances > 10
    assert pv + "memberOf" in employee.predicates
    assert pv + "Department" in employee.predicates[pv + "memberOf"].object_classes
    sampled = compute_schema(ck25_runner, mode="sampled", per_class_sample=5, max_classes=3)
    assert 0 < len([c for c in sampled.classes.values() if c.predicates]) <= 3
    for c in sampled.classes.values():
        for p in c.predicates.values():
            full = s.classes[c.iri].predicates[p.iri].triples
            assert p.triples is not None and full is not None and p.triples <= full
