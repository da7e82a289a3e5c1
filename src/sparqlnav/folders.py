"""The files a folder holds, never a file outside it.

A folder given to sparqlnav (`--docs`, `--examples`, `--kg`) is trusted to be the user's choice, but its contents are
not: a symlink in it may point anywhere (`docs/passwd.txt -> /etc/passwd`). So a file whose real path lies outside
the folder is skipped and reported. A symlink that resolves inside the folder is followed (it is read under its own
name); symlinked folders are never descended into (one pointing inside is read where it really is, one pointing
outside is skipped and reported). A path named outright (a file given on the command line) is the user's word and is
followed wherever it leads.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Outside:
    """An entry under a folder the user gave that was skipped because it leads outside that folder."""

    path: Path  # as found under the folder
    folder: Path  # the folder as the user gave it
    is_dir: bool = False

    @property
    def name(self) -> str:
        """The entry's path relative to its folder (a folder ends with `/`)."""
        return self.path.relative_to(self.folder).as_posix() + ("/" if self.is_dir else "")

    def to_json(self) -> dict[str, Any]:
        """Plain data: the entry as found, its folder, and why it was skipped."""
        return {"path": str(self.path), "folder": str(self.folder), "why": "a symlink outside the folder"}


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop resolves nowhere
        return False


def files_under(
    folder: Path, wanted: Callable[[Path], bool], outside: list[Outside] | None = None
) -> list[Path]:
    """The files under `folder` (recursively, sorted) that `wanted` accepts and that really lie inside it; symlinks
    leading out of it are skipped and appended to `outside`."""
    root = folder.resolve()
    found: list[Path] = []
    skipped: list[Outside] = []
    # os.walk with followlinks=False lists a symlinked folder among the folders but never enters it.
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        for name in dirnames:
            sub = here / name
            if sub.is_symlink() and not _inside(sub, root):
                skipped.append(Outside(sub, folder, is_dir=True))
        for name in filenames:
            path = here / name
            if not wanted(path):
                continue
            if path.is_symlink() and not _inside(path, root):
                skipped.append(Outside(path, folder))
            elif path.is_file():
                found.append(path)
    if outside is not None:
        outside.extend(sorted(skipped, key=lambda o: o.path))
    return sorted(found)


def describe_outside(outside: Iterable[Outside]) -> list[str]:
    """One line per folder for a summary: "skipped 1 file outside docs/ (a symlink): passwd.txt"."""
    by_folder: dict[Path, list[Outside]] = {}
    for entry in outside:
        by_folder.setdefault(entry.folder, []).append(entry)
    lines = []
    for folder, entries in by_folder.items():
        dirs = sum(e.is_dir for e in entries)
        noun = "folder" if dirs == len(entries) else "file" if not dirs else "entry"
        if len(entries) > 1:
            noun = "entries" if noun == "entry" else noun + "s"
        links = "a symlink" if len(entries) == 1 else "symlinks"
        names = ", ".join(e.name for e in entries)
        lines.append(f"skipped {len(entries)} {noun} outside {folder.as_posix().rstrip('/')}/ ({links}): {names}")
    return lines


__all__ = ["Outside", "describe_outside", "files_under"]


def make_private(path: Path) -> None:
    """Create `path` if needed and leave it to its owner alone (0700, whatever the umask): everything sparqlnav keeps
    under its home (stores copied from a 0600 database, engine logs, indexes, conversations) is then out of other
    local users' reach, whatever the modes of the files inside. A folder of another user is left as it is."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        if path.stat().st_uid == os.getuid():
            os.chmod(path, 0o700)
