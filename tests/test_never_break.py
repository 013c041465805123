"""ragtrace never breaks the host application: fault injection, hostile inputs, attribute limits,
concurrency, an exporter that is down, and memory over 100,000 pipelines.

Fault-injection tests turn strict mode off (that is production), so an internal error must be
swallowed and logged once. Every other test keeps the suite's strict mode on, so hostile input
must not even reach the guard.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans as encode_protobuf
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace._internal.core import answer, assembly, declared, locate, chunks, figures, guard
from ragtrace._internal.stages import assemble_stage, generation, pipeline, retrieval, stage, spans as spans_module
from ragtrace._internal.setup import config, otel_metrics
from ragtrace._internal import names
from ragtrace._internal.export.otlp_json import encode_spans as encode_json

ROOT = Path(__file__).resolve().parent.parent
PROXIES = set(names.PROXY_METRICS)


class Injected(Exception):
    """The fault ragtrace's internals raise in these tests."""


class AppError(Exception):
    """The application's own error."""


def boom(*args: Any, **kwargs: Any) -> Any:
    raise Injected("injected fault")


def ragtrace_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("ragtrace") and r.levelno >= logging.WARNING]


def exportable(finished: list[ReadableSpan]) -> None:
    """What an exporter would do with the spans: OTLP protobuf and OTLP/JSON must both encode."""
    encode_protobuf(finished).SerializeToString()
    json.dumps(encode_json(finished), allow_nan=False)


def check_figures(metrics: dict[str, Any], status: str | None) -> None:
    """Proxies in [0, 1]; counts non-negative ints; anything missing is explained by the status."""
    for key, value in metrics.items():
        if key in PROXIES:
            assert isinstance(value, float) and 0.0 <= value <= 1.0, (key, value)
        elif key == names.METRIC_CITED_POSITIONS:
            assert all(isinstance(p, int) and p >= 1 for p in value)
        else:
            assert isinstance(value, int) and value >= 0, (key, value)
    if not PROXIES <= set(metrics):
        assert status, metrics


# --- the application under test ----------------------------------------------------------------
# with metadata: a result normalize reads through to_chunk (a bare {id, score, content} is read
# inline), so a fault in to_chunk reaches the instrumented app
DOCS = [{"id": f"d{i}", "score": round(1 - i / 10, 2), "content": f"passage {i} about topic {i} and more", "metadata": {"topic": i}} for i in range(5)]


@ragtrace.embedder(model="e5", provider="local")
def embed_query(text: str) -> list[list[float]]:
    return [[0.1, 0.2, 0.3]]


@ragtrace.retriever(data_source="kb", top_k=5)
def search(query: str, k: int = 5) -> list[dict]:
    return [dict(d) for d in DOCS[:k]]


@ragtrace.reranker(model="bge", top_n=3)
def rerank_docs(query: str, documents: list[dict]) -> list[dict]:
    return sorted(documents, key=lambda d: -d["score"])[:3]


@ragtrace.assembler
def build_prompt(question: str, documents: list[dict]) -> str:
    sources = "\n".join(f"[{i}] {d['content']}" for i, d in enumerate(documents, start=1))
    return f"Sources:\n{sources}\n\nQuestion: {question}"


@ragtrace.generator(model="m", provider="local")
def llm(prompt: str) -> Iterator[str]:
    yield f"{len(prompt)} chars; "
    yield "see [1] "
    yield "and [2]"


@ragtrace.retriever(data_source="kb")
async def asearch(query: str) -> list[dict]:
    await asyncio.sleep(0)
    return [dict(d) for d in DOCS]


@ragtrace.generator(model="m")
async def allm(prompt: str):
    for piece in (f"{len(prompt)} chars ", "[1]", " [3]"):
        await asyncio.sleep(0)
        yield piece


def instrumented_app(query: str, error: BaseException | None = None) -> dict[str, Any]:
    """ragtrace only observes: decorators and handles around the application's own code."""
    with ragtrace.rag_pipeline("app", query=query, version="v1"):
        embed_query(query)
        docs = search(query)
        kept = rerank_docs(query, docs)
        prompt = build_prompt(query, kept)
        answer = "".join(llm(prompt))
        with ragtrace.generate(model="judge", role="grader", prompt=answer) as grader:
            grader.record("fine")
        if error is not None:
            raise error
    return {"answer": answer, "prompt": prompt, "ids": [d["id"] for d in kept]}


def builder_app(query: str, error: BaseException | None = None) -> dict[str, Any]:
    """ragtrace builds the prompt (assemble) and records everything through handles."""
    with ragtrace.rag_pipeline("builder", query=query):
        with ragtrace.retrieve(query, data_source="kb") as r:
            docs = [dict(d) for d in DOCS]
            r.record(docs)
        with ragtrace.assemble(max_tokens=40) as ctx:
            for doc in docs[:3]:
                ctx.add(doc)
            ctx.drop(docs[3], reason="low_score")
            prompt = ctx.render([{"role": "system", "content": "Cite as [n]."}, {"role": "user", "content": "{context}\n\nQ: {question}"}], question=query)
        with ragtrace.generate(model="m", prompt=prompt) as g:
            answer = f"{len(json.dumps(prompt))} chars [1] [2] [9]"
            g.record(answer, input_tokens=12, output_tokens=4)
        if error is not None:
            raise error
    return {"answer": answer, "prompt": prompt, "again": ctx.prompt}


async def async_app(query: str, error: BaseException | None = None) -> dict[str, Any]:
    async with ragtrace.rag_pipeline("async", query=query):
        docs = await asearch(query)
        async with ragtrace.assemble() as ctx:
            for doc in docs[:2]:
                ctx.add(doc)
            prompt = ctx.render(question=query)
        pieces = [piece async for piece in allm(prompt)]
        if error is not None:
            raise error
    return {"answer": "".join(pieces), "prompt": prompt}


APPS: dict[str, Callable[..., dict[str, Any]]] = {
    "instrumented": instrumented_app,
    "builder": builder_app,
    "async": lambda query, error=None: asyncio.run(async_app(query, error)),
}


