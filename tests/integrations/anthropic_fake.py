"""A fake Anthropic Messages API for the real ``anthropic`` SDK: an httpx2 ``MockTransport`` (the
SDK's own HTTP library) answering ``POST /v1/messages`` in the API's exact schema, a JSON message
or its server-sent events. Every body is validated by the SDK's own types before it is sent
(``Message``, ``RawMessageStreamEvent``), and the clients validate strictly on receipt.

The answer is three text blocks, each with the citations given (search-result or document
locations), as the API returns them when sources have ``citations: {"enabled": true}``.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import pydantic
from anthropic.types import Message, RawMessageStreamEvent

MODEL = "claude-sonnet-4-5"


def search_result(source: str, text: str, title: str = "Policy") -> dict[str, Any]:
    return {"type": "search_result", "source": source, "title": title, "content": [{"type": "text", "text": text}], "citations": {"enabled": True}}


def document(text: str, title: str = "Handbook") -> dict[str, Any]:
    return {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}, "title": title, "citations": {"enabled": True}}


def at_result(index: int, source: str, cited: str, title: str = "Policy") -> dict[str, Any]:
    return {"type": "search_result_location", "search_result_index": index, "source": source, "title": title, "cited_text": cited, "start_block_index": 0, "end_block_index": 1}


def at_chars(index: int, cited: str, title: str = "Handbook") -> dict[str, Any]:
    return {"type": "char_location", "document_index": index, "document_title": title, "cited_text": cited, "start_char_index": 0, "end_char_index": len(cited)}


def message(blocks: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    body = {
        "id": "msg_test_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text, "citations": citations or None} for text, citations in blocks],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 17},
    }
    Message.model_validate(body)
    return body


def events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The message as the API streams it: citations first in each block, then its text."""
    start = dict(body, content=[], stop_reason=None, usage={"input_tokens": 120, "output_tokens": 1})
    found: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body["content"]):
        found.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": "", "citations": [] if block["citations"] else None}})
        for citation in block["citations"] or ():
            found.append({"type": "content_block_delta", "index": index, "delta": {"type": "citations_delta", "citation": citation}})
        found.append({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}})
        found.append({"type": "content_block_stop", "index": index})
    found.append({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 17}})
    found.append({"type": "message_stop"})
    adapter = pydantic.TypeAdapter(RawMessageStreamEvent)
    for event in found:
        adapter.validate_python(event)
    return found


def sse(found: list[dict[str, Any]]) -> bytes:
    """Events as the server-sent-event stream the API sends."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in found).encode()


class FakeAnthropic:
    """The transport: answers every request with ``body`` and keeps the requests' JSON."""

    def __init__(self, body: dict[str, Any], *, cut_after: int | None = None) -> None:
        self.body = body
        self.cut_after = cut_after  # a dropped connection: the stream ends after this many events, no error
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages", request.url
        sent = json.loads(request.content)
        self.requests.append(sent)
        if not sent.get("stream"):
            return httpx2.Response(200, json=self.body)
        return httpx2.Response(200, content=sse(events(self.body)[: self.cut_after]), headers={"content-type": "text/event-stream"})

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key="sk-ant-test", max_retries=0, http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)), _strict_response_validation=True)

    def async_client(self) -> anthropic.AsyncAnthropic:
        async def handle(request: httpx2.Request) -> httpx2.Response:
            return self.handle(request)

        transport = httpx2.MockTransport(handle)
        return anthropic.AsyncAnthropic(api_key="sk-ant-test", max_retries=0, http_client=httpx2.AsyncClient(transport=transport), _strict_response_validation=True)
