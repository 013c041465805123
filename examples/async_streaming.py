"""An asyncio RAG pipeline with a streamed answer, several requests running concurrently.

``async with ragtrace.rag_pipeline(...)`` opens the root span; the decorators work on coroutines
and on async generators. A decorated async generator keeps its span open until the stream ends
and parses citations once, from the whole answer. Pipeline state lives in ``contextvars``, so
three questions answered at the same time never mix chunks or figures.

    python examples/async_streaming.py [EXPORTER]   # console (default), jsonl:PATH or otlp
"""

from __future__ import annotations

import asyncio
import re
import sys

import ragtrace

DOCS = {
    "faq-refunds": "Refunds reach the original card within 5 business days.",
    "faq-shipping": "Shipping is free for orders over 50 euros.",
    "faq-returns": "Items can be returned within 30 days of delivery.",
    "faq-warranty": "Electronics carry a two-year warranty.",
}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@ragtrace.retriever(data_source="faq", top_k=2)
async def search(query: str, k: int = 2) -> list[dict]:
    await asyncio.sleep(0.01)  # a network round trip to the vector store
    ranked = sorted(DOCS, key=lambda i: (-len(words(query) & words(DOCS[i])), i))
    return [{"id": i, "content": DOCS[i], "score": len(words(query) & words(DOCS[i]))} for i in ranked[:k]]


@ragtrace.generator(model="tiny-streamer", provider="local")
async def stream_answer(prompt: str):
    """Stands in for a streaming chat model: yields the first source, word by word, then its label."""
    first = re.search(r"^\[1\] (.+)$", prompt, re.M).group(1)
    for piece in [*(w + " " for w in first.split()), "[1]"]:
        await asyncio.sleep(0.001)
        yield piece


async def answer(question: str) -> tuple[str, dict]:
    async with ragtrace.rag_pipeline("async-faq", query=question) as run:
        hits = await search(question)
        async with ragtrace.assemble() as ctx:
            for hit in hits:
                ctx.add(hit)
            prompt = ctx.render(question=question)
        pieces = [piece async for piece in stream_answer(prompt)]  # e.g. forward each to a websocket
    return "".join(pieces), run.metrics


async def main() -> None:
    questions = ["How long do refunds take?", "Is shipping free?", "What warranty do electronics carry?"]
    for question, (text, metrics) in zip(questions, await asyncio.gather(*map(answer, questions))):
        print(f"Q: {question}\nA: {text}\n   in_context={metrics['in_context']} cited={metrics['cited']} "
              f"recall_proxy={metrics['recall_proxy']}")


if __name__ == "__main__":
    provider = ragtrace.configure(service_name="async-example", exporter=(sys.argv[1:] or ["console"])[0])
    asyncio.run(main())
    provider.force_flush()
