"""Instrumentation overhead: ragtrace against hand-written OpenTelemetry producing the same spans.

Workload: a 6-span pipeline (root, embed, retrieve with 10 chunks, rerank to 5, assemble, generate
with citations), written with ragtrace's context managers the way the README shows.

Two baselines, both the same six spans written by hand with the OpenTelemetry SDK only:

- **replay ("SDK floor")**: names, kinds, parents, attributes (same keys, same values) and events
  *captured from what ragtrace emitted once* and replayed with ``tracer.start_as_current_span`` +
  ``span.set_attributes``. It precomputes everything ragtrace works out at run time (ids, offsets,
  JSON, figures, even the prompt the application needs anyway), so ragtrace / replay is ragtrace's
  whole cost on top of the SDK, an upper bound on its overhead. The verdict (PASS/MISS, exit
  status) is on this ratio.
- **hand-computed** (``bench/handwritten_rag.py``): what an engineer instrumenting this pipeline by
  hand would write: the prompt built from the reranked chunks, its offsets and token counts taken
  along the way, ids/scores/ranks, the documents JSON, OpenInference keys, dropped chunks, the
  answer's ``[n]`` citations, the figures and evaluation events, all computed at run time from the
  inputs, with no ragtrace code. ragtrace / hand-computed is what ragtrace costs over doing the same
  by hand; it is printed beside the verdict, for information.

The startup check proves each baseline exports spans identical to ragtrace's (``canonical``).

All three run on the same exporter, in-memory (``InMemorySpanExporter`` + ``SimpleSpanProcessor``)
and ``BatchSpanProcessor`` with an exporter that drops, for ``capture_content="full"`` and
``"redact"``. Runs are interleaved (within every repetition each side runs twice, in an order and
its mirror image, ABCCBA, with the starting side rotated between repetitions; all four cells in
every repetition) and each figure is the median over repetitions. Targets (issue #7): ragtrace /
hand-written (replay) <= 1.25x with content captured, <= 1.15x in redact mode.

    python bench/bench_overhead.py            # the table (about 40 s on 2 shared cores)
    python bench/bench_overhead.py --quick    # fewer repetitions
    python bench/bench_overhead.py --stages   # where the extra time goes, stage by stage (all three sides)
    python bench/bench_overhead.py --profile  # cProfile of the ragtrace side, ragtrace-owned costs
    python bench/bench_overhead.py --no-openinference  # the same without OpenInference attributes

Exit status 1 when a target is missed or the spans differ.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import handwritten_rag  # noqa: E402  (bench/, next to this script)
import ragtrace  # noqa: E402
from ragtrace._internal.setup import config as rt_config  # noqa: E402
from ragtrace._internal.core import guard as rt_guard  # noqa: E402

TARGETS = {"full": 1.25, "redact": 1.15}  # on ragtrace / replay
SIDES = {"ragtrace": "ragtrace", "replay": "replay (SDK floor)", "computed": "hand-computed"}

# --- the workload -----------------------------------------------------------------------------
QUERY = "How does the reranker decide which passages reach the prompt?"
_TOPICS = [
    "Dense retrieval embeds the query and every passage into the same vector space and ranks passages by cosine similarity.",
    "BM25 is a lexical ranking function that scores passages by term frequency and inverse document frequency.",
    "A cross-encoder reranker reads the query and a candidate passage together and outputs a relevance score.",
    "Chunking splits long documents into passages of a few hundred tokens with a small overlap between them.",
    "The context budget limits how many tokens of retrieved passages can be placed in the prompt.",
    "Citations in the answer refer to the bracketed labels that the prompt gives each passage.",
    "Hybrid search merges lexical and dense results with reciprocal rank fusion before reranking.",
    "Metadata filters restrict retrieval to documents of one product, language or access level.",
    "Caching embeddings of frequent queries saves a round trip to the embedding model.",
    "Evaluation compares retrieved passages with a golden set of relevant passages per question.",
]
DOCS: list[dict[str, Any]] = [
    {"id": f"kb-{i:03d}", "score": round(0.92 - 0.05 * i, 3), "content": text} for i, text in enumerate(_TOPICS)
]
RERANKED: list[dict[str, Any]] = [dict(DOCS[i], score=s) for i, s in ((2, 0.97), (0, 0.88), (5, 0.81), (1, 0.64), (6, 0.52))]
ANSWER = (
    "A cross-encoder reranker scores each candidate passage together with the query [1], and only the "
    "top passages fit the context budget after dense retrieval [2]. The answer then cites those labels [3]."
)
VECTOR = [0.01] * 384


def ragtrace_pipeline() -> Any:
    """The workload, instrumented with ragtrace."""
    with ragtrace.rag_pipeline("support-qa", query=QUERY, version="v2") as run:
        with ragtrace.embed(model="text-embedding-3-small", provider="openai") as e:
            e.record([VECTOR], input_tokens=12)
        with ragtrace.retrieve(QUERY, data_source="product-docs", top_k=10) as r:
            r.record(DOCS)
        with ragtrace.rerank(model="bge-reranker-v2", provider="local", top_n=5) as rr:
            rr.record(RERANKED)
        with ragtrace.assemble(max_tokens=3000) as ctx:
            for chunk in rr.chunks:
                ctx.add(chunk)
            prompt = ctx.render(question=QUERY)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record(ANSWER)
    return run


# --- the hand-written baselines ----------------------------------------------------------------
def hand_computed(tracer: trace.Tracer, mode: str) -> Callable[..., Any]:
    """The hand-computed baseline (``handwritten_rag.run``) on the workload's inputs, for ``mode``:
    a call with no arguments (or ``tick=`` for the per-stage clock)."""
    return functools.partial(
        handwritten_rag.run, tracer, QUERY, DOCS, RERANKED, ANSWER, VECTOR, content=mode == "full", openinference=OPENINFERENCE
    )


@dataclass
class SpanPlan:
    """One span to replay: what the SDK needs, precomputed.

    ``refs`` are attributes whose value is the id of another span of the trace (e.g. the
    generation's ``rag.generation.context_span_id``): hand-written code would put the id of its
    own span there, so the replay does too, by span name.
    """

    name: str
    kind: trace.SpanKind
    attributes: dict[str, Any]
    refs: dict[str, str]  # attribute key -> name of the span whose id is the value
    events: list[tuple[str, dict[str, Any]]]
    children: list["SpanPlan"]

    def values(self, ids: dict[str, str]) -> dict[str, Any]:
        """The attributes to set, span-id references resolved against ``ids`` (name -> hex id)."""
        if not self.refs:
            return self.attributes
        return {**self.attributes, **{key: ids[name] for key, name in self.refs.items()}}


def _hex_ids(spans: Sequence[ReadableSpan]) -> dict[str, str]:
    return {format(s.context.span_id, "016x"): s.name for s in spans}


def plan_from(spans: Sequence[ReadableSpan]) -> SpanPlan:
    """The span tree ragtrace emitted, as a plan for the hand-written baseline."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)
    span_names = _hex_ids(spans)

    def build(span: ReadableSpan) -> SpanPlan:
        attributes = dict(span.attributes or {})
        refs = {k: span_names[v] for k, v in attributes.items() if isinstance(v, str) and v in span_names}
        return SpanPlan(
            name=span.name,
            kind=span.kind,
            attributes={k: v for k, v in attributes.items() if k not in refs},
            refs=refs,
            events=[(event.name, dict(event.attributes or {})) for event in span.events],
            children=[build(child) for child in by_parent.get(span.context.span_id, [])],
        )

    (root,) = by_parent[None]
    return build(root)


def handwritten(tracer: trace.Tracer, plan: SpanPlan, ids: dict[str, str] | None = None) -> None:
    """The baseline: the plan's spans with the SDK alone, nested as current spans."""
    with tracer.start_as_current_span(plan.name, kind=plan.kind) as span:
        if ids is None:
            ids = {}
        ids[plan.name] = format(span.get_span_context().span_id, "016x")
        span.set_attributes(plan.values(ids))
        for child in plan.children:
            handwritten(tracer, child, ids)
        for name, attributes in plan.events:
            span.add_event(name, attributes)


def canonical(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """Names, kinds, parent names, attributes and events, for comparing the two sides.

    A value that is the id of a span of the same trace reads as ``<span id of NAME>``."""
    names = {s.context.span_id: s.name for s in spans}
    span_names = _hex_ids(spans)

    def value(v: Any) -> Any:
        if isinstance(v, str) and v in span_names:
            return f"<span id of {span_names[v]}>"
        return list(v) if isinstance(v, (tuple, list)) else v

    return sorted(
        (
            s.name,
            s.kind.name,
            names.get(s.parent.span_id) if s.parent is not None else None,
            json.dumps({k: value(v) for k, v in sorted((s.attributes or {}).items())}, sort_keys=True, default=str),
            json.dumps([(e.name, {k: value(v) for k, v in sorted((e.attributes or {}).items())}) for e in s.events], default=str),
        )
        for s in spans
    )


# --- exporters ------------------------------------------------------------------------------
class DropExporter(SpanExporter):
    """Accepts every batch and keeps nothing: the cost of batching without any transport."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@dataclass
class Setup:
    label: str
    provider: TracerProvider
    settle: Callable[[], None]  # outside the timed region: empty the exporter / drain the queue


def setups() -> list[Setup]:
    memory_exporter = InMemorySpanExporter()
    memory = TracerProvider()
    memory.add_span_processor(SimpleSpanProcessor(memory_exporter))
    batch = TracerProvider()
    batch.add_span_processor(BatchSpanProcessor(DropExporter()))
    return [
        Setup("in-memory (Simple)", memory, memory_exporter.clear),
        Setup("batch (drop)", batch, lambda: batch.force_flush()),
    ]


OPENINFERENCE = True  # --no-openinference: ragtrace's OpenInference attributes off (both sides lose them)


def use(provider: TracerProvider, mode: str) -> None:
    rt_config.configure(tracer_provider=provider, capture_content=mode, openinference=OPENINFERENCE, hash_key=handwritten_rag.HASH_KEY)


def capture_plan(mode: str) -> tuple[SpanPlan, list[tuple[Any, ...]]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    use(provider, mode)
    ragtrace_pipeline()
    spans = exporter.get_finished_spans()
    if len(spans) != 6:
        raise SystemExit(f"expected 6 spans from the workload, got {[s.name for s in spans]}")
    return plan_from(spans), canonical(spans)


def check_identical(mode: str, plan: SpanPlan, expected: list[tuple[Any, ...]]) -> dict[str, bool]:
    """Per baseline ("replay", "computed"): does it export exactly the spans ragtrace exported?
    Both also require ragtrace to be deterministic: a second run must emit the same spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("handwritten")
    got: dict[str, list[tuple[Any, ...]]] = {}
    for side, run in (("replay", lambda: handwritten(tracer, plan)), ("computed", hand_computed(tracer, mode))):
        run()
        got[side] = canonical(exporter.get_finished_spans())
        exporter.clear()
    use(provider, mode)
    ragtrace_pipeline()
    again = canonical(exporter.get_finished_spans())
    if again != expected:
        print(f"  ragtrace is not deterministic ({mode}): a second run differs from the first")
        show_differences(again, expected)
    for side, spans in got.items():
        if spans != expected:
            print(f"  {SIDES[side]} differs from ragtrace ({mode}):")
            show_differences(spans, expected)
    return {side: again == expected and spans == expected for side, spans in got.items()}


def show_differences(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> None:
    """What a baseline got wrong, span by span (attribute keys missing, extra or different)."""
    fields = ("name", "kind", "parent", "attributes", "events")
    for mine, theirs in zip(got, expected):
        for field, a, b in zip(fields, mine, theirs):
            if a == b:
                continue
            if field != "attributes":
                print(f"    {mine[0]}: {field} {a} != {b}")
                continue
            a, b = json.loads(a), json.loads(b)
            for key in sorted(a.keys() | b.keys()):
                if a.get(key, "<absent>") != b.get(key, "<absent>"):
                    print(f"    {mine[0]}: {key}: {a.get(key, '<absent>')!r:.100} != ragtrace {b.get(key, '<absent>')!r:.100}")
    if len(got) != len(expected):
        print(f"    {len(got)} spans != ragtrace {len(expected)}")


# --- timing ---------------------------------------------------------------------------------
def timed(fn: Callable[[], Any], n: int) -> float:
    """CPU seconds of this thread per call over ``n`` calls (gc stays on: both sides pay for their
    garbage). Thread CPU time leaves out time spent descheduled on the shared machine; the batch
    processor's export thread does the same work for both sides and isn't counted for either."""
    start = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - start) / n


def measure(reps: int, n: int) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per cell (exporter, mode): seconds per pipeline of each side and the two ratios, one value
    per repetition. Within a repetition each side runs twice, in a rotated order and its mirror
    image (rep 0: ragtrace replay computed | computed replay ragtrace; rep 1 starts with replay...),
    so drift over the repetition and position in it fall on every side alike."""
    cells: dict[tuple[str, str], dict[str, list[float]]] = {}
    plans = {mode: capture_plan(mode)[0] for mode in TARGETS}
    runs = setups()
    for mode in TARGETS:
        for setup in runs:
            cells[(setup.label, mode)] = {side: [] for side in (*SIDES, "ratio", "ratio_computed")}
    tracers = {setup.label: setup.provider.get_tracer("handwritten") for setup in runs}

    def sides(setup: Setup, mode: str) -> list[tuple[str, Callable[[], Any]]]:
        tracer, plan = tracers[setup.label], plans[mode]
        return [
            ("ragtrace", ragtrace_pipeline),
            ("replay", lambda: handwritten(tracer, plan)),
            ("computed", hand_computed(tracer, mode)),
        ]

    # warm-up: caches, tracers, first-call imports
    for setup in runs:
        for mode in TARGETS:
            use(setup.provider, mode)
            for _, fn in sides(setup, mode):
                timed(fn, 50)
            setup.settle()
    for rep in range(reps):
        for setup in runs:
            for mode in TARGETS:
                use(setup.provider, mode)
                order = sides(setup, mode)
                shift = rep % len(order)
                order = order[shift:] + order[:shift]
                got: dict[str, list[float]] = {side: [] for side in SIDES}
                for side, fn in order + order[::-1]:
                    setup.settle()
                    gc.collect()
                    got[side].append(timed(fn, n))
                cell = cells[(setup.label, mode)]
                for side in SIDES:
                    cell[side].append(statistics.fmean(got[side]))
                cell["ratio"].append(cell["ragtrace"][-1] / cell["replay"][-1])
                cell["ratio_computed"].append(cell["ragtrace"][-1] / cell["computed"][-1])
        for setup in runs:
            setup.settle()
    for setup in runs:
        setup.provider.shutdown()
    return cells


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def report(cells: dict[tuple[str, str], dict[str, list[float]]], reps: int, n: int) -> bool:
    print(
        f"ragtrace vs hand-written OpenTelemetry, 6-span pipeline, medians of {reps} interleaved repetitions"
        f" x 2 x {n} pipelines per side, thread CPU time"
    )
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs (shared), opentelemetry-sdk {_sdk_version()}")
    print("replay = the SDK floor (attributes precomputed from ragtrace's spans); the verdict is on ragtrace / replay.")
    print("hand-computed = bench/handwritten_rag.py, attributes computed at run time; its ratio is for information.")
    header = (
        f"{'exporter':<20} {'content':<7} {'ragtrace us':>12} {'replay us':>10} {'hand-comp us':>13}"
        f" {'vs replay':>10} {'IQR':>11} {'target':>7}  result  {'vs hand-comp':>12} {'IQR':>11}"
    )
    print(header)
    print("-" * len(header))
    ok = True
    for (label, mode), cell in cells.items():
        ratio, computed_ratio = statistics.median(cell["ratio"]), statistics.median(cell["ratio_computed"])
        q1, q3 = _quartiles(cell["ratio"])
        c1, c3 = _quartiles(cell["ratio_computed"])
        target = TARGETS[mode]
        passed = ratio <= target
        ok &= passed
        us = {side: statistics.median(cell[side]) * 1e6 for side in SIDES}
        print(
            f"{label:<20} {mode:<7} {us['ragtrace']:>12.1f} {us['replay']:>10.1f} {us['computed']:>13.1f}"
            f" {ratio:>9.2f}x {q1:>5.2f}-{q3:<5.2f} {'<=' + format(target, '.2f'):>7}  {'PASS' if passed else 'MISS':<6}"
            f" {computed_ratio:>11.2f}x {c1:>5.2f}-{c3:.2f}"
        )
    return ok


def _sdk_version() -> str:
    try:
        from importlib.metadata import version

        return version("opentelemetry-sdk")
    except Exception:  # noqa: BLE001
        return "?"


# --- profiling --------------------------------------------------------------------------------
def profile(mode: str, n: int) -> None:
    """cProfile of the ragtrace side on the in-memory exporter; the ragtrace-owned functions."""
    import cProfile
    import pstats

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    use(provider, mode)
    timed(ragtrace_pipeline, 100)
    exporter.clear()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        ragtrace_pipeline()
    profiler.disable()
    stats = pstats.Stats(profiler)
    print(f"\ncProfile, capture_content={mode!r}, {n} pipelines: ragtrace-owned functions by own time (tottime)")
    root = str(Path(ragtrace.__file__).resolve().parent)
    rows = []
    total_tt = 0.0
    for (filename, line, func), (cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        total_tt += tt
        if filename.startswith(root):
            rows.append((tt, ct, nc, f"{Path(filename).relative_to(Path(root).parent)}:{line}:{func}"))
    own = sum(r[0] for r in rows)
    print(f"  total {total_tt / n * 1e6:.1f} us/pipeline under the profiler; ragtrace-owned tottime {own / n * 1e6:.1f} us/pipeline")
    print(f"  {'tottime us/pipe':>15} {'cumtime us/pipe':>15} {'calls/pipe':>10}  function")
    for tt, ct, nc, where in sorted(rows, reverse=True)[:25]:
        print(f"  {tt / n * 1e6:>15.2f} {ct / n * 1e6:>15.2f} {nc / n:>10.1f}  {where}")
    print("\n  by cumulative time (ragtrace-owned, incl. SDK calls they make):")
    for tt, ct, nc, where in sorted(rows, key=lambda r: -r[1])[:25]:
        print(f"  {tt / n * 1e6:>15.2f} {ct / n * 1e6:>15.2f} {nc / n:>10.1f}  {where}")
    provider.shutdown()


# --- per-stage breakdown ----------------------------------------------------------------------
STAGES = ("root open", "embed", "retrieve", "rerank", "assemble", "generate", "root close")


def ragtrace_stage_times(out: list[list[float]]) -> None:
    """The workload with a clock read between stages (thread CPU time, appended to ``out``)."""
    clock = time.thread_time
    marks = [clock()]
    with ragtrace.rag_pipeline("support-qa", query=QUERY, version="v2"):
        marks.append(clock())
        with ragtrace.embed(model="text-embedding-3-small", provider="openai") as e:
            e.record([VECTOR], input_tokens=12)
        marks.append(clock())
        with ragtrace.retrieve(QUERY, data_source="product-docs", top_k=10) as r:
            r.record(DOCS)
        marks.append(clock())
        with ragtrace.rerank(model="bge-reranker-v2", provider="local", top_n=5) as rr:
            rr.record(RERANKED)
        marks.append(clock())
        with ragtrace.assemble(max_tokens=3000) as ctx:
            for chunk in rr.chunks:
                ctx.add(chunk)
            prompt = ctx.render(question=QUERY)
        marks.append(clock())
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record(ANSWER)
        marks.append(clock())
    marks.append(clock())
    for index, (a, b) in enumerate(zip(marks, marks[1:])):
        out[index].append(b - a)


def handwritten_stage_times(tracer: trace.Tracer, plan: SpanPlan, out: list[list[float]]) -> None:
    clock = time.thread_time
    marks = [clock()]
    with tracer.start_as_current_span(plan.name, kind=plan.kind) as span:
        ids = {plan.name: format(span.get_span_context().span_id, "016x")}
        span.set_attributes(plan.values(ids))
        marks.append(clock())
        for child in plan.children:
            handwritten(tracer, child, ids)
            marks.append(clock())
        for name, attributes in plan.events:
            span.add_event(name, attributes)
    marks.append(clock())
    for index, (a, b) in enumerate(zip(marks, marks[1:])):
        out[index].append(b - a)


def computed_stage_times(run: Callable[..., Any], out: list[list[float]]) -> None:
    """The hand-computed baseline with a clock read between stages (its ``tick`` hook)."""
    clock = time.thread_time
    marks = [clock()]
    run(tick=lambda: marks.append(clock()))
    marks.append(clock())
    for index, (a, b) in enumerate(zip(marks, marks[1:])):
        out[index].append(b - a)


def stages(mode: str, reps: int, n: int) -> None:
    """Where ragtrace's extra time goes: each stage against its replayed span (the SDK floor) and
    its hand-computed span (in-memory)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    plan = capture_plan(mode)[0]
    use(provider, mode)
    tracer = provider.get_tracer("handwritten")
    computed = hand_computed(tracer, mode)
    mine: list[list[float]] = [[] for _ in STAGES]
    hand: list[list[float]] = [[] for _ in STAGES]
    comp: list[list[float]] = [[] for _ in STAGES]
    for rep in range(reps):
        for _ in range(n):
            ragtrace_stage_times(mine)
        exporter.clear()
        for _ in range(n):
            handwritten_stage_times(tracer, plan, hand)
        exporter.clear()
        for _ in range(n):
            computed_stage_times(computed, comp)
        exporter.clear()
    print(f"\nper stage, capture_content={mode!r}, in-memory exporter, medians of {reps * n} pipelines (thread CPU us)")
    print(f"  {'stage':<12} {'ragtrace':>9} {'replay':>7} {'extra':>7} {'hand-comp':>10} {'extra':>7}")
    total = total_computed = 0.0
    for index, label in enumerate(STAGES):
        r, h, c = (statistics.median(side[index]) * 1e6 for side in (mine, hand, comp))
        total += r - h
        total_computed += r - c
        print(f"  {label:<12} {r:>9.1f} {h:>7.1f} {r - h:>7.1f} {c:>10.1f} {r - c:>7.1f}")
    print(f"  {'sum':<12} {'':>9} {'':>7} {total:>7.1f} {'':>10} {total_computed:>7.1f}")
    empty_mine, empty_hand = empty_stage(exporter, tracer, reps, n)
    print(f"  {'empty embed':<12} {empty_mine:>9.1f} {empty_hand:>7.1f} {empty_mine - empty_hand:>7.1f}   (a stage with nothing recorded: the fixed cost)")
    provider.shutdown()


def empty_stage(exporter: InMemorySpanExporter, tracer: trace.Tracer, reps: int, n: int) -> tuple[float, float]:
    """Median us of ``with ragtrace.embed(...): pass`` inside a pipeline, and of its hand-written span."""
    clock = time.thread_time
    with ragtrace.rag_pipeline("empty"):
        with ragtrace.embed(model="m", provider="p"):
            pass
        (span,) = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("rag.stage") == "embed"]
        name, kind, attributes = span.name, span.kind, dict(span.attributes or {})
        exporter.clear()
        mine: list[float] = []
        hand: list[float] = []
        for _ in range(reps):
            start = clock()
            for _ in range(n):
                with ragtrace.embed(model="m", provider="p"):
                    pass
            mine.append((clock() - start) / n)
            start = clock()
            for _ in range(n):
                with tracer.start_as_current_span(name, kind=kind) as hand_span:
                    hand_span.set_attributes(attributes)
            hand.append((clock() - start) / n)
            exporter.clear()
    exporter.clear()
    return statistics.median(mine) * 1e6, statistics.median(hand) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--n", type=int, default=None, help="pipelines per timed block")
    parser.add_argument("--profile", action="store_true", help="cProfile the ragtrace side instead")
    parser.add_argument("--stages", action="store_true", help="per-stage extra time instead")
    parser.add_argument("--no-openinference", action="store_true", help="configure(openinference=False) (both sides lose those attributes)")
    args = parser.parse_args()
    global OPENINFERENCE
    OPENINFERENCE = not args.no_openinference
    rt_guard.set_strict(True)  # a ragtrace bug must fail the benchmark, not hide behind the guard
    if args.stages:
        for mode in TARGETS:
            stages(mode, args.reps or 30, args.n or 50)
        return 0
    if args.profile:
        for mode in TARGETS:
            profile(mode, args.n or 3000)
        return 0
    identical = True
    for mode in TARGETS:
        plan, expected = capture_plan(mode)
        same = check_identical(mode, plan, expected)
        identical &= all(same.values())
        attrs = sum(len(p.attributes) + len(p.refs) for p in _walk(plan))
        events = sum(len(p.events) for p in _walk(plan))
        for side, yes in same.items():
            print(f"spans identical ({mode}, {SIDES[side]} vs ragtrace): {'yes' if yes else 'NO'}  (6 spans, {attrs} attributes, {events} events)")
    reps = args.reps or (5 if args.quick else 21)
    n = args.n or (100 if args.quick else 150)
    cells = measure(reps, n)
    ok = report(cells, reps, n)
    return 0 if ok and identical else 1


def _walk(plan: SpanPlan) -> list[SpanPlan]:
    return [plan, *(p for child in plan.children for p in _walk(child))]


if __name__ == "__main__":
    sys.exit(main())
