"""Hardening, round three (issue 39, item 4): a response's size is counted after content decoding. The red team's
1.46 MB gzip body decoded to gigabytes (5.05 GB RSS in one LLM request), as the cap counted wire bytes. A real HTTP
server on 127.0.0.1 serves a gzip bomb — about 260 KB on the wire, 256 MiB decoded — to the real LLM client, to a
SPARQL endpoint's client and to a bare guarded transport; each stops at its cap, holding no more than a cap's worth."""

from __future__ import annotations

import json
import resource
import socketserver
import threading
import zlib
from collections.abc import Callable, Iterator

import httpx
import pytest

from sparqlnav.graph.endpoint import HttpOptions, Limits, Outcome, RemoteEndpoint
from sparqlnav.graph.wikidata import MAX_RESPONSE_BYTES, WikidataNames
from sparqlnav.llm import CallRecord, LLMClient, LLMConfig, LLMError, Message
from sparqlnav.retrieval.embed import MAX_EMBED_REPLY_BYTES, EmbedderUnavailable, OpenAIEmbedder
from sparqlnav.transport import DECODE_PIECE, guarded_transport
from test_llm_waits import COMPLETION

DECODED_BYTES = 256 * 1024 * 1024
CAP = 1024 * 1024
LLM_OPENING = b'{"id": "c1", "object": "chat.completion", "model": "m", "x": "'
RESULTS_OPENING = b'{"head": {"vars": ["v"]}, "results": {"bindings": [{"v": {"type": "literal", "value": "'


