"""Offline Bedrock for the tests: boto3 clients with made-up credentials, answered by botocore's own
``Stubber`` (which checks the parameters against the service model and returns the parsed
response) or, for the event-stream operations, by a ``before-send`` handler that answers the HTTP
request with a real AWS event stream (binary messages with their CRCs), which botocore's own
parser turns into its ``EventStream``.

Why not the Stubber for streams: it validates a stubbed response against the output shape, and an
event-stream member must be a dict there, so ``{"stream": [...]}`` is refused
(``ParamValidationError: Invalid type for parameter stream ... valid types: <class 'dict'>``), and
the dict it accepts is returned as it is, not as an ``EventStream``. The ``before-send`` answer
runs botocore's whole response path instead: status, headers, event-stream decoding and parsing.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse

KB = "KBTEST12345"  # the Stubber validates knowledgeBaseId: at least 10 characters
MODEL_ARN = "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"
MODEL_ID = "anthropic.claude-3-haiku-20240307-v1:0"


def client(service: str) -> Any:
    """A real boto3 client with made-up credentials (no call leaves the process with a fake)."""
    session = boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1")
    return session.client(service)


def result(uri: str, text: str, score: float | None = None) -> dict[str, Any]:
    """A knowledge-base result (``retrievalResults`` item, or a ``retrievedReferences`` item without a score)."""
    found: dict[str, Any] = {"content": {"text": text, "type": "TEXT"}, "location": {"type": "S3", "s3Location": {"uri": uri}}}
    if score is not None:
        found["score"] = score
    return found


def citation(answer: str, part: str, references: Iterable[dict[str, Any]], *, inclusive: bool = True) -> dict[str, Any]:
    """A ``citations`` item: ``part`` located in ``answer`` (span end inclusive, as the service counts)."""
    start = answer.index(part)
    end = start + len(part) - (1 if inclusive else 0)
    return {"generatedResponsePart": {"textResponsePart": {"text": part, "span": {"start": start, "end": end}}}, "retrievedReferences": list(references)}


# --- event streams -------------------------------------------------------------------------------
def _header(name: str, value: str) -> bytes:
    key, data = name.encode(), value.encode()
    return len(key).to_bytes(1, "big") + key + b"\x07" + len(data).to_bytes(2, "big") + data


def event_message(kind: str, payload: Mapping[str, Any]) -> bytes:
    """One AWS event-stream message: prelude (lengths, CRC), string headers, JSON payload, CRC."""
    headers = _header(":message-type", "event") + _header(":event-type", kind) + _header(":content-type", "application/json")
    body = json.dumps(payload).encode()
    prelude = (16 + len(headers) + len(body)).to_bytes(4, "big") + len(headers).to_bytes(4, "big")
    message = prelude + (binascii.crc32(prelude) & 0xFFFFFFFF).to_bytes(4, "big") + headers + body
    return message + (binascii.crc32(message) & 0xFFFFFFFF).to_bytes(4, "big")


class _Raw:
    """What botocore reads an event stream from (``urllib3``'s response: ``stream()``, ``close()``)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.closed = data, False

    def stream(self, amt: int = 1024, decode_content: bool | None = None) -> Iterator[bytes]:
        for start in range(0, len(self.data), 64):  # in pieces, as a socket delivers them
            if self.closed:
                return
            yield self.data[start : start + 64]

    def close(self) -> None:
        self.closed = True


def answer_stream(found: Any, events: Iterable[tuple[str, Mapping[str, Any]]], headers: Mapping[str, str] | None = None) -> list[Any]:
    """Make ``found`` answer its next call with these events; returns the list the requests go to."""
    sent: list[Any] = []
    data = b"".join(event_message(kind, payload) for kind, payload in events)

    def send(request: Any, **_: Any) -> AWSResponse:
        sent.append(request)
        return AWSResponse(request.url, 200, {"content-type": "application/vnd.amazon.eventstream", **(headers or {})}, _Raw(data))

    found.meta.events.register("before-send", send)
    return sent
