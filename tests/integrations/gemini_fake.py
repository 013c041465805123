"""A fake Gemini API for the real ``google-genai`` SDK: an httpx ``MockTransport`` handed to the
client (``HttpOptions(httpx_client=...)``, ``httpx_async_client=...``) answering
``:generateContent`` with one JSON response and ``:streamGenerateContent?alt=sse`` with
server-sent events, in the API's own camelCase schema. Each body is first validated by the SDK's
own type (``GenerateContentResponse``), so a field the SDK doesn't know fails here, not silently.

A response is candidate 0's parts and its grounding metadata; a stream splits the answer text over
the given pieces and sends the grounding metadata, the finish reason and the usage on the last
chunk only, as the API may.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from google import genai
from google.genai import types

MODEL = "gemini-2.5-flash"
STORE = "fileSearchStores/kb-7f3a"


def retrieved(text: str | None, *, document: str | None = None, chunk_id: str | None = None, title: str = "Policy", uri: str | None = None) -> dict[str, Any]:
    """A grounding chunk from the app's store (``retrievedContext``)."""
    context: dict[str, Any] = {"title": title}
    if text is not None:
        context["text"] = text
    if document is not None:
        context["documentName"] = document
    if chunk_id is not None:
        context["ragChunk"] = {"chunkId": chunk_id, "text": text}
    if uri is not None:
        context["uri"] = uri
    return {"retrievedContext": context}


def web(uri: str, title: str) -> dict[str, Any]:
    """A grounding chunk from Google Search: not one of the app's sources."""
    return {"web": {"uri": uri, "title": title}}


def support(start: int, end: int, indices: list[int], *, text: str | None = None, part: int | None = None) -> dict[str, Any]:
    """A grounding support: bytes [start, end) of part ``part`` rest on those grounding chunks."""
    segment: dict[str, Any] = {"endIndex": end}
    if start:  # proto3 JSON leaves a zero out
        segment["startIndex"] = start
    if part:
        segment["partIndex"] = part
    if text is not None:
        segment["text"] = text
    return {"segment": segment, "groundingChunkIndices": indices, "confidenceScores": [0.9] * len(indices)}


def response(parts: list[dict[str, Any]], chunks: list[dict[str, Any]] | None = None, supports: list[dict[str, Any]] | None = None, queries: list[str] | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    if chunks is not None:
        candidate["groundingMetadata"] = {"groundingChunks": chunks, "groundingSupports": supports or [], **({"retrievalQueries": queries} if queries else {})}
    body = {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 17, "totalTokenCount": 137}, "modelVersion": MODEL, "responseId": "resp-1"}
    types.GenerateContentResponse.model_validate(body)  # the SDK knows every field
    return body


def stream_bodies(body: dict[str, Any], pieces: list[str]) -> list[dict[str, Any]]:
    """``body`` as stream chunks: one text piece each, and the metadata on the last only."""
    candidate = body["candidates"][0]
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}], "modelVersion": MODEL, "responseId": "resp-1"} for piece in pieces]
    last = chunks[-1]["candidates"][0]
    last["finishReason"] = candidate["finishReason"]
    if "groundingMetadata" in candidate:
        last["groundingMetadata"] = candidate["groundingMetadata"]
    chunks[-1]["usageMetadata"] = body["usageMetadata"]
    for chunk in chunks:
        types.GenerateContentResponse.model_validate(chunk)
    return chunks


class FakeGemini:
    """Answers every call with ``body`` (streamed over ``pieces``); keeps the requests' JSON."""

    def __init__(self, body: dict[str, Any], pieces: list[str] | None = None) -> None:
        self.body, self.pieces = body, pieces
        self.requests: list[dict[str, Any]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        if ":streamGenerateContent" in request.url.path:
            text = "".join(p["text"] for p in self.body["candidates"][0]["content"]["parts"] if not p.get("thought"))
            chunks = stream_bodies(self.body, self.pieces or [text])
            events = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks)
            return httpx.Response(200, content=events.encode(), headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=self.body)

    def client(self, *, vertexai: bool = False) -> genai.Client:
        """A Gemini API client; ``vertexai=True``: a Vertex AI one (express mode: an API key, no project)."""
        transport = httpx.MockTransport(self.handler)
        return genai.Client(vertexai=vertexai, api_key="test-key", http_options=types.HttpOptions(httpx_client=httpx.Client(transport=transport)))

    def async_client(self) -> genai.Client:
        transport = httpx.MockTransport(self.handler)
        return genai.Client(api_key="test-key", http_options=types.HttpOptions(httpx_async_client=httpx.AsyncClient(transport=transport)))


def file_search_config(**more: Any) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(tools=[types.Tool(file_search=types.FileSearch(file_search_store_names=[STORE]))], **more)
