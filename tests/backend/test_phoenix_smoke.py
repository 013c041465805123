"""Round trip through a real Phoenix with the plain OpenTelemetry SDK only (no ragtrace code).

Proves the backend infra: OTLP/HTTP export -> Phoenix -> REST read-back, with span kinds, parent links and
attribute values and types intact.
"""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

from .phoenix import PROJECT_NAME_ATTRIBUTE, PhoenixServer, otlp_attributes

pytestmark = pytest.mark.heavy

DOCS = [("doc-a", 0.91, "BM25 is a ranking function."), ("doc-b", 0.42, "Dense retrieval uses embeddings.")]


def _hex_trace(ctx) -> str:
    return format(ctx.trace_id, "032x")


def _hex_span(ctx) -> str:
    return format(ctx.span_id, "016x")


def test_otlp_http_round_trip(phoenix_server: PhoenixServer, phoenix_project: str) -> None:
    provider = TracerProvider(resource=Resource.create({PROJECT_NAME_ATTRIBUTE: phoenix_project,
                                                        "service.name": "ragtrace-smoke"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=phoenix_server.otlp_http_endpoint)))
    tracer = provider.get_tracer("ragtrace.tests.smoke")
    try:
        with tracer.start_as_current_span("rag.pipeline") as parent:
            parent.set_attribute("openinference.span.kind", "CHAIN")
            parent.set_attribute("input.value", "What is BM25?")
            parent.set_attribute("ragtrace.run_id", "run-12345")
            parent.set_attribute("ragtrace.numeric_looking", "12345")
            with tracer.start_as_current_span("rag.retrieve") as child:
                child.set_attribute("openinference.span.kind", "RETRIEVER")
                for i, (doc_id, score, content) in enumerate(DOCS):
                    child.set_attribute(f"retrieval.documents.{i}.document.id", doc_id)
                    child.set_attribute(f"retrieval.documents.{i}.document.score", score)
                    child.set_attribute(f"retrieval.documents.{i}.document.content", content)
                child.set_attribute("ragtrace.retrieve.top_k", 2)
                child.set_attribute("ragtrace.retrieve.big", 2**40)
                child.set_attribute("ragtrace.retrieve.reranked", True)
                child.set_attribute("ragtrace.retrieve.ids", ["doc-a", "doc-b"])
                child.set_attribute("ragtrace.retrieve.scores", [0.91, 0.42])
            # Five siblings so that reading back with a small page size has to follow next_cursor.
            for i in range(5):
                with tracer.start_as_current_span(f"rag.step.{i}") as step:
                    step.set_attribute("ragtrace.step", i)
                    if i == 4:
                        step.set_status(Status(StatusCode.ERROR, "boom"))
        assert provider.force_flush(10_000), "OTLP export did not flush"
    finally:
        provider.shutdown()

    trace_id = _hex_trace(parent.get_span_context())
    spans = phoenix_server.wait_for_spans(phoenix_project, 7, trace_id=trace_id)
    assert len(spans) == 7
    by_name = {s["name"]: s for s in spans}
    root, retr = by_name["rag.pipeline"], by_name["rag.retrieve"]

    # Identity and structure.
    assert root["context"] == {"trace_id": trace_id, "span_id": _hex_span(parent.get_span_context())}
    assert retr["context"] == {"trace_id": trace_id, "span_id": _hex_span(child.get_span_context())}
    assert root["parent_id"] is None
    assert retr["parent_id"] == root["context"]["span_id"]
    assert all(by_name[f"rag.step.{i}"]["parent_id"] == root["context"]["span_id"] for i in range(5))

    # openinference.span.kind becomes span_kind (and leaves attributes) in this endpoint.
    assert root["span_kind"] == "CHAIN" and retr["span_kind"] == "RETRIEVER"
    assert by_name["rag.step.0"]["span_kind"] == "UNKNOWN"
    assert "openinference.span.kind" not in retr["attributes"]
    assert by_name["rag.step.4"]["status_code"] == "ERROR"
    assert by_name["rag.step.4"]["status_message"] == "boom"

    # Values and types survive.
    a = retr["attributes"]
    for i, (doc_id, score, content) in enumerate(DOCS):
        assert a[f"retrieval.documents.{i}.document.id"] == doc_id
        assert type(a[f"retrieval.documents.{i}.document.score"]) is float
        assert a[f"retrieval.documents.{i}.document.score"] == score
        assert a[f"retrieval.documents.{i}.document.content"] == content
    assert a["ragtrace.retrieve.top_k"] == 2 and type(a["ragtrace.retrieve.top_k"]) is int
    assert a["ragtrace.retrieve.big"] == 2**40 and type(a["ragtrace.retrieve.big"]) is int
    assert a["ragtrace.retrieve.reranked"] is True
    assert a["ragtrace.retrieve.ids"] == ["doc-a", "doc-b"]
    assert a["ragtrace.retrieve.scores"] == [0.91, 0.42]
    assert root["attributes"]["input.value"] == "What is BM25?"
    assert root["attributes"]["ragtrace.numeric_looking"] == "12345"

    # Server-side filters, and pagination through next_cursor (page size 2 for 7 spans).
    assert len(phoenix_server.get_spans(phoenix_project, trace_id=trace_id, limit=2)) == 7
    assert [s["name"] for s in phoenix_server.get_spans(phoenix_project, span_kind="RETRIEVER")] == ["rag.retrieve"]
    assert [s["name"] for s in phoenix_server.get_spans(phoenix_project, parent_id="null")] == ["rag.pipeline"]
    assert [s["name"] for s in phoenix_server.get_spans(phoenix_project, name=["rag.step.1", "rag.step.3"],
                                                        order="asc")] == ["rag.step.1", "rag.step.3"]
    assert [s["name"] for s in phoenix_server.get_spans(phoenix_project, attributes={"ragtrace.step": 3})] == [
        "rag.step.3"]
    assert [s["name"] for s in phoenix_server.get_spans(
        phoenix_project, attributes={"ragtrace.run_id": "run-12345", "ragtrace.numeric_looking": "12345"})] == [
        "rag.pipeline"]
    assert phoenix_server.get_spans(phoenix_project, attributes={"ragtrace.numeric_looking": 12345}) == []

    # The OTLP-shaped endpoint keeps every attribute, including openinference.span.kind.
    otlp = phoenix_server.get_spans_otlp(phoenix_project, trace_id, limit=3)
    assert len(otlp) == 7
    otlp_retr = next(s for s in otlp if s["name"] == "rag.retrieve")
    oa = otlp_attributes(otlp_retr)
    assert oa["openinference.span.kind"] == "RETRIEVER"
    assert oa["retrieval.documents.0.document.id"] == "doc-a"
    assert oa["retrieval.documents.1.document.score"] == 0.42
    assert oa["ragtrace.retrieve.big"] == 2**40
    assert oa["ragtrace.retrieve.ids"] == ["doc-a", "doc-b"]
    assert otlp_retr["trace_id"] == trace_id
    assert otlp_retr["parent_span_id"] == root["context"]["span_id"]


def test_wait_for_spans_times_out_with_a_clear_message(phoenix_server: PhoenixServer, phoenix_project: str) -> None:
    # An unknown project is "no spans yet" while waiting, and the failure says what was seen.
    with pytest.raises(AssertionError, match=r"last saw 0"):
        phoenix_server.wait_for_spans(phoenix_project, lambda spans: len(spans) > 0, timeout=0.3)
    with pytest.raises(Exception, match="HTTP 404"):
        phoenix_server.get_spans(phoenix_project)
    assert phoenix_server.get_spans(phoenix_project, missing_ok=True) == []
