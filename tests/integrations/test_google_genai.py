"""The google-genai integration against the real SDK over an httpx ``MockTransport`` answering in
the Gemini API's schema (``gemini_fake``): a ``generate_content`` call with a File Search tool gets
exact figures from the response's grounding metadata, from ``ragtrace.instrument()`` alone. Each
call is first made with ragtrace off: the app must get the same thing with it on.

Hand-worked truth for the main case. Grounding chunks: 0 = A (a File Search document's chunk:
id ``<document>#<digest of its text>``), 1 = B (a RAG chunk with its own id ``kb-credit-1``),
2 = C (text only: the keyed digest of its text), 3 = a web page (not the app's). The answer is
"Refunds take 5 business days. Store credit is immediate. Anything else?"; supports: bytes [0, 29)
cite A, bytes [30, 56) cite B and A, and [57, 71) cites the web page (not counted). So retrieved
3, in context 3 (provider), cited 2 (A, B) at positions [1, 2], recall 2/3, weighted recall
(1 + 1/2) / (1 + 1/2 + 1/3) = 9/11, precision 1, utilisation 2/3, wasted tokens = C's 9
("Shipping is free for orders over 50 euros." is 8 words and a full stop), no invalid citation;
segments (0, 29, A), (30, 56, B), (30, 56, A) in characters (ASCII: bytes = characters).
"""

from __future__ import annotations

import asyncio
import math

import pytest
from google.genai import types

import ragtrace
from ragtrace._internal.core import keyed

from .gemini_fake import MODEL, STORE, FakeGemini, file_search_config, response, retrieved, support, web

QUESTION = "How long does a refund take?"
DOCUMENT = f"{STORE}/documents/refund-policy-1"
A_TEXT = "Refunds reach the original card within 5 business days."
B_TEXT = "Store credit is issued immediately instead of a refund."
C_TEXT = "Shipping is free for orders over 50 euros."
TEXT = "Refunds take 5 business days. Store credit is immediate. Anything else?"
CHUNKS = [retrieved(A_TEXT, document=DOCUMENT), retrieved(B_TEXT, chunk_id="kb-credit-1"), retrieved(C_TEXT), web("https://example.org/refunds", "Refunds at Example")]
SUPPORTS = [support(0, 29, [0]), support(30, 56, [1, 0]), support(57, 71, [3])]
BODY = response([{"text": TEXT}], CHUNKS, SUPPORTS, queries=["refund duration"])
PIECES = ["Refunds take 5 busi", "ness days. Store credit is immediate.", " Anything else?"]


def a_id() -> str:
    return f"{DOCUMENT}#{keyed.content_digest(A_TEXT)}"


def ids() -> list[str]:
    return [a_id(), "kb-credit-1", keyed.content_digest(C_TEXT)]


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


@pytest.fixture
def off_then_on(spans):
    """Run ``app`` with ragtrace off, then on: the app must get the same result both times."""

    def run(app):
        before = app()
        assert spans.all() == []
        assert ragtrace.instrument("google_genai") == ["google_genai"]
        try:
            after = app()
        finally:
            ragtrace.uninstrument("google_genai")
        assert after == before, "the app got something else with ragtrace on"
        return after

    return run


def dumped(reply) -> dict:
    return reply.model_dump(exclude_none=True)


