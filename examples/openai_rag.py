"""RAG with the OpenAI SDK alone (OpenAI or a compatible server): a vector store search, then a chat
completion that answers from its results.

``ragtrace.instrument()`` is the one line the app needs. ``vector_stores.search`` becomes a retrieve
span and, outside any ``rag_pipeline``, opens an automatic pipeline root; the
``chat.completions.create`` that answers (plain or ``stream=True``; the stream reaches the app
unread) joins it and ends it. The app builds its messages itself, so the results are found in them
(``located``) and the answer's citations are scored against them. The lines ending in
``# ragtrace`` are the only ones the uninstrumented app lacks (tests/test_examples.py runs it
without them too). Needs ``pip install 'ragtrace[openai]' openai``; reads ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``OPENAI_MODEL`` (default gpt-4o-mini) and ``OPENAI_VECTOR_STORE_ID`` (a vector
store holding your files). A vector-store chunk's id is ``file_id#digest``, a keyed digest of its
text: set ``RAGTRACE_HASH_KEY`` to a secret your processes share to keep the ids stable across
processes (without it ragtrace says so once, in one line).

    OPENAI_API_KEY=sk-... OPENAI_VECTOR_STORE_ID=vs_... python examples/openai_rag.py [--stream] [console|jsonl:PATH]
"""

from __future__ import annotations

import os
import sys

import openai

import ragtrace  # ragtrace

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
SYSTEM = "Answer from the numbered sources only and cite them as [1], [2]."


def answer(client: openai.OpenAI, question: str, stream: bool) -> str:
    results = client.vector_stores.search(os.environ["OPENAI_VECTOR_STORE_ID"], query=question, max_num_results=3)
    sources = "\n".join(f"[{n}] {result.content[0].text}" for n, result in enumerate(list(results)[:2], 1))
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"},
    ]
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
    if not os.environ.get("OPENAI_API_KEY") or not os.environ.get("OPENAI_VECTOR_STORE_ID"):
        sys.exit("set OPENAI_API_KEY and OPENAI_VECTOR_STORE_ID (and OPENAI_BASE_URL for a compatible server)")
    args = [a for a in sys.argv[1:] if a != "--stream"]
    ragtrace.configure(service_name="openai-rag", exporter=(args or ["console"])[0])  # ragtrace
    ragtrace.instrument()  # ragtrace
    print("A:", answer(openai.OpenAI(), "How long does a refund take?", "--stream" in sys.argv))
