"""Build each style graph and run every gold query of its blind question set (bench/datasets/styles/<name>.json).

    .venv/bin/python bench/datasets/styles/check.py [--out DIR] [NAME ...]

A set named `<graph><digit>` (`countries2`) is a further set over the graph `<graph>`.

For every record: the query parses and runs on the built graph (plain pyoxigraph, no sparqlnav strategy); a
SELECT returns at least one row and binds every projected column in every row; an ASK returns a boolean. Prints
one line per set (triples, questions, SELECT/ASK, ASK answers true) and every failure; exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyoxigraph

HERE = Path(__file__).resolve().parent
GRAPHS = HERE.parent.parent / "graphs"


@dataclass
class SetReport:
    """What checking one question set found."""

    name: str
    triples: int = 0
    questions: int = 0
    selects: int = 0
    asks: int = 0
    asks_true: int = 0
    failures: list[str] = field(default_factory=list)


def check_set(name: str, graph: Path, records: list[dict[str, object]]) -> SetReport:
    """Run every record's gold SPARQL on the graph file and report what fails."""
    store = pyoxigraph.Store()
    store.bulk_load(path=str(graph), format=pyoxigraph.RdfFormat.TURTLE)
    report = SetReport(name, triples=len(store), questions=len(records))
    ids: set[str] = set()
    for record in records:
        rid = str(record["id"])
        if rid in ids or not rid.startswith(f"sty-{name}-"):
            report.failures.append(f"{rid}: id repeated or not sty-{name}-NN")
        ids.add(rid)
        try:
            result = store.query(str(record["sparql"]))
        # pyoxigraph raises SyntaxError for a query it cannot parse, OSError or ValueError while evaluating
        except (SyntaxError, OSError, ValueError) as exc:
            report.failures.append(f"{rid}: {exc}")
            continue
        if isinstance(result, pyoxigraph.QueryBoolean):
            report.asks += 1
            report.asks_true += bool(result)
            continue
        if not isinstance(result, pyoxigraph.QuerySolutions):
            report.failures.append(f"{rid}: neither SELECT nor ASK")
            continue
        report.selects += 1
        names = [v.value for v in result.variables]
        rows = list(result)
        if not rows:
            report.failures.append(f"{rid}: no row")
        unbound = [n for row in rows for n in names if row[n] is None]
        if unbound:
            report.failures.append(f"{rid}: unbound {sorted(set(unbound))}")
    return report


def main(argv: list[str] | None = None) -> int:
    """Build the graphs, check the sets named (all by default), print the reports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument(
        "--out", type=Path, help="where the graphs are built (a temporary folder by default)"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(GRAPHS))
    import build as graph_build  # bench/graphs/build.py

    names = args.names or sorted(p.stem for p in HERE.glob("*.json"))
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        for name in names:
            # a further set over an existing graph is named after it with a digit: countries2 -> countries
            graph = graph_build.builder(re.sub(r"\d+$", "", name))(out)
            records = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
            report = check_set(name, graph, records)
            print(
                f"{name}: {report.triples} triples, {report.questions} questions "
                f"({report.selects} SELECT, {report.asks} ASK of which {report.asks_true} true), "
                f"{len(report.failures)} failing"
            )
            for failure in report.failures:
                print("  " + failure)
            failed = failed or bool(report.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
