"""Hardening of the HTTP face and the guard, as a red-team run broke them (issue 15): Host names answered
without a token (DNS rebinding), wrong-token guessing, spoofed X-Forwarded-For, and queries nested deep
enough to crash the engine. Real uvicorn on loopback, real HTTP clients, the real Oxigraph process."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import test_serve
from sparqlnav.faces.http import AUTH_FAILURES_PER_MINUTE, ServeConfig, background, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import ConfigError, Settings
from sparqlnav.sparql.guard import (
    MAX_CLAUSES,
    MAX_NESTING,
    Refused,
    check_nesting,
    check_query,
)
from test_serve import EX, MANAGER_OF_ALICE

tiny_path = test_serve.tiny_path  # the shared small graph (fixtures)
tiny = test_serve.tiny

MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def app_with(settings: Settings, tiny: KnowledgeGraph, **config: Any) -> Any:
    """A server over the small graph with the given options."""
    return create_app(settings, ServeConfig(**config), kgs={"tiny": tiny})


def client_at(url: str, source: str = "127.0.0.1") -> httpx.Client:
    """An HTTP client whose connections come from `source` (any 127.0.0.0/8 address is this machine)."""
    return httpx.Client(base_url=url, timeout=30, transport=httpx.HTTPTransport(local_address=source))


def nested_optionals(depth: int) -> str:
    """A valid query whose group patterns nest `depth` deep (the WHERE group included)."""
    inner = depth - 1
    return (
        f"PREFIX ex: <{EX}> SELECT ?m WHERE {{ ex:alice ex:manager ?m "
        + "OPTIONAL{?m ?p ?o " * inner
        + "}" * inner
        + " }"
    )


def nested_groups(depth: int) -> str:
    """A valid, cheap query whose group patterns nest `depth` deep."""
    return f"PREFIX ex: <{EX}> SELECT ?m WHERE " + "{" * depth + " ex:alice ex:manager ?m " + "}" * depth


# -- item 6: DNS rebinding -----------------------------------------------------------------------


def test_without_a_token_only_loopback_and_configured_host_names_are_answered(
    settings: Settings, tiny: KnowledgeGraph
) -> None:
    app = app_with(settings, tiny, allowed_hosts=("kg.example.org",))
    with background(app) as url, client_at(url) as client:
        port = url.rsplit(":", 1)[1]
        evil = {"Host": "attacker.example"}
        for path in ("/api/info", "/api/search?q=Alice", "/health", "/", "/static/index.html", "/docs"):
            r = client.get(path, headers=evil)
            assert r.status_code == 421, path
            assert "attacker.example" in r.json()["detail"] and "SPARQLNAV_ALLOWED_HOSTS" in r.json()["detail"]
        assert client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}, headers=evil).status_code == 421
        assert client.post("/mcp", json=MCP_INIT, headers={**MCP_HEADERS, **evil}).status_code == 421
        # A name that merely starts like an allowed one is not that name.
        assert client.get("/api/info", headers={"Host": "kg.example.org.attacker.example"}).status_code == 421

        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LOCALHOST.", f"kg.example.org:{port}"):
            assert client.get("/api/info", headers={"Host": host}).json()["default_kg"] == "tiny", host
        ok = client.post("/api/sparql", json={"query": MANAGER_OF_ALICE}, headers={"Host": "kg.example.org"})
        assert ok.json()["results"]["results"]["bindings"][0]["m"]["value"] == EX + "bob"
        # MCP's own Host check knows the configured name too.
        init = client.post("/mcp", json=MCP_INIT, headers={**MCP_HEADERS, "Host": "kg.example.org"})
        assert init.status_code == 200 and "mcp-session-id" in init.headers

    # With a token the token protects the server, whatever name a client uses.
    with background(app_with(settings, tiny, token="s3cret", mcp=False)) as url, client_at(url) as client:
        r = client.get("/api/info", headers={"Host": "public.example", "Authorization": "Bearer s3cret"})
        assert r.status_code == 200 and r.json()["default_kg"] == "tiny"


# -- item 8: wrong tokens and forwarded addresses ----------------------------------------------------


def test_wrong_tokens_are_limited_per_client(settings: Settings, tiny: KnowledgeGraph) -> None:
    burst = int(AUTH_FAILURES_PER_MINUTE)
    with background(app_with(settings, tiny, token="s3cret", mcp=False)) as url:
        with client_at(url) as guesser:
            codes = [guesser.get("/api/info", headers={"Authorization": f"Bearer guess{i}"}).status_code for i in range(burst + 5)]
            assert codes == [401] * burst + [429] * 5
            locked = guesser.get("/api/info", headers={"Authorization": "Bearer s3cret"})
            # Not even the right token is compared while the client is locked out.
            assert locked.status_code == 429 and "wrong tokens" in locked.json()["detail"]
            assert 1 <= int(locked.headers["retry-after"]) <= 60 / AUTH_FAILURES_PER_MINUTE
            assert guesser.get("/health").status_code == 200  # only the protected routes
        with client_at(url, "127.0.0.2") as other:
            assert other.get("/api/info", headers={"Authorization": "Bearer s3cret"}).status_code == 200
            assert other.get("/api/info", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_forwarded_for_is_believed_only_from_trusted_proxies(settings: Settings, tiny: KnowledgeGraph) -> None:
    def spoofed(client: httpx.Client, n: int, start: int = 1) -> list[int]:
        return [
            client.get("/api/info", headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code
            for i in range(start, start + n)
        ]

    with background(app_with(settings, tiny, rate_limit=3, mcp=False)) as url, client_at(url) as client:
        # No trusted proxy: a new X-Forwarded-For per request does not make a new client.
        assert spoofed(client, 5) == [200, 200, 200, 429, 429]

    app = app_with(settings, tiny, rate_limit=3, mcp=False, trusted_proxies=("127.0.0.1",))
    with background(app) as url:
        with client_at(url) as proxy:
            assert spoofed(proxy, 5) == [200] * 5  # five clients behind the proxy, one request each
            same = [proxy.get("/api/info", headers={"X-Forwarded-For": "198.51.100.7, 203.0.113.9"}).status_code for _ in range(4)]
            assert same == [200, 200, 200, 429]  # the hop the proxy appended (rightmost) is the client
        with client_at(url, "127.0.0.2") as untrusted:
            assert spoofed(untrusted, 5, start=50) == [200, 200, 200, 429, 429]


def test_proxies_and_host_names_come_from_the_settings() -> None:
    s = Settings.from_env(
        {"SPARQLNAV_TRUSTED_PROXIES": "10.0.0.0/8 127.0.0.1", "SPARQLNAV_ALLOWED_HOSTS": "kg.example.org other.example"}
    )
    config = ServeConfig.from_settings(s)
    assert config.trusted_proxies == ("10.0.0.0/8", "127.0.0.1")
    assert config.allowed_hosts == ("kg.example.org", "other.example")
    with pytest.raises(ConfigError, match=r"^SPARQLNAV_TRUSTED_PROXIES='proxy\.internal': .*not an IP address"):
        Settings.from_env({"SPARQLNAV_TRUSTED_PROXIES": "proxy.internal"})


# -- item 7: nesting depth ---------------------------------------------------------------------------


def test_deep_nesting_is_refused_before_the_engine_sees_it(settings: Settings, tiny: KnowledgeGraph) -> None:
    server = tiny.endpoint.server  # type: ignore[attr-defined]
    with background(app_with(settings, tiny, mcp=False)) as url, client_at(url) as client:
        client.post("/api/sparql", json={"query": MANAGER_OF_ALICE})  # the engine is up
        generation, restarts = server.generation, server.restarts
        bomb = nested_optionals(4000)  # the red team's query: 4,000 nested OPTIONALs, 76 KB
        assert len(bomb) < ServeConfig().max_query_chars
        r = client.post("/api/sparql", json={"query": bomb})
        assert r.status_code == 400 and r.json()["outcome"] == "refused"
        assert f"more than {MAX_NESTING} deep" in r.json()["detail"]
        assert (server.generation, server.restarts) == (generation, restarts)  # the engine never saw it

        at_limit = client.post("/api/sparql", json={"query": nested_groups(MAX_NESTING)})
        assert at_limit.status_code == 200
        assert at_limit.json()["results"]["results"]["bindings"][0]["m"]["value"] == EX + "bob"
        assert client.post("/api/sparql", json={"query": nested_groups(MAX_NESTING + 1)}).status_code == 400


def test_flat_chains_that_crash_the_engine_are_refused_before_it_sees_them(
    settings: Settings, tiny: KnowledgeGraph
) -> None:
    server = tiny.endpoint.server  # type: ignore[attr-defined]
    minus = "SELECT * WHERE { ?s ?p ?o " + " ".join("MINUS{?s ?q ?o}" for _ in range(3000)) + " }"
    plus = "SELECT (" + " + ".join("1" for _ in range(8000)) + " AS ?x) WHERE {}"
    with background(app_with(settings, tiny, mcp=False)) as url, client_at(url) as client:
        client.post("/api/sparql", json={"query": MANAGER_OF_ALICE})  # the engine is up
        generation, restarts = server.generation, server.restarts
        for bomb in (minus, plus):
            assert len(bomb) < ServeConfig().max_query_chars  # the size limit lets both through
            r = client.post("/api/sparql", json={"query": bomb})
            assert r.status_code == 400 and r.json()["outcome"] == "refused"
            assert f"more than {MAX_CLAUSES:,} clauses" in r.json()["detail"]
        assert (server.generation, server.restarts) == (generation, restarts)  # the engine never saw them
        # Within the budget (one clause each: the WHERE group, each branch's group and its triple pattern) it runs.
        branches = (MAX_CLAUSES - 1) // 2
        at_limit = "SELECT * WHERE { " + " UNION ".join("{ ?s ?p ?o }" for _ in range(branches)) + " }"
        assert client.post("/api/sparql", json={"query": at_limit}).status_code == 200
    # The projected item, one clause per `+` and the WHERE group: n - 1 terms make n clauses.
    check_query("SELECT (" + " + ".join("1" for _ in range(MAX_CLAUSES - 1)) + " AS ?x) WHERE {}", [])
    with pytest.raises(Refused, match=f"more than {MAX_CLAUSES:,} clauses"):
        check_query("SELECT (" + " + ".join("1" for _ in range(MAX_CLAUSES)) + " AS ?x) WHERE {}", [])


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("SELECT * WHERE { FILTER(" + "(" * 65 + "1" + ")" * 65 + ") }", True),
        ("SELECT * WHERE { ?s ?p " + "[ ?p " * 64 + "1" + " ]" * 64 + " }", True),
        # Brackets in strings, IRIs and comments are not structure.
        ('SELECT * WHERE { ?s ?p "' + "{" * 500 + '" }', False),
        ("SELECT * WHERE { ?s ?p <http://e/" + "(" * 500 + "> }", False),
        ("SELECT * WHERE { ?s ?p ?o } #" + "{" * 500, False),
        # Depth, not count: many groups side by side are fine.
        ("SELECT * WHERE { " + "{ ?s ?p ?o } UNION " * 300 + "{ ?s ?p ?o } }", False),
    ],
)
def test_nesting_counts_brackets_outside_strings_iris_and_comments(query: str, refused: bool) -> None:
    if refused:
        with pytest.raises(Refused, match=f"nests brackets more than {MAX_NESTING} deep"):
            check_query(query, [])
    else:
        check_nesting(query)
        assert check_query(query, []) == "SELECT"
