"""Foundation benchmarks: loading a generated graph, name search over ≥ 1M labels, and sparqlnav's execute
path against raw in-process pyoxigraph on the same queries.

Run: .venv/bin/python bench/graph_bench.py [--entities 1000000] [--out bench/results/graph.md]
Each phase runs in a child process so its peak memory (max RSS) is its own.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Radia", "Tim", "Margaret", "Ken", "Dennis", "Leslie", "Niklaus", "Shafi", "Whitfield", "Judea", "Yoshua", "Geoffrey"]
LAST = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy", "Perlman", "Berners", "Hamilton", "Thompson", "Ritchie", "Lamport", "Wirth", "Goldwasser", "Diffie", "Pearl", "Bengio", "Hinton"]
WORDS = ["quantum", "river", "amber", "silent", "copper", "north", "violet", "ember", "harbor", "falcon", "cedar", "lunar", "orbit", "granite", "meadow", "tundra", "delta", "signal", "prism", "canyon"]


SYLLABLES = ["ka", "ro", "mi", "sel", "dan", "tor", "vi", "len", "bar", "os", "quin", "tha", "mer", "lu", "pe", "gor", "an", "ric", "de", "sta", "fen", "hol", "ju", "wen"]


def _vocabulary(rng: random.Random, size: int, parts: int) -> list[str]:
    """Made-up words of `parts` syllables: a vocabulary as varied as real names, where most words are rare."""
    return sorted({"".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize() for _ in range(size)})


def generate(path: Path, entities: int, seed: int = 7, *, realistic: bool = True) -> int:
    """Write an N-Triples file: each entity has a type, a label, a number, a code and one link (5 triples).

    Realistic labels draw words Zipf-like from large made-up vocabularies (as real names do); the
    adversarial mode uses 60 words only, so that every word sits in ~5 % of all labels.
    """
    rng = random.Random(seed)
    firsts, lasts, words = (
        (_vocabulary(rng, 3000, 2), _vocabulary(rng, 60000, 3), _vocabulary(rng, 20000, 3)) if realistic else (FIRST, LAST, WORDS)
    )
    cum: list[float] = []
    total = 0.0
    for r in range(len(lasts)):
        total += 1 / (r + 1)
        cum.append(total)
    n = 0
    with path.open("w") as fh:
        for i in range(entities):
            s = f"<http://bench.example/e{i}>"
            if realistic:
                last = rng.choices(lasts, cum_weights=cum)[0]
                label = f"{rng.choice(firsts)} {last}" + (f" {rng.choice(words)}" if i % 3 == 0 else "")
            else:
                label = f"{rng.choice(FIRST)} {rng.choice(LAST)} {rng.choice(WORDS)} {i}"
            fh.write(f"{s} <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://bench.example/C{i % 50}> .\n")
            fh.write(f'{s} <http://www.w3.org/2000/01/rdf-schema#label> "{label}"@en .\n')
            fh.write(f'{s} <http://bench.example/value> "{rng.randint(0, 10**6)}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n')
            fh.write(f"{s} <http://bench.example/link> <http://bench.example/e{rng.randrange(entities)}> .\n")
            fh.write(f'{s} <http://bench.example/code> "X{i:07d}" .\n')
            n += 5
    return n


def peak_mb() -> float:
    """Peak resident memory of this process in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_load(nt: str, home: str) -> dict[str, float]:
    """Load into a store and build the name index (first open of a KG)."""
    from sparqlnav.graph.opening import open_kg
    from sparqlnav.settings import Settings

    t = time.perf_counter()
    from sparqlnav.graph.store import ensure_store, rdf_files

    info = ensure_store(rdf_files(Path(nt)), Path(home) / "stores")
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    with open_kg(nt, Settings.from_env({"SPARQLNAV_HOME": home})) as kg:
        index_s = time.perf_counter() - t
        t = time.perf_counter()
    with open_kg(nt, Settings.from_env({"SPARQLNAV_HOME": home})) as kg:
        reopen_s = time.perf_counter() - t
        labels = kg.names.count() if hasattr(kg.names, "count") else 0
    return {"triples": info.triples, "load_s": load_s, "index_s": index_s, "reopen_s": reopen_s, "items": labels, "peak_mb": peak_mb()}


def phase_search(nt: str, home: str, entities: int) -> dict[str, float]:
    """Search latency: exact, partial and misspelt names."""
    from sparqlnav.graph.opening import open_kg
    from sparqlnav.settings import Settings
    from sparqlnav.tools.lookup import search

    rng = random.Random(11)
    labels = []
    with open(nt) as fh:
        for line in fh:
            if "rdf-schema#label" in line and rng.random() < 200 / entities:
                labels.append(line.split('"')[1])
    queries = []
    for label in labels[:100]:
        words = label.split()
        queries.append(label)  # exact
        queries.append(words[1])  # one word: partial, possibly common
        queries.append(f"{words[0]} {words[1][:4]}")  # typing: a prefix
        w = words[1]
        j = rng.randrange(1, len(w) - 2)
        queries.append(f"{words[0]} {w[:j] + w[j + 1] + w[j] + w[j + 2:]}")  # a transposition typo
    with open_kg(nt, Settings.from_env({"SPARQLNAV_HOME": home})) as kg:
        search(kg, "warm up")
        times = []
        for q in queries:
            t = time.perf_counter()
            search(kg, q)
            times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {
        "queries": len(times),
        "p50_ms": statistics.median(times),
        "p95_ms": times[int(0.95 * len(times)) - 1],
        "peak_mb": peak_mb(),
    }


