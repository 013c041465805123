"""ragtrace against hand-written OpenTelemetry and the peers a user would pick instead, in one run.

The workload (``bench/peer_workload.py``): a root, then embed (16 floats) -> retrieve (the query,
10 chunks of 200 characters) -> rerank to 5 -> assemble with ragtrace's default template ->
generate a 300-character answer citing [1] and [3]. Each side instruments it its own way:

- **hand-written OTel (8 attrs/span)**: what a team adds by hand, the reference (1.00);
- **OTel replaying ragtrace's exact spans** (``bench_overhead.plan_from``): the SDK floor for
  ragtrace's attribute volume, for information; with it the other floors of ``peer_floors.py``
  (the same spans computed by hand, the redact replay, the metric records replayed);
- **ragtrace** with its context managers, content on (default), redact, ``openinference=False``;
- **peers**, each in its own venv under ``.venv-peers/`` (installed on first use, then reused):
  Traceloop ``@workflow``/``@task``, OpenInference's ``OITracer`` decorators, Langfuse ``@observe``,
  Logfire ``@instrument``, MLflow-tracing ``@trace``.

Every side exports through ``SimpleSpanProcessor`` into an ``InMemorySpanExporter``. Each variant
runs in its own process: 500 warm-up pipelines, then 7 repetitions of 2,000, ``gc.collect()`` before
each, the flush inside the timed window, and every repetition's exported span count checked
(6 per pipeline). The figure is the median repetition's request-thread CPU per pipeline
(``time.thread_time``); process CPU (all threads) is printed beside it. Variants run interleaved
over ``--rounds`` rounds (the order rotated each round) and each ratio is the median over rounds
of (variant / hand-written OTel in the same round).

Batch rows use ``BatchSpanProcessor`` (queue large enough that nothing is dropped) and print the
request thread's CPU and the other threads' (the exporter's) apart: work moved off the request
thread is moved, not removed.

Tracing-off rows: no TracerProvider, no MeterProvider (or the SDK's own off switch), the same
pipeline, plus the cost of one decorated call over the bare function.

    python bench/bench_peers.py            # the full table (15-20 minutes on 2 shared cores)
    python bench/bench_peers.py --quick    # fewer and shorter repetitions
    python bench/bench_peers.py --only ragtrace-full otel-8   # a subset (always with otel-8)
    python bench/bench_peers.py --baseline DIR   # each ragtrace row also run on the ragtrace in DIR
                                                 # (a checkout of the code before a change), same rounds
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import peer_floors  # noqa: E402  (bench/)
import peer_workload as w  # noqa: E402  (bench/, stdlib only)

PEER_VENVS = ROOT / ".venv-peers"
PROJECT_PYTHON = ROOT / ".venv" / "bin" / "python"


# --- the peers and how they are installed ------------------------------------------------------
@dataclass(frozen=True)
class Peer:
    name: str
    requirements: tuple[str, ...]
    why: str = ""  # why this pin
    same_sdk: bool = True  # pinned to the project's opentelemetry-sdk


PEERS = {
    p.name: p
    for p in (
        Peer(
            "traceloop",
            (
                "traceloop-sdk==0.62.4",
                "httpx",  # imported by traceloop.sdk but not declared by 0.62.4
                "opentelemetry-sdk==1.45.1",
                "opentelemetry-instrumentation==0.66b1",
                *(f"opentelemetry-instrumentation-{n}==0.66b1" for n in ("logging", "redis", "requests", "sqlalchemy", "threading", "urllib3")),
            ),
            "the newest release, on OTel SDK 1.45.1 with the contrib instrumentations it needs pinned to "
            "0.66b1: opentelemetry-instrumentation-threading has no 0.66b2, so those cannot sit with SDK "
            "1.45.2 (the project's), and an unpinned `pip install traceloop-sdk` ends in "
            "ResolutionImpossible after minutes of backtracking",
            same_sdk=False,
        ),
        Peer("openinference", ("openinference-instrumentation==0.1.72",)),
        Peer("langfuse", ("langfuse==5.0.4",)),
        Peer("logfire", ("logfire==5.4.0",)),
        Peer("mlflow", ("mlflow-tracing==3.17.2",)),
    )
}


def otel_sdk_pin() -> str | None:
    """The project venv's opentelemetry-sdk, so every peer runs on the same SDK where it resolves."""
    try:
        out = subprocess.run(
            [str(PROJECT_PYTHON), "-c", "import importlib.metadata as m; print(m.version('opentelemetry-sdk'))"],
            capture_output=True, text=True, check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"opentelemetry-sdk=={out.stdout.strip()}"


def ensure_venv(peer: Peer, pin: str | None, reinstall: bool) -> tuple[Path | None, str]:
    """The peer's venv python (created and installed on first use), or None and the reason."""
    venv = PEER_VENVS / peer.name
    python = venv / "bin" / "python"
    wanted = "\n".join(peer.requirements + ((pin,) if pin and peer.same_sdk else ()))
    done, failed = venv / ".installed", venv / ".failed"
    if not reinstall:
        if done.exists() and done.read_text() == wanted and python.exists():
            return python, ""
        if failed.exists() and failed.read_text().split("\n---\n")[0] == wanted:
            return None, failed.read_text().split("\n---\n", 1)[1]
    print(f"installing {peer.name} into {venv.relative_to(ROOT)} ({', '.join(wanted.splitlines())}) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    done.unlink(missing_ok=True)
    command = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted.splitlines()]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        ok, log = result.returncode == 0, result.stderr + result.stdout
    except subprocess.TimeoutExpired:
        ok, log = False, "ERROR: pip did not finish resolving in 30 minutes"
    if ok:
        done.write_text(wanted)
        return python, ""
    errors = [line for line in log.splitlines() if line.startswith("ERROR")] or log.strip().splitlines()[-1:]
    reason = f"does not install here: {errors[-1] if errors else 'pip failed'}"
    failed.write_text(wanted + "\n---\n" + reason)
    return None, reason


# --- variants ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    peer: str | None = None  # None: the project's own venv
    off: bool = False
    batch: bool = False


VARIANTS = [
    Variant("otel-8", "hand-written OTel (8 attrs/span)"),
    Variant("otel-replay", "OTel replaying ragtrace's exact spans"),
    Variant("otel-replay-redact", "OTel replaying ragtrace's exact spans, redact"),
    Variant("hand-computed", "the same spans computed by hand (`bench/handwritten_rag.py`)"),
    Variant("hand-computed-redact", "the same spans computed by hand, redact"),
    Variant("otel-replay-metrics", "OTel replaying ragtrace's spans and metric records"),
    Variant("ragtrace-full", "**ragtrace, content on (default)**"),
    Variant("ragtrace-redact", "ragtrace, redact"),
    Variant("ragtrace-no-oi", "ragtrace, `openinference=False`"),
    Variant("ragtrace-metrics", "ragtrace content on, with a MeterProvider (in-memory reader)"),
    Variant("traceloop", "Traceloop {v} `@workflow`/`@task`", "traceloop"),
    Variant("openinference", "OpenInference {v} decorators", "openinference"),
    Variant("langfuse", "Langfuse {v} `@observe` (its own batch processor)", "langfuse"),
    Variant("logfire", "Logfire {v} `@instrument`", "logfire"),
    Variant("mlflow", "MLflow-tracing {v} `@trace` (its own batch processor)", "mlflow"),
    Variant("otel-8-batch", "hand-written OTel, BatchSpanProcessor", batch=True),
    Variant("ragtrace-full-batch", "ragtrace content on, BatchSpanProcessor", batch=True),
    Variant("otel-8-off", "OTel API, no SDK installed", off=True),
    Variant("ragtrace-off", "ragtrace", off=True),
    Variant("traceloop-off", "Traceloop {v} `enabled=False`", "traceloop", off=True),
    Variant("openinference-off", "OpenInference {v}, no provider", "openinference", off=True),
    Variant("langfuse-off", "Langfuse {v} `tracing_enabled=False`", "langfuse", off=True),
    Variant("logfire-off", "Logfire {v}: no off switch (no processors, `send_to_logfire=False`)", "logfire", off=True),
    Variant("mlflow-off", "MLflow-tracing {v} `mlflow.tracing.disable()`", "mlflow", off=True),
]
BY_KEY = {v.key: v for v in VARIANTS}
REFERENCE = "otel-8"


# --- the worker: one variant in this process ---------------------------------------------------
@dataclass
class Setup:
    run: Callable[[str], Any]
    flush: Callable[[], Any]
    exporter: Any = None  # InMemorySpanExporter, or None when nothing is exported (tracing off)
    version: str = ""
    call: tuple[Callable[..., Any], Callable[..., Any]] | None = None  # (bare, decorated), tracing off
    batch: bool = False


def _memory(batch: bool = False) -> tuple[Any, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    if batch:  # a queue that holds a whole repetition: the span check must see every span
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 16, max_export_batch_size=512))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def otel8_pipeline(tracer: Any) -> Callable[[str], str]:
    """The workload as a team instruments it by hand: six spans, eight attributes each, computed
    from the stage's own inputs and outputs."""
    from opentelemetry.trace import SpanKind

    client, internal = SpanKind.CLIENT, SpanKind.INTERNAL
    em, ep = w.MODELS["embed"]
    rm, rp = w.MODELS["rerank"]
    gm, gp = w.MODELS["generate"]

    def answer_question(query: str) -> str:
        with tracer.start_as_current_span("invoke_workflow support-qa", kind=internal) as root:
            with tracer.start_as_current_span(f"embeddings {em}", kind=client) as span:
                vector = w.embed(query)
                span.set_attributes({
                    "gen_ai.operation.name": "embeddings", "rag.stage": "embed", "gen_ai.provider.name": ep,
                    "gen_ai.request.model": em, "gen_ai.embeddings.dimension.count": len(vector),
                    "gen_ai.usage.input_tokens": 12, "rag.query.chars": len(query), "rag.pipeline.version": "v2",
                })
            with tracer.start_as_current_span(f"retrieval {w.DATA_SOURCE}", kind=client) as span:
                docs = w.retrieve(query, vector)
                span.set_attributes({
                    "gen_ai.operation.name": "retrieval", "rag.stage": "retrieve", "gen_ai.data_source.id": w.DATA_SOURCE,
                    "gen_ai.retrieval.top_k": w.TOP_K, "rag.retrieval.result_count": len(docs),
                    "rag.retrieval.top_score": docs[0]["score"], "rag.retrieval.chunk_ids": [d["id"] for d in docs[:3]],
                    "rag.retrieval.min_score": docs[-1]["score"],
                })
            with tracer.start_as_current_span(f"rerank {rm}", kind=client) as span:
                top = w.rerank(query, docs)
                span.set_attributes({
                    "gen_ai.operation.name": "rerank", "rag.stage": "rerank", "gen_ai.provider.name": rp,
                    "gen_ai.request.model": rm, "rag.rerank.top_n": w.TOP_N, "rag.rerank.input_count": len(docs),
                    "rag.rerank.output_count": len(top), "rag.rerank.top_score": top[0]["score"],
                })
            with tracer.start_as_current_span("assemble_context", kind=internal) as span:
                prompt = w.assemble(query, top)
                span.set_attributes({
                    "rag.stage": "assemble", "rag.context.chunk_count": len(top), "rag.context.chars": len(prompt),
                    "rag.context.max_tokens": w.MAX_TOKENS, "rag.context.first_id": top[0]["id"],
                    "rag.context.last_id": top[-1]["id"], "rag.context.template": "default", "rag.context.truncated": False,
                })
            with tracer.start_as_current_span(f"chat {gm}", kind=client) as span:
                answer = w.generate(prompt)
                cited = answer.count("[")
                span.set_attributes({
                    "gen_ai.operation.name": "chat", "rag.stage": "generate", "gen_ai.provider.name": gp,
                    "gen_ai.request.model": gm, "rag.prompt.chars": len(prompt), "rag.answer.chars": len(answer),
                    "rag.citation.count": cited, "gen_ai.response.finish_reasons": ["stop"],
                })
            root.set_attributes({
                "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support-qa", "rag.stage": "pipeline",
                "rag.pipeline.version": "v2", "rag.query.chars": len(query), "rag.answer.chars": len(answer),
                "rag.citation.count": cited, "rag.retrieval.result_count": len(docs),
            })
            return answer

    return answer_question


