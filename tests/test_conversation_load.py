"""Conversation memory stays bounded: 1,000 clients each start a conversation over HTTP on loopback (real
uvicorn, the real lexical strategy over a real Oxigraph store); the server keeps only its bound of them, and its
resident memory grows by little."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import httpx
import pytest

import test_serve
from sparqlnav.faces.http import ServeConfig, background, create_app
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.settings import Settings

tiny_path = test_serve.tiny_path  # the shared small graph (fixtures)
tiny = test_serve.tiny
CONVERSATIONS = 1_000
BOUND = 100


def rss_mb() -> float:
    """This process's resident memory (the server runs in it), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.slow
def test_a_thousand_conversations_stay_within_the_bound(sn_home: Path, tiny: KnowledgeGraph) -> None:
    settings = Settings.from_env({
        "SPARQLNAV_HOME": str(sn_home), "SPARQLNAV_CONVERSATIONS_MAX": str(BOUND),
        "SPARQLNAV_CONVERSATIONS_PER_CLIENT": str(BOUND),  # every conversation here comes from one address
    })  # fmt: skip
    app = create_app(settings, ServeConfig(strategy="lexical", rate_limit=None), kgs={"tiny": tiny})
    store = app.state.service.conversations
    with background(app) as url, httpx.Client(base_url=url, timeout=60) as http:

        def converse(n: int) -> str:
            one = http.post("/api/ask", json={"question": f"Who is the manager of Alice Wunderlich? ({n})"})
            assert one.status_code == 200, one.text
            ident = str(one.json()["conversation"])
            if n % 20 == 0:  # some follow up (each run takes a while: not every one)
                two = http.post("/api/ask", json={"question": "How old is Bob Baumeister?", "conversation": ident})
                assert two.status_code in (200, 404), two.text  # 404: pushed out by newer ones meanwhile
            return ident

        for n in range(20):  # warm up: first imports, connections, caches
            converse(n)
        before = rss_mb()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            idents = list(pool.map(converse, range(CONVERSATIONS)))
        after = rss_mb()
        assert len(set(idents)) == CONVERSATIONS
        assert len(store) == BOUND
        oldest = http.post("/api/ask", json={"question": "again?", "conversation": idents[0]})
        assert oldest.status_code == 404  # the least recently used went first
        newest = http.post("/api/ask", json={"question": "again?", "conversation": idents[-1]})
        assert newest.status_code == 200 and newest.json()["turn"] == 2
    print(f"\n{CONVERSATIONS} conversations, bound {BOUND}: RSS {before:.1f} MB -> {after:.1f} MB")
    # A loose check: what matters is the count above; the allocator keeps some of what 1,000 runs used.
    assert after - before < 100, f"RSS grew from {before:.1f} MB to {after:.1f} MB"