def check_main_case(spans, *, stream: bool) -> None:
    root = spans.one("pipeline")
    assert root.parent is None and root.name == "invoke_workflow google_genai"
    assert "rag.root.abandoned" not in root.attributes
    retrieved_span, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved_span, assembled, generated)} == {root.context.span_id}
    assert list(retrieved_span.attributes["rag.retrieval.chunk_ids"]) == ids()
    assert retrieved_span.attributes["gen_ai.data_source.id"] == STORE
    assert retrieved_span.attributes["gen_ai.retrieval.query.text"] == "refund duration"
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == ids()
    assert list(assembled.attributes["rag.context.positions"]) == [1, 2, 3]
    assert list(assembled.attributes["rag.context.chunk_tokens"])[2] == 9
    attributes = generated.attributes
    assert generated.name == f"chat {MODEL}"
    assert attributes["gen_ai.provider.name"] == "gcp.gen_ai"
    assert (attributes["rag.citation.format"], attributes["rag.citation.granularity"]) == ("provider", "chunk")
    assert list(attributes["rag.citation.ids"]) == [a_id(), "kb-credit-1"]
    assert attributes["rag.citation.invalid_count"] == 0
    assert list(attributes["rag.citation.segment_starts"]) == [0, 30, 30]
    assert list(attributes["rag.citation.segment_ends"]) == [29, 56, 56]
    assert list(attributes["rag.citation.segment_ids"]) == [a_id(), "kb-credit-1", a_id()]
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (120, 17)
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["STOP"]
    assert attributes.get("gen_ai.request.stream", False) is stream
    got = metrics(root)
    assert got["inclusion_method"] == "provider"
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["recall_proxy_weighted"], 9 / 11)
    assert got["context_precision"] == 1.0 and math.isclose(got["context_utilization"], 2 / 3)
    assert got["wasted_context_tokens"] == 9 and got["invalid_citations"] == 0
    assert "status" not in got


def test_a_plain_call_with_file_search_is_one_pipeline_with_exact_figures(spans, off_then_on):
    fake = FakeGemini(BODY)
    reply = off_then_on(lambda: dumped(fake.client().models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config())))
    assert reply["candidates"][0]["grounding_metadata"]["grounding_supports"][1]["grounding_chunk_indices"] == [1, 0]
    check_main_case(spans, stream=False)
    assert fake.requests[0] == fake.requests[1]  # the request went out as the app built it


def test_a_streamed_call_reads_the_grounding_from_the_last_chunk(spans, off_then_on):
    fake = FakeGemini(BODY, PIECES)

    def app():
        chunks = list(fake.client().models.generate_content_stream(model=MODEL, contents=QUESTION, config=file_search_config()))
        return [dumped(c) for c in chunks]

    chunks = off_then_on(app)
    assert "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks) == TEXT
    assert [("grounding_metadata" in c["candidates"][0]) for c in chunks] == [False, False, True]
    check_main_case(spans, stream=True)
    assert spans.one("generate").attributes["gen_ai.response.time_to_first_chunk"] > 0


def test_async_call_and_async_stream(spans, off_then_on):
    fake = FakeGemini(BODY, PIECES)

    def app():
        async def both():
            client = fake.async_client()
            reply = await client.aio.models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config())
            stream = await client.aio.models.generate_content_stream(model=MODEL, contents=QUESTION, config=file_search_config())
            return [dumped(reply)] + [dumped(c) async for c in stream]

        return asyncio.run(both())

    off_then_on(app)
    roots = spans.by_stage("pipeline")
    assert len(roots) == 2 and len({r.context.trace_id for r in roots}) == 2  # one pipeline per call
    for root in roots:
        got = metrics(root)
        assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
        assert math.isclose(got["recall_proxy"], 2 / 3) and "status" not in got
    assert sorted(bool(g.attributes.get("gen_ai.request.stream")) for g in spans.by_stage("generate")) == [False, True]


def test_a_non_ascii_answer_gets_its_segments_in_characters(spans, off_then_on):
    """The answer is part 1 (part 0 is a thought, not the answer): "Rückzahlung für Karten: 5 Tage.
    Gutschrift sofort.". By hand: "Rückzahlung für Karten: 5 Tage." is 31 characters, 33 UTF-8 bytes
    (two ü); the space is byte 33, "Gutschrift sofort." bytes [34, 52) = characters [32, 50). A
    character slice of the bytes would have cut "tschrift sofort."."""
    answer = "Rückzahlung für Karten: 5 Tage. Gutschrift sofort."
    assert len(answer[:31].encode()) == 33 and answer[32:50] == "Gutschrift sofort."  # the hand count
    parts = [{"text": "Let me look at the refund policy.", "thought": True}, {"text": answer}]
    supports = [support(0, 33, [0], part=1, text="Rückzahlung für Karten: 5 Tage."), support(34, 52, [1], part=1, text="Gutschrift sofort.")]
    fake = FakeGemini(response(parts, CHUNKS[:3], supports))
    reply = off_then_on(lambda: fake.client().models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config()).text)
    assert reply == answer
    generated = spans.one("generate")
    assert list(generated.attributes["rag.citation.segment_starts"]) == [0, 32]
    assert list(generated.attributes["rag.citation.segment_ends"]) == [31, 50]
    assert list(generated.attributes["rag.citation.segment_ids"]) == [a_id(), "kb-credit-1"]
    got = metrics(spans.one("pipeline"))
    assert (got["cited"], list(got["cited_positions"])) == (2, [1, 2])


