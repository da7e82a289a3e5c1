"""`subdivisions`: ISO 3166 countries, their subdivisions and former countries from Debian's `iso-codes` (LGPL-2.1+), as SKOS.

Style: SKOS concept schemes, no class of our own. Every country, subdivision and former country is a
`skos:Concept` in one of three schemes (`scheme/3166-1`, `scheme/3166-2`, `scheme/3166-3`); names are
`skos:prefLabel`s in English (a country's common name, where ISO's differs, a `skos:altLabel`), codes are
`skos:notation`s (alpha-2 for a country, the full code such as `FR-75` for a subdivision, alpha-4 for a former
country), the hierarchy is `skos:broader`/`skos:narrower` (a subdivision's parent subdivision, or its country),
and the kind of subdivision is itself a concept of a fourth scheme (`scheme/subdivision-types`) reached by
`dcterms:type`. A country's other codes are `iso:alpha3` and `iso:numeric`, its official name
`iso:officialName`; a former country's withdrawal is `iso:withdrawalDate` (a year or a date, as text) and its
comment a `skos:historyNote`.

Install the data: `apt-get install iso-codes` (Debian 13: 4.15.0); the builder reads
`/usr/share/iso-codes/json`, or the folder given.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# bench/graphs/rdfterms.py, found because build.py (or running this file) puts this folder on sys.path
from rdfterms import iri, literal, write

BASE = "http://example.org/iso3166/"
ISO = BASE + "def#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
DCT = "http://purl.org/dc/terms/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
DEFAULT_SOURCE = Path("/usr/share/iso-codes/json")  # where Debian's package puts it


def _read(folder: Path, part: str) -> list[dict[str, Any]]:
    """One ISO 3166 part's records."""
    data: dict[str, list[dict[str, Any]]] = json.loads(
        (folder / f"iso_{part}.json").read_text(encoding="utf-8")
    )
    return data[part]


def _slug(text: str) -> str:
    """A type name made an IRI segment."""
    return "".join(ch if ch.isalnum() else "_" for ch in text.lower())


def triples(folder: Path) -> list[tuple[str, str, str]]:
    """The graph's triples, from the package's iso_3166-1, -2 and -3 files."""
    out: list[tuple[str, str, str]] = []

    def add(subject: str, prop: str, obj: str) -> None:
        out.append((iri(subject), iri(prop), obj))

    def concept(subject: str, scheme: str, label: str, notation: str | None) -> None:
        add(subject, RDF_TYPE, iri(SKOS + "Concept"))
        add(subject, SKOS + "inScheme", iri(f"{BASE}scheme/{scheme}"))
        add(subject, SKOS + "prefLabel", literal(label, lang="en"))
        if notation:
            add(subject, SKOS + "notation", literal(notation))

    schemes = {
        "3166-1": "ISO 3166-1 countries",
        "3166-2": "ISO 3166-2 country subdivisions",
        "3166-3": "ISO 3166-3 formerly used country names",
        "subdivision-types": "Kinds of country subdivision",
    }
    for key, title in schemes.items():
        add(f"{BASE}scheme/{key}", RDF_TYPE, iri(SKOS + "ConceptScheme"))
        add(f"{BASE}scheme/{key}", SKOS + "prefLabel", literal(title, lang="en"))

    for row in _read(folder, "3166-1"):
        country = f"{BASE}country/{row['alpha_2']}"
        concept(country, "3166-1", row["name"], row["alpha_2"])
        add(country, SKOS + "topConceptOf", iri(f"{BASE}scheme/3166-1"))
        add(f"{BASE}scheme/3166-1", SKOS + "hasTopConcept", iri(country))
        add(country, ISO + "alpha3", literal(row["alpha_3"]))
        add(country, ISO + "numeric", literal(row["numeric"]))
        if row.get("official_name"):
            add(country, ISO + "officialName", literal(row["official_name"], lang="en"))
        if row.get("common_name"):
            add(country, SKOS + "altLabel", literal(row["common_name"], lang="en"))

    for row in _read(folder, "3166-2"):
        subject = f"{BASE}subdivision/{row['code']}"
        concept(subject, "3166-2", row["name"], row["code"])
        parent_code = row.get("parent")
        country_code = row["code"].split("-", 1)[0]
        # "parent" holds the part after the country's prefix (or, rarely, the whole code)
        if parent_code:
            full = (
                parent_code
                if parent_code.startswith(country_code + "-")
                else f"{country_code}-{parent_code}"
            )
            parent = f"{BASE}subdivision/{full}"
        else:
            parent = f"{BASE}country/{country_code}"
        add(subject, SKOS + "broader", iri(parent))
        add(parent, SKOS + "narrower", iri(subject))
        kind = f"{BASE}subdivision-type/{_slug(row['type'])}"
        add(subject, DCT + "type", iri(kind))
        concept(kind, "subdivision-types", row["type"], None)

    for row in _read(folder, "3166-3"):
        subject = f"{BASE}former/{row['alpha_4']}"
        concept(subject, "3166-3", row["name"], row["alpha_4"])
        add(subject, ISO + "alpha3", literal(row["alpha_3"]))
        if row.get("numeric"):
            add(subject, ISO + "numeric", literal(row["numeric"]))
        add(subject, ISO + "withdrawalDate", literal(row["withdrawal_date"]))
        if row.get("comment"):
            add(subject, SKOS + "historyNote", literal(row["comment"], lang="en"))
    return out


def build(out_dir: Path, source: Path | None = None) -> Path:
    """Write out_dir/subdivisions.ttl from the installed package (or the folder given) and return its path."""
    folder = source or DEFAULT_SOURCE
    if not (folder / "iso_3166-2.json").is_file():
        raise SystemExit(f"subdivisions: no iso_3166-2.json in {folder}: apt-get install iso-codes")
    prefixes = {"skos": SKOS, "dcterms": DCT, "iso": ISO}
    return write(out_dir / "subdivisions.ttl", prefixes, triples(folder))


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
