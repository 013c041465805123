"""The Responses API's ``file_search`` tool against the real ``openai`` SDK over a fake transport
answering in the API's exact schema (``openai_responses_fake``): ``ragtrace.instrument()`` alone.

The search returns 4 results: two of file-refunds (R1, R2), then file-shipping (R3) and
file-gifts (R4). Hand-worked truth:
- citing file-shipping and file-gifts (one result each: exact): retrieved 4, in context 4, cited 2
  at positions [3, 4], recall 2/4, weighted recall (1/3 + 1/4) / (1 + 1/2 + 1/3 + 1/4) = 7/25,
  precision 1, utilisation 1/2, wasted tokens R1's 10 + R2's 7 = 17;
- citing file-refunds (two results): it resolves to R1 and R2, granularity file, and the figures
  that count cited chunks are not measurable (citations_file_level); retrieved 4, in context 4 and
  precision 1 still are;
- without ``include``: no results, the retrieve span says so, the cited file is still known.
"""

from __future__ import annotations

import asyncio
import math

import openai
import pytest

import ragtrace
from ragtrace._internal.core import keyed

from .openai_responses_fake import MODEL, STORE, FakeResponses, result

RESULTS = [
    result("file-refunds", "Refunds reach the original card within 5 business days.", 0.91),
    result("file-refunds", "Refunds to store credit are instant.", 0.74),
    result("file-shipping", "Shipping is free for orders over 50 euros.", 0.52),
    result("file-gifts", "Gift cards never expire.", 0.40),
]
IDS = [f"{r['file_id']}#{keyed.content_digest(r['text'])}" for r in RESULTS]
EXACT = [("Shipping is free over 50 euros", ["file-shipping"]), (" and gift cards never expire.", ["file-gifts"])]
FILE_LEVEL = [("Refunds take 5 business days.", ["file-refunds"])]
QUESTION = "How long does a refund take?"
REQUEST = {"model": MODEL, "input": QUESTION, "tools": [{"type": "file_search", "vector_store_ids": [STORE]}], "include": ["file_search_call.results"]}


@pytest.fixture
def instrumented(spans):
    assert ragtrace.instrument("openai") == ["openai"]
    yield spans
    ragtrace.uninstrument("openai")


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def check_exact(spans, *, stream: bool) -> None:
    root = spans.one("pipeline")
    assert root.parent is None and root.name == "invoke_workflow openai"
    assert "rag.root.abandoned" not in root.attributes  # ended by its answer
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert retrieved.name == f"retrieval {STORE}" and retrieved.attributes["gen_ai.retrieval.query.text"] == "refund time"
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == IDS
    assert retrieved.attributes["rag.retrieval.top_score"] == 0.91
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == IDS
    attributes = generated.attributes
    assert attributes["rag.citation.format"] == "provider" and attributes["rag.citation.granularity"] == "file"
    assert list(attributes["rag.citation.ids"]) == IDS[2:]
    assert list(attributes["rag.citation.file_ids"]) == ["file-shipping", "file-gifts"]
    assert attributes.get("gen_ai.request.stream", False) is stream
    assert (attributes.get("gen_ai.response.time_to_first_chunk") is not None) is stream
    got = metrics(root)
    assert got["inclusion_method"] == "provider" and "status" not in got
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (4, 4, 2, [3, 4])
    assert got["recall_proxy"] == 0.5 and math.isclose(got["recall_proxy_weighted"], 7 / 25)
    assert got["context_precision"] == 1.0 and got["context_utilization"] == 0.5 and got["wasted_context_tokens"] == 17


def test_file_search_is_one_pipeline_with_exact_figures(instrumented):
    reply = FakeResponses(RESULTS, EXACT).client().responses.create(**REQUEST)
    assert reply.output[0].type == "file_search_call" and len(reply.output[0].results) == 4
    check_exact(instrumented, stream=False)


def test_a_streamed_file_search_reads_the_events_the_app_read(instrumented):
    stream = FakeResponses(RESULTS, EXACT).client().responses.create(**REQUEST, stream=True)
    assert isinstance(stream, openai.Stream)
    with stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.completed"
    check_exact(instrumented, stream=True)


def test_responses_stream_helper_and_async(instrumented):
    fake = FakeResponses(RESULTS, EXACT)

    async def app() -> str:
        reply = await fake.async_client().responses.create(**REQUEST)
        return reply.output_text

    with fake.client().responses.stream(**REQUEST) as stream:
        final = stream.get_final_response()
    assert asyncio.run(app()) == final.output_text
    roots = instrumented.by_stage("pipeline")
    assert len(roots) == 2
    for root in roots:
        got = metrics(root)
        assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (4, 4, 2, [3, 4])


def test_a_file_with_several_results_is_cited_at_file_level_and_said_so(instrumented):
    FakeResponses(RESULTS, FILE_LEVEL).client().responses.create(**REQUEST)
    generated, root = instrumented.one("generate"), instrumented.one("pipeline")
    assert list(generated.attributes["rag.citation.ids"]) == IDS[:2]
    assert generated.attributes["rag.citation.granularity"] == "file"
    assert generated.attributes["rag.citation.status"] == "citations_file_level"
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["context_precision"]) == (4, 4, 1.0)
    assert "citations_file_level" in got["status"]
    for figure in ("cited", "recall_proxy", "recall_proxy_weighted", "context_utilization", "wasted_context_tokens", "cited_positions"):
        assert figure not in got, figure


def test_without_include_the_results_are_absent_and_the_spans_say_so(instrumented):
    request = {k: v for k, v in REQUEST.items() if k != "include"}
    FakeResponses(RESULTS, FILE_LEVEL).client().responses.create(**request)
    retrieved, generated = instrumented.one("retrieve"), instrumented.one("generate")
    assert retrieved.attributes["rag.retrieval.status"] == "results_not_included"
    assert "rag.retrieval.chunk_ids" not in retrieved.attributes
    assert instrumented.by_stage("assemble") == []
    assert list(generated.attributes["rag.citation.file_ids"]) == ["file-refunds"]
    assert generated.attributes["rag.citation.status"] == "results_not_included"
    assert "results_not_included" in generated.attributes["rag.metrics.status"]
    got = metrics(instrumented.one("pipeline"))
    assert "recall_proxy" not in got and "in_context" not in got


def test_inside_a_pipeline_the_stages_are_the_pipelines(instrumented):
    with ragtrace.rag_pipeline("support") as pipeline:
        FakeResponses(RESULTS, EXACT).client().responses.create(**REQUEST)
    root = instrumented.one("pipeline")
    assert root.name == "invoke_workflow support"
    assert {s.parent.span_id for s in instrumented.all() if s is not root} == {root.context.span_id}
    assert metrics(root)["recall_proxy"] == 0.5 and pipeline is not None


def test_a_chat_completion_and_a_response_without_file_search_open_no_pipeline(instrumented, chat_server):
    url, _ = chat_server
    openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
    assert [s.attributes["rag.stage"] for s in instrumented.all()] == ["generate"]
    assert "rag.citation.granularity" not in instrumented.one("generate").attributes


def test_redact_mode_exports_no_result_text_or_filename(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    ragtrace.instrument("openai")
    try:
        marker = "PLANTED-MARKER-4419"
        results = [result("file-a", f"{marker} result text.", 0.9), result("file-b", "Other text.", 0.5)]
        FakeResponses(results, [(f"{marker} answer", ["file-a"])]).client().responses.create(**dict(REQUEST, input=f"{marker} question"))
    finally:
        ragtrace.uninstrument("openai")
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported and "file-a.md" not in exported
    assert metrics(spans.one("pipeline"))["cited"] == 1
