"""Issue #35's scale benchmark: a PostgreSQL database of 20 million rows (bench/databases/bigpg.py), answered where
it lives against copied first.

(a) copy: today's route, the W3C Direct Mapping materialised into an Oxigraph store, timed on slices of the same
    shape (52k, 102k, 202k rows) and extrapolated linearly to the full database; peak RSS of each copy's process.
(b) introspect: the SQL writer's schema and value profile of the full database, cold (read) and warm
    (cache), with the number of statements sent.
(c) ask: the first answer as a whole process, `sparqlnav ask --kg postgresql://… --strategy sql`, against a
    scripted OpenAI-compatible server (a fixed SQL in a fenced block, then an answer text); wall time, the child's
    peak RSS (wait4), cold (fresh SPARQLNAV_HOME) and warm; a store folder appearing under SPARQLNAV_HOME counts as
    a copy and ends the child at once.

Run (the server from bench/databases/bigpg.py must hold the databases `bikeshare`, `s50k`, `s100k`, `s200k`):

    .venv/bin/python bench/sql_scale.py /tmp/sparqlnav-bigpg [--parts copy,introspect,ask] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "databases"))
from bigpg import Server, sizes  # a bench script beside this one

SLICES = (("s50k", 0.001), ("s100k", 0.0035), ("s200k", 0.0085))
FULL_DB = "bikeshare"
QUESTION = "How many trips started at a station in the Harbour region in March 2024?"
ANSWER_SQL = (
    "SELECT count(*) AS trips FROM trips t JOIN stations s ON s.station_id = t.start_station_id "
    "JOIN regions r ON r.region_id = s.region_id WHERE r.name = 'Harbour' "
    "AND t.started_at >= '2024-03-01' AND t.started_at < '2024-04-01'")


# ------------------------------------------------------------------------------------------------ children


def child_copy(url: str, stores: str) -> dict[str, Any]:
    """Materialise one database's Direct Mapping into a fresh store folder (run in a child of its own)."""
    from sparqlnav.graph.relational import database_spec, materialise

    database = database_spec(url)
    assert database is not None
    started = time.perf_counter()
    built = materialise(database, Path(stores))
    return {"seconds": time.perf_counter() - started, "triples": built.info.triples}


def child_introspect(url: str, cache: str) -> dict[str, Any]:
    """The SQL writer's profile of the database (`sql.introspect.profile_database`): cold (read and kept), warm
    (from the cache), and the statements each sends (run in a child of its own)."""
    import sparqlnav.sql.introspect as introspect
    from sparqlnav.graph.relational import database_spec

    database = database_spec(url)
    assert database is not None
    sent = [0]
    run_sql = introspect.run_sql

    def counted(*args: Any, **kwargs: Any) -> Any:
        sent[0] += 1
        return run_sql(*args, **kwargs)

    introspect.run_sql = counted  # counts the profile's statements; the bench's child process only
    started = time.perf_counter()
    profile = introspect.profile_database(database, Path(cache))
    cold, read = time.perf_counter() - started, sent[0]
    started = time.perf_counter()
    introspect.profile_database(database, Path(cache))
    warm = time.perf_counter() - started
    return {"cold_s": cold, "warm_s": warm, "statements_read": read, "statements_warm": sent[0] - read,
            "tables": len(profile.tables), "rows": profile.rows}


# ------------------------------------------------------------------------------------------------ measuring


def measured(command: list[str], env: dict[str, str] | None = None, watch: Callable[[], bool] | None = None,
             timeout_s: float = 3600) -> dict[str, Any]:
    """Run a child; wall seconds, its peak RSS (wait4's ru_maxrss, KiB), its output; ended early when `watch`
    turns true (then `stopped` is set)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        stopped = False
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if (watch is not None and watch()) or time.perf_counter() - started > timeout_s:
                child.kill()
                stopped = True
                pid, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.05)
        child.returncode = os.waitstatus_to_exitcode(status)  # wait4 reaped it: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return {"wall_s": time.perf_counter() - started, "peak_rss_mb": usage.ru_maxrss / 1024,
                "exit": child.returncode, "stopped": stopped, "stdout": out.read().decode(errors="replace"),
                "stderr": err.read().decode(errors="replace")[-3000:]}


def _child(part: str, *args: str) -> list[str]:
    return [sys.executable, __file__, "--child", part, *args]


def copy_part(server: Server) -> dict[str, Any]:
    """The copy on each slice and its linear extrapolation to the full database's rows."""
    points = []
    for name, scale in SLICES:
        with tempfile.TemporaryDirectory(prefix="bigpg-copy-") as stores:
            run = measured(_child("copy", server.url(name), stores))
        if run["exit"] != 0:
            raise RuntimeError(f"copy of {name} failed: {run['stderr']}")
        inner = json.loads(run["stdout"].strip().splitlines()[-1])
        rows = sum(sizes(scale).values())
        points.append({"db": name, "rows": rows, "copy_s": inner["seconds"], "triples": inner["triples"],
                       "process_s": run["wall_s"], "peak_rss_mb": run["peak_rss_mb"]})
        print(f"copy {name}: {rows:,} rows, {inner['triples']:,} triples, {inner['seconds']:.1f} s, "
              f"peak {run['peak_rss_mb']:.0f} MB", flush=True)
    full = sum(sizes(1.0).values())
    return {"slices": points, "full_rows": full, "extrapolated": {
        key: _line([p["rows"] for p in points], [p[key] for p in points], full)
        for key in ("copy_s", "triples", "peak_rss_mb")}}


