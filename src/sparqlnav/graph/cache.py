"""The stores folder as a cache: which stores it holds (source, size, age, whether still current), and clearing it.

Only folders sparqlnav made (`made_by_sparqlnav`: the marker, or an older store's meta.json) are stores; anything
else in the folder is left alone and said so, and nothing is removed through a symlink.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.relational import stored_status
from sparqlnav.graph.store import (
    STORE_MARKER,
    LoadError,
    made_by_sparqlnav,
    read_store,
    remove_leftovers,
    store_damage,
    store_key,
)


class StoresFolderError(SparqlnavError):
    """The stores folder cannot be cleared as asked (it is a symlink: nothing is removed through one)."""


@dataclass(frozen=True)
class CachedStore:
    """One store on disk and whether its source files still match it."""

    path: Path
    files: tuple[str, ...]
    triples: int
    size_bytes: int
    created: float
    status: str  # "current"; "stale": a source file (or SQLite database) changed or is gone; "damaged": meta.json or
    # database unreadable. A PostgreSQL database's store is "current" (the latest built; checked when next opened)
    problem: str | None = None  # what is damaged

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
            **({"problem": self.problem} if self.problem else {}),
        }


@dataclass(frozen=True)
class LeftAlone:
    """An entry of the stores folder that is not a store sparqlnav made, so it is never removed."""

    path: Path
    why: str

    def to_json(self) -> dict[str, Any]:
        """A plain dict for `--json` output."""
        return {"path": str(self.path), "why": self.why}


@dataclass
class StoresFolder:
    """What the stores folder holds: stores, and entries left alone."""

    stores: list[CachedStore] = field(default_factory=list)
    left_alone: list[LeftAlone] = field(default_factory=list)


def _size(path: Path) -> int:
    # Symlinks inside are not followed: their targets are not the store's bytes.
    return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_symlink() and f.is_file())


def _status(path: Path, files: tuple[str, ...]) -> str:
    from_database = stored_status(files[0], path.name) if len(files) == 1 else None
    if from_database is not None:
        return from_database
    sources = [Path(f) for f in files]
    if not sources or not all(f.is_file() for f in sources):
        return "stale"
    return "current" if store_key(sources) == path.name else "stale"


def survey(stores_dir: Path) -> StoresFolder:
    """The built stores under `stores_dir`, oldest first, and the entries that are no stores of ours (folders still
    being built, and other names starting with a dot, are neither)."""
    found = StoresFolder()
    if not stores_dir.is_dir():
        return found
    for entry in sorted(stores_dir.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_symlink():
            found.left_alone.append(LeftAlone(entry, "a symlink"))
            continue
        if not made_by_sparqlnav(entry):
            found.left_alone.append(LeftAlone(entry, f"no {STORE_MARKER} marker"))
            continue
        meta = entry / "meta.json"  # written once, when the build finished
        created = (meta if meta.exists() else entry).stat().st_mtime
        problem = store_damage(entry)
        try:
            info = read_store(entry)
        except LoadError:
            found.stores.append(CachedStore(entry, (), 0, _size(entry), created, "damaged", problem))
            continue
        status = "damaged" if problem else _status(entry, info.files)
        found.stores.append(CachedStore(entry, info.files, info.triples, _size(entry), created, status, problem))
    found.stores.sort(key=lambda s: s.created)
    return found


def list_stores(stores_dir: Path) -> list[CachedStore]:
    """The built stores under `stores_dir`, oldest first (folders still being built are not listed)."""
    return survey(stores_dir).stores


def clear_stores(stores_dir: Path, *, everything: bool = False) -> StoresFolder:
    """Remove stale and damaged stores and abandoned builds (with `everything`, every store); return those removed
    and the entries left alone. Raises StoresFolderError when `stores_dir` is a symlink."""
    if stores_dir.is_symlink():
        raise StoresFolderError(
            f"{stores_dir} is a symlink (to {stores_dir.resolve()}): sparqlnav removes nothing through one; "
            "point SPARQLNAV_HOME at a real folder there instead"
        )
    left: list[tuple[Path, str]] = []
    remove_leftovers(stores_dir, left)
    found = survey(stores_dir)
    result = StoresFolder(left_alone=[*(LeftAlone(p, why) for p, why in left), *found.left_alone])
    for store in found.stores:
        if everything or store.status != "current":
            shutil.rmtree(store.path, ignore_errors=True)  # rmtree refuses a symlink and follows none inside
            result.stores.append(store)
    return result
