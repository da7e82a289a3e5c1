"""Mixed load on `sparqlnav serve` over loopback: 40 concurrent `/api/sparql` + `/api/search` requests with slow
queries mixed in, then the same mix as MCP tool calls through `/mcp` (`execute_sparql`, `search`).

The server runs as its own process, so its memory is measured alone (RSS after a warm-up round and after the
last round of each face). Fast requests are the ones that must not fail; slow ones count a cross product of
VALUES (seconds of engine work each) and share the same worker slots.

    .venv/bin/python bench/serve_mixed.py --concurrency 40 --rounds 5 --out bench/results/serve_mixed.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from serve_load import EX, QUERY, free_port, pct, rss_mb, write_graph


def slow_query(size: int) -> str:
    """A COUNT over a cross product of three VALUES blocks: size**3 rows for the engine to count."""
    values = " ".join(str(i) for i in range(size))
    return "SELECT (COUNT(*) AS ?n) WHERE { " + " ".join(f"VALUES ?v{n} {{ {values} }}" for n in range(3)) + " }"


def mix(n: int, slow_every: int) -> list[str]:
    """The kinds of `n` requests: every `slow_every`-th a slow query, the rest alternating fast query and search."""
    return ["slow" if i % slow_every == slow_every - 1 else ("sparql" if i % 2 else "search") for i in range(n)]


async def http_request(client: httpx.AsyncClient, kind: str, slow: str) -> dict[str, Any]:
    """One API request; ok when it answered 200 with the expected content."""
    start = time.perf_counter()
    try:
        if kind == "search":
            r = await client.get("/api/search", params={"q": "Person 17"})
            ok = r.status_code == 200 and any(h["iri"] == f"{EX}p17" for h in r.json()["entities"])
        else:
            r = await client.post("/api/sparql", json={"query": slow if kind == "slow" else QUERY})
            ok = r.status_code == 200 and bool(r.json()["results"]["results"]["bindings"])
        error = None if ok else f"HTTP {r.status_code}: {r.text[:120]}"
    except httpx.HTTPError as exc:
        ok, error = False, repr(exc)
    return {"kind": kind, "ok": ok, "error": error, "seconds": time.perf_counter() - start}


async def http_round(url: str, kinds: list[str], slow: str) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=len(kinds) + 10, max_keepalive_connections=len(kinds) + 10)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        return list(await asyncio.gather(*(http_request(client, k, slow) for k in kinds)))


async def mcp_round(url: str, kinds: list[str], slow: str, sessions: int) -> list[dict[str, Any]]:
    """The same mix as MCP tool calls, spread over `sessions` concurrent client sessions."""

    async def call(client: Client, kind: str) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            if kind == "search":
                got = await client.call_tool("search", {"query": "Person 17"})
            else:
                got = await client.call_tool("execute_sparql", {"query": slow if kind == "slow" else QUERY})
            text = "\n".join(getattr(c, "text", "") for c in got.content)
            ok = not got.is_error and ("ex:p17" in text or "ex:p1" in text or "| " in text)
            error = text[:120] if not ok else None
        except Exception as exc:  # noqa: BLE001 - a benchmark counts every failure, whatever it is
            ok, error = False, repr(exc)
        return {"kind": kind, "ok": ok, "error": error, "seconds": time.perf_counter() - start}

    async def session(share: list[str]) -> list[dict[str, Any]]:
        async with Client(url + "/mcp") as client:
            return list(await asyncio.gather(*(call(client, k) for k in share)))

    shares = [kinds[i::sessions] for i in range(sessions)]
    got = await asyncio.gather(*(session(s) for s in shares if s))
    return [r for g in got for r in g]


def summarise(face: str, rounds: list[list[dict[str, Any]]], rss_before: float, rss_after: float) -> dict[str, Any]:
    """Requests, errors and latency percentiles per kind, and the server's memory."""
    flat = [r for rnd in rounds for r in rnd]
    out: dict[str, Any] = {"face": face, "requests": len(flat), "errors": sum(not r["ok"] for r in flat)}
    for group, kinds in (("fast", ("sparql", "search")), ("slow", ("slow",))):
        rows = [r for r in flat if r["kind"] in kinds]
        lat = [r["seconds"] for r in rows if r["ok"]]
        out[group] = {
            "requests": len(rows),
            "errors": sum(not r["ok"] for r in rows),
            "p50_s": round(pct(lat, 50), 3) if lat else None,
            "p99_s": round(pct(lat, 99), 3) if lat else None,
            "error_samples": sorted({str(r["error"]) for r in rows if not r["ok"]})[:3],
        }
    out["server_rss_mb_before"] = round(rss_before, 1)
    out["server_rss_mb_after"] = round(rss_after, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slow-every", type=int, default=10, help="one request in this many is a slow query")
    ap.add_argument("--slow-size", type=int, default=200, help="VALUES size of the slow query (size**3 rows)")
    ap.add_argument("--sessions", type=int, default=8, help="MCP client sessions sharing a round")
    ap.add_argument("--out", type=Path, help="write the summary JSON here too")
    args = ap.parse_args()

    kinds = mix(args.concurrency, args.slow_every)
    slow = slow_query(args.slow_size)
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "company.ttl"
        write_graph(graph)
        port = free_port()
        env = {**os.environ, "SPARQLNAV_HOME": str(Path(tmp) / "home")}
        for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
            env.pop(var, None)
        server = subprocess.Popen(
            [sys.executable, "-m", "sparqlnav", "serve", "--kg", f"company={graph}", "--port", str(port),
             "--log-level", "warning"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        url = f"http://127.0.0.1:{port}"
        summaries = []
        try:
            for _ in range(600):
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    if server.poll() is not None:
                        raise SystemExit(f"the server exited: {server.stderr.read() if server.stderr else ''}") from None
                time.sleep(0.1)
            for face in ("http", "mcp"):

                def one(face: str = face) -> list[dict[str, Any]]:
                    if face == "http":
                        return asyncio.run(http_round(url, kinds, slow))
                    return asyncio.run(mcp_round(url, kinds, slow, args.sessions))

                one()  # warm-up: imports, worker threads, connections, allocator arenas
                before = rss_mb(server.pid)
                rounds = []
                for r in range(args.rounds):
                    rounds.append(one())
                    print(json.dumps({"face": face, "round": r + 1, "errors": sum(not x["ok"] for x in rounds[-1]),
                                      "server_rss_mb": round(rss_mb(server.pid), 1)}), flush=True)
                summaries.append(summarise(face, rounds, before, rss_mb(server.pid)))
            health = httpx.get(url + "/health", timeout=5).json()
        finally:
            server.terminate()
            server.wait(timeout=30)
    result = {"concurrency": args.concurrency, "rounds": args.rounds, "slow_every": args.slow_every,
              "slow_rows": args.slow_size**3, "faces": summaries, "health_after": health}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
