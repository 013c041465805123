"""The floors printed beside ragtrace's rows in ``bench_peers.py``: what the same export costs with
ragtrace's own code taken out, measured in the same rounds as ragtrace and the peers.

- **otel-replay**, **otel-replay-redact**: ragtrace's exact spans (content on, redact), captured from
  one ragtrace pipeline and replayed with the SDK alone (``bench_overhead.handwritten``): nothing is
  computed, so this is what the SDK charges for that attribute volume.
- **hand-computed**, **hand-computed-redact**: ``bench/handwritten_rag.py``, straight-line code written
  for this one pipeline that computes the identical spans at run time from the stage inputs (the
  prompt and its offsets, ids, scores, documents JSON, citations, figures, evaluation events). Checked
  at start-up to export what ragtrace exports, span for span (``bench_overhead.canonical``).
- **otel-replay-metrics**: the span replay plus ragtrace's metric records of one pipeline (the very
  instruments, values and attributes, captured once) replayed on the same MeterProvider, inside a
  sampled span context as ragtrace records them (so exemplar sampling costs the same).

Whatever ragtrace's code does, its content-on row can't go below the replay, nor (for the same
export) much below the hand-computed row; and turning metrics on can't cost less than the metric
replay's extra over the span replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import peer_workload as w

#: the SDK's synchronous instruments and the method that takes a value
_RECORDING = (("Histogram", "record"), ("Counter", "add"), ("UpDownCounter", "add"), ("Gauge", "set"))


def capture_metric_records(pipeline: Callable[[str], Any]) -> list[tuple[Callable[..., Any], Any, dict[str, Any]]]:
    """Every (bound record/add method, value, attributes) that one run of ``pipeline`` makes."""
    from opentelemetry.sdk.metrics._internal import instrument as sdk

    records: list[tuple[Callable[..., Any], Any, dict[str, Any]]] = []
    saved = []
    for class_name, method in _RECORDING:
        cls = getattr(sdk, class_name, None)
        if cls is None:
            continue
        original = getattr(cls, method)
        saved.append((cls, method, original))

        def spy(self: Any, amount: Any, attributes: Any = None, context: Any = None, *, _original: Any = original) -> Any:
            records.append((_original.__get__(self), amount, dict(attributes or {})))
            return _original(self, amount, attributes, context)

        setattr(cls, method, spy)
    try:
        pipeline(w.QUERY)
    finally:
        for cls, method, original in saved:
            setattr(cls, method, original)
    return records


def span_replay(provider: Any, exporter: Any, pipeline: Callable[[str], Any], metrics: bool = False) -> Callable[[str], Any]:
    """Replay the spans (and with ``metrics``, the metric records) of one run of ``pipeline``."""
    import bench_overhead
    from opentelemetry import trace

    records = capture_metric_records(pipeline) if metrics else []
    if not metrics:
        pipeline(w.QUERY)
    provider.force_flush()
    plan = bench_overhead.plan_from(exporter.get_finished_spans())
    exporter.clear()
    tracer = provider.get_tracer("handwritten")
    if not records:
        return lambda query: bench_overhead.handwritten(tracer, plan)
    sampled = trace.NonRecordingSpan(
        trace.SpanContext(0x1F, 0x2F, is_remote=False, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    )

    def replay(query: str) -> None:
        bench_overhead.handwritten(tracer, plan)
        with trace.use_span(sampled):
            for record, amount, attributes in records:
                record(amount, attributes)

    return replay


def hand_computed(provider: Any, exporter: Any, pipeline: Callable[[str], Any], content: bool) -> Callable[[str], Any]:
    """``handwritten_rag.run`` on the workload, after checking it exports what ``pipeline`` does."""
    import bench_overhead
    import handwritten_rag

    tracer = provider.get_tracer("hand-computed")

    def run(query: str) -> str:
        vector = w.embed(query)
        docs = w.retrieve(query, vector)
        top = w.rerank(query, docs)
        handwritten_rag.run(tracer, query, docs, top, w.ANSWER, vector, content=content)
        return w.ANSWER

    pipeline(w.QUERY)
    provider.force_flush()
    expected = bench_overhead.canonical(exporter.get_finished_spans())
    exporter.clear()
    run(w.QUERY)
    provider.force_flush()
    got = bench_overhead.canonical(exporter.get_finished_spans())
    exporter.clear()
    if got != expected:
        different = [f"{a[0]}: {a[3][:200]} != {b[3][:200]}" for a, b in zip(expected, got) if a != b]
        raise SystemExit("bench/handwritten_rag.py no longer exports what ragtrace does on the peer workload:\n" + "\n".join(different))
    return run


def summary(us: Callable[[str], float | None], ratio: Callable[[str], float | None]) -> list[str]:
    """ragtrace's rows against the floors, as a Markdown table (``us``/``ratio``: a variant's median
    µs and × hand-written OTel, None when it did not run)."""

    def divide(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    def extra(with_metrics: float | None, without: float | None, base: float | None) -> float | None:
        return (with_metrics - without) / base if with_metrics is not None and without is not None and base else None

    full, replay = us("ragtrace-full"), us("otel-replay")
    rows = [
        ("content on, × hand-written OTel", ratio("ragtrace-full"), ratio("hand-computed"), ratio("otel-replay"), ratio("traceloop")),
        ("redact ÷ content on", divide(us("ragtrace-redact"), full), divide(us("hand-computed-redact"), us("hand-computed")),
         divide(us("otel-replay-redact"), replay), None),
        ("metrics on: the extra ÷ ragtrace content on", extra(us("ragtrace-metrics"), full, full), None,
         extra(us("otel-replay-metrics"), replay, full), None),
    ]
    lines = ["| measure | ragtrace | the same spans computed by hand | SDK replay (nothing computed) | Traceloop |", "|---|---:|---:|---:|---:|"]
    for label, *cells in rows:
        lines.append(f"| {label} | " + " | ".join("–" if c is None else f"{c:.2f}" for c in cells) + " |")
    return lines
