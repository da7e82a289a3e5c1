"""`observations`: five small statistical tables from PyPI's `vega_datasets` (MIT), as an RDF Data Cube (W3C qb).

Style: statistical observations. Each table is a `qb:DataSet` (with a `qb:DataStructureDefinition` listing its
components); each row is a `qb:Observation` linked by `qb:dataSet`, with an opaque IRI (`obs/<table>/<row>`)
and **no label**: what it is about is only in its dimension values. Dimensions and measures are properties of
`od:` (`http://example.org/observations/def#`) declared `qb:DimensionProperty` / `qb:MeasureProperty`, each
with an `rdfs:label`. Coded dimension values (barley sites and varieties, energy sources, weather kinds,
employment sectors) are `skos:Concept`s in `skos:ConceptScheme`s (reached from the dimension by
`qb:codeList`) named by `skos:prefLabel "…"@en`. Years are `xsd:gYear`, months `xsd:gYearMonth`, days
`xsd:date`, counts and whole quantities `xsd:integer`, the other numbers `xsd:decimal`. A value missing in the
source is left unsaid.

The tables (the package's `_data/` files):

- `barley.json`: barley yield by variety, site and year (1931, 1932): 120 observations.
- `iowa-electricity.csv`: Iowa's net generation of electricity by source and year (2001-2017), in thousand
  megawatthours: 51 observations.
- `seattle-weather.csv`: Seattle's daily precipitation, maximum and minimum temperature, wind and kind of
  weather (2012-2015): 1,461 observations.
- `us-employment.csv`: US employment (thousands, seasonally adjusted) by month (2006-2015) and sector, one
  observation per month and sector (the file's 22 sector columns): 2,640 observations; the file's calculated
  `nonfarm_change` (the month-to-month change of nonfarm employment) is a measure of the nonfarm ones only.
- `wheat.json`: Playfair's price of wheat and wages, every five years from 1565 to 1820: 52 observations (the
  last two without wages).

Install the data: `pip install vega_datasets==0.9.0` (the builder reads the installed package's folder, found
without importing it, or the folder given, which holds `_data/` and `dataset_info.json`).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

# bench/graphs/rdfterms.py, found because build.py (or running this file) puts this folder on sys.path
from rdfterms import XSD, iri, literal, write

BASE = "http://example.org/observations/"
OD = BASE + "def#"
QB = "http://purl.org/linked-data/cube#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
DCT = "http://purl.org/dc/terms/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
PACKAGE = "vega_datasets"
INSTALL = "pip install vega_datasets==0.9.0"

# each table: (package name, label, licence as the package's dataset_info.json describes its source)
TABLES = {
    "barley": (
        "Barley yields",
        "no licence stated; published by Immer, Hayes and Powers (1934), per the package's dataset_info.json",
    ),
    "iowa-electricity": (
        "Iowa electricity generation",
        "public domain (U.S. Energy Information Administration), per the package's dataset_info.json",
    ),
    "seattle-weather": (
        "Seattle weather",
        "public domain (NOAA), per the package's dataset_info.json",
    ),
    "us-employment": (
        "US employment",
        "public domain (U.S. Bureau of Labor Statistics), per the package's dataset_info.json",
    ),
    "wheat": (
        "Wheat price and wages",
        "public domain (the electronic dataset by Mike Bostock, after Playfair 1822), "
        "per the package's dataset_info.json",
    ),
}

# property local name: (kind, label, range: a concept scheme's key for a coded dimension, else an XSD type)
PROPERTIES = {
    "variety": ("dimension", "variety", "scheme:variety"),
    "site": ("dimension", "site", "scheme:site"),
    "year": ("dimension", "year", "gYear"),
    "energySource": ("dimension", "energy source", "scheme:energy-source"),
    "date": ("dimension", "date", "date"),
    "month": ("dimension", "month", "gYearMonth"),
    "sector": ("dimension", "sector", "scheme:sector"),
    "weather": ("dimension", "weather", "scheme:weather"),
    "yield": ("measure", "yield", "decimal"),
    "netGeneration": ("measure", "net generation", "integer"),
    "precipitation": ("measure", "precipitation", "decimal"),
    "tempMax": ("measure", "maximum temperature", "decimal"),
    "tempMin": ("measure", "minimum temperature", "decimal"),
    "wind": ("measure", "wind", "decimal"),
    "employment": ("measure", "employment", "decimal"),
    "nonfarmChange": ("measure", "nonfarm change", "integer"),
    "wheatPrice": ("measure", "wheat price", "decimal"),
    "wages": ("measure", "wages", "decimal"),
}

COMMENTS = {
    "netGeneration": "Annual net generation of electricity, in thousand megawatthours.",
    "employment": "Monthly employment, in thousands, seasonally adjusted.",
    "nonfarmChange": "Change of nonfarm employment from the previous month, in thousands.",
}

# each table's components, in order: dimensions first
STRUCTURE = {
    "barley": ["variety", "site", "year", "yield"],
    "iowa-electricity": ["energySource", "year", "netGeneration"],
    "seattle-weather": ["date", "weather", "precipitation", "tempMax", "tempMin", "wind"],
    "us-employment": ["month", "sector", "employment", "nonfarmChange"],
    "wheat": ["year", "wheatPrice", "wages"],
}

SCHEMES = {
    "variety": "Barley varieties",
    "site": "Barley trial sites",
    "energy-source": "Sources of electricity",
    "weather": "Kinds of weather",
    "sector": "Employment sectors",
}


def default_source() -> Path:
    """The installed package's folder, found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(
            f"observations: {PACKAGE} is not installed for {sys.executable}: {INSTALL}"
        )
    return Path(spec.origin).parent


