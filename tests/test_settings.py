"""Settings: one typed object read from the environment by the entry points, validated, documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparqlnav.faces.http import ServeConfig
from sparqlnav.graph.endpoint import Limits
from sparqlnav.retrieval.embed import OpenAIEmbedder, make_embedder
from sparqlnav.settings import ConfigError, EmbeddingSettings, PathSettings, Settings

README = Path(__file__).resolve().parent.parent / "README.md"


def documented_variables() -> set[str]:
    """The SPARQLNAV_* names in the README's configuration table."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Configuration", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"SPARQLNAV_[A-Z0-9_]+", row.split(" | ")[0])}


def test_every_variable_read_is_documented_and_every_documented_one_is_read() -> None:
    read = {name for name in Settings.variables() if name.startswith("SPARQLNAV_")}
    documented = documented_variables()
    assert read - documented == set(), "read but not in the README's configuration table"
    assert documented - read == set(), "in the README's configuration table but never read"
    assert {"SPARQLNAV_DEBUG", "SPARQLNAV_LOG_LEVEL", "SPARQLNAV_PORT", "SPARQLNAV_TEXT2SPARQL_STRATEGY"} <= read


def test_variables_fill_every_part(tmp_path: Path) -> None:
    s = Settings.from_env(
        {
            "SPARQLNAV_HOME": str(tmp_path),
            "SPARQLNAV_TIMEOUT": "2.5",
            "SPARQLNAV_MAX_ROWS": "7",
            "SPARQLNAV_HEADERS": "Authorization: Bearer t\nX-Team: kg\n",
            "SPARQLNAV_ALLOWED_SERVICES": " https://a.example/sparql  https://b.example/sparql ",
            "SPARQLNAV_WIKIDATA_API": "http://mirror/w/api.php",
            "OPENAI_BASE_URL": "http://llm/v1",
            "SPARQLNAV_LLM_MODEL": "m",
            "SPARQLNAV_EMBED_API_KEY": "ek",
            "SPARQLNAV_KG": "a=x.ttl demo",
            "SPARQLNAV_PORT": "8123",
            "SPARQLNAV_LOG_LEVEL": "debug",
            "SPARQLNAV_RATE_LIMIT": "30",
            "SPARQLNAV_DEBUG": "1",
        }
    )
    assert s.paths.home == tmp_path and s.paths.stores_dir == tmp_path / "stores"
    assert s.limits == Limits(timeout_s=2.5, max_rows=7)
    assert s.remote.headers == {"Authorization": "Bearer t", "X-Team": "kg"}
    assert s.remote.allowed_services == ("https://a.example/sparql", "https://b.example/sparql")
    assert (s.wikidata.sparql, s.wikidata.api) == ("https://query.wikidata.org/sparql", "http://mirror/w/api.php")
    assert s.llm is not None and (s.llm.base_url, s.llm.model) == ("http://llm/v1", "m")
    # The embedding server falls back to the LLM server, variable by variable.
    assert s.embedding.base_url == "http://llm/v1"
    assert s.embedding.api_key is not None and s.embedding.api_key.get_secret_value() == "ek"
    assert (s.serve.kgs, s.serve.port, s.serve.log_level, s.serve.rate_limit) == (("a=x.ttl", "demo"), 8123, "DEBUG", 30.0)
    assert s.debug is True
    config = ServeConfig.from_settings(s, strategy="lexical")
    assert dict(config.kgs) == {"a": "x.ttl", "demo": "demo"} and config.strategy == "lexical" and config.rate_limit == 30.0
    assert s.with_timeout(9).limits == Limits(timeout_s=9, max_rows=7) and s.limits.timeout_s == 2.5


def test_defaults_and_the_home_under_the_cache_folder(tmp_path: Path) -> None:
    s = Settings.from_env({"XDG_CACHE_HOME": str(tmp_path), "SPARQLNAV_MAX_ROWS": "  "})
    assert s.paths.home == tmp_path / "sparqlnav"
    assert s.limits == Limits() and s.limits.max_rows == 10_000  # a blank variable is not set
    assert s.llm is None and s.debug is False
    assert (s.serve.host, s.serve.port, s.serve.strategy, s.serve.log_level) == ("127.0.0.1", 8000, "auto", "INFO")


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("SPARQLNAV_MAX_ROWS", "-1", "greater than or equal to 1"),
        ("SPARQLNAV_MAX_BYTES", "0", "greater than or equal to 1"),
        ("SPARQLNAV_TIMEOUT", "nan", "finite number"),
        ("SPARQLNAV_TIMEOUT", "soon", "valid number"),
        ("SPARQLNAV_TIMEOUT", "-3", "greater than 0"),
        ("SPARQLNAV_PORT", "70000", "less than or equal to 65535"),
        ("SPARQLNAV_MAX_CONCURRENT", "many", "valid integer"),
        ("SPARQLNAV_REQUEST_TIMEOUT", "inf", "finite number"),
        ("SPARQLNAV_RATE_LIMIT", "-5", "greater than or equal to 0"),
        ("SPARQLNAV_LOG_LEVEL", "loud", "'DEBUG'"),
        ("SPARQLNAV_DEBUG", "maybe", "valid boolean"),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_the_variable(variable: str, value: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SPARQLNAV_HOME": "/tmp/sn", variable: value})
    message = str(caught.value)
    assert message.startswith(f"{variable}={value!r}: ") and why in message
    assert "\n" not in message


def test_secret_values_are_not_repeated_in_errors() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SPARQLNAV_HEADERS": "Authorization Bearer s3cret"})
    assert str(caught.value) == "SPARQLNAV_HEADERS: Value error, each line must look like 'Name: value'"


def test_constructors_never_read_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARQLNAV_MAX_ROWS", "7")
    monkeypatch.setenv("SPARQLNAV_HOME", str(tmp_path))
    explicit = Settings(paths=PathSettings(home=tmp_path / "other"))
    assert explicit.limits.max_rows == 10_000 and explicit.paths.home == tmp_path / "other"
    assert Settings.from_env({}).limits.max_rows == 10_000  # a given mapping is the whole environment
    read = Settings.from_env()  # the entry points' call: the process environment
    assert read.limits.max_rows == 7 and read.paths.home == tmp_path


def test_command_line_overrides_win_unless_absent() -> None:
    env = {"OPENAI_BASE_URL": "http://llm/v1", "SPARQLNAV_LLM_MODEL": "m"}
    chosen = Settings.from_env(env, overrides={"SPARQLNAV_LLM_MODEL": "other"}).llm
    kept = Settings.from_env(env, overrides={"SPARQLNAV_LLM_MODEL": None}).llm
    assert chosen is not None and chosen.model == "other"
    assert kept is not None and kept.model == "m"


def test_the_embedding_server_comes_from_the_settings() -> None:
    embedding = Settings.from_env({"SPARQLNAV_EMBED_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k"}).embedding
    assert embedding == EmbeddingSettings.model_validate({"base_url": "http://127.0.0.1:9/v1", "api_key": "k"})
    embedder = make_embedder("openai:e5", embedding=embedding)
    assert isinstance(embedder, OpenAIEmbedder)
    try:
        assert str(embedder._client.base_url) == "http://127.0.0.1:9/v1/"
        assert embedder._client.api_key == "k"
    finally:
        embedder.close()
