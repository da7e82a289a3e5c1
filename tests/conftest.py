"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scripted_llm import ScriptedLLM


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A real OpenAI-compatible server on 127.0.0.1 replaying a script (see tests/scripted_llm.py)."""
    with ScriptedLLM() as server:
        yield server


# -- graph fixtures (foundation) -------------------------------------------------------------
import os  # noqa: E402
from pathlib import Path  # noqa: E402

from sparqlnav.graph.kg import KnowledgeGraph  # noqa: E402
from sparqlnav.graph.opening import open_kg  # noqa: E402
from sparqlnav.settings import Settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


DATA_MISSING = (
    "benchmark data not found at ../shared/data (or $SPARQLNAV_DATA): put CK25 (github.com/eccenca/ck25-dataset) "
    "and the other sets the README's Development section lists there"
)


def shared_data() -> Path | None:
    """../shared/data or $SPARQLNAV_DATA, when present."""
    path = Path(os.environ.get("SPARQLNAV_DATA") or REPO.parent / "shared" / "data")
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """Third-party benchmark data (tests needing it skip when it is absent)."""
    path = shared_data()
    if path is None:
        pytest.skip(DATA_MISSING)
    return path


@pytest.fixture(scope="session")
def sn_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private sparqlnav home for the whole test session (stores and indexes are built once)."""
    return tmp_path_factory.mktemp("sparqlnav-home")


@pytest.fixture(scope="session")
def settings(sn_home: Path) -> Settings:
    """Settings pointing at the session's home."""
    return Settings.from_env({"SPARQLNAV_HOME": str(sn_home)})


@pytest.fixture(scope="session")
def ck25(data_dir: Path, settings: Settings) -> Iterator[KnowledgeGraph]:
    """The CK25 corporate KG in a real local Oxigraph store."""
    with open_kg(str(data_dir / "ck25" / "prod-inst.ttl"), settings) as graph:
        yield graph


@pytest.fixture(scope="session")
def demo(settings: Settings) -> Iterator[KnowledgeGraph]:
    """The bundled demo KG."""
    with open_kg("demo", settings) as graph:
        yield graph


@pytest.fixture(scope="session", autouse=True)
def _kept_engines_end_with_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Local engines are kept running between processes for their idle period (graph/keeper); the session's own end
    with it, so a run of the suite leaves no engine behind."""
    yield
    from sparqlnav.graph.keeper import stop_kept

    stop_kept(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def text2sparql_client() -> Path:
    """The TEXT2SPARQL challenge's own client (`text2sparql`), installed by ./scripts/test in a venv of its own
    (.venv-tools): it pins fastapi and uvicorn to old versions, which must not decide what the tests run on."""
    exe = Path(os.environ.get("SPARQLNAV_TEXT2SPARQL_CLIENT") or REPO / ".venv-tools" / "bin" / "text2sparql")
    if exe.is_file():
        return exe
    why = f"the TEXT2SPARQL client is not installed at {exe} (./scripts/test installs it)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(why)
    pytest.skip(why)