def ragtrace_pipeline(query: str) -> str:
    """The workload with ragtrace's context managers, the way the README shows them."""
    import ragtrace

    (em, ep), (rm, rp), (gm, gp) = w.MODELS["embed"], w.MODELS["rerank"], w.MODELS["generate"]
    with ragtrace.rag_pipeline("support-qa", query=query, version="v2"):
        with ragtrace.embed(model=em, provider=ep) as e:
            vector = w.embed(query)
            e.record(vector, input_tokens=12)
        with ragtrace.retrieve(query, data_source=w.DATA_SOURCE, top_k=w.TOP_K) as r:
            docs = w.retrieve(query, vector)
            r.record(docs)
        with ragtrace.rerank(model=rm, provider=rp, top_n=w.TOP_N) as rr:
            top = w.rerank(query, docs)
            rr.record(top)
        with ragtrace.assemble(max_tokens=w.MAX_TOKENS) as ctx:
            for chunk in top:
                ctx.add(chunk)
            prompt = ctx.render(question=query)
        with ragtrace.generate(model=gm, provider=gp, prompt=prompt) as g:
            answer = w.generate(prompt)
            g.record(answer)
    return answer


def _check_ragtrace_prompt() -> None:
    """The workload's prompt must be the one ragtrace's default template renders."""
    from ragtrace._internal.core import assembly

    if (w.TEMPLATE, w.CHUNK_FORMAT) != (assembly.DEFAULT_TEMPLATE, assembly.DEFAULT_CHUNK_FORMAT):
        raise SystemExit("bench/peer_workload.py: TEMPLATE/CHUNK_FORMAT are no longer ragtrace's defaults")