# --- fault injection ---------------------------------------------------------------------------
def _patch(*targets: tuple[Any, str]) -> Callable[[pytest.MonkeyPatch], None]:
    def install(monkeypatch: pytest.MonkeyPatch) -> None:
        for owner, name in targets:
            monkeypatch.setattr(owner, name, boom)

    return install


def _failing_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(InMemorySpanExporter, "export", boom)


class RaisingProcessor(SpanProcessor):
    """A span processor (an exporter's synchronous path) that raises; the SDK does not catch it."""

    def on_end(self, span: ReadableSpan) -> None:
        raise Injected("processor down")


# Each fault is one internal step failing every time it runs. Where a function is imported by
# name elsewhere, every binding is patched.
FAULTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "normalize": _patch((chunks, "normalize"), (retrieval, "normalize"), (assemble_stage, "normalize")),
    "to_chunk": _patch((chunks, "to_chunk"), (assembly, "to_chunk")),
    "builder.record": _patch((assembly.ContextBuilder, "record")),
    "builder.drop": _patch((assembly.ContextBuilder, "drop")),
    "placement": _patch((assembly, "Placement"), (locate, "Placement"), (declared, "Placement")),
    "label_map": _patch((assembly.ContextRecord, "label_map")),
    "locate": _patch((assemble_stage, "locate")),
    "explain_missing": _patch((assemble_stage, "_explain_missing")),
    "parse_citations": _patch((answer, "parse_citations")),
    "figures.compute": _patch((figures, "compute")),
    "set_figures": _patch((generation, "set_figures"), (pipeline, "set_figures")),
    "record_error": _patch((stage, "record_error")),
    "Attributes.set_many": _patch((spans_module.Attributes, "set_many")),
    "Span.set_attribute": _patch((Span, "set_attribute")),
    "Span.set_attributes": _patch((Span, "set_attributes")),
    "Span.add_event": _patch((Span, "add_event")),
    "Tracer.start_span": _patch((Tracer, "start_span")),
    "Span.end": _patch((Span, "end")),
    "metrics": _patch((otel_metrics, "instruments")),
}
# A fault in the builder's own placing and rendering changes the prompt ragtrace builds: there
# the prompt *is* ragtrace's product, so "the same value" cannot hold (see test_builder_core_faults).
# That includes reading a chunk (to_chunk) in the apps where ragtrace.assemble places the chunks.
BUILDER_CORE = {
    "builder.place": _patch((assembly.ContextBuilder, "place")),
    "builder.context_block": _patch((assembly.ContextBuilder, "context_block")),
    "to_chunk": FAULTS["to_chunk"],
}
# Steps an app never runs can't fail in it.
NOT_EXERCISED = {
    "instrumented": {"builder.drop", "builder.record"},
    "builder": {"locate", "to_chunk"},
    "async": {"builder.drop", "locate", "to_chunk"},
}
FAULT_CASES = [(app, fault) for app in sorted(APPS) for fault in sorted(FAULTS) if fault not in NOT_EXERCISED[app]]


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Strict mode off, log-once memory cleared: as in an application."""
    previous = guard.set_strict(False)
    guard.reset_log_once()
    yield
    guard.set_strict(previous)


@pytest.fixture
def with_metrics(spans):
    """The spans fixture plus an SDK MeterProvider, so the metrics step runs too."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    ragtrace.configure(tracer_provider=spans.provider, meter_provider=meter_provider)
    yield spans
    meter_provider.shutdown()


def _baseline(app: str, query: str) -> dict[str, Any]:
    return APPS[app](query)


@pytest.mark.parametrize(("app", "fault"), FAULT_CASES)
def test_internal_fault_leaves_the_result_unchanged(with_metrics, production, monkeypatch, caplog, app, fault):
    expected = _baseline(app, "what is bm25?")
    assert ragtrace_warnings(caplog) == []
    with_metrics.clear()
    FAULTS[fault](monkeypatch)
    with caplog.at_level(logging.WARNING):
        assert APPS[app]("what is bm25?") == expected
        error = AppError("the application's own failure")
        with pytest.raises(AppError) as caught:
            APPS[app]("what is bm25?", error)
        assert caught.value is error
        assert APPS[app]("what is bm25?") == expected  # and again: still one warning
    warnings = ragtrace_warnings(caplog)
    assert len(warnings) == 1, [w.getMessage() for w in warnings]
    assert "internal error" in warnings[0].getMessage()
    assert warnings[0].exc_info is not None and isinstance(warnings[0].exc_info[1], Injected)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_internal_fault_in_strict_mode_fails_loudly(with_metrics, fault, monkeypatch):
    """Under ragtrace's own tests the guard re-raises, so bugs can't hide behind it."""
    assert guard.is_strict()
    FAULTS[fault](monkeypatch)
    app = builder_app if fault in ("builder.record", "builder.drop", "placement", "explain_missing") else instrumented_app
    with pytest.raises(Injected):
        app("q", AppError("only reached if nothing failed before"))


def test_exporter_that_raises_is_caught_by_the_sdk(spans, production, monkeypatch, caplog):
    expected = instrumented_app("q")
    exported = len(spans.all())
    _failing_exporter(monkeypatch)
    with caplog.at_level(logging.WARNING):
        assert instrumented_app("q") == expected
        error = AppError("x")
        with pytest.raises(AppError) as caught:
            instrumented_app("q", error)
        assert caught.value is error
    # the SDK's span processor catches an exporter's exception and logs it itself; ragtrace is
    # not on that path, so it has nothing to log
    assert ragtrace_warnings(caplog) == []
    assert any("Exception while exporting" in r.getMessage() for r in caplog.records)
    assert len(spans.all()) == exported


def test_span_processor_that_raises_is_contained(spans, production, caplog):
    expected = instrumented_app("q")
    spans.provider.add_span_processor(RaisingProcessor())
    with caplog.at_level(logging.WARNING):
        assert instrumented_app("q") == expected
        error = AppError("x")
        with pytest.raises(AppError) as caught:
            instrumented_app("q", error)
        assert caught.value is error
    warnings = ragtrace_warnings(caplog)
    assert len(warnings) == 1 and "span end" in warnings[0].getMessage()


