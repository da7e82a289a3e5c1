"""What the SQL builder (build -o target=sql) costs before the model does anything: the size of its system prompt
(the schema of every table, with row counts) and the time of its schema and data tools and of one draft run, per
database. Tokens are characters / 4, as in bench/explore_tokens.py.

Run: .venv/bin/python bench/sql_build_costs.py DB.db [DB.db …]   (bench/databases/*.py OUT.db build ours)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from string import Template

from sparqlnav.graph.relational import database_spec, read_database
from sparqlnav.sql.executor import Caps
from sparqlnav.strategies.builder.sql_tools import SqlBuilder
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.trace import Trace


def measure(path: Path) -> dict[str, object]:
    """Prompt size and tool times for one SQLite file."""
    database = database_spec(str(path.resolve()))
    assert database is not None
    with read_database(database) as reader:
        tables = reader.tables()
    trace = Trace()
    builder = SqlBuilder(database, tables, trace, Caps(60.0, 10_000, 32 * 1024 * 1024))
    started = time.perf_counter()
    listing = builder.get_tables().text.split("\n", 1)[-1]
    first = time.perf_counter() - started
    system = Template(prompt_text("build_sql_policy.md")).safe_substitute(database=f"sqlite: {path.name}", tables=listing)
    widest = max(tables, key=lambda t: len(t.columns))
    column = f"{widest.name}.{widest.columns[1].name if len(widest.columns) > 1 else widest.columns[0].name}"
    values = []
    for _ in range(5):
        started = time.perf_counter()
        builder.get_values(column)
        values.append(time.perf_counter() - started)
    builder.add_table(max(tables, key=lambda t: builder.row_count(t.name) or 0).name)
    runs = [e.data["ms"] for e in trace.of_kind("sql") if e.data.get("purpose") == "draft"]
    return {"database": path.name, "tables": len(tables), "columns": sum(len(t.columns) for t in tables),
            "prompt_chars": len(system), "prompt_tokens": len(system) // 4, "get_tables_ms": round(first * 1000, 1),
            "get_values_ms": round(statistics.median(values) * 1000, 1), "draft_ms": runs[-1] if runs else None}


def main(paths: list[str]) -> None:
    """One line per database."""
    for p in paths:
        print(measure(Path(p)))


if __name__ == "__main__":
    main(sys.argv[1:])
