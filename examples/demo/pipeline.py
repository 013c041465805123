"""A real, fully offline RAG pipeline over the shipped corpus, traced with ragtrace.

    embed(question) -> search(top 6, faiss) -> rerank(top 3, BM25) -> assemble([1]..[3]) -> generate

Components (models.py): all-MiniLM-L6-v2 run in numpy, a faiss inner-product index, rank-bm25,
and SmolLM2-135M-Instruct through xllamacpp on one thread. Each stage is traced the way a user
would trace their own code: decorators on the stage functions, ``ragtrace.assemble`` to build the
prompt (so inclusion is recorded, not guessed) and ``ragtrace.rag_pipeline`` around the whole.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import models  # sibling module: run from examples/demo or put it on sys.path
import ragtrace
from models import ChatResponse, Doc, Hit, Message

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
DATA_SOURCE = "ragtrace-docs"
RETRIEVE_K = 6
RERANK_TOP_N = 3
MAX_TOKENS = 64

SYSTEM_PROMPT = (
    "You answer questions using only the numbered sources. "
    "Answer in one or two short sentences and start with the number of the source you used: [1], [2] or [3]."
)
# A 135M model copies well and cites rarely: one worked example shows the shape it can follow (the
# source's own sentence, the source's number first), and the answer turn is opened with "[" (a
# prefill: the model goes on from it), so the model names its source before it writes. Which
# number it names, and whether that source was in the prompt, is the model's: the figures say.
# Decoding stops at the first line break, which ends the answer before the model starts echoing
# the next source's header or repeating itself (examples/demo/README.md).
FEW_SHOT: list[Message] = [
    {
        "role": "user",
        "content": "Sources:\n[1] # Sky colour\n\nThe sky looks blue because air scatters blue light more than red light. "
        "At sunset the light travels further, so it looks red.\n\n[2] # Grass\n\nGrass is green because it contains chlorophyll.\n\n"
        "Question: Why is the sky blue?\nAnswer briefly and cite a source like [1].",
    },
    {"role": "assistant", "content": "[1] The sky looks blue because air scatters blue light more than red light."},
]
ANSWER_PREFILL = "["
TEMPLATE: list[Message] = [
    {"role": "system", "content": SYSTEM_PROMPT},
    *FEW_SHOT,
    {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}\nAnswer briefly and cite a source like [1]."},
    {"role": "assistant", "content": ANSWER_PREFILL},
]
STOP = ["\n"]

# The demo's Hit objects are read by accessors, as any custom document type would be.
HIT_ACCESSORS: dict[str, Any] = {
    "id_of": lambda hit: hit.doc.id,
    "content_of": lambda hit: hit.doc.text,
    "score_of": lambda hit: hit.score,
}


@dataclass
class Components:
    docs: list[Doc]
    embedder: models.MiniLMEmbedder
    index: models.VectorIndex
    llm: models.SmolLM


_components: Components | None = None


def load_corpus(corpus_dir: Path = CORPUS_DIR) -> list[Doc]:
    """One Doc per Markdown file; its id is the file stem."""
    return [Doc(p.stem, p.read_text(encoding="utf-8").strip()) for p in sorted(corpus_dir.glob("*.md"))]


def setup() -> Components:
    """Load the models and embed the corpus, once (not traced: it is start-up, not a request)."""
    global _components
    if _components is None:
        embedder = models.MiniLMEmbedder()
        docs = load_corpus()
        index = models.VectorIndex(embedder.dim)
        index.add(docs, embedder.embed([d.text for d in docs]))
        _components = Components(docs, embedder, index, models.SmolLM())
    return _components


@ragtrace.embedder(model="all-MiniLM-L6-v2", provider="local")
def embed(texts: Sequence[str]) -> np.ndarray:
    return setup().embedder.embed(texts)


@ragtrace.retriever(data_source=DATA_SOURCE, top_k=RETRIEVE_K, **HIT_ACCESSORS)
def search(query: str, vector: np.ndarray, k: int = RETRIEVE_K) -> list[Hit]:
    return setup().index.search(vector, k)


@ragtrace.reranker(model="bm25", provider="rank-bm25", top_n=RERANK_TOP_N, **HIT_ACCESSORS)
def rerank(query: str, hits: Sequence[Hit], top_n: int = RERANK_TOP_N) -> list[Hit]:
    return models.bm25_rerank(query, hits, top_n)


@ragtrace.generator(model="SmolLM2-135M-Instruct", provider="local")
def generate(messages: Sequence[Message], max_tokens: int = MAX_TOKENS, temperature: float = 0.0) -> ChatResponse:
    # cache_prompt=False keeps answers identical from run to run (llama.cpp's prompt cache can
    # change a word at temperature 0)
    # the reply includes the prefilled "[" (llama.cpp continues the open assistant turn)
    return setup().llm.generate(messages, max_tokens=max_tokens, temperature=temperature, stop=STOP, cache_prompt=False)


def answer(question: str, session_id: str | None = None) -> tuple[str, ragtrace.RagPipeline]:
    """Answer one question; returns the answer text and the pipeline run (``run.metrics``)."""
    setup()
    with ragtrace.rag_pipeline("ragtrace-docs-qa", query=question, version="1", session_id=session_id) as run:
        vector = embed([question])[0]
        hits = search(question, vector)
        top = rerank(question, hits)
        with ragtrace.assemble(max_tokens=400, id_of=HIT_ACCESSORS["id_of"], content_of=HIT_ACCESSORS["content_of"]) as ctx:
            for hit in top:
                ctx.add(hit)
            messages = ctx.render(TEMPLATE, question=question)
        response = generate(messages)
    return models.response_text(response), run