def setup_project(key: str) -> Setup:
    """Variants that run in the project's venv (hand-written OTel and ragtrace)."""
    from opentelemetry import trace

    import ragtrace
    from ragtrace._internal.setup import config as rt_config
    from ragtrace._internal.core import guard as rt_guard

    import handwritten_rag

    rt_guard.set_strict(True)  # a ragtrace bug fails the benchmark instead of hiding behind the guard
    _check_ragtrace_prompt()
    version = f"ragtrace {ragtrace.__version__}" if hasattr(ragtrace, "__version__") else ""
    base = key.removesuffix("-batch").removesuffix("-off")
    if key == "otel-8-off":
        return Setup(otel8_pipeline(trace.get_tracer("bench")), lambda: None)
    if key == "ragtrace-off":
        bare = w.retrieve
        decorated = ragtrace.retriever(data_source=w.DATA_SOURCE)(w.retrieve)
        return Setup(ragtrace_pipeline, lambda: None, version=version, call=(bare, decorated))
    provider, exporter = _memory(batch=key.endswith("-batch"))
    batch = key.endswith("-batch")
    if base == "otel-8":
        return Setup(otel8_pipeline(provider.get_tracer("bench")), provider.force_flush, exporter, batch=batch)
    modes = {"ragtrace-full": ("full", True), "ragtrace-redact": ("redact", True), "ragtrace-no-oi": ("full", False), "otel-replay": ("full", True),
             "ragtrace-metrics": ("full", True), "otel-replay-redact": ("redact", True), "hand-computed": ("full", True),
             "hand-computed-redact": ("redact", True), "otel-replay-metrics": ("full", True)}
    mode, openinference = modes[base]
    meters = None
    if base in ("ragtrace-metrics", "otel-replay-metrics"):  # every metric recorded too, read in memory (what a scrape endpoint reads)
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    # a shared hash key, as the warning without one asks (and the hand-computed rows compute rag.query.hash with it)
    rt_config.configure(tracer_provider=provider, meter_provider=meters, capture_content=mode, openinference=openinference,
                        hash_key=handwritten_rag.HASH_KEY)
    if base.startswith("otel-replay"):
        replay = peer_floors.span_replay(provider, exporter, ragtrace_pipeline, metrics=base == "otel-replay-metrics")
        return Setup(replay, provider.force_flush, exporter, batch=batch)
    if base.startswith("hand-computed"):
        return Setup(peer_floors.hand_computed(provider, exporter, ragtrace_pipeline, mode == "full"), provider.force_flush, exporter, batch=batch)
    return Setup(ragtrace_pipeline, provider.force_flush, exporter, version=version, batch=batch)


