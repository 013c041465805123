"""Gemini's grounding through LiteLLM: ``litellm.completion(model="gemini/...")`` against a loopback
server answering ``:generateContent`` in the Gemini API's JSON (``gemini_fake``'s bodies, which the
google-genai SDK's own type validates). LiteLLM sends no File Search tool of its own, so the app
passes it in ``extra_body``, in the API's JSON; the response's grounding metadata is read by the
google-genai integration's reader, so the figures are those of ``test_google_genai``'s main case,
worked by hand there: chunks A (a File Search document's), B (``kb-credit-1``), C, and a web page;
retrieved 3, in context 3 (provider), cited 2 (A, B) at positions [1, 2], recall 2/3, weighted
9/11, precision 1, utilisation 2/3, wasted 9 tokens (C), segments (0, 29, A), (30, 56, B),
(30, 56, A).
"""

from __future__ import annotations

import json
import math

import pytest

import ragtrace
from loopback import QuietHandler, serve

from .gemini_fake import MODEL, STORE, response, stream_bodies, support
from .test_google_genai import BODY, CHUNKS, QUESTION, a_id, ids, metrics
from .test_litellm import litellm, settled  # noqa: F401 - the fixture, and waiting for LiteLLM's logging

pytestmark = pytest.mark.heavy  # LiteLLM takes about 3 s to import: run once, on 3.11 (Makefile)

FILE_SEARCH = {"tools": [{"fileSearch": {"fileSearchStoreNames": [STORE]}}]}  # the API's JSON


