"""Build the benchmark's own SQLite databases (bench/databases/<name>.py, each with `build(path)`).

    .venv/bin/python bench/databases/build.py OUT_DIR [NAME ...]

Writes OUT_DIR/<name>.db for every module (or the ones named), deterministically; the data is ours, written
for sparqlnav's relational benchmarks (bench/datasets/relational/), so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """Every database module in this folder."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem not in ("build", "__init__"))


def builder(name: str) -> Callable[[Path], None]:
    """The `build(path)` function of one database module."""
    spec = importlib.util.spec_from_file_location(f"bench_db_{name}", HERE / f"{name}.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"no database module named {name!r} in {HERE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    build: Callable[[Path], None] = module.build
    return build


def build_database(name: str, out_dir: Path) -> Path:
    """Build one database into out_dir (replacing an older copy) and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.db"
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    builder(name)(path)
    return path


def main(argv: list[str] | None = None) -> int:
    """Build the databases named (all when none)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    for name in args.names or names():
        print(build_database(name, args.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
