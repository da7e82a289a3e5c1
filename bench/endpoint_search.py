"""Big-endpoint benchmark (issue 16): time to the first answer on a generated graph served by a private Virtuoso,
with endpoint-side name search (nothing downloaded) versus the label download into a local index.

The graph: N people with a label, an employer, a manager and a birth year, spread over companies and cities
(4 triples per person plus a few per company/city, so N = triples / 4). Both runs open the endpoint as a fresh
user would (new sparqlnav home), then run `search` for one person's name and the lexical strategy on
"Who is the manager of <name>?"; the times include opening (probes or download).

Run: .venv/bin/python bench/endpoint_search.py [--triples 5000000] [--out bench/results/endpoint.md]
Needs Debian's virtuoso-opensource (./scripts/test installs it).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the Virtuoso helper lives with the tests

from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.settings import Settings  # noqa: E402
from sparqlnav.strategies.lexical import LexicalStrategy  # noqa: E402
from sparqlnav.tools.lookup import search  # noqa: E402
from sparqlnav.trace import Trace  # noqa: E402
from virtuoso import Virtuoso, find_binaries  # noqa: E402

EX = "http://example.org/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
FIRST = ["Anna", "Bernd", "Clara", "Dieter", "Elena", "Fritz", "Greta", "Hans", "Ilse", "Jonas", "Karla", "Lukas",
         "Marta", "Nils", "Olga", "Paul", "Rosa", "Stefan", "Tilda", "Uwe", "Vera", "Walter", "Xenia", "Yusuf", "Zora"]
LAST = ["Abendroth", "Brecht", "Claussen", "Dahlke", "Eberhardt", "Falkenberg", "Gottschalk", "Hainbach",
        "Isenberg", "Jessel", "Kranich", "Lindqvist", "Mahlberg", "Neuhaus", "Osterloh", "Pfannkuch", "Quast",
        "Rautenberg", "Sommerfeld", "Trautmann", "Ulbrich", "Vollmer", "Wendland", "Zillich"]


def generate(folder: Path, people: int, parts: int = 1, seed: int = 7) -> tuple[list[Path], str]:
    """Write the graph as N-Triples in `parts` files (people dealt out in turn, so Virtuoso's loaders can share the
    work); returns the files and the one person's name that is unique (the question's target)."""
    rng = random.Random(seed)
    companies, cities = max(1, people // 1000), max(1, people // 5000)
    files = [folder / f"graph-{k}.nt" for k in range(max(1, parts))]
    outs = [f.open("w", encoding="utf-8") for f in files]
    try:
        out = outs[0]
        out.write(f'<{EX}p/target> <{LABEL}> "Heinrich Hochstetter" .\n')
        out.write(f"<{EX}p/target> <{EX}managedBy> <{EX}p/0> .\n")
        for c in range(cities):
            out.write(f'<{EX}city/{c}> <{LABEL}> "City {c}" .\n')
        for c in range(companies):
            out.write(f'<{EX}org/{c}> <{LABEL}> "Company {c} {rng.choice(LAST)} GmbH" .\n')
            out.write(f"<{EX}org/{c}> <{EX}locatedIn> <{EX}city/{c % cities}> .\n")
        for i in range(people):
            out = outs[i % len(outs)]
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}-{i}"
            out.write(f'<{EX}p/{i}> <{LABEL}> "{name}" .\n')
            out.write(f"<{EX}p/{i}> <{EX}worksFor> <{EX}org/{i % companies}> .\n")
            out.write(f"<{EX}p/{i}> <{EX}managedBy> <{EX}p/{rng.randrange(people)}> .\n")
            out.write(f'<{EX}p/{i}> <{EX}birthYear> "{1950 + i % 50}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n')
    finally:
        for out in outs:
            out.close()
    return files, "Heinrich Hochstetter"


def first_answer(url: str, home: Path, max_triples: int, name: str) -> dict[str, float | str]:
    """Open as a new user, search the name, answer one question; seconds of each step."""
    settings = Settings.from_env({"SPARQLNAV_HOME": str(home), "SPARQLNAV_NAME_INDEX_MAX_TRIPLES": str(max_triples),
                                  "SPARQLNAV_TIMEOUT": "600"})
    t0 = time.monotonic()
    with open_kg(url, settings) as kg:
        opened = time.monotonic()
        hits = search(kg, name)
        searched = time.monotonic()
        answer = LexicalStrategy(budget_s=120.0).run(f"Who is the manager of {name}?", kg, Trace())
        answered = time.monotonic()
        top = hits.entities[0].iri if hits.entities else "-"
        values = sorted(t.value for t in answer.results.values()) if answer.results else []
        return {
            "open": opened - t0, "search": searched - opened, "answer": answered - searched,
            "first_answer": answered - t0, "top": top, "values": ", ".join(values[:3]) or answer.status,
            "names": type(kg.names).__name__,
        }  # fmt: skip


def main() -> None:
    """Generate, load, measure both ways, write the markdown report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--triples", type=int, default=5_000_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "endpoint.md")
    parser.add_argument("--loaders", type=int, default=2, help="parallel rdf_loader_run sessions (one per core)")
    parser.add_argument("--buffers", type=int, default=340_000, help="Virtuoso NumberOfBuffers (8 KB pages)")
    args = parser.parse_args()
    if find_binaries() is None:
        sys.exit("needs virtuoso-t and isql-vt (apt-get install virtuoso-opensource)")
    with tempfile.TemporaryDirectory(prefix="sparqlnav-bench-") as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir()
        t = time.monotonic()
        files, name = generate(data, args.triples // 4, parts=4 * args.loaders)
        gen_s = time.monotonic() - t
        with Virtuoso(work / "db", data_dirs=[data], buffers=args.buffers, max_rows=10_000) as server:
            t = time.monotonic()
            server.load(files, graph="urn:bench", loaders=args.loaders)
            load_s = time.monotonic() - t
            print(f"generated in {gen_s:.0f} s, loaded in {load_s:.0f} s", flush=True)
            url = f"{server.url}?default-graph-uri=urn:bench"
            endpoint = first_answer(url, work / "home-endpoint", 1, name)
            print(f"endpoint search: {endpoint}", flush=True)
            download = first_answer(url, work / "home-download", 10**12, name)
    rows = [("endpoint search (bif:contains)", endpoint), ("label download (local index)", download)]
    lines = [
        "# Big endpoints: time to the first answer",
        "",
        f"Generated graph of {args.triples:,} triples ({args.triples // 4:,} people with label, employer, manager,"
        f" birth year) served by a private Virtuoso 7 (Debian), 2 shared cores. Generation {gen_s:.0f} s,"
        f" bulk load ({args.loaders} loaders) + text index {load_s:.0f} s. Question: \"Who is the manager of {name}?\" (lexical).",
        "",
        "| names | open (s) | first search (s) | answer (s) | time to first answer (s) | top hit | answer |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for label, r in rows:
        lines.append(f"| {label} ({r['names']}) | {r['open']:.1f} | {r['search']:.2f} | {r['answer']:.2f} |"
                     f" {r['first_answer']:.1f} | {r['top']} | {r['values']} |")
    lines += ["", "Run: `.venv/bin/python bench/endpoint_search.py --triples N`.", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
