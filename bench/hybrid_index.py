"""Hybrid documents benchmark: build time and memory of the document index for N passages (default 10,000),
and retrieval latency (p50, p95) over the passages.

The corpus is synthetic but shaped like the demo one: JSONL records `{id, title, text}` whose sentences are
drawn (seeded) from the bundled demo articles, with the names of elements and people shuffled so that no two
records are the same. Everything else is real: `DocumentCorpus` reads and cuts the file, `LocalIndex` builds
(BM25, plus MiniLM vectors with `--embedder minilm`) and searches.

Run: .venv/bin/python bench/hybrid_index.py [--passages 10000] [--embedder none|minilm] [--queries 200]
Memory is the growth of the process's peak resident set (ru_maxrss) over the build.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import statistics
import tempfile
import time
from pathlib import Path

from sparqlnav.retrieval.documents import DocumentCorpus
from sparqlnav.retrieval.embed import make_embedder
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.strategies.hybrid import demo_docs


def seed_sentences() -> list[str]:
    """Sentences of the demo corpus's passages."""
    corpus = DocumentCorpus(Path(tempfile.mkdtemp()) / "seed.json")
    corpus.update([demo_docs()])
    out: list[str] = []
    for doc in corpus.documents():
        if doc.kind == "passage":
            out += [s for s in re.split(r"(?<=[.!?])\s+", doc.content) if len(s.split()) > 4]
    return out


def write_corpus(path: Path, n: int, rng: random.Random) -> None:
    """N records of three to five sentences each, names shuffled."""
    sentences = seed_sentences()
    names = sorted({w for s in sentences for w in re.findall(r"\b[A-Z][a-z]{3,}\b", s)})
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            picked = rng.sample(sentences, rng.randint(3, 5))
            text = " ".join(re.sub(r"\b[A-Z][a-z]{3,}\b", lambda _m: rng.choice(names), s) for s in picked)
            fh.write(json.dumps({"id": f"doc-{i}", "title": f"{rng.choice(names)} {i}", "text": text}) + "\n")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--embedder", default="none")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(0)
    folder = Path(tempfile.mkdtemp(prefix="hybrid-bench-"))
    source = folder / "corpus.jsonl"
    write_corpus(source, args.passages, rng)
    embedder = make_embedder(args.embedder)
    before = rss_mb()
    started = time.perf_counter()
    corpus = DocumentCorpus(folder / "documents.json")
    stats = corpus.update([source])
    read_s = time.perf_counter() - started
    docs = corpus.documents()
    index = LocalIndex(folder / "index.sqlite", embedder)
    built = index.build(docs)
    total_s = time.perf_counter() - started
    queries = [" ".join(rng.sample(d.content.split(), 6)) for d in rng.sample(docs, args.queries)]
    index.search(queries[0], k=5, kinds=["passage"])  # loads the index into memory
    loaded = rss_mb()
    latencies = []
    for q in queries:
        t = time.perf_counter()
        index.search(q, k=5, kinds=["passage"])
        latencies.append((time.perf_counter() - t) * 1000)
    latencies.sort()
    again = time.perf_counter()
    unchanged = DocumentCorpus(folder / "documents.json").update([source])
    refresh_s = time.perf_counter() - again
    print(json.dumps({
        "passages": stats.passages, "embedder": args.embedder, "read_s": round(read_s, 2),
        "index_build_s": round(built.seconds, 2), "total_build_s": round(total_s, 2),
        "rss_growth_mb": round(loaded - before, 1), "index_file_mb": round((folder / "index.sqlite").stat().st_size / 2**20, 1),
        "search_p50_ms": round(statistics.median(latencies), 2),
        "search_p95_ms": round(latencies[int(0.95 * len(latencies)) - 1], 2),
        "refresh_unchanged_s": round(refresh_s, 2), "refresh_read": unchanged.read,
    }))
    index.close()


if __name__ == "__main__":
    main()
