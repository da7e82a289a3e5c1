"""How long work on a graph reports what it is doing (files read, the name index built, names downloaded) to
whoever asked, without printing: the library calls a `Reporter` it is given; faces decide what to show."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

Unit = Literal["bytes", "triples", "names", "items"]


@dataclass(frozen=True)
class ProgressStep:
    """Where a piece of work stands: `done` of `total` (None: not known in advance) `unit`s."""

    task: str
    done: int
    total: int | None
    unit: Unit


@dataclass(frozen=True)
class Built:
    """What a finished piece of work left on disk: a store (or a name index) and its size."""

    what: str  # e.g. "store of demo.ttl", "names of https://…"
    path: Path
    size_bytes: int
    triples: int | None
    seconds: float


class Reporter(Protocol):
    """Receives progress and the final summary of long work."""

    def step(self, step: ProgressStep) -> None:
        """Progress of the current task."""

    def built(self, built: Built) -> None:
        """The work is done; what it left and where."""


def folder_size(path: Path) -> int:
    """Bytes of the files under `path` (0 when it is gone)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue  # removed meanwhile: it no longer counts
    return total


class CountingReader(io.RawIOBase):
    """A binary file that reports how many bytes the parser has read from it so far."""

    def __init__(self, raw: io.BufferedReader, report: Callable[[int], None]) -> None:
        super().__init__()
        self.raw = raw
        self.report = report
        self.count = 0

    def readable(self) -> bool:
        """Always: it is a reader."""
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Read like the file, then report the running count."""
        n = self.raw.readinto(buffer) or 0
        self.count += n
        self.report(self.count)
        return n