def _line(xs: list[float], ys: list[float], at: float) -> dict[str, float]:
    """Least-squares line through the points, its value at `at`."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return {"per_row": slope, "intercept": my - slope * mx, "at_full": my + slope * (at - mx)}


def introspect_part(server: Server, db: str) -> dict[str, Any]:
    """The SQL writer's profile of the full database in a child, cold and warm."""
    with tempfile.TemporaryDirectory(prefix="bigpg-profile-") as cache:
        run = measured(_child("introspect", server.url(db), cache))
    if run["exit"] != 0:
        raise RuntimeError(f"introspection failed: {run['stderr']}")
    found: dict[str, Any] = json.loads(run["stdout"].strip().splitlines()[-1])
    found["peak_rss_mb"] = run["peak_rss_mb"]
    print(f"introspect: cold {found['cold_s']:.1f} s ({found['statements_read']} statements), "
          f"warm {found['warm_s']:.2f} s ({found['statements_warm']} statements)", flush=True)
    return found


class _ScriptedServer(ThreadingHTTPServer):
    """The scripted LLM's server; `requests` lists what each request was ("sql" or "other")."""

    requests: list[str]


class _Scripted(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint: the SQL writer's request gets the fixed SQL, any other an answer."""

    server: _ScriptedServer

    def do_POST(self) -> None:
        """Answer one chat completion."""
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        system = " ".join(str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "system")
        writes_sql = "SQL query that answers" in system
        self.server.requests.append("sql" if writes_sql else "other")
        text = (f"Count the trips from Harbour stations in March 2024.\n\n```sql\n{ANSWER_SQL}\n```" if writes_sql
                else "The count above is the number of trips that started in the Harbour region in March 2024.")
        reply = {"id": f"c{len(self.server.requests)}", "object": "chat.completion", "created": 0,
                 "model": body.get("model", "scripted"),
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet."""


def ask_part(server: Server, db: str, strategy: str) -> dict[str, Any]:
    """The first answer as a whole `sparqlnav ask` process, cold then warm; a store appearing stops it."""
    http = _ScriptedServer(("127.0.0.1", 0), _Scripted)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bigpg-home-") as home:
        env = {**os.environ, "SPARQLNAV_HOME": home, "OPENAI_BASE_URL": f"http://127.0.0.1:{http.server_port}/v1",
               "OPENAI_API_KEY": "scripted", "SPARQLNAV_LLM_MODEL": "scripted", "NO_COLOR": "1"}
        stores = Path(home) / "stores"

        def copying() -> bool:
            return stores.is_dir() and any(stores.iterdir())

        sparqlnav = str(Path(sys.executable).with_name("sparqlnav"))
        for label in ("cold", "warm"):
            http.requests = []
            run = measured([sparqlnav, "ask", "--kg", server.url(db), "--strategy", strategy, "--json",
                            QUESTION], env=env, watch=copying, timeout_s=1800)
            run["llm_requests"] = list(http.requests)
            run["store_created"] = copying()
            runs[label] = run
            print(f"ask {label}: {run['wall_s']:.1f} s, peak {run['peak_rss_mb']:.0f} MB, exit {run['exit']}, "
                  f"store {'created' if run['store_created'] else 'none'}, requests {run['llm_requests']}",
                  flush=True)
            if run["store_created"]:
                break  # a copy started: the warm run would copy again, and measure nothing new
    http.shutdown()
    return runs


def main(argv: list[str]) -> int:
    """Run the parts asked for and write their figures as JSON."""
    if argv[:1] == ["--child"]:
        part, *given = argv[1:]
        found = child_copy(*given) if part == "copy" else child_introspect(*given)
        print(json.dumps(found))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the bigpg server's folder (bench/databases/bigpg.py)")
    parser.add_argument("--parts", default="copy,introspect,ask")
    parser.add_argument("--strategy", default="sql")
    parser.add_argument("--db", default=FULL_DB, help="the database introspected and asked")
    parser.add_argument("--out", type=Path, default=Path("runs/sql_scale.json"))
    args = parser.parse_args(argv)
    server = Server(args.folder).start()
    parts = args.parts.split(",")
    results: dict[str, Any] = {"db": args.db, "strategy": args.strategy, "question": QUESTION, "sql": ANSWER_SQL, "full_rows": sum(sizes(1.0).values())}
    if "copy" in parts:
        results["copy"] = copy_part(server)
    if "introspect" in parts:
        results["introspect"] = introspect_part(server, args.db)
    if "ask" in parts:
        results["ask"] = ask_part(server, args.db, args.strategy)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
