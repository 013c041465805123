"""Decorators on every function kind: spans, untouched results and exceptions, no context leaks."""

from __future__ import annotations

import asyncio
import inspect
import sys
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace._internal.setup import config
from ragtrace._internal import names

DOCS = [{"id": "a", "score": 0.9, "content": "alpha text"}, {"id": "b", "score": 0.5, "content": "beta text"}]


@ragtrace.retriever(data_source="kb", top_k=2)
def search(query: str, k: int = 2) -> list[dict]:
    return DOCS[:k]


@ragtrace.retriever
async def asearch(query: str) -> list[dict]:
    await asyncio.sleep(0)
    return DOCS


@ragtrace.generator(model="m", provider="local")
def stream_answer(prompt: str):
    yield "alpha "
    yield "[1]"


@ragtrace.generator(model="m")
async def astream_answer(prompt: str):
    for piece in ("beta ", "[2]"):
        await asyncio.sleep(0)
        yield piece


class Store:
    def __init__(self) -> None:
        self.docs = DOCS

    @ragtrace.retriever(data_source="method")
    def search(self, query: str) -> list[dict]:
        return self.docs

    @classmethod
    @ragtrace.retriever(data_source="classmethod")
    def csearch(cls, query: str) -> list[dict]:
        return DOCS

    @staticmethod
    @ragtrace.retriever(data_source="staticmethod")
    def ssearch(query: str) -> list[dict]:
        return DOCS


