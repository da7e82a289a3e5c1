"""Hardening, round three (issue 39, item 3): four more wide shapes killed the engine through the HTTP API —
`ORDER BY (1)`×3000 (12 KB), `GRAPH ?gN { }`×3000, DESCRIBE of 3,000 IRIs and `{ SELECT ?xN WHERE {} }`×3000. The
guard now holds every query to one budget on its clauses of every kind counted together (MAX_CLAUSES), not to a list
of the shapes found so far. Real uvicorn on loopback and the real Oxigraph process."""

from __future__ import annotations

import pytest

from sparqlnav.faces.http import ServeConfig, background
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import Settings
from sparqlnav.sparql.guard import MAX_CLAUSES, Refused, TooWide, check_query
from sparqlnav.sparql.parser import parse_query
from test_hardening_http import app_with, client_at, tiny, tiny_path  # noqa: F401 - fixtures
from test_serve import MANAGER_OF_ALICE


def _order_by(n: int) -> str:
    return "SELECT * WHERE { } ORDER BY " + " ".join("(1)" for _ in range(n))


def _graphs(n: int) -> str:
    return "SELECT * WHERE { " + " ".join(f"GRAPH ?g{i} {{ }}" for i in range(n)) + " }"


def _describe(n: int) -> str:
    return "DESCRIBE " + " ".join(f"<http://example.org/tiny/x{i}>" for i in range(n))


def _sub_selects(n: int) -> str:
    return "SELECT * WHERE { " + " ".join(f"{{ SELECT ?x{i} WHERE {{}} }}" for i in range(n)) + " }"


SHAPES = (_order_by, _graphs, _describe, _sub_selects)


def test_the_four_wide_shapes_are_refused_before_the_engine_sees_them(settings: Settings, tiny: KnowledgeGraph) -> None:  # noqa: F811
    server = tiny.endpoint.server  # type: ignore[attr-defined]
    with background(app_with(settings, tiny, mcp=False)) as url, client_at(url) as client:
        assert client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}).status_code == 200  # the engine is up
        before = (server.pid, server.generation, server.restarts)
        for shape in SHAPES:
            query = shape(3000)
            assert len(query) < ServeConfig().max_query_chars  # the size limit lets each through
            r = client.post("/api/sparql", json={"query": query})
            assert r.status_code == 400 and r.json()["outcome"] == "refused", (shape.__name__, r.text[:300])
            detail = r.json()["detail"]
            assert f"more than {MAX_CLAUSES:,} clauses" in detail and "\n" not in detail
        assert (server.pid, server.generation, server.restarts) == before  # the engine never saw them
        assert client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}).status_code == 200


def test_one_budget_holds_every_kind_of_clause_together() -> None:
    # Each shape alone at the budget passes, one more is refused: the count is exact, whatever the shape.
    for shape, at_budget in ((_order_by, MAX_CLAUSES - 1), (_graphs, MAX_CLAUSES - 1), (_describe, MAX_CLAUSES)):
        assert parse_query(shape(at_budget)).clauses == MAX_CLAUSES
        check_query(shape(at_budget), [])
        with pytest.raises(TooWide):
            check_query(shape(at_budget + 1), [])
    # Mixed, each well under the budget alone, together past it: one budget, not one per shape.
    third = MAX_CLAUSES // 3
    mixed = (
        "SELECT * WHERE { "
        + " ".join(f"GRAPH ?g{i} {{ }}" for i in range(third))
        + " ".join(f" BIND({i} AS ?b{i})" for i in range(third))
        + " ".join(f" FILTER(?b{i} = {i})" for i in range(third))
        + " } ORDER BY "
        + " ".join("(1)" for _ in range(third))
    )
    with pytest.raises(TooWide, match=f"more than {MAX_CLAUSES:,} clauses"):
        check_query(mixed, [])
    # The sub-SELECT costs three (its group, the group around it, its projected variable).
    assert parse_query(_sub_selects(10)).clauses == 1 + 3 * 10


def test_a_remote_dialect_query_is_held_to_the_same_budget() -> None:
    # Virtuoso's `SELECT COUNT(?s)` is no SPARQL 1.1: sparqlnav cannot parse it, so its tokens are counted instead.
    def dialect(n: int) -> str:
        return "SELECT COUNT(?s) WHERE { " + " ".join(f"?s <http://e/p{i}> ?o{i} ." for i in range(n)) + " }"

    assert check_query(dialect(50), [], remote=True) == "SELECT"
    with pytest.raises(TooWide, match="cannot read it whole"):
        check_query(dialect(MAX_CLAUSES + 1), [], remote=True)
    with pytest.raises(Refused):  # the local engine's reading: unreadable, whatever its size
        check_query(dialect(50), [])
