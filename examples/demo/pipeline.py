"""A plain, uninstrumented RAG pipeline over the shipped corpus.

    embed(question) -> index.search(vec, 6) -> rerank(question, hits, 3) -> assemble(question, hits)
    -> generate(messages) -> parse [n] citations

Each stage is a module-level function looked up at call time, so instrumentation can wrap
``pipeline.embed``/``pipeline.search``/``pipeline.rerank``/``pipeline.assemble``/``pipeline.generate``
(or the methods of the classes in ``models``) without editing ``answer``.
Heavy set-up (model loads and corpus embedding) happens once, in ``setup()``; ``answer()`` calls it
lazily. Nothing here prints.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

import models  # sibling module: run from examples/demo or put that folder on sys.path
from models import ChatResponse, Doc, Hit, Message

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
RETRIEVE_K = 6
RERANK_TOP_N = 3
MAX_TOKENS = 64

SYSTEM_PROMPT = (
    "You answer questions using only the numbered sources. "
    "Answer in one or two short sentences and cite the source you used as [1], [2] or [3]."
)
# Appended to the real question only (also adding it to the few-shot turn lowered the citation rate).
REMINDER = "Answer briefly and cite a source like [1]."
# One worked example, so the 135M model sees what a cited answer looks like.
FEW_SHOT: list[Message] = [
    {
        "role": "user",
        "content": "Sources:\n[1] The sky looks blue because air scatters blue light more than red light.\n"
        "[2] Grass is green because it contains chlorophyll.\n\nQuestion: Why is the sky blue?",
    },
    {"role": "assistant", "content": "Air scatters blue light more than red light [1]."},
]


class Answer(TypedDict):
    question: str
    answer: str  # choices[0].message.content
    cited_labels: list[int]  # distinct [n] labels in order of appearance
    cited_ids: list[str]  # doc ids of the valid labels
    invalid_labels: list[int]  # labels outside 1..len(context)
    retrieved: list[tuple[str, float]]  # (doc id, cosine) from the vector index, best first
    context: list[tuple[str, float]]  # (doc id, BM25 score) in label order: [1] is context[0]
    messages: list[Message]  # exactly what was sent to the model
    response: ChatResponse  # OpenAI-style dict from xllamacpp (choices, usage, timings)
    timings_s: dict[str, float]  # wall time per stage


@dataclass
class State:
    docs: list[Doc]
    embedder: models.MiniLMEmbedder
    index: models.VectorIndex
    llm: models.SmolLM
    setup_s: dict[str, float]


_state: State | None = None


def load_corpus(corpus_dir: Path = CORPUS_DIR) -> list[Doc]:
    """One Doc per Markdown file; id = file stem. The leading '# Title' line is kept in the text."""
    return [Doc(p.stem, p.read_text(encoding="utf-8").strip()) for p in sorted(corpus_dir.glob("*.md"))]


def setup(corpus_dir: Path = CORPUS_DIR) -> State:
    """Load the models and embed the corpus (idempotent)."""
    global _state
    if _state is not None:
        return _state
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    embedder = models.MiniLMEmbedder()
    t["load_embedder"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    llm = models.SmolLM()
    t["load_llm"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    docs = load_corpus(corpus_dir)
    index = models.VectorIndex(embedder.dim)
    index.add(docs, embedder.embed([d.text for d in docs]))
    t["embed_corpus"] = time.perf_counter() - t0
    _state = State(docs, embedder, index, llm, t)
    return _state


# ---- stages ---------------------------------------------------------------------------------


def embed(texts: Sequence[str]) -> np.ndarray:
    return setup().embedder.embed(texts)


def search(vec: np.ndarray, k: int = RETRIEVE_K) -> list[Hit]:
    return setup().index.search(vec, k)


def rerank(query: str, hits: Sequence[Hit], top_n: int = RERANK_TOP_N) -> list[Hit]:
    return models.bm25_rerank(query, hits, top_n)


def assemble(question: str, hits: Sequence[Hit]) -> list[Message]:
    """Chat messages whose context labels hits as [1], [2], ... in the given order."""
    sources = "\n\n".join(f"[{i}] {h.doc.text}" for i, h in enumerate(hits, 1))
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        *FEW_SHOT,
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}\n{REMINDER}"},
    ]


def generate(messages: Sequence[Message], max_tokens: int = MAX_TOKENS) -> ChatResponse:
    return setup().llm.generate(messages, max_tokens=max_tokens, temperature=0.0)


_CITE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def cited_labels(text: str) -> list[int]:
    """Distinct citation labels in order of first appearance: "[2] ... [1, 3]" -> [2, 1, 3]."""
    seen: list[int] = []
    for m in _CITE.finditer(text):
        for n in m.group(1).split(","):
            if int(n) not in seen:
                seen.append(int(n))
    return seen


# ---- the pipeline ---------------------------------------------------------------------------


def answer(question: str, k: int = RETRIEVE_K, top_n: int = RERANK_TOP_N) -> Answer:
    setup()
    t: dict[str, float] = {}

    t0 = time.perf_counter()
    vec = embed([question])[0]
    t["embed"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    hits = search(vec, k)
    t["retrieve"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    top = rerank(question, hits, top_n)
    t["rerank"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    messages = assemble(question, top)
    t["assemble"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    response = generate(messages)
    t["generate"] = time.perf_counter() - t0

    text = models.response_text(response)
    labels = cited_labels(text)
    context_ids = [h.doc.id for h in top]  # label n -> context_ids[n-1]
    return {
        "question": question,
        "answer": text,
        "cited_labels": labels,
        "cited_ids": [context_ids[n - 1] for n in labels if 1 <= n <= len(context_ids)],
        "invalid_labels": [n for n in labels if not 1 <= n <= len(context_ids)],
        "retrieved": [(h.doc.id, h.score) for h in hits],
        "context": [(h.doc.id, h.score) for h in top],
        "messages": messages,
        "response": response,
        "timings_s": t,
    }
