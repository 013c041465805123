"""The OpenAI SDK integration's cost: added time per ``chat.completions.create``, and per RAG request
(``vector_stores.search`` then the completion answering from it), side by side in one run.

One SDK call (no retrieval or assembly: the integration's own cost), then one request (ragtrace's
automatic root, retrieve span, located assembly and figures on top), each
against an in-process transport (``httpx.MockTransport`` answering a fixed completion, so
no network time hides the instrumentation's), called ``CALLS`` times per round in four modes,
interleaved over ``REPEATS`` rounds: ``plain``, ``ragtrace`` (``ragtrace.instrument("openai")``),
``openinference`` (OpenInference's ``OpenAIInstrumentor``) and ``both``. Every mode exports to the
same SDK TracerProvider with a processor that drops the spans. Figures: medians of per-round wall
time per call and their ratios. No target: figures to report (docs/integrations.md).

    python bench/bench_openai.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import openai  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor  # noqa: E402
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider  # noqa: E402

import ragtrace  # noqa: E402
from interleaved import medians, table  # noqa: E402

CALLS, REPEATS, WARMUP = 20, 5, 5
MODES = ("plain", "ragtrace", "openinference", "both")
COMPLETION = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 1_700_000_000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Refunds take 5 business days [1]."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 42, "completion_tokens": 9, "total_tokens": 51},
}
MESSAGES = [{"role": "user", "content": "Sources:\n[1] Refunds reach the original card within 5 business days.\n\nQuestion: How long does a refund take?"}]
CHUNKS = ["Refunds reach the original card within 5 business days.", "Store credit is issued immediately instead of a refund.", "Shipping is free for orders over 50 euros."]
SEARCH_PAGE = {
    "object": "vector_store.search_results.page",
    "search_query": ["How long does a refund take?"],
    "data": [{"file_id": f"file-{n}", "filename": f"{n}.md", "score": 0.9 - n / 10, "attributes": {}, "content": [{"type": "text", "text": t}]} for n, t in enumerate(CHUNKS)],
    "has_more": False,
    "next_page": None,
}


class Drop(SpanProcessor):
    """Ends spans and keeps nothing: the exporter's cost is not the instrumentation's."""


def main() -> int:
    provider = TracerProvider()
    provider.add_span_processor(Drop())
    ragtrace.configure(tracer_provider=provider)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=SEARCH_PAGE if request.url.path.endswith("/search") else COMPLETION))
    client = openai.OpenAI(api_key="sk-bench", base_url="http://bench.invalid/v1", http_client=httpx.Client(transport=transport))

    def switch(mode: str) -> None:
        ragtrace.uninstrument("openai")
        if OpenInferenceInstrumentor().is_instrumented_by_opentelemetry:
            OpenInferenceInstrumentor().uninstrument()
        if mode in ("ragtrace", "both"):
            ragtrace.instrument("openai")
        if mode in ("openinference", "both"):
            OpenInferenceInstrumentor().instrument(tracer_provider=provider)

    median = medians(MODES, switch, lambda: client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES), calls=CALLS, repeats=REPEATS, warmup=WARMUP)
    table(f"OpenAI SDK chat.completions.create, {CALLS} calls x {REPEATS} rounds per mode (median wall time per call)", median)

    def request() -> None:
        found = list(client.vector_stores.search("vs_bench", query="How long does a refund take?", max_num_results=3))
        sources = "\n".join(f"[{n}] {result.content[0].text}" for n, result in enumerate(found[:2], 1))
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: How long does a refund take?"}])

    median = medians(MODES, switch, request, calls=CALLS, repeats=REPEATS, warmup=WARMUP)
    table(f"A RAG request: vector_stores.search + chat.completions.create, {CALLS} x {REPEATS} rounds (median wall time per request)", median)
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
