"""Verbs that serve: `serve` (the HTTP API, web UI and MCP over HTTP) and `mcp` (MCP over stdio)."""

from __future__ import annotations

import errno
import sys
from pathlib import Path
from typing import Annotated

import typer

from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.cli.common import (
    CliError,
    KgOpt,
    LlmRetriesOpt,
    LlmTimeoutOpt,
    OptionOpt,
    TimeoutOpt,
    err,
    opened,
    settings_for,
    strategy_knobs,
)
from sparqlnav.faces.logs import LogFormat


def check_can_listen(host: str, port: int) -> None:
    """Fail at once, in one line, when the address cannot be listened on (before any banner or KG)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            probe.bind(address)
    except OSError as exc:
        reason = "the port is in use" if getattr(exc, "errno", None) == errno.EADDRINUSE else exc.strerror or exc
        raise CliError(f"cannot listen on {host}:{port}: {reason}") from None


def serve_command(
    kg: Annotated[
        list[str] | None,
        typer.Option(
            "--kg",
            help="A KG to serve (repeatable; NAME=SPEC names it): RDF file or folder, endpoint URL, 'demo', 'wikidata'. The first is the default.",
        ),
    ] = None,
    host: Annotated[str | None, typer.Option("--host", help="Address to listen on (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port to listen on (default 8000).")] = None,
    strategy: Annotated[str | None, typer.Option("--strategy", "-s", help="Default strategy (auto, lexical, explore, …).")] = None,
    option: OptionOpt = None,
    dataset: Annotated[
        list[str] | None,
        typer.Option("--dataset", help="TEXT2SPARQL dataset id mapped to a KG name: ID=NAME (repeatable). Without any, a one-KG server answers for every dataset."),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", help="Require 'Authorization: Bearer TOKEN' on /api, /mcp and /text2sparql.")] = None,
    rate_limit: Annotated[float | None, typer.Option("--rate-limit", help="Requests per minute per client (0: off; default off on localhost, 120 otherwise).")] = None,
    cors: Annotated[list[str] | None, typer.Option("--cors", help="An origin allowed to call the API from a browser (repeatable).")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option("--allowed-host", help="A host name the server answers to without a token, besides loopback ones (repeatable).")] = None,
    trusted_proxy: Annotated[list[str] | None, typer.Option("--trusted-proxy", help="A proxy address or network whose X-Forwarded-For is believed (repeatable).")] = None,
    request_timeout: Annotated[float | None, typer.Option("--request-timeout", help="Time limit of one request, in seconds (default 300).")] = None,
    max_concurrent: Annotated[int | None, typer.Option("--max-concurrent", help="Runs at once; more get 503 (default 64; the whole server's with a shared state store).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Server processes sharing the port (default 1; more need SPARQLNAV_STATE_URL=redis://…).")] = None,
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
    log_level: Annotated[str | None, typer.Option("--log-level", help="debug, info, warning or error (default info).")] = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="text (lines for people), json (JSON lines) or auto: text on a terminal, else json.")
    ] = LogFormat.auto,
) -> None:
    """Serve the HTTP API (with streaming), the web UI, the TEXT2SPARQL endpoint and MCP at /mcp."""
    import uvicorn

    from sparqlnav.faces.access import Networks
    from sparqlnav.faces.http import (
        ServeConfig,
        configure_logging,
        create_app,
        parse_kgs,
        parse_pairs,
    )
    from sparqlnav.faces.logs import ReadableFormatter, readable
    from sparqlnav.faces.state_choice import open_state
    from sparqlnav.faces.workers import check_workers, serve_workers

    settings = settings_for(timeout, llm_model, llm_timeout, llm_retries)
    specs = parse_kgs(kg) if kg else None
    if port is not None and not 0 <= port <= 65535:
        raise CliError(f"--port {port} is not a port number (0 to 65535)")
    for name, spec in (specs or {}).items():
        # Checked here: a KG that fails to open inside the server is reported with the server's traceback.
        if not (spec in ("demo", "wikidata") or spec.startswith(("http://", "https://")) or Path(spec).expanduser().exists()
                or spec.lower().startswith(("sqlite:", "postgresql:", "postgres:"))):  # a database: checked as it opens
            raise CliError(f"--kg {name}: {spec} does not exist (give an RDF file or folder, an http(s):// endpoint, 'demo' or 'wikidata')")
    try:
        datasets = parse_pairs(dataset) if dataset else None
    except ValueError as exc:
        raise CliError(f"--dataset: {exc}") from None
    config = ServeConfig.from_settings(
        settings,
        kgs=specs,
        host=host,
        strategy=strategy,
        strategy_options=strategy_knobs(strategy or "", None, option) or None,
        datasets=datasets,
        token=token,
        rate_limit=rate_limit,
        cors_origins=tuple(cors) if cors else None,
        allowed_hosts=tuple(allowed_host) if allowed_host else None,
        trusted_proxies=tuple(trusted_proxy) if trusted_proxy else None,
        request_timeout_s=request_timeout,
        max_concurrent=max_concurrent,
    )
    unknown = [d for d, name in config.datasets.items() if name not in (config.kgs or {"demo": "demo"})]
    if unknown:
        raise CliError(f"--dataset maps {unknown[0]!r} to a KG this server does not have")
    try:
        Networks(config.trusted_proxies)
    except ValueError as exc:
        raise CliError(f"--trusted-proxy: {exc}") from None
    host = config.host
    port = settings.serve.port if port is None else port
    processes = settings.serve.workers if workers is None else workers
    if processes < 1:
        raise CliError(f"--workers {processes}: give 1 or more")
    try:
        check_workers(processes, settings)
        open_state(settings).close()  # an unreachable Redis is said now, in one line, not by every worker
    except SparqlnavError as exc:
        raise CliError(str(exc)) from None
    check_can_listen(host, port)
    people = readable(log_format, sys.stderr.isatty())
    level = log_level.upper() if log_level else settings.serve.log_level
    configure_logging(level, formatter=ReadableFormatter() if people else None)
    if processes > 1:
        err().print(f"sparqlnav on http://{host}:{port}/ with {processes} workers  (API docs /docs, MCP /mcp, TEXT2SPARQL /text2sparql)", style="dim")
        serve_workers(settings, config, port=port, workers=processes, log_level=level, readable=people)
        return
    app_ = create_app(settings, config, llm=settings.llm)
    if host not in ("127.0.0.1", "localhost", "::1") and not config.token:
        err().print("warning: serving beyond this machine without --token: anyone who can reach it can use it", style="yellow")
        if not config.allowed_hosts:
            err().print("note: without --token only loopback host names are answered; add others with --allowed-host", style="yellow")
    err().print(f"sparqlnav on http://{host}:{port}/  (API docs /docs, MCP /mcp, TEXT2SPARQL /text2sparql)", style="dim")
    uvicorn.run(
        app_, host=host, port=port, log_config=None, access_log=False, ws="none", timeout_graceful_shutdown=5,
        proxy_headers=False,  # the server reads X-Forwarded-For itself, from trusted proxies only
    )


def mcp_command(
    kg: KgOpt = "demo",
    timeout: TimeoutOpt = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else SPARQLNAV_LLM_MODEL).")] = None,
    llm_timeout: LlmTimeoutOpt = None,
    llm_retries: LlmRetriesOpt = None,
) -> None:
    """Serve the tools (search, get_entity, execute_sparql, …) to an MCP client over stdio."""
    from sparqlnav.faces.mcp import run_stdio

    settings = settings_for(timeout, llm_model, llm_timeout, llm_retries)
    with opened(kg, settings) as graph:
        run_stdio(graph, settings=settings, llm=settings.llm)



