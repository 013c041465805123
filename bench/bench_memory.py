"""Memory per pipeline: bytes held per in-flight pipeline, and nothing left once pipelines end.

``N`` pipelines (the 6-span workload of ``bench_overhead.py``: 10 chunks retrieved, 5 reranked
and placed) are ``async with`` coroutines that all stop just before the generation, awaiting one
gate, so ``N`` pipelines are open at once. They are stepped the way asyncio steps its tasks, each
in its own copy of the contextvars context, but without an event loop (see ``run``). ``tracemalloc`` measures the memory allocated since just before
the tasks started, while they all wait. The same is measured for two references with the
identical task structure: *bare* (no tracing; the prompt built by hand) and *hand-written
OpenTelemetry* (the same spans and attributes replayed with the SDK, as in ``bench_overhead.py``).
Spans go to a ``SimpleSpanProcessor`` with an exporter that drops them, so no exporter keeps
ended spans; the live-span column counts SDK spans still reachable while the pipelines wait.

Reported per pipeline: in-flight bytes of each variant, ragtrace minus bare (everything ragtrace
adds, SDK spans included) and ragtrace minus hand-written (what ragtrace holds beyond the spans an
SDK user would hold). After the pipelines end: live ``PipelineState`` objects and stage handles
(``gc``; must be 0), trace-keyed states (must be 0), and the tracemalloc delta of further
identical rounds, each and in total (must be under 1 byte per pipeline, i.e. nothing that grows
with N). Every variant first runs once untraced and once traced at full size, so caches, freelists
and containers that keep their capacity are in their steady state before anything is measured.
Issue #7 sets no number for the in-flight figure; "zero retained after it ends" is the target.
Last, a stream: ``--stream-rows`` rows (default a million) returned as a generator expression by a
decorated retriever and read once by the app; the tracemalloc peak while it reads, traced minus
untraced, must stay under 64 MiB (issue #26: the proxy keeps ``max_retrieved`` rows, not all).

    python bench/bench_memory.py [--n 1000] [--stream-rows 1000000]

Exit status 1 when an after-end check fails.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextvars  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
import tracemalloc  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Callable, Coroutine  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

import ragtrace  # noqa: E402
from bench_overhead import ANSWER, DOCS, QUERY, RERANKED, VECTOR, DropExporter, SpanPlan, capture_plan, use  # noqa: E402
from ragtrace._internal.core import guard as rt_guard  # noqa: E402
from ragtrace._internal.stages import state as rt_state  # noqa: E402
from ragtrace._internal.stages.stage import Stage  # noqa: E402

RETAINED_LIMIT = 1.0  # bytes per pipeline still allocated after all pipelines ended
ROUNDS = 3  # further rounds of N pipelines for the retention and growth checks


class Gate:
    """What every pipeline awaits before its generation: suspends the coroutine once."""

    def __await__(self) -> Any:
        yield self


# --- the three variants of one pipeline -------------------------------------------------------
async def ragtrace_task(gate: Gate) -> None:
    async with ragtrace.rag_pipeline("support-qa", query=QUERY, version="v2"):
        async with ragtrace.embed(model="text-embedding-3-small", provider="openai") as e:
            e.record([VECTOR], input_tokens=12)
        async with ragtrace.retrieve(QUERY, data_source="product-docs", top_k=10) as r:
            r.record(DOCS)
        async with ragtrace.rerank(model="bge-reranker-v2", provider="local", top_n=5) as rr:
            rr.record(RERANKED)
        async with ragtrace.assemble(max_tokens=3000) as ctx:
            for chunk in rr.chunks:
                ctx.add(chunk)
            prompt = ctx.render(question=QUERY)
        await gate
        async with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record(ANSWER)


def _bare_prompt() -> str:
    sources = "\n\n".join(f"[{i}] {d['content']}" for i, d in enumerate(RERANKED, start=1))
    return f"Answer the question using only the sources below.\n\nSources:\n{sources}\n\nQuestion: {QUERY}\nAnswer:"


async def bare_task(gate: Gate) -> None:
    prompt = _bare_prompt()
    await gate
    assert prompt


def _replay(tracer: trace.Tracer, plan: SpanPlan, ids: dict[str, str]) -> None:
    with tracer.start_as_current_span(plan.name, kind=plan.kind) as span:
        ids[plan.name] = format(span.get_span_context().span_id, "016x")
        span.set_attributes(plan.values(ids))
        for name, attributes in plan.events:
            span.add_event(name, attributes)


async def hand_task(gate: Gate, tracer: trace.Tracer, plan: SpanPlan) -> None:
    with tracer.start_as_current_span(plan.name, kind=plan.kind) as root:
        ids = {plan.name: format(root.get_span_context().span_id, "016x")}
        *before, last = plan.children
        for child in before:
            _replay(tracer, child, ids)
        prompt = _bare_prompt()
        await gate
        assert prompt
        _replay(tracer, last, ids)
        root.set_attributes(plan.values(ids))
        for name, attributes in plan.events:
            root.add_event(name, attributes)


# --- measuring --------------------------------------------------------------------------------
@dataclass
class Result:
    inflight: int
    after: int
    live_states: int
    live_stages: int
    live_states_inflight: int
    live_spans_inflight: int
    breakdown: Counter[str]


def _live() -> tuple[int, int, int]:
    """Live PipelineState objects, ragtrace stage handles and SDK spans (after a full gc)."""
    gc.collect()
    states = stages = spans = 0
    for obj in gc.get_objects():
        if isinstance(obj, rt_state.PipelineState):
            states += 1
        elif isinstance(obj, Stage):
            stages += 1
        elif isinstance(obj, ReadableSpan):
            spans += 1
    return states, stages, spans


def _owner(filename: str) -> str:
    if "/ragtrace/" in filename and "/bench/" not in filename:
        return "ragtrace"
    if "opentelemetry" in filename:
        return "opentelemetry"
    if "/bench/" in filename:
        return "bench (the task itself)"
    return "other"


def run(n: int, task: Callable[[Gate], Coroutine[Any, Any, None]], breakdown: bool) -> Result:
    """N pipelines in flight at once, then all finished; memory and live objects at both points.

    Each coroutine is stepped the way an asyncio task steps it: ``send()`` inside its own copy of
    the context, so contextvars (ragtrace's pipeline state, the OpenTelemetry context) are per
    pipeline. No event loop, so asyncio's own bookkeeping (its set of all tasks, whose table
    grows and shrinks on its own schedule) doesn't blur a per-pipeline figure of a few bytes.
    """
    gc.collect()
    before_snapshot = tracemalloc.take_snapshot() if breakdown else None
    base = tracemalloc.get_traced_memory()[0]
    gate = Gate()
    running = [(task(gate), contextvars.copy_context()) for _ in range(n)]
    for coroutine, context in running:
        if context.run(coroutine.send, None) is not gate:
            raise AssertionError("the pipeline should stop at the gate")
    gc.collect()
    inflight = tracemalloc.get_traced_memory()[0] - base
    owners: Counter[str] = Counter()
    if breakdown and before_snapshot is not None:
        snapshot = tracemalloc.take_snapshot()
        for stat in snapshot.compare_to(before_snapshot, "filename"):
            owners[_owner(stat.traceback[0].filename)] += stat.size_diff
        del snapshot
    del before_snapshot
    live_inflight, _, spans_inflight = _live() if breakdown else (0, 0, 0)
    for coroutine, context in running:
        try:
            context.run(coroutine.send, None)
        except StopIteration:
            continue
        raise AssertionError("the pipeline should finish after the gate")
    del running, coroutine, context, gate
    states, stages, _ = _live() if breakdown else (0, 0, 0)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] - base
    return Result(inflight, after, states, stages, live_inflight, spans_inflight, owners)


STREAM_LIMIT_MIB = 64.0  # peak added by tracing while the app reads a streamed retrieval


def streamed_peak(rows: int, traced: bool) -> int:
    """The tracemalloc peak while the app reads ``rows`` rows from a decorated retriever's generator
    expression, each row dropped once read: the rows ragtrace keeps are all that stays."""

    @ragtrace.retriever
    def search(query: str) -> Any:
        return ({"id": f"row-{i}", "content": f"text of row {i}", "score": 1.0 / (i + 1)} for i in range(rows))

    call = search if traced else search.__wrapped__
    gc.collect()
    tracemalloc.start(1)
    for _ in call(QUERY):
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="pipelines in flight at once")
    parser.add_argument("--stream-rows", type=int, default=1_000_000, help="rows of the streamed retrieval (0: skip it)")
    args = parser.parse_args()
    n = args.n
    rt_guard.set_strict(True)
    plan = capture_plan("full")[0]
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(DropExporter()))
    use(provider, "full")
    tracer = provider.get_tracer("handwritten")
    variants: dict[str, Callable[[Gate], Coroutine[Any, Any, None]]] = {
        "bare (no tracing)": bare_task,
        "hand-written OpenTelemetry": lambda gate: hand_task(gate, tracer, plan),
        "ragtrace": ragtrace_task,
    }

    # warm-up at full size, untraced: caches and lazily built SDK parts reach their steady state
    for task in variants.values():
        run(n, task, False)
    tracemalloc.start(1)
    results: dict[str, Result] = {}
    for label, task in variants.items():
        run(n, task, False)  # and once traced: freelists then hold traced blocks (bounded, once)
        results[label] = run(n, task, breakdown=True)
    # anything kept per pipeline grows with every round: ROUNDS identical ragtrace rounds
    run(n, ragtrace_task, False)
    gc.collect()
    start_snapshot = tracemalloc.take_snapshot()
    start = tracemalloc.get_traced_memory()[0]
    afters = [run(n, ragtrace_task, False).after for _ in range(ROUNDS)]
    gc.collect()
    growth = tracemalloc.get_traced_memory()[0] - start
    grown = [
        f"{stat.size_diff:+} B {stat.count_diff:+} blocks  {stat.traceback[0].filename}:{stat.traceback[0].lineno}"
        for stat in tracemalloc.take_snapshot().compare_to(start_snapshot, "lineno")[:8]
        if stat.size_diff > 0
    ]
    del start_snapshot
    tracemalloc.stop()
    implicit = rt_state.implicit_count()
    stream = (streamed_peak(args.stream_rows, True) - streamed_peak(args.stream_rows, False)) / 2**20 if args.stream_rows else None
    provider.shutdown()

    bare, hand, mine = results["bare (no tracing)"], results["hand-written OpenTelemetry"], results["ragtrace"]
    print(f"{n} pipelines in flight at once (coroutines suspended before generate, each in its own context); tracemalloc")
    header = f"{'variant':<28} {'in flight B/pipeline':>21} {'live SDK spans/pipeline':>24}"
    print(header)
    print("-" * len(header))
    for label, result in results.items():
        print(f"{label:<28} {result.inflight / n:>21.0f} {result.live_spans_inflight / n:>24.1f}")
    print()
    print("ragtrace's in-flight bytes per pipeline by allocating package (snapshot diff):")
    for owner, size in mine.breakdown.most_common():
        print(f"  {owner:<28} {size / n:>9.0f}")

    print()
    header = f"{'figure':<66} {'value':>8} {'target':>7}  result"
    print(header)
    print("-" * len(header))
    rows: list[tuple[str, str, str, bool | None]] = [
        ("in flight: ragtrace - bare, bytes/pipeline (all it adds)", f"{(mine.inflight - bare.inflight) / n:.0f}", "-", None),
        ("in flight: ragtrace - hand-written OTel, bytes/pipeline", f"{(mine.inflight - hand.inflight) / n:.0f}", "-", None),
        ("in flight: live PipelineState objects", str(mine.live_states_inflight), f"={n}", mine.live_states_inflight == n),
        ("after end: live PipelineState objects", str(mine.live_states), "0", mine.live_states == 0),
        ("after end: live stage handles", str(mine.live_stages), "0", mine.live_stages == 0),
        ("after end: trace-keyed states held outside pipelines", str(implicit), "0", implicit == 0),
        (f"after end: tracemalloc delta, bytes/pipeline (worst of {ROUNDS} rounds)", f"{max(afters) / n:.2f}", f"<{RETAINED_LIMIT:g}", max(afters) / n < RETAINED_LIMIT),
        (f"growth over {ROUNDS} more rounds of {n}, bytes/pipeline", f"{growth / (ROUNDS * n):.2f}", f"<{RETAINED_LIMIT:g}", growth / (ROUNDS * n) < RETAINED_LIMIT),
    ]
    if stream is not None:
        rows.append((f"streamed retrieval, {args.stream_rows:,} rows: peak added, MiB", f"{stream:.1f}", f"<{STREAM_LIMIT_MIB:g}", stream < STREAM_LIMIT_MIB))
    ok = True
    for label, value, target, passed in rows:
        result = "info" if passed is None else ("PASS" if passed else "MISS")
        ok &= passed is not False
        print(f"{label:<66} {value:>8} {target:>7}  {result}")
    if growth / (ROUNDS * n) >= RETAINED_LIMIT:
        print("\nwhere the growth was allocated (largest first):")
        for line in grown:
            print("  " + line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
