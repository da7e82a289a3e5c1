"""Issue 39, item 10 (in part): what is shown must not carry what a client or a URL put there. A request path with
`%0a` forged a log line and `ESC[2J` reached the terminal through text-format logs; an endpoint's password
(`http://user:secret@…`) appeared in `/api/info`, log lines, error messages and the engine launcher's arguments
(visible to anyone in `ps`)."""

from __future__ import annotations

import io
import logging

import httpx
from fastapi.testclient import TestClient

import test_hardening2_guard
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.faces.logs import ReadableFormatter, printable
from sparqlnav.faces.service import kg_name
from sparqlnav.graph.endpoint import RemoteEndpoint
from sparqlnav.graph.netjail import jail_command
from sparqlnav.settings import Settings
from sparqlnav.urls import shown_url

bare_engine = test_hardening2_guard.bare_engine  # a fixture: a plain Oxigraph endpoint over HTTP
SECRET = "s3cr3t-pw"
DEAD = f"http://alice:{SECRET}@127.0.0.1:9/sparql?apikey={SECRET}&x=1"  # port 9 (discard): nothing answers


def test_a_request_path_cannot_forge_a_log_line_or_reach_the_terminal(settings: Settings) -> None:
    app = create_app(settings, ServeConfig(strategy="lexical"), kgs={})
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setFormatter(ReadableFormatter())
    logger = logging.getLogger("sparqlnav.faces.http")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with background(app) as url:
            forged = "/api/x%0a12:00:00%20info%20%20%20%20request%20forged=yes%1b[2J%E2%80%AE"
            httpx.get(url + forged, timeout=10)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    text = captured.getvalue()
    lines = [line for line in text.splitlines() if "/api/x" in line or "forged" in line]
    assert len(lines) == 1, text  # before: the path's newline made a second, forged line
    assert "\x1b" not in text and "\u202e" not in text
    assert "path=/api/x\\n12:00:00 info    request forged=yes\\x1b[2J\\u202e" in lines[0]


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    assert printable("a\nb\rc\x1b[2Jd\u202ee\x00") == "a\\nb\\rc\\x1b[2Jd\\u202ee\\x00"
    assert printable("Düsseldorf – 東京") == "Düsseldorf – 東京"


def test_urls_are_shown_without_their_passwords() -> None:
    assert shown_url(DEAD) == "http://alice@127.0.0.1:9/sparql?apikey=%E2%80%A6&x=1"
    assert shown_url("https://example.org/sparql") == "https://example.org/sparql"
    assert SECRET not in kg_name(DEAD)
    argv = jail_command(["oxigraph", "serve"], port=7000, allowed=[DEAD], memory_bytes=None, socket_path="/tmp/x/e.sock")
    assert not any(SECRET in arg for arg in argv)  # before: the whole URL, readable by anyone in `ps`
    assert "http://alice@127.0.0.1:9/sparql?apikey=%E2%80%A6&x=1" in argv


def test_an_unreachable_endpoints_message_has_no_password() -> None:
    with RemoteEndpoint(DEAD) as endpoint:
        outcome = endpoint.query("SELECT * WHERE { ?s ?p ?o } LIMIT 1", timeout_s=3)
    assert not outcome.ok and "cannot reach http://alice@127.0.0.1:9/sparql" in outcome.message
    assert SECRET not in outcome.message and SECRET not in endpoint.name


def test_an_endpoint_password_stays_out_of_info_and_logs(settings: Settings, bare_engine: str) -> None:
    """A real endpoint behind a URL with credentials (Oxigraph ignores them): served, described, logged."""
    spec = bare_engine.replace("http://", f"http://alice:{SECRET}@")
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setFormatter(ReadableFormatter())
    logger = logging.getLogger("sparqlnav")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        app = create_app(settings, ServeConfig(kgs={kg_name(spec): spec}, strategy="lexical",
                                               allowed_hosts=("testserver",)))  # fmt: skip
        with TestClient(app) as client:
            info = client.get("/api/info")
            ran = client.post("/api/sparql", json={"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"})
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert info.status_code == 200 and ran.status_code == 200, ran.text
    assert info.json()["kgs"][0]["name"] == bare_engine.replace("http://", "http://alice@")
    assert "SPARQL endpoint http://alice@127.0.0.1" in info.json()["kgs"][0]["description"]
    assert SECRET not in info.text and SECRET not in ran.text
    assert "kg opened" in captured.getvalue() and SECRET not in captured.getvalue()
