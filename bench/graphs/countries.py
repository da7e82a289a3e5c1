"""`countries`: the world's countries from npm's `world-countries` package (ODbL 1.0), as a tabular-style graph.

Style: natural keys in every IRI (`country/FRA`, `currency/EUR`, `language/fra`, `region/Europe`), no
`rdfs:label` anywhere: a thing's name is in a property named after its class (`wc:country "France"`,
`wc:currency "Euro"`, `wc:language "French"`, `wc:region "Europe"`, `wc:subregion "Western Europe"`), and the
attributes are plain columns of the source table (codes, area in km², landlocked, capital as text, …).

Install the data: `npm install -g world-countries@5.1.0` (the builder reads `$(npm root -g)/world-countries`,
or the folder given).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# bench/graphs/rdfterms.py, found because build.py (or running this file) puts this folder on sys.path
from rdfterms import iri, literal, write

BASE = "http://example.org/countries/"
WC = BASE + "def#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
PACKAGE = "world-countries"
INSTALL = "npm install -g world-countries@5.1.0"


def default_source() -> Path:
    """The globally installed npm package's folder."""
    try:
        root = subprocess.run(
            ["npm", "root", "-g"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"countries: npm is needed to find {PACKAGE} ({exc})") from exc
    return Path(root) / PACKAGE


def _key(text: str) -> str:
    """A name made an IRI segment (spaces to underscores)."""
    return text.replace(" ", "_")


def triples(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The graph's triples, from the package's countries.json rows."""
    out: list[tuple[str, str, str]] = []

    def add(subject: str, prop: str, obj: str) -> None:
        out.append((iri(subject), iri(WC + prop), obj))

    def typed(subject: str, cls: str) -> None:
        out.append((iri(subject), iri(RDF_TYPE), iri(WC + cls)))

    currencies: dict[str, dict[str, str]] = {}
    languages: dict[str, str] = {}
    for row in sorted(rows, key=lambda r: r["cca3"]):
        country = f"{BASE}country/{row['cca3']}"
        typed(country, "Country")
        add(country, "country", literal(row["name"]["common"]))
        add(country, "officialName", literal(row["name"]["official"]))
        add(country, "cca2", literal(row["cca2"]))
        add(country, "cca3", literal(row["cca3"]))
        if row.get("ccn3"):
            add(country, "ccn3", literal(row["ccn3"]))
        if row.get("cioc"):
            add(country, "cioc", literal(row["cioc"]))
        if row.get("independent") is not None:  # null in the source: left unsaid, not false
            add(country, "independent", literal(bool(row["independent"])))
        add(country, "unMember", literal(bool(row["unMember"])))
        if row.get("unRegionalGroup"):
            add(country, "unRegionalGroup", literal(row["unRegionalGroup"]))
        add(country, "landlocked", literal(bool(row["landlocked"])))
        if row["area"] >= 0:  # the source writes -1 for an unknown area
            area = row["area"]
            add(country, "areaKm2", literal(float(area) if isinstance(area, float) else int(area)))
        if len(row.get("latlng", [])) == 2:
            add(country, "latitude", literal(float(row["latlng"][0])))
            add(country, "longitude", literal(float(row["latlng"][1])))
        for capital in row.get("capital", []):
            add(country, "capital", literal(capital))
        for tld in row.get("tld", []):
            add(country, "tld", literal(tld))
        idd = row.get("idd", {})
        if idd.get("root"):
            # one calling code per suffix, except for shared roots with many area codes (+1: the root alone)
            suffixes = idd.get("suffixes", [])
            codes = [idd["root"] + s for s in suffixes] if len(suffixes) == 1 else [idd["root"]]
            for code in codes:
                add(country, "callingCode", literal(code))
        demonym = row.get("demonyms", {}).get("eng", {}).get("m")
        if demonym:
            add(country, "demonym", literal(demonym))
        region = f"{BASE}region/{_key(row['region'])}"
        typed(region, "Region")
        add(region, "region", literal(row["region"]))
        add(country, "inRegion", iri(region))
        if row.get("subregion"):
            subregion = f"{BASE}subregion/{_key(row['subregion'])}"
            typed(subregion, "Subregion")
            add(subregion, "subregion", literal(row["subregion"]))
            add(subregion, "partOf", iri(region))
            add(country, "inSubregion", iri(subregion))
        for neighbour in row.get("borders", []):
            add(country, "borders", iri(f"{BASE}country/{neighbour}"))
        for code, currency in sorted(row.get("currencies", {}).items()):
            currencies.setdefault(code, currency)
            add(country, "usesCurrency", iri(f"{BASE}currency/{code}"))
        for code, name in sorted(row.get("languages", {}).items()):
            languages.setdefault(code, name)
            add(country, "officialLanguage", iri(f"{BASE}language/{code}"))
    for code, currency in currencies.items():
        subject = f"{BASE}currency/{code}"
        typed(subject, "Currency")
        add(subject, "currency", literal(currency["name"]))
        add(subject, "currencyCode", literal(code))
        if currency.get("symbol"):
            add(subject, "symbol", literal(currency["symbol"]))
    for code, name in languages.items():
        subject = f"{BASE}language/{code}"
        typed(subject, "Language")
        add(subject, "language", literal(name))
        add(subject, "languageCode", literal(code))
    return out


def build(out_dir: Path, source: Path | None = None) -> Path:
    """Write out_dir/countries.ttl from the installed package (or the folder given) and return its path."""
    folder = source or default_source()
    if not (folder / "countries.json").is_file():
        raise SystemExit(f"countries: no countries.json in {folder}: {INSTALL}")
    rows = json.loads((folder / "countries.json").read_text(encoding="utf-8"))
    return write(out_dir / "countries.ttl", {"wc": WC, "c": BASE}, triples(rows))


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