QUERIES = [
    "SELECT ?s ?l WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l } LIMIT 100",
    "SELECT (COUNT(*) AS ?n) WHERE { ?s a <http://bench.example/C7> }",
    "SELECT ?s ?v WHERE { ?s <http://bench.example/value> ?v FILTER(?v > 999000) }",
    "SELECT ?o WHERE { <http://bench.example/e42> <http://bench.example/link> ?x . ?x <http://bench.example/link> ?o }",
    "SELECT ?s WHERE { ?s <http://bench.example/code> \"X0004242\" }",
    "SELECT ?c (COUNT(*) AS ?n) WHERE { ?s a ?c } GROUP BY ?c ORDER BY DESC(?n) LIMIT 5",
    "ASK { <http://bench.example/e1> ?p ?o }",
    "SELECT ?s ?l WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l } LIMIT 5000",
]


def phase_execute(nt: str, home: str) -> dict[str, float]:
    """Median time per query: sparqlnav's endpoint (guard, HTTP, parse) vs in-process pyoxigraph."""
    import pyoxigraph as ox

    from sparqlnav.graph.opening import open_kg
    from sparqlnav.settings import Settings

    rounds = 7
    ours: list[float] = []
    raw: list[float] = []
    with open_kg(nt, Settings.from_env({"SPARQLNAV_HOME": home})) as kg:
        store = kg.endpoint.open_store()  # type: ignore[attr-defined]
        for q in QUERIES:
            kg.endpoint.query(q)
            t_ours, t_raw = [], []
            for _ in range(rounds):
                t = time.perf_counter()
                res = kg.endpoint.query(q)
                t_ours.append(time.perf_counter() - t)
                assert res.ok, res.message
                t = time.perf_counter()
                r = store.query(q)
                rows = [[s[v] for v in r.variables] for s in r] if isinstance(r, ox.QuerySolutions) else bool(r)
                t_raw.append(time.perf_counter() - t)
                del rows
            ours.append(statistics.median(t_ours))
            raw.append(statistics.median(t_raw))
    return {
        "ours_total_ms": sum(ours) * 1000,
        "raw_total_ms": sum(raw) * 1000,
        "ratio_total": sum(ours) / sum(raw),
        "per_query": [{"ours_ms": o * 1000, "raw_ms": r * 1000} for o, r in zip(ours, raw, strict=True)],
        "peak_mb": peak_mb(),
    }


def child(phase: str, *args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, __file__, "--phase", phase, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entities", type=int, default=1_000_000)
    ap.add_argument("--out", default="bench/results/graph.md")
    ap.add_argument("--adversarial", action="store_true", help="60 words only: each in ~5 %% of labels")
    ap.add_argument("--phase")
    ap.add_argument("--nt")
    ap.add_argument("--home")
    a = ap.parse_args()
    if a.phase:
        result = {"load": lambda: phase_load(a.nt, a.home), "search": lambda: phase_search(a.nt, a.home, a.entities), "execute": lambda: phase_execute(a.nt, a.home)}[a.phase]()
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as tmp:
        nt = Path(tmp) / "bench.nt"
        t = time.perf_counter()
        triples = generate(nt, a.entities, realistic=not a.adversarial)
        gen_s = time.perf_counter() - t
        home = str(Path(tmp) / "home")
        load = child("load", "--nt", str(nt), "--home", home)
        srch = child("search", "--nt", str(nt), "--home", home, "--entities", str(a.entities))
        exe = child("execute", "--nt", str(nt), "--home", home)
    lines = [
        "# Foundation benchmarks",
        "",
        f"Machine: {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores. Generated graph: {a.entities:,} entities, {triples:,} triples ({a.entities:,} labels); generation {gen_s:.1f} s.",
        "",
        "Labels: "
        + (
            "adversarial — 60 words in all, so every word sits in ~5 % of the labels."
            if a.adversarial
            else "made-up names drawn from 3,000 first names, 60,000 Zipf-distributed surnames and 20,000 extra words (a third of labels), as varied as real names."
        ),
        "",
        "| what | result |",
        "| --- | --- |",
        f"| bulk load into Oxigraph store | {load['load_s']:.1f} s |",
        f"| name index build (first open) | {load['index_s']:.1f} s, {load['items']:,} items |",
        f"| reopen (store and index reused) | {load['reopen_s']:.2f} s |",
        f"| peak memory, load + index | {load['peak_mb']:.0f} MiB |",
        f"| search p50 / p95 over {a.entities:,} labels ({srch['queries']} queries: partial, exact, misspelt) | {srch['p50_ms']:.1f} ms / {srch['p95_ms']:.1f} ms |",
        f"| execute path, {len(QUERIES)} queries, sum of medians: sparqlnav vs raw pyoxigraph | {exe['ours_total_ms']:.1f} ms vs {exe['raw_total_ms']:.1f} ms = {exe['ratio_total']:.2f}× |",
        "",
        "Per query (median ms, sparqlnav / raw):",
        "",
    ]
    for q, pq in zip(QUERIES, exe["per_query"], strict=True):  # type: ignore[call-overload]
        lines.append(f"- {pq['ours_ms']:.2f} / {pq['raw_ms']:.2f} — `{q[:90]}`")
    text = "\n".join(lines) + "\n"
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
