"""Run-time settings: every variable sparqlnav reads, read once by the entry points into one typed object
that is passed down explicitly. Library code never reads the environment (a ruff rule enforces it)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.endpoint import USER_AGENT, HttpOptions, Limits, as_mapping
from sparqlnav.llm import LLMConfig, load_prices
from sparqlnav.redirects import origin

__all__ = [
    "VARIABLES",
    "CascadeSettings",
    "ConfigError",
    "ConversationSettings",
    "EmbeddingSettings",
    "LexicalSettings",
    "PathSettings",
    "RemoteSettings",
    "ServeSettings",
    "Settings",
    "WikidataSettings",
]

# A conversation keeps its latest turns within both bounds: a client could otherwise grow one without end (a
# 99 KB edit per turn made a 17.7 MB file, rewritten on every turn).
CONVERSATION_MAX_TURNS = 50
CONVERSATION_MAX_BYTES = 512 * 1024
CONVERSATION_MAX_PER_CLIENT = 100  # one client's conversations (a tenth of the default count): its own oldest go first

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

# Each setting's place in the Settings tree -> the variables that set it, the first one present winning.
VARIABLES: dict[tuple[str, str], tuple[str, ...]] = {
    ("paths", "home"): ("SPARQLNAV_HOME",),
    ("limits", "timeout_s"): ("SPARQLNAV_TIMEOUT",),
    ("limits", "max_rows"): ("SPARQLNAV_MAX_ROWS",),
    ("limits", "max_bytes"): ("SPARQLNAV_MAX_BYTES",),
    ("limits", "engine_memory_bytes"): ("SPARQLNAV_ENGINE_MEMORY",),
    ("limits", "engine_idle_s"): ("SPARQLNAV_ENGINE_IDLE",),
    ("remote", "user_agent"): ("SPARQLNAV_USER_AGENT",),
    ("remote", "headers"): ("SPARQLNAV_HEADERS",),
    ("remote", "allowed_services"): ("SPARQLNAV_ALLOWED_SERVICES",),
    ("remote", "allowed_redirects"): ("SPARQLNAV_ALLOWED_REDIRECTS",),
    ("remote", "name_index_max_triples"): ("SPARQLNAV_NAME_INDEX_MAX_TRIPLES",),
    ("databases", "copy_max_rows"): ("SPARQLNAV_DB_COPY_MAX_ROWS",),
    ("databases", "lexical_max_rows"): ("SPARQLNAV_DB_LEXICAL_MAX_ROWS",),
    ("wikidata", "sparql"): ("SPARQLNAV_WIKIDATA_SPARQL",),
    ("wikidata", "api"): ("SPARQLNAV_WIKIDATA_API",),
    ("llm", "base_url"): ("OPENAI_BASE_URL",),
    ("llm", "api_key"): ("OPENAI_API_KEY",),
    ("llm", "model"): ("SPARQLNAV_LLM_MODEL",),
    ("llm", "tool_mode"): ("SPARQLNAV_LLM_TOOL_MODE",),
    ("llm", "cache_dir"): ("SPARQLNAV_LLM_CACHE",),
    ("llm", "prices"): ("SPARQLNAV_LLM_PRICES",),
    ("llm", "timeout_s"): ("SPARQLNAV_LLM_TIMEOUT",),
    ("llm", "max_retries"): ("SPARQLNAV_LLM_RETRIES",),
    ("llm", "budget_s"): ("SPARQLNAV_LLM_BUDGET",),
    ("lexical", "threshold"): ("SPARQLNAV_LEXICAL_THRESHOLD",),
    ("embedding", "base_url"): ("SPARQLNAV_EMBED_BASE_URL", "OPENAI_BASE_URL"),
    ("embedding", "api_key"): ("SPARQLNAV_EMBED_API_KEY", "OPENAI_API_KEY"),
    ("serve", "kgs"): ("SPARQLNAV_KG",),
    ("serve", "host"): ("SPARQLNAV_HOST",),
    ("serve", "port"): ("SPARQLNAV_PORT",),
    ("serve", "strategy"): ("SPARQLNAV_STRATEGY",),
    ("serve", "text2sparql_strategy"): ("SPARQLNAV_TEXT2SPARQL_STRATEGY",),
    ("serve", "datasets"): ("SPARQLNAV_TEXT2SPARQL_DATASETS",),
    ("serve", "token"): ("SPARQLNAV_API_TOKEN",),
    ("serve", "rate_limit"): ("SPARQLNAV_RATE_LIMIT",),
    ("serve", "cors_origins"): ("SPARQLNAV_CORS_ORIGINS",),
    ("serve", "allowed_hosts"): ("SPARQLNAV_ALLOWED_HOSTS",),
    ("serve", "trusted_proxies"): ("SPARQLNAV_TRUSTED_PROXIES",),
    ("serve", "request_timeout_s"): ("SPARQLNAV_REQUEST_TIMEOUT",),
    ("serve", "max_concurrent"): ("SPARQLNAV_MAX_CONCURRENT",),
    ("serve", "log_level"): ("SPARQLNAV_LOG_LEVEL",),
    ("serve", "workers"): ("SPARQLNAV_WORKERS",),
    ("serve", "state_url"): ("SPARQLNAV_STATE_URL",),
    ("conversations", "keep"): ("SPARQLNAV_CONVERSATIONS",),
    ("conversations", "max_count"): ("SPARQLNAV_CONVERSATIONS_MAX",),
    ("conversations", "max_per_client"): ("SPARQLNAV_CONVERSATIONS_PER_CLIENT",),
    ("conversations", "ttl_s"): ("SPARQLNAV_CONVERSATIONS_TTL",),
    ("conversations", "max_turns"): ("SPARQLNAV_CONVERSATIONS_TURNS",),
    ("conversations", "max_bytes"): ("SPARQLNAV_CONVERSATIONS_BYTES",),
    ("cascade", "lexical_confidence"): ("SPARQLNAV_AUTO_LEXICAL_CONFIDENCE",),
    ("cascade", "singular_rows"): ("SPARQLNAV_AUTO_SINGULAR_ROWS",),
    ("debug", "on"): ("SPARQLNAV_DEBUG",),
    ("progress", "on"): ("SPARQLNAV_PROGRESS",),
}


# Variables whose values are never repeated in messages.
SECRET = frozenset(
    {"OPENAI_API_KEY", "SPARQLNAV_EMBED_API_KEY", "SPARQLNAV_API_TOKEN", "SPARQLNAV_HEADERS", "SPARQLNAV_STATE_URL"}
)


class ConfigError(SparqlnavError, ValueError):
    """A variable holds a value sparqlnav cannot use; the message names it, on one line."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _words(value: Any) -> Any:
    """Space-separated lists arrive from the environment as one string."""
    return tuple(value.split()) if isinstance(value, str) else value


