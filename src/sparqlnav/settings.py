"""Run-time settings, read once from the environment by the entry points and passed down explicitly."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from sparqlnav.graph.endpoint import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    USER_AGENT,
    Limits,
    as_mapping,
)


def _default_home(environ: Mapping[str, str]) -> Path:
    if environ.get("SPARQLNAV_HOME"):
        return Path(environ["SPARQLNAV_HOME"]).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "sparqlnav"


@dataclass(frozen=True)
class Settings:
    """Where sparqlnav keeps its stores and indexes, and the default limits of every query."""

    home: Path
    limits: Limits = field(default_factory=Limits)
    user_agent: str = USER_AGENT
    headers: dict[str, str] = field(default_factory=dict)
    allowed_services: tuple[str, ...] = ()
    wikidata_sparql: str = "https://query.wikidata.org/sparql"
    wikidata_api: str = "https://www.wikidata.org/w/api.php"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from SPARQLNAV_* environment variables."""
        env = os.environ if environ is None else environ
        limits = Limits(
            timeout_s=float(env.get("SPARQLNAV_TIMEOUT", DEFAULT_TIMEOUT_S)),
            max_rows=int(env.get("SPARQLNAV_MAX_ROWS", DEFAULT_MAX_ROWS)),
            max_bytes=int(env.get("SPARQLNAV_MAX_BYTES", DEFAULT_MAX_BYTES)),
        )
        services = tuple(s for s in env.get("SPARQLNAV_ALLOWED_SERVICES", "").split() if s)
        return cls(
            home=_default_home(env),
            limits=limits,
            user_agent=env.get("SPARQLNAV_USER_AGENT", USER_AGENT),
            allowed_services=services,
            wikidata_sparql=env.get("SPARQLNAV_WIKIDATA_SPARQL", cls.wikidata_sparql),
            wikidata_api=env.get("SPARQLNAV_WIKIDATA_API", cls.wikidata_api),
            headers=as_mapping(h for h in env.get("SPARQLNAV_HEADERS", "").splitlines() if h.strip()),
        )

    def with_timeout(self, timeout_s: float | None) -> Settings:
        """A copy with another per-query time limit (None keeps the current one)."""
        if timeout_s is None:
            return self
        return replace(self, limits=replace(self.limits, timeout_s=timeout_s))

    @property
    def stores_dir(self) -> Path:
        """Where local RDF files are kept as Oxigraph stores."""
        return self.home / "stores"