def test_sync_function_span_and_identity(spans):
    result = search("what is alpha?")
    assert result == DOCS[:2]
    retrieve = spans.one("retrieve")
    assert retrieve.name == "retrieval kb"
    assert retrieve.attributes[names.GEN_AI_RETRIEVAL_QUERY_TEXT] == "what is alpha?"
    assert list(retrieve.attributes[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["a", "b"]
    assert retrieve.attributes[names.GEN_AI_RETRIEVAL_TOP_K] == 2


def test_return_value_is_the_same_object(spans):
    sentinel = [{"id": "x", "content": "x"}]

    @ragtrace.retriever
    def same(query: str):
        return sentinel

    assert same("q") is sentinel


def test_signatures_and_kinds_are_preserved():
    def plain(query: str, k: int = 3) -> list: ...

    async def coro(query: str) -> list: ...

    def gen(prompt: str):
        yield prompt

    async def agen(prompt: str):
        yield prompt

    assert inspect.signature(ragtrace.retriever(plain)) == inspect.signature(plain)
    assert ragtrace.retriever(plain).__wrapped__ is plain
    assert inspect.iscoroutinefunction(ragtrace.retriever(coro))
    assert inspect.isgeneratorfunction(ragtrace.generator(gen))
    assert inspect.isasyncgenfunction(ragtrace.generator(agen))
    assert ragtrace.retriever(plain).__name__ == "plain"


def test_async_function(spans):
    assert asyncio.run(asearch("q")) == DOCS
    assert list(spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["a", "b"]


def test_methods_classmethods_staticmethods(spans):
    store = Store()
    assert store.search("q") is store.docs
    assert Store.csearch("q") == DOCS
    assert Store.ssearch("q") == DOCS
    assert store.ssearch("q") == DOCS
    sources = sorted(s.attributes[names.GEN_AI_DATA_SOURCE_ID] for s in spans.by_stage("retrieve"))
    assert sources == ["classmethod", "method", "staticmethod", "staticmethod"]
    for span in spans.by_stage("retrieve"):
        assert span.attributes[names.GEN_AI_RETRIEVAL_QUERY_TEXT] == "q"


def test_generator_span_covers_iteration_and_joins_pieces(spans):
    with ragtrace.rag_pipeline("gen") as run:
        with ragtrace.retrieve() as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            ctx.add(DOCS[0])
        pieces = list(stream_answer("prompt"))
    assert pieces == ["alpha ", "[1]"]
    generate = spans.one("generate")
    assert generate.attributes[names.GEN_AI_REQUEST_STREAM] is True
    assert list(generate.attributes[names.RAG_CITATION_IDS]) == ["a"]
    assert generate.attributes[names.OI_OUTPUT_VALUE] == "alpha [1]"
    assert run.metrics["cited"] == 1


def test_async_generator(spans):
    async def main():
        return [p async for p in astream_answer("prompt")]

    assert asyncio.run(main()) == ["beta ", "[2]"]
    assert spans.one("generate").attributes[names.OI_OUTPUT_VALUE] == "beta [2]"


def _current_span_id() -> int:
    return trace.get_current_span().get_span_context().span_id


def test_generator_context_only_current_while_stepping(spans):
    seen_inside: list[int] = []

    @ragtrace.generator
    def gen(prompt: str):
        for i in range(3):
            seen_inside.append(_current_span_id())
            yield str(i)

    before = otel_context.get_current()
    iterator = gen("p")
    outside = []
    for _ in iterator:
        outside.append(_current_span_id())
    assert otel_context.get_current() == before
    assert set(outside) == {0}
    span = spans.one("generate")
    assert set(seen_inside) == {span.context.span_id}


def test_early_break_ends_span_without_leaking(spans, caplog):
    @ragtrace.generator
    def gen(prompt: str):
        yield "a"
        yield "b"
        yield "c"

    before = otel_context.get_current()
    for piece in gen("p"):
        break
    assert otel_context.get_current() == before
    span = spans.one("generate")
    assert span.end_time is not None
    assert span.status.status_code == StatusCode.UNSET
    assert span.attributes[names.OI_OUTPUT_VALUE] == "a"
    assert "Failed to detach context" not in caplog.text


def test_async_generator_aclose_ends_span(spans, caplog):
    @ragtrace.generator
    async def agen(prompt: str):
        yield "a"
        yield "b"

    async def main():
        before = otel_context.get_current()
        it = agen("p")
        assert await it.__anext__() == "a"
        await it.aclose()
        assert otel_context.get_current() == before

    asyncio.run(main())
    span = spans.one("generate")
    assert span.end_time is not None
    assert "Failed to detach context" not in caplog.text


def test_exceptions_pass_through_unchanged(spans):
    error = KeyError("missing")

    @ragtrace.retriever
    def broken(query: str):
        raise error

    with pytest.raises(KeyError) as caught:
        broken("q")
    assert caught.value is error
    frames = [f.name for f in caught.traceback]
    assert "broken" in frames
    span = spans.one("retrieve")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes[names.ERROR_TYPE] == "KeyError"


def test_generator_exception_midway(spans):
    @ragtrace.generator
    def gen(prompt: str):
        yield "a"
        raise ValueError("midway")

    it = gen("p")
    assert next(it) == "a"
    with pytest.raises(ValueError, match="midway"):
        next(it)
    assert spans.one("generate").status.status_code == StatusCode.ERROR


def test_generator_send_and_throw_are_forwarded(spans):
    @ragtrace.generator
    def echo(prompt: str):
        received = yield "ready"
        try:
            yield f"got {received}"
        except RuntimeError:
            yield "handled"
        return "done"

    it = echo("p")
    assert next(it) == "ready"
    assert it.send("x") == "got x"
    assert it.throw(RuntimeError("boom")) == "handled"
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == "done"


def test_async_exception_passes_through(spans):
    @ragtrace.retriever
    async def broken(query: str):
        await asyncio.sleep(0)
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError, match="slow"):
        asyncio.run(broken("q"))
    assert spans.one("retrieve").status.status_code == StatusCode.ERROR


def test_decorated_pipeline_function(spans):
    @ragtrace.rag_pipeline("decorated", version="1")
    def answer(question: str) -> str:
        search(question)
        return "final"

    assert answer("why?") == "final"
    root = spans.one("pipeline")
    assert root.attributes[names.OI_INPUT_VALUE] == "why?"
    assert root.attributes[names.OI_OUTPUT_VALUE] == "final"
    assert spans.one("retrieve").parent.span_id == root.context.span_id


def test_decorated_async_pipeline(spans):
    @ragtrace.rag_pipeline("adecorated")
    async def answer(question: str) -> str:
        await asearch(question)
        return "ok"

    assert asyncio.run(answer("q")) == "ok"
    assert spans.one("retrieve").parent.span_id == spans.one("pipeline").context.span_id


def test_reranker_and_embedder_and_assembler_decorators(spans):
    @ragtrace.embedder(model="mini", provider="local")
    def encode(texts: list[str]):
        return [[0.0] * 8 for _ in texts]

    @ragtrace.reranker(model="bm25", top_n=1)
    def rerank(query: str, docs: list[dict]):
        return [(docs[1], 3.2)]

    @ragtrace.assembler
    def build(question: str, docs: list[dict]) -> str:
        return "Sources:\n" + "\n".join(f"[{i}] {d['content']}" for i, d in enumerate(docs, 1)) + f"\nQ: {question}"

    @ragtrace.generator(model="m")
    def llm(prompt: str) -> dict:
        return {"choices": [{"message": {"content": "beta [1]"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 20, "completion_tokens": 3}, "model": "m-1"}

    with ragtrace.rag_pipeline("decorated-all") as run:
        encode(["q"])
        hits = search("q")
        kept = rerank("q", hits)
        prompt = build("q", [d for d, _ in kept])
        out = llm(prompt)
    assert out["model"] == "m-1"
    assert spans.one("embed").attributes[names.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 8
    rr = spans.one("rerank").attributes
    assert [rr[f"reranker.input_documents.{i}.document.id"] for i in range(2)] == ["a", "b"]
    assert list(rr[names.RAG_RERANK_OUTPUT_IDS]) == ["b"]
    assert rr["reranker.output_documents.0.document.score"] == 3.2
    assemble = spans.one("assemble").attributes
    assert assemble[names.RAG_CONTEXT_INCLUSION_METHOD] == "located"
    assert list(assemble[names.RAG_CONTEXT_CHUNK_IDS]) == ["b"]
    assert list(assemble[names.RAG_CONTEXT_LABELS]) == ["1"]
    assert list(assemble[names.RAG_CONTEXT_DROPPED_REASONS]) == ["reranked_out"]
    generate = spans.one("generate").attributes
    assert generate[names.GEN_AI_USAGE_INPUT_TOKENS] == 20
    assert generate[names.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert generate[names.GEN_AI_RESPONSE_MODEL] == "m-1"
    assert list(generate[names.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert run.metrics["cited"] == 1 and run.metrics["recall_proxy"] == 0.5


def test_tracing_off_calls_straight_through():
    # no configure(), no global provider installed by the test suite
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    before = otel_context.get_current()
    assert search("q") == DOCS[:2]
    assert list(stream_answer("p")) == ["alpha ", "[1]"]
    assert asyncio.run(asearch("q")) == DOCS
    assert otel_context.get_current() == before


def test_tracing_off_pipeline_does_no_bookkeeping(monkeypatch):
    """Neither a TracerProvider nor a MeterProvider: nothing could see a span, figure or metric,
    so the pipeline keeps no state, hashes nothing and computes nothing; the app's values are unchanged."""
    from ragtrace._internal.core import chunks as chunks_module
    from ragtrace._internal.stages import state as state_module

    hashed = []
    real_hash = chunks_module.content_hash
    monkeypatch.setattr(chunks_module, "content_hash", lambda text: hashed.append(text) or real_hash(text))
    before = otel_context.get_current()
    with ragtrace.rag_pipeline("off", query="q") as run:
        assert state_module.current() is None and otel_context.get_current() == before
        assert search("q") == DOCS[:2]
        with ragtrace.retrieve("q") as r:
            r.record(DOCS)
        with ragtrace.generate() as g:
            g.record("[1]")
    assert hashed == []
    assert run.metrics == {} and run.status == "telemetry_off" and run.trace_id is None
    assert [c.id for c in r.chunks] == ["a", "b"]  # read back on demand, same chunks as when on


def test_tracing_off_assembly_renders_the_same_prompt(spans):
    def build() -> str:
        with ragtrace.rag_pipeline("p"):
            with ragtrace.rerank() as rr:
                rr.record(DOCS)
            with ragtrace.assemble(max_tokens=3) as ctx:
                for chunk in rr.chunks:
                    ctx.add(chunk)
                return ctx.render(question="q")

    on = build()
    config.reset()  # no provider anywhere from here on
    off = build()
    assert off == on and "alpha text" in on and "beta text" not in on  # the budget still binds


def test_tracing_off_assembly_dedupes_and_places_as_when_on(spans):
    """Off, chunks are not hashed when added; duplicates by text still leave the prompt, and the
    placements read back (``snapshot``) carry the same content digests as when on."""
    items = [DOCS[0], {"id": "copy", "content": "alpha text"}, DOCS[1], {"content": "id-less"}]

    def build():
        with ragtrace.assemble(labeller="id") as ctx:
            landed = [ctx.add(item) for item in items]
            prompt = ctx.render(question="q")
        record = ctx.snapshot()
        return landed, prompt, [(p.chunk_id, p.start, p.end, p.content_hash) for p in record.placements], [d.reason for d in record.dropped]

    on = build()
    config.reset()
    off = build()
    assert off == on and on[0] == [True, False, True, True] and on[3] == ["duplicate"]
    assert all(digest for *_, digest in on[2])


def test_decorator_rejects_positional_options():
    with pytest.raises(TypeError):
        ragtrace.retriever("kb")  # type: ignore[arg-type]


class VectorStoreRetriever:
    """A framework object, not a function: ``.invoke()`` would pass through a wrapper untraced."""

    def invoke(self, query: str) -> list[dict]:
        return DOCS


@pytest.mark.parametrize("decorator", [ragtrace.retriever, ragtrace.reranker, ragtrace.generator, ragtrace.embedder, ragtrace.assembler])
def test_decorating_an_object_that_is_not_a_function_is_refused(decorator):
    with pytest.raises(TypeError, match="ragtrace.instrument"):
        decorator()(VectorStoreRetriever())
    with pytest.raises(TypeError, match="function or method"):
        decorator(data_source="kb")(VectorStoreRetriever()) if decorator is ragtrace.retriever else decorator()(42)


def test_a_callable_object_is_traced(spans):
    class Search:
        def __call__(self, query: str) -> list[dict]:
            return DOCS

    traced = ragtrace.retriever(data_source="kb")(Search())
    assert traced("q") == DOCS
    assert list(spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["a", "b"]


def test_concurrent_tasks(spans):
    async def main():
        return await asyncio.gather(*(asearch(f"q{i}") for i in range(20)))

    assert all(r == DOCS for r in asyncio.run(main()))
    assert len(spans.by_stage("retrieve")) == 20


# --- the invocation parameters a decorated LLM call used -----------------------------------------
@ragtrace.generator(model="m")
def answer_with_defaults(messages, max_tokens: int = 64, temperature: float = 0.2):
    return "ok"


class Model:
    @ragtrace.generator(model="m")
    def complete(self, prompt, temperature=0.7, *, max_tokens=32):
        return "ok"


@pytest.mark.parametrize(
    ("call", "temperature", "max_tokens"),
    [
        (lambda: answer_with_defaults("hi"), 0.2, 64),  # the defaults were used: they are recorded
        (lambda: answer_with_defaults("hi", 10), 0.2, 10),  # positional
        (lambda: answer_with_defaults("hi", temperature=0.9), 0.9, 64),
        (lambda: Model().complete("hi"), 0.7, 32),  # a method: self is not counted
        (lambda: Model().complete("hi", 0.1, max_tokens=5), 0.1, 5),
    ],
)
def test_generator_records_the_invocation_parameters_used(spans, call, temperature, max_tokens):
    call()
    generate = spans.one("generate")
    assert generate.attributes[names.GEN_AI_REQUEST_TEMPERATURE] == temperature
    assert generate.attributes[names.GEN_AI_REQUEST_MAX_TOKENS] == max_tokens


# --- issue 16 item 5: a traced recursive function keeps most of its recursion depth --------------
def _deepest(func: Any) -> int:
    """The deepest ``func(n)`` that returns without RecursionError (binary search)."""
    low, high = 1, sys.getrecursionlimit()
    while low < high:
        middle = (low + high + 1) // 2
        try:
            func(middle)
            low = middle
        except RecursionError:
            high = middle - 1
    return low


def _plain_down(n: int) -> list:
    return _plain_down(n - 1) if n else []


@ragtrace.retriever
def _traced_down(n: int) -> list:
    return _traced_down(n - 1) if n else []


def test_a_traced_recursive_function_costs_one_frame_per_level(spans):
    """Each traced sync call of a plain function adds one frame: its wrapper. With CPython's
    default limit the traced function reached 247 levels of 997 at first, then 330 (wrapt's C call
    counted as a level too); now about half of the plain depth, inside a pipeline and out.
    (Redact mode: the probes' RecursionErrors are recorded without formatting deep stack traces.)"""
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    plain = _deepest(_plain_down)
    assert _deepest(_traced_down) >= 0.48 * plain
    with ragtrace.rag_pipeline("deep"):
        assert _deepest(_traced_down) >= 0.48 * plain
    assert spans.by_stage("retrieve")  # it was traced: the spans exist


# --- the tracing-off test of a decorated call, in a fresh interpreter (nothing configured yet) ---
_FRESH_OFF = r'''
import json, sys
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import ragtrace
from ragtrace._internal.setup import config

DOCS = [{"id": "a", "score": 0.9, "content": "alpha text"}]

@ragtrace.retriever
def search(query):
    return DOCS

def provider():
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter

case = sys.argv[1]
out = {"fast_path_before": not config.PROVIDERS_GIVEN, "same": search("q") is DOCS}
if case == "global-later":  # the app sets its provider after ragtrace was imported and used
    tp, exporter = provider()
    trace.set_tracer_provider(tp)
    search("q")
    out["spans"] = [s.attributes.get("rag.stage") for s in exporter.get_finished_spans()]
elif case == "meter-alone":  # no TracerProvider: the figures still reach the metrics
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    with ragtrace.rag_pipeline("p", query="q") as run:
        search("q")
        with ragtrace.assemble() as ctx:
            ctx.add(DOCS[0])
            ctx.render(question="q")
        with ragtrace.generate() as g:
            g.record("alpha [1]")
    out["metrics"] = run.metrics
elif case == "pipeline-provider":  # ragtrace's own explicit provider, the globals unset
    tp, exporter = provider()
    with ragtrace.rag_pipeline("p", tracer_provider=tp):
        search("q")
    out["spans"] = sorted(s.attributes.get("rag.stage") for s in exporter.get_finished_spans())
elif case == "configure":
    tp, exporter = provider()
    ragtrace.configure(tracer_provider=tp)
    search("q")
    out["spans"] = [s.attributes.get("rag.stage") for s in exporter.get_finished_spans()]
out["fast_path_after"] = not config.PROVIDERS_GIVEN
print(json.dumps(out))
'''


def _fresh(case: str) -> dict[str, Any]:
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", _FRESH_OFF, case], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_tracing_off_test_sees_a_global_provider_set_later():
    out = _fresh("global-later")
    assert out["fast_path_before"] and out["same"] and out["fast_path_after"]
    assert out["spans"] == ["retrieve"]


def test_tracing_off_test_sees_a_meter_provider_alone():
    out = _fresh("meter-alone")
    assert out["metrics"]["retrieved"] == 1 and out["metrics"]["cited"] == 1


@pytest.mark.parametrize("case", ["pipeline-provider", "configure"])
def test_tracing_off_test_sees_ragtraces_own_providers(case):
    out = _fresh(case)
    assert out["fast_path_before"] and not out["fast_path_after"]
    assert "retrieve" in out["spans"]