def test_a_segment_that_does_not_slice_to_its_text_gets_no_position(spans):
    """Bytes [1, 33) would split the ü's two bytes no differently than a wrong count would: the
    citation stands (A is cited), its position is not given."""
    answer = "Rückzahlung für Karten: 5 Tage."
    fake = FakeGemini(response([{"text": answer}], CHUNKS[:3], [support(2, 33, [0]), support(0, 33, [1], text="something else")]))
    ragtrace.instrument("google_genai")
    try:
        fake.client().models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config())
    finally:
        ragtrace.uninstrument("google_genai")
    generated = spans.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == [a_id(), "kb-credit-1"]
    assert "rag.citation.segment_starts" not in generated.attributes


def test_a_stream_closed_before_the_grounding_scores_what_the_app_read(spans, off_then_on):
    """The app reads the first chunk and closes the stream: the grounding metadata (on the last
    chunk) never reached it, so no retrieval is known, and the figures say so."""
    fake = FakeGemini(BODY, PIECES)

    def app():
        stream = fake.client().models.generate_content_stream(model=MODEL, contents=QUESTION, config=file_search_config())
        first = next(stream)
        stream.close()
        return dumped(first)

    assert off_then_on(app)["candidates"][0]["content"]["parts"][0]["text"] == PIECES[0]
    assert spans.by_stage("retrieve") == []
    generated, root = spans.one("generate"), spans.one("pipeline")
    assert generated.end_time is not None and root.end_time is not None
    assert "no_retrieval" in metrics(root)["status"] and "cited" not in metrics(root)


def test_an_invalid_index_is_an_invalid_citation_and_citation_metadata_is_not_counted(spans):
    """Support index 7 names no grounding chunk: one invalid (unknown) citation. The candidate's
    citation_metadata (recitation of training data) adds nothing."""
    body = response([{"text": TEXT}], CHUNKS[:3], [support(0, 29, [0]), support(30, 56, [7])])
    body["candidates"][0]["citationMetadata"] = {"citations": [{"startIndex": 0, "endIndex": 10, "uri": "https://example.org/book"}]}
    ragtrace.instrument("google_genai")
    try:
        FakeGemini(body).client().models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config())
    finally:
        ragtrace.uninstrument("google_genai")
    generated = spans.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == [a_id()]
    assert generated.attributes["rag.citation.invalid_count"] == 1
    got = metrics(spans.one("pipeline"))
    assert (got["cited"], got["invalid_citations"], got["unknown_citations"]) == (1, 1, 1)


def test_inside_the_apps_pipeline_its_stages_are_the_pipelines(spans):
    ragtrace.instrument("google_genai")
    try:
        with ragtrace.rag_pipeline("support") as run:
            FakeGemini(BODY).client().models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config())
    finally:
        ragtrace.uninstrument("google_genai")
    root = spans.one("pipeline")
    assert root.name == "invoke_workflow support"
    assert {s.parent.span_id for s in spans.all() if s is not root} == {root.context.span_id}
    assert (run.metrics["retrieved"], run.metrics["cited"]) == (3, 2)


