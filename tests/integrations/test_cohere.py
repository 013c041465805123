"""The Cohere integration against the real ``cohere.ClientV2`` / ``AsyncClientV2`` over an httpx
``MockTransport`` answering in the v2 API's JSON and server-sent events (``cohere_fake``). Each
call is made first with ragtrace off, so a difference in what the app gets is ragtrace's.

Hand-worked truth for the main case: documents A, B, C (ids kb-a, kb-b, kb-c, in that order);
the answer "Refunds take 5 days and store credit is immediate." cites "Refunds take 5 days"
(0-19) from A and "store credit is immediate" (24-49) from B and A; a ``THINKING_CONTENT``
citation of C is the model's reasoning, not counted. So retrieved 3, in context 3 (provider),
cited 2 at positions [1, 2], recall 2/3, weighted recall (1 + 1/2) / (1 + 1/2 + 1/3) = 9/11,
precision 1, utilisation 2/3, wasted tokens = the tokens of C's text as the model reads it,
"snippet: Shipping is free for orders over 50 euros." (counted by the configured tokenizer).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import ragtrace
from ragtrace._internal.setup import config
from ragtrace._internal.core.keyed import content_digest

from .cohere_fake import MODEL, FakeCohere, chat_events, chat_response, citation

QUESTION = "How long does a refund take?"
DOCUMENTS = [
    {"id": "kb-a", "data": {"snippet": "Refunds reach the original card within 5 days."}},
    {"id": "kb-b", "data": {"snippet": "Store credit is issued immediately instead of a refund."}},
    {"id": "kb-c", "data": {"snippet": "Shipping is free for orders over 50 euros."}},
]
ANSWER = "Refunds take 5 days and store credit is immediate."
CITATIONS = [
    citation(ANSWER, "Refunds take 5 days", ["kb-a"]),
    citation(ANSWER, "store credit is immediate", ["kb-b", "kb-a"]),
    citation(ANSWER, "Refunds", ["kb-c"], kind="THINKING_CONTENT"),
]
MESSAGES = [{"role": "system", "content": "Answer from the documents."}, {"role": "user", "content": QUESTION}]


def metrics(span: Any) -> dict[str, Any]:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def fake() -> FakeCohere:
    return FakeCohere(chat_response(ANSWER, CITATIONS), chat_events(ANSWER, CITATIONS))


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


def check_main_case(spans, *, stream: bool, nested: bool = False) -> None:
    """``nested``: the root sits under another instrumentor's span of the call."""
    root = spans.one("pipeline")
    assert (root.parent is not None) is nested and root.name == "invoke_workflow cohere" and "rag.root.abandoned" not in root.attributes
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["kb-a", "kb-b", "kb-c"]
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(assembled.attributes["rag.context.positions"]) == [1, 2, 3]
    attributes = generated.attributes
    assert generated.name == f"chat {MODEL}" and attributes["gen_ai.provider.name"] == "cohere"
    assert list(attributes["rag.citation.ids"]) == ["kb-a", "kb-b"] and attributes["rag.citation.invalid_count"] == 0
    assert list(attributes["rag.citation.segment_starts"]) == [0, 24, 24]
    assert list(attributes["rag.citation.segment_ends"]) == [19, 49, 49]
    assert list(attributes["rag.citation.segment_ids"]) == ["kb-a", "kb-b", "kb-a"]
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (400, 12)
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["COMPLETE"]
    assert attributes.get("gen_ai.request.stream", False) is stream
    tokens = config.current().tokenizer.count("snippet: Shipping is free for orders over 50 euros.")
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["recall_proxy_weighted"], 9 / 11)
    assert got["context_precision"] == 1.0 and math.isclose(got["context_utilization"], 2 / 3)
    assert got["wasted_context_tokens"] == tokens and got["invalid_citations"] == 0 and "status" not in got


def test_chat_with_documents_is_one_pipeline_with_exact_figures(spans):
    server = fake()
    off, on = off_then_on(spans, lambda: server.client().chat(model=MODEL, messages=MESSAGES, documents=DOCUMENTS))
    assert on == off and on.message.citations[2].type == "THINKING_CONTENT"
    assert server.requests[0] == server.requests[1]  # the request went out as the app built it
    check_main_case(spans, stream=False)


def test_chat_stream_reads_the_events_the_app_read(spans):
    server = fake()
    off, on = off_then_on(spans, lambda: list(server.client().chat_stream(model=MODEL, messages=MESSAGES, documents=DOCUMENTS)))
    assert on == off and "".join(e.delta.message.content.text for e in on if e.type == "content-delta") == ANSWER
    check_main_case(spans, stream=True)


