"""Issue 38, item 1: the locks stay in step with pyproject.toml. `./scripts/test` installs requirements/dev.lock and
then the package with --no-deps, and the quickstart installs under requirements/app.lock: a dependency added to
pyproject without `./scripts/lock` would be missing (or held outside its range) on every fresh machine, while the
developer's own venv still has it. Each requirement of the package (and of its dev extra, for dev.lock) must be
pinned exactly in the lock, at a version inside pyproject's range, and the two locks must agree where they meet."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def pins(lock: Path) -> dict[str, str]:
    """The lock's exact pins, by canonical name."""
    found = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{lock.name}: not an exact pin: {line!r}"
        found[canonicalize_name(name.split("[")[0])] = version.split(";")[0].strip()
    return found


def unmet(requirements: list[str], pinned: dict[str, str]) -> list[str]:
    """The requirements (for Python 3.11 on Linux) that `pinned` lacks or pins outside their range."""
    env = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}  # fmt: skip
    missing = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        version = pinned.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            missing.append(f"{text} (locked: {version})")
    return missing


def project() -> dict[str, list[str]]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {"main": data["dependencies"], "dev": data["optional-dependencies"]["dev"]}


def test_the_dev_lock_pins_every_requirement_inside_its_range() -> None:
    reqs = project()
    dev = pins(REPO / "requirements" / "dev.lock")
    assert len(dev) > 50  # the dependencies' dependencies too
    assert unmet(reqs["main"] + reqs["dev"], dev) == []


def test_the_app_lock_pins_the_package_at_the_dev_locks_versions() -> None:
    app = pins(REPO / "requirements" / "app.lock")
    dev = pins(REPO / "requirements" / "dev.lock")
    assert unmet(project()["main"], app) == []
    assert {name: (v, dev.get(name)) for name, v in app.items() if dev.get(name) != v} == {}


def test_a_requirement_outside_the_lock_is_seen() -> None:
    dev = pins(REPO / "requirements" / "dev.lock")
    assert unmet(["uvicorn>=0.30"], dev) == []
    assert unmet([f"uvicorn>{dev['uvicorn']}"], dev) == [f"uvicorn>{dev['uvicorn']} (locked: {dev['uvicorn']})"]
    assert unmet(["a-package-nobody-locked>=1"], dev) == ["a-package-nobody-locked>=1 (locked: None)"]
