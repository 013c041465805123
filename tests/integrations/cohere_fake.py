"""Offline Cohere for the tests: the real ``cohere.ClientV2`` / ``AsyncClientV2`` over an
``httpx.MockTransport`` that answers ``/v2/chat``, ``/v2/rerank`` and ``/v2/embed`` in the v2 API's
JSON (a ``stream: true`` chat as server-sent events, as the SDK reads them), and ``/v1/chat`` for
``cohere.Client`` / ``AsyncClient`` (a stream as one JSON event a line, the v1 SDK's default). Each request is kept,
so a test can check what the SDK sent."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import cohere
import httpx

MODEL = "command-a-03-2025"


def citation(answer: str, part: str, ids: Iterable[str], *, kind: str = "TEXT_CONTENT", documents: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``message.citations`` item: ``part`` located in ``answer``, citing documents by id."""
    start = answer.index(part)
    sources = [{"type": "document", "id": i, "document": dict((documents or {}).get(i, {}), id=i)} for i in ids]
    return {"start": start, "end": start + len(part), "text": part, "sources": sources, "type": kind, "content_index": 0}


def chat_response(answer: str, citations: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "chat-1",
        "finish_reason": "COMPLETE",
        "message": {"role": "assistant", "content": [{"type": "text", "text": answer}], "citations": citations},
        "usage": {"billed_units": {"input_tokens": 40, "output_tokens": 12}, "tokens": {"input_tokens": 400, "output_tokens": 12}},
    }


def chat_events(answer: str, citations: list[dict[str, Any]], pieces: int = 3) -> list[dict[str, Any]]:
    """The stream of the same answer: its text in ``pieces`` deltas, then its citations."""
    size = -(-len(answer) // pieces)
    events: list[dict[str, Any]] = [
        {"type": "message-start", "id": "chat-1", "delta": {"message": {"role": "assistant"}}},
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}},
    ]
    events += [{"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": answer[i : i + size]}}}} for i in range(0, len(answer), size)]
    for index, found in enumerate(citations):
        events += [{"type": "citation-start", "index": index, "delta": {"message": {"citations": found}}}, {"type": "citation-end", "index": index}]
    events += [
        {"type": "content-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": {"billed_units": {"input_tokens": 40, "output_tokens": 12}, "tokens": {"input_tokens": 400, "output_tokens": 12}}}},
    ]
    return events


class FakeCohere:
    """Answers: ``chat`` with ``chat_body`` (or its events when streamed), ``rerank`` with
    ``rerank_body``, ``embed`` with ``embed_body``."""

    def __init__(self, chat_body: dict[str, Any] | None = None, events: list[dict[str, Any]] | None = None, rerank_body: Any = None, embed_body: Any = None) -> None:
        self.chat_body, self.events, self.rerank_body, self.embed_body = chat_body, events, rerank_body, embed_body
        self.requests: list[dict[str, Any]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        self.requests.append(body)
        path = request.url.path
        if path == "/v1/chat" and body.get("stream"):  # v1: one JSON event a line
            return httpx.Response(200, content="".join(json.dumps(e) + "\n" for e in self.events or ()).encode())
        if path.endswith("/chat") and body.get("stream"):
            text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in self.events or ())
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())
        found = {"/v1/chat": self.chat_body, "/v2/chat": self.chat_body, "/v2/rerank": self.rerank_body, "/v2/embed": self.embed_body}.get(path)
        return httpx.Response(200, json=found) if found is not None else httpx.Response(404, json={"message": "not found"})

    def client(self) -> cohere.ClientV2:
        return cohere.ClientV2(api_key="test-key", httpx_client=httpx.Client(transport=httpx.MockTransport(self.handler)))

    def v1_client(self) -> cohere.Client:
        return cohere.Client(api_key="test-key", httpx_client=httpx.Client(transport=httpx.MockTransport(self.handler)))

    def v1_async_client(self) -> cohere.AsyncClient:
        return cohere.AsyncClient(api_key="test-key", httpx_client=httpx.AsyncClient(transport=httpx.MockTransport(self.handler)))

    def async_client(self) -> cohere.AsyncClientV2:
        return cohere.AsyncClientV2(api_key="test-key", httpx_client=httpx.AsyncClient(transport=httpx.MockTransport(self.handler)))
