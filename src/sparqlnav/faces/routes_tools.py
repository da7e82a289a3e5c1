"""The tool routes: `POST /api/tools/{name}` for every tool of the service's registry (generated from its
declarations: same names, descriptions and arguments as MCP and the explore agent see), and the structured
`/api/sparql`, `/api/search` and `/api/entity` the web UI reads, which run the same registered tools and return
their structured value (results, hits, entity pages) as JSON rather than text for a model.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field, create_model

from sparqlnav.faces.service import Service, display, json_response
from sparqlnav.graph.endpoint import Outcome, QueryResult
from sparqlnav.sparql.prefixes import declare_prefixes
from sparqlnav.sparql.syntax import typed_syntax_problem
from sparqlnav.tools.lookup import EntityPage, LookupFailed, SearchResult, resolve_or_search
from sparqlnav.tools.registry import Tool
from sparqlnav.tools.toolkit import Toolkit
from sparqlnav.trace import Trace

KG_DOC = "A KG name this server offers (default: the first)."
_STATUS = {Outcome.SYNTAX_ERROR: 400, Outcome.REFUSED: 400, Outcome.TIMEOUT: 504, Outcome.UNREACHABLE: 502}


class SparqlRequest(BaseModel):
    """A read-only SPARQL query."""

    query: str = Field(description="SPARQL SELECT, ASK, CONSTRUCT or DESCRIBE.")
    kg: str | None = Field(default=None, description=KG_DOC)
    timeout: float | None = Field(default=None, gt=0, description="Time limit in seconds (capped by the server's).")


class ToolResult(BaseModel):
    """What a tool observed, as text written for a model to read; `ok` is false when the tool failed."""

    tool: str
    kg: str
    ok: bool
    text: str


def tool_routes(service: Service) -> APIRouter:
    """One `POST /api/tools/{name}` per registered tool, and the structured lookup and query routes."""
    router = APIRouter()
    for declared in service.tools:
        _add_tool_route(router, service, declared)
    _add_structured_routes(router, service)
    return router


def _add_tool_route(router: APIRouter, service: Service, declared: Tool) -> None:
    """`POST /api/tools/<name>`: a JSON body of the tool's arguments (plus `kg`), the observation back."""
    fields: dict[str, Any] = {
        p.name: (p.annotation, ... if p.required else p.default) for p in declared.params
    }
    fields["kg"] = (Annotated[str | None, Field(description=KG_DOC)], None)
    camel = "".join(part.title() for part in declared.name.split("_"))
    body_model = create_model(f"{camel}Arguments", **fields)

    async def run_tool(body: BaseModel) -> ToolResult:
        arguments = body.model_dump(exclude={"kg"}, exclude_none=True)
        service.check_arguments(declared, arguments)  # the same limits as /api/ask and MCP
        kg_name = service.kg(getattr(body, "kg", None))

        def run() -> ToolResult:
            kit = Toolkit(service.pool.get(kg_name), Trace(), indexes=service.indexes)
            observed = service.tools.call(declared.name, kit, arguments)
            return ToolResult(tool=declared.name, kg=kg_name, ok=observed.ok, text=observed.text)

        return await service.call(run)

    # FastAPI reads the body's model from the signature; the model is built here, from the declaration.
    run_tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=body_model)],
        return_annotation=ToolResult,
    )
    router.add_api_route(
        f"/api/tools/{declared.name}",
        run_tool,
        methods=["POST"],
        tags=["tools"],
        name=declared.name,
        summary=declared.name,
        description=declared.description,
        operation_id=f"tool_{declared.name}",
        response_model=ToolResult,
    )


