"""Whole-process cost of the CLI and the server's first question, this tree against another (issue 27).

CLI: each case (`ask` for three demo questions, a one-row `sparql`, a `search`) runs as a fresh
`python -m sparqlnav …` process, this tree's and the other tree's in turn (A B A B …), each with a home of its own
that holds the built store (a warm-up run of each side first: the store is built once, bytecode written, and this
tree's kept engine started, as for a person asking a question after a first one). Each run's wall time is read
around the process; its CPU (user + system) and peak memory (the largest single process) come from the kernel's
accounting of the finished process tree (`os.wait4`). Medians are printed, with the pairwise ratio's median.

Server: `serve` is started, and once it answers /health the first question is posted to /api/ask, then a second
(loopback, lexical strategy: no LLM); each order of the two questions in turn, for `--server-runs` starts.

Run: .venv/bin/python bench/fast_start.py --other-src /tmp/fast-before/src [--runs 7] [--out bench/results/fast_start.json]
(the other tree is a `git worktree` of an earlier commit). Bytecode is written and used by both sides
(PYTHONDONTWRITEBYTECODE is unset), as for an installed package.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["Who discovered oxygen?", "What is the atomic number of gold?", "Which element has the symbol W?"]
ONE_ROW = "SELECT ?s WHERE { ?s ?p ?o } LIMIT 1"


@dataclass(frozen=True)
class Run:
    """One finished process: wall seconds, CPU seconds of its tree, peak memory of its largest process (bytes)."""

    wall_s: float
    cpu_s: float
    peak_bytes: int
    code: int


def _env(src: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "SPARQLNAV_")) and k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(src), "SPARQLNAV_HOME": str(home)}


def run_once(args: list[str], env: dict[str, str]) -> Run:
    """Run `python -m sparqlnav ARGS` to its end; what it cost."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "sparqlnav", *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode)


def cases() -> dict[str, list[list[str]]]:
    """Each case: the commands one measured run is made of."""
    return {
        "ask (3 demo questions, one process each)": [["ask", "-q", q] for q in QUESTIONS],
        "sparql (one row)": [["sparql", ONE_ROW]],
        "search": [["search", "oxygen"]],
    }


def measure_cli(this: Path, other: Path, runs: int, homes: Path) -> dict[str, dict[str, object]]:
    """Paired runs of every case; per side the medians of one command's wall, CPU and peak memory."""
    out: dict[str, dict[str, object]] = {}
    envs = {"after": _env(this, homes / "after"), "before": _env(other, homes / "before")}
    for name, commands in cases().items():
        rows: dict[str, list[Run]] = {"after": [], "before": []}
        for env in envs.values():  # warm-up: store built, bytecode written, the kept engine started
            for command in commands:
                run_once(command, env)
        for _ in range(runs):
            for command in commands:
                for side, env in envs.items():
                    rows[side].append(run_once(command, env))
        ratios = [a.wall_s / b.wall_s for a, b in zip(rows["after"], rows["before"], strict=True)]
        out[name] = {
            side: {
                "wall_s": statistics.median(r.wall_s for r in got),
                "wall_min_s": min(r.wall_s for r in got),
                "wall_max_s": max(r.wall_s for r in got),
                "cpu_s": statistics.median(r.cpu_s for r in got),
                "peak_mb": statistics.median(r.peak_bytes for r in got) / 1e6,
                "failed": sum(r.code != 0 for r in got),
                "runs": len(got),
            }
            for side, got in rows.items()
        } | {"ratio_wall_median": statistics.median(ratios)}
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_first_and_second(src: Path, home: Path, order: list[str]) -> tuple[float, float]:
    """Start `serve`, wait for /health, then post two questions: the seconds each took."""
    port = _free_port()
    env = {**_env(src, home), "SPARQLNAV_STRATEGY": "lexical"}
    proc = subprocess.Popen([sys.executable, "-m", "sparqlnav", "serve", "--port", str(port)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"serve did not start ({src})")
            time.sleep(0.1)
        took = []
        with httpx.Client(base_url=url, timeout=120, headers={"X-Requested-With": "bench"}) as client:
            for question in order:
                started = time.monotonic()
                answer = client.post("/api/ask", json={"question": question, "strategy": "lexical"})
                took.append(time.monotonic() - started)
                answer.raise_for_status()
        return took[0], took[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure_server(this: Path, other: Path, runs: int, homes: Path) -> dict[str, dict[str, float]]:
    """First and second question times (medians over `runs` starts of each side, both orders in turn)."""
    found: dict[str, dict[str, list[float]]] = {s: {"first": [], "second": []} for s in ("after", "before")}
    for i in range(runs):
        order = QUESTIONS[:2] if i % 2 == 0 else QUESTIONS[1::-1]
        for side, src in (("after", this), ("before", other)):
            first, second = serve_first_and_second(src, homes / f"serve-{side}", order)
            found[side]["first"].append(first)
            found[side]["second"].append(second)
    return {side: {k: statistics.median(v) for k, v in got.items()} for side, got in found.items()}


def main() -> None:
    """Measure and print; write the figures as JSON with --out."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other-src", type=Path, required=True, help="the src folder of the tree to compare with")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--server-runs", type=int, default=4)
    parser.add_argument("--out", type=Path)
    opts = parser.parse_args()
    this = ROOT / "src"
    with tempfile.TemporaryDirectory(prefix="fast-start-") as tmp:
        homes = Path(tmp)
        figures = {"cli": measure_cli(this, opts.other_src, opts.runs, homes),
                   "server": measure_server(this, opts.other_src, opts.server_runs, homes)}
        # The kept engines of this tree's homes end with the measurement, not after their idle period.
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from sparqlnav.graph.keeper import stop_kept; stop_kept(Path(sys.argv[1]))", tmp],
                       env=_env(this, homes / "after"), check=False)
    print(json.dumps(figures, indent=1))
    if opts.out:
        opts.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
