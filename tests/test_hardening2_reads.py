"""Hardening, round two (issue 29, item 8): the LLM client reads a response of bounded size. A real HTTP server on
127.0.0.1 answers a chat request with a body far larger than any reply (the red team sent 3 GB: 3.0 GB RSS in
10 s); the real client stops reading at its cap, says so in one line, and does not ask again."""

from __future__ import annotations

import resource
import socketserver
import threading
from collections.abc import Iterator

import pytest

from sparqlnav.llm import CallRecord, LLMClient, LLMConfig, LLMError, Message
from test_llm_waits import COMPLETION

BODY_BYTES = 256 * 1024 * 1024  # what the server offers: 256 MiB of one JSON string
CAP = 1024 * 1024


class HugeLLM:
    """A chat server whose answer declares and streams a body of BODY_BYTES, counting what it managed to send."""

    def __init__(self) -> None:
        self.requests = 0
        self.sent = 0
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                length = 0
                while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                self.rfile.read(length)
                owner.requests += 1
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {BODY_BYTES}\r\n\r\n"
                opening = b'{"id": "c1", "object": "chat.completion", "model": "m", "x": "'
                try:
                    self.wfile.write(head.encode() + opening)
                    chunk = b"a" * (1024 * 1024)
                    while owner.sent < BODY_BYTES:
                        self.wfile.write(chunk)
                        owner.sent += len(chunk)
                except OSError:
                    return  # the client stopped reading and closed the connection

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def huge() -> Iterator[HugeLLM]:
    server = HugeLLM()
    yield server
    server.close()


def _rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_an_llm_response_past_the_cap_is_cut_and_not_asked_again(huge: HugeLLM) -> None:
    config = LLMConfig.model_validate(
        {"model": "m", "base_url": huge.base_url, "api_key": "k", "retry_backoff_s": 0, "max_retries": 3,
         "max_response_bytes": CAP}
    )  # fmt: skip
    records: list[CallRecord] = []
    before = _rss_peak_mb()
    with LLMClient(config) as client, pytest.raises(LLMError) as info:
        client.chat([Message.user("Say hello.")], record=records.append)
    assert str(info.value).endswith(f"the response is larger than {CAP:,} bytes")
    assert huge.requests == 1 and [r.outcome for r in records] == ["unparseable"]
    assert huge.sent < BODY_BYTES  # the server could not hand over the whole body: the client stopped reading
    assert _rss_peak_mb() - before < 64  # the 256 MiB body was never held


def test_a_normal_reply_is_under_the_default_cap() -> None:
    assert len(COMPLETION) < LLMConfig(model="m").max_response_bytes == 16 * 1024 * 1024
