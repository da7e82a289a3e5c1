"""A SQL result as the faces' result table: each value an RDF literal by R2RML's natural mapping (the Direct
Mapping's), NULL unbound, so the answer's rows print, export and score like a SPARQL result's."""

from __future__ import annotations

from sparqlnav.graph.direct_mapping import natural_literal
from sparqlnav.graph.results import ResultTable, Term
from sparqlnav.sql.executor import SqlResult


def result_table(result: SqlResult) -> ResultTable:
    """The result's columns as variables and its values as typed literals (a cut result says which cap cut it)."""
    names: list[str] = []
    for column in result.columns:  # two columns of one name (a join's `id`s) stay apart
        name, n = column or "column", 2
        while name in names:
            name, n = f"{column}_{n}", n + 1
        names.append(name)
    rows = []
    for row in result.rows:
        bound: dict[str, Term] = {}
        for name, value in zip(names, row, strict=True):
            if value is not None:
                text, datatype = natural_literal(value, "untyped")
                bound[name] = Term("literal", text, datatype)
        rows.append(bound)
    return ResultTable(vars=names, rows=rows, truncated=result.truncated,
                       cap="the row or byte cap" if result.truncated else None, language="SQL")
