"""`serve --workers N`: N server processes accepting on one port, started and kept alive by uvicorn's own process
manager (`uvicorn.supervisors.Multiprocess`: a worker that dies or hangs is replaced, SIGTERM/SIGINT stop them
all). Runs are threads, so one process computes on one core at a time under the GIL; processes use them all.

Each worker builds its own app in its own process (`worker_app`, handed to uvicorn as a picklable factory, since
the spawned processes cannot share objects), with the state store the settings name: several workers need a
shared one (SPARQLNAV_STATE_URL), or conversations and rate limits would be per worker.

What is built from a graph is built once, by the supervising process, before any worker starts (`prepare_graphs`):
a local file's store and name index, a remote endpoint's probe, each graph's retrieval index. A local store's
engine is started there too and kept (`graph/keeper`: one engine per store and configuration, found through the
state file in the store's folder), so every worker's queries go to that one engine rather than each worker
loading the data into an engine of its own."""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING

from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.service import KGPool, ServeConfig
from sparqlnav.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["WorkersRefused", "check_workers", "prepare_graphs", "serve_workers", "worker_app"]

log = logging.getLogger("sparqlnav.faces.http")


class WorkersRefused(SparqlnavError):
    """Several workers were asked for without a state store they could share."""


def check_workers(workers: int, settings: Settings) -> None:
    """Refuse, in one line, several workers without a shared state store."""
    if workers > 1 and settings.serve.state_url is None:
        raise WorkersRefused(
            f"--workers {workers} needs a state store the workers share: set SPARQLNAV_STATE_URL=redis://HOST:PORT/DB "
            "(without it each worker would keep its own conversations and rate limits)"
        )


def prepare_graphs(settings: Settings, config: ServeConfig) -> None:
    """Open every graph the server offers once, in this (the supervising) process, with the workers' own settings
    (so a local engine's configuration is theirs and they find it), and build their retrieval indexes; then let go
    (a kept engine stays up for its idle period, long enough for the workers to take it over)."""
    from sparqlnav.retrieval.indexes import KGIndexes, index_errors

    pool = KGPool(dict(config.kgs) or {"demo": "demo"}, settings)
    indexes = KGIndexes(settings.paths.home, embedding=settings.embedding)
    try:
        for name in pool.names():
            started = time.monotonic()
            graph = pool.get(name)
            query = getattr(graph.endpoint, "url", None)  # a local store: start (or find) its one engine now
            try:
                indexes.get(graph)
            except index_errors() as exc:  # the workers will try again on first use, as one process does
                log.warning("no retrieval index", extra={"fields": {"kg": name, "reason": str(exc)[:300]}})
            log.info(
                "graph prepared for the workers",
                extra={"fields": {"kg": name, "seconds": round(time.monotonic() - started, 2), "engine": query}},
            )
    finally:
        indexes.close()
        pool.close()  # a kept engine is let go of, not stopped: it ends only after its idle period unused


def _prepare_logged(settings: Settings, config: ServeConfig, log_level: str, readable: bool) -> None:
    from sparqlnav.faces.http import configure_logging
    from sparqlnav.faces.logs import ReadableFormatter

    configure_logging(log_level, formatter=ReadableFormatter() if readable else None)
    prepare_graphs(settings, config)


def _prepared_apart(settings: Settings, config: ServeConfig, log_level: str, readable: bool) -> None:
    """`prepare_graphs` in a process of its own, so the supervisor, which lives as long as the server, does not keep
    what building needed (an embedding model, the schema's computation: about 150 MB) for nothing."""
    import multiprocessing

    process = multiprocessing.get_context("spawn").Process(
        target=_prepare_logged, args=(settings, config, log_level, readable), name="sparqlnav-prepare"
    )
    process.start()
    process.join()
    if process.exitcode != 0:
        raise WorkersRefused(f"preparing the graphs for the workers failed (exit code {process.exitcode}; see the log)")


def worker_app(settings: Settings, config: ServeConfig, log_level: str, readable: bool) -> FastAPI:
    """The app one worker process serves (called in that process): its own logging, state connection and graphs."""
    from sparqlnav.faces.http import configure_logging, create_app
    from sparqlnav.faces.logs import ReadableFormatter

    configure_logging(log_level, formatter=ReadableFormatter() if readable else None)
    return create_app(settings, config, llm=settings.llm)


def serve_workers(
    settings: Settings, config: ServeConfig, *, port: int, workers: int, log_level: str, readable: bool,
    graceful_s: int = 5,
) -> None:
    """Serve on `config.host`:`port` with `workers` processes until SIGINT or SIGTERM."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    check_workers(workers, settings)
    uv = uvicorn.Config(
        functools.partial(worker_app, settings, config, log_level, readable),
        factory=True,
        host=config.host,
        port=port,
        workers=workers,
        log_config=None,
        access_log=False,
        ws="none",
        timeout_graceful_shutdown=graceful_s,
        proxy_headers=False,  # the server reads X-Forwarded-For itself, from trusted proxies only
    )
    logging.getLogger("sparqlnav.faces.http").info(
        "workers", extra={"fields": {"workers": workers, "port": port}}
    )
    _prepared_apart(settings, config, log_level, readable)
    sock = uv.bind_socket()
    try:
        Multiprocess(uv, target=uvicorn.Server(config=uv).run, sockets=[sock]).run()
    finally:
        sock.close()
