"""One ordered record of everything a run did, delivered live to listeners and saved as JSONL."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

EventKind = Literal[
    "thought",
    "action",
    "observation",
    "llm_call",
    "sparql",
    "sql",  # one SQL statement run on a database (the build strategy's SQL target)
    "feedback",
    "rollback",
    "answer",
    "info",
    "error",
    "context",  # what a run was given before it started: earlier turns, a cascade's handover
    "escalate",  # a cascade moved on to a stronger strategy, and why
    "check",  # a cascade's check of a cheap answer before keeping it: verdict and reason
    "evidence",  # one item of evidence a hybrid run gathered: kind, ref, text
]
Listener = Callable[["Event"], None]


@dataclass(frozen=True)
class Event:
    """One step of a run: what kind, when (seconds since the run began), and its data."""

    kind: EventKind
    seq: int
    t: float
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


@dataclass
class Usage:
    """What a run cost: LLM calls and tokens, SPARQL and SQL queries, time, money."""

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    sparql_queries: int = 0
    sql_queries: int = 0
    seconds: float = 0.0
    cost_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


@dataclass
class Trace:
    """Events in order; listeners are called as each event happens (the CLI, SSE, the UI)."""

    events: list[Event] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    listeners: list[Listener] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def emit(self, kind: EventKind, **data: Any) -> Event:
        """Record an event and tell every listener."""
        with self._lock:
            event = Event(kind, len(self.events), round(time.monotonic() - self.started, 4), data)
            self.events.append(event)
            if kind == "sparql":
                self.usage.sparql_queries += 1
            elif kind == "sql":
                self.usage.sql_queries += 1
            elif kind == "llm_call" and data.get("served", True):
                # Requests the LLM server answered; timeouts and cache hits are events but cost nothing.
                self.usage.llm_calls += 1
                self.usage.input_tokens += int(data.get("input_tokens", 0) or 0)
                self.usage.output_tokens += int(data.get("output_tokens", 0) or 0)
                self.usage.cost_usd += float(data.get("cost_usd", 0.0) or 0.0)
        for listener in list(self.listeners):
            listener(event)
        return event

    def subscribe(self, listener: Listener) -> None:
        """Call `listener` for every later event."""
        self.listeners.append(listener)

    def finish(self) -> Usage:
        """Stamp the total time and return the usage."""
        self.usage.seconds = round(time.monotonic() - self.started, 4)
        return self.usage

    def __iter__(self) -> Iterator[Event]:
        return iter(list(self.events))

    def __len__(self) -> int:
        return len(self.events)

    def of_kind(self, kind: EventKind) -> list[Event]:
        """Events of one kind, in order."""
        return [e for e in self.events if e.kind == kind]

    def to_json(self) -> list[dict[str, Any]]:
        """Events as plain data."""
        return [e.to_json() for e in self.events]

    def save(self, path: Path) -> None:
        """Write the events as JSON lines."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for e in self.events:
                fh.write(json.dumps(e.to_json(), ensure_ascii=False, default=str) + "\n")

    @classmethod
    def load(cls, path: Path) -> Trace:
        """Read a saved trace (for replay and inspection)."""
        trace = cls()
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                trace.events.append(Event(d["kind"], d["seq"], d["t"], d["data"]))
        return trace
