"""Loopback HTTP servers for tests: a chat-completions server like the OpenAI API (plain JSON and
SSE streams, the Responses API, and a vector store's search) shared by the example and integration
tests, and the helpers to serve a handler."""

from __future__ import annotations

import base64
import gzip
import json
import re
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port in a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def body(self) -> bytes:
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        return gzip.decompress(data) if self.headers.get("Content-Encoding") == "gzip" else data

    def reply(self, payload: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


ANSWER = "Refunds take 5 business days [1]."
USAGE = {"prompt_tokens": 42, "completion_tokens": 9, "total_tokens": 51}
# what ``POST /v1/vector_stores/{id}/search`` finds, best first: two chunks of one file, then another file's
VECTOR_STORE = [
    ("file-refunds", "refunds.md", 0.91, "Refunds reach the original card within 5 business days."),
    ("file-refunds", "refunds.md", 0.74, "Store credit is issued immediately instead of a refund."),
    ("file-shipping", "shipping.md", 0.52, "Shipping is free for orders over 50 euros."),
]
_SEARCH = re.compile(r"/v1/vector_stores/([\w-]+)/search")


class ChatCompletions(QuietHandler):
    """``POST /v1/chat/completions``, plain or ``"stream": true`` (SSE), like the OpenAI API."""

    received: list[dict[str, Any]] = []
    answer = ANSWER  # what the "model" says; a test may set another
    store = VECTOR_STORE  # what a vector store search finds; a test may set another
    cut_after: int | None = None  # a dropped connection: a stream ends after this many events, no error

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.body())
        self.received.append({"path": self.path, "authorization": self.headers.get("Authorization"), "body": body})
        if self.path == "/v1/responses":
            self.answer_responses(body)
            return
        if _SEARCH.fullmatch(self.path):
            self.answer_search(body)
            return
        if self.path == "/v1/embeddings":
            self.answer_embeddings(body)
            return
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        base = {"id": "chatcmpl-test-1", "created": 1_700_000_000, "model": body["model"] + "-2024-07-18"}
        if not body.get("stream"):
            completion = {
                **base,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer}, "finish_reason": "stop"}],
                "usage": USAGE,
            }
            self.reply(json.dumps(completion).encode(), "application/json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {**base, "object": "chat.completion.chunk"}
        events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
        events += [{**chunk, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in re.findall(r"\S+\s*", self.answer)]
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if body.get("stream_options", {}).get("include_usage"):
            events.append({**chunk, "choices": [], "usage": USAGE})
        for event in events[: self.cut_after]:
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.flush()
        if self.cut_after is None:
            self.wfile.write(b"data: [DONE]\n\n")

    def answer_embeddings(self, body: dict[str, Any]) -> None:
        """``POST /v1/embeddings``: one 4-dimensional vector per input (base64 float32 if asked, as the SDK asks)."""
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vector = [0.5, -0.25, 0.125, 1.0]
        encoded = base64.b64encode(struct.pack("<4f", *vector)).decode() if body.get("encoding_format") == "base64" else vector
        data = [{"object": "embedding", "index": i, "embedding": encoded} for i in range(len(inputs))]
        reply = {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 7, "total_tokens": 7}}
        self.reply(json.dumps(reply).encode(), "application/json")

    def answer_search(self, body: dict[str, Any]) -> None:
        """``POST /v1/vector_stores/{id}/search``: a page of results (chunks of files, with text)."""
        found = self.store[: body.get("max_num_results", 10)]
        data = [
            {"file_id": file_id, "filename": filename, "score": score, "attributes": {}, "content": [{"type": "text", "text": text}]}
            for file_id, filename, score, text in found
        ]
        query = body["query"] if isinstance(body["query"], list) else [body["query"]]
        page = {"object": "vector_store.search_results.page", "search_query": query, "data": data, "has_more": False, "next_page": None}
        self.reply(json.dumps(page).encode(), "application/json")

    def answer_responses(self, body: dict[str, Any]) -> None:
        """``POST /v1/responses``: a Response, or its SSE events (text deltas, then completed)."""
        message = {"type": "message", "id": "msg-1", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": self.answer, "annotations": []}]}
        usage = {"input_tokens": 42, "output_tokens": 9, "total_tokens": 51,
                 "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
        response = {"id": "resp-test-1", "object": "response", "created_at": 1_700_000_000, "status": "completed",
                    "model": body["model"] + "-2024-07-18", "output": [message], "usage": usage,
                    "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
        if not body.get("stream"):
            self.reply(json.dumps(response).encode(), "application/json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        # the API's own order: created, the message and its text part added, the deltas, each done, completed
        started = {**response, "status": "in_progress", "output": [], "usage": None}
        part = {"item_id": "msg-1", "output_index": 0, "content_index": 0}
        events = [
            {"type": "response.created", "response": started},
            {"type": "response.output_item.added", "output_index": 0, "item": {**message, "status": "in_progress", "content": []}},
            {"type": "response.content_part.added", **part, "part": {"type": "output_text", "text": "", "annotations": []}},
        ]
        events += [{"type": "response.output_text.delta", **part, "delta": p, "logprobs": []} for p in re.findall(r"\S+\s*", self.answer)]
        events += [
            {"type": "response.output_text.done", **part, "text": self.answer, "logprobs": []},
            {"type": "response.content_part.done", **part, "part": message["content"][0]},
            {"type": "response.output_item.done", "output_index": 0, "item": message},
            {"type": "response.completed", "response": response},
        ]
        for number, event in enumerate(events[: self.cut_after]):
            self.wfile.write(f"event: {event['type']}\n".encode() + b"data: " + json.dumps({**event, "sequence_number": number}).encode() + b"\n\n")
            self.wfile.flush()


def serve_chat(answer: str = ANSWER) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The chat-completions server on loopback: its base URL and the requests it received."""
    ChatCompletions.received = []
    ChatCompletions.answer = answer
    ChatCompletions.store = VECTOR_STORE
    ChatCompletions.cut_after = None
    for url in serve(ChatCompletions):
        yield url, ChatCompletions.received
