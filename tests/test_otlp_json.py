"""ragtrace's hand-written OTLP/JSON encoder against the protobuf reference.

The reference is ``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans`` (what the OTLP
exporters send), rendered by protobuf's ``json_format``. OTLP/JSON differs from protobuf's JSON
mapping in one point only: trace and span ids are hex, not base64. The tests convert ids and then
require (a) the same protobuf message after ``ParseDict`` and (b) the very same dict.
"""

from __future__ import annotations

import base64
import copy
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from google.protobuf import json_format, text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans as reference_encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from ids import CountingIds
from opentelemetry.sdk.trace.id_generator import IdGenerator
from ragtrace._internal import names
from ragtrace._internal.export.otlp_json import attributes_to_dict, decode_any_value, encode_any_value, encode_attributes, encode_spans


# --- helpers ----------------------------------------------------------------------------------
def make_provider(resource: Resource | None = None, ids: IdGenerator | None = None, **kwargs: Any) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource or Resource.create({"service.name": "svc"}), id_generator=ids or CountingIds(), **kwargs)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _walk_ids(request: dict[str, Any], convert: Any) -> dict[str, Any]:
    request = copy.deepcopy(request)
    for resource_spans in request.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for item in (span, *span.get("links", [])):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in item:
                            item[key] = convert(item[key])
    return request


def hex_to_b64(request: dict[str, Any]) -> dict[str, Any]:
    return _walk_ids(request, lambda h: base64.b64encode(bytes.fromhex(h)).decode())


def b64_to_hex(request: dict[str, Any]) -> dict[str, Any]:
    return _walk_ids(request, lambda b: base64.b64decode(b).hex())


