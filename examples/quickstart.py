"""A small self-contained RAG pipeline traced with ragtrace (no model downloads, no network).

The "model" here is deliberately tiny: a hashed bag-of-words embedding, cosine retrieval, a
word-overlap reranker and an extractive "LLM" that quotes the best sentence and cites it. The
tracing is exactly what you would write around real components. Run: ``python examples/quickstart.py``.
"""

from __future__ import annotations

import math
import re
import sys
import zlib
from collections import Counter

import ragtrace

CORPUS = {
    "spans": "ragtrace creates one span per stage: embed, retrieve, rerank, assemble and generate.",
    "inclusion": "The assemble stage records which chunk landed at which position of the prompt.",
    "citations": "Citations such as [2] in the answer are mapped back to the chunk shown as [2].",
    "recall": "The recall proxy is the share of retrieved chunks that the answer cites.",
    "blind-spot": "A proxy cannot see a relevant chunk that was never retrieved; use a golden set for that.",
    "redaction": "Redaction mode keeps ids, scores and counts; no text leaves the process.",
    "exporters": "Spans go to any OpenTelemetry exporter: console, OTLP or a JSON lines file.",
    "precision": "Context precision is the share of retrieved chunks that reached the prompt.",
}
WORD = re.compile(r"[a-z0-9]+")


def embed_text(text: str, dims: int = 64) -> list[float]:
    counts = Counter(zlib.crc32(word.encode()) % dims for word in WORD.findall(text.lower()))
    norm = math.sqrt(sum(c * c for c in counts.values())) or 1.0
    return [counts.get(i, 0) / norm for i in range(dims)]


INDEX = {doc_id: embed_text(text) for doc_id, text in CORPUS.items()}


@ragtrace.retriever(data_source="quickstart-docs", top_k=5)
def search(query: str, k: int = 5) -> list[dict]:
    vector = embed_text(query)
    scored = sorted(((sum(a * b for a, b in zip(vector, v)), i) for i, v in INDEX.items()), reverse=True)
    return [{"id": i, "score": round(s, 4), "content": CORPUS[i]} for s, i in scored[:k]]


@ragtrace.reranker(model="word-overlap", top_n=3)
def rerank(query: str, hits: list[dict]) -> list[dict]:
    words = set(WORD.findall(query.lower()))
    rescored = [(len(words & set(WORD.findall(h["content"].lower()))), h) for h in hits]
    return [dict(h, score=float(s)) for s, h in sorted(rescored, key=lambda p: -p[0])[:3]]


@ragtrace.generator(model="extractive-demo", provider="local")
def llm(prompt: str) -> str:
    """Quotes the source sentence sharing most words with the question and cites its label."""
    question = prompt.rsplit("Question:", 1)[-1]
    words = set(WORD.findall(question.lower()))
    sources = re.findall(r"^\[(\d+)\] (.+)$", prompt, flags=re.M)
    label, text = max(sources, key=lambda s: len(words & set(WORD.findall(s[1].lower()))))
    return f"{text} [{label}]"


def answer(question: str) -> ragtrace.RagPipeline:
    with ragtrace.rag_pipeline("quickstart", query=question, version="1") as run:
        with ragtrace.embed(model="hashed-bow-64", provider="local") as e:
            e.record(embed_text(question), input_tokens=len(question.split()))
        hits = search(question)
        kept = rerank(question, hits)
        with ragtrace.assemble(max_tokens=60) as ctx:
            for chunk in kept:
                ctx.add(chunk)
            prompt = ctx.render(question=question)
        print(f"Q: {question}\nA: {llm(prompt)}\n")
    return run


def main() -> int:
    provider = ragtrace.configure(service_name="ragtrace-quickstart", exporter="console")
    runs = [answer(q) for q in ("What does the recall proxy measure?", "Which exporters can receive spans?")]
    if provider is not None:
        provider.force_flush()
    for run in runs:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in run.metrics.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
