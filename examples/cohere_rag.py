"""RAG with Cohere's v2 client, offline: the real ``cohere.ClientV2`` over an httpx
``MockTransport`` that answers as the v2 API does (JSON, and server-sent events for a stream).

The app reranks its candidate passages with ``rerank``, hands the best to ``chat`` as documents,
and prints the answer with the documents it cites. ``ragtrace.instrument()`` is the one line it
needs (the lines ending in ``# ragtrace``): the chat is one pipeline with exact figures from the
API's own citation objects (``inclusion_method = "provider"``, ids the app's), and the rerank a
stage of its own. Needs ``pip install 'ragtrace[cohere]' cohere``.

    python examples/cohere_rag.py [--stream] [console|jsonl:PATH]
"""

from __future__ import annotations

import json
import sys

import cohere
import httpx

import ragtrace  # ragtrace

MODEL = "command-a-03-2025"
PASSAGES = {
    "kb-refunds": "Refunds reach the original card within 5 business days.",
    "kb-credit": "Store credit is issued immediately instead of a refund.",
    "kb-shipping": "Shipping is free for orders over 50 euros.",
}
ANSWER = "Refunds take 5 business days; store credit is immediate."
CITED = [("Refunds take 5 business days", "kb-refunds"), ("store credit is immediate", "kb-credit")]


def cohere_api(request: httpx.Request) -> httpx.Response:
    """The fake: what the v2 API answers to ``/v2/rerank`` and ``/v2/chat``."""
    body = json.loads(request.content)
    if request.url.path == "/v2/rerank":
        ranked = [{"index": 0, "relevance_score": 0.93}, {"index": 1, "relevance_score": 0.71}, {"index": 2, "relevance_score": 0.12}]
        return httpx.Response(200, json={"id": "rerank-1", "results": ranked[: body.get("top_n", 3)], "meta": {"billed_units": {"search_units": 1}}})
    citations = [
        {"start": ANSWER.index(text), "end": ANSWER.index(text) + len(text), "text": text, "type": "TEXT_CONTENT", "content_index": 0, "sources": [{"type": "document", "id": found, "document": {"id": found}}]}
        for text, found in CITED
    ]
    usage = {"billed_units": {"input_tokens": 60, "output_tokens": 12}, "tokens": {"input_tokens": 610, "output_tokens": 12}}
    if not body.get("stream"):
        message = {"role": "assistant", "content": [{"type": "text", "text": ANSWER}], "citations": citations}
        return httpx.Response(200, json={"id": "chat-1", "finish_reason": "COMPLETE", "message": message, "usage": usage})
    events = [{"type": "message-start", "id": "chat-1", "delta": {"message": {"role": "assistant"}}}]
    pieces = [ANSWER[i : i + 12] for i in range(0, len(ANSWER), 12)]
    events += [{"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": piece}}}} for piece in pieces]
    events += [{"type": "citation-start", "index": i, "delta": {"message": {"citations": c}}} for i, c in enumerate(citations)]
    events += [{"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": usage}}]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream.encode())


def answer(client: cohere.ClientV2, question: str, stream: bool) -> tuple[str, list[str]]:
    ids = list(PASSAGES)
    ranked = client.rerank(model="rerank-v3.5", query=question, documents=[PASSAGES[i] for i in ids], top_n=2).results
    documents = [{"id": ids[r.index], "data": {"text": PASSAGES[ids[r.index]]}} for r in ranked]
    messages = [{"role": "user", "content": question}]
    if stream:
        events = list(client.chat_stream(model=MODEL, messages=messages, documents=documents))
        text = "".join(e.delta.message.content.text for e in events if e.type == "content-delta")
        citations = [e.delta.message.citations for e in events if e.type == "citation-start"]
    else:
        reply = client.chat(model=MODEL, messages=messages, documents=documents)
        text, citations = reply.message.content[0].text, reply.message.citations or []
    return text, list(dict.fromkeys(s.id for c in citations for s in c.sources or ()))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--stream"]
    ragtrace.configure(service_name="cohere-rag", exporter=(args or ["console"])[0])  # ragtrace
    ragtrace.instrument()  # ragtrace
    client = cohere.ClientV2(api_key="offline", httpx_client=httpx.Client(transport=httpx.MockTransport(cohere_api)))
    text, cited = answer(client, "How long does a refund take?", "--stream" in sys.argv)
    print("A:", text)
    print("Cited:", ", ".join(cited))
