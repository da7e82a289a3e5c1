"""Issue 38, item 4: an installed wheel works like a clone. The wheel is built from this checkout, installed (not
editable) with the lock's versions into a fresh venv outside the repository, and then, from another folder:
`sparqlnav --version` prints the version, the quickstart question is answered from the bundled demo graph, and
`serve` serves the web UI with its assets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sparqlnav.version import __version__
from test_hardening_runs import free_port

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a fresh venv: pip installs every locked package


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, **env})  # fmt: skip
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv holding the wheel of this checkout and the lock's versions."""
    root = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"),
         str(REPO)], cwd=root)  # fmt: skip
    wheels = list((root / "dist").glob("sparqlnav-*.whl"))
    assert len(wheels) == 1, wheels
    run([sys.executable, "-m", "venv", str(root / "venv")], cwd=root)
    pip = root / "venv" / "bin" / "pip"
    run([str(pip), "install", "-q", "--disable-pip-version-check", "-c", str(REPO / "requirements" / "app.lock"),
         str(wheels[0])], cwd=root)  # fmt: skip
    return root / "venv" / "bin"


def test_the_wheel_prints_its_version_and_answers_the_quickstart(installed: Path, tmp_path: Path) -> None:
    home = {"SPARQLNAV_HOME": str(tmp_path / "home")}
    version = run([str(installed / "sparqlnav"), "--version"], cwd=tmp_path, **home)
    assert version.stdout.strip() == f"sparqlnav {__version__}"
    asked = run([str(installed / "sparqlnav"), "ask", "Who discovered oxygen?"], cwd=tmp_path, **home)
    assert "Joseph Priestley and Carl Wilhelm Scheele" in asked.stdout
    # the package came from the wheel, not from this checkout
    where = run([str(installed / "python"), "-c", "import sparqlnav; print(sparqlnav.__file__)"], cwd=tmp_path)
    assert str(REPO) not in where.stdout and "site-packages" in where.stdout


def test_the_wheel_serves_the_ui_with_its_assets(installed: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "SPARQLNAV_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([str(installed / "sparqlnav"), "serve", "--port", str(port)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        page = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                page = httpx.get(base + "/", timeout=5)
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        assert page is not None and page.status_code == 200, proc.stderr.read() if proc.poll() is not None else ""
        assert "<html" in page.text.lower()
        for asset in ("/static/app.js", "/static/style.css", "/static/sparql.js", "/static/favicon.svg"):
            assert asset in page.text
            got = httpx.get(base + asset, timeout=10)
            assert got.status_code == 200 and len(got.content) > 100, asset
    finally:
        proc.terminate()
        proc.wait(timeout=30)
