"""The server's state in Redis (redis-py), shared by every worker behind one port: conversations (a JSON value each,
expiring `ttl_s` after its last use, the least recently used dropped beyond the count), token buckets per client
(rate limit, wrong tokens) and the run slots. Each read-modify-write is one Lua script or one WATCHed
transaction, so workers never lose each other's updates; the scripts read Redis's own clock, since workers' clocks
need not agree. Keys start with `sparqlnav:`; two deployments on one Redis use two databases (redis://host/1)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

import redis

from sparqlnav.context import Turn
from sparqlnav.conversation import (
    _MAX_ID_CHARS,
    MAX_BYTES,
    MAX_PER_CLIENT,
    MAX_TURNS,
    Conversation,
    ConversationNotFound,
    ConversationRefused,
    Conversations,
    begun,
    check_bounds,
    dropped_note,
)
from sparqlnav.faces.state import Limiter, Slots, StateUnavailable
from sparqlnav.settings import Settings

__all__ = ["RedisConversations", "RedisLimiter", "RedisSlots", "RedisState"]

PREFIX = "sparqlnav:"
# Short: the rate limit is checked on the event loop, so a Redis that does not answer must fail fast (a 503), not
# hold every request of the worker behind it.
CONNECT_TIMEOUT_S = 2.0
SOCKET_TIMEOUT_S = 5.0

# A token bucket: refill by the time passed since the last visit, take one if there is one. Returns the wait in
# seconds as a string (Redis turns Lua numbers into integers). ARGV: rate per second, capacity, 1 to take.
_BUCKET = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate, cap, take = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(v[1]) or cap
local ts = tonumber(v[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens < 1 then
  wait = (1 - tokens) / rate
elseif take == 1 then
  tokens = tokens - 1
end
if take == 1 then
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil(cap / rate * 1000) + 1000)
end
return tostring(wait)
"""

# Run slots: a sorted set of tickets scored by when they are taken back (a dead worker's never come back).
# ARGV: size, hold seconds, ticket. Returns 1 when the ticket holds a slot.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
return 1
"""

_IN_USE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""


def _unavailable(exc: redis.RedisError) -> StateUnavailable:
    return StateUnavailable(f"the shared state store (Redis) failed: {' '.join(str(exc).split())[:200]}")


class RedisLimiter:
    """Token buckets per client in Redis: every worker takes from the same bucket."""

    def __init__(self, client: redis.Redis, name: str, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, per_minute)
        self._key = f"{PREFIX}bucket:{name}:"
        self._script = client.register_script(_BUCKET)

    def _run(self, client: str, take: bool) -> float:
        try:
            wait = self._script(keys=[self._key + client], args=[self.rate, self.capacity, 1 if take else 0])
        except redis.RedisError as exc:
            raise _unavailable(exc) from None
        return float(wait)

    def wait(self, client: str) -> float:
        """The seconds until `client` may go ahead (0: now), taking nothing."""
        return self._run(client, take=False)

    def take(self, client: str) -> float:
        """0 when the request may go ahead, else the seconds to wait."""
        return self._run(client, take=True)


class RedisSlots:
    """Run slots counted in Redis across workers; a ticket not released within `hold_s` is taken back."""

    def __init__(self, client: redis.Redis, size: int, hold_s: float) -> None:
        self.size = size
        self.hold_s = hold_s
        self._client = client
        self._key = f"{PREFIX}slots"
        self._acquire = client.register_script(_ACQUIRE)
        self._in_use = client.register_script(_IN_USE)

    def acquire(self) -> str | None:
        """A ticket, or None when `size` tickets are held by all workers together."""
        ticket = uuid.uuid4().hex
        try:
            held = self._acquire(keys=[self._key], args=[self.size, self.hold_s, ticket])
        except redis.RedisError as exc:
            raise _unavailable(exc) from None
        return ticket if int(held) == 1 else None

    def release(self, ticket: str) -> None:
        """Give the ticket's slot back."""
        try:
            self._client.zrem(self._key, ticket)
        except redis.RedisError as exc:
            raise _unavailable(exc) from None

    def in_use(self) -> int:
        """Tickets held now, by all workers."""
        try:
            return int(self._in_use(keys=[self._key]))
        except redis.RedisError as exc:
            raise _unavailable(exc) from None


