"""JsonLinesExporter and ConsoleTreeExporter with the real SDK (TracerProvider + SimpleSpanProcessor).

Spans are built by hand with ragtrace's attribute keys (from ragtrace._internal.names), not through the
high-level API, so these tests pin the exporters alone.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from ids import CountingIds
import ragtrace
import ragtrace.exporters as exporters_package
from ragtrace._internal.setup import own_provider
from ragtrace._internal import names as n
from ragtrace._internal.export.otlp_json import attributes_to_dict, encode_spans
from ragtrace.exporters import ConsoleTreeExporter, JsonLinesExporter

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def provider_for(exporter: SpanExporter) -> TracerProvider:
    provider = TracerProvider(resource=Resource({"service.name": "svc"}), id_generator=CountingIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def finished_spans(count: int = 2) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    tracer = provider_for(memory).get_tracer("ragtrace", "0.1.0")
    for index in range(count):
        with tracer.start_as_current_span(f"span {index}", attributes={n.RAG_STAGE: n.STAGE_RETRIEVE, n.RAG_RETRIEVAL_SCORES: [0.5, float("nan")]}):
            pass
    return list(memory.get_finished_spans())


def compact(spans: Sequence[ReadableSpan]) -> str:
    return json.dumps(encode_spans(spans), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def ragtrace_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ragtrace" and r.levelno >= logging.WARNING]


# ==============================================================================================
# package surface
# ==============================================================================================
def test_package_exports_the_classes_and_configure_finds_them(tmp_path: Path) -> None:
    assert sorted(exporters_package.__all__) == ["ConsoleTreeExporter", "JsonLinesExporter", "PhoenixExporter"]
    jsonl, batch = own_provider.span_exporter(f"jsonl:{tmp_path / 'x.jsonl'}")
    assert isinstance(jsonl, JsonLinesExporter) and jsonl.path == tmp_path / "x.jsonl" and batch is True
    console, batch = own_provider.span_exporter("console")
    assert isinstance(console, ConsoleTreeExporter) and batch is False
    phoenix, batch = own_provider.span_exporter("phoenix:http://127.0.0.1:1/")
    assert isinstance(phoenix, exporters_package.PhoenixExporter) and phoenix.endpoint == "http://127.0.0.1:1" and batch is True


# ==============================================================================================
# JsonLinesExporter
# ==============================================================================================
def test_jsonl_one_compact_request_per_export_call(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    spans = finished_spans(3)
    exporter = JsonLinesExporter(path)
    assert exporter.gzip is False
    assert exporter.export(spans[:2]) is SpanExportResult.SUCCESS
    assert exporter.export(spans[2:]) is SpanExportResult.SUCCESS
    # Flushed after each line: readable before shutdown.
    assert path.read_text("utf-8") == compact(spans[:2]) + "\n" + compact(spans[2:]) + "\n"
    exporter.shutdown()
    lines = path.read_text("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [encode_spans(spans[:2]), encode_spans(spans[2:])]
    assert " " not in lines[0].replace("span 0", "").replace("span 1", "")  # compact separators


def test_jsonl_through_the_sdk_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "traces.jsonl"  # parent dirs are created
    exporter = JsonLinesExporter(path)
    provider = provider_for(exporter)
    tracer = provider.get_tracer("ragtrace", "0.1.0")
    with tracer.start_as_current_span("invoke_workflow answer", attributes={n.RAG_STAGE: n.STAGE_PIPELINE}):
        with tracer.start_as_current_span("retrieval docs", attributes={n.RAG_RETRIEVAL_CHUNK_IDS: ["a", "b"], n.RAG_RETRIEVAL_SCORES: [0.9, float("nan")], n.RAG_RETRIEVAL_RESULT_COUNT: 2}):
            pass
    provider.shutdown()
    requests = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert len(requests) == 2  # SimpleSpanProcessor: one export call per span
    retrieval = requests[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    pipeline = requests[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert retrieval["parentSpanId"] == pipeline["spanId"]
    attributes = attributes_to_dict(retrieval["attributes"])
    assert attributes[n.RAG_RETRIEVAL_CHUNK_IDS] == ["a", "b"]
    assert attributes[n.RAG_RETRIEVAL_RESULT_COUNT] == 2
    assert attributes[n.RAG_RETRIEVAL_SCORES][0] == 0.9 and math.isnan(attributes[n.RAG_RETRIEVAL_SCORES][1])
    assert attributes_to_dict(requests[0]["resourceSpans"][0]["resource"]["attributes"]) == {"service.name": "svc"}


def test_jsonl_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("previous line\n", "utf-8")
    spans = finished_spans(1)
    exporter = JsonLinesExporter(str(path))
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert path.read_text("utf-8") == "previous line\n" + compact(spans) + "\n"


def test_jsonl_gzip_by_suffix_is_valid_after_every_export(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "traces.jsonl.gz"
    spans = finished_spans(2)
    exporter = JsonLinesExporter(path)
    assert exporter.gzip is True
    assert exporter.export(spans[:1]) is SpanExportResult.SUCCESS
    with gzip.open(path, "rt", encoding="utf-8") as file:  # before shutdown: already complete
        assert file.read() == compact(spans[:1]) + "\n"
    assert exporter.export(spans[1:]) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    with gzip.open(path, "rt", encoding="utf-8") as file:
        assert [json.loads(line) for line in file] == [encode_spans(spans[:1]), encode_spans(spans[1:])]


def test_jsonl_gzip_flag_overrides_the_suffix(tmp_path: Path) -> None:
    spans = finished_spans(1)
    forced = JsonLinesExporter(tmp_path / "plain-name.jsonl", gzip=True)
    assert forced.export(spans) is SpanExportResult.SUCCESS
    forced.shutdown()
    assert gzip.decompress((tmp_path / "plain-name.jsonl").read_bytes()).decode() == compact(spans) + "\n"
    off = JsonLinesExporter(tmp_path / "looks.gz", gzip=False)
    assert off.export(spans) is SpanExportResult.SUCCESS
    off.shutdown()
    assert (tmp_path / "looks.gz").read_text("utf-8") == compact(spans) + "\n"


def test_jsonl_io_error_returns_failure_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    exporter = JsonLinesExporter(directory)  # opening a directory for writing fails
    spans = finished_spans(1)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        assert exporter.export(spans) is SpanExportResult.FAILURE
        assert exporter.export(spans) is SpanExportResult.FAILURE
    warnings = ragtrace_warnings(caplog)
    assert len(warnings) == 1 and str(directory) in warnings[0].getMessage()
    assert exporter.force_flush() is True
    exporter.shutdown()


def test_jsonl_parent_is_a_file_returns_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    exporter = JsonLinesExporter(blocker / "traces.jsonl")
    assert exporter.export(finished_spans(1)) is SpanExportResult.FAILURE
    assert blocker.read_text() == "x"


def test_jsonl_recovers_when_the_path_becomes_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "dir"
    blocker.write_text("x")
    exporter = JsonLinesExporter(blocker / "traces.jsonl")
    spans = finished_spans(1)
    assert exporter.export(spans) is SpanExportResult.FAILURE
    blocker.unlink()
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert (blocker / "traces.jsonl").read_text("utf-8") == compact(spans) + "\n"


def test_jsonl_encoding_failure_returns_failure(tmp_path: Path) -> None:
    exporter = JsonLinesExporter(tmp_path / "t.jsonl")
    assert exporter.export([object()]) is SpanExportResult.FAILURE  # type: ignore[list-item]
    assert exporter.export(finished_spans(1)) is SpanExportResult.SUCCESS


def test_jsonl_shutdown_closes_and_refuses_further_exports(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    exporter = JsonLinesExporter(path)
    spans = finished_spans(1)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    file = exporter._file
    assert file is not None and not file.closed
    exporter.shutdown()
    assert file.closed
    assert exporter.export(spans) is SpanExportResult.FAILURE
    exporter.shutdown()  # idempotent
    assert len(path.read_text("utf-8").splitlines()) == 1


def test_jsonl_is_thread_safe(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    exporter = JsonLinesExporter(path)
    spans = finished_spans(5)
    results: list[SpanExportResult] = []

    def work() -> None:
        for _ in range(40):
            results.append(exporter.export(spans))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    exporter.shutdown()
    lines = path.read_text("utf-8").splitlines()
    assert results == [SpanExportResult.SUCCESS] * 320
    assert len(lines) == 320 and all(line == compact(spans) for line in lines)


def test_jsonl_survives_lone_surrogates(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    memory = InMemorySpanExporter()
    with provider_for(memory).get_tracer("t").start_as_current_span("bad \ud800 text"):
        pass
    exporter = JsonLinesExporter(path)
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
    exporter.shutdown()
    span = json.loads(path.read_text("ascii"))["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["name"] == "bad \ud800 text"


# ==============================================================================================
# ConsoleTreeExporter
# ==============================================================================================
def build_rag_trace(tracer: Tracer, *, error: bool = True, end_root: bool = True) -> trace.Span:
    """A pipeline with one span per stage plus a non-ragtrace HTTP span; children end first."""
    root = tracer.start_span("invoke_workflow answer", attributes={n.RAG_STAGE: n.STAGE_PIPELINE, n.RAG_QUERY_ID: "q-7"}, start_time=T0)
    context = trace.set_span_in_context(root)

    def child(name: str, start_ms: float, duration_ms: float, attributes: dict[str, Any], parent: Any = context) -> trace.Span:
        span = tracer.start_span(name, context=parent, attributes=attributes, start_time=T0 + int(start_ms * MS))
        span.end(end_time=T0 + int((start_ms + duration_ms) * MS))
        return span

    child("embeddings text-embedding-3-small", 0, 12, {n.RAG_STAGE: n.STAGE_EMBED, n.GEN_AI_EMBEDDINGS_DIMENSION_COUNT: 1536, n.GEN_AI_USAGE_INPUT_TOKENS: 7})
    child("retrieval docs", 12, 35.2, {n.RAG_STAGE: n.STAGE_RETRIEVE, n.RAG_RETRIEVAL_RESULT_COUNT: 5, n.RAG_RETRIEVAL_TOP_SCORE: 0.8312, n.RAG_RETRIEVAL_CHUNK_IDS: ["a", "b", "c", "d", "e"]})
    child("rerank bge-reranker", 48, 20, {n.RAG_STAGE: n.STAGE_RERANK, n.RAG_RERANK_INPUT_COUNT: 10, n.RAG_RERANK_OUTPUT_COUNT: 4})
    child(
        n.ASSEMBLE_SPAN_NAME,
        68,
        1.1,
        {
            n.RAG_STAGE: n.STAGE_ASSEMBLE,
            n.RAG_CONTEXT_CHUNK_IDS: ["a", "b", "c", "d"],
            n.RAG_CONTEXT_TOTAL_TOKENS: 812,
            n.RAG_CONTEXT_MAX_TOKENS: 1000,
            n.RAG_CONTEXT_DROPPED_IDS: ["e"],
            n.RAG_CONTEXT_DROPPED_REASONS: [n.DROP_OVER_BUDGET],
        },
    )
    generate = tracer.start_span(
        "chat gpt-4o",
        context=context,
        start_time=T0 + 70 * MS,
        attributes={
            n.RAG_STAGE: n.STAGE_GENERATE,
            n.RAG_CITATION_IDS: ["a", "c"],
            n.metric_attribute(n.METRIC_CITED_POSITIONS): [1, 3],
            n.RAG_CITATION_CONFORMANT: True,
            n.GEN_AI_USAGE_INPUT_TOKENS: 850,
            n.GEN_AI_USAGE_OUTPUT_TOKENS: 64,
        },
    )
    http = child("POST /v1/chat/completions", 71, 100, {"http.request.method": "POST"}, parent=trace.set_span_in_context(generate))
    if error:
        http.set_status(Status(StatusCode.ERROR))  # ignored: already ended
    generate.end(end_time=T0 + 180 * MS)
    if error:
        failing = tracer.start_span("retrieval backup", context=context, attributes={n.RAG_STAGE: n.STAGE_RETRIEVE, n.ERROR_TYPE: "TimeoutError"}, start_time=T0 + 30 * MS)
        failing.set_status(Status(StatusCode.ERROR, "timed out"))
        failing.end(end_time=T0 + 40 * MS)
    figures = {
        n.METRIC_RECALL_PROXY: 0.4,
        n.METRIC_RECALL_PROXY_WEIGHTED: 0.6234,
        n.METRIC_CONTEXT_PRECISION: 0.8,
        n.METRIC_CONTEXT_UTILIZATION: 0.5,
        n.METRIC_WASTED_CONTEXT_TOKENS: 312,
        n.METRIC_DUPLICATE_CHUNKS: 0,
        n.METRIC_CITED_POSITIONS: [1, 3],
        n.METRIC_RETRIEVED: 5,  # the counts come first in the block
    }
    for metric, value in figures.items():
        root.set_attribute(n.metric_attribute(metric), value)
    if end_root:
        root.end(end_time=T0 + 182 * MS)
    return root


GOLDEN = """\
trace ab000000000000000000000000000001
invoke_workflow answer  182.0 ms  query=q-7
│  retrieved              5
│  recall_proxy           0.40
│  recall_proxy_weighted  0.62
│  context_precision      0.80
│  context_utilization    0.50
│  wasted_context_tokens  312
│  duplicate_chunks       0
│  cited_positions        [1, 3]
├─ embeddings text-embedding-3-small  12.0 ms  1536 dims, 7 tokens
├─ retrieval docs  35.2 ms  5 chunks top=0.83
├─ retrieval backup  10.0 ms  ERROR TimeoutError
├─ rerank bge-reranker  20.0 ms  10→4
├─ assemble_context  1.1 ms  4 in context, 812/1000 tokens, 1 dropped (over_budget)
└─ chat gpt-4o  110.0 ms  cites [1,3] conformant, 850 in / 64 out tokens
   └─ POST /v1/chat/completions  100.0 ms