@pytest.mark.parametrize("fault", sorted(BUILDER_CORE))
def test_builder_core_faults(spans, production, monkeypatch, caplog, fault):
    """When ragtrace itself cannot place or render, the application still gets a prompt (never an
    exception) and one warning; the prompt then lacks what could not be placed."""
    BUILDER_CORE[fault](monkeypatch)
    with caplog.at_level(logging.WARNING):
        result = builder_app("q")
        error = AppError("x")
        with pytest.raises(AppError) as caught:
            builder_app("q", error)
        assert caught.value is error
    assert isinstance(result["prompt"], list) or isinstance(result["prompt"], str)
    assert result["again"] == result["prompt"]
    assert len(ragtrace_warnings(caplog)) == 1


def test_render_bookkeeping_fault_returns_the_same_prompt(spans, production, monkeypatch, caplog):
    with ragtrace.assemble() as ctx:
        ctx.add({"id": "a", "content": "alpha"})
        expected = ctx.render("Use {context} for {question}", question="q")
    monkeypatch.setattr(assembly, "Placement", boom)
    with caplog.at_level(logging.WARNING):
        with ragtrace.assemble() as ctx:
            ctx.add({"id": "a", "content": "alpha"})
            assert ctx.render("Use {context} for {question}", question="q") == expected
            assert ctx.prompt == expected
    assert len(ragtrace_warnings(caplog)) == 1


# --- hostile inputs (strict mode on: none of these may reach the guard) --------------------------
class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no __str__")

    def __repr__(self) -> str:
        raise RuntimeError("no __repr__")


def circular_dict() -> dict[str, Any]:
    item: dict[str, Any] = {"id": "loop", "content": "circular text"}
    item["metadata"] = item
    item["self"] = item
    return item


def circular_list() -> list[Any]:
    items: list[Any] = [{"id": "x", "content": "in a loop"}]
    items.append(items)
    return items


def raising_generator() -> Iterator[Any]:
    yield {"id": "g1", "content": "first"}
    yield {"id": "g2", "content": "second"}
    raise AppError("the generator failed midway")


HOSTILE: dict[str, Callable[[], Any]] = {
    "none": lambda: None,
    "int": lambda: 7,
    "huge_int": lambda: 2**80,
    "enormous_int": lambda: 10**400,
    "negative_int": lambda: -3,
    "bool": lambda: True,
    "float": lambda: 0.5,
    "nan": lambda: math.nan,
    "bytes": lambda: b"\xff\xfe raw \x00 bytes",
    "bytearray": lambda: bytearray(b"abc"),
    "object": lambda: object(),
    "type": lambda: int,
    "function": lambda: (lambda: None),
    "complex": lambda: 1 + 2j,
    "set": lambda: {"a", "b"},
    "empty_list": lambda: [],
    "unprintable": lambda: Unprintable(),
    "circular_dict": circular_dict,
    "circular_list": circular_list,
    "list_of_odd_things": lambda: [None, 1, 2.5, b"b", object(), Unprintable(), {"id": Unprintable(), "content": Unprintable(), "score": Unprintable()}, ["nested"], {"nothing": 1}],
    "weird_ids": lambda: [{"id": 1, "content": "a"}, {"id": 1, "content": "a"}, {"id": 1.5, "content": "b"}, {"id": b"bytes-id", "content": "c"}, {"id": ("t", 1), "content": "d"}, {"id": True, "content": "e"}, {"id": "", "content": "f"}, {"id": None, "content": "g"}, {"id": "dup", "content": "h"}, {"id": "dup", "content": "other"}],
    "bad_scores": lambda: [{"id": "n", "score": math.nan, "content": "a"}, {"id": "i", "score": math.inf, "content": "b"}, {"id": "-i", "score": -math.inf, "content": "c"}, {"id": "s", "score": "NaN", "content": "d"}, {"id": "h", "score": 10**400, "content": "e"}, {"id": "o", "score": object(), "content": "f"}, {"id": "t", "score": ("x",), "content": "g"}],
    "odd_metadata": lambda: [{"id": "m", "content": "x", "metadata": Unprintable()}, {"id": "n", "content": "y", "metadata": {"k": Unprintable(), 1: object()}}],
    "odd_tokens": lambda: [{"id": "t1", "content": "x", "tokens": 2**80}, {"id": "t2", "content": "y", "tokens": -1}, {"id": "t3", "content": "z", "tokens": "many"}],
    "generator_raising_midway": raising_generator,
    "malformed_completion": lambda: {"choices": "not a list", "usage": Unprintable(), "model": object()},
    "completion_without_content": lambda: {"choices": [{"message": {"content": None}}], "usage": {"prompt_tokens": 2**80, "completion_tokens": "x"}},
}


def _printable(value: Any) -> bool:
    try:
        str(value)
    except Exception:
        return False
    return True


def _feed_everywhere(value: Any) -> ragtrace.RagPipeline:
    """Give one hostile value to every entry point of every stage."""
    with ragtrace.rag_pipeline("hostile", query=value, query_id=value, extra=value) as run:
        with ragtrace.embed(model="e") as e:
            e.record(value, dimensions=value, input_tokens=value, text=value)
        with ragtrace.retrieve(value, data_source="kb", top_k=value) as r:
            r.record(value)
        with ragtrace.rerank(query=value, top_n=value) as rr:
            rr.record(value, candidates=value)
        with ragtrace.assemble() as ctx:
            ctx.add(value)
            for chunk in r.chunks:
                ctx.add(chunk)
            ctx.drop(value)  # reason= is a code-level label (a str), not data
            # render() is ragtrace's str.format: a value the application itself cannot turn into
            # text (its __str__ or an element's __repr__ raises) cannot be rendered, so such a
            # question is not passed (in production the guard logs it; see test_builder_core_faults)
            prompt = ctx.render(question=value) if _printable(value) else ctx.render()
        with ragtrace.generate(prompt=prompt, temperature=value, max_tokens=value) as g:
            g.record(value, input_tokens=value, output_tokens=value, response_model=value)
        with ragtrace.generate(prompt=value, role="grader", context=value) as g2:
            g2.add_piece(value)
        run.record(value)
    return run


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_never_raises(spans, name, caplog):
    with caplog.at_level(logging.WARNING):
        run = _feed_everywhere(HOSTILE[name]())
    finished = spans.all()
    assert len(finished) == 7
    exportable(finished)
    check_figures(run.metrics, run.status)
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
    root = spans.one("pipeline")
    for key, value in root.attributes.items():
        if key.startswith(names.RAG_METRICS_PREFIX) and key[len(names.RAG_METRICS_PREFIX) :] in PROXIES:
            assert 0.0 <= value <= 1.0


