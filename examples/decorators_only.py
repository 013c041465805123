"""Tracing a RAG pipeline with decorators only: no ragtrace calls inside your functions.

Each stage function gets a decorator and ``@ragtrace.rag_pipeline`` on the request handler makes
the root span. The prompt builder is your own code, so ``@ragtrace.assembler`` *locates* its
chunks in the prompt it returns (``rag.context.inclusion_method = "located"``); build the prompt
with ``ragtrace.assemble`` to have inclusion recorded exactly (see context_managers.py).

    python examples/decorators_only.py [EXPORTER]   # console (default), jsonl:PATH or otlp
"""

from __future__ import annotations

import re
import sys
import zlib

import ragtrace

DOCS = [
    {"id": "kb-refunds", "content": "Refunds are paid back to the original card within 5 business days."},
    {"id": "kb-shipping", "content": "Shipping is free for orders over 50 euros."},
    {"id": "kb-returns", "content": "Items can be returned within 30 days of delivery for a refund."},
    {"id": "kb-warranty", "content": "Electronics carry a two-year warranty."},
]


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def vector(text: str) -> list[float]:  # a toy embedding: hashed bag of words, 16 dims
    v = [0.0] * 16
    for word in words(text):
        v[zlib.crc32(word.encode()) % 16] += 1.0
    return v


INDEX = {doc["id"]: vector(doc["content"]) for doc in DOCS}


@ragtrace.embedder(model="hashed-words-16", provider="local")
def embed(text: str) -> list[float]:
    return vector(text)


@ragtrace.retriever(data_source="kb", top_k=3)
def search(query: str, query_vector: list[float], k: int = 3) -> list[dict]:
    scores = {i: sum(a * b for a, b in zip(query_vector, v)) for i, v in INDEX.items()}
    return [dict(doc, score=scores[doc["id"]]) for doc in sorted(DOCS, key=lambda d: -scores[d["id"]])[:k]]


@ragtrace.reranker(model="word-overlap", top_n=2)
def rerank(query: str, hits: list[dict]) -> list[dict]:
    return sorted(hits, key=lambda h: -len(words(query) & words(h["content"])))[:2]


@ragtrace.assembler
def build_prompt(question: str, chunks: list[dict]) -> str:
    sources = "\n".join(f"[{n}] {c['content']}" for n, c in enumerate(chunks, 1))
    return f"Answer from the sources and cite them.\n{sources}\n\nQuestion: {question}"


@ragtrace.generator(model="extractive", provider="local")
def llm(prompt: str) -> str:  # stands in for a real model: quotes the best source and cites it
    question = words(prompt.rsplit("Question:", 1)[1])
    label, text = max(re.findall(r"^\[(\d+)\] (.+)$", prompt, re.M), key=lambda s: len(question & words(s[1])))
    return f"{text} [{label}]"


@ragtrace.rag_pipeline("support-qa", version="1")
def answer(question: str) -> str:
    hits = search(question, embed(question))
    return llm(build_prompt(question, rerank(question, hits)))


if __name__ == "__main__":
    provider = ragtrace.configure(service_name="decorators-example", exporter=(sys.argv[1:] or ["console"])[0])
    for question in ("How long do refunds take?", "Is shipping free?"):
        print(f"Q: {question}", flush=True)
        print(f"A: {answer(question)}\n", flush=True)
    provider.force_flush()