class PathSettings(_Part):
    """Where sparqlnav keeps its stores and indexes."""

    home: Path

    @property
    def stores_dir(self) -> Path:
        """Where local RDF files are kept as Oxigraph stores."""
        return self.home / "stores"


class DatabaseSettings(_Part):
    """How relational databases are answered: in SQL where they live; copied into a graph only for SPARQL."""

    # Rows (all tables, the catalogue's counts) up to which a database is copied into a graph store when a SPARQL
    # strategy asks for it (the copy runs at about 4,000 rows a second); above it the copy is refused in one line.
    copy_max_rows: int = Field(default=100_000, ge=0)
    # Rows up to which `auto` tries lexical first on a database it answers in SQL, on the graph copy (made in a few
    # seconds at 20,000 rows, then kept): a question lexical reads, confirmed by the answer check, costs one LLM call
    # and no SQL writing, but its answer is SPARQL on the copy. 0 (the default): the SQL writer first, no copy.
    lexical_max_rows: int = Field(default=0, ge=0)


class RemoteSettings(_Part):
    """How remote SPARQL endpoints are called."""

    user_agent: str = USER_AGENT
    headers: dict[str, str] = Field(default_factory=dict)
    allowed_services: tuple[str, ...] = ()
    # Origins (scheme://host[:port]) an endpoint's redirect may lead to besides its own; never from https to http.
    allowed_redirects: tuple[str, ...] = ()
    # Endpoints up to this size get their names downloaded into a local index; larger ones are searched in place.
    name_index_max_triples: int = Field(default=5_000_000, ge=0)

    @field_validator("headers", mode="before")
    @classmethod
    def _header_lines(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return as_mapping(h for h in value.splitlines() if h.strip())
        except ValueError:
            # Not as_mapping's message: it quotes the line, and header lines carry credentials.
            raise ValueError("each line must look like 'Name: value'") from None

    @field_validator("allowed_services", mode="before")
    @classmethod
    def _services(cls, value: Any) -> Any:
        return _words(value)

    @field_validator("allowed_redirects", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> Any:
        for url in _words(value) or ():
            origin(url)  # ValueError: the message names the entry that is no origin
        return _words(value)

    def http(self) -> HttpOptions:
        """How a remote endpoint is called: user agent, headers and the redirects it may follow."""
        return HttpOptions(
            user_agent=self.user_agent, headers=dict(self.headers), allowed_redirects=self.allowed_redirects
        )


class WikidataSettings(_Part):
    """Wikidata's SPARQL endpoint and MediaWiki API (or a mirror's)."""

    sparql: str = "https://query.wikidata.org/sparql"
    api: str = "https://www.wikidata.org/w/api.php"


class LexicalSettings(_Part):
    """How sure the lexical strategy must be to answer rather than say "not found"."""

    # Calibrated by bench/lexical_calibration.py: the lowest confidence at which at least 80 % of the answers are
    # right on each of six graphs of different styles (DEMO, CK25, BESTIARY and three relational databases opened
    # through the direct mapping); leave-one-graph-out figures in bench/results/lexical_calibration.md. It was 0.25
    # from the first three, which did not carry over to relational-style graphs (0.63 on one).
    threshold: float = Field(default=0.5, ge=0, le=1, allow_inf_nan=False)


class EmbeddingSettings(_Part):
    """An OpenAI-compatible embedding server for the retrieval index (`openai:<model>` embedders)."""

    base_url: str | None = None
    api_key: SecretStr | None = None


class ServeSettings(_Part):
    """What `sparqlnav serve` (and the uvicorn factory) offers and how it protects itself."""

    kgs: tuple[str, ...] = ()  # `--kg` values, `spec` or `name=spec`; the first is the default
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    strategy: str = "auto"
    text2sparql_strategy: str | None = None
    datasets: tuple[str, ...] = ()  # TEXT2SPARQL `dataset=kg name` pairs
    token: SecretStr | None = None
    rate_limit: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # 0: off
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()  # Host names answered without a token, besides loopback ones
    trusted_proxies: tuple[str, ...] = ()  # addresses or networks whose X-Forwarded-For is believed
    request_timeout_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    max_concurrent: int = Field(default=64, ge=1)
    log_level: LogLevel = "INFO"
    workers: int = Field(default=1, ge=1, le=256)  # server processes sharing the port
    # Where conversations, rate-limit counters and run slots live: None keeps them in the process (one worker);
    # redis://, rediss:// or unix:// shares them between workers. Secret: the URL may hold a password.
    state_url: SecretStr | None = None

    @field_validator("state_url")
    @classmethod
    def _state_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("expected a Redis URL: redis://host:port/db, rediss://… or unix:///path/to/socket")
        return value

    @field_validator("kgs", "datasets", "cors_origins", "allowed_hosts", "trusted_proxies", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _words(value)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/8)") from None
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class ConversationSettings(_Part):
    """Where the server keeps conversations (memory, or disk under the home), how many, for how long, and how
    much of each (its latest turns within a count and a size)."""

    keep: Literal["memory", "disk"] = "memory"
    max_count: int = Field(default=1000, ge=1)
    max_per_client: int = Field(default=CONVERSATION_MAX_PER_CLIENT, ge=1)
    ttl_s: float = Field(default=86_400.0, gt=0, allow_inf_nan=False)  # after the last use
    max_turns: int = Field(default=CONVERSATION_MAX_TURNS, ge=1)
    max_bytes: int = Field(default=CONVERSATION_MAX_BYTES, ge=1024)

    @property
    def on_disk(self) -> bool:
        """Conversations are written under the home and survive a restart."""
        return self.keep == "disk"

    @field_validator("keep", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value


class CascadeSettings(_Part):
    """When the `auto` cascade trusts a cheaper strategy's answer (defaults measured on CK25 by
    bench/cascade_cost.py, see bench/results/cascade.md)."""

    # lexical answers from this confidence up go to the answer check (one LLM call) and are kept when it says they
    # answer the question (issue 24). 0: whenever lexical itself says `answered` (its own calibrated threshold):
    # before the check, CK25's kept lexical answers were then right (F1 ≥ 0.5) 90 % of the time, as at 0.8, with
    # fewer LLM calls (bench/results/cascade.md)
    lexical_confidence: float = Field(default=0.0, ge=0, le=1, allow_inf_nan=False)
    # more rows than this for a question asking for one thing ("who is the manager of …") is not trusted:
    # the most rows of any CK25 reference answer to such a question
    singular_rows: int = Field(default=7, ge=1)


class _Variables(PydanticBaseSettingsSource):
    """The settings named by VARIABLES, nested as the Settings tree, from a given mapping of variables."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.environ = environ

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        """Parts are filled as a whole by __call__; no top-level field has a variable of its own."""
        return None, field_name, False

    def raw(self, place: tuple[str, str]) -> tuple[str, str] | None:
        """The first variable set (non-blank) for a place in the tree, with its value."""
        for name in VARIABLES[place]:
            value = self.environ.get(name, "").strip()
            if value:
                return name, value
        return None

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {"paths": {"home": _default_home(self.environ)}}
        for place in VARIABLES:
            found = self.raw(place)
            if found is not None:
                out.setdefault(place[0], {})[place[1]] = found[1]
        out["debug"] = out.pop("debug", {}).get("on", False)
        out["progress"] = out.pop("progress", {}).get("on", "auto")
        llm = out.pop("llm", {})
        # A model alone would silently go to api.openai.com without a key: treat as unconfigured.
        if llm.get("model") and (llm.get("base_url") or llm.get("api_key")):
            if "prices" in llm:
                try:
                    llm["prices"] = load_prices(Path(llm["prices"]))
                except ValueError as exc:
                    raise ConfigError(f"SPARQLNAV_LLM_PRICES: {exc}") from None
            out["llm"] = llm
        return out


def _default_home(environ: Mapping[str, str]) -> Path:
    if environ.get("SPARQLNAV_HOME", "").strip():
        return Path(environ["SPARQLNAV_HOME"].strip()).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "sparqlnav"


def _one_line(exc: ValidationError, source: _Variables) -> str:
    """Each problem as `VARIABLE='value': what is wrong`, joined on one line."""
    problems = []
    for error in exc.errors():
        loc = tuple(str(part) for part in error["loc"])
        place = (loc[0], loc[1] if len(loc) > 1 else "on")
        found = source.raw(place) if place in VARIABLES else None
        if found is None:
            where = ".".join(loc)
        else:
            where = found[0] if found[0] in SECRET else f"{found[0]}={found[1]!r}"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


class Settings(BaseSettings):
    """Everything sparqlnav is configured with: paths, query limits, remote calls, Wikidata, the LLM, the
    embedding server, the server's options and its conversations, each part typed and validated."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid")

    paths: PathSettings
    limits: Limits = Field(default_factory=Limits)
    remote: RemoteSettings = Field(default_factory=RemoteSettings)
    databases: DatabaseSettings = Field(default_factory=DatabaseSettings)
    wikidata: WikidataSettings = Field(default_factory=WikidataSettings)
    llm: LLMConfig | None = None  # None: no LLM configured (a normal state; `lexical` needs none)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    lexical: LexicalSettings = Field(default_factory=LexicalSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    conversations: ConversationSettings = Field(default_factory=ConversationSettings)
    cascade: CascadeSettings = Field(default_factory=CascadeSettings)
    debug: bool = False  # show tracebacks instead of one-line errors
    progress: Literal["auto", "always", "never"] = "auto"  # progress of long work: auto = on a terminal only

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only explicit values: the environment is read by `from_env`, never implicitly by a constructor."""
        return (init_settings,)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, overrides: Mapping[str, str | None] | None = None
    ) -> Settings:
        """Settings from the variables in `environ` (default: the process environment); `overrides` are
        variables given on the command line (None values are not given). ConfigError names a bad variable."""
        env = dict(os.environ if environ is None else environ)
        env.update({k: v for k, v in (overrides or {}).items() if v is not None})
        source = _Variables(cls, env)
        try:
            return cls(**source())
        except ValidationError as exc:
            raise ConfigError(_one_line(exc, source)) from None

    @classmethod
    def variables(cls) -> list[str]:
        """Every environment variable the settings read."""
        return sorted({name for names in VARIABLES.values() for name in names} | {"XDG_CACHE_HOME"})

    def with_timeout(self, timeout_s: float | None) -> Settings:
        """A copy with another per-query time limit (None keeps the current one)."""
        if timeout_s is None:
            return self
        return self.model_copy(update={"limits": replace(self.limits, timeout_s=timeout_s)})