def reference(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    return reference_encode_spans(spans)


def parsed(request: dict[str, Any]) -> ExportTraceServiceRequest:
    # Through a JSON text, as a reader of the file would see it.
    text = json.dumps(request, allow_nan=False)
    return json_format.ParseDict(hex_to_b64(json.loads(text)), ExportTraceServiceRequest())


def reference_dict(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    return b64_to_hex(json_format.MessageToDict(reference(spans), use_integers_for_enums=True))


def same_message(a: ExportTraceServiceRequest, b: ExportTraceServiceRequest) -> bool:
    """Message equality that treats NaN as equal to NaN (``==`` on messages does not)."""
    return text_format.MessageToString(a) == text_format.MessageToString(b)


def assert_equivalent(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    ours = encode_spans(spans)
    assert same_message(parsed(ours), reference(spans))
    assert ours == reference_dict(spans)
    return ours


def all_spans(ours: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_spans in ours["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            yield from scope_spans["spans"]


RICH_ATTRIBUTES: dict[str, Any] = {
    names.RAG_STAGE: names.STAGE_RETRIEVE,
    names.GEN_AI_REQUEST_STREAM: True,
    names.RAG_CITATION_CONFORMANT: False,
    names.RAG_RETRIEVAL_RESULT_COUNT: 5,
    names.RAG_UNREADABLE_ITEMS: 0,
    names.GEN_AI_REQUEST_MAX_TOKENS: -(2**63),
    names.GEN_AI_USAGE_INPUT_TOKENS: 2**63 - 1,
    names.RAG_RETRIEVAL_TOP_SCORE: 0.8312345678901234,
    names.GEN_AI_REQUEST_TEMPERATURE: 0.0,
    names.metric_attribute(names.METRIC_RECALL_PROXY): float("nan"),
    names.metric_attribute(names.METRIC_CONTEXT_PRECISION): float("inf"),
    names.metric_attribute(names.METRIC_CONTEXT_UTILIZATION): float("-inf"),
    names.RAG_QUERY_ID: "",
    names.GEN_AI_WORKFLOW_NAME: "ünïcode ✓ \"quoted\" \n newline",
    names.RAG_RETRIEVAL_CHUNK_IDS: ["c1", "c2", "c3"],
    names.RAG_RETRIEVAL_SCORES: [0.9, float("nan"), -1.5e-300],
    names.RAG_RETRIEVAL_RANKS: [1, 2, 3],
    names.RAG_CONTEXT_TRUNCATED: [True, False],
    names.RAG_CONTEXT_DROPPED_IDS: [],
    names.RAG_QUERY_HASH: b"\x00\xffbytes",
    names.GEN_AI_RETRIEVAL_DOCUMENTS: {"id": "c1", "score": 0.5, "nested": {"ok": True}, "list": [1, 2]},
    names.RAG_CONTEXT_LABELS: ["[1]", None, "[3]"],
}


# --- equivalence with the protobuf encoder ----------------------------------------------------
def test_rich_span_matches_protobuf_encoder() -> None:
    provider, exporter = make_provider()
    tracer = provider.get_tracer("ragtrace", "1.2.3")
    with tracer.start_as_current_span("invoke_workflow answer", attributes={names.RAG_STAGE: names.STAGE_PIPELINE}) as root:
        other = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
        local = root.get_span_context()
        links = [Link(other, {names.RAG_QUERY_ID: "q-1", names.RAG_RETRIEVAL_RANKS: [1, 2]}), Link(local)]
        with tracer.start_as_current_span("retrieval docs", kind=SpanKind.CLIENT, attributes=RICH_ATTRIBUTES, links=links) as span:
            span.add_event(names.GEN_AI_EVALUATION_RESULT, {names.GEN_AI_EVALUATION_NAME: "ragtrace.recall_proxy", names.GEN_AI_EVALUATION_SCORE_VALUE: float("nan")})
            span.add_event("empty")
            span.set_status(Status(StatusCode.ERROR, "boom"))
        root.set_status(Status(StatusCode.OK))
    spans = exporter.get_finished_spans()
    ours = assert_equivalent(spans)

    retrieval, pipeline = list(all_spans(ours))
    assert retrieval["parentSpanId"] == pipeline["spanId"] == "cd00000000000001"
    assert retrieval["traceId"] == pipeline["traceId"] == "ab" + "0" * 29 + "1"
    assert "parentSpanId" not in pipeline
    assert retrieval["kind"] == 3 and pipeline["kind"] == 1
    assert retrieval["status"] == {"message": "boom", "code": 2}
    assert pipeline["status"] == {"code": 1}
    assert isinstance(retrieval["startTimeUnixNano"], str) and int(retrieval["startTimeUnixNano"]) > 0
    attributes = {item["key"]: item["value"] for item in retrieval["attributes"]}
    assert attributes[names.metric_attribute(names.METRIC_RECALL_PROXY)] == {"doubleValue": "NaN"}
    assert attributes[names.metric_attribute(names.METRIC_CONTEXT_PRECISION)] == {"doubleValue": "Infinity"}
    assert attributes[names.metric_attribute(names.METRIC_CONTEXT_UTILIZATION)] == {"doubleValue": "-Infinity"}
    assert attributes[names.RAG_RETRIEVAL_RESULT_COUNT] == {"intValue": "5"}
    assert attributes[names.RAG_RETRIEVAL_RANKS] == {"arrayValue": {"values": [{"intValue": "1"}, {"intValue": "2"}, {"intValue": "3"}]}}
    assert attributes[names.RAG_CONTEXT_DROPPED_IDS] == {"arrayValue": {}}
    assert attributes[names.RAG_QUERY_HASH] == {"bytesValue": base64.b64encode(b"\x00\xffbytes").decode()}
    assert attributes[names.RAG_CONTEXT_LABELS]["arrayValue"]["values"][1] == {}
    assert [event["name"] for event in retrieval["events"]] == [names.GEN_AI_EVALUATION_RESULT, "empty"]
    assert "attributes" not in retrieval["events"][1]
    assert retrieval["links"][0]["spanId"] == f"{0x5678:016x}" and retrieval["links"][0]["flags"] == 0x300
    assert retrieval["links"][1]["flags"] == 0x100
    # The text is strict JSON (no bare NaN) and round-trips.
    assert json.loads(json.dumps(ours, allow_nan=False)) == ours


def test_every_span_kind_and_status() -> None:
    provider, exporter = make_provider()
    tracer = provider.get_tracer("t")
    kinds = [SpanKind.INTERNAL, SpanKind.SERVER, SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER]
    statuses = [Status(StatusCode.UNSET), Status(StatusCode.OK), Status(StatusCode.ERROR), Status(StatusCode.ERROR, "why"), Status(StatusCode.OK)]
    for kind, status in zip(kinds, statuses):
        with tracer.start_as_current_span(kind.name, kind=kind) as span:
            span.set_status(status)
    ours = assert_equivalent(exporter.get_finished_spans())
    encoded = list(all_spans(ours))
    assert [s["kind"] for s in encoded] == [1, 2, 3, 4, 5]
    assert [s["status"] for s in encoded] == [{}, {"code": 1}, {"code": 2}, {"message": "why", "code": 2}, {"code": 1}]


def test_groups_by_resource_then_scope_in_first_seen_order() -> None:
    resource_a = Resource.create({"service.name": "a", "deployment.environment": "test"})
    resource_b = Resource({"service.name": "b"}, schema_url="https://opentelemetry.io/schemas/1.26.0")
    provider_a, exporter_a = make_provider(resource_a)
    provider_b, exporter_b = make_provider(resource_b)
    tracer_a1 = provider_a.get_tracer("ragtrace", "0.1.0", schema_url="https://opentelemetry.io/schemas/1.30.0", attributes={"scope.attr": 7})
    tracer_a2 = provider_a.get_tracer("app")
    tracer_b = provider_b.get_tracer("ragtrace", "0.1.0")
    for tracer, name in ((tracer_a1, "a1-first"), (tracer_b, "b-first"), (tracer_a2, "a2"), (tracer_a1, "a1-second")):
        with tracer.start_as_current_span(name):
            pass
    spans = [*exporter_a.get_finished_spans(), *exporter_b.get_finished_spans()]
    spans = sorted(spans, key=lambda s: s.start_time)  # interleave the resources
    ours = assert_equivalent(spans)

    layout = [
        (
            attributes_to_dict(rs["resource"].get("attributes"))["service.name"],
            rs.get("schemaUrl"),
            [(ss["scope"].get("name"), ss.get("schemaUrl"), [s["name"] for s in ss["spans"]]) for ss in rs["scopeSpans"]],
        )
        for rs in ours["resourceSpans"]
    ]
    assert layout == [
        ("a", None, [("ragtrace", "https://opentelemetry.io/schemas/1.30.0", ["a1-first", "a1-second"]), ("app", None, ["a2"])]),
        ("b", "https://opentelemetry.io/schemas/1.26.0", [("ragtrace", None, ["b-first"])]),
    ]
    assert ours["resourceSpans"][0]["scopeSpans"][0]["scope"] == {
        "name": "ragtrace",
        "version": "0.1.0",
        "attributes": [{"key": "scope.attr", "value": {"intValue": "7"}}],
    }
    assert ours["resourceSpans"][0]["scopeSpans"][1]["scope"] == {"name": "app"}


def test_remote_parent_and_trace_state() -> None:
    provider, exporter = make_provider()
    tracer = provider.get_tracer("t")
    remote = SpanContext(0xFEED, 0xBEEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("vendor", "v1"), ("other", "x")]))
    with tracer.start_as_current_span("server", context=trace.set_span_in_context(NonRecordingSpan(remote)), kind=SpanKind.SERVER):
        with tracer.start_as_current_span("child"):
            pass
    ours = assert_equivalent(exporter.get_finished_spans())
    child, server = list(all_spans(ours))
    assert server["traceId"] == f"{0xFEED:032x}"
    assert server["parentSpanId"] == f"{0xBEEF:016x}"
    assert server["flags"] == 0x300  # has-is-remote | is-remote
    assert child["flags"] == 0x100
    assert server["traceState"] == child["traceState"] == "vendor=v1,other=x"


def test_dropped_counts_are_written_when_nonzero() -> None:
    limits = SpanLimits(max_span_attributes=2, max_events=1, max_links=1, max_event_attributes=1, max_link_attributes=1)
    provider, exporter = make_provider(span_limits=limits)
    tracer = provider.get_tracer("t")
    other = SpanContext(0x1, 0x2, is_remote=False)
    links = [Link(other), Link(other, {"a": 1, "b": 2})]  # the newest link is kept
    with tracer.start_as_current_span("limited", attributes={"a": 1, "b": 2, "c": 3}, links=links) as span:
        span.add_event("e2")
        span.add_event("e1", {"x": 1, "y": 2})  # the newest event is kept
    with tracer.start_as_current_span("unlimited", attributes={"a": 1}):
        pass
    ours = assert_equivalent(exporter.get_finished_spans())
    limited, unlimited = list(all_spans(ours))
    assert limited["droppedAttributesCount"] == 1
    assert limited["droppedEventsCount"] == 1
    assert limited["droppedLinksCount"] == 1
    assert limited["events"][0]["droppedAttributesCount"] == 1
    assert limited["links"][0]["droppedAttributesCount"] == 1
    for key in ("droppedAttributesCount", "droppedEventsCount", "droppedLinksCount", "events", "links"):
        assert key not in unlimited


def test_int_outside_int64_is_left_out_like_the_protobuf_encoder() -> None:
    provider, exporter = make_provider()
    with provider.get_tracer("t").start_as_current_span("big", attributes={"ok": 1, "big": 2**64, "bigs": [1, 2**70]}):
        pass
    ours = assert_equivalent(exporter.get_finished_spans())
    assert [item["key"] for item in next(all_spans(ours))["attributes"]] == ["ok"]


def test_exact_shape_of_a_minimal_request() -> None:
    provider, exporter = make_provider(Resource({"service.name": "svc"}))
    tracer = provider.get_tracer("ragtrace", "0.1.0")
    span = tracer.start_span("retrieval docs", attributes={names.RAG_STAGE: names.STAGE_RETRIEVE, names.RAG_RETRIEVAL_TOP_SCORE: 0.5}, start_time=1_700_000_000_000_000_000)
    span.add_event("e", {names.RAG_RETRIEVAL_RESULT_COUNT: 3}, timestamp=1_700_000_000_000_000_500)
    span.end(end_time=1_700_000_000_123_456_789)
    ours = assert_equivalent(exporter.get_finished_spans())
    assert json.dumps(ours, separators=(",", ":")) == (
        '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},'
        '"scopeSpans":[{"scope":{"name":"ragtrace","version":"0.1.0"},"spans":[{"traceId":"ab000000000000000000000000000001",'
        '"spanId":"cd00000000000001","flags":256,"name":"retrieval docs","kind":1,'
        '"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000123456789",'
        '"attributes":[{"key":"rag.stage","value":{"stringValue":"retrieve"}},{"key":"rag.retrieval.top_score","value":{"doubleValue":0.5}}],'
        '"events":[{"timeUnixNano":"1700000000000000500","name":"e","attributes":[{"key":"rag.retrieval.result_count","value":{"intValue":"3"}}]}],'
        '"status":{}}]}]}]}'
    )


def test_empty_input() -> None:
    assert encode_spans([]) == {"resourceSpans": []}
    assert same_message(parsed(encode_spans([])), reference([]))


def test_link_trace_state_is_kept() -> None:
    """The one place ragtrace writes more than the Python protobuf encoder: a link's traceState
    (an OTLP field the Python encoder never fills). Everything else is identical."""
    provider, exporter = make_provider()
    linked = SpanContext(0x9, 0x8, is_remote=True, trace_state=TraceState([("k", "v")]))
    with provider.get_tracer("t").start_as_current_span("linking", links=[Link(linked)]):
        pass
    spans = exporter.get_finished_spans()
    ours = encode_spans(spans)
    link = next(all_spans(ours))["links"][0]
    assert link["traceState"] == "k=v"
    message = parsed(ours)
    assert message.resource_spans[0].scope_spans[0].spans[0].links[0].trace_state == "k=v"
    message.resource_spans[0].scope_spans[0].spans[0].links[0].ClearField("trace_state")
    assert same_message(message, reference(spans))


# --- property: any attribute value the SDK accepts --------------------------------------------
_int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_scalars = st.one_of(st.text(), st.booleans(), _int64, st.floats(allow_nan=True, allow_infinity=True), st.binary(max_size=20))
_values = st.recursive(
    st.one_of(st.none(), _scalars),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=3)),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attributes=st.dictionaries(st.text(min_size=1, max_size=10), _values, max_size=6))
def test_any_attributes_match_protobuf_encoder(attributes: dict[str, Any]) -> None:
    provider, exporter = make_provider()
    with provider.get_tracer("t").start_as_current_span("s", attributes=attributes) as span:
        span.add_event("ev", attributes)
    assert_equivalent(exporter.get_finished_spans())


# --- reading back -----------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_attributes_round_trip_through_json_text() -> None:
    text = json.dumps(encode_attributes(RICH_ATTRIBUTES), allow_nan=False)
    back = attributes_to_dict(json.loads(text))
    assert list(back) == list(RICH_ATTRIBUTES)
    for key, value in RICH_ATTRIBUTES.items():
        assert _same(value, back[key]), key
    assert back[names.RAG_RETRIEVAL_CHUNK_IDS] == ["c1", "c2", "c3"]  # arrays come back as lists


@settings(max_examples=150, deadline=None)
@given(value=_values)
def test_any_value_round_trips(value: Any) -> None:
    assert _same(value, decode_any_value(json.loads(json.dumps(encode_any_value(value), allow_nan=False))))


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        ({"intValue": 443}, 443),  # some producers write int64 as a JSON number
        ({"intValue": "-7"}, -7),
        ({"doubleValue": "1.5"}, 1.5),
        ({"doubleValue": 2}, 2.0),
        ({"doubleValue": "Infinity"}, math.inf),
        ({"doubleValue": "-Infinity"}, -math.inf),
        ({"stringValue": ""}, ""),
        ({"boolValue": False}, False),
        ({"arrayValue": {}}, []),
        ({"kvlistValue": {}}, {}),
        ({"kvlistValue": {"values": [{"key": "a", "value": {"intValue": "1"}}]}}, {"a": 1}),
        ({}, None),
        (None, None),
    ],
)
def test_decode_is_lenient(encoded: Any, expected: Any) -> None:
    decoded = decode_any_value(encoded)
    assert decoded == expected and type(decoded) is type(expected)


def test_decode_nan_string() -> None:
    assert math.isnan(decode_any_value({"doubleValue": "NaN"}))
    assert attributes_to_dict(None) == {} and attributes_to_dict([]) == {}
