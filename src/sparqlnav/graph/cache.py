"""The stores folder as a cache: which stores it holds (source, size, age, whether still current), and clearing it."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparqlnav.graph.store import LoadError, read_store, remove_leftovers, store_key


@dataclass(frozen=True)
class CachedStore:
    """One store on disk and whether its source files still match it."""

    path: Path
    files: tuple[str, ...]
    triples: int
    size_bytes: int
    created: float
    status: str  # "current"; "stale": a source file changed or is gone; "damaged": meta.json unreadable

    @property
    def age_s(self) -> float:
        """Seconds since the store was built."""
        return max(0.0, time.time() - self.created)

    def to_json(self) -> dict[str, Any]:
        """A plain dict for `--json` output."""
        return {
            "path": str(self.path),
            "files": list(self.files),
            "triples": self.triples,
            "size_bytes": self.size_bytes,
            "age_s": round(self.age_s, 1),
            "status": self.status,
        }


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _status(path: Path, files: tuple[str, ...]) -> str:
    sources = [Path(f) for f in files]
    if not sources or not all(f.is_file() for f in sources):
        return "stale"
    return "current" if store_key(sources) == path.name else "stale"


def list_stores(stores_dir: Path) -> list[CachedStore]:
    """The built stores under `stores_dir`, oldest first (folders still being built are not listed)."""
    if not stores_dir.is_dir():
        return []
    found: list[CachedStore] = []
    for entry in stores_dir.iterdir():
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        meta = entry / "meta.json"  # written once, when the build finished
        created = (meta if meta.exists() else entry).stat().st_mtime
        try:
            info = read_store(entry)
        except LoadError:
            found.append(CachedStore(entry, (), 0, _size(entry), created, "damaged"))
            continue
        found.append(
            CachedStore(entry, info.files, info.triples, _size(entry), created, _status(entry, info.files))
        )
    return sorted(found, key=lambda s: s.created)


def clear_stores(stores_dir: Path, *, everything: bool = False) -> list[CachedStore]:
    """Remove stale and damaged stores and abandoned builds (with `everything`, every store); return those removed."""
    remove_leftovers(stores_dir)
    removed = [s for s in list_stores(stores_dir) if everything or s.status != "current"]
    for store in removed:
        shutil.rmtree(store.path, ignore_errors=True)
    return removed
