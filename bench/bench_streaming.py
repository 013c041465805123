"""Streaming latency: what timing each chunk costs (time to first chunk, time per output chunk).

One run, the same stream of ``CHUNKS`` text pieces read five ways, interleaved over ``REPEATS``
rounds: ``bare`` (the generator alone), then ``Generate.stream`` inside a pipeline with the
per-chunk timing off (``item_arrived`` a no-op: no latency figures) and on (as shipped), each with
traces only and with traces plus a real MeterProvider (in-memory reader). With traces only, the
timing is what the app pays while it reads: a clock read and an append per chunk. With metrics,
the close also records one ``time_per_output_chunk`` value per chunk after the first, as the
conventions define it; that is the SDK's ``Histogram.record``, timed alone here too. Figures are
medians of per-round differences per chunk, and timed/untimed ratios of whole streams, in the
calling thread's CPU time (``time.thread_time``).
Target: the timing adds under 1 us per chunk while the app reads (traces only).

    python bench/bench_streaming.py

Exit status 1 when the target is missed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gc  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

import ragtrace  # noqa: E402
from ragtrace._internal.stages.generation import Generate  # noqa: E402

TARGET_US = 1.0
CLOCK = time.thread_time
CHUNKS = 400  # pieces per stream
STREAMS = 20  # streams per timed loop
REPEATS = 15
PIECES = [f"tok{i} " for i in range(CHUNKS)]
SHIPPED = Generate.item_arrived


def pieces() -> Iterator[str]:
    yield from PIECES


def bare() -> None:
    for _ in range(STREAMS):
        for _ in pieces():
            pass


def traced() -> None:
    for _ in range(STREAMS):
        with ragtrace.rag_pipeline("bench"):
            with ragtrace.generate(model="m") as g:
                for _ in g.stream(pieces()):
                    pass


def untimed() -> None:
    Generate.item_arrived = lambda self: None  # type: ignore[method-assign]
    try:
        traced()
    finally:
        Generate.item_arrived = SHIPPED  # type: ignore[method-assign]


def seconds(run: Callable[[], None]) -> float:
    gc.collect()
    gc.disable()
    try:
        started = CLOCK()
        run()
        return CLOCK() - started
    finally:
        gc.enable()


def sdk_record_us() -> float:
    """The SDK's cost of one histogram value with ragtrace's labels, for comparison."""
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("bench")
    histogram = meter.create_histogram("bench.seconds", unit="s")
    labels = {"gen_ai.operation.name": "chat", "rag.stage": "generate", "gen_ai.request.model": "m", "gen_ai.workflow.name": "bench"}
    number = STREAMS * CHUNKS
    started = CLOCK()
    for _ in range(number):
        histogram.record(0.01, labels)
    return (CLOCK() - started) / number * 1e6


def main() -> int:
    reader = InMemoryMetricReader()
    tracer_provider, meter_provider = TracerProvider(), MeterProvider(metric_readers=[reader])
    traces_only = lambda: ragtrace.configure(tracer_provider=tracer_provider)  # noqa: E731
    with_metrics = lambda: ragtrace.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)  # noqa: E731
    variants: dict[str, tuple[Callable[[], object], Callable[[], None]]] = {
        "bare": (traces_only, bare),
        "traces, timing off": (traces_only, untimed),
        "traces, timing on": (traces_only, traced),
        "traces+metrics, timing off": (with_metrics, untimed),
        "traces+metrics, timing on": (with_metrics, traced),
    }
    for setup, run in variants.values():  # warm up
        setup()
        run()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(REPEATS):
        order = list(variants.items())
        for name, (setup, run) in order if round_ % 2 == 0 else reversed(order):
            setup()
            times[name].append(seconds(run))
    per_chunk = 1e6 / (STREAMS * CHUNKS)

    def added(on: str, off: str) -> tuple[float, float]:
        pairs = list(zip(times[on], times[off]))
        return statistics.median(a - b for a, b in pairs) * per_chunk, statistics.median(a / b for a, b in pairs)

    print(f"{CHUNKS} chunks per stream, {STREAMS} streams per loop, {REPEATS} interleaved rounds (thread CPU time)")
    for name in variants:
        print(f"  {name:<40} {statistics.median(times[name]) * per_chunk:8.3f} us per chunk")
    inline, inline_ratio = added("traces, timing on", "traces, timing off")
    metrics_cost, metrics_ratio = added("traces+metrics, timing on", "traces+metrics, timing off")
    print(f"  {'timing, traces only (while the app reads)':<40} {inline:8.3f} us per chunk  ({inline_ratio:.3f}x a stream)   target < {TARGET_US} us")
    print(f"  {'timing, with metrics (incl. close)':<40} {metrics_cost:8.3f} us per chunk  ({metrics_ratio:.3f}x a stream)")
    print(f"  {'the SDK: one Histogram.record':<40} {sdk_record_us():8.3f} us")
    found = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    if "gen_ai.client.operation.time_per_output_chunk" not in found:
        print("MISS: the timed streams recorded no time-per-chunk histogram")
        return 1
    if inline >= TARGET_US:
        print(f"MISS: the timing costs {inline:.3f} us per chunk while the app reads")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
