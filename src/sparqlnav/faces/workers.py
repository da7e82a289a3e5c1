"""`serve --workers N`: N server processes accepting on one port, started and kept alive by uvicorn's own process
manager (`uvicorn.supervisors.Multiprocess`: a worker that dies or hangs is replaced, SIGTERM/SIGINT stop them
all). Runs are threads, so one process computes on one core at a time under the GIL; processes use them all.

Each worker builds its own app in its own process (`worker_app`, handed to uvicorn as a picklable factory, since
the spawned processes cannot share objects), with the state store the settings name: several workers need a
shared one (SPARQLNAV_STATE_URL), or conversations and rate limits would be per worker."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from sparqlnav.errors import SparqlnavError
from sparqlnav.faces.service import ServeConfig
from sparqlnav.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["WorkersRefused", "check_workers", "serve_workers", "worker_app"]


class WorkersRefused(SparqlnavError):
    """Several workers were asked for without a state store they could share."""


def check_workers(workers: int, settings: Settings) -> None:
    """Refuse, in one line, several workers without a shared state store."""
    if workers > 1 and settings.serve.state_url is None:
        raise WorkersRefused(
            f"--workers {workers} needs a state store the workers share: set SPARQLNAV_STATE_URL=redis://HOST:PORT/DB "
            "(without it each worker would keep its own conversations and rate limits)"
        )


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
    sock = uv.bind_socket()
    try:
        Multiprocess(uv, target=uvicorn.Server(config=uv).run, sockets=[sock]).run()
    finally:
        sock.close()