"""


def test_console_golden_tree() -> None:
    out = io.StringIO()
    exporter = ConsoleTreeExporter(out)
    provider = provider_for(exporter)
    build_rag_trace(provider.get_tracer("ragtrace"))
    assert out.getvalue() == GOLDEN
    provider.shutdown()
    assert out.getvalue() == GOLDEN  # nothing left over


def test_console_shows_every_figure() -> None:
    """The console's display order is its own; a figure added to names.EMITTED_METRICS must appear in it."""
    from ragtrace.exporters._console_lines import FIGURES

    assert sorted(label for _, label in FIGURES) == sorted([*n.EMITTED_METRICS, "status"])


def test_console_prints_nothing_until_the_root_ends_then_leftovers_on_shutdown() -> None:
    out = io.StringIO()
    exporter = ConsoleTreeExporter(out)
    provider = provider_for(exporter)
    build_rag_trace(provider.get_tracer("ragtrace"), error=False, end_root=False)
    assert out.getvalue() == ""
    exporter.shutdown()
    text = out.getvalue()
    assert text.splitlines()[0] == "trace ab000000000000000000000000000001  (incomplete)"
    # The children of the missing root are printed as top-level trees, in start order.
    assert text.splitlines()[1:] == [
        "embeddings text-embedding-3-small  12.0 ms  1536 dims, 7 tokens",
        "retrieval docs  35.2 ms  5 chunks top=0.83",
        "rerank bge-reranker  20.0 ms  10→4",
        "assemble_context  1.1 ms  4 in context, 812/1000 tokens, 1 dropped (over_budget)",
        "chat gpt-4o  110.0 ms  cites [1,3] conformant, 850 in / 64 out tokens",
        "└─ POST /v1/chat/completions  100.0 ms",
    ]
    assert exporter.export(finished_spans(1)) is SpanExportResult.FAILURE  # after shutdown
    exporter.shutdown()
    assert out.getvalue() == text


