"""RAG over an OpenAI-compatible chat-completions API (OpenAI, vLLM, llama.cpp, Ollama's /v1...).

Uses the ``openai`` package when it is installed, else the small stdlib client below. Both read
``OPENAI_BASE_URL`` (default https://api.openai.com/v1) and ``OPENAI_API_KEY``; ``OPENAI_MODEL``
picks the model (default gpt-4o-mini). ``g.record(completion)`` takes the answer, token usage,
response id and model from the completion; with ``--stream``, ``g.stream(...)`` passes the chunks
through and the joined answer is scored once the stream ends.

    OPENAI_API_KEY=sk-... python examples/openai_client.py [--stream] [EXPORTER]
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

import ragtrace

MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
DOCS = [
    {"id": "kb-refunds", "content": "Refunds reach the original card within 5 business days."},
    {"id": "kb-credit", "content": "Store credit is issued immediately instead of a refund."},
    {"id": "kb-shipping", "content": "Shipping is free for orders over 50 euros."},
]
TEMPLATE = [
    {"role": "system", "content": "Answer from the numbered sources only and cite them as [1], [2]."},
    {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
]


def chat(messages: list[dict], stream: bool = False):
    """A chat completion as a dict, or with ``stream`` an iterator of chunk dicts."""
    options = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 200}
    if stream:
        options.update(stream=True, stream_options={"include_usage": True})
    try:
        import openai
    except ImportError:
        base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
        request = urllib.request.Request(f"{base}/chat/completions", json.dumps(options).encode(), headers)
        response = urllib.request.urlopen(request, timeout=120)
        return server_sent_events(response) if stream else json.load(response)
    completion = openai.OpenAI().chat.completions.create(**options)
    return (chunk.model_dump() for chunk in completion) if stream else completion.model_dump()


def server_sent_events(response):
    with response:
        for line in map(bytes.strip, response):
            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
                yield json.loads(line[5:])


def answer(question: str, stream: bool) -> ragtrace.RagPipeline:
    with ragtrace.rag_pipeline("openai-rag", query=question) as run:
        with ragtrace.retrieve(question, data_source="kb", top_k=3) as r:
            r.record(DOCS)  # stands in for your vector store
        with ragtrace.assemble(max_tokens=500) as ctx:
            for chunk in r.chunks[:2]:
                ctx.add(chunk)
            messages = ctx.render(TEMPLATE, question=question)
        with ragtrace.generate(model=MODEL, provider="openai", prompt=messages, temperature=0, max_tokens=200) as g:
            if not stream:
                completion = chat(messages)
                g.record(completion)
                print("A:", completion["choices"][0]["message"]["content"])
            else:
                print("A: ", end="")
                usage = {}
                for chunk in g.stream(chat(messages, stream=True)):
                    print((chunk["choices"] or [{}])[0].get("delta", {}).get("content") or "", end="", flush=True)
                    usage = chunk.get("usage") or usage  # the last chunk carries the usage
                print()
                g.record(None, input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens"))
    return run


if __name__ == "__main__":
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server)")
    args = [a for a in sys.argv[1:] if a != "--stream"]
    provider = ragtrace.configure(service_name="openai-example", exporter=(args or ["console"])[0])
    run = answer("How long does a refund take?", stream="--stream" in sys.argv)
    provider.force_flush()
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in run.metrics.items()})
