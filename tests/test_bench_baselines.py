"""The benchmark's floors stay honest: ``bench/handwritten_rag.py`` (straight-line code written for
the benchmark pipeline) must export exactly what ragtrace exports on both workloads, in every mode
it claims, or its row in ``bench_peers.py`` / ``bench_overhead.py`` compares ragtrace with a
different export. It went stale once (ragtrace stopped writing some facts twice; the baseline kept
writing them), which made the hand-computed figure wrong by 20%."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragtrace._internal.setup import config

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import bench_overhead
import bench_peers
import handwritten_rag
import peer_workload as w

MODES = [("full", True), ("redact", True), ("full", False), ("redact", False)]


def _export(run: Any) -> list[tuple[Any, ...]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run(provider)
    provider.force_flush()
    return bench_overhead.canonical(exporter.get_finished_spans())


@pytest.mark.parametrize(("mode", "openinference"), MODES)
def test_hand_computed_matches_ragtrace_on_the_peer_workload(mode: str, openinference: bool) -> None:
    def ragtrace_side(provider: TracerProvider) -> None:
        config.configure(tracer_provider=provider, capture_content=mode, openinference=openinference, hash_key=handwritten_rag.HASH_KEY)
        bench_peers.ragtrace_pipeline(w.QUERY)

    def hand_side(provider: TracerProvider) -> None:
        vector = w.embed(w.QUERY)
        docs = w.retrieve(w.QUERY, vector)
        handwritten_rag.run(provider.get_tracer("hand"), w.QUERY, docs, w.rerank(w.QUERY, docs), w.ANSWER, vector,
                            content=mode == "full", openinference=openinference)

    expected = _export(ragtrace_side)
    assert len(expected) == w.SPANS_PER_PIPELINE
    assert _export(hand_side) == expected


@pytest.mark.parametrize(("mode", "openinference"), MODES)
def test_hand_computed_matches_ragtrace_on_the_overhead_workload(mode: str, openinference: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_overhead, "OPENINFERENCE", openinference)

    def ragtrace_side(provider: TracerProvider) -> None:
        bench_overhead.use(provider, mode)
        bench_overhead.ragtrace_pipeline()

    expected = _export(ragtrace_side)
    assert _export(lambda provider: bench_overhead.hand_computed(provider.get_tracer("hand"), mode)()) == expected


def test_a_changed_export_is_caught() -> None:
    """The comparison can fail: one attribute more on the hand side is a difference."""
    def ragtrace_side(provider: TracerProvider) -> None:
        config.configure(tracer_provider=provider, capture_content="full", hash_key=handwritten_rag.HASH_KEY)
        bench_peers.ragtrace_pipeline(w.QUERY)

    def hand_side(provider: TracerProvider) -> None:
        vector = w.embed(w.QUERY)
        docs = w.retrieve(w.QUERY, vector)
        handwritten_rag.run(provider.get_tracer("hand"), w.QUERY, docs, w.rerank(w.QUERY, docs), w.ANSWER + " [9]", vector)

    assert _export(hand_side) != _export(ragtrace_side)