def _slug(text: str) -> str:
    """A label made an IRI segment: letters and digits kept, anything else an underscore."""
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def _decimal(value: int | float | str) -> str:
    """A number as xsd:decimal, whole or not."""
    return literal(Decimal(str(value)))


def _year(text: str) -> str:
    """The year of a `YYYY-MM-DD` date (or a bare year) as xsd:gYear."""
    return literal(str(text)[:4], datatype=XSD + "gYear")


def triples(folder: Path) -> list[tuple[str, str, str]]:
    """The graph's triples, from the package folder's `_data/` files and `dataset_info.json`."""
    out: list[tuple[str, str, str]] = []
    data = folder / "_data"
    info: dict[str, dict[str, Any]] = json.loads(
        (folder / "dataset_info.json").read_text(encoding="utf-8")
    )

    def add(subject: str, prop: str, obj: str) -> None:
        out.append((iri(subject), iri(prop), obj))

    concepts: dict[tuple[str, str], str] = {}

    def code(scheme: str, label: str) -> str:
        """The concept for a coded value (made on first use) as an IRI term."""
        subject = f"{BASE}code/{scheme}/{_slug(label)}"
        known = concepts.setdefault((scheme, subject), label)
        if known != label:
            raise SystemExit(f"observations: {label!r} and {known!r} make the same IRI {subject}")
        return iri(subject)

    for key, title in SCHEMES.items():
        add(f"{BASE}scheme/{key}", RDF_TYPE, iri(SKOS + "ConceptScheme"))
        add(f"{BASE}scheme/{key}", SKOS + "prefLabel", literal(title, lang="en"))

    for name, (kind, label, range_) in PROPERTIES.items():
        prop = OD + name
        cls = "DimensionProperty" if kind == "dimension" else "MeasureProperty"
        add(prop, RDF_TYPE, iri(QB + cls))
        add(prop, RDF_TYPE, iri(QB + "ComponentProperty"))
        add(prop, RDFS + "label", literal(label, lang="en"))
        if range_.startswith("scheme:"):
            add(prop, QB + "codeList", iri(f"{BASE}scheme/{range_.removeprefix('scheme:')}"))
            add(prop, RDFS + "range", iri(SKOS + "Concept"))
        else:
            add(prop, RDFS + "range", iri(XSD + range_))
        if name in COMMENTS:
            add(prop, RDFS + "comment", literal(COMMENTS[name], lang="en"))

    for table, (title, licence) in TABLES.items():
        dataset = f"{BASE}dataset/{table}"
        dsd = f"{BASE}structure/{table}"
        add(dataset, RDF_TYPE, iri(QB + "DataSet"))
        add(dataset, RDFS + "label", literal(title, lang="en"))
        add(dataset, DCT + "identifier", literal(table))
        add(dataset, DCT + "license", literal(licence))
        add(dataset, QB + "structure", iri(dsd))
        about = info.get(table, {})
        if about.get("description"):
            add(dataset, DCT + "description", literal(about["description"], lang="en"))
        for reference in about.get("references", []):
            add(dataset, DCT + "source", literal(reference))
        add(dsd, RDF_TYPE, iri(QB + "DataStructureDefinition"))
        for order, name in enumerate(STRUCTURE[table], start=1):
            component = f"{dsd}/{name}"
            add(dsd, QB + "component", iri(component))
            add(component, RDF_TYPE, iri(QB + "ComponentSpecification"))
            add(component, QB + PROPERTIES[name][0], iri(OD + name))
            add(component, QB + "order", literal(order))

    def observation(table: str, row: int) -> str:
        subject = f"{BASE}obs/{table}/{row:04d}"
        add(subject, RDF_TYPE, iri(QB + "Observation"))
        add(subject, QB + "dataSet", iri(f"{BASE}dataset/{table}"))
        return subject

    barley = json.loads((data / "barley.json").read_text(encoding="utf-8"))
    for n, rec in enumerate(barley, start=1):
        obs = observation("barley", n)
        add(obs, OD + "variety", code("variety", rec["variety"]))
        add(obs, OD + "site", code("site", rec["site"]))
        add(obs, OD + "year", _year(str(rec["year"])))
        add(obs, OD + "yield", _decimal(rec["yield"]))

    with (data / "iowa-electricity.csv").open(encoding="utf-8", newline="") as handle:
        for n, rec in enumerate(csv.DictReader(handle), start=1):
            obs = observation("iowa-electricity", n)
            add(obs, OD + "energySource", code("energy-source", rec["source"]))
            add(obs, OD + "year", _year(rec["year"]))
            add(obs, OD + "netGeneration", literal(int(rec["net_generation"])))

    with (data / "seattle-weather.csv").open(encoding="utf-8", newline="") as handle:
        for n, rec in enumerate(csv.DictReader(handle), start=1):
            obs = observation("seattle-weather", n)
            add(obs, OD + "date", literal(rec["date"].replace("/", "-"), datatype=XSD + "date"))
            add(obs, OD + "weather", code("weather", rec["weather"]))
            for column, prop in (
                ("precipitation", "precipitation"),
                ("temp_max", "tempMax"),
                ("temp_min", "tempMin"),
                ("wind", "wind"),
            ):
                if rec[column] != "":
                    add(obs, OD + prop, _decimal(rec[column]))

    with (data / "us-employment.csv").open(encoding="utf-8", newline="") as handle:
        n = 0
        for rec in csv.DictReader(handle):
            month = literal(rec["month"][:7], datatype=XSD + "gYearMonth")
            for column, value in rec.items():
                if column in ("month", "nonfarm_change"):
                    continue
                n += 1
                obs = observation("us-employment", n)
                add(obs, OD + "month", month)
                # the sector is the column's name, its underscores spaces (the source's spelling kept)
                add(obs, OD + "sector", code("sector", column.replace("_", " ")))
                add(obs, OD + "employment", _decimal(value))
                if column == "nonfarm":
                    add(obs, OD + "nonfarmChange", literal(int(rec["nonfarm_change"])))

    wheat = json.loads((data / "wheat.json").read_text(encoding="utf-8"))
    for n, rec in enumerate(wheat, start=1):
        obs = observation("wheat", n)
        add(obs, OD + "year", _year(rec["year"]))
        add(obs, OD + "wheatPrice", _decimal(rec["wheat"]))
        if rec.get("wages") is not None:  # none for 1815 and 1820: left unsaid
            add(obs, OD + "wages", _decimal(rec["wages"]))

    for (scheme, subject), label in concepts.items():
        add(subject, RDF_TYPE, iri(SKOS + "Concept"))
        add(subject, SKOS + "inScheme", iri(f"{BASE}scheme/{scheme}"))
        add(subject, SKOS + "prefLabel", literal(label, lang="en"))
    return out


def build(out_dir: Path, source: Path | None = None) -> Path:
    """Write out_dir/observations.ttl from the installed package (or the folder given) and return its path."""
    folder = source or default_source()
    if not (folder / "_data" / "barley.json").is_file():
        raise SystemExit(f"observations: no _data/barley.json in {folder}: {INSTALL}")
    prefixes = {"qb": QB, "skos": SKOS, "rdfs": RDFS, "dcterms": DCT, "od": OD, "xsd": XSD}
    return write(out_dir / "observations.ttl", prefixes, triples(folder))


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
