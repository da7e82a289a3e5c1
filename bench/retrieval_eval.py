"""Retrieval quality and cost of the index on the SIB sparql-examples (leave-one-out), and the index's build
time, peak memory and search latency with UniProt's class shapes added.

    .venv/bin/python bench/retrieval_eval.py [--data DIR] [--out bench/results/retrieval.md] [--latency N]

Quality: each example's question is a query; the example itself is left out of what it may retrieve; the
k retrieved examples are judged by (1) the share of the held-out query's predicates and classes that
appear in the retrieved queries and (2) whether they target the same endpoint (capped recall@k, MRR).
Modes: lexical (BM25), dense (numpy all-MiniLM-L6-v2), hybrid (reciprocal rank fusion of both), and a
seeded random draw for reference. Build and latency are measured in child processes so peak memory is
the build's own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sparqlnav.retrieval.embed import Embedder, Matrix, MiniLMEmbedder
from sparqlnav.retrieval.examples import Example, load_examples
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import example_doc
from sparqlnav.sparql.check import endpoint_key
from sparqlnav.sparql.parser import (
    RDF_TYPE,
    Iri,
    PathAlt,
    PathInv,
    PathLink,
    PathMod,
    PathSeq,
    Var,
    parse_query,
)

REPO = Path(__file__).resolve().parent.parent
KS = (5, 10)
MRR_DEPTH = 100


class CachedEmbedder:
    """The same embedder, remembering vectors so the three modes embed each question once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[t] = v
        return np.vstack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


@dataclass
class Features:
    """What a query uses."""

    predicates: set[str] = field(default_factory=set)
    classes: set[str] = field(default_factory=set)


def links(path: Any) -> set[str]:
    """Predicate IRIs named by a predicate or property path (negated sets name what is excluded: left out)."""
    if isinstance(path, Iri):
        return {path.value}
    if isinstance(path, PathLink):
        return {path.iri}
    if isinstance(path, PathInv | PathMod):
        return links(path.path)
    if isinstance(path, PathSeq):
        return set().union(*(links(p) for p in path.parts))
    if isinstance(path, PathAlt):
        return set().union(*(links(p) for p in path.options))
    return set()


def features(query: str) -> Features:
    """Predicates (rdf:type aside) and classes (objects of rdf:type) of a query, SERVICE blocks included."""
    parsed = parse_query(query, collect_undefined_prefixes=True)
    out = Features()
    for p in parsed.patterns:
        named = set() if isinstance(p.predicate, Var) else links(p.predicate)
        out.predicates |= named - {RDF_TYPE}
        if RDF_TYPE in named and isinstance(p.object, Iri):
            out.classes.add(p.object.value)
    return out


@dataclass
class Scores:
    """Per-question values of one mode and k."""

    pred_cov: list[float] = field(default_factory=list)
    class_cov: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    precision: list[float] = field(default_factory=list)
    by_endpoint: dict[str, list[tuple[float | None, float | None]]] = field(default_factory=lambda: defaultdict(list))


def coverage(wanted: set[str], got: set[str]) -> float | None:
    return len(wanted & got) / len(wanted) if wanted else None


def evaluate(examples: list[Example], feats: dict[str, Features], ranked: dict[str, list[str]]) -> tuple[dict[int, Scores], list[float]]:
    """Scores at each k, and the reciprocal rank of the first same-endpoint example per question."""
    ep = {e.id: endpoint_key(e.endpoint) if e.endpoint else "" for e in examples}
    per_endpoint: dict[str, int] = defaultdict(int)
    for e in examples:
        per_endpoint[ep[e.id]] += 1
    out = {k: Scores() for k in KS}
    rr: list[float] = []
    for e in examples:
        others = [i for i in ranked[e.id] if i != e.id]
        same_total = per_endpoint[ep[e.id]] - 1
        first = next((n for n, i in enumerate(others[:MRR_DEPTH], start=1) if ep[i] == ep[e.id]), None)
        if same_total:
            rr.append(1.0 / first if first else 0.0)
        for k in KS:
            top = others[:k]
            got = Features()
            for i in top:
                got.predicates |= feats[i].predicates
                got.classes |= feats[i].classes
            s = out[k]
            pc = coverage(feats[e.id].predicates, got.predicates)
            cc = coverage(feats[e.id].classes, got.classes)
            if pc is not None:
                s.pred_cov.append(pc)
            if cc is not None:
                s.class_cov.append(cc)
            same = sum(1 for i in top if ep[i] == ep[e.id])
            if same_total:
                s.recall.append(same / min(k, same_total))
            s.precision.append(same / max(len(top), 1))
            s.by_endpoint[ep[e.id]].append((pc, same / min(k, same_total) if same_total else None))
    return out, rr


def mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def macro(s: Scores, which: int) -> float:
    """Mean over endpoints of the per-endpoint mean (0: predicate coverage, 1: recall)."""
    vals = []
    for rows in s.by_endpoint.values():
        xs = [r[which] for r in rows if r[which] is not None]
        if xs:
            vals.append(statistics.fmean(xs))  # type: ignore[arg-type]
    return mean(vals)