def test_hostile_chunks_keep_what_can_be_read(spans):
    with ragtrace.rag_pipeline("odd") as run:
        with ragtrace.retrieve() as r:
            r.record(HOSTILE["weird_ids"]())
    ids = list(spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CHUNK_IDS])
    assert ids[:4] == ["1", "1", "1.5", "bytes-id"]
    assert "dup" in ids and all(isinstance(i, str) and i for i in ids)
    assert run.metrics["duplicate_chunks"] >= 2  # the repeated id 1 and the repeated id "dup"


def test_generator_raising_midway_in_record_keeps_the_items_read(spans, caplog):
    with caplog.at_level(logging.WARNING):
        with ragtrace.rag_pipeline("gen") as run:
            with ragtrace.retrieve() as r:
                r.record(raising_generator())
    assert [c.id for c in r.chunks] == ["g1", "g2"]
    assert run.metrics["retrieved"] == 2
    assert spans.one("retrieve").attributes[names.RAG_UNREADABLE_ITEMS] == 1
    assert any("midway" in m.getMessage() for m in ragtrace_warnings(caplog))


def test_decorated_generators_raising_midway_pass_the_same_exception(spans):
    error = AppError("stream broke")

    @ragtrace.retriever
    def stream_docs(query: str):
        yield {"id": "a", "content": "alpha"}
        raise error

    @ragtrace.generator(model="m")
    async def stream_answer(prompt: str):
        yield "alpha "
        raise error

    with pytest.raises(AppError) as caught:
        with ragtrace.rag_pipeline("p"):
            list(stream_docs("q"))
    assert caught.value is error

    async def consume() -> None:
        async with ragtrace.rag_pipeline("p"):
            async for _ in stream_answer("prompt"):
                pass

    with pytest.raises(AppError) as caught:
        asyncio.run(consume())
    assert caught.value is error

    def pieces():
        yield "x"
        raise error

    with pytest.raises(AppError) as caught:
        with ragtrace.generate() as g:
            for _ in g.stream(pieces()):
                pass
    assert caught.value is error
    failed = [s for s in spans.all() if s.status.status_code == StatusCode.ERROR]
    assert {s.attributes[names.RAG_STAGE] for s in failed} == {"retrieve", "generate", "pipeline"}


def test_ten_megabyte_strings(spans):
    big = "word " * 2_000_000  # 10 MB
    start = time.perf_counter()
    with ragtrace.rag_pipeline("big", query=big) as run:
        with ragtrace.embed() as e:
            e.record(text=big)
        with ragtrace.retrieve(big) as r:
            r.record([{"id": "b", "content": big}, {"id": "c", "content": "x" + big}, big + "y"])
        with ragtrace.assemble(max_tokens=1000) as ctx:
            for chunk in r.chunks:
                ctx.add(chunk)
            prompt = ctx.render(question=big)
        with ragtrace.generate(prompt=prompt) as g:
            g.record(big + " [1] [2] " + big)
    elapsed = time.perf_counter() - start
    assert elapsed < 30, elapsed
    limit = config.current().max_content_chars
    for span in spans.all():
        for key, value in span.attributes.items():
            if isinstance(value, str):
                assert len(value) <= limit + 200, (span.name, key, len(value))
    assert run.metrics["retrieved"] == 3 and run.metrics["cited"] == 1
    check_figures(run.metrics, run.status)
    exportable(spans.all())


def test_a_ten_megabyte_exception_message_is_trimmed_like_other_text(spans):
    """In full mode the message, the stack trace and the status description are content, cut to
    max_content_chars: an untrimmed 10 MB message went out three times (30 MB) and could push a
    batch past the OTLP request limit. The app's exception itself is untouched."""
    message = "boom " * 2_000_000
    error = AppError(message)
    with pytest.raises(AppError) as caught:
        with ragtrace.rag_pipeline("big"):
            with ragtrace.retrieve():
                raise error
    assert caught.value is error and str(caught.value) == message
    limit = config.current().max_content_chars
    for span in spans.all():
        assert len(span.status.description or "") <= limit
        for event in span.events:
            for key, value in event.attributes.items():
                assert not isinstance(value, str) or len(value) <= limit, (span.name, key, len(value))
        assert span.events[0].attributes["exception.message"] == message[:limit]
        assert span.events[0].attributes["exception.stacktrace"].startswith("Traceback")
    exportable(spans.all())


def test_ten_thousand_chunks(spans):
    docs = [{"id": f"k{i}", "score": 1 / (i + 1), "content": f"chunk {i} text"} for i in range(10_000)]
    start = time.perf_counter()
    with ragtrace.rag_pipeline("many") as run:
        with ragtrace.retrieve() as r:
            r.record(docs)
        with ragtrace.rerank() as rr:
            rr.record(list(reversed(docs)))
        with ragtrace.assemble() as ctx:
            for chunk in rr.chunks:
                ctx.add(chunk)
            ctx.render()
        with ragtrace.generate() as g:
            g.record(" ".join(f"[{i}]" for i in range(1, 10_001)))
    assert time.perf_counter() - start < 30
    assert run.metrics["retrieved"] == run.metrics["in_context"] == run.metrics["cited"] == 10_000
    assert run.metrics["recall_proxy"] == 1.0
    assert run.metrics["recall_proxy_weighted"] == 1.0  # not 1.0000000000000038
    check_figures(run.metrics, run.status)
    exportable(spans.all())