def test_async_chat_and_stream(instrumented):
    server = fake()

    async def app() -> tuple[str, str]:
        client = server.async_client()
        reply = await client.chat(model=MODEL, messages=MESSAGES, documents=DOCUMENTS)
        streamed = [e.delta.message.content.text async for e in client.chat_stream(model=MODEL, messages=MESSAGES, documents=DOCUMENTS) if e.type == "content-delta"]
        return reply.message.content[0].text, "".join(streamed)

    assert asyncio.run(app()) == (ANSWER, ANSWER)
    roots = instrumented.by_stage("pipeline")
    assert len(roots) == 2 and len({r.context.trace_id for r in roots}) == 2
    for root in roots:
        got = metrics(root)
        assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 2) and math.isclose(got["recall_proxy"], 2 / 3)


def test_a_stream_closed_early_scores_what_the_app_read(instrumented):
    """The app stops after the text and the first citation (events 0-5: message-start,
    content-start, three deltas, citation-start of A). By hand: cited A only, recall 1/3."""
    stream = fake().client().chat_stream(model=MODEL, messages=MESSAGES, documents=DOCUMENTS)
    read = [event for _, event in zip(range(6), stream)]
    stream.close()
    assert read[-1].type == "citation-start"
    assert list(instrumented.one("generate").attributes["rag.citation.ids"]) == ["kb-a"]
    got = metrics(instrumented.one("pipeline"))
    assert (got["cited"], list(got["cited_positions"])) == (1, [1]) and math.isclose(got["recall_proxy"], 1 / 3)


def test_a_stream_cut_off_before_message_end_is_not_scored_as_a_whole_answer(instrumented):
    """The connection drops after the text and the first citation (6 events) and the SDK's
    iterator just ends: the app read all there was, but no message-end came. Scored as it stands
    that would be cited 1, recall 1/3 (the whole answer: 2/3): not measurable (answer_incomplete)."""
    server = fake()
    server.events = server.events[:6]
    read = list(server.client().chat_stream(model=MODEL, messages=MESSAGES, documents=DOCUMENTS))
    assert read[-1].type == "citation-start"
    assert instrumented.one("generate").attributes["rag.citation.status"] == "answer_incomplete"
    got = metrics(instrumented.one("pipeline"))
    assert got["status"] == "answer_incomplete" and "recall_proxy" not in got and (got["retrieved"], got["in_context"]) == (3, 3)


def test_id_less_documents_and_an_unknown_source(instrumented):
    """A string document and one without an id get the keyed digest of their text; the ids the
    API generates for them (doc:0, doc:1) resolve by the document each source carries back (a
    string document comes back as its one text field); an id that names no document of the
    request is an invalid (unknown) citation. By hand: R = C = 2, cited 2, one unknown."""
    plain, data = "Refunds take 5 days.", {"snippet": "Store credit is immediate."}
    answer = "Five days, or credit now."
    cited = [citation(answer, "Five days", ["doc:0"], documents={"doc:0": {"content": plain}}), citation(answer, "credit now", ["doc:1", "kb-zz"], documents={"doc:1": data})]
    FakeCohere(chat_response(answer, cited)).client().chat(model=MODEL, messages=MESSAGES, documents=[plain, {"data": data}])
    ids = [content_digest(plain), content_digest("snippet: Store credit is immediate.")]
    assert list(instrumented.one("assemble").attributes["rag.context.chunk_ids"]) == ids
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == ids and generated.attributes["rag.citation.invalid_count"] == 1
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], got["unknown_citations"]) == (2, 2, 2, 1)


def test_inside_the_apps_pipeline_its_own_ids_stand(instrumented):
    """The app retrieved 4 chunks itself and hands 3 to Cohere under other ids: the texts match,
    so the recorded ids stand and nothing is retrieved twice. By hand: R = 4, C = 3, cited 2."""
    texts = [d["data"]["snippet"] for d in DOCUMENTS]
    with ragtrace.rag_pipeline("support"):
        with ragtrace.retrieve(QUESTION) as r:
            r.record([{"id": f"doc-{n}", "content": f"snippet: {t}"} for n, t in enumerate([*texts, "Gift cards never expire."], 1)])
        fake().client().chat(model=MODEL, messages=MESSAGES, documents=DOCUMENTS)
    assert len(instrumented.by_stage("retrieve")) == 1
    assert list(instrumented.one("generate").attributes["rag.citation.ids"]) == ["doc-1", "doc-2"]
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (4, 3, 2) and got["recall_proxy"] == 0.5


