"""`serve --workers N`: N server processes accepting on one port, started and kept alive by gunicorn through its
documented custom-application API (`BaseApplication`), each running uvicorn through uvicorn's worker class for
gunicorn (`uvicorn-worker`): a worker that dies or hangs is replaced, SIGTERM/SIGINT stop them all. Public APIs
only: an earlier version drove uvicorn's internal `supervisors.Multiprocess`, whose signature changed in a later
uvicorn and broke `--workers` on a fresh install (issue 38). Runs are threads, so one process computes on one core
at a time under the GIL; processes use them all.

Each worker builds its own app after the fork (`worker_app`, gunicorn's `load`), with the state store the settings
name: several workers need a shared one (SPARQLNAV_STATE_URL), or conversations and rate limits would be per worker.

What is built from a graph is built once, before any worker starts (`prepare_graphs`, in a process of its own): a
local file's store and name index, a remote endpoint's probe, each graph's retrieval index. A local store's engine
is started there too and kept (`graph/keeper`: one engine per store and configuration, found through the state
file in the store's folder), so every worker's queries go to that one engine rather than each worker loading the
data into an engine of its own."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from gunicorn.app.base import BaseApplication
from uvicorn_worker import UvicornWorker

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
    check_workers(workers, settings)
    logging.getLogger("sparqlnav.faces.http").info(
        "workers", extra={"fields": {"workers": workers, "port": port}}
    )
    _prepared_apart(settings, config, log_level, readable)
    _Workers(functools.partial(worker_app, settings, config, log_level, readable), {
        "bind": f"[{config.host}]:{port}" if ":" in config.host else f"{config.host}:{port}",
        "workers": workers,
        "worker_class": "sparqlnav.faces.workers.QuietUvicornWorker",
        "graceful_timeout": graceful_s,
        "timeout": 120,  # a worker whose event loop is silent this long is replaced (runs are threads)
        "accesslog": None,  # the request guard logs each request itself
        "errorlog": "-",
        "loglevel": log_level.lower(),
        "proc_name": "sparqlnav",
    }).run()


class QuietUvicornWorker(UvicornWorker):
    """uvicorn's worker for gunicorn, configured as `serve` configures uvicorn in one process."""

    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {
        "loop": "auto",
        "http": "auto",
        "ws": "none",
        "access_log": False,
        "proxy_headers": False,  # the server reads X-Forwarded-For itself, from trusted proxies only
        "timeout_graceful_shutdown": 5,
    }


class _Workers(BaseApplication):
    """gunicorn's custom application (its documented API): the options given, the app made in each worker."""

    def __init__(self, make_app: Callable[[], FastAPI], options: dict[str, Any]) -> None:
        self._make_app = make_app
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        """gunicorn's hook: the options, and none from the command line or a config file."""
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> FastAPI:
        """gunicorn's hook, called in each worker after the fork: that worker's app."""
        return self._make_app()
