"""Redaction: the same pipeline in the three content modes, and a custom redactor.

* ``"full"`` records content (query, chunk text, prompt, answer), each value passed through your
  ``redactor`` first: here it masks e-mail addresses and card numbers;
* ``"redact"`` records no content at all: ids, scores, positions, tokens, counts and figures only;
* ``"hash"`` is ``"redact"`` plus a content hash per chunk, so duplicates can still be found.

Set it for the process (``configure(capture_content=...)`` or ``RAGTRACE_CAPTURE_CONTENT``) or per
pipeline, as below. Citations and figures are computed in-process before anything is dropped, so
they are the same in every mode.

    python examples/redaction.py [EXPORTER]   # console (default), jsonl:PATH or otlp
"""

from __future__ import annotations

import re
import sys

import ragtrace

QUESTION = "I am jane.doe@example.com, why was card 4111 1111 1111 1111 declined?"
HITS = [
    {"id": "kb-declined", "score": 0.9, "content": "Declined cards: ask the bank, or write to billing@shop.example."},
    {"id": "kb-limits", "score": 0.6, "content": "Daily card limits are set by the issuing bank."},
]


def mask(text: str) -> str:  # a redactor: str -> str, applied to every content value in "full" mode
    text = re.sub(r"[\w.+-]+@[\w-]+(\.[\w-]+)+", "<email>", text)
    return re.sub(r"\b\d(?:[ -]?\d){12,18}\b", "<card>", text)


def answer(mode: str) -> dict:
    redactor = mask if mode == "full" else None
    with ragtrace.rag_pipeline("billing-help", query=QUESTION, capture_content=mode, redactor=redactor) as run:
        with ragtrace.retrieve(QUESTION, data_source="kb") as r:
            r.record(HITS)
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks:
                ctx.add(chunk)
            prompt = ctx.render(question=QUESTION)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record("Your bank declined it; you can also write to billing@shop.example [1].")
    return run.metrics


if __name__ == "__main__":
    provider = ragtrace.configure(service_name="redaction-example", exporter=(sys.argv[1:] or ["console"])[0])
    for mode in ("full", "redact", "hash"):
        metrics = answer(mode)
        print(f"{mode:6}  cited={metrics['cited']} recall_proxy={metrics['recall_proxy']} "
              f"context_utilization={metrics['context_utilization']}", flush=True)
    provider.force_flush()
