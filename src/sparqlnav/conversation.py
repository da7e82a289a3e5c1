"""Conversations: the turns a user has had with a knowledge graph, so a follow-up ("what is her email?",
"only those in France") is answered with what came before, and a bounded store that keeps them for the
server (in memory, least recently used first out, with an expiry; optionally on disk under the home)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sparqlnav.context import RunContext, Turn
from sparqlnav.errors import SparqlnavError
from sparqlnav.settings import (
    CONVERSATION_MAX_BYTES,
    CONVERSATION_MAX_PER_CLIENT,
    CONVERSATION_MAX_TURNS,
    Settings,
)

__all__ = [
    "CONTEXT_CHARS",
    "Conversation",
    "ConversationError",
    "ConversationNotFound",
    "ConversationRefused",
    "ConversationStore",
    "Conversations",
    "begun",
    "check_bounds",
    "dropped_note",
    "edit_turn",
]

CONTEXT_CHARS = 8_000  # earlier turns kept in a prompt (about 2,000 tokens); older ones give way
EDITED = "edited"  # the status of a turn that is the user's own edit of the query
_ID_CHARS = frozenset("0123456789abcdef")
_MAX_ID_CHARS = 64  # ids are 32 hex digits; a longer one is no id (and would be too long a file name)
MAX_TURNS = CONVERSATION_MAX_TURNS  # the bounds' defaults are the settings' (one owner)
MAX_BYTES = CONVERSATION_MAX_BYTES
MAX_PER_CLIENT = CONVERSATION_MAX_PER_CLIENT


def _size(turn: Turn) -> int:
    """The bytes a turn takes in the conversation's JSON (ASCII-escaped, as it is written)."""
    return len(json.dumps(asdict(turn)))


class ConversationError(SparqlnavError):
    """A conversation cannot be used as asked."""


class ConversationNotFound(ConversationError, KeyError):
    """No conversation has that id (never made, expired, or pushed out by newer ones)."""

    def __str__(self) -> str:
        return str(self.args[0])


class ConversationRefused(ConversationError, PermissionError):
    """The conversation belongs to another client."""


def edit_turn(sparql: str) -> Turn:
    """The turn a user's own edit of the query makes: the next question builds on the edited query."""
    return Turn(
        question="(the user edited the query)",
        sparql=sparql,
        results="(not run)",
        answer="The user edited the query to the one above; build on it.",
        status=EDITED,
    )


