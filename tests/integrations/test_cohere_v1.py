"""The Cohere integration's v1 chat (``cohere.Client.chat`` / ``chat_stream``, ``AsyncClient``)
against the real SDK over an httpx ``MockTransport`` answering in the v1 API's JSON (a stream as
one JSON event a line, ``cohere_fake``). Each call is made first with ragtrace off, so a
difference in what the app gets is ragtrace's.

Hand-worked truth for the main case: documents A (id kb-a), B (no id: the API calls it doc_1 and
carries it back in the response's ``documents``; ragtrace's id is the keyed digest of its text) and
C (id kb-c, whose ``url`` is in ``_excludes``: the model reads "snippet: Shipping is free for
orders over 50 euros." only). The answer "Refunds take 5 days and store credit is immediate."
cites "Refunds take 5 days" (0-19) from A and "store credit is immediate" (24-49) from B and A; a
``PLAN`` citation of C is not the answer's. So retrieved 3, in context 3 (provider), cited 2 at
positions [1, 2], recall 2/3, weighted recall (1 + 1/2) / (1 + 1/2 + 1/3) = 9/11, precision 1,
utilisation 2/3, wasted tokens = the tokens of C's shown text (by the configured tokenizer).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import ragtrace
from ragtrace._internal.core.keyed import content_digest
from ragtrace._internal.setup import config

from .cohere_fake import FakeCohere

MODEL = "command-r-plus"
QUESTION = "How long does a refund take?"
A = {"id": "kb-a", "snippet": "Refunds reach the original card within 5 days."}
B = {"snippet": "Store credit is issued immediately instead of a refund."}
C = {"id": "kb-c", "snippet": "Shipping is free for orders over 50 euros.", "url": "https://example.com/shipping", "_excludes": ["url"]}
DOCUMENTS = [A, B, C]
B_ID = content_digest("snippet: Store credit is issued immediately instead of a refund.")
ANSWER = "Refunds take 5 days and store credit is immediate."
CITATIONS = [
    {"start": 0, "end": 19, "text": "Refunds take 5 days", "document_ids": ["kb-a"], "type": "TEXT_CONTENT"},
    {"start": 24, "end": 49, "text": "store credit is immediate", "document_ids": ["doc_1", "kb-a"], "type": "TEXT_CONTENT"},
    {"start": 0, "end": 7, "text": "Refunds", "document_ids": ["kb-c"], "type": "PLAN"},
]
CARRIED = [dict(A), dict(B, id="doc_1"), {"id": "kb-c", "snippet": C["snippet"], "url": C["url"]}]
META = {"billed_units": {"input_tokens": 40, "output_tokens": 12}, "tokens": {"input_tokens": 400, "output_tokens": 12}}


def response(answer: str = ANSWER, citations: Any = CITATIONS, **extra: Any) -> dict[str, Any]:
    body = {"text": answer, "generation_id": "g-1", "documents": CARRIED, "finish_reason": "COMPLETE", "meta": META, **extra}
    if citations is not None:
        body["citations"] = citations
    return body


def events(answer: str = ANSWER, citations: Any = CITATIONS) -> list[dict[str, Any]]:
    """The stream of the same answer: stream-start, its text in three pieces, the citations, stream-end."""
    size = -(-len(answer) // 3)
    found: list[dict[str, Any]] = [{"event_type": "stream-start", "generation_id": "g-1", "is_finished": False}]
    found += [{"event_type": "text-generation", "text": answer[i : i + size], "is_finished": False} for i in range(0, len(answer), size)]
    found += [{"event_type": "citation-generation", "citations": citations, "is_finished": False}]
    return [*found, {"event_type": "stream-end", "finish_reason": "COMPLETE", "response": response(answer, citations), "is_finished": True}]


def metrics(span: Any) -> dict[str, Any]:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


@pytest.fixture
def instrumented(spans):
    assert ragtrace.instrument("cohere") == ["cohere"]
    yield spans
    ragtrace.uninstrument("cohere")


def off_then_on(spans, call):
    off = call()
    assert spans.all() == []
    assert ragtrace.instrument("cohere") == ["cohere"]
    try:
        on = call()
    finally:
        ragtrace.uninstrument("cohere")
    return off, on


def check_main_case(spans, *, stream: bool) -> None:
    root = spans.one("pipeline")
    assert root.name == "invoke_workflow cohere"
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["kb-a", B_ID, "kb-c"]
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(assembled.attributes["rag.context.positions"]) == [1, 2, 3]
    attributes = generated.attributes
    assert generated.name == f"chat {MODEL}" and attributes["gen_ai.provider.name"] == "cohere"
    assert list(attributes["rag.citation.ids"]) == ["kb-a", B_ID] and attributes["rag.citation.invalid_count"] == 0
    assert (list(attributes["rag.citation.segment_starts"]), list(attributes["rag.citation.segment_ends"])) == ([0, 24, 24], [19, 49, 49])
    assert list(attributes["rag.citation.segment_ids"]) == ["kb-a", B_ID, "kb-a"]
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (400, 12)
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["COMPLETE"]
    assert attributes.get("gen_ai.request.stream", False) is stream
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["recall_proxy_weighted"], 9 / 11)
    assert got["context_precision"] == 1.0 and math.isclose(got["context_utilization"], 2 / 3)
    assert got["wasted_context_tokens"] == config.current().tokenizer.count("snippet: Shipping is free for orders over 50 euros.")
    assert got["invalid_citations"] == 0 and "status" not in got


def test_v1_chat_with_documents_is_one_pipeline_with_exact_figures(spans):
    server = FakeCohere(response())
    off, on = off_then_on(spans, lambda: server.v1_client().chat(model=MODEL, message=QUESTION, documents=DOCUMENTS, preamble="Answer from the documents."))
    assert on == off and on.citations[2].type == "PLAN"
    assert server.requests[0] == server.requests[1]  # the request went out as the app built it
    check_main_case(spans, stream=False)


def test_v1_chat_stream_reaches_the_app_unchanged_and_is_scored(spans):
    server = FakeCohere(events=events())
    off, on = off_then_on(spans, lambda: list(server.v1_client().chat_stream(model=MODEL, message=QUESTION, documents=DOCUMENTS)))
    assert on == off and [e.event_type for e in on] == ["stream-start", *["text-generation"] * 3, "citation-generation", "stream-end"]
    check_main_case(spans, stream=True)


def test_v1_async_chat_and_stream(instrumented):
    server = FakeCohere(response(), events())

    async def app() -> tuple[str, str]:
        client = server.v1_async_client()
        reply = await client.chat(model=MODEL, message=QUESTION, documents=DOCUMENTS)
        streamed = [e.text async for e in client.chat_stream(model=MODEL, message=QUESTION, documents=DOCUMENTS) if e.event_type == "text-generation"]
        return reply.text, "".join(streamed)

    assert asyncio.run(app()) == (ANSWER, ANSWER)
    roots = instrumented.by_stage("pipeline")
    assert len(roots) == 2 and len({r.context.trace_id for r in roots}) == 2
    for root in roots:
        got = metrics(root)
        assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 2) and math.isclose(got["recall_proxy"], 2 / 3)


def test_a_citation_of_an_unknown_document_is_invalid(instrumented):
    """doc_7 is no document of the request, nor one the response carries back. By hand: cited 1
    (A), one unknown citation, recall 1/3."""
    cited = [{"start": 0, "end": 19, "text": "Refunds take 5 days", "document_ids": ["kb-a", "doc_7"]}]
    FakeCohere(response(citations=cited)).v1_client().chat(model=MODEL, message=QUESTION, documents=DOCUMENTS)
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-a"] and generated.attributes["rag.citation.invalid_count"] == 1
    got = metrics(instrumented.one("pipeline"))
    assert (got["cited"], got["unknown_citations"]) == (1, 1) and math.isclose(got["recall_proxy"], 1 / 3)


@pytest.mark.parametrize("citations", [None, "kb-a", [{"start": 0, "end": 19, "text": "Refunds take 5 days", "document_ids": "kb-a"}]], ids=["absent", "not-a-list", "ids-not-a-list"])
def test_absent_or_unreadable_citations_are_not_measurable_never_zero(instrumented, citations):
    """No citations field is not "cited nothing": what was retrieved and shown is known (3, 3),
    what the answer cites is not."""
    FakeCohere(response(citations=citations)).v1_client().chat(model=MODEL, message=QUESTION, documents=DOCUMENTS)
    assert instrumented.one("generate").attributes["rag.citation.status"] == "answer_unreadable"
    got = metrics(instrumented.one("pipeline"))
    assert got["status"] == "answer_unreadable"
    assert (got["retrieved"], got["in_context"]) == (3, 3) and "recall_proxy" not in got and "cited" not in got


def test_an_empty_citations_list_is_measured_as_cited_nothing(instrumented):
    FakeCohere(response(citations=[])).v1_client().chat(model=MODEL, message=QUESTION, documents=DOCUMENTS)
    got = metrics(instrumented.one("pipeline"))
    assert (got["cited"], got["recall_proxy"]) == (0, 0.0) and "status" not in got


def test_a_v1_stream_cut_off_before_stream_end_is_not_scored_as_a_whole_answer(instrumented):
    server = FakeCohere(events=events()[:-1])
    read = list(server.v1_client().chat_stream(model=MODEL, message=QUESTION, documents=DOCUMENTS))
    assert read[-1].event_type == "citation-generation"
    assert instrumented.one("generate").attributes["rag.citation.status"] == "answer_incomplete"
    assert "recall_proxy" not in metrics(instrumented.one("pipeline"))


def test_v1_redact_mode_exports_no_document_text_or_answer(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "PLANTED-MARKER-7741"
    documents = [{"id": "kb-1", "title": f"{marker} title", "snippet": f"{marker} passage."}, {"snippet": f"{marker} id-less"}]
    answer = f"{marker} answer."
    cited = [{"start": 0, "end": len(answer), "text": answer, "document_ids": ["kb-1", "doc_1"]}]
    carried = [documents[0], dict(documents[1], id="doc_1")]
    server = FakeCohere(response(answer, cited, documents=carried), events(answer, cited))
    server.events[-1]["response"]["documents"] = carried
    ragtrace.instrument("cohere")
    try:
        client = server.v1_client()
        client.chat(model=MODEL, message=f"{marker} question", documents=documents, preamble=f"{marker} preamble")
        list(client.chat_stream(model=MODEL, message=f"{marker} question", documents=documents))
    finally:
        ragtrace.uninstrument("cohere")
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported
    assert [len(g.attributes["rag.citation.ids"]) for g in spans.by_stage("generate")] == [2, 2]


def test_uninstrument_restores_v1_and_a_client_made_while_instrumented_stops_recording(spans):
    from cohere import base_client as module

    originals = [getattr(getattr(module, c), m) for c in ("BaseCohere", "AsyncBaseCohere") for m in ("chat", "chat_stream")]
    ragtrace.instrument("cohere")
    server = FakeCohere(response())
    client = server.v1_client()  # binds chat on the instance (the SDK's validate_args)
    ragtrace.uninstrument("cohere")
    assert [getattr(getattr(module, c), m) for c in ("BaseCohere", "AsyncBaseCohere") for m in ("chat", "chat_stream")] == originals
    client.chat(model=MODEL, message=QUESTION, documents=DOCUMENTS)
    server.v1_client().chat(model=MODEL, message=QUESTION, documents=DOCUMENTS)
    assert spans.all() == []


@pytest.mark.parametrize("extra", [{"prompt_truncation": "AUTO"}, {"prompt_truncation": "AUTO_PRESERVE_ORDER"}, {"connectors": [{"id": "web-search"}]}], ids=["auto", "auto-preserve-order", "connectors"])
def test_truncation_or_connectors_leave_the_context_unknown(instrumented, extra):
    """The API may drop documents (truncation) or add its own (connectors): what the app gave is
    retrieved (3), what the model saw is not known, so no assemble span and no citation figures;
    the citations are still recorded as the API gave them."""
    FakeCohere(response()).v1_client().chat(model=MODEL, message=QUESTION, documents=DOCUMENTS, **extra)
    assert instrumented.by_stage("assemble") == []
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-a", B_ID] and generated.attributes["rag.citation.status"] == "context_unknown"
    got = metrics(instrumented.one("pipeline"))
    assert got["retrieved"] == 3 and "context_unknown" in got["status"].split(",")
    assert not {"in_context", "cited", "recall_proxy", "context_precision"} & set(got)


def test_an_id_less_document_with_excluded_fields_resolves_by_what_comes_back(instrumented):
    """An id-less document whose ``url`` the model is not shown: its id is the digest of
    "snippet: Closed on Sundays." only, and the response carries it back as doc_0 with the url
    and without ``_excludes``; the citation of doc_0 resolves to it. By hand: R = C = 1, cited 1."""
    document = {"snippet": "Closed on Sundays.", "url": "https://example.com/hours", "_excludes": ["url"]}
    answer = "It is closed on Sundays."
    cited = [{"start": 6, "end": 23, "text": "closed on Sundays", "document_ids": ["doc_0"]}]
    carried = [{"id": "doc_0", "snippet": "Closed on Sundays.", "url": "https://example.com/hours"}]
    FakeCohere(response(answer, cited, documents=carried)).v1_client().chat(model=MODEL, message="When is it open?", documents=[document])
    chunk_id = content_digest("snippet: Closed on Sundays.")
    assert list(instrumented.one("assemble").attributes["rag.context.chunk_ids"]) == [chunk_id]
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == [chunk_id] and generated.attributes["rag.citation.invalid_count"] == 0
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"]) == (1, 1, 1, 1.0)