def _compressed(opening: bytes, wbits: int) -> bytes:
    """`opening` and DECODED_BYTES of `a`, compressed (gzip for wbits 31, zlib 15, raw deflate -15)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = b"a" * (1024 * 1024)
    parts = [packer.compress(opening)]
    parts += [packer.compress(block) for _ in range(DECODED_BYTES // len(block))]
    return b"".join([*parts, packer.compress(b'"}'), packer.flush()])


class Bomb:
    """An HTTP server answering every request with a gzip-encoded body (200, JSON), counting requests and bytes."""

    def __init__(self, body: bytes, content_type: str = "application/json", encoding: str = "gzip") -> None:
        self.requests = 0
        self.sent = 0
        self.accepted: list[str] = []  # each request's Accept-Encoding
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                length = 0
                while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                    if name.strip().lower() == "accept-encoding":
                        owner.accepted.append(value.strip())
                self.rfile.read(length)
                owner.requests += 1
                head = (
                    f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Encoding: {encoding}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                )
                try:
                    self.wfile.write(head.encode())
                    for at in range(0, len(body), 16384):
                        self.wfile.write(body[at : at + 16384])
                        owner.sent += len(body[at : at + 16384])
                except OSError:
                    return  # the client stopped reading and closed the connection

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def llm_bomb() -> bytes:
    return _compressed(LLM_OPENING, 31)


@pytest.fixture
def serve() -> Iterator[Callable[..., Bomb]]:
    started: list[Bomb] = []

    def start(body: bytes, content_type: str = "application/json", encoding: str = "gzip") -> Bomb:
        server = Bomb(body, content_type, encoding)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def _rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_the_bomb_is_small_on_the_wire(llm_bomb: bytes) -> None:
    assert len(llm_bomb) < 300 * 1024 < CAP  # the wire cap alone lets it through


def test_an_llm_reply_is_capped_after_decoding(serve: Callable[..., Bomb], llm_bomb: bytes) -> None:
    server = serve(llm_bomb)
    config = LLMConfig.model_validate(
        {"model": "m", "base_url": server.url + "/v1", "api_key": "k", "retry_backoff_s": 0, "max_retries": 3,
         "max_response_bytes": CAP}
    )  # fmt: skip
    records: list[CallRecord] = []
    with LLMClient(config) as client, pytest.raises(LLMError) as info:
        before = _rss_peak_mb()  # the client made (and the SDK imported) first
        client.chat([Message.user("Say hello.")], record=records.append)
    assert str(info.value).endswith(f"the response is larger than {CAP:,} bytes once decoded"), str(info.value)
    assert server.requests == 1 and [r.outcome for r in records] == ["unparseable"]  # not asked again
    assert _rss_peak_mb() - before < 32  # the 256 MiB it decodes to were never held


def test_the_transport_stops_decoding_at_the_cap(serve: Callable[..., Bomb], llm_bomb: bytes) -> None:
    server = serve(llm_bomb)
    pieces: list[int] = []
    with (
        httpx.Client(transport=guarded_transport(max_response_bytes=CAP)) as client,
        client.stream("GET", server.url) as response,
        pytest.raises(httpx.ReadError, match="once decoded"),
    ):
        assert "content-encoding" not in response.headers  # decoded here: nothing decodes it again
        for piece in response.iter_bytes():
            pieces.append(len(piece))
    assert CAP - DECODE_PIECE < sum(pieces) <= CAP  # what was handed over: the cap's worth, no more
    assert max(pieces) <= DECODE_PIECE


@pytest.mark.parametrize(("encoding", "wbits"), [("gzip", 31), ("deflate", 15), ("deflate", -15)])
def test_ordinary_encoded_replies_arrive_whole(serve: Callable[..., Bomb], encoding: str, wbits: int) -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    server = serve(packer.compress(COMPLETION) + packer.flush(), encoding=encoding)
    with httpx.Client(transport=guarded_transport(max_response_bytes=CAP)) as client:
        assert client.get(server.url).json() == json.loads(COMPLETION)
    config = LLMConfig.model_validate({"model": "m", "base_url": server.url + "/v1", "api_key": "k"})
    with LLMClient(config) as llm:
        assert llm.chat([Message.user("Say hello.")]).text == json.loads(COMPLETION)["choices"][0]["message"]["content"]


def test_an_encoding_nothing_can_bound_is_refused(serve: Callable[..., Bomb]) -> None:
    server = serve(b"\x00" * 64, encoding="br")
    with httpx.Client(transport=guarded_transport()) as client, pytest.raises(httpx.DecodingError, match="'br'"):
        client.get(server.url, headers={"Accept-Encoding": "br"})
    assert server.accepted == ["gzip, deflate"]  # what is asked for is what can be read, whatever the caller said


def test_endpoint_results_are_capped_after_decoding(serve: Callable[..., Bomb]) -> None:
    server = serve(_compressed(RESULTS_OPENING, 31), content_type="application/sparql-results+json")
    with RemoteEndpoint(server.url + "/sparql", limits=Limits(max_bytes=CAP), http=HttpOptions(retries=0)) as ep:
        before = _rss_peak_mb()
        result = ep.query("SELECT ?v WHERE { ?s ?p ?v }")
    assert result.outcome is Outcome.CUT and result.table is not None and result.table.truncated, result.describe()
    assert server.requests == 1
    assert _rss_peak_mb() - before < 32  # decoded a piece at a time, up to the byte cap


def test_the_wikibase_name_service_is_capped_after_decoding(serve: Callable[..., Bomb]) -> None:
    # 16 MiB decoded at most, where 256 MiB were offered; the error says so, and nothing was held.
    server = serve(_compressed(b'{"search": [{"id": "', 31))
    names = WikidataNames(server.url + "/w/api.php")
    before = _rss_peak_mb()
    try:
        with pytest.raises(httpx.ReadError, match=f"larger than {MAX_RESPONSE_BYTES:,} bytes once decoded"):
            names.search("Paris")
    finally:
        names.close()
    assert _rss_peak_mb() - before < 64


def test_the_embedding_client_is_capped_after_decoding(serve: Callable[..., Bomb]) -> None:
    # 64 MiB decoded at most per reply (MAX_EMBED_REPLY_BYTES), where 256 MiB were offered.
    server = serve(_compressed(b'{"object": "list", "data": [{"x": "', 31))
    embedder = OpenAIEmbedder("m", base_url=server.url + "/v1", api_key="k")
    before = _rss_peak_mb()
    try:
        with pytest.raises(EmbedderUnavailable, match="embedding server failed"):
            embedder.embed(["a text"])
    finally:
        embedder.close()
    assert 1 <= server.requests <= 3  # the SDK's own retries, each cut at the cap
    assert _rss_peak_mb() - before < MAX_EMBED_REPLY_BYTES / 1024 / 1024 + 64
