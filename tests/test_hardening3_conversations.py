"""Issue 39, item 7: failing requests must not push other people's conversations out. `/api/ask` used to keep a new
conversation before it checked `refine`, so a burst of requests answered 422 evicted a victim's conversation (404 on
its follow-up); one client could also fill the whole store with conversations of its own. Now a new conversation is
kept with its first turn, and one client keeps at most `max_per_client` (its own oldest go first) — in the process
and in Redis alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import test_serve
from private_redis import PrivateRedis
from sparqlnav.context import Turn
from sparqlnav.conversation import ConversationNotFound, Conversations, ConversationStore
from sparqlnav.faces.redis_state import RedisState
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import Settings
from test_serve import app_for

tiny_path = test_serve.tiny_path  # the shared small graph (fixtures)
tiny = test_serve.tiny
QUESTION = "Who is the manager of Alice Wunderlich?"


def bounded(settings: Settings, **env: str) -> Settings:
    """The session's settings with other conversation bounds."""
    return Settings.from_env({"SPARQLNAV_HOME": str(settings.paths.home), **env})


def ask(client: TestClient, *, source: str = "10.0.0.1", **body: object) -> tuple[int, dict[str, object]]:
    r = client.post("/api/ask", json={"question": QUESTION, "strategy": "lexical", **body},
                    headers={"X-Forwarded-For": source})  # fmt: skip
    return r.status_code, r.json()


def test_refused_requests_keep_nothing_and_evict_no_one(settings: Settings, tiny: KnowledgeGraph) -> None:
    app = app_for(bounded(settings, SPARQLNAV_CONVERSATIONS_MAX="5"), tiny, trusted_proxies=("127.0.0.1",))
    with TestClient(app, client=("127.0.0.1", 50000)) as client:
        status, victim = ask(client, source="10.0.0.9")
        assert status == 200, victim
        store = app.state.service.conversations
        assert len(store) == 1
        # the reproduction: a burst of new-conversation requests with a turn to refine that cannot exist
        for _ in range(40):
            status, body = ask(client, source="10.0.0.66", refine=7)
            assert status == 422 and "no turn 7 to refine" in str(body["detail"]), body
        assert len(store) == 1  # on main: 5, the victim's among the evicted
        status, follow = ask(client, source="10.0.0.9", conversation=victim["conversation"])
        assert status == 200 and follow["conversation"] == victim["conversation"] and follow["turn"] == 2


def test_one_client_cannot_push_out_another_clients_conversation(settings: Settings, tiny: KnowledgeGraph) -> None:
    env = {"SPARQLNAV_CONVERSATIONS_MAX": "6", "SPARQLNAV_CONVERSATIONS_PER_CLIENT": "3"}
    app = app_for(bounded(settings, **env), tiny, trusted_proxies=("127.0.0.1",))
    with TestClient(app, client=("127.0.0.1", 50000)) as client:
        status, victim = ask(client, source="10.0.0.9")
        assert status == 200
        started = [ask(client, source="10.0.0.66")[1]["conversation"] for _ in range(10)]
        store = app.state.service.conversations
        assert len(store) == 4  # the victim's and the other client's latest three
        for gone in started[:7]:
            assert ask(client, source="10.0.0.66", conversation=gone)[0] == 404
        assert ask(client, source="10.0.0.66", conversation=started[-1])[0] == 200
        status, follow = ask(client, source="10.0.0.9", conversation=victim["conversation"])
        assert status == 200 and follow["turn"] == 2


def _keep(store: Conversations, client: str) -> str:
    talk = store.begin(None, client)
    store.add_turn(talk, Turn(question="q", sparql="", results="", answer="a", status="answered"))
    return talk.id


def _bounds_hold(store: Conversations) -> None:
    begun = store.begin(None, "10.0.0.66")
    assert len(store) == 0  # begun, not kept
    with pytest.raises(ConversationNotFound):
        store.get(begun.id)
    victim = _keep(store, "10.0.0.9")
    mine = [_keep(store, "10.0.0.66") for _ in range(5)]
    assert len(store) == 3  # the victim's and the other client's latest two
    assert store.get(victim).id == victim
    for gone in mine[:3]:
        with pytest.raises(ConversationNotFound):
            store.get(gone)
    assert [store.get(kept).id for kept in mine[3:]] == mine[3:]


def test_the_in_process_store_bounds_each_client() -> None:
    _bounds_hold(ConversationStore(max_count=10, ttl_s=60, max_per_client=2))


@pytest.fixture(scope="module")
def redis_server() -> Iterator[PrivateRedis]:
    with PrivateRedis() as server:
        yield server


@pytest.mark.slow
def test_the_redis_store_bounds_each_client(redis_server: PrivateRedis, settings: Settings) -> None:
    state = RedisState.connect(redis_server.url(5))
    try:
        state._client.flushdb()
        store = state.conversations(
            bounded(settings, SPARQLNAV_CONVERSATIONS_MAX="10", SPARQLNAV_CONVERSATIONS_PER_CLIENT="2")
        )
        _bounds_hold(store)
    finally:
        state.close()