def ranked_lists(index: LocalIndex, examples: list[Example], mode: str) -> dict[str, list[str]]:
    """Each question's ranking of example ids (its own example included; dropped when scoring)."""
    questions = [e.question for e in examples]
    out: dict[str, list[str]] = {}
    step = 256
    for start in range(0, len(questions), step):
        lists = index.search_many(questions[start : start + step], k=MRR_DEPTH + 1, kinds=["example"], mode=mode)  # type: ignore[arg-type]
        for e, hits in zip(examples[start : start + step], lists, strict=True):
            out[e.id] = [h.doc.meta["example_id"] for h in hits]
    return out


def random_lists(examples: list[Example], seed: int = 0) -> dict[str, list[str]]:
    rng = random.Random(seed)
    ids = [e.id for e in examples]
    out = {}
    for e in examples:
        order = ids[:]
        rng.shuffle(order)
        out[e.id] = order[: MRR_DEPTH + 1]
    return out


# ------------------------------------------------------------------------------ build and latency (child)

CHILD = r"""
import json, statistics, sys, time
from pathlib import Path
sys.path.insert(0, {repo!r} + "/src")
from sparqlnav.retrieval.examples import load_examples
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.records import example_doc, shape_docs
from sparqlnav.graph.schema import schema_from_void_file
from sparqlnav.retrieval.embed import default_embedder

data = Path({data!r})
t0 = time.perf_counter()
examples = load_examples([data / "sparql-examples" / "examples"])
schema = schema_from_void_file(data / "void" / "void_uniprot.ttl")
docs = [example_doc(e) for e in examples] + shape_docs(schema)
loaded = time.perf_counter() - t0
embedder = default_embedder() if {dense!r} else None
index = LocalIndex(Path({path!r}), embedder)
t1 = time.perf_counter()
stats = index.build(docs)
build = time.perf_counter() - t1
t2 = time.perf_counter()
again = index.build(docs)
rebuild = time.perf_counter() - t2
changed = [d if n % 100 else type(d)(**{{**d.__dict__, "text": d.text + " (revised)"}}) for n, d in enumerate(docs)]
t3 = time.perf_counter()
partial = index.build(changed)
partial_s = time.perf_counter() - t3
# VmHWM, not ru_maxrss: the latter keeps the parent's peak across fork and exec.
peak_build = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
reopened = LocalIndex(Path({path!r}), embedder)
t4 = time.perf_counter()
reopened.search("warm up", k=10)
first = time.perf_counter() - t4
questions = [e.question for e in examples][:: max(1, len(examples) // {latency})][: {latency}]
lat = {{}}
for mode in (("lexical", "dense", "hybrid") if embedder else ("lexical",)):
    times = []
    for q in questions:
        t = time.perf_counter()
        reopened.search(q, k=10, kinds=["example"], mode=mode)
        times.append(time.perf_counter() - t)
    times.sort()
    lat[mode] = {{"p50_ms": 1000 * statistics.median(times), "p95_ms": 1000 * times[int(0.95 * (len(times) - 1))]}}
print(json.dumps({{"docs": len(docs), "examples": len(examples), "shapes": len(docs) - len(examples),
                  "load_s": loaded, "build_s": build, "rebuild_s": rebuild, "partial_s": partial_s,
                  "stats": stats.to_json(), "again": again.to_json(), "partial": partial.to_json(),
                  "first_search_s": first, "latency": lat, "peak_rss_mb": peak_build / 1024,
                  "file_mb": sum(p.stat().st_size for p in Path({path!r}).parent.glob("index.sqlite*")) / 2**20}}))
"""


