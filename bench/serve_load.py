"""Load test of `sparqlnav serve` on loopback: many concurrent streaming asks (explore strategy) against a
scripted OpenAI-compatible LLM that answers every call after a fixed latency.

The server runs as its own process (`sparqlnav serve`), so its memory is measured alone. One ask is timed
alone first; then `--rounds` batches of `--concurrency` streaming asks run at once. Reported: wall time of a
batch against one ask, per-ask latency p50/p99, time to first streamed event, failures, and the server's
RSS after a warm-up batch and after each measured batch (flat = no growth once warm).

    .venv/bin/python bench/serve_load.py --concurrency 50 --latency 0.25 --rounds 12
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from scripted_llm import Call, Delay, Reply, ScriptedLLM

EX = "http://example.org/load/"
QUERY = f"PREFIX ex: <{EX}> SELECT ?m WHERE {{ ex:p17 ex:manager ?m }}"  # Person 17 reports to Person 1


def write_graph(path: Path, people: int = 500) -> None:
    """A small company: people with names, ages, teams and managers."""
    lines = [f"@prefix ex: <{EX}> .", "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> ."]
    lines += [f'ex:t{t} a ex:Team ; rdfs:label "Team {t}" .' for t in range(20)]
    for i in range(people):
        manager = f" ; ex:manager ex:p{i // 10}" if i >= 10 else ""
        lines.append(f'ex:p{i} a ex:Person ; rdfs:label "Person {i}" ; ex:age {20 + i % 45} ; ex:memberOf ex:t{i % 20}{manager} .')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def policy(latency: float) -> Any:
    """Search, run the query, stop; the answer writer replies in words. Every reply after `latency` s."""

    def step(body: dict[str, Any]) -> Delay:
        if not body.get("tools"):
            return Delay(latency, Reply(text="Person 17 is managed by Person 1.", input_tokens=200, output_tokens=10))
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        calls = [Call("search", {"query": "Person 17"}), Call("execute_sparql", {"query": QUERY}), Call("stop", {})]
        return Delay(latency, Reply(text=f"Step {done + 1}.", tool_calls=[calls[min(done, 2)]], input_tokens=400, output_tokens=25))

    return step


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_ask(client: httpx.AsyncClient, n: int) -> dict[str, Any]:
    """One streaming ask; latency to the answer event, time to the first event, events seen."""
    start = time.perf_counter()
    first: float | None = None
    events, answer, error = 0, None, None
    try:
        body = {"question": f"Who manages Person 17? ({n})", "strategy": "explore"}
        async with client.stream("POST", "/api/ask/stream", json=body) as resp:
            if resp.status_code != 200:
                return {"ok": False, "error": f"HTTP {resp.status_code}: {(await resp.aread())[:200]!r}"}
            name = ""
            async for line in resp.aiter_lines():
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    if first is None:
                        first = time.perf_counter() - start
                    if name == "trace":
                        events += 1
                    elif name == "answer":
                        answer = json.loads(line[5:])
                    elif name == "error":
                        error = line[5:].strip()
    except httpx.HTTPError as exc:
        return {"ok": False, "error": repr(exc)}
    rows = ((answer or {}).get("results") or {}).get("results", {}).get("bindings", [])
    ok = answer is not None and answer.get("status") == "answered" and [r["m"]["value"] for r in rows] == [f"{EX}p1"]
    return {
        "ok": ok,
        "error": error if not ok else None,
        "seconds": time.perf_counter() - start,
        "first_event_s": first,
        "events": events,
    }


async def batch(url: str, n: int) -> tuple[float, list[dict[str, Any]]]:
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        start = time.perf_counter()
        got = await asyncio.gather(*(one_ask(client, i) for i in range(n)))
        return time.perf_counter() - start, list(got)


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.25, help="seconds the scripted LLM takes per call")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--singles", type=int, default=3, help="asks timed one at a time first")
    ap.add_argument("--out", type=Path, help="write the summary JSON here too")
    args = ap.parse_args()

    calls_needed = 4 * (args.singles + 1 + (args.rounds + 1) * args.concurrency)
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM() as llm:
        llm.script([policy(args.latency)] * (calls_needed + 50))
        graph = Path(tmp) / "company.ttl"
        write_graph(graph)
        port = free_port()
        env = {
            **os.environ,
            "SPARQLNAV_HOME": str(Path(tmp) / "home"),
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "load-test",
            "SPARQLNAV_LLM_MODEL": llm.model,
        }
        server = subprocess.Popen(
            [sys.executable, *os.environ.get("SN_SERVE_CMD", "-m sparqlnav").split(), "serve", "--kg", f"company={graph}", "--port", str(port),
             "--max-concurrent", str(max(64, args.concurrency)), "--log-level", "warning"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    if server.poll() is not None:
                        raise SystemExit(f"the server exited: {server.stderr.read() if server.stderr else ''}") from None
                time.sleep(0.1)
            asyncio.run(batch(url, 1))  # warm-up: imports, first connections
            singles = [asyncio.run(batch(url, 1))[1][0] for _ in range(args.singles)]
            single_s = statistics.median(s["seconds"] for s in singles if s["ok"])
            asyncio.run(batch(url, args.concurrency))  # warm-up at full load: worker threads, allocator arenas
            rss_warm = rss_mb(server.pid)
            rounds = []
            for r in range(args.rounds):
                wall, got = asyncio.run(batch(url, args.concurrency))
                ok = [g for g in got if g["ok"]]
                lat = [g["seconds"] for g in ok]
                rounds.append(
                    {
                        "round": r + 1,
                        "wall_s": round(wall, 3),
                        "ok": len(ok),
                        "failed": len(got) - len(ok),
                        "errors": sorted({str(g.get("error")) for g in got if not g["ok"]})[:3],
                        "p50_s": round(pct(lat, 50), 3) if lat else None,
                        "p99_s": round(pct(lat, 99), 3) if lat else None,
                        "first_event_p50_s": round(pct([g["first_event_s"] for g in ok], 50), 3) if ok else None,
                        "events_per_ask": round(statistics.mean(g["events"] for g in ok), 1) if ok else None,
                        "server_rss_mb": round(rss_mb(server.pid), 1),
                    }
                )
                print(json.dumps(rounds[-1]), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=20)
        all_lat = [r for r in rounds if r["p50_s"] is not None]
        summary = {
            "concurrency": args.concurrency,
            "llm_latency_s": args.latency,
            "llm_calls_per_ask": 4,
            "single_ask_s": round(single_s, 3),
            "batch_wall_s": [r["wall_s"] for r in rounds],
            "batch_over_single": round(statistics.median(r["wall_s"] for r in rounds) / single_s, 2),
            "failed": sum(r["failed"] for r in rounds),
            "p50_s": statistics.median(r["p50_s"] for r in all_lat) if all_lat else None,
            "p99_s": max(r["p99_s"] for r in all_lat) if all_lat else None,
            "server_rss_mb_after_warmup": round(rss_warm, 1),
            "server_rss_mb": [r["server_rss_mb"] for r in rounds],
            "server_rss_growth_mb": round(rounds[-1]["server_rss_mb"] - rss_warm, 1) if rounds else None,
            # Library caches (the OpenAI SDK's, bounded) fill during the first hundreds of asks; then RSS levels off.
            "server_rss_growth_last_half_mb": round(rounds[-1]["server_rss_mb"] - rounds[len(rounds) // 2 - 1]["server_rss_mb"], 1)
            if len(rounds) >= 2
            else None,
            "llm_problems": llm.problems[:3],
        }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "rounds": rounds}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