def test_a_call_without_a_retrieval_tool_is_a_plain_generate_span(spans, off_then_on):
    fake = FakeGemini(response([{"text": "Hello."}]))
    assert off_then_on(lambda: fake.client().models.generate_content(model=MODEL, contents="Hi").text) == "Hello."
    assert [s.attributes["rag.stage"] for s in spans.all()] == ["generate"]
    assert "rag.citation.granularity" not in spans.one("generate").attributes


def test_a_retrieval_tool_by_dict_and_a_vertex_rag_store(spans):
    """Vertex RAG Engine: the corpus is the data source; RAG chunks with their own ids."""
    corpus = "projects/p/locations/us-central1/ragCorpora/123"
    config = {"tools": [{"retrieval": {"vertex_rag_store": {"rag_resources": [{"rag_corpus": corpus}]}}}]}
    body = response([{"text": TEXT}], [retrieved(A_TEXT, chunk_id="c-1"), retrieved(B_TEXT, chunk_id="c-2")], [support(0, 29, [1])])
    ragtrace.instrument("google_genai")
    try:
        FakeGemini(body).client(vertexai=True).models.generate_content(model=MODEL, contents=[types.Content(role="user", parts=[types.Part(text=QUESTION)])], config=config)
    finally:
        ragtrace.uninstrument("google_genai")
    retrieved_span = spans.one("retrieve")
    assert retrieved_span.attributes["gen_ai.data_source.id"] == corpus
    assert retrieved_span.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert list(spans.one("generate").attributes["rag.citation.ids"]) == ["c-2"]
    got = metrics(spans.one("pipeline"))
    assert (got["retrieved"], got["cited"], got["recall_proxy"]) == (2, 1, 0.5)


def test_redact_mode_exports_no_text_title_uri_or_answer(spans):
    marker = "PLANTED-MARKER-4417"
    chunks = [
        retrieved(f"{marker} chunk one.", document=DOCUMENT, title=f"{marker} title", uri=f"gs://bucket/{marker}.pdf"),
        retrieved("Plain two.", uri=f"gs://bucket/{marker}-2.pdf"),
    ]
    answer = f"{marker} answer."
    body = response([{"text": answer}], chunks, [support(0, len(answer.encode()), [0], text=answer)], queries=[f"{marker} query"])
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    ragtrace.instrument("google_genai")
    try:
        config = file_search_config(system_instruction=f"{marker} system")
        FakeGemini(body, [answer[:9], answer[9:]]).client().models.generate_content(model=MODEL, contents=f"{marker} question", config=config)
        list(FakeGemini(body, [answer[:9], answer[9:]]).client().models.generate_content_stream(model=MODEL, contents=f"{marker} question", config=config))
    finally:
        ragtrace.uninstrument("google_genai")
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported and "gs://" not in exported
    for root in spans.by_stage("pipeline"):
        assert metrics(root)["cited"] == 1


def test_an_api_error_passes_through_and_ends_the_pipeline(spans):
    import httpx
    from google import genai
    from google.genai import errors

    def refuse(request):
        return httpx.Response(503, json={"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}})

    client = genai.Client(api_key="k", http_options=types.HttpOptions(httpx_client=httpx.Client(transport=httpx.MockTransport(refuse)), retry_options=types.HttpRetryOptions(attempts=1)))
    ragtrace.instrument("google_genai")
    try:
        with pytest.raises(errors.ServerError) as raised:
            client.models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config())
    finally:
        ragtrace.uninstrument("google_genai")
    assert raised.value.code == 503
    generated, root = spans.one("generate"), spans.one("pipeline")
    assert generated.status.status_code.name == "ERROR" and root.end_time is not None


def test_uninstrument_restores_the_sdk(spans):
    from google.genai import models

    originals = [getattr(cls, m) for cls in (models.Models, models.AsyncModels) for m in ("generate_content", "generate_content_stream")]
    ragtrace.instrument("google_genai")
    assert models.Models.generate_content is not originals[0]
    ragtrace.uninstrument("google_genai")
    assert [getattr(cls, m) for cls in (models.Models, models.AsyncModels) for m in ("generate_content", "generate_content_stream")] == originals
    FakeGemini(BODY).client().models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config())
    assert spans.all() == []