def test_console_force_flush_prints_leftovers_once() -> None:
    out = io.StringIO()
    exporter = ConsoleTreeExporter(out)
    tracer = provider_for(exporter).get_tracer("t")
    root = tracer.start_span("root")
    with tracer.start_as_current_span("child", context=trace.set_span_in_context(root)):
        pass
    assert out.getvalue() == ""
    assert exporter.force_flush() is True
    flushed = out.getvalue()
    lines = flushed.splitlines()
    assert lines[0] == "trace ab000000000000000000000000000001  (incomplete)"
    assert len(lines) == 2 and lines[1].startswith("child  ") and lines[1].endswith(" ms")
    assert exporter.force_flush() is True
    assert out.getvalue() == flushed
    root.end()  # the root alone still prints as its own trace
    assert out.getvalue().count("trace ") == 2 and out.getvalue().splitlines()[-1].startswith("root  ")


def test_console_error_marking() -> None:
    out = io.StringIO()
    tracer = provider_for(ConsoleTreeExporter(out)).get_tracer("t")
    with tracer.start_as_current_span("root", attributes={n.RAG_STAGE: n.STAGE_PIPELINE}):
        with pytest.raises(ValueError):
            with tracer.start_as_current_span("from exception event"):  # SDK records the exception
                raise ValueError("nope")
        with tracer.start_as_current_span("typed", attributes={n.ERROR_TYPE: "RateLimitError", n.RAG_STAGE: n.STAGE_GENERATE}) as span:
            span.set_status(Status(StatusCode.ERROR, "429"))
        with tracer.start_as_current_span("bare") as span:
            span.set_status(Status(StatusCode.ERROR))
        with tracer.start_as_current_span("fine") as span:
            span.set_status(Status(StatusCode.OK))
    lines = {line.split("  ")[0].lstrip("├└─ "): line for line in out.getvalue().splitlines()[1:]}
    assert lines["from exception event"].endswith("ms  ERROR ValueError")
    assert lines["typed"].endswith("ms  ERROR RateLimitError")
    assert lines["bare"].endswith("ms  ERROR")
    assert "ERROR" not in lines["fine"] and "ERROR" not in lines["root"]


