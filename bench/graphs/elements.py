"""`elements`: the chemical elements and their isotopes from PyPI's `periodictable` package (public domain), schema.org-flavoured.

Style: opaque IRIs (`element/e26`, `isotope/e26-56`, `structure/s3`), names in `schema:name` (the package's
own lower-case names: "iron", "aluminum"), an isotope's label in `schema:identifier` ("56-Fe"), and a chemistry
vocabulary of our own under `pt:`. Classes `pt:Element` (118), `pt:Isotope` and `pt:CrystalStructure` (the
package's crystal symmetries, "BCC", "hcp", ...). An element has `pt:atomicNumber`, `pt:symbol`,
`pt:atomicMass` (u), `pt:density` (g/cm³, with `pt:densityNote` where the package gives a caveat such as
"T=25"), `pt:covalentRadius` (Å), `pt:crystalStructure`, `pt:oxidationState` (every charge the package lists)
and `pt:commonOxidationState` (the ones it marks common), and `pt:hasIsotope`; an isotope has `pt:massNumber`,
`pt:atomicMass` (u) and, when it occurs naturally, `pt:abundance` (% of the element's atoms). Values the package
lacks (None) are left unsaid.

Install the data: `pip install periodictable==2.1.0` into the Python that runs the build (the builder imports
it), or give the folder (a site-packages) that holds the `periodictable` package.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

# bench/graphs/rdfterms.py, found because build.py (or running this file) puts this folder on sys.path
from rdfterms import iri, literal, write

BASE = "http://example.org/elements/"
PT = BASE + "def#"
SCHEMA = "https://schema.org/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
VERSION = "2.1.0"
INSTALL = f"pip install periodictable=={VERSION}"


def _package(source: Path | None) -> ModuleType:
    """The `periodictable` package: the installed one, or the one in the folder given."""
    if source is not None:
        if not (source / "periodictable" / "__init__.py").is_file():
            raise SystemExit(f"elements: no periodictable package in {source}: {INSTALL}")
        sys.path.insert(0, str(source))
    try:
        module = importlib.import_module("periodictable")
    except ImportError as exc:
        raise SystemExit(f"elements: periodictable is not installed ({exc}): {INSTALL}") from exc
    if module.__version__ != VERSION:
        raise SystemExit(
            f"elements: periodictable {module.__version__} found, the question set is for {VERSION}: {INSTALL}"
        )
    return module


def _number(value: float) -> str:
    """A value of the package's as xsd:decimal, written as Python reads it back (its shortest repr)."""
    return literal(float(value))


def _percent(value: float) -> str:
    """An abundance as xsd:decimal: the package computes it (100 * fraction / total), and the float noise that
    leaves (5.845000000000001, 0.00019999999999999998) is rounded away at ten decimal places."""
    return literal(round(float(value), 10))


def triples(package: ModuleType) -> list[tuple[str, str, str]]:
    """The graph's triples, from the package's public table (elements 1-118; the neutron, element 0, left out)."""
    from periodictable.core import element_base  # the element list with common and uncommon charges

    out: list[tuple[str, str, str]] = []

    def add(subject: str, prop: str, obj: str) -> None:
        out.append((iri(subject), iri(prop), obj))

    # symmetry -> IRI, numbered in order of first appearance by atomic number
    structures: dict[str, str] = {}
    for element in package.elements:
        z = element.number
        if z == 0:
            continue
        subject = f"{BASE}element/e{z}"
        add(subject, RDF_TYPE, iri(PT + "Element"))
        add(subject, SCHEMA + "name", literal(element.name))
        add(subject, PT + "symbol", literal(element.symbol))
        add(subject, PT + "atomicNumber", literal(z))
        if element.mass is not None:
            add(subject, PT + "atomicMass", _number(element.mass))
        if element.density is not None:
            add(subject, PT + "density", _number(element.density))
            if element.density_caveat:
                add(subject, PT + "densityNote", literal(element.density_caveat))
        radius = getattr(element, "covalent_radius", None)
        if radius is not None:
            add(subject, PT + "covalentRadius", _number(radius))
        # absent past the end of the package's list (Z > 103), None where it has no structure
        structure = getattr(element, "crystal_structure", None)
        if structure:
            symmetry = structure["symmetry"]
            if symmetry not in structures:
                structures[symmetry] = f"{BASE}structure/s{len(structures) + 1}"
                add(structures[symmetry], RDF_TYPE, iri(PT + "CrystalStructure"))
                add(structures[symmetry], SCHEMA + "name", literal(symmetry))
            add(subject, PT + "crystalStructure", iri(structures[symmetry]))
        _, _, common, uncommon = element_base[z]
        for charge in common:
            add(subject, PT + "commonOxidationState", literal(int(charge)))
        for charge in (*common, *uncommon):
            add(subject, PT + "oxidationState", literal(int(charge)))
        for isotope in element:
            a = isotope.isotope
            node = f"{BASE}isotope/e{z}-{a}"
            add(subject, PT + "hasIsotope", iri(node))
            add(node, RDF_TYPE, iri(PT + "Isotope"))
            add(node, SCHEMA + "identifier", literal(f"{a}-{element.symbol}"))
            # deuterium and tritium have a name and symbol of their own
            if "name" in isotope.__dict__:
                add(node, SCHEMA + "name", literal(isotope.__dict__["name"]))
                add(node, PT + "symbol", literal(isotope.__dict__["symbol"]))
            add(node, PT + "massNumber", literal(int(a)))
            if isotope.mass is not None:
                add(node, PT + "atomicMass", _number(isotope.mass))
            if isotope.abundance:  # 0 in the package for an isotope not found in nature
                add(node, PT + "abundance", _percent(isotope.abundance))
    return out


def build(out_dir: Path, source: Path | None = None) -> Path:
    """Write out_dir/elements.ttl from the installed package (or the folder given) and return its path."""
    package = _package(source)
    return write(
        out_dir / "elements.ttl", {"pt": PT, "schema": SCHEMA, "e": BASE}, triples(package)
    )


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
