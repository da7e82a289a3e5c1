"""Check a relational question set: every gold query runs, and its SQL and SPARQL forms agree.

    .venv/bin/python bench/datasets/relational/check.py NAME [NAME ...]    (e.g. shop, blind2/shop)

For each NAME, builds bench/databases/NAME.py into a temporary folder, opens it as a graph (the W3C Direct
Mapping, as `--kg sqlite:///…` does) and, for every record of bench/datasets/relational/NAME.json, runs its `sql`
with sqlite3 and its `sparql` on the graph. A record fails when a query fails, a SELECT returns no row or leaves a
projected column unbound, the two differ in row count, a SPARQL column of plain values has no SQL column with the
same values (as a multiset; numbers compared to 6 decimals), or an ASK and its `SELECT EXISTS` disagree.
IRI columns are compared by count only (the SQL side names things, the SPARQL side gives their rows' IRIs).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "bench" / "databases"))

from build import build_database  # noqa: E402

from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.graph.results import ResultTable  # noqa: E402
from sparqlnav.settings import Settings  # noqa: E402

HERE = Path(__file__).resolve().parent
BOOLEAN = "http://www.w3.org/2001/XMLSchema#boolean"


def norm(value: object) -> object:
    """A value as both sides can compare it: numbers as rounded floats, booleans as 0/1, the rest as text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return round(float(value), 6)
    text = str(value)
    if text in ("true", "false"):
        return 1.0 if text == "true" else 0.0
    try:
        return round(float(text), 6)
    except ValueError:
        return text


def compare(sql_rows: list[tuple[object, ...]], table: ResultTable) -> str | None:
    """Why the SQL rows and the SPARQL table disagree, or None."""
    if table.is_boolean:
        if len(sql_rows) != 1 or len(sql_rows[0]) != 1:
            return f"ASK, but the sql returned {len(sql_rows)} row(s) of {len(sql_rows[0]) if sql_rows else 0}"
        return None if bool(sql_rows[0][0]) == table.boolean else f"ASK {table.boolean} vs sql {sql_rows[0][0]}"
    if not table.rows:
        return "the sparql returned no row"
    if not sql_rows:
        return "the sql returned no row"
    unbound = [v for v in table.vars if any(v not in row for row in table.rows)]
    if unbound:
        return f"sparql leaves {unbound} unbound in some rows"
    if any(cell is None for row in sql_rows for cell in row):
        return "the sql returns NULL in some rows"
    if len(sql_rows) != len(table.rows):
        return f"{len(sql_rows)} sql row(s) vs {len(table.rows)} sparql row(s)"
    sql_columns = [Counter(norm(row[i]) for row in sql_rows) for i in range(len(sql_rows[0]))]
    for var in table.vars:
        column = table.column(var)
        if all(term.kind == "uri" for term in column):
            continue
        values = Counter(norm(term.value) for term in column)
        if values not in sql_columns:
            shown = ", ".join(repr(v) for v in list(values)[:3])
            return f"sparql column ?{var} ({shown} …) matches no sql column"
    return None


def check(name: str, work: Path) -> int:
    """Check one question set; print each failing record and return how many failed."""
    records = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
    db = build_database(Path(name).name, work / "db")  # "blind2/shop" is a second set over the shop database
    settings = Settings.from_env({"SPARQLNAV_HOME": str(work / "home")})
    failed = 0
    ids: Counter[str] = Counter(str(r.get("id")) for r in records)
    for dup in [i for i, n in ids.items() if n > 1]:
        print(f"{name}: id {dup} used {ids[dup]} times")
        failed += 1
    with open_kg(f"sqlite:///{db}", settings) as kg, sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        for record in records:
            rid = record.get("id")
            try:
                sql_rows = conn.execute(record["sql"]).fetchall()
            except sqlite3.Error as exc:
                print(f"{rid}: sql fails: {exc}")
                failed += 1
                continue
            result = kg.endpoint.query(record["sparql"])
            if not result.ok or result.table is None:
                print(f"{rid}: sparql fails: {result.message}")
                failed += 1
                continue
            problem = compare(sql_rows, result.table)
            if problem:
                print(f"{rid}: {problem}")
                failed += 1
    print(f"{name}: {len(records)} records, {len(records) - failed} pass, {failed} fail")
    return failed


def main(argv: list[str] | None = None) -> int:
    """Check the sets named; exit 1 when any record fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="relcheck-") as tmp:
        failed = sum(check(name, Path(tmp) / name) for name in args.names)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