def _add_structured_routes(router: APIRouter, service: Service) -> None:
    pool, settings, tools = service.pool, service.settings, service.tools

    @router.post("/api/sparql", tags=["sparql"])
    async def sparql(body: SparqlRequest) -> Response:
        """Run a read-only query: SPARQL 1.1 JSON `results`, plus labels and prefixed names for display."""
        # A lone surrogate is left to the endpoint, which reports it as a syntax error at its place (for the editor).
        text = service.check_query(body.query, text=False).strip()
        if not text:
            raise HTTPException(422, "query is empty")
        kg_name = service.kg(body.kg)
        limit = min(body.timeout or settings.limits.timeout_s, settings.limits.timeout_s)

        def run() -> Response:
            graph = pool.get(kg_name)
            repair = declare_prefixes(text, graph.prefixes.mapping)  # execute_sparql declares them alike
            observed = tools.call("execute_sparql", Toolkit(graph, Trace(), timeout_s=limit), {"query": text})
            result = observed.value
            assert isinstance(result, QueryResult)  # what execute_sparql observes, failed or not
            if not result.ok or result.table is None:
                status = _STATUS.get(result.outcome, 422)
                failed: dict[str, Any] = {"detail": result.describe(), "outcome": result.outcome.value}
                if result.outcome is Outcome.SYNTAX_ERROR:
                    # Where to mark it in the text as typed, read by our parser: the engine's own message lists
                    # ranges (and execute_sparql has placed it in the text as typed too).
                    problem = typed_syntax_problem(repair, result.message)
                    if problem is not None:  # none found (a lone surrogate is the engine's alone): the detail says it
                        failed["syntax"] = problem.to_dict()
                return json_response(failed, status)
            return json_response(
                {
                    "kg": kg_name,
                    "outcome": result.outcome.value,
                    "seconds": round(result.seconds, 4),
                    "truncated": result.table.truncated,
                    "results": result.table.to_sparql_json(),
                    "display": display(graph, result.table),
                    "added": [f"PREFIX {p}: <{graph.prefixes.mapping[p]}>" for p in repair.added],
                }
            )

        return await service.call(run, limit + 5)

    @router.post("/api/sparql/check", tags=["sparql"])
    async def sparql_check(body: SparqlRequest) -> dict[str, Any]:
        """Check a query without running it: its first syntax problem (line, column, message) and the query with
        PREFIX lines for the KG's prefixes it uses without declaring them (what to copy elsewhere)."""
        service.check_query(body.query)
        kg_name = service.kg(body.kg)

        def run() -> dict[str, Any]:
            graph = pool.get(kg_name)
            repaired = declare_prefixes(body.query, graph.prefixes.mapping)
            problem = typed_syntax_problem(repaired)  # placed in the text the editor holds
            return {
                "kg": kg_name,
                "ok": problem is None,
                "query": repaired.query,
                "added": list(repaired.added),
                "syntax": problem.to_dict() if problem else None,
            }

        return await service.call(run)

    @router.get("/api/search", tags=["lookup"])
    async def search(
        q: str = Query(min_length=1, max_length=500, description="A name, possibly partial or misspelt."),
        kg: str | None = None,
        limit: int = Query(8, ge=1, le=100),
    ) -> Response:
        """Entities and properties whose label, alias or description matches `q`."""
        kg_name = service.kg(kg)

        def run() -> Response:
            graph = pool.get(kg_name)
            kit = Toolkit(graph, Trace(), entities=limit, properties=max(1, limit // 2))
            observed = tools.call("search", kit, {"query": q})
            if not isinstance(observed.value, SearchResult):
                return json_response({"detail": observed.text}, 502)  # the name service failed
            found = observed.value
            data = found.to_json()
            data["compact"] = {h.iri: graph.prefixes.compact(h.iri) for h in [*found.entities, *found.properties]}
            return json_response(data)

        return await service.call(run)

    @router.get("/api/entity", tags=["lookup"])
    async def entity(
        id: str = Query(min_length=1, max_length=2000, description="IRI, prefixed name, Q/P id, or a name."),
        kg: str | None = None,
    ) -> Response:
        """An entity's outgoing edges (with qualifiers where the KG has them)."""
        kg_name = service.kg(kg)

        def run() -> Response:
            graph = pool.get(kg_name)
            try:
                iri = resolve_or_search(graph, id)  # people may type a name where the tool wants an identifier
            except LookupFailed as exc:
                return json_response({"detail": str(exc)}, 404)
            observed = tools.call("get_entity", Toolkit(graph, Trace()), {"id": f"<{iri}>"})
            if not isinstance(observed.value, EntityPage):
                return json_response({"detail": observed.text}, 404)
            page = observed.value
            data = page.to_json()
            iris = {page.iri} | {e["property"] for e in data["edges"]}
            iris |= {v["value"]["value"] for e in data["edges"] for v in e["values"] if v["value"]["type"] == "uri"}
            qualifiers = [q for e in data["edges"] for v in e["values"] for q in v["qualifiers"]]
            iris |= {q["property"] for q in qualifiers} | {q["value"]["value"] for q in qualifiers
                                                          if q["value"]["type"] == "uri"}
            data["compact"] = {iri: graph.prefixes.compact(iri) for iri in iris}
            return json_response(data)

        return await service.call(run)