def gemini(body: dict, requests: list):
    """A loopback Gemini API answering every ``:generateContent`` with ``body``; keeps the requests."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            requests.append((self.path, json.loads(self.body())))
            if ":streamGenerateContent" in self.path:  # server-sent events, the metadata on the last chunk
                text = "".join(p["text"] for p in body["candidates"][0]["content"]["parts"] if not p.get("thought"))
                events = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in stream_bodies(body, [text[:20], text[20:]]))
                self.reply(events.encode(), "text/event-stream")
            else:
                self.reply(json.dumps(body).encode(), "application/json")

    return serve(Handler)


def ask(litellm, url: str, question: str = QUESTION, **options):  # noqa: F811 - the fixture's module
    return litellm.completion(model=f"gemini/{MODEL}", messages=[{"role": "user", "content": question}], api_base=url, api_key="k", **options)


def test_a_file_search_call_gets_the_grounding_figures_exactly(litellm, spans):  # noqa: F811
    requests: list = []
    for url in gemini(BODY, requests):
        reply = ask(litellm, url, extra_body=FILE_SEARCH)
    assert requests[0][0] == f"/models/{MODEL}:generateContent" and requests[0][1]["tools"] == FILE_SEARCH["tools"]
    assert reply.vertex_ai_grounding_metadata == [BODY["candidates"][0]["groundingMetadata"]]  # what LiteLLM passes on
    settled(spans)
    root = spans.one("pipeline")
    assert root.parent is None and root.name == "invoke_workflow litellm" and "rag.root.abandoned" not in root.attributes
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ids()
    assert retrieved.attributes["gen_ai.data_source.id"] == STORE
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == "refund duration"
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == ids()
    assert list(assembled.attributes["rag.context.chunk_tokens"])[2] == 9
    attributes = generated.attributes
    assert attributes["gen_ai.provider.name"] == "gemini"
    assert (attributes["rag.citation.format"], attributes["rag.citation.granularity"]) == ("provider", "chunk")
    assert list(attributes["rag.citation.ids"]) == [a_id(), "kb-credit-1"] and attributes["rag.citation.invalid_count"] == 0
    assert list(attributes["rag.citation.segment_starts"]) == [0, 30, 30]
    assert list(attributes["rag.citation.segment_ends"]) == [29, 56, 56]
    assert list(attributes["rag.citation.segment_ids"]) == [a_id(), "kb-credit-1", a_id()]
    got = metrics(root)
    assert got["inclusion_method"] == "provider"
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["recall_proxy_weighted"], 9 / 11)
    assert got["context_precision"] == 1.0 and math.isclose(got["context_utilization"], 2 / 3)
    assert got["wasted_context_tokens"] == 9 and got["invalid_citations"] == 0 and "status" not in got


def test_a_non_ascii_answer_after_a_thought_gets_its_segments_in_characters(litellm, spans):  # noqa: F811
    """The answer is part 1 (part 0 a thought, which LiteLLM puts in ``reasoning_content``):
    "Rückzahlung für Karten: 5 Tage. Gutschrift sofort.". By hand: the first sentence is 31
    characters, 33 UTF-8 bytes (two ü); "Gutschrift sofort." is bytes [34, 52) = characters
    [32, 50) of the part. A character slice of the byte offsets would have cut "tschrift sofort."."""
    answer = "Rückzahlung für Karten: 5 Tage. Gutschrift sofort."
    assert len(answer[:31].encode()) == 33 and answer[32:50] == "Gutschrift sofort."  # the hand count
    parts = [{"text": "Let me look at the refund policy.", "thought": True}, {"text": answer}]
    supports = [support(0, 33, [0], part=1, text="Rückzahlung für Karten: 5 Tage."), support(34, 52, [1], part=1, text="Gutschrift sofort.")]
    for url in gemini(response(parts, CHUNKS[:3], supports), []):
        reply = ask(litellm, url, extra_body=FILE_SEARCH)
    assert reply.choices[0].message.content == answer
    settled(spans)
    generated = spans.one("generate")
    assert list(generated.attributes["rag.citation.segment_starts"]) == [0, 32]
    assert list(generated.attributes["rag.citation.segment_ends"]) == [31, 50]
    assert list(generated.attributes["rag.citation.segment_ids"]) == [a_id(), "kb-credit-1"]
    got = metrics(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])


def test_without_a_retrieval_tool_the_call_is_a_plain_generation(litellm, spans):  # noqa: F811
    """No File Search or retrieval tool in the body LiteLLM sent: not a RAG call, whatever the
    response says, as in the google-genai integration."""
    for url in gemini(BODY, []):
        ask(litellm, url)
    settled(spans, "generate")
    assert [s.attributes["rag.stage"] for s in spans.all()] == ["generate"]
    attributes = spans.one("generate").attributes
    assert attributes.get("rag.citation.format") != "provider" and list(attributes.get("rag.citation.ids", ())) == [], dict(attributes)


def test_a_streamed_call_is_scored_from_its_text(litellm, spans):  # noqa: F811
    """A stream's grounding is not read (LiteLLM logs no API body for a stream, only a
    placeholder, so the parts the byte offsets count in are unknown): the answer is one generate
    span, scored from its text, as docs/integrations.md says."""
    for url in gemini(BODY, []):
        text = "".join(chunk.choices[0].delta.content or "" for chunk in ask(litellm, url, extra_body=FILE_SEARCH, stream=True))
    assert text == BODY["candidates"][0]["content"]["parts"][0]["text"]
    settled(spans, "generate")
    assert [s.attributes["rag.stage"] for s in spans.all()] == ["generate"]
    assert spans.one("generate").attributes.get("rag.citation.format") != "provider"


def test_redact_mode_leaks_nothing(litellm, spans):  # noqa: F811
    marker = "PLANTED-MARKER-8d21"
    chunks = [{"retrievedContext": {"title": f"{marker} title", "text": f"{marker} chunk.", "uri": f"gs://bucket/{marker}.pdf", "documentName": f"{STORE}/documents/d1"}}]
    answer = f"{marker} answer é."
    body = response([{"text": answer}], chunks, [support(0, len(answer.encode()), [0], text=answer)], queries=[f"{marker} query"])
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    for url in gemini(body, []):
        ask(litellm, url, f"{marker} question", extra_body=FILE_SEARCH)
    settled(spans)
    exported = json.dumps([{"name": s.name, "attributes": dict(s.attributes), "events": [dict(e.attributes) for e in s.events]} for s in spans.all()], default=str)
    assert marker not in exported and "gs://" not in exported
    got = metrics(spans.one("pipeline"))
    assert (got["retrieved"], got["cited"], got["inclusion_method"]) == (1, 1, "provider")