@pytest.mark.parametrize(
    "answer",
    [
        '{"citations": [1, 2',
        '{"citations": "x"}',
        '{"citations": [{"id": null}, {"id": {"a": 1}}, 1e400, -1, true, [[]]]}',
        '```json\n{"citations": [[[[[[1]]]]]]}\n```',
        '{"citations":' * 10_000,
        "[" * 100_000 + "]" * 100_000,
        '{"citations": [' + "[" * 5_000 + "]" * 5_000 + "]}",
        '{"citations": [1]}' * 5_000,
        "```json\n{\"citations\": [1]",
        "[1" * 50_000,
        "【" * 10_000 + "†" + "】" * 10_000,
        "\x00[1]\ud800[2]",
    ],
)
def test_malformed_citations(spans, answer):
    with ragtrace.rag_pipeline("json") as run:
        with ragtrace.retrieve() as r:
            r.record(DOCS[:3])
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks:
                ctx.add(chunk)
        with ragtrace.generate() as g:
            g.record(answer)
    check_figures(run.metrics, run.status)
    assert run.metrics["cited"] <= 3
    exportable(spans.all())


# --- attribute limits ----------------------------------------------------------------------------
JSON_KEYS = (names.GEN_AI_RETRIEVAL_DOCUMENTS, names.GEN_AI_INPUT_MESSAGES, names.GEN_AI_OUTPUT_MESSAGES)
ESSENTIAL = (names.RAG_STAGE, names.OI_SPAN_KIND)


def _rich_pipeline() -> ragtrace.RagPipeline:
    docs = [{"id": f"document-{i}", "score": 0.9 - i / 100, "content": f"Document {i} is about things " * 4} for i in range(12)]
    with ragtrace.rag_pipeline("limits", query="What is BM25, and why does anyone still use it?", version="v2", route="a", team="b", shard=3) as run:
        with ragtrace.embed(model="e5", provider="local") as e:
            e.record([[0.1] * 8], input_tokens=9, text="What is BM25?")
        with ragtrace.retrieve("What is BM25?", data_source="kb", top_k=12) as r:
            r.record(docs)
        with ragtrace.rerank(model="bge", provider="local", query="q", top_n=6) as rr:
            rr.record(docs[:6])
        with ragtrace.assemble(max_tokens=300) as ctx:
            for chunk in rr.chunks:
                ctx.add(chunk)
            prompt = ctx.render([{"role": "system", "content": "Answer briefly and cite [n]."}, {"role": "user", "content": "{context}\nQ: {question}"}], question="q")
        with ragtrace.generate(model="gpt", provider="openai", prompt=prompt, temperature=0.2, max_tokens=99) as g:
            g.record({"id": "resp-1", "model": "gpt", "choices": [{"message": {"content": "BM25 is lexical [1] and old [2] [7]."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 300, "completion_tokens": 12}})
    return run


def _check_limited(finished: list[ReadableSpan], run: ragtrace.RagPipeline, count: int | None, length: int) -> None:
    assert len(finished) == 6
    if count is not None:
        assert any(s.dropped_attributes for s in finished)  # the count limit did bite
    for span in finished:
        attributes = span.attributes
        if count is not None:
            assert len(attributes) <= count
        stage = attributes.get(names.RAG_STAGE)
        assert stage in {"pipeline", "embed", "retrieve", "rerank", "assemble", "generate"}, span.name
        for key in ESSENTIAL:
            assert key in attributes, (span.name, key)
        if stage != "assemble":
            assert attributes[names.GEN_AI_OPERATION_NAME] == span.name.split()[0]
        else:
            assert attributes[names.RAG_CONTEXT_INCLUSION_METHOD] == "recorded"
        for key, value in attributes.items():
            if isinstance(value, str):
                assert len(value) <= length
            if key in JSON_KEYS:
                json.loads(value)  # trimmed element by element, never cut mid-string
        for key in (names.OI_INPUT_VALUE, names.OI_OUTPUT_VALUE):
            mime = attributes.get(key.replace(".value", ".mime_type"))
            if key in attributes and mime == names.MIME_JSON:
                json.loads(attributes[key])
    root = next(s for s in finished if s.attributes[names.RAG_STAGE] == "pipeline")
    assert run.metrics and len(run.metrics) == len(names.ALL_METRICS)
    for key, value in run.metrics.items():
        attribute = root.attributes[names.metric_attribute(key)]
        assert (list(attribute) if isinstance(value, list) else attribute) == value, key
    exportable(finished)


# Room for the root's essentials: every figure, its status, the query hash and the three start
# attributes (rag.stage, gen_ai.operation.name, openinference.span.kind), and no more.
LIMIT = len(names.ALL_METRICS) + 5


def _limited_provider(**limits: int) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(**limits)) if limits else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_attribute_limits_from_span_limits():
    provider, exporter = _limited_provider(max_span_attributes=LIMIT, max_span_attribute_length=64)
    ragtrace.configure(tracer_provider=provider)
    run = _rich_pipeline()
    _check_limited(list(exporter.get_finished_spans()), run, LIMIT, 64)


def test_attribute_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", str(LIMIT))
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "64")
    provider, exporter = _limited_provider()  # limits read from the environment at creation
    ragtrace.configure(tracer_provider=provider)
    run = _rich_pipeline()
    finished = list(exporter.get_finished_spans())
    limits = provider._span_limits
    assert (limits.max_span_attributes, limits.max_span_attribute_length) == (LIMIT, 64)  # the env took effect
    _check_limited(finished, run, LIMIT, 64)


def test_json_values_are_trimmed_whole_under_a_length_limit():
    provider, exporter = _limited_provider(max_span_attribute_length=64)
    ragtrace.configure(tracer_provider=provider)
    run = _rich_pipeline()
    finished = list(exporter.get_finished_spans())
    _check_limited(finished, run, None, 64)
    retrieve = next(s for s in finished if s.attributes[names.RAG_STAGE] == "retrieve").attributes
    documents = json.loads(retrieve[names.GEN_AI_RETRIEVAL_DOCUMENTS])
    assert documents and documents == [{"id": f"document-{i}", "score": 0.9 - i / 100} for i in range(len(documents))]
    generate = next(s for s in finished if s.attributes[names.RAG_STAGE] == "generate").attributes
    for key in (names.GEN_AI_INPUT_MESSAGES, names.GEN_AI_OUTPUT_MESSAGES):
        assert isinstance(json.loads(generate[key]), list)


