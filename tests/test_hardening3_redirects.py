"""Hardening, round three (issue 39, items 8 and 9): redirects stay within the origin a client was given.

Item 8: the LLM client followed a 307 to another host and posted the whole prompt there (7,674 bytes). Item 9: an
endpoint's redirect to another port of the same host was followed, with `SPARQLNAV_HEADERS` (`X-Api-Key`) sent
along, and https → http was allowed by the code. Two real HTTP servers on loopback, one redirecting to the other:
the second receives nothing, unless a setting allows its origin."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from sparqlnav.graph.endpoint import HttpOptions, Outcome, RemoteEndpoint
from sparqlnav.llm import CallRecord, LLMClient, LLMConfig, LLMError, Message
from sparqlnav.redirects import OffOrigin, OriginGuard
from sparqlnav.settings import ConfigError, Settings
from test_llm_waits import COMPLETION

ROWS = {"head": {"vars": ["v"]}, "results": {"bindings": [{"v": {"type": "literal", "value": "here"}}]}}
PROMPT = "Which river flows through the city? " * 200  # about 7.4 KB, as the red team's 7,674 bytes


class _Server(ThreadingHTTPServer):
    """A server on 127.0.0.x that records what reaches it: (method, path, headers, body bytes)."""

    daemon_threads = True

    def __init__(self, host: str, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__((host, 0), handler)
        self.seen: list[tuple[str, str, dict[str, str], int]] = []
        self.redirect_to = ""  # where /moved sends a request (a 307 keeps its method and body)

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://{self.server_address[0]}:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    """Records each request; /moved… answers 307 to the server's `redirect_to`, anything else answers 200."""

    server: _Server
    answer: ClassVar[bytes] = json.dumps(ROWS).encode()
    content_type: ClassVar[str] = "application/sparql-results+json"

    def _any(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, len(body)))
        if self.path.startswith("/moved"):
            self.send_response(307)
            self.send_header("Location", self.server.redirect_to + self.path.removeprefix("/moved"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    do_GET = do_POST = _any

    def log_message(self, *_: Any) -> None:
        """Quiet."""


class _Chat(_Handler):
    answer = COMPLETION
    content_type = "application/json"


@pytest.fixture
def serve() -> Iterator[Callable[..., _Server]]:
    started: list[_Server] = []

    def start(handler: type[BaseHTTPRequestHandler] = _Handler, host: str = "127.0.0.1") -> _Server:
        import threading

        server = _Server(host, handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


# -- item 8: the LLM client ------------------------------------------------------------------------------------------


def _llm(base_url: str) -> LLMConfig:
    return LLMConfig.model_validate(
        {"model": "m", "base_url": base_url, "api_key": "k", "retry_backoff_s": 0, "max_retries": 3}
    )


@pytest.mark.parametrize("other_host", ["127.0.0.2", "127.0.0.1"])  # another host; the same host on another port
def test_the_llm_client_follows_no_redirect_to_another_origin(serve: Callable[..., _Server], other_host: str) -> None:
    elsewhere = serve(_Chat, other_host)
    moving = serve(_Chat)
    moving.redirect_to = elsewhere.url
    records: list[CallRecord] = []
    with LLMClient(_llm(moving.url + "/moved/v1")) as client, pytest.raises(LLMError) as info:
        client.chat([Message.user(PROMPT)], record=records.append)
    assert elsewhere.seen == []  # not one byte of the prompt went there
    assert len(moving.seen) == 1 and moving.seen[0][3] > len(PROMPT)  # asked once, and not again
    message = str(info.value)
    assert "\n" not in message and message.endswith(
        f"the LLM server redirected to another origin ({elsewhere.url}); only redirects within {moving.url} are "
        "followed"
    ), message
    assert [r.outcome for r in records] == ["unreachable"]


def test_the_llm_client_follows_a_redirect_within_its_origin(serve: Callable[..., _Server]) -> None:
    server = serve(_Chat)
    server.redirect_to = server.url
    with LLMClient(_llm(server.url + "/moved/v1")) as client:
        reply = client.chat([Message.user("Say hello.")])
    assert reply.text == json.loads(COMPLETION)["choices"][0]["message"]["content"]
    assert [(m, p) for m, p, _, _ in server.seen] == [("POST", "/moved/v1/chat/completions"), ("POST", "/v1/chat/completions")]


# -- item 9: endpoints -----------------------------------------------------------------------------------------------


def test_an_endpoint_follows_no_redirect_to_another_port_of_its_host(serve: Callable[..., _Server]) -> None:
    other_port = serve()
    moving = serve()
    moving.redirect_to = other_port.url
    secret = HttpOptions(headers={"X-Api-Key": "s3cret"}, retries=0)
    with RemoteEndpoint(moving.url + "/moved/sparql", http=secret) as endpoint:
        refused = endpoint.query("SELECT ?v WHERE { ?s ?p ?v }")
    assert refused.outcome is Outcome.UNREACHABLE and "\n" not in refused.message
    assert refused.message == (
        f"the endpoint redirected to another origin ({other_port.url}); only redirects within {moving.url} are "
        "followed (SPARQLNAV_ALLOWED_REDIRECTS allows others)"
    )
    assert other_port.seen == []  # neither the query nor the key
    assert moving.seen[0][2]["x-api-key"] == "s3cret"  # the endpoint itself got its header


def test_a_redirect_to_an_allowed_origin_is_followed(serve: Callable[..., _Server], tmp_path: Path) -> None:
    mirror = serve()
    moving = serve()
    moving.redirect_to = mirror.url
    settings = Settings.from_env(
        {"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_ALLOWED_REDIRECTS": mirror.url, "SPARQLNAV_HEADERS": "X-Api-Key: k1"}
    )
    assert settings.remote.allowed_redirects == (mirror.url,)
    with RemoteEndpoint(moving.url + "/moved/sparql", http=settings.remote.http()) as endpoint:
        followed = endpoint.query("SELECT ?v WHERE { ?s ?p ?v }")
    assert followed.outcome is Outcome.OK and followed.table is not None
    assert followed.table.rows[0]["v"].value == "here"
    assert [(p.split("?")[0], h["x-api-key"]) for _, p, h, _ in mirror.seen] == [("/sparql", "k1")]
    with pytest.raises(ConfigError, match="SPARQLNAV_ALLOWED_REDIRECTS"):
        Settings.from_env({"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_ALLOWED_REDIRECTS": "ftp://mirror.example"})


@pytest.mark.parametrize(
    ("target", "allowed"),
    [
        ("https://data.example/sparql2", True),  # the same origin
        ("https://data.example:443/x", True),  # the default port written out
        ("https://DATA.example/x", True),  # host names are not case-sensitive
        ("https://data.example:8443/x", False),  # another port
        ("http://data.example/sparql", False),  # https -> http, allowed below or not
        ("http://mirror.example/sparql", False),
        ("https://mirror.example/sparql", True),  # allowed
        ("https://other.example/sparql", False),
        ("ftp://data.example/sparql", False),
    ],
)
def test_origins_are_compared_whole_and_https_is_never_left(target: str, allowed: bool) -> None:
    guard = OriginGuard("https://data.example/sparql", ["https://mirror.example", "http://mirror.example"])
    request = httpx.Request("GET", target)
    if allowed:
        guard(request)
    else:
        with pytest.raises(OffOrigin):
            guard(request)
    if target.startswith("http://"):
        with pytest.raises(OffOrigin, match="a redirect never leaves https"):
            guard(request)
