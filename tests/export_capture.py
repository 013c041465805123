"""Export one run of the benchmark pipeline or of an example under a frozen clock and counting ids,
so that two versions of ragtrace can be compared byte for byte (tests/test_export_identical.py).

    python tests/export_capture.py bench:full OUT.jsonl        # bench/bench_peers.py's pipeline, 3 times
    python tests/export_capture.py example:NAME OUT.jsonl [ARG...]   # examples/NAME.py ARG... jsonl:OUT.jsonl

It runs in a fresh interpreter because the clock must be frozen before the OTel SDK binds
``time.time_ns``: ``time.time_ns``, ``time.time``, ``time.perf_counter`` (and their ``_ns``
forms) return one fixed instant for the whole run, so every timestamp, duration and time to first
chunk is the same however many times ragtrace or the SDK reads the clock. ``time.monotonic`` is
left running (threads, sockets and the batch processor wait on it). Trace and span ids count up
from fixed values in the order the SDK asks for them. The hash key comes from the environment
(the test sets ``RAGTRACE_HASH_KEY``).
"""

from __future__ import annotations

import itertools
import runpy
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FROZEN_NS = 1_796_000_000_123_456_789  # 2026-12-01, an instant with every digit in use
FROZEN_PERF = 1000.25


def freeze() -> None:
    time.time_ns = lambda: FROZEN_NS
    time.time = lambda: FROZEN_NS / 1e9
    time.perf_counter = lambda: FROZEN_PERF
    time.perf_counter_ns = lambda: int(FROZEN_PERF * 1e9)

    from opentelemetry.sdk.trace import id_generator

    traces, spans = itertools.count(1), itertools.count(1)
    id_generator.RandomIdGenerator.generate_trace_id = lambda self: (0xAB << 120) | next(traces)  # type: ignore[method-assign]
    id_generator.RandomIdGenerator.generate_span_id = lambda self: (0xCD << 56) | next(spans)  # type: ignore[method-assign]


MODES = {"full": ("full", True), "redact": ("redact", True), "hash": ("hash", True), "no-oi": ("full", False)}


def bench(mode: str, out: str, batch: bool = False) -> None:
    """bench_peers' ragtrace pipeline, three times (the second and third run warm caches)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_peers import ragtrace_pipeline
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from peer_workload import QUERY

    import ragtrace
    from ragtrace._internal.core import guard
    from ragtrace.exporters import JsonLinesExporter

    guard.set_strict(True)  # an internal error fails the capture instead of hiding behind the guard
    capture_content, openinference = MODES[mode]
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    exporter = JsonLinesExporter(out)
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    ragtrace.configure(tracer_provider=provider, capture_content=capture_content, openinference=openinference)
    for _ in range(3):
        ragtrace_pipeline(QUERY)
    provider.shutdown()


def example(name: str, out: str, args: list[str]) -> None:
    script = ROOT / "examples" / f"{name}.py"
    sys.argv = [str(script), *args, f"jsonl:{out}"]
    sys.path.insert(0, str(script.parent))
    runpy.run_path(str(script), run_name="__main__")


def main() -> None:
    target, out, *args = sys.argv[1:]
    freeze()
    kind, _, name = target.partition(":")
    if kind == "bench":
        mode, _, processor = name.partition("+")
        bench(mode, out, batch=processor == "batch")
    elif kind == "example":
        example(name, out, args)
    else:
        raise SystemExit(f"unknown target {target!r}: bench:MODE[+batch] or example:NAME")


if __name__ == "__main__":
    main()