def child_bench(data: Path, dense: bool, latency: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        code = CHILD.format(repo=str(REPO), data=str(data), path=str(Path(tmp) / "index.sqlite"), dense=dense, latency=latency)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"benchmark child failed:\n{proc.stderr}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result


# ------------------------------------------------------------------------------ report


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("SPARQLNAV_DATA") or REPO.parent / "shared" / "data"))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "retrieval.md")
    parser.add_argument("--latency", type=int, default=200, help="questions timed per mode")
    parser.add_argument("--skip-build", action="store_true", help="only the quality part")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    started = time.perf_counter()

    examples = load_examples([args.data / "sparql-examples" / "examples"])
    feats = {e.id: features(e.query) for e in examples}
    embedder = CachedEmbedder(MiniLMEmbedder.from_package())
    index = LocalIndex(None, embedder)
    t = time.perf_counter()
    index.build([example_doc(e) for e in examples])
    embed_s = time.perf_counter() - t
    rankings = {mode: ranked_lists(index, examples, mode) for mode in ("lexical", "dense", "hybrid")}
    rankings["random"] = random_lists(examples)
    results = {mode: evaluate(examples, feats, r) for mode, r in rankings.items()}

    n_pred = sum(1 for f in feats.values() if f.predicates)
    n_class = sum(1 for f in feats.values() if f.classes)
    endpoints: dict[str, int] = defaultdict(int)
    for e in examples:
        endpoints[endpoint_key(e.endpoint) if e.endpoint else ""] += 1
    lines = [
        "# Retrieval on the SIB sparql-examples (leave-one-out)",
        "",
        f"Generated by `bench/retrieval_eval.py` on {time.strftime('%Y-%m-%d')} ({os.cpu_count()} cores, "
        f"load average {load[0]:.1f} at start: other jobs shared the machine).",
        "",
        f"{len(examples)} examples from {len(endpoints)} endpoints (neXtProt {endpoints['sparql.nextprot.org/sparql']}, "
        f"UniProt {endpoints['sparql.uniprot.org/sparql']}, Rhea {endpoints['sparql.rhea-db.org/sparql']}, …). Each "
        "example's question is run against the index of all examples; the example itself is dropped from its own "
        "results, so it retrieves k *other* examples.",
        "",
        "- **pred. cov.@k**: share of the held-out query's predicates (rdf:type aside; SERVICE blocks included) that "
        f"occur in at least one of the k retrieved queries ({n_pred} questions have predicates).",
        f"- **class cov.@k**: the same for classes (IRIs after rdf:type/`a`; {n_class} questions have some).",
        "- **recall@k**: same-endpoint examples among the k retrieved, divided by min(k, number of other "
        "examples of that endpoint) (capped recall: 1.0 means the k slots are all same-endpoint).",
        f"- **MRR**: reciprocal rank of the first same-endpoint example within the top {MRR_DEPTH} (0 when absent).",
        "- **macro**: the mean over endpoints of per-endpoint means (neXtProt is 63% of the questions).",
        "",
        "| mode | k | pred. cov. | class cov. | recall | precision | MRR | pred. cov. macro | recall macro |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode in ("lexical", "dense", "hybrid", "random"):
        scores, rr = results[mode]
        for k in KS:
            s = scores[k]
            lines.append(
                f"| {mode} | {k} | {mean(s.pred_cov):.3f} | {mean(s.class_cov):.3f} | {mean(s.recall):.3f} | "
                f"{mean(s.precision):.3f} | {mean(rr):.3f} | {macro(s, 0):.3f} | {macro(s, 1):.3f} |"
            )
    lines += ["", "Per endpoint, hybrid, k = 10 (predicate coverage, recall):", "",
              "| endpoint | examples | pred. cov. | recall |", "|---|---|---|---|"]
    hybrid10 = results["hybrid"][0][10]
    for key, count in sorted(endpoints.items(), key=lambda kv: -kv[1]):
        rows = hybrid10.by_endpoint[key]
        pc = [r[0] for r in rows if r[0] is not None]
        rc = [r[1] for r in rows if r[1] is not None]
        lines.append(f"| {key or '(none)'} | {count} | {mean(pc):.3f} | {mean(rc):.3f} |")
    lines += ["", f"Embedding the {len(examples)} questions for this part took {embed_s:.1f} s "
              f"(numpy MiniLM, one process); the whole quality part {time.perf_counter() - started:.0f} s.", ""]

    if not args.skip_build:
        dense = child_bench(args.data, True, args.latency)
        lexical = child_bench(args.data, False, args.latency)
        lines += [
            "## Index build, memory and latency",
            "",
            f"All {dense['examples']} sparql-examples plus the {dense['shapes']} class shapes of UniProt's VoID "
            f"({dense['docs']} documents) in one `LocalIndex` (SQLite file), measured in a fresh child process on "
            f"this {os.cpu_count()}-core machine. Reading the examples and the VoID file: {dense['load_s']:.1f} s.",
            "",
            "| index | full build | rebuild, nothing changed | rebuild, 1% of texts changed | peak RSS | file |",
            "|---|---|---|---|---|---|",
            f"| hybrid (BM25 + MiniLM vectors) | {dense['build_s']:.1f} s ({dense['stats']['embedded']} texts embedded) | "
            f"{dense['rebuild_s']:.2f} s ({dense['again']['embedded']} embedded) | {dense['partial_s']:.2f} s "
            f"({dense['partial']['embedded']} embedded) | {dense['peak_rss_mb']:.0f} MB | {dense['file_mb']:.1f} MB |",
            f"| lexical only | {lexical['build_s']:.2f} s | {lexical['rebuild_s']:.2f} s | {lexical['partial_s']:.2f} s | "
            f"{lexical['peak_rss_mb']:.0f} MB | {lexical['file_mb']:.1f} MB |",
            "",
            f"Search latency over {args.latency} questions (k = 10 examples, one question at a time, after one warm-up "
            f"search that loads the index: {1000 * dense['first_search_s']:.0f} ms):",
            "",
            "| mode | p50 | p95 |",
            "|---|---|---|",
        ]
        for mode, lat in dense["latency"].items():
            lines.append(f"| {mode} | {lat['p50_ms']:.1f} ms | {lat['p95_ms']:.1f} ms |")
        lines.append("")
        lines.append("Dense and hybrid latency is dominated by embedding the question (one numpy MiniLM forward pass).")
        lines.append("")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(f"(peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