class RedisConversations:
    """Conversations as JSON values in Redis, with the in-process store's bounds: `max_count` (least recently used
    out first), `max_per_client` (a client's own least recently used out first), `ttl_s` after the last use (Redis
    expires the value), `max_turns` turns within `max_bytes`."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        max_count: int = 1000,
        ttl_s: float = 86_400.0,
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
        self._client = client
        self._recent = f"{PREFIX}conversations"  # id -> last use, for the count bound

    def _key(self, ident: str) -> str:
        return f"{PREFIX}conversation:{ident}"

    def _client_key(self, client: str) -> str:
        # hashed: an address or owner digest of any length becomes a short, safe key
        return f"{PREFIX}client-conversations:{hashlib.sha256(client.encode()).hexdigest()[:32]}"

    def __len__(self) -> int:
        try:
            return int(self._client.zcount(self._recent, time.time() - self.ttl_s, "+inf"))
        except redis.RedisError as exc:
            raise _unavailable(exc) from None

    def create(self, owner: str | None = None) -> Conversation:
        """A new, empty conversation, kept."""
        now = time.time()
        conversation = Conversation(owner=owner, created=now, last_used=now)
        self.save(conversation)
        return conversation

    def begin(self, owner: str | None = None, client: str | None = None) -> Conversation:
        """A new conversation for `client`, kept only from its first turn on (`add_turn`)."""
        return begun(owner, client, time.time())

    def get(self, ident: str, owner: str | None = None) -> Conversation:
        """The conversation called `ident`, if `owner` may use it."""
        if len(ident) > _MAX_ID_CHARS:
            raise ConversationNotFound(f"no conversation {ident[:40]!r}… ({len(ident)} characters; ids have 32)")
        try:
            raw = self._client.get(self._key(ident))
        except redis.RedisError as exc:
            raise _unavailable(exc) from None
        if raw is None:
            raise ConversationNotFound(f"no conversation {ident!r} (it may have expired): start a new one")
        conversation = Conversation.from_json(json.loads(raw))
        if conversation.owner != owner:
            raise ConversationRefused("this conversation belongs to another client")
        conversation.trim(self.max_turns, self.max_bytes)  # the bounds may have been lowered since it was written
        self.save(conversation)  # a use: its expiry and its place in the count start again
        return conversation

    def save(self, conversation: Conversation) -> None:
        """Keep the conversation, marking it as just used."""
        conversation.last_used = time.time()
        try:
            with self._client.pipeline() as pipe:
                self._write(pipe, conversation)
                pipe.execute()
            self._bound(conversation)
        except redis.RedisError as exc:
            raise _unavailable(exc) from None

    def add_turn(self, conversation: Conversation, turn: Turn) -> int:
        """Append a turn to the conversation as it is stored now (another worker may have added one since this
        copy was read) and save it; the turn's number. `conversation` is updated to what was stored."""
        key = self._key(conversation.id)
        number = 0

        def append(pipe: Any) -> None:
            nonlocal number
            raw = pipe.get(key)
            current = Conversation.from_json(json.loads(raw) if raw is not None else conversation.to_json())
            number = current.add(turn)
            current.trim(self.max_turns, self.max_bytes)
            current.last_used = time.time()
            pipe.multi()
            self._write(pipe, current)
            conversation.turns, conversation.dropped = current.turns, current.dropped
            conversation.last_used = current.last_used

        try:
            self._client.transaction(append, key)
            self._bound(conversation)
        except redis.RedisError as exc:
            raise _unavailable(exc) from None
        return number

    def note(self, conversation: Conversation) -> str:
        """What a client is told when the conversation's oldest turns were dropped ('' when none were)."""
        return dropped_note(conversation, self.max_turns, self.max_bytes)

    def _write(self, pipe: Any, conversation: Conversation) -> None:
        # ASCII-escaped JSON, as on disk: a lone surrogate from a graph's data survives.
        pipe.set(self._key(conversation.id), json.dumps(conversation.to_json()), px=int(self.ttl_s * 1000))
        pipe.zadd(self._recent, {conversation.id: conversation.last_used})
        if conversation.client is not None:
            mine = self._client_key(conversation.client)
            pipe.zadd(mine, {conversation.id: conversation.last_used})
            pipe.pexpire(mine, int(self.ttl_s * 1000))

    def _bound(self, saved: Conversation | None = None) -> None:
        """Forget expired ids, drop the saving client's least recently used beyond its bound, and the least recently
        used beyond the count."""
        cutoff = time.time() - self.ttl_s
        if saved is not None and saved.client is not None:
            mine = self._client_key(saved.client)
            self._client.zremrangebyscore(mine, "-inf", cutoff)
            extra = int(self._client.zcard(mine)) - self.max_per_client
            if extra > 0:
                own: list[tuple[bytes, float]] = self._client.zpopmin(mine, extra)  # type: ignore[assignment]
                if own:
                    self._client.zrem(self._recent, *(ident for ident, _ in own))
                    self._client.delete(*(self._key(ident.decode()) for ident, _ in own))
        self._client.zremrangebyscore(self._recent, "-inf", cutoff)
        extra = int(self._client.zcard(self._recent)) - self.max_count
        if extra > 0:
            popped: list[tuple[bytes, float]] = self._client.zpopmin(self._recent, extra)  # type: ignore[assignment]
            if popped:
                self._client.delete(*(self._key(ident.decode()) for ident, _ in popped))


class RedisState:
    """Conversations, token buckets and run slots in one Redis, shared by every worker."""

    shared = True

    def __init__(self, client: redis.Redis, description: str) -> None:
        self._client = client
        self.description = description

    @classmethod
    def connect(cls, url: str) -> RedisState:
        """Connect to the Redis at `url` and check that it answers (StateUnavailable in one line otherwise)."""
        client = redis.Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S, health_check_interval=30
        )
        kwargs = client.connection_pool.connection_kwargs
        where = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
        state = cls(client, f"redis at {where}, db {kwargs.get('db', 0)}")
        try:
            state.ping()
        except StateUnavailable as exc:
            client.close()
            raise StateUnavailable(f"SPARQLNAV_STATE_URL: cannot use {state.description}: {exc}") from None
        return state

    def conversations(self, settings: Settings) -> Conversations:
        """The conversations, bounded as the settings say (SPARQLNAV_CONVERSATIONS=disk does not apply)."""
        part = settings.conversations
        return RedisConversations(
            self._client, max_count=part.max_count, ttl_s=part.ttl_s, max_turns=part.max_turns,
            max_bytes=part.max_bytes, max_per_client=part.max_per_client,
        )

    def limiter(self, name: str, per_minute: float) -> Limiter:
        """Token buckets called `name`, shared by every worker."""
        return RedisLimiter(self._client, name, per_minute)

    def slots(self, size: int, hold_s: float) -> Slots:
        """`size` slots for all workers together."""
        return RedisSlots(self._client, size, hold_s)

    def ping(self) -> None:
        """Raise StateUnavailable when Redis does not answer."""
        try:
            self._client.ping()
        except redis.RedisError as exc:
            raise _unavailable(exc) from None

    def close(self) -> None:
        """Close the connections."""
        self._client.close()