# --- concurrency ---------------------------------------------------------------------------------
def _concurrent_docs(tag: str, n: int) -> list[dict[str, Any]]:
    return [{"id": f"{tag}:{i}", "score": 1 - i / 100, "content": f"text of {tag} number {i}"} for i in range(n)]


def _expected(n: int) -> dict[str, Any]:
    # the answer cites [1] and the id of the last chunk, which is in context only when n <= 3
    cited = 1 if n == 1 or n > 3 else 2
    return {"retrieved": n, "in_context": min(n, 3), "cited": cited, "recall_proxy": cited / n}


@ragtrace.retriever(data_source="threads")
def thread_search(query: str, docs: list[dict]) -> list[dict]:
    time.sleep(0)
    return docs


def _thread_pipeline(tag: str, n: int) -> tuple[str, dict[str, Any]]:
    docs = _concurrent_docs(tag, n)
    with ragtrace.rag_pipeline("threads", query=tag) as run:
        found = thread_search(tag, docs)
        with ragtrace.assemble() as ctx:
            for doc in found[:3]:
                time.sleep(0)
                ctx.add(doc)
        with ragtrace.generate() as g:
            g.record(f"[1] [{tag}:{n - 1}]")
    return tag, run.metrics


async def _task_pipeline(tag: str, n: int) -> tuple[str, dict[str, Any]]:
    docs = _concurrent_docs(tag, n)
    async with ragtrace.rag_pipeline("tasks", query=tag) as run:
        async with ragtrace.retrieve() as r:
            await asyncio.sleep(0)
            r.record(docs)
        await asyncio.sleep(0)
        with ragtrace.assemble() as ctx:
            for doc in docs[:3]:
                ctx.add(doc)
                await asyncio.sleep(0)
        async with ragtrace.generate() as g:
            await asyncio.sleep(0)
            g.record(f"[1] [{tag}:{n - 1}]")
    return tag, run.metrics


def test_threads_and_tasks_never_mix(spans):
    results: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for p in range(50):
                tag, metrics = _thread_pipeline(f"t{t}p{p}", sizes[f"t{t}p{p}"])
                with lock:
                    results[tag] = metrics
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    async def tasks() -> None:
        for tag, metrics in await asyncio.gather(*(_task_pipeline(f"a{k}", sizes[f"a{k}"]) for k in range(200))):
            with lock:
                results[tag] = metrics

    for t in range(4):
        for p in range(50):
            sizes[f"t{t}p{p}"] = 1 + (t * 50 + p) % 9
    for k in range(200):
        sizes[f"a{k}"] = 1 + k % 8
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    threads.append(threading.Thread(target=lambda: asyncio.run(tasks())))  # concurrently with the threads
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 400
    for tag, metrics in results.items():
        n = sizes[tag]
        expected = _expected(n)
        assert {k: metrics[k] for k in expected} == pytest.approx(expected), tag
    traces: dict[int, list[ReadableSpan]] = {}
    for span in spans.all():
        traces.setdefault(span.context.trace_id, []).append(span)
    assert len(traces) == 400
    for trace_spans in traces.values():
        root = next(s for s in trace_spans if s.attributes[names.RAG_STAGE] == "pipeline")
        tag = root.attributes[names.OI_INPUT_VALUE]
        assert sorted(s.attributes[names.RAG_STAGE] for s in trace_spans) == ["assemble", "generate", "pipeline", "retrieve"]
        for span in trace_spans:
            assert span is root or span.parent.span_id == root.context.span_id
            for key in (names.RAG_RETRIEVAL_CHUNK_IDS, names.RAG_CONTEXT_CHUNK_IDS, names.RAG_CONTEXT_DROPPED_IDS, names.RAG_CITATION_IDS):
                for chunk_id in span.attributes.get(key, ()):
                    assert chunk_id.split(":")[0] == tag, (tag, key, chunk_id)
        n = sizes[tag]
        assert root.attributes["rag.metrics.retrieved"] == n
        assert root.attributes["rag.metrics.recall_proxy"] == pytest.approx(_expected(n)["recall_proxy"])


# --- the exporter is down -------------------------------------------------------------------------
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


def _timed_runs(count: int) -> tuple[float, list[dict[str, Any]]]:
    results = []
    start = time.perf_counter()
    for i in range(count):
        results.append(instrumented_app(f"question {i}"))
    return time.perf_counter() - start, results


def test_otlp_exporter_down_in_process(caplog):
    ragtrace.configure(tracer_provider=trace.NoOpTracerProvider())  # tracing off
    _timed_runs(5)  # warm up
    off_time, off_results = _timed_runs(40)

    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{closed_port()}/v1/traces", timeout=1)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))
    ragtrace.configure(tracer_provider=provider)
    down_time, down_results = _timed_runs(40)
    time.sleep(0.3)  # export attempts fail in the background meanwhile
    down_time_2, _ = _timed_runs(40)
    assert down_results == off_results
    # generous: recording spans costs something, a dead collector must not add to it
    assert down_time < 3 * off_time + 1.0, (off_time, down_time)
    assert down_time_2 < 3 * off_time + 1.0, (off_time, down_time_2)
    # shutdown drains the queue, one exporter timeout per batch (SDK behaviour): it must return
    provider.shutdown()
    assert not [r for r in caplog.records if r.name.startswith("ragtrace")]


