"""RAG with the Anthropic SDK alone: the app searches its own knowledge base and hands Claude the
results as ``search_result`` blocks with citations on; Claude's answer says which result each
sentence cites.

``ragtrace.instrument()`` is the one line the app needs. The call becomes one pipeline: a retrieve
span of the results, an assembly the API itself states (``inclusion_method = "provider"``) and a
generate span whose citations are the response's own citation objects, so every figure is exact
and nothing is parsed. The lines ending in ``# ragtrace`` are the only ones the uninstrumented app
lacks (tests/test_examples_providers.py runs it without them too). Needs ``pip install
'ragtrace[anthropic]' anthropic``; reads ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL`` (optional)
and ``ANTHROPIC_MODEL`` (default claude-sonnet-4-5).

    ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic_citations.py [--stream] [console|jsonl:PATH]
"""

from __future__ import annotations

import os
import re
import sys

import anthropic

import ragtrace  # ragtrace

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")
KNOWLEDGE_BASE = [
    ("kb/refunds", "Refunds", "Refunds reach the original card within 5 business days."),
    ("kb/store-credit", "Store credit", "Store credit is issued immediately instead of a refund."),
    ("kb/shipping", "Shipping", "Shipping is free for orders over 50 euros."),
    ("kb/gift-cards", "Gift cards", "Gift cards never expire."),
]


def search(question: str, k: int = 3) -> list[tuple[str, str, str]]:
    """The app's own retriever: the entries sharing most words with the question (stable order)."""
    words = set(re.findall(r"\w+", question.lower()))
    overlap = [len(words & set(re.findall(r"\w+", (title + " " + text).lower()))) for _, title, text in KNOWLEDGE_BASE]
    ranked = sorted(range(len(KNOWLEDGE_BASE)), key=lambda i: -overlap[i])
    return [KNOWLEDGE_BASE[i] for i in ranked[:k]]


def answer(client: anthropic.Anthropic, question: str, stream: bool) -> tuple[str, list[str]]:
    results = [
        {"type": "search_result", "source": source, "title": title, "content": [{"type": "text", "text": text}], "citations": {"enabled": True}}
        for source, title, text in search(question)
    ]
    options = {"model": MODEL, "max_tokens": 300, "messages": [{"role": "user", "content": [*results, {"type": "text", "text": question}]}]}
    if stream:
        with client.messages.stream(**options) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**options)
    text = "".join(block.text for block in message.content if block.type == "text")
    cited = [c.source for block in message.content if block.type == "text" for c in block.citations or () if c.type == "search_result_location"]
    return text, list(dict.fromkeys(cited))


if __name__ == "__main__":
    if not os.environ.get("ANTHROPIC_API_KEY"):
        sys.exit("set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another endpoint)")
    args = [a for a in sys.argv[1:] if a != "--stream"]
    ragtrace.configure(service_name="anthropic-citations", exporter=(args or ["console"])[0])  # ragtrace
    ragtrace.instrument()  # ragtrace
    text, cited = answer(anthropic.Anthropic(), "How long does a refund take?", "--stream" in sys.argv)
    print("A:", text)
    print("Cited:", ", ".join(cited))