@dataclass
class Conversation:
    """The turns of one conversation, oldest first, with who started it and when it was last used."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    owner: str | None = None  # who may use it (a digest of the client's token), None when auth is off
    client: str | None = None  # who started it (the client's address, or its owner): bounds what one client keeps
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.time)
    turns: list[Turn] = field(default_factory=list)
    dropped: int = 0  # the oldest turns given up to stay within bounds; turn numbers count them, so they stay put

    @property
    def count(self) -> int:
        """Turns so far, dropped ones included: the number of the last one."""
        return self.dropped + len(self.turns)

    def add(self, turn: Turn) -> int:
        """Append a turn; its number (1-based, counting dropped turns)."""
        self.turns.append(turn)
        self.last_used = time.time()
        return self.count

    def trim(self, max_turns: int = MAX_TURNS, max_bytes: int = MAX_BYTES) -> int:
        """Drop the oldest turns until at most `max_turns` are left and they take at most `max_bytes` (the latest
        turn always stays); how many were dropped now."""
        sizes = [_size(t) for t in self.turns]
        total, cut = sum(sizes), 0
        while len(self.turns) - cut > 1 and (len(self.turns) - cut > max_turns or total > max_bytes):
            total -= sizes[cut]
            cut += 1
        if cut:
            del self.turns[:cut]
            self.dropped += cut
        return cut

    def edited(self, sparql: str) -> int:
        """Record the user's edit of the query as a turn; its number."""
        return self.add(edit_turn(sparql))

    def context(self, refine: int | None = None, max_chars: int = CONTEXT_CHARS) -> RunContext:
        """The context for the next question: the latest turns within `max_chars`; with `refine`, the turns up to
        that one, which the question refines. Raises ConversationError for a turn number it does not have."""
        turns = self.turns
        notes: tuple[str, ...] = ()
        if refine is not None:
            if not 1 <= refine <= self.count:
                raise ConversationError(f"no turn {refine} to refine: this conversation has {self.count} turn(s)")
            if refine <= self.dropped:
                raise ConversationError(
                    f"turn {refine} was dropped: this conversation keeps turns {self.dropped + 1}–{self.count}"
                )
            turns = turns[: refine - self.dropped]
            notes = ("The user refines the last turn above: start from its query.",)
        return RunContext(history=tuple(turns), notes=notes).within(max_chars)

    def to_json(self) -> dict[str, Any]:
        """The conversation as JSON (what is kept on disk)."""
        return {
            "id": self.id,
            "owner": self.owner,
            "client": self.client,
            "created": self.created,
            "last_used": self.last_used,
            "dropped": self.dropped,
            "turns": [asdict(t) for t in self.turns],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Conversation:
        """A conversation from its JSON."""
        return cls(
            id=str(data["id"]),
            owner=data.get("owner"),
            client=data.get("client"),
            created=float(data["created"]),
            last_used=float(data["last_used"]),
            turns=[Turn.from_json(t) for t in data.get("turns", [])],
            dropped=int(data.get("dropped", 0)),
        )


def dropped_note(conversation: Conversation, max_turns: int, max_bytes: int) -> str:
    """What a client is told when the conversation's oldest turns were dropped ('' when none were)."""
    if not conversation.dropped:
        return ""
    first = "turn 1 was" if conversation.dropped == 1 else f"turns 1–{conversation.dropped} were"
    return f"{first} dropped: a conversation keeps its latest {max_turns} turns within {max_bytes // 1024} KiB"


def check_bounds(max_count: int, ttl_s: float, max_turns: int, max_bytes: int, max_per_client: int = 1) -> None:
    """Refuse bounds no conversation store can keep (every store, in the process or shared, checks the same)."""
    if max_count < 1 or ttl_s <= 0 or max_turns < 1 or max_bytes < 1 or max_per_client < 1:
        raise ValueError(
            "a conversation store needs max_count, max_per_client, max_turns, max_bytes >= 1 and ttl_s > 0"
        )


def begun(owner: str | None, client: str | None, now: float) -> Conversation:
    """A new conversation, not kept yet: a store keeps it with its first turn, so a request that fails before it
    has one (a bad `refine`, a refused edit, a failed run) takes no place from anybody else's."""
    return Conversation(owner=owner, client=client or owner, created=now, last_used=now)


class Conversations(Protocol):
    """Where a server keeps its conversations: in the process (`ConversationStore`) or in a store every worker
    shares (`faces.redis_state.RedisConversations`); both bounded in count, age, turns and bytes."""

    max_turns: int
    max_bytes: int

    def __len__(self) -> int: ...

    def create(self, owner: str | None = None) -> Conversation:
        """A new, empty conversation, kept."""
        ...

    def begin(self, owner: str | None = None, client: str | None = None) -> Conversation:
        """A new conversation for `client`, kept only from its first turn on (`add_turn`)."""
        ...

    def get(self, ident: str, owner: str | None = None) -> Conversation:
        """The conversation called `ident`, if `owner` may use it (ConversationNotFound, ConversationRefused)."""
        ...

    def save(self, conversation: Conversation) -> None:
        """Keep the conversation, marking it as just used."""
        ...

    def add_turn(self, conversation: Conversation, turn: Turn) -> int:
        """Append a turn to a kept conversation and save it; the turn's number."""
        ...

    def note(self, conversation: Conversation) -> str:
        """What a client is told when the conversation's oldest turns were dropped ('' when none were)."""
        ...


class ConversationStore:
    """At most `max_count` conversations, each kept `ttl_s` after its last use; the least recently used goes
    first, and one client keeps at most `max_per_client` (its own least recently used go first, so one client
    cannot push out another's). Each keeps its latest `max_turns` turns within `max_bytes`. With `directory`, each is also written there
    as JSON (and read back after a restart); files follow the same bounds. Thread-safe."""

    def __init__(
        self,
        max_count: int = 1000,
        ttl_s: float = 86_400.0,
        directory: Path | None = None,
        clock: Callable[[], float] = time.time,
        *,
        max_turns: int = MAX_TURNS,
        max_bytes: int = MAX_BYTES,
        max_per_client: int = MAX_PER_CLIENT,
    ) -> None:
        check_bounds(max_count, ttl_s, max_turns, max_bytes, max_per_client)
        self.max_count = max_count
        self.max_per_client = max_per_client
        self.ttl_s = ttl_s
        self.max_turns = max_turns
        self.max_bytes = max_bytes
        self.directory = directory
        self.clock = clock
        self._items: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self._prune_files()

    @classmethod
    def from_settings(cls, settings: Settings) -> ConversationStore:
        """The store the settings describe (on disk under the home when SPARQLNAV_CONVERSATIONS=disk)."""
        part = settings.conversations
        directory = settings.paths.home / "conversations" if part.on_disk else None
        return cls(
            part.max_count, part.ttl_s, directory, max_turns=part.max_turns, max_bytes=part.max_bytes,
            max_per_client=part.max_per_client,
        )

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def create(self, owner: str | None = None) -> Conversation:
        """A new, empty conversation, kept."""
        now = self.clock()
        conversation = Conversation(owner=owner, created=now, last_used=now)
        self.save(conversation)
        return conversation

    def begin(self, owner: str | None = None, client: str | None = None) -> Conversation:
        """A new conversation for `client`, kept only from its first turn on (`add_turn`)."""
        return begun(owner, client, self.clock())

    def get(self, ident: str, owner: str | None = None) -> Conversation:
        """The conversation called `ident`, if `owner` may use it. Raises ConversationNotFound or
        ConversationRefused."""
        if len(ident) > _MAX_ID_CHARS:  # never one of ours; the message would repeat it all
            raise ConversationNotFound(f"no conversation {ident[:40]!r}… ({len(ident)} characters; ids have 32)")
        with self._lock:
            self._expire()
            conversation = self._items.get(ident) or self._load(ident)
            if conversation is None:
                raise ConversationNotFound(f"no conversation {ident!r} (it may have expired): start a new one")
            if conversation.owner != owner:
                raise ConversationRefused("this conversation belongs to another client")
            conversation.last_used = self.clock()
            self._items[ident] = conversation
            self._items.move_to_end(ident)
            self._bound()
            return conversation

    def save(self, conversation: Conversation) -> None:
        """Keep the conversation (after a new turn), marking it as just used."""
        with self._lock:
            conversation.last_used = self.clock()
            self._items[conversation.id] = conversation
            self._items.move_to_end(conversation.id)
            self._write(conversation)
            self._expire()
            self._bound(conversation)

    def add_turn(self, conversation: Conversation, turn: Turn) -> int:
        """Append a turn to a kept conversation and save it; the turn's number."""
        with self._lock:
            number = conversation.add(turn)
            conversation.trim(self.max_turns, self.max_bytes)
        self.save(conversation)
        return number

    def note(self, conversation: Conversation) -> str:
        """What a client is told when the conversation's oldest turns were dropped ('' when none were)."""
        return dropped_note(conversation, self.max_turns, self.max_bytes)

    def _expire(self) -> None:
        cutoff = self.clock() - self.ttl_s
        while self._items:
            ident, oldest = next(iter(self._items.items()))
            if oldest.last_used >= cutoff:
                break
            self._drop(ident)

    def _bound(self, saved: Conversation | None = None) -> None:
        if saved is not None and saved.client is not None:
            mine = [ident for ident, c in self._items.items() if c.client == saved.client]  # oldest first
            for ident in mine[: max(0, len(mine) - self.max_per_client)]:
                self._drop(ident)
        while len(self._items) > self.max_count:
            self._drop(next(iter(self._items)))

    def _drop(self, ident: str) -> None:
        del self._items[ident]
        if self.directory is not None:
            self._path(ident).unlink(missing_ok=True)

    def _path(self, ident: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{ident}.json"

    def _write(self, conversation: Conversation) -> None:
        if self.directory is None:
            return
        path = self._path(conversation.id)
        partial = path.with_suffix(".part")
        # ASCII-escaped: a lone surrogate from a graph's data is kept, where UTF-8 could not write it.
        partial.write_text(json.dumps(conversation.to_json()), encoding="utf-8")
        partial.replace(path)

    def _prune_files(self) -> None:
        """Files left by an earlier run follow the same bounds: expired ones go, then the oldest beyond the count."""
        assert self.directory is not None
        cutoff = self.clock() - self.ttl_s
        kept: list[tuple[float, Path]] = []
        for path in self.directory.glob("*.json"):
            try:
                mtime = path.stat().st_mtime
            except FileNotFoundError:
                continue
            if mtime < cutoff:
                path.unlink(missing_ok=True)
            else:
                kept.append((mtime, path))
        kept.sort(reverse=True)
        for _, path in kept[self.max_count :]:
            path.unlink(missing_ok=True)

    def _load(self, ident: str) -> Conversation | None:
        """A conversation kept on disk by an earlier run of the server, unless it has expired."""
        if self.directory is None or not ident or len(ident) > _MAX_ID_CHARS or not set(ident) <= _ID_CHARS:
            return None  # ids are short hex: nothing else may reach the file system
        path = self._path(ident)
        try:
            conversation = Conversation.from_json(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # a damaged file is as good as gone
            return None
        if conversation.last_used < self.clock() - self.ttl_s:
            path.unlink(missing_ok=True)
            return None
        conversation.trim(self.max_turns, self.max_bytes)  # the bounds may have been lowered since it was written
        return conversation