def _run_script(script: str, env: dict[str, str], cwd: Path, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_"))}
    full_env.update(env, PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=full_env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return result, time.perf_counter() - start


PIPELINES = """
import ragtrace
{configure}
for i in range(20):
    with ragtrace.rag_pipeline("exit", query="q") as run:
        with ragtrace.retrieve() as r:
            r.record([{{"id": "a", "content": "alpha"}}, "beta"])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks[0])
        with ragtrace.generate(model="m") as g:
            g.record("alpha [1]")
# with no provider at all (the baseline) the pipeline is inert and measures nothing
assert run.metrics["cited"] == 1 if run.status != "telemetry_off" else run.metrics == {{}}
print("done")
"""


def test_process_with_otlp_down_exits_within_the_exporter_timeout(tmp_path):
    timeout = 1.0
    baseline, base_time = _run_script(PIPELINES.format(configure=""), {}, tmp_path)
    assert baseline.returncode == 0, baseline.stderr
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}", "OTEL_EXPORTER_OTLP_TIMEOUT": str(timeout)}
    result, elapsed = _run_script(PIPELINES.format(configure='ragtrace.configure(exporter="otlp")'), env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    assert "Traceback" not in result.stderr
    # the export at exit gives up within its timeout (plus scheduling slack on a busy machine)
    assert elapsed - base_time < timeout + 1.5, (base_time, elapsed)


def test_spans_are_flushed_to_jsonl_at_interpreter_exit(tmp_path):
    path = tmp_path / "traces.jsonl"
    result, _ = _run_script(PIPELINES.format(configure=f'ragtrace.configure(exporter="jsonl:{path}")'), {}, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = path.read_text().splitlines()
    spans = [
        span
        for line in lines
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    assert len(spans) == 20 * 4  # no flush in the script: the provider flushed at exit
    assert sum(s["name"] == "invoke_workflow exit" for s in spans) == 20


# --- memory ----------------------------------------------------------------------------------------
MEMORY_SCRIPT = """
import gc, json, sys, time, tracemalloc
import ragtrace
from ragtrace._internal.setup import config
from ragtrace._internal.stages import state
from ragtrace._internal.core import guard
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

mode = sys.argv[1]
if mode == "recording":
    provider = TracerProvider()
    provider.add_span_processor(SpanProcessor())  # the base class: receives every span, keeps none
    ragtrace.configure(tracer_provider=provider)
else:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
DOCS = [{"id": "a", "score": 0.9, "content": "alpha beta"}, {"id": "b", "content": "gamma"}]
kept = []

def one(i):
    with ragtrace.rag_pipeline("memory", query="q") as run:
        if i % 20 == 0:
            with ragtrace.retrieve() as r:
                r.record(DOCS)
            with ragtrace.assemble() as ctx:
                ctx.add(r.chunks[0])
            with ragtrace.generate() as g:
                g.record("alpha [1]")
    return run

def live_states():
    return sum(1 for o in gc.get_objects() if type(o) is state.PipelineState)

cpu = time.process_time()
assert one(0).metrics.get("cited") == (1 if mode == "recording" else None)  # off: inert, nothing measured
for i in range(1, 2000):
    one(i)
gc.collect()
blocks = sys.getallocatedblocks()
for i in range(2000, 100000):
    one(i)
gc.collect()
block_growth = sys.getallocatedblocks() - blocks
states = live_states()
tracemalloc.start()
for i in range(1000):
    one(i)
gc.collect()
first = tracemalloc.get_traced_memory()[0]
for i in range(2000):
    one(i)
gc.collect()
traced_growth = tracemalloc.get_traced_memory()[0] - first
tracemalloc.stop()
# positive control: an application that keeps its runs keeps their state, and both measures see it
gc.collect()
control = sys.getallocatedblocks()
for i in range(2000):
    kept.append(one(i))
gc.collect()
control_growth = sys.getallocatedblocks() - control
control_states = live_states()
print(json.dumps({
    "states": states, "implicit": state.implicit_count(), "block_growth": block_growth,
    "traced_growth": traced_growth, "control_growth": control_growth, "control_states": control_states,
    "tracers": len(config._tracers),
    "seen": len(guard._seen), "cpu": time.process_time() - cpu,
}))
"""


def test_hundred_thousand_pipelines_leave_no_state(tmp_path):
    """Two interpreters in parallel (one per core): tracing off, and a provider that drops spans."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["RAGTRACE_HASH_KEY"] = os.environ["RAGTRACE_HASH_KEY"]  # else the one random-key warning counts as seen
    runs = {
        mode: subprocess.Popen([sys.executable, "-c", MEMORY_SCRIPT, mode], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for mode in ("off", "recording")
    }
    for mode, process in runs.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        report = json.loads(out)
        assert report["states"] == 0, (mode, report)  # no PipelineState outlives its pipeline
        assert report["implicit"] == 0, (mode, report)
        assert report["tracers"] <= 1 and report["seen"] == 0, (mode, report)
        # 98,000 pipelines: a leak of one block per 50 pipelines would show
        assert report["block_growth"] < 2000, (mode, report)
        assert report["traced_growth"] < 64 * 1024, (mode, report)
        # an inert (tracing off) pipeline has no state to keep
        assert report["control_growth"] > 2000 and report["control_states"] == (2000 if mode == "recording" else 0), (mode, report)


@pytest.mark.parametrize("limit", range(6, 22))
def test_essential_start_attributes_survive_any_count_limit(limit):
    """rag.stage and gen_ai.operation.name outlive the limit even when the span started with many attributes and ends with few."""
    provider, exporter = _limited_provider(max_span_attributes=limit)
    ragtrace.configure(tracer_provider=provider)
    with ragtrace.generate(model="m", provider="p", role="rewrite", temperature=0.2, max_tokens=50, prompt="rewrite this") as g:
        g.record("hi")
    (span,) = exporter.get_finished_spans()
    assert span.attributes[names.RAG_STAGE] == "generate"
    assert span.attributes[names.GEN_AI_OPERATION_NAME] == names.OP_CHAT


FORK_SCRIPT = """
import os, sys, threading, time
import ragtrace
from opentelemetry.sdk.trace import TracerProvider
from ragtrace._internal.setup import config, otel_metrics, own_provider
from ragtrace._internal.stages import state
from ragtrace._internal.core import guard, keyed

ragtrace.configure(tracer_provider=TracerProvider(), capture_content="redact")
locks = [(state, "_implicit_lock"), (guard, "_seen_lock"), (config, "_config_lock"), (own_provider, "_own_lock"), (keyed, "_lock"), (otel_metrics, "_cache_lock")]
held, release = threading.Event(), threading.Event()

def hold():
    taken = [getattr(module, name) for module, name in locks]
    for lock in taken:
        lock.acquire()
    held.set()
    release.wait()
    for lock in taken:
        lock.release()

threading.Thread(target=hold, daemon=True).start()
held.wait()
pid = os.fork()  # every ragtrace lock is held by the other thread right now
if pid == 0:
    keyed.set_key(None)
    with ragtrace.retrieve("q") as r:  # outside a pipeline: the trace-keyed state map
        r.record(["a chunk without an id"])
    with ragtrace.rag_pipeline("child", query="q"):
        with ragtrace.generate(model="m") as g:
            g.record("answer")
    guard.warn_once("child", "a warning from the child")
    ragtrace.configure(tracer_provider=TracerProvider())
    os._exit(0)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        release.set()
        print("child exit", os.waitstatus_to_exitcode(status))
        sys.exit(0)
    time.sleep(0.05)
os.kill(pid, 9)
print("child deadlocked")
"""


def test_a_forked_child_never_deadlocks_on_a_lock_held_at_fork_time(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=90, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "child exit 0", (done.stdout, done.stderr)


class LeakyTokenizer:
    """A user tokenizer whose error quotes its input, as many do."""

    def count(self, text: str) -> int:
        raise ValueError(f"cannot tokenize {text!r}")

    def truncate(self, text: str, max_tokens: int) -> str:
        raise ValueError(f"cannot tokenize {text!r}")


@pytest.mark.parametrize("mode", ["redact", "hash", "full"])
def test_ragtraces_log_lines_carry_no_content_in_redact_and_hash_modes(spans, production, caplog, mode):
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode, tokenizer=LeakyTokenizer())
    secret = "SECRET-4111-1111"
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        with ragtrace.rag_pipeline("p", query="q"):
            with ragtrace.retrieve() as r:
                r.record([{"id": "a", "content": f"card {secret}"}])
            with ragtrace.assemble(max_tokens=100) as ctx:
                ctx.add(r.chunks[0])
    logged = "\n".join(caplog.text.splitlines() + [r.exc_text or "" for r in caplog.records])
    assert ragtrace_warnings(caplog)  # the failure is reported either way
    assert (secret in logged) == (mode == "full"), logged


# --- issue 16 item 2: stages outside a pipeline, more traces in flight than the state map holds --
STATE_DOCS = [{"id": "a", "content": "alpha"}, {"id": "b", "content": "beta"}]


def _retrieve_and_assemble() -> None:
    with ragtrace.retrieve("q") as r:
        r.record(STATE_DOCS)
    with ragtrace.assemble() as ctx:
        ctx.add(r.chunks[0])


def _answer() -> None:
    with ragtrace.generate(model="m") as g:
        g.record("alpha [1]")


def _inside(request: Span, step: Callable[[], None]) -> None:
    token = otel_context.attach(trace.set_span_in_context(request))
    try:
        step()
    finally:
        otel_context.detach(token)


def _interleaved(requests: list[Span]) -> None:
    """Every request retrieves before any answers: all are in flight at once."""
    for request in requests:
        _inside(request, _retrieve_and_assemble)
    for request in requests:
        _inside(request, _answer)


def _threads(requests: list[Span]) -> None:
    """One thread per request, all past their retrieval before any answers."""
    barrier = threading.Barrier(len(requests))

    def serve(request: Span) -> None:
        _inside(request, _retrieve_and_assemble)
        barrier.wait(timeout=60)
        _inside(request, _answer)

    threads = [threading.Thread(target=serve, args=(request,)) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


@pytest.mark.parametrize("drive", [_interleaved, _threads], ids=["interleaved", "threads"])
def test_one_trace_too_many_in_flight_degrades_that_trace_alone_and_says_so(spans, caplog, monkeypatch, drive):
    """257 app traces in flight at once, each with stages but no rag_pipeline: the map keeps 256
    states. The trace whose state was dropped is marked not measurable; the 256 others are scored
    right (oldest-first eviction used to make every later lookup evict the next trace, so all 257
    lost their retrievals)."""
    from collections import OrderedDict

    from ragtrace._internal.stages import state

    monkeypatch.setattr(state, "_implicit", OrderedDict())
    monkeypatch.setattr(state, "_evicted", OrderedDict())
    tracer = spans.provider.get_tracer("app")
    requests = [tracer.start_span(f"request {i}") for i in range(state._IMPLICIT_CAPACITY + 1)]
    caplog.set_level(logging.WARNING, logger="ragtrace")
    drive(requests)
    for request in requests:
        request.end()

    generations = {s.context.trace_id: s.attributes for s in spans.by_stage("generate")}
    assert len(generations) == len(requests)
    evicted = [a for a in generations.values() if a.get(names.RAG_METRICS_STATUS) == names.STATUS_STATE_EVICTED]
    kept = [a for a in generations.values() if a not in evicted]
    assert len(evicted) == 1 and len(kept) == state._IMPLICIT_CAPACITY
    if drive is _interleaved:  # the least recently used trace is the one dropped
        assert generations[requests[0].get_span_context().trace_id] is evicted[0]
    (marked,) = evicted
    assert marked[names.RAG_CITATION_STATUS] == names.STATUS_STATE_EVICTED
    assert not any(k.startswith("rag.metrics.") and k != names.RAG_METRICS_STATUS for k in marked)
    assert names.RAG_CITATION_INVALID_COUNT not in marked  # never a silent "1 invalid citation"
    for attributes in kept:
        assert attributes[names.metric_attribute(names.METRIC_RETRIEVED)] == 2
        assert attributes[names.metric_attribute(names.METRIC_RECALL_PROXY)] == 0.5
        assert attributes[names.RAG_CITATION_INVALID_COUNT] == 0
        assert names.RAG_METRICS_STATUS not in attributes
    evictions = [r for r in ragtrace_warnings(caplog) if "evicted" in r.getMessage()]
    assert len(evictions) == 1 and str(state._IMPLICIT_CAPACITY) in evictions[0].getMessage()
    assert state.implicit_count() == state._IMPLICIT_CAPACITY
