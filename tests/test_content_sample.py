"""The sampled content mode: ids on every pipeline, full content on a share of them.

Decided once per pipeline at its root from the trace id and recorded there. The no-leak half:
every exported byte of an unsampled pipeline (OTLP/JSON of all its spans, events included) is
searched for the content markers planted in it. The share half: over many pipelines the sampled
count stays within a binomial bound.
"""

from __future__ import annotations

import json
import math
import random
import uuid

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

import ragtrace
from ragtrace._internal.setup import config, redaction
from ragtrace._internal import names
from ragtrace._internal.export.otlp_json import encode_spans


class SeededIds(IdGenerator):
    """Random ids from a seeded generator: the same pipelines every run, still uniformly random."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.random.getrandbits(128) or 1


def provider(seed: int = 7) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    found = TracerProvider(id_generator=SeededIds(seed))
    found.add_span_processor(SimpleSpanProcessor(exporter))
    return found, exporter


def run_pipeline(**options) -> tuple[ragtrace.RagPipeline, list[str]]:
    """A pipeline with content everywhere; returns the run and the markers planted in it."""
    marks = [f"M{uuid.uuid4().hex[:12]}" for _ in range(5)]
    query, chunk_a, chunk_b, answer, explanation = marks
    with ragtrace.rag_pipeline("qa", query=f"{query}?", **options) as run:
        with ragtrace.retrieve(f"{query}?", data_source="kb") as r:
            r.record([{"id": "a", "score": 0.9, "content": chunk_a}, {"id": "b", "score": 0.5, "content": chunk_b}])
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks:
                ctx.add(chunk)
            ctx.render("Context:\n{context}\nQuestion: {query}", query=query)
        with ragtrace.generate(model="m") as g:
            g.record(f"{answer} [1]")
    ragtrace.record_score(run, name="groundedness", value=0.9, explanation=explanation, scorer="code")
    return run, marks


def exported_text(exporter: InMemorySpanExporter, trace_id: str) -> str:
    spans = [s for s in exporter.get_finished_spans() if format(s.context.trace_id, "032x") == trace_id]
    assert len(spans) == 5
    return json.dumps(encode_spans(spans), ensure_ascii=False)


def root_of(exporter: InMemorySpanExporter, trace_id: str):
    (root,) = [
        s for s in exporter.get_finished_spans()
        if format(s.context.trace_id, "032x") == trace_id and s.attributes.get(names.RAG_STAGE) == names.STAGE_PIPELINE
    ]
    return root


def test_unsampled_pipelines_carry_no_content_and_the_share_is_binomial():
    tracer_provider, exporter = provider()
    share, pipelines = 0.05, 1500
    ragtrace.configure(tracer_provider=tracer_provider, capture_content="redact", full_content_sample=share)
    sampled = 0
    for _ in range(pipelines):
        run, marks = run_pipeline()
        text = exported_text(exporter, run.trace_id)
        root = root_of(exporter, run.trace_id)
        assert root.attributes[names.RAG_CONTENT_SAMPLE_SHARE] == share
        if root.attributes[names.RAG_CONTENT_SAMPLED]:
            sampled += 1
            assert root.attributes[names.RAG_CONTENT_MODE] == "full"
            for mark in marks:  # the positive control: the search finds content where it went out
                assert mark in text
        else:
            assert root.attributes[names.RAG_CONTENT_MODE] == "redact"
            for mark in marks:
                assert mark not in text and mark[:9] not in text
        exporter.clear()
    # within 4.5 standard deviations of n*p (a false alarm about once in 150,000 seeds)
    mean, deviation = pipelines * share, math.sqrt(pipelines * share * (1 - share))
    assert abs(sampled - mean) <= 4.5 * deviation, (sampled, mean)
    assert sampled > 0


def test_the_decision_is_the_trace_ids_in_every_process():
    tracer_provider, exporter = provider(seed=11)
    ragtrace.configure(tracer_provider=tracer_provider, capture_content="hash", full_content_sample=0.5)
    for _ in range(40):
        run, _ = run_pipeline()
        root = root_of(exporter, run.trace_id)
        expected = redaction.sampled_for_content(int(run.trace_id, 16), 0.5)
        assert root.attributes[names.RAG_CONTENT_SAMPLED] is expected
        assert root.attributes[names.RAG_CONTENT_MODE] == ("full" if expected else "hash")
        assert run.config.content.mode == root.attributes[names.RAG_CONTENT_MODE]
        exporter.clear()


def test_a_pipelines_own_capture_content_wins():
    tracer_provider, exporter = provider()
    ragtrace.configure(tracer_provider=tracer_provider, capture_content="redact", full_content_sample=1.0)
    run, marks = run_pipeline(capture_content="redact")
    root = root_of(exporter, run.trace_id)
    assert root.attributes[names.RAG_CONTENT_MODE] == "redact"
    assert names.RAG_CONTENT_SAMPLED not in root.attributes
    text = exported_text(exporter, run.trace_id)
    assert not any(mark in text for mark in marks)


def test_share_one_gives_full_content_and_share_zero_none():
    tracer_provider, exporter = provider()
    ragtrace.configure(tracer_provider=tracer_provider, capture_content="redact", full_content_sample=1.0)
    run, marks = run_pipeline()
    assert all(mark in exported_text(exporter, run.trace_id) for mark in marks)
    exporter.clear()
    ragtrace.configure(tracer_provider=tracer_provider, capture_content="redact", full_content_sample=0)
    run, marks = run_pipeline()
    assert names.RAG_CONTENT_SAMPLED not in root_of(exporter, run.trace_id).attributes
    assert not any(mark in exported_text(exporter, run.trace_id) for mark in marks)


@pytest.mark.parametrize(
    ("mode", "share", "error"),
    [("redact", 1.5, ValueError), ("redact", -0.1, ValueError), ("redact", float("nan"), ValueError), ("redact", True, TypeError), ("redact", "5%", TypeError), ("full", 0.05, ValueError)],
)
def test_bad_shares_raise_at_configure(mode, share, error):
    with pytest.raises(error):
        ragtrace.configure(capture_content=mode, full_content_sample=share)


def test_environment_share_fails_closed(monkeypatch, caplog):
    monkeypatch.setenv("RAGTRACE_CAPTURE_CONTENT", "redact")
    monkeypatch.setenv("RAGTRACE_FULL_CONTENT_SAMPLE", "0.25")
    config.reset()
    assert config.current().full_content_sample == 0.25
    monkeypatch.setenv("RAGTRACE_FULL_CONTENT_SAMPLE", "lots")
    config.reset()
    assert config.current().full_content_sample == 0.0
    assert "RAGTRACE_FULL_CONTENT_SAMPLE" in caplog.text