def test_console_remote_parent_is_a_local_root() -> None:
    out = io.StringIO()
    tracer = provider_for(ConsoleTreeExporter(out)).get_tracer("t")
    remote = SpanContext(0xFEED, 0xBEEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with tracer.start_as_current_span("server", context=trace.set_span_in_context(NonRecordingSpan(remote))):
        with tracer.start_as_current_span("inner"):
            pass
    lines = out.getvalue().splitlines()
    assert lines[0] == f"trace {0xFEED:032x}"
    assert lines[1].startswith("server  ") and lines[2].startswith("└─ inner  ")


def test_console_interleaved_traces_print_separately() -> None:
    out = io.StringIO()
    tracer = provider_for(ConsoleTreeExporter(out)).get_tracer("t")
    root_a, root_b = tracer.start_span("A"), tracer.start_span("B")
    tracer.start_span("a1", context=trace.set_span_in_context(root_a)).end()
    tracer.start_span("b1", context=trace.set_span_in_context(root_b)).end()
    tracer.start_span("a2", context=trace.set_span_in_context(root_a)).end()
    root_b.end()
    root_a.end()
    names = [line.split("  ")[0] for line in out.getvalue().splitlines()]
    assert names == [
        "trace ab000000000000000000000000000002",
        "B",
        "└─ b1",
        "trace ab000000000000000000000000000001",
        "A",
        "├─ a1",
        "└─ a2",
    ]


def test_console_nested_glyphs_and_width() -> None:
    out = io.StringIO()
    tracer = provider_for(ConsoleTreeExporter(out)).get_tracer("t")
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("first"):
            with tracer.start_as_current_span("grandchild"):
                pass
        with tracer.start_as_current_span("second"):
            parent = trace.get_current_span()
            for _ in range(40):  # deep chain
                with tracer.start_as_current_span("level " + "x" * 30, context=trace.set_span_in_context(parent)) as parent:
                    pass
        with tracer.start_as_current_span("a very long name " * 10):
            pass
    lines = out.getvalue().splitlines()
    assert lines[2].startswith("├─ first  ")
    assert lines[3].startswith("│  └─ grandchild  ")
    assert lines[4].startswith("├─ second  ")
    assert lines[5].startswith("│  └─ level xxx")
    assert lines[-1].startswith("└─ a very long name")
    assert max(len(line) for line in lines) <= 100
    assert lines[-1].endswith("…") and len(lines[-1]) == 100


def test_console_figures_status_nan_and_generate_details() -> None:
    out = io.StringIO()
    tracer = provider_for(ConsoleTreeExporter(out)).get_tracer("t")
    attributes = {
        n.RAG_STAGE: n.STAGE_PIPELINE,
        n.metric_attribute(n.METRIC_RECALL_PROXY): float("nan"),
        n.RAG_METRICS_STATUS: "no_answer_span",
    }
    with tracer.start_as_current_span("pipe\nline", attributes=attributes):
        with tracer.start_as_current_span(
            "chat m",
            attributes={
                n.RAG_STAGE: n.STAGE_GENERATE,
                n.RAG_GENERATION_ROLE: "rewrite",
                n.RAG_CITATION_IDS: ["doc-1"],
                n.RAG_CITATION_CONFORMANT: False,
                n.RAG_CITATION_INVALID_COUNT: 2,
                n.GEN_AI_USAGE_OUTPUT_TOKENS: 9,
            },
        ):
            pass
        with tracer.start_as_current_span(
            n.ASSEMBLE_SPAN_NAME,
            attributes={
                n.RAG_STAGE: n.STAGE_ASSEMBLE,
                n.RAG_CONTEXT_CHUNK_IDS: ["a"],
                n.RAG_CONTEXT_DROPPED_IDS: ["b", "c", "d"],
                n.RAG_CONTEXT_DROPPED_REASONS: [n.DROP_OVER_BUDGET, n.DROP_DUPLICATE, n.DROP_OVER_BUDGET],
                n.RAG_CONTEXT_TRUNCATED_COUNT: 1,
            },
        ):
            pass
        with tracer.start_as_current_span("retrieval", attributes={n.RAG_STAGE: n.STAGE_RETRIEVE, n.RAG_RETRIEVAL_CHUNK_IDS: ["x"], n.RAG_UNREADABLE_ITEMS: 2}):
            pass
        distances = {n.RAG_STAGE: n.STAGE_RETRIEVE, n.RAG_RETRIEVAL_CHUNK_IDS: ["a", "b"], n.RAG_RETRIEVAL_TOP_SCORE: 0.25, n.RAG_RETRIEVAL_SCORE_KIND: "distance"}
        with tracer.start_as_current_span("retrieval kb", attributes=distances):
            pass
    lines = [line.split("  ", 1) for line in out.getvalue().splitlines()[1:]]
    assert lines[0][0] == "pipe line"  # control characters never break a line
    assert lines[1:3] == [["│", "recall_proxy  n/a"], ["│", "status        no_answer_span"]]
    assert lines[3][0] == "├─ chat m"
    assert lines[3][1].endswith("ms  role=rewrite, cites [doc-1] non-conformant, 2 invalid, 9 out tokens")
    assert lines[4][0] == "├─ assemble_context"
    assert lines[4][1].endswith("ms  1 in context, 3 dropped (over_budget×2, duplicate), 1 truncated")
    assert lines[5][0] == "├─ retrieval"
    assert lines[5][1].endswith("ms  1 chunk, 2 unreadable")  # no score: no top=
    assert lines[6][0] == "└─ retrieval kb"
    assert lines[6][1].endswith("ms  2 chunks distance=0.25")  # a vector database's distance is not shown as a top score


def test_console_unknown_spans_show_name_and_duration_only() -> None:
    out = io.StringIO()
    tracer = provider_for(ConsoleTreeExporter(out)).get_tracer("t")
    span = tracer.start_span("GET /health", attributes={n.RAG_RETRIEVAL_RESULT_COUNT: 5, n.RAG_QUERY_ID: "q", "http.status_code": 200}, start_time=T0)
    span.end(end_time=T0 + 2_500_000)
    assert out.getvalue() == "trace ab000000000000000000000000000001\nGET /health  2.5 ms\n"


def test_console_default_output_is_stdout_at_print_time(capsys: pytest.CaptureFixture[str]) -> None:
    tracer = provider_for(ConsoleTreeExporter()).get_tracer("t")
    with tracer.start_as_current_span("hello"):
        pass
    captured = capsys.readouterr().out
    assert captured.startswith("trace ") and "\nhello  " in captured


class BrokenOut(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError("stream closed")


def test_console_never_raises_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    exporter = ConsoleTreeExporter(BrokenOut())
    spans = finished_spans(2)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        assert exporter.export(spans[:1]) is SpanExportResult.FAILURE
        assert exporter.export(spans[1:]) is SpanExportResult.FAILURE
        assert exporter.export([object()]) is SpanExportResult.FAILURE  # type: ignore[list-item]
        exporter.shutdown()
    assert len(ragtrace_warnings(caplog)) == 1


def test_console_buffer_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtrace.exporters import console

    monkeypatch.setattr(console, "_MAX_BUFFERED_SPANS", 3)
    out = io.StringIO()
    exporter = ConsoleTreeExporter(out)
    tracer = provider_for(exporter).get_tracer("t")
    roots = [tracer.start_span(f"root{i}") for i in range(2)]
    for root in roots:
        for j in range(2):
            tracer.start_span(f"orphan{j}", context=trace.set_span_in_context(root)).end()
    # Four buffered children > 3: the oldest trace is printed, marked incomplete.
    assert [line.split("  ")[0] for line in out.getvalue().splitlines()] == [
        "trace ab000000000000000000000000000001",
        "orphan0",
        "orphan1",
    ]
    assert out.getvalue().splitlines()[0].endswith("  (incomplete)")
    assert exporter._buffered == 2


def test_console_says_why_an_answers_citations_are_not_scored(spans) -> None:
    """Issue 16 item 15: outside any pipeline the console showed "cites none" for an answer that
    cites [1]; it says the citations were not scored, and why."""
    out = io.StringIO()
    ragtrace.configure(tracer_provider=provider_for(ConsoleTreeExporter(out)))
    with ragtrace.generate(model="m") as g:
        g.record("Paris [1].")
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("chat m")]
    assert line.endswith("ms  citations not scored (outside_pipeline)"), line
