"""How many clauses legitimate queries hold, as the guard counts them (`ParsedQuery.clauses`): the measurement the
guard's MAX_CLAUSES was picked from, and the count of the red team's four wide shapes (issue 39, item 3).

It reads every SPARQL query it finds in the files under the given folders: string values of JSON and YAML files that
read as queries, and the `sh:select`/`sh:ask`/`sh:construct`/`sh:describe` literals of SHACL example files (.ttl).

Run: .venv/bin/python bench/guard_budget.py FOLDER [FOLDER …] [--top 10]
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from sparqlnav.sparql.guard import MAX_CLAUSES
from sparqlnav.sparql.parser import SparqlSyntaxError, parse_query

_LOOKS_LIKE_QUERY = re.compile(r"\b(SELECT|ASK|CONSTRUCT|DESCRIBE)\b[\s\S]*\{", re.IGNORECASE)
_SHACL = re.compile(r"sh:(?:select|ask|construct|describe)\s+('''|\"\"\")([\s\S]*?)\1")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def queries(folder: Path) -> Iterator[tuple[str, str]]:
    """(file, query) for every query found under `folder`."""
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".ttl":
            for m in _SHACL.finditer(path.read_text(encoding="utf-8", errors="replace")):
                yield str(path), m.group(2).replace("\\'", "'").replace('\\"', '"')
            continue
        if path.suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix in (".yml", ".yaml"):
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        else:
            continue
        for text in _strings(data):
            if _LOOKS_LIKE_QUERY.search(text):
                yield str(path), text


def wide_shapes(n: int) -> dict[str, str]:
    """The four shapes of issue 39, item 3, `n` wide (the engine died at 3,000 and survived 2,500)."""
    return {
        "ORDER BY (1)": "SELECT * WHERE { } ORDER BY " + " ".join("(1)" for _ in range(n)),
        "GRAPH ?g { }": "SELECT * WHERE { " + " ".join(f"GRAPH ?g{i} {{ }}" for i in range(n)) + " }",
        "DESCRIBE <iri>": "DESCRIBE " + " ".join(f"<http://example.org/x{i}>" for i in range(n)),
        "{ SELECT ?x WHERE {} }": "SELECT * WHERE { " + " ".join(f"{{ SELECT ?x{i} WHERE {{}} }}" for i in range(n)) + " }",
    }


def _quantile(values: list[int], q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    """Print the distribution of clause counts per folder, the largest queries, and the wide shapes' counts."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    overall: list[tuple[int, str, str]] = []
    for folder in args.folders:
        counts: list[tuple[int, str, str]] = []
        unreadable = 0
        for where, text in queries(folder):
            try:
                counts.append((parse_query(text, collect_undefined_prefixes=True).clauses, where, text))
            except (SparqlSyntaxError, RecursionError):
                unreadable += 1
        counts.sort(key=lambda c: c[0])
        if not counts:
            print(f"{folder}: no queries")
            continue
        values = [c[0] for c in counts]
        print(
            f"{folder}: {len(values)} queries ({unreadable} unreadable); clauses median {_quantile(values, 0.5)}, "
            f"p99 {_quantile(values, 0.99)}, max {values[-1]}"
        )
        overall += counts
    overall.sort(key=lambda c: c[0])
    print(f"\nall: {len(overall)} queries, max {overall[-1][0] if overall else 0} clauses (budget {MAX_CLAUSES:,})")
    for count, where, text in overall[-args.top :]:
        print(f"  {count:5d}  {where}: {' '.join(text.split())[:100]}")
    print("\nthe wide shapes of issue 39 at 2,500 (survived) and 3,000 (killed the engine):")
    for n in (2500, 3000):
        for name, text in wide_shapes(n).items():
            print(f"  {name:24} x{n}: {parse_query(text).clauses:,} clauses, {len(text):,} chars")


if __name__ == "__main__":
    main()
