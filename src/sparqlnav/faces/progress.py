"""What the CLI shows while long work runs (first loads, name indexes, `index`): a progress bar on a terminal
and one summary line when done; plain lines on a non-terminal only when asked (SPARQLNAV_PROGRESS=always), else nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from sparqlnav.graph.progress import Built, ProgressStep, Unit

REFRESH_S = 0.1  # a parser holding the interpreter may starve rich's own refresh thread: refresh from here too
PLAIN_EVERY_S = 5.0  # a line at most this often per task on a non-terminal


def human_size(n: float) -> str:
    """Bytes for people: 812 B, 1.6 MB, 2.3 GB."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def amount(n: float, unit: Unit) -> str:
    """A count in its unit: "12.4 MB", "120,000 triples"."""
    return human_size(n) if unit == "bytes" else f"{n:,.0f} {unit}"


class ConsoleReporter:
    """A `Reporter` for a console: a live bar (terminal) or occasional plain lines (asked for on a pipe)."""

    def __init__(self, console: Console, progress: Progress | None) -> None:
        self.console = console
        self.progress = progress
        self.task_id = progress.add_task("", total=None, detail="") if progress else None
        self.current = ""
        self.started = time.monotonic()
        self.last_shown = 0.0

    def step(self, step: ProgressStep) -> None:
        """Show where the task stands: how much of how much, and how fast."""
        now = time.monotonic()
        if step.task != self.current:
            self.current, self.started, self.last_shown = step.task, now, 0.0
        elapsed = now - self.started
        rate = f" · {amount(step.done / elapsed, step.unit)}/s" if elapsed > 0.5 and step.done else ""
        of = f" of {amount(step.total, step.unit)}" if step.total else ""
        detail = f"{amount(step.done, step.unit)}{of}{rate}"
        if self.progress is not None and self.task_id is not None:
            self.progress.update(self.task_id, description=step.task, completed=step.done, total=step.total, detail=detail)
            if now - self.last_shown >= REFRESH_S:
                self.progress.refresh()
                self.last_shown = now
        elif not self.last_shown or now - self.last_shown >= PLAIN_EVERY_S:
            self.console.print(f"{step.task}: {detail}", markup=False, highlight=False)
            self.last_shown = now

    def built(self, built: Built) -> None:
        """One summary line: what was made, how fast, where it is kept and how big it is."""
        made = ""
        if built.triples is not None:
            # A rate over a small file is mostly start-up time: it says nothing of the loader.
            per_s = f", {built.triples / built.seconds:,.0f} triples/s" if built.triples >= RATE_FROM and built.seconds > 0 else ""
            made = f"{built.triples:,} triples in {_seconds(built.seconds)}{per_s}; "
        else:
            made = f"done in {_seconds(built.seconds)}; "
        self.console.print(
            f"{built.what}: {made}kept in {built.path} ({human_size(built.size_bytes)})", markup=False, highlight=False
        )


@contextmanager
def reporting(console: Console, when: Literal["auto", "always", "never"]) -> Iterator[ConsoleReporter | None]:
    """A reporter for this console: live on a terminal, plain lines on a non-terminal when `always`, and None (the
    work reports nothing) with `never`, or on a non-terminal with `auto` (SPARQLNAV_PROGRESS)."""
    if when == "never" or (when == "auto" and not console.is_terminal):
        yield None
        return
    if not console.is_terminal:
        yield ConsoleReporter(console, None)
        return
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
        console=console, transient=True,
    ) as progress:  # fmt: skip
        yield ConsoleReporter(console, progress)


RATE_FROM = 10_000  # triples: below this a load's rate is not shown


def _seconds(seconds: float) -> str:
    """A duration as a person reads it: "0.05 s" for a short one (not "0.0 s"), "3.2 s" for a longer one."""
    return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"
