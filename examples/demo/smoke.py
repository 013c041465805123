"""Smoke check for the offline demo pipeline: 4 questions plus one streamed generation.

OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv-demo/bin/python examples/demo/smoke.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import time

T_START = time.perf_counter()

import models
import pipeline

QUESTIONS = [
    "What is the cited-chunk recall proxy?",
    "What leaves the process in redaction mode?",
    "Which OpenTelemetry exporters can ragtrace use?",
    "What is a golden set?",
]


def main() -> None:
    t0 = time.perf_counter()
    state = pipeline.setup()
    setup_s = time.perf_counter() - t0
    parts = ", ".join(f"{k} {v:.2f}s" for k, v in state.setup_s.items())
    print(f"setup {setup_s:.2f}s ({parts}; {len(state.docs)} docs); imports {t0 - T_START:.2f}s")

    cited_any = cited_valid = 0
    per_q: list[float] = []
    last: pipeline.Answer | None = None
    for q in QUESTIONS:
        t0 = time.perf_counter()
        r = pipeline.answer(q)
        per_q.append(time.perf_counter() - t0)
        last = r
        usage = r["response"]["usage"]
        cited_any += bool(r["cited_labels"])
        cited_valid += bool(r["cited_labels"]) and not r["invalid_labels"]
        print(f"\nQ: {q}")
        print(f"  retrieved: {[d for d, _ in r['retrieved']]}")
        print(f"  context:   {[d for d, _ in r['context']]}")
        print(f"  A: {r['answer']!r}")
        print(f"  cited labels {r['cited_labels']} -> {r['cited_ids']}  invalid {r['invalid_labels']}")
        stages = " ".join(f"{k}={v * 1000:.0f}ms" for k, v in r["timings_s"].items())
        print(
            f"  {per_q[-1]:.2f}s [{stages}] tokens prompt={usage['prompt_tokens']} completion={usage['completion_tokens']}"
            f" cached={usage.get('prompt_tokens_details', {}).get('cached_tokens')}"
        )

    # Streaming variant of the same generate call (not part of answer()).
    assert last is not None
    t0 = time.perf_counter()
    first: float | None = None
    chunks = []
    for c in state.llm.stream(last["messages"], max_tokens=pipeline.MAX_TOKENS):
        if first is None and any((ch.get("delta") or {}).get("content") for ch in c.get("choices") or []):
            first = time.perf_counter() - t0
        chunks.append(c)
    streamed = models.collect_stream(chunks)
    same = models.response_text(streamed) == last["answer"]
    print(
        f"\nstream: {len(chunks)} chunks, first token {first or 0:.2f}s, total {time.perf_counter() - t0:.2f}s,"
        f" usage {streamed.get('usage', {}).get('completion_tokens')} tokens, same text as non-streamed: {same}"
    )
    if not same:  # llama.cpp reused a different prompt-cache prefix -> tiny numeric drift at temperature 0
        print(f"  streamed: {models.response_text(streamed)!r}")

    print(
        f"\n{cited_any}/{len(QUESTIONS)} answers contain a [n] label, {cited_valid} only in-range labels; per question"
        f" {min(per_q):.2f}-{max(per_q):.2f}s; whole run {time.perf_counter() - T_START:.2f}s"
    )


if __name__ == "__main__":
    main()
