"""The registry-data graph builders (bench/graphs) and the style sets' checker, on small sources made here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pyoxigraph
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(path: Path, name: str) -> ModuleType:
    """A bench script loaded as a module by its path."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graphs() -> ModuleType:
    """bench/graphs/build.py."""
    return _load(BENCH / "graphs" / "build.py", "bench_graphs_build")


def _country(cca3: str, cca2: str, name: str, **extra: object) -> dict[str, object]:
    """One countries.json row with the fields the builder reads."""
    row: dict[str, object] = {
        "name": {"common": name, "official": f"Republic of {name}"},
        "cca2": cca2,
        "cca3": cca3,
        "ccn3": "001",
        "cioc": "",
        "independent": True,
        "unMember": True,
        "unRegionalGroup": "",
        "landlocked": False,
        "area": 100,
        "latlng": [10.5, -3],
        "capital": [f"{name} City"],
        "tld": [".x"],
        "idd": {"root": "+9", "suffixes": ["1"]},
        "region": "Europe",
        "subregion": "Western Europe",
        "borders": [],
        "currencies": {"EUR": {"name": "Euro", "symbol": "€"}},
        "languages": {"fra": "French"},
        "demonyms": {"eng": {"m": f"{name}ian", "f": f"{name}ian"}},
    }
    row.update(extra)
    return row


def _select(graph: Path, query: str) -> list[tuple[str, ...]]:
    """The rows of a SELECT on a Turtle file, as sorted tuples of values."""
    store = pyoxigraph.Store()
    store.load(path=str(graph), format=pyoxigraph.RdfFormat.TURTLE)
    result = store.query(query)
    assert isinstance(result, pyoxigraph.QuerySolutions)
    names = [v.value for v in result.variables]
    return sorted(tuple(row[n].value for n in names) for row in result)


def test_countries_names_in_class_properties_and_unknowns_left_out(
    graphs: ModuleType, tmp_path: Path
) -> None:
    """Names sit in wc:country/wc:currency (no rdfs:label); an area of -1 and a null 'independent' are not written."""
    source = tmp_path / "src"
    source.mkdir()
    rows = [
        _country(
            "AAA", "AA", "Alpha", borders=["BBB"], idd={"root": "+1", "suffixes": ["201", "202"]}
        ),
        _country("BBB", "BB", "Beta", area=-1, independent=None, latlng=[], capital=[]),
    ]
    (source / "countries.json").write_text(json.dumps(rows), encoding="utf-8")
    build = graphs.builder("countries")
    first = build(tmp_path / "a", source)
    again = build(tmp_path / "b", source)
    assert first.read_bytes() == again.read_bytes()
    wc = "PREFIX wc: <http://example.org/countries/def#> "
    assert _select(first, wc + "SELECT ?n WHERE { ?c a wc:Country ; wc:country ?n }") == [
        ("Alpha",),
        ("Beta",),
    ]
    assert _select(first, wc + "SELECT ?n WHERE { ?c wc:currency ?n }") == [("Euro",)]
    assert (
        _select(first, "SELECT ?s WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }")
        == []
    )
    assert _select(first, wc + "SELECT ?c ?a WHERE { ?c wc:areaKm2 ?a }") == [
        ("http://example.org/countries/country/AAA", "100")
    ]
    assert _select(first, wc + "SELECT ?c WHERE { ?c wc:independent ?i }") == [
        ("http://example.org/countries/country/AAA",)
    ]
    # many area codes under one root: the root alone
    assert _select(first, wc + "SELECT ?code WHERE { ?c wc:callingCode ?code }") == [
        ("+1",),
        ("+91",),
    ]
    assert _select(first, wc + "SELECT ?o WHERE { ?c wc:borders ?o }") == [
        ("http://example.org/countries/country/BBB",)
    ]


def test_subdivisions_parents_joined_to_their_country_code(
    graphs: ModuleType, tmp_path: Path
) -> None:
    """A subdivision's short parent code becomes a skos:broader link to the full code; the top level to the country."""
    source = tmp_path / "iso"
    source.mkdir()
    parts = {
        "3166-1": [
            {"alpha_2": "ES", "alpha_3": "ESP", "numeric": "724", "name": "Spain", "flag": ""}
        ],
        "3166-2": [
            {"code": "ES-CT", "name": "Catalunya", "type": "Autonomous community"},
            {"code": "ES-B", "name": "Barcelona", "type": "Province", "parent": "CT"},
        ],
        "3166-3": [
            {
                "alpha_2": "DD",
                "alpha_3": "DDR",
                "alpha_4": "DDDE",
                "name": "GDR",
                "withdrawal_date": "1990",
            }
        ],
    }
    for part, records in parts.items():
        (source / f"iso_{part}.json").write_text(json.dumps({part: records}), encoding="utf-8")
    graph = graphs.builder("subdivisions")(tmp_path / "out", source)
    skos = "PREFIX skos: <http://www.w3.org/2004/02/skos/core#> "
    base = "http://example.org/iso3166/"
    assert _select(graph, skos + "SELECT ?s ?p WHERE { ?s skos:broader ?p }") == [
        (base + "subdivision/ES-B", base + "subdivision/ES-CT"),
        (base + "subdivision/ES-CT", base + "country/ES"),
    ]
    assert _select(graph, skos + "SELECT ?p ?s WHERE { ?p skos:narrower ?s }") == [
        (base + "country/ES", base + "subdivision/ES-CT"),
        (base + "subdivision/ES-CT", base + "subdivision/ES-B"),
    ]
    assert _select(
        graph,
        skos
        + "SELECT ?l WHERE { ?s skos:notation 'ES-B' ; <http://purl.org/dc/terms/type> ?t . ?t skos:prefLabel ?l }",
    ) == [("Province",)]
    assert _select(
        graph, skos + f"SELECT ?c WHERE {{ ?c skos:inScheme <{base}scheme/3166-3> }}"
    ) == [(base + "former/DDDE",)]


def test_check_reports_empty_unbound_and_broken_queries(tmp_path: Path) -> None:
    """The set checker fails a query that errs, returns no row or leaves a column unbound, and passes ASK false."""
    check = _load(BENCH / "datasets" / "styles" / "check.py", "bench_styles_check")
    graph = tmp_path / "g.ttl"
    graph.write_text(
        '<http://x/a> <http://x/p> "1" .\n<http://x/b> <http://x/p> "2" .\n', encoding="utf-8"
    )
    records = [
        {"id": "sty-g-01", "question": "ok", "sparql": "SELECT ?o WHERE { ?s <http://x/p> ?o }"},
        {"id": "sty-g-02", "question": "no", "sparql": "ASK { ?s <http://x/q> ?o }"},
        {"id": "sty-g-03", "question": "empty", "sparql": "SELECT ?o WHERE { ?s <http://x/q> ?o }"},
        {
            "id": "sty-g-04",
            "question": "unbound",
            "sparql": "SELECT ?o ?z WHERE { ?s <http://x/p> ?o }",
        },
        {"id": "sty-g-05", "question": "broken", "sparql": "SELECT ?o WHERE { ?s"},
        {"id": "sty-g-05", "question": "again", "sparql": "ASK { ?s ?p ?o }"},
    ]
    report = check.check_set("g", graph, records)
    assert (report.triples, report.questions, report.selects, report.asks, report.asks_true) == (
        2,
        6,
        3,
        2,
        1,
    )
    assert [f.split(":")[0] for f in report.failures] == [
        "sty-g-03",
        "sty-g-04",
        "sty-g-05",
        "sty-g-05",
    ]
