"""Routes about the server itself: `/health` (liveness), `/ready` (readiness, for a load balancer), `/api/info`,
the web UI at `/` and the API docs at `/docs`."""

from __future__ import annotations

import asyncio
import os
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from sparqlnav.faces.service import LOOPBACK, Service
from sparqlnav.faces.state import StateUnavailable
from sparqlnav.version import __version__


def web_dir() -> Path:
    """The bundled static web UI."""
    return Path(str(resources.files(__package__) / "web"))


def meta_routes(service: Service, *, openapi_url: str) -> APIRouter:
    """Health, what the server offers, the UI page and the docs page (which reads `openapi_url`)."""
    router = APIRouter()
    config, pool, llm, settings = service.config, service.pool, service.llm, service.settings

    @router.get("/health", tags=["meta"])
    async def health() -> dict[str, Any]:
        """Liveness and load: this process answers (`worker`: its id), and how many runs are under way (all
        workers' when the state is shared; `worker_runs` this one's)."""
        try:
            active: int | None = await asyncio.to_thread(lambda: service.workers.active)
        except StateUnavailable:
            active = None  # alive all the same: readiness says whether it can serve
        return {
            "status": "ok",
            "version": __version__,
            "worker": os.getpid(),
            "state": service.state.description,
            "active_runs": active,  # runs a request (API or MCP) is waiting for
            "worker_runs": service.workers.local_active,
            "finishing_runs": service.workers.finishing,  # given up on, their threads not yet returned
            "max_concurrent": service.workers.size,
        }

    @router.get("/ready", tags=["meta"])
    async def ready() -> JSONResponse:
        """Readiness, for a load balancer: 200 when this worker can take questions (its graphs are open and the
        state store answers), else 503 with the reason."""
        waiting = [name for name in pool.names() if not pool.is_open(name)] if config.eager else []
        problem = f"opening {', '.join(waiting)}" if waiting else None
        if problem is None:
            try:
                await asyncio.to_thread(service.state.ping)
            except StateUnavailable as exc:
                problem = str(exc)
        body = {"status": "ready" if problem is None else "not ready", "worker": os.getpid()}
        if problem is not None:
            body["detail"] = problem
        return JSONResponse(body, status_code=200 if problem is None else 503)

    @router.get("/api/info", tags=["meta"])
    async def info() -> dict[str, Any]:
        """What this server offers: KGs, strategies, whether an LLM is configured, MCP tools."""
        from sparqlnav.strategies import REGISTRY, available

        usable = [
            s for s in available() if s == "auto" or llm is not None or not REGISTRY.get(s, ("", True))[1]
        ]
        return {
            "version": __version__,
            "kgs": pool.describe(paths=config.host in LOOPBACK),
            "default_kg": pool.default,
            "strategies": usable,
            "default_strategy": config.strategy,
            "llm": llm is not None,
            "mcp_tools": service.mcp_tools.offered if service.mcp_tools else [],
            "limits": {
                "max_question_chars": config.max_question_chars,
                "max_query_chars": config.max_query_chars,
                "max_body_bytes": config.max_body_bytes,
                "request_timeout_s": config.request_timeout_s,
                "sparql_timeout_s": settings.limits.timeout_s,
            },
        }

    @router.get("/api/examples", tags=["meta"])
    async def examples(
        kg: str | None = Query(None, description="A KG name this server offers (default: the first)."),
        limit: int = Query(6, ge=1, le=20),
    ) -> dict[str, Any]:
        """A few example questions for a KG, for a start page: the demo's own questions, the questions of its
        indexed examples, or questions written from its schema (`source`: demo, index, schema or none)."""
        kg_name = service.kg(kg)
        starters = service.starter_questions()
        found = await service.call(lambda: starters.get(pool.get(kg_name), limit))
        return {**found.to_json(), "kg": kg_name}  # the name this server gives it, not the file's

    root = web_dir()

    @router.get("/", include_in_schema=False)
    @router.get("/static/index.html", include_in_schema=False)  # the same page by its file name: the same policy
    async def index() -> FileResponse:
        # Only our own files may load: the UI works offline and never reaches a CDN.
        return FileResponse(
            root / "index.html",
            headers={
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                "script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'",
                "Cache-Control": "no-cache",
            },
        )

    @router.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title="sparqlnav API",
            swagger_js_url="/static/vendor/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
            swagger_ui_parameters={"validatorUrl": None},
        )

    return router
