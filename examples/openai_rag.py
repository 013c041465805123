"""RAG over the OpenAI SDK (OpenAI or any compatible server: vLLM, llama.cpp, Ollama's /v1...).

``ragtrace.instrument("openai")`` makes every ``chat.completions.create`` call (plain or
``stream=True``; the stream reaches the app unread) a generate span with messages, usage, model,
finish reason and citations scored against the prompt the app assembled. The SDK has no retriever
or prompt builder of its own, so the app's two get a decorator each, and the function answering a
question is the pipeline root. The lines ending in ``# ragtrace`` are the only ones the
uninstrumented app lacks (tests/test_examples.py runs it without them too). Needs
``pip install 'ragtrace[openai]' openai``; reads ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and
``OPENAI_MODEL`` (default gpt-4o-mini).

    OPENAI_API_KEY=sk-... python examples/openai_rag.py [--stream] [console|jsonl:PATH]
"""

from __future__ import annotations

import os
import sys

import openai

import ragtrace  # ragtrace

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
DOCS = [
    {"id": "kb-refunds", "content": "Refunds reach the original card within 5 business days."},
    {"id": "kb-credit", "content": "Store credit is issued immediately instead of a refund."},
    {"id": "kb-shipping", "content": "Shipping is free for orders over 50 euros."},
]


@ragtrace.retriever(data_source="kb")  # ragtrace
def search(question: str) -> list[dict]:
    return DOCS  # stands in for your vector store


@ragtrace.assembler  # ragtrace
def build_messages(question: str, docs: list[dict]) -> list[dict]:
    sources = "\n".join(f"[{n}] {doc['content']}" for n, doc in enumerate(docs, 1))
    return [
        {"role": "system", "content": "Answer from the numbered sources only and cite them as [1], [2]."},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"},
    ]


@ragtrace.rag_pipeline("openai-rag")  # ragtrace
def answer(question: str, client: openai.OpenAI, stream: bool) -> str:
    messages = build_messages(question, search(question)[:2])
    options = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 200}
    if not stream:
        return client.chat.completions.create(**options).choices[0].message.content
    text = ""
    with client.chat.completions.create(**options, stream=True, stream_options={"include_usage": True}) as chunks:
        for chunk in chunks:
            if chunk.choices:  # the last chunk carries only the usage
                text += chunk.choices[0].delta.content or ""
    return text


if __name__ == "__main__":
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server)")
    args = [a for a in sys.argv[1:] if a != "--stream"]
    ragtrace.configure(service_name="openai-rag", exporter=(args or ["console"])[0])  # ragtrace
    ragtrace.instrument("openai")  # ragtrace
    print("A:", answer("How long does a refund take?", openai.OpenAI(), "--stream" in sys.argv))