def _decorate_all(stage: Callable[[str], Callable[[Callable[..., Any]], Callable[..., Any]]], root: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[[str], str]:
    """The workload with each stage wrapped by ``stage(name)`` and the root by ``root``."""
    return root(w.make_pipeline({name: stage(name)(fn) for name, fn in w.PLAIN.items()}))


def _installed(dist: str) -> str:
    import importlib.metadata

    return f"{dist} {importlib.metadata.version(dist)}"


def setup_traceloop(off: bool) -> Setup:
    os.environ["TRACELOOP_TELEMETRY"] = "false"
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import task, workflow

    if off:
        Traceloop.init(app_name="bench", enabled=False, telemetry_enabled=False)
        exporter, flush = None, lambda: None
    else:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        Traceloop.init(app_name="bench", exporter=exporter, disable_batch=True, telemetry_enabled=False)
        from opentelemetry import trace

        flush = trace.get_tracer_provider().force_flush
    run = _decorate_all(lambda name: task(name=name), workflow(name="support-qa"))
    call = (w.retrieve, task(name="retrieve")(w.retrieve)) if off else None
    return Setup(run, flush, exporter, _installed("traceloop-sdk"), call)


def setup_openinference(off: bool) -> Setup:
    from openinference.instrumentation import OITracer, TraceConfig
    from opentelemetry import trace

    if off:
        tracer = OITracer(trace.get_tracer("bench"), config=TraceConfig())
        exporter, flush = None, lambda: None
    else:
        provider, exporter = _memory()
        tracer = OITracer(provider.get_tracer("bench"), config=TraceConfig())
        flush = provider.force_flush
    kinds = {"generate": tracer.llm}
    run = _decorate_all(lambda name: (lambda fn: kinds.get(name, tracer.chain)(name=name)(fn)), tracer.chain(name="support-qa"))
    call = (w.retrieve, tracer.chain(name="retrieve")(w.retrieve)) if off else None
    return Setup(run, flush, exporter, _installed("openinference-instrumentation"), call)


def setup_langfuse(off: bool) -> Setup:
    """Langfuse exports through its own span processor (a BatchSpanProcessor), here into memory."""
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(1 << 16)  # a whole repetition fits: nothing dropped
    from langfuse import Langfuse, observe

    if off:
        Langfuse(public_key="pk-bench", secret_key="sk-bench", tracing_enabled=False)
        exporter, flush = None, lambda: None
    else:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter, provider = InMemorySpanExporter(), TracerProvider()
        Langfuse(public_key="pk-bench", secret_key="sk-bench", base_url="http://127.0.0.1:9", tracer_provider=provider, span_exporter=exporter)
        flush = provider.force_flush
    kinds = {"retrieve": "retriever", "embed": "embedding", "generate": "generation"}
    run = _decorate_all(lambda name: observe(name=name, as_type=kinds.get(name, "span")), observe(name="support-qa"))
    call = (w.retrieve, observe(name="retrieve")(w.retrieve)) if off else None
    return Setup(run, flush, exporter, _installed("langfuse"), call)


def setup_logfire(off: bool) -> Setup:
    import logfire

    if off:
        logfire.configure(send_to_logfire=False, console=False)
        exporter, flush = None, lambda: None
    else:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        logfire.configure(send_to_logfire=False, console=False, additional_span_processors=[SimpleSpanProcessor(exporter)])
        flush = logfire.force_flush
    run = _decorate_all(lambda name: logfire.instrument(name), logfire.instrument("support-qa"))
    call = (w.retrieve, logfire.instrument("retrieve")(w.retrieve)) if off else None
    return Setup(run, flush, exporter, _installed("logfire"), call)


def setup_mlflow(off: bool) -> Setup:
    """MLflow's OpenTelemetry export path (its ``OtelSpanProcessor``, a BatchSpanProcessor, over the
    OTLP exporter it builds), with that exporter swapped for the in-memory one; a tracking URI is
    set so MLflow does not probe for a local store (that path needs ``sqlparse``, which
    mlflow-tracing does not install)."""
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(1 << 16)
    os.environ.setdefault("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    import mlflow
    from mlflow.tracing import provider as mlflow_provider

    if off:
        mlflow.tracing.disable()
        exporter, flush = None, lambda: None
    else:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:9/v1/traces"
        exporter = InMemorySpanExporter()
        mlflow_provider.get_otlp_exporter = lambda: exporter  # type: ignore[attr-defined]

        def flush() -> None:
            mlflow_provider.provider.get().force_flush()

    kinds = {"retrieve": "RETRIEVER", "embed": "EMBEDDING", "generate": "LLM", "rerank": "RERANKER"}
    run = _decorate_all(lambda name: mlflow.trace(name=name, span_type=kinds.get(name, "UNKNOWN")), mlflow.trace(name="support-qa", span_type="CHAIN"))
    call = (w.retrieve, mlflow.trace(name="retrieve")(w.retrieve)) if off else None
    return Setup(run, flush, exporter, _installed("mlflow-tracing"), call)


PEER_SETUPS = {
    "traceloop": setup_traceloop,
    "openinference": setup_openinference,
    "langfuse": setup_langfuse,
    "logfire": setup_logfire,
    "mlflow": setup_mlflow,
}


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(_chars(v) for v in value)
    return len(str(value))


def volume(spans: Sequence[Any]) -> dict[str, int]:
    """Spans, attributes, events and characters (values, as exported text) of one pipeline."""
    attributes = events = chars = 0
    for span in spans:
        for value in (span.attributes or {}).values():
            attributes += 1
            chars += _chars(value)
        for event in span.events:
            events += 1
            chars += sum(_chars(v) for v in (event.attributes or {}).values())
    return {"spans": len(spans), "attributes": attributes, "events": events, "chars": chars}


def _decorated_call_ns(bare: Callable[..., Any], decorated: Callable[..., Any], number: int, repeats: int) -> float:
    """Median over interleaved rounds of (decorated - bare) ns per call, gc off as in timeit."""
    clock = time.thread_time
    diffs = []
    for round_ in range(repeats):
        times = {}
        for name, fn in sorted((("bare", bare), ("decorated", decorated)), reverse=bool(round_ % 2)):
            gc.collect()
            gc.disable()
            start = clock()
            for _ in range(number):
                fn(w.QUERY, w.VECTOR)
            times[name] = clock() - start
            gc.enable()
        diffs.append((times["decorated"] - times["bare"]) / number * 1e9)
    return statistics.median(diffs)


def worker(key: str, n: int, reps: int, warmup: int) -> dict[str, Any]:
    variant = BY_KEY[key]
    setup = PEER_SETUPS[variant.peer](variant.off) if variant.peer else setup_project(key)
    exporter = setup.exporter
    setup.run(w.QUERY)
    setup.flush()
    result: dict[str, Any] = {"key": key, "version": setup.version}
    if exporter is not None:
        spans = exporter.get_finished_spans()
        result.update(volume(spans))
        if len(spans) != w.SPANS_PER_PIPELINE:
            raise SystemExit(f"{key}: one pipeline exported {len(spans)} spans, expected {w.SPANS_PER_PIPELINE}: {[s.name for s in spans]}")
        exporter.clear()
    for _ in range(warmup):
        setup.run(w.QUERY)
    setup.flush()
    if exporter is not None:
        exporter.clear()
    request, total = [], []
    run, flush, query = setup.run, setup.flush, w.QUERY
    for _ in range(reps):
        gc.collect()
        start_thread, start_process = time.thread_time(), time.process_time()
        for _ in range(n):
            run(query)
        flush()
        request.append((time.thread_time() - start_thread) / n)
        total.append((time.process_time() - start_process) / n)
        if exporter is not None:
            got = len(exporter.get_finished_spans())
            if got != n * w.SPANS_PER_PIPELINE:
                raise SystemExit(f"{key}: a repetition exported {got} spans, expected {n * w.SPANS_PER_PIPELINE}")
            exporter.clear()
    middle = sorted(range(reps), key=lambda i: request[i])[reps // 2]
    result["request_us"] = request[middle] * 1e6
    result["process_us"] = total[middle] * 1e6
    if setup.call is not None:
        result["call_ns"] = _decorated_call_ns(*setup.call, number=max(n * 5, 2000), repeats=max(reps, 5))
    return result


# --- the orchestrator --------------------------------------------------------------------------
@dataclass
class Row:
    variant: Variant
    python: Path | None
    reason: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)
    baseline: Path | None = None  # run on the ragtrace in this checkout (``--baseline``)


def run_variant(row: Row, args: argparse.Namespace) -> dict[str, Any] | None:
    command = [str(row.python), str(Path(__file__).resolve()), "--worker", row.variant.key,
               "--n", str(args.n), "--reps", str(args.reps), "--warmup", str(args.warmup)]
    env = dict(os.environ, PYTHONHASHSEED="0")
    if row.variant.peer is None:  # the ragtrace of this checkout (or the baseline's), whatever the venv's editable install points at
        env["PYTHONPATH"] = str(row.baseline or ROOT)
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(ROOT))
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        row.reason = f"failed: {tail[:160]}"
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 3 x 300 pipelines after 100 warm-up (iteration)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--n", type=int, default=None, help="pipelines per timed repetition (2,000)")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per process (7)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up pipelines (500)")
    parser.add_argument("--only", nargs="+", metavar="VARIANT", choices=sorted(BY_KEY), help="a subset of variants")
    parser.add_argument("--reinstall", action="store_true", help="recreate the peers' venvs")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--baseline", type=Path, help="also run each ragtrace row on the ragtrace package in this directory (before/after in one run)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.rounds = args.rounds or 3
    args.n = args.n or (300 if args.quick else 2000)
    args.reps = args.reps or (3 if args.quick else 7)
    args.warmup = args.warmup if args.warmup is not None else (100 if args.quick else 500)
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.reps, args.warmup)))
        return 0

    chosen = [v for v in VARIANTS if not args.only or v.key in args.only or v.key == REFERENCE]
    pin = otel_sdk_pin()
    venvs: dict[str, tuple[Path | None, str]] = {}
    for name in sorted({v.peer for v in chosen if v.peer}):
        venvs[name] = ensure_venv(PEERS[name], pin, args.reinstall)
    rows = [Row(v, *(venvs[v.peer] if v.peer else (PROJECT_PYTHON, ""))) for v in chosen]
    if args.baseline:
        if not (args.baseline / "ragtrace" / "__init__.py").exists():
            raise SystemExit(f"--baseline {args.baseline}: no ragtrace package there")
        rows += [Row(r.variant, r.python, r.reason, baseline=args.baseline.resolve()) for r in list(rows) if r.variant.key.startswith("ragtrace")]
    runnable = [r for r in rows if r.python is not None]
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs (shared); {args.rounds} rounds x "
          f"{len(runnable)} processes; each: {args.warmup} warm-up, median of {args.reps} x {args.n} pipelines", flush=True)
    for round_ in range(args.rounds):
        shift = round_ % len(runnable)
        for row in runnable[shift:] + runnable[:shift]:
            if row.reason:
                continue
            result = run_variant(row, args)
            if result is not None:
                row.results.append(result)
        print(f"  round {round_ + 1}/{args.rounds} done", flush=True)
    if args.json:
        args.json.write_text(json.dumps([{"key": r.variant.key, "reason": r.reason, "results": r.results} for r in rows], indent=1))
    print_table(rows, args)
    return 0 if all(r.results or r.reason for r in rows) else 1


