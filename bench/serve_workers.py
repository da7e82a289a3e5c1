"""`sparqlnav serve --workers N` under a CPU-bound load on loopback: lexical asks over CK25 (no LLM), one process
against several, and the memory each worker costs with one shared store engine against one engine per worker.

Each setup is a fresh `sparqlnav serve` process tree over the same home (the store and indexes are built by the
first and reused): `--workers 1` with in-process state (the single process as before), then `--workers 1` and
`--workers 2` with a private Redis (Debian's redis-server) as the shared state, the local engine kept and shared
(graph/keeper), then `--workers 2` with the engine not kept (SPARQLNAV_ENGINE_IDLE=0: one engine per worker, as
before issue 27). Each runs a warm-up pass over the questions, then `--requests` asks (the CK25 questions in turn)
with `--concurrency` at once; reported: requests/s, latency p50/p99, errors, and the RSS and PSS (shared pages
split between the processes sharing them) of every worker, the supervisor and every engine.

    .venv/bin/python bench/serve_workers.py --requests 240 --concurrency 8 --out bench/results/serve_workers.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from serve_load import free_port, pct

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from private_redis import PrivateRedis

DATA = Path(os.environ.get("SPARQLNAV_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def questions() -> list[str]:
    """The CK25 questions (English)."""
    doc = yaml.safe_load((DATA / "ck25" / "questions.yml").read_text())
    return [q["question"]["en"] for q in doc["questions"]]


def memory_kb(pid: int) -> tuple[int, int]:
    """RSS and PSS of a process, in KiB (Linux)."""
    rss = pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    return rss, pss


def cpu_s(pid: int) -> float:
    """CPU time (user + system) a process has used, in seconds (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """Direct children of a process."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def engines(home: Path) -> list[int]:
    """The Oxigraph engine processes serving a store under `home`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if name == "oxigraph" and str(home).encode() in argv:
            found.append(int(entry.name))
    return found


def workers_of(supervisor: int, count: int) -> list[int]:
    """The server processes: the supervisor's Python children (uvicorn's spawned workers), or itself alone."""
    if count == 1:
        return [supervisor]
    kids = []
    for pid in children(supervisor):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing" in argv and b"resource_tracker" not in argv:
            kids.append(pid)
    return kids


async def one_ask(client: httpx.AsyncClient, question: str) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        r = await client.post("/api/ask", json={"question": question, "strategy": "lexical", "kg": "ck25"})
        ok = r.status_code == 200 and r.json().get("status") in ("answered", "not_found")
        error = None if ok else f"HTTP {r.status_code}: {r.text[:160]}"
        worker = r.headers.get("x-sparqlnav-worker")
    except httpx.HTTPError as exc:
        ok, error, worker = False, repr(exc), None
    return {"ok": ok, "error": error, "seconds": time.perf_counter() - start, "worker": worker}


async def load(url: str, asks: list[str], concurrency: int) -> tuple[float, list[dict[str, Any]]]:
    """Every question of `asks`, `concurrency` at a time (each client task on its own connections)."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for q in asks:
        queue.put_nowait(q)
    results: list[dict[str, Any]] = []

    async def client_task() -> None:
        # A new connection per request, so the kernel spreads them over the workers (as a load balancer would).
        while not queue.empty():
            q = queue.get_nowait()
            async with httpx.AsyncClient(base_url=url, timeout=300) as client:
                results.append(await one_ask(client, q))

    start = time.perf_counter()
    await asyncio.gather(*(client_task() for _ in range(concurrency)))
    return time.perf_counter() - start, results


def run_setup(
    name: str, home: Path, workers: int, state_url: str | None, idle: str | None, asks: list[str], concurrency: int
) -> dict[str, Any]:
    port = free_port()
    env = {**os.environ, "SPARQLNAV_HOME": str(home)}
    for key in ("SPARQLNAV_STATE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "SPARQLNAV_LLM_MODEL"):
        env.pop(key, None)
    if state_url:
        env["SPARQLNAV_STATE_URL"] = state_url
    if idle is not None:
        env["SPARQLNAV_ENGINE_IDLE"] = idle
    log = home / f"serve-{name}.log"
    command = [
        sys.executable, "-m", "sparqlnav", "serve", "--workers", str(workers), "--port", str(port),
        "--kg", f"ck25={DATA / 'ck25' / 'prod-inst.ttl'}", "--strategy", "lexical", "--log-level", "warning",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        ready: set[str] = set()
        while len(ready) < workers:
            if proc.poll() is not None or time.monotonic() - started > 600:
                raise RuntimeError(f"{name}: the server did not start: {log.read_text()[-2000:]}")
            try:
                r = httpx.get(url + "/ready", timeout=5)
                if r.status_code == 200:
                    ready.add(str(r.json()["worker"]))
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        start_s = time.monotonic() - started
        _, warm = asyncio.run(load(url, questions() * workers, concurrency))
        procs = workers_of(proc.pid, workers)
        cpu_before = {pid: cpu_s(pid) for pid in procs}
        seconds, results = asyncio.run(load(url, asks, concurrency))
        # Cores the workers kept busy (CPU seconds over wall seconds): what the machine's other load does not hide,
        # since one process's Python cannot pass one core, however idle the others are.
        cores = [round((cpu_s(pid) - cpu_before[pid]) / seconds, 2) for pid in procs]
        latencies = sorted(r["seconds"] for r in results)
        errors = [r["error"] for r in results if not r["ok"]]
        worker_mem = {pid: memory_kb(pid) for pid in procs}
        engine_mem = {pid: memory_kb(pid) for pid in engines(home)}
        supervisor = memory_kb(proc.pid) if workers > 1 else (0, 0)
        per_worker: dict[str, int] = {}
        for r in results:
            per_worker[str(r["worker"])] = per_worker.get(str(r["worker"]), 0) + 1
        summary = {
            "setup": name,
            "workers": workers,
            "state": "redis" if state_url else "in-process",
            "engine": "one per worker" if idle == "0" else "kept, shared",
            "start_s": round(start_s, 1),
            "requests": len(results),
            "errors": len(errors),
            "first_errors": errors[:3],
            "warm_errors": sum(not r["ok"] for r in warm),
            "seconds": round(seconds, 2),
            "requests_per_s": round(len(results) / seconds, 2),
            "p50_s": round(pct(latencies, 50), 3),
            "p99_s": round(pct(latencies, 99), 3),
            "answered_by": per_worker,
            "worker_cores": cores,
            "cpu_s_per_request": round(sum(c * seconds for c in cores) / len(results), 3),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "workers_rss_mb": [round(m[0] / 1024, 1) for m in worker_mem.values()],
            "workers_pss_mb": [round(m[1] / 1024, 1) for m in worker_mem.values()],
            "supervisor_rss_mb": round(supervisor[0] / 1024, 1),
            "supervisor_pss_mb": round(supervisor[1] / 1024, 1),
            "engines": len(engine_mem),
            "engines_rss_mb": [round(m[0] / 1024, 1) for m in engine_mem.values()],
            "engines_pss_mb": [round(m[1] / 1024, 1) for m in engine_mem.values()],
        }
        total_pss = sum(m[1] for m in worker_mem.values()) + supervisor[1] + sum(m[1] for m in engine_mem.values())
        summary["total_pss_mb"] = round(total_pss / 1024, 1)
        summary["pss_per_worker_mb"] = round(total_pss / 1024 / workers, 1)
        return summary
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--setups", default="redis2-own-engines,single,redis1,redis2")  # own engines first: none kept yet
    ap.add_argument("--out", type=Path, help="write the summaries as JSON here too")
    args = ap.parse_args()
    qs = questions()
    asks = [qs[i % len(qs)] for i in range(args.requests)]
    out: list[dict[str, Any]] = []
    with PrivateRedis() as redis, tempfile.TemporaryDirectory(prefix="sparqlnav-workers-") as tmp:
        home = Path(tmp)
        setups = {
            "single": (1, None, None),
            "redis1": (1, redis.url(0), None),
            "redis2": (2, redis.url(1), None),
            "redis2-own-engines": (2, redis.url(2), "0"),
        }
        for name in args.setups.split(","):
            workers, state, idle = setups[name]
            summary = run_setup(name, home, workers, state, idle, asks, args.concurrency)
            print(json.dumps(summary), flush=True)
            out.append(summary)
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