def test_chat_without_documents_is_a_plain_generate_span(instrumented):
    FakeCohere(chat_response("Hello.", [])).client().chat(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    assert [s.attributes["rag.stage"] for s in instrumented.all()] == ["generate"]


def test_rerank_and_embed(spans):
    """rerank of three candidate texts returns 2 (index 2 at 0.9, index 0 at 0.3); embed gives a
    3-dimensional vector and 3 billed tokens."""
    texts = ["alpha passage", "beta passage", "gamma passage"]
    server = FakeCohere(
        rerank_body={"id": "r", "results": [{"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.3}], "meta": {"billed_units": {"search_units": 1}}},
        embed_body={"id": "e", "response_type": "embeddings_by_type", "texts": ["alpha"], "embeddings": {"float": [[0.1, 0.2, 0.3]]}, "meta": {"billed_units": {"input_tokens": 3}}},
    )

    def calls() -> tuple[Any, Any]:
        client = server.client()
        return client.rerank(model="rerank-v3.5", query=QUESTION, documents=texts, top_n=2), client.embed(model="embed-v4.0", input_type="search_document", texts=["alpha"], embedding_types=["float"])

    off, on = off_then_on(spans, calls)
    assert on == off
    reranked, embedded = spans.one("rerank"), spans.one("embed")
    assert list(reranked.attributes["rag.rerank.output_ids"]) == [content_digest(texts[2]), content_digest(texts[0])]
    assert (reranked.attributes["rag.rerank.input_count"], reranked.attributes["rag.rerank.top_n"], reranked.attributes["rag.rerank.search_units"]) == (3, 2, 1.0)
    assert (embedded.attributes["gen_ai.embeddings.dimension.count"], embedded.attributes["gen_ai.usage.input_tokens"]) == (3, 3)


def test_redact_mode_exports_no_document_text_or_answer(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "PLANTED-MARKER-9902"
    documents = [{"id": "kb-1", "data": {"title": f"{marker} title", "snippet": f"{marker} passage."}}, f"{marker} plain document"]
    answer = f"{marker} answer."
    cited = [citation(answer, answer, ["kb-1"], documents={"kb-1": documents[0]["data"]})]
    server = FakeCohere(chat_response(answer, cited), chat_events(answer, cited))
    ragtrace.instrument("cohere")
    try:
        client = server.client()
        messages = [{"role": "user", "content": f"{marker} question"}]
        client.chat(model=MODEL, messages=messages, documents=documents)
        list(client.chat_stream(model=MODEL, messages=messages, documents=documents))
    finally:
        ragtrace.uninstrument("cohere")
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported
    assert [list(g.attributes["rag.citation.ids"]) for g in spans.by_stage("generate")] == [["kb-1"], ["kb-1"]]


def test_uninstrument_restores_the_sdk(spans):
    from cohere.v2 import client as module

    originals = [getattr(getattr(module, c), m) for c in ("V2Client", "AsyncV2Client") for m in ("chat", "chat_stream", "rerank", "embed")]
    ragtrace.instrument("cohere")
    assert module.V2Client.chat is not originals[0]
    ragtrace.uninstrument("cohere")
    assert [getattr(getattr(module, c), m) for c in ("V2Client", "AsyncV2Client") for m in ("chat", "chat_stream", "rerank", "embed")] == originals
    fake().client().chat(model=MODEL, messages=MESSAGES, documents=DOCUMENTS)
    assert spans.all() == []


def test_a_cohere_outside_the_range_is_left_alone_with_one_log_line(monkeypatch, caplog, spans):
    from dataclasses import replace

    import cohere
    from cohere.v2 import client as module

    from ragtrace._internal import integrations

    monkeypatch.setitem(integrations.LIBRARIES, "cohere", replace(integrations.LIBRARIES["cohere"], requirements=("cohere >= 99",)))
    original = module.V2Client.chat
    with caplog.at_level("WARNING", logger="ragtrace"):
        assert ragtrace.instrument("cohere") == []
    assert [r.getMessage() for r in caplog.records if "cohere" in r.getMessage()] == [
        f"ragtrace: not instrumenting cohere: cohere {cohere.__version__} is outside the supported range >=99"
    ]
    assert module.V2Client.chat is original


def test_a_non_ascii_answer_is_placed_in_characters(instrumented):
    """Cohere counts characters: "Rückerstattung in 5 Tagen" starts at 0 and ends at 25, even
    though "ü" is two bytes."""
    answer = "Rückerstattung in 5 Tagen, Gutschrift sofort."
    cited = [citation(answer, "Rückerstattung in 5 Tagen", ["kb-a"]), citation(answer, "Gutschrift sofort", ["kb-b"])]
    FakeCohere(chat_response(answer, cited)).client().chat(model=MODEL, messages=MESSAGES, documents=DOCUMENTS)
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.segment_starts"]) == [0, 27]
    assert list(generated.attributes["rag.citation.segment_ends"]) == [25, 44]
