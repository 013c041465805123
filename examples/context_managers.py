"""Tracing a RAG pipeline with context managers only: each stage is a ``with`` block you record into.

Use this form when the stages are inline code or calls into libraries you can't decorate.
``ragtrace.assemble`` builds the chat prompt itself, so inclusion is *recorded*: which chunk got
which label, what was dropped on purpose (``ctx.drop(chunk, reason=...)``) and what didn't fit
the token budget (``over_budget``). ``run.metrics`` holds the per-trace figures after the block.

    python examples/context_managers.py [EXPORTER]   # console (default), jsonl:PATH or otlp
"""

from __future__ import annotations

import sys

import ragtrace

HITS = [  # what a vector store returned for the question, best first
    {"id": "pol-refunds", "score": 0.91, "content": "Refunds reach the original card within 5 business days."},
    {"id": "pol-refunds-2019", "score": 0.88, "content": "Until 2019, refunds took 10 days.", "metadata": {"stale": True}},
    {"id": "pol-store-credit", "score": 0.80, "content": "You may choose store credit instead; it is issued at once."},
    {"id": "pol-returns", "score": 0.72, "content": "Items can be returned within 30 days of delivery. " * 4},
    {"id": "pol-shipping", "score": 0.55, "content": "Shipping is free for orders over 50 euros."},
]
TEMPLATE = [
    {"role": "system", "content": "Answer from the sources only and cite them as [n]."},
    {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
]


def fake_llm(messages: list[dict]) -> tuple[str, int, int]:
    """Stands in for a chat model: returns (answer, input tokens, output tokens)."""
    return "Refunds take 5 business days [1]; store credit is immediate [2].", 96, 14


def answer(question: str) -> ragtrace.RagPipeline:
    with ragtrace.rag_pipeline("refund-bot", query=question, query_id="q-refunds") as run:
        with ragtrace.embed(model="text-embedding-3-small", provider="openai") as e:
            e.record(dimensions=1536, input_tokens=7)
        with ragtrace.retrieve(question, data_source="policies", top_k=5) as r:
            r.record(HITS)
        with ragtrace.rerank(model="rerank-v3", provider="cohere", top_n=4) as rr:
            rr.record(HITS[:4])  # the reranker kept four; pol-shipping is "reranked_out"
        with ragtrace.assemble(max_tokens=40, truncate=False) as ctx:
            for hit in rr.chunks:
                if (hit.metadata or {}).get("stale"):
                    ctx.drop(hit, reason="stale")
                elif not ctx.add(hit):  # the long pol-returns chunk doesn't fit: over_budget
                    print(f"   (left out: {hit.id})")
            messages = ctx.render(TEMPLATE, question=question)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=messages, temperature=0) as g:
            text, tokens_in, tokens_out = fake_llm(messages)
            g.record(text, input_tokens=tokens_in, output_tokens=tokens_out)
        print(f"A: {text}")
    return run


if __name__ == "__main__":
    provider = ragtrace.configure(service_name="context-managers-example", exporter=(sys.argv[1:] or ["console"])[0])
    run = answer("How long does a refund take?")
    provider.force_flush()
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in run.metrics.items()})
