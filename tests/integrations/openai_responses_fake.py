"""A fake OpenAI Responses API for the real ``openai`` SDK: an ``httpx.MockTransport`` answering
``POST /v1/responses`` in the API's exact schema, for a request with the ``file_search`` tool: a
``file_search_call`` item (its ``results`` only when the request has
``include=["file_search_call.results"]``, as the API does) and a message whose ``output_text``
carries ``file_citation`` annotations. Bodies are validated by the SDK's own types
(``Response``, ``ResponseStreamEvent``) before they are sent.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pydantic
from openai.types.responses import Response, ResponseStreamEvent

MODEL = "gpt-4.1-mini"
STORE = "vs_kb"


def result(file_id: str, text: str, score: float) -> dict[str, Any]:
    return {"file_id": file_id, "filename": f"{file_id}.md", "score": score, "text": text, "attributes": {}}


def response(results: list[dict[str, Any]], parts: list[tuple[str, list[str]]], *, included: bool) -> dict[str, Any]:
    """``parts``: the answer's text pieces, each with the files cited after it."""
    text, annotations = "", []
    for piece, files in parts:
        text += piece
        annotations += [{"type": "file_citation", "file_id": f, "filename": f"{f}.md", "index": len(text)} for f in files]
    body = {
        "id": "resp_test_1",
        "object": "response",
        "created_at": 1764600000,
        "model": MODEL,
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [{"type": "file_search", "vector_store_ids": [STORE]}],
        "output": [
            {"id": "fs_1", "type": "file_search_call", "status": "completed", "queries": ["refund time"], "results": results if included else None},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": annotations}]},
        ],
        "usage": {"input_tokens": 300, "output_tokens": 20, "total_tokens": 320, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }
    Response.model_validate(body)
    return body


def events(body: dict[str, Any]) -> list[dict[str, Any]]:
    search, message = body["output"]
    (part,) = message["content"]
    where = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    found: list[dict[str, Any]] = [
        {"type": "response.created", "response": dict(body, status="in_progress", output=[], usage=None)},
        {"type": "response.output_item.added", "output_index": 0, "item": dict(search, status="in_progress", results=None)},
        {"type": "response.output_item.done", "output_index": 0, "item": search},
        {"type": "response.output_item.added", "output_index": 1, "item": dict(message, status="in_progress", content=[])},
        {"type": "response.content_part.added", **where, "part": {"type": "output_text", "text": "", "annotations": []}},
        {"type": "response.output_text.delta", **where, "delta": part["text"], "logprobs": []},
    ]
    for index, annotation in enumerate(part["annotations"]):
        found.append({"type": "response.output_text.annotation.added", **where, "annotation_index": index, "annotation": annotation})
    found += [
        {"type": "response.output_text.done", **where, "text": part["text"], "logprobs": []},
        {"type": "response.content_part.done", **where, "part": part},
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        {"type": "response.completed", "response": body},
    ]
    adapter = pydantic.TypeAdapter(ResponseStreamEvent)
    for number, event in enumerate(found):
        event["sequence_number"] = number
        adapter.validate_python(event)
    return found


class FakeResponses:
    def __init__(self, results: list[dict[str, Any]], parts: list[tuple[str, list[str]]]) -> None:
        self.results, self.parts = results, parts
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/responses", request.url
        sent = json.loads(request.content)
        self.requests.append(sent)
        body = response(self.results, self.parts, included="file_search_call.results" in (sent.get("include") or ()))
        if not sent.get("stream"):
            return httpx.Response(200, json=body)
        lines = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events(body))
        return httpx.Response(200, content=lines.encode(), headers={"content-type": "text/event-stream"})

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(api_key="sk-test", max_retries=0, http_client=httpx.Client(transport=httpx.MockTransport(self.handle)), _strict_response_validation=True)

    def async_client(self) -> openai.AsyncOpenAI:
        async def handle(request: httpx.Request) -> httpx.Response:
            return self.handle(request)

        return openai.AsyncOpenAI(api_key="sk-test", max_retries=0, http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)), _strict_response_validation=True)