def _ratios(row: Row, reference: Row, field_name: str) -> float | None:
    pairs = [(a[field_name], b["request_us"]) for a, b in zip(row.results, reference.results)]
    return statistics.median(a / b for a, b in pairs) if pairs else None


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    reference = next(r for r in rows if r.variant.key == REFERENCE)
    if not reference.results:
        print(f"the reference ({REFERENCE}) did not run: {reference.reason}")
        return

    def median(row: Row, key: str) -> float:
        return statistics.median(r[key] for r in row.results)

    def versioned(row: Row) -> str:
        version = row.results[0]["version"].split(" ")[-1] if row.results else ""
        label = row.variant.label.replace("{v}", version).replace("  ", " ")
        return f"{label} (baseline {row.baseline})" if row.baseline is not None else label

    print("\n## Tracing on (in-memory exporter, SimpleSpanProcessor)\n")
    print("| variant | × hand-written OTel (8 attrs/span) | µs / pipeline (request thread) | process CPU µs | spans | attributes + events / characters per pipeline |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        if row.variant.off or row.variant.batch:
            continue
        if not row.results:
            print(f"| {versioned(row)} | – | – | – | – | {row.reason or 'not run'} |")
            continue
        first = row.results[0]
        events = f" + {first['events']} events" if first["events"] else ""
        print(f"| {versioned(row)} | {_ratios(row, reference, 'request_us'):.2f} | {median(row, 'request_us'):.1f} | "
              f"{median(row, 'process_us'):.1f} | {first['spans']} | {first['attributes']}{events} / {first['chars']:,} |")

    batch = [r for r in rows if r.variant.batch]
    if batch:
        print("\n## BatchSpanProcessor (in-memory exporter): request thread and export thread apart\n")
        print("| variant | request thread × OTel-8 (Simple) | request µs | other threads µs | total CPU µs |")
        print("|---|---:|---:|---:|---:|")
        for row in batch:
            if not row.results:
                print(f"| {versioned(row)} | – | – | – | {row.reason or 'not run'} |")
                continue
            request, process = median(row, "request_us"), median(row, "process_us")
            print(f"| {versioned(row)} | {_ratios(row, reference, 'request_us'):.2f} | {request:.1f} | {max(process - request, 0.0):.1f} | {process:.1f} |")

    off = [r for r in rows if r.variant.off]
    if off:
        print("\n## Tracing off (no TracerProvider, no MeterProvider)\n")
        print("| SDK | pipeline × OTel-8 *on* | µs / pipeline | one decorated call over bare, ns |")
        print("|---|---:|---:|---:|")
        for row in off:
            if not row.results:
                print(f"| {versioned(row)} | – | – | {row.reason or 'not run'} |")
                continue
            call = statistics.median(r["call_ns"] for r in row.results) if "call_ns" in row.results[0] else None
            print(f"| {versioned(row)} | {_ratios(row, reference, 'request_us'):.3f} | {median(row, 'request_us'):.2f} | "
                  f"{f'{call:.0f}' if call is not None else '–'} |")
    by_key = {r.variant.key: r for r in rows if r.baseline is None}

    def us(key: str) -> float | None:
        row = by_key.get(key)
        return median(row, "request_us") if row is not None and row.results else None

    def ratio(key: str) -> float | None:
        row = by_key.get(key)
        return _ratios(row, reference, "request_us") if row is not None and row.results else None

    print("\n## Against the floors (same run; see bench/peer_floors.py)\n")
    print("\n".join(peer_floors.summary(us, ratio)))
    for name, peer in PEERS.items():
        if peer.why:
            print(f"\n{name}: {peer.requirements[0]}: {peer.why}.")


if __name__ == "__main__":
    sys.exit(main())
