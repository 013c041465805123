"""The root span and the stage context managers, end to end on the real SDK."""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import ragtrace
from ragtrace._internal import names

DOCS = [
    {"id": "d1", "score": 0.91, "content": "BM25 is a lexical ranking function."},
    {"id": "d2", "score": 0.83, "content": "Dense retrieval embeds queries and documents."},
    {"id": "d3", "score": 0.52, "content": "Rerankers reorder candidate documents."},
    {"id": "d4", "score": 0.41, "content": "Chunking splits documents into passages."},
]


def run_pipeline(answer: str = "BM25 ranks lexically [1], dense retrieval embeds [2].", **pipeline_kwargs):
    with ragtrace.rag_pipeline("support-qa", query="What is BM25?", version="v2", **pipeline_kwargs) as run:
        with ragtrace.embed(model="all-MiniLM-L6-v2", provider="local") as e:
            e.record([[0.1] * 384], input_tokens=4)
        with ragtrace.retrieve("What is BM25?", data_source="product-docs", top_k=4) as r:
            r.record(DOCS)
        with ragtrace.rerank(model="bm25", top_n=3) as rr:
            rr.record([DOCS[0], DOCS[1], DOCS[2]])
        with ragtrace.assemble(max_tokens=2000) as ctx:
            for doc in rr.chunks:
                ctx.add(doc)
            prompt = ctx.render(question="What is BM25?")
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record(answer)
    return run


def test_span_tree_names_kinds_and_parents(spans):
    run_pipeline()
    by_name = {s.name: s for s in spans.all()}
    assert set(by_name) == {
        "invoke_workflow support-qa",
        "embeddings all-MiniLM-L6-v2",
        "retrieval product-docs",
        "rerank bm25",
        "assemble_context",
        "chat gpt-4o-mini",
    }
    root = by_name["invoke_workflow support-qa"]
    assert root.parent is None
    for name, span in by_name.items():
        if span is not root:
            assert span.parent.span_id == root.context.span_id, name
            assert span.context.trace_id == root.context.trace_id
    assert by_name["retrieval product-docs"].kind == SpanKind.CLIENT
    assert by_name["assemble_context"].kind == SpanKind.INTERNAL
    assert root.kind == SpanKind.INTERNAL


def test_stage_attributes(spans):
    run_pipeline()
    root = spans.one("pipeline")
    assert root.attributes[names.GEN_AI_OPERATION_NAME] == "invoke_workflow"
    assert root.attributes[names.GEN_AI_WORKFLOW_NAME] == "support-qa"
    assert root.attributes["rag.pipeline.version"] == "v2"
    assert root.attributes[names.OI_SPAN_KIND] == "CHAIN"
    assert len(root.attributes[names.RAG_QUERY_HASH]) == 16

    embed = spans.one("embed")
    assert embed.attributes[names.GEN_AI_OPERATION_NAME] == "embeddings"
    assert embed.attributes[names.GEN_AI_PROVIDER_NAME] == "local"
    assert embed.attributes[names.GEN_AI_REQUEST_MODEL] == "all-MiniLM-L6-v2"
    assert embed.attributes[names.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == 384
    assert embed.attributes[names.GEN_AI_USAGE_INPUT_TOKENS] == 4

    retrieve = spans.one("retrieve")
    attrs = retrieve.attributes
    assert attrs[names.GEN_AI_OPERATION_NAME] == "retrieval"
    assert attrs[names.GEN_AI_DATA_SOURCE_ID] == "product-docs"
    assert attrs[names.GEN_AI_RETRIEVAL_TOP_K] == 4 and isinstance(attrs[names.GEN_AI_RETRIEVAL_TOP_K], int)
    assert attrs[names.GEN_AI_RETRIEVAL_QUERY_TEXT] == "What is BM25?"
    assert list(attrs[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["d1", "d2", "d3", "d4"]
    # scores once, in gen_ai.retrieval.documents (below); ranks 1..n are the readers' default
    assert names.RAG_RETRIEVAL_SCORES not in attrs and names.RAG_RETRIEVAL_RANKS not in attrs
    assert attrs[names.RAG_RETRIEVAL_RESULT_COUNT] == 4
    assert attrs[names.RAG_RETRIEVAL_TOP_SCORE] == 0.91
    assert json.loads(attrs[names.GEN_AI_RETRIEVAL_DOCUMENTS]) == [
        {"id": "d1", "score": 0.91},
        {"id": "d2", "score": 0.83},
        {"id": "d3", "score": 0.52},
        {"id": "d4", "score": 0.41},
    ]
    # ids and scores once: Phoenix fills retrieval.documents.{i}.document.id/score from the JSON above
    assert "retrieval.documents.0.document.id" not in attrs and "retrieval.documents.0.document.score" not in attrs
    assert attrs["retrieval.documents.3.document.content"] == DOCS[3]["content"]

    rerank = spans.one("rerank")
    assert rerank.attributes[names.GEN_AI_OPERATION_NAME] == "rerank"
    assert rerank.attributes[names.OI_SPAN_KIND] == "RERANKER"
    assert rerank.attributes[names.RAG_RERANK_INPUT_COUNT] == 4
    assert rerank.attributes[names.RAG_RERANK_OUTPUT_COUNT] == 3
    assert list(rerank.attributes[names.RAG_RERANK_OUTPUT_IDS]) == ["d1", "d2", "d3"]

    assemble = spans.one("assemble")
    a = assemble.attributes
    assert a[names.RAG_CONTEXT_INCLUSION_METHOD] == "recorded"
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["d1", "d2", "d3"]
    assert list(a[names.RAG_CONTEXT_POSITIONS]) == [1, 2, 3]
    assert list(a[names.RAG_CONTEXT_LABELS]) == ["1", "2", "3"]
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["d4"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["reranked_out"]
    prompt = a[names.OI_OUTPUT_VALUE]
    for chunk_id, start, end in zip(a[names.RAG_CONTEXT_CHUNK_IDS], a[names.RAG_CONTEXT_CHAR_STARTS], a[names.RAG_CONTEXT_CHAR_ENDS]):
        assert prompt[start:end] == next(d["content"] for d in DOCS if d["id"] == chunk_id)

    generate = spans.one("generate")
    g = generate.attributes
    assert g[names.GEN_AI_OPERATION_NAME] == "chat"
    assert g[names.OI_SPAN_KIND] == "LLM"
    assert list(g[names.RAG_CITATION_IDS]) == ["d1", "d2"]
    assert g[names.RAG_CITATION_CONFORMANT] is True
    assert g[names.RAG_CITATION_FORMAT] == "inline"
    assert json.loads(g[names.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"].startswith("BM25 ranks")


def test_figures_on_root_and_run_metrics(spans):
    run = run_pipeline()
    expected = {
        "retrieved": 4,
        "in_context": 3,
        "cited": 2,
        "invalid_citations": 0,
        "out_of_context_citations": 0,
        "unknown_citations": 0,
        "context_precision": 0.75,
        "recall_proxy": 0.5,
        "recall_proxy_weighted": (1 + 1 / 2) / (1 + 1 / 2 + 1 / 3 + 1 / 4),
        "context_utilization": 2 / 3,
        "duplicate_chunks": 0,
        "cited_positions": [1, 2],
    }
    for key, value in expected.items():
        assert run.metrics[key] == pytest.approx(value), key
    wasted = run.metrics["wasted_context_tokens"]
    assert wasted == ragtrace.SimpleTokenizer().count(DOCS[2]["content"])
    root = spans.one("pipeline")
    for key, value in run.metrics.items():
        attribute = root.attributes["rag.metrics." + key]
        assert (list(attribute) if isinstance(value, list) else attribute) == pytest.approx(value)
    assert "rag.metrics.status" not in root.attributes
    events = [e for e in root.events if e.name == "gen_ai.evaluation.result"]
    assert {e.attributes["gen_ai.evaluation.name"] for e in events} == {
        "ragtrace.context_precision",
        "ragtrace.recall_proxy",
        "ragtrace.recall_proxy_weighted",
        "ragtrace.context_utilization",
    }
    recall = next(e for e in events if e.attributes["gen_ai.evaluation.name"] == "ragtrace.recall_proxy")
    assert recall.attributes["gen_ai.evaluation.score.value"] == 0.5
    assert recall.attributes["gen_ai.evaluation.score.label"] == "medium"
    # the generation span carries the figures of its own context too
    generate = spans.one("generate")
    assert generate.attributes["rag.metrics.recall_proxy"] == 0.5


def test_no_retrieval_is_not_measurable(spans):
    with ragtrace.rag_pipeline("chat-only") as run:
        with ragtrace.generate(model="m") as g:
            g.record("hello")
    assert "recall_proxy" not in run.metrics
    assert "context_precision" not in run.metrics
    root = spans.one("pipeline")
    assert "no_retrieval" in root.attributes[names.RAG_METRICS_STATUS]
    assert "rag.metrics.recall_proxy" not in root.attributes


def test_no_answer_is_not_measurable(spans):
    with ragtrace.rag_pipeline("no-answer") as run:
        with ragtrace.retrieve("q") as r:
            r.record(DOCS)
    assert run.metrics["retrieved"] == 4
    assert "recall_proxy" not in run.metrics and "cited" not in run.metrics
    assert "no_answer" in run.status
    assert "no_context" in run.status


def test_user_exception_passes_through_and_is_recorded(spans):
    class Boom(Exception):
        pass

    error = Boom("index offline")
    with pytest.raises(Boom) as caught:
        with ragtrace.rag_pipeline("failing"):
            with ragtrace.retrieve("q", data_source="idx"):
                raise error
    assert caught.value is error
    retrieve = spans.one("retrieve")
    assert retrieve.status.status_code == StatusCode.ERROR
    assert retrieve.attributes[names.ERROR_TYPE].endswith("Boom")
    event = next(e for e in retrieve.events if e.name == "exception")
    assert event.attributes["exception.message"] == "index offline"
    assert spans.one("pipeline").status.status_code == StatusCode.ERROR


def test_async_context_managers(spans):
    async def main():
        async with ragtrace.rag_pipeline("async-qa", query="q") as run:
            async with ragtrace.retrieve("q") as r:
                await asyncio.sleep(0)
                r.record(["alpha text", "beta text"])
            async with ragtrace.assemble() as ctx:
                for chunk in r.chunks:
                    ctx.add(chunk)
            async with ragtrace.generate(model="m") as g:
                g.record("alpha [1]")
        return run

    run = asyncio.run(main())
    assert run.metrics["retrieved"] == 2
    assert run.metrics["cited"] == 1
    ids = list(spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CHUNK_IDS])
    assert list(spans.one("generate").attributes[names.RAG_CITATION_IDS]) == [ids[0]]


def test_threads_never_mix_state(spans):
    results: dict[int, dict] = {}

    def worker(n: int) -> None:
        docs = [{"id": f"t{n}-{i}", "content": f"thread {n} chunk {i}"} for i in range(n + 1)]
        with ragtrace.rag_pipeline("threaded", query=f"q{n}") as run:
            with ragtrace.retrieve() as r:
                r.record(docs)
            with ragtrace.assemble() as ctx:
                for d in docs[:1]:
                    ctx.add(d)
            with ragtrace.generate() as g:
                g.record("[1]")
        results[n] = run.metrics

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, metrics in results.items():
        assert metrics["retrieved"] == n + 1
        assert metrics["recall_proxy"] == pytest.approx(1 / (n + 1))
    for span in spans.by_stage("retrieve"):
        ids = list(span.attributes[names.RAG_RETRIEVAL_CHUNK_IDS])
        assert len({i.split("-")[0] for i in ids}) == 1


def test_hundred_asyncio_pipelines_never_mix(spans):
    async def one(n: int):
        docs = [{"id": f"a{n}-{i}", "content": f"task {n} text {i}"} for i in range(n % 7 + 1)]
        async with ragtrace.rag_pipeline("tasks") as run:
            with ragtrace.retrieve() as r:
                await asyncio.sleep(0)
                r.record(docs)
            await asyncio.sleep(0)
            with ragtrace.assemble() as ctx:
                await asyncio.sleep(0)
                for d in docs:
                    ctx.add(d)
            with ragtrace.generate() as g:
                await asyncio.sleep(0)
                g.record("[1]")
        return n, run.metrics

    async def main():
        return await asyncio.gather(*(one(n) for n in range(100)))

    for n, metrics in asyncio.run(main()):
        assert metrics["retrieved"] == n % 7 + 1
        assert metrics["in_context"] == n % 7 + 1
        assert metrics["cited"] == 1
    roots = {s.context.trace_id for s in spans.by_stage("pipeline")}
    assert len(roots) == 100
    for span in spans.by_stage("retrieve"):
        prefixes = {i.split("-")[0] for i in span.attributes[names.RAG_RETRIEVAL_CHUNK_IDS]}
        assert len(prefixes) == 1


def test_nan_scores_and_odd_items_do_not_fake_scores(spans):
    with ragtrace.rag_pipeline("odd") as run:
        with ragtrace.retrieve() as r:
            r.record([{"id": "x", "score": float("nan"), "content": "x"}, None, 42.0, {"id": "y", "score": "0.4"}])
    attrs = spans.one("retrieve").attributes
    assert list(attrs[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["x", "y"]  # a bare number is not a document
    assert json.loads(attrs[names.GEN_AI_RETRIEVAL_DOCUMENTS]) == [{"id": "x", "score": None}, {"id": "y", "score": 0.4}]
    # a missing score: Phoenix can't derive the OpenInference documents, so they carry id and score
    assert attrs["retrieval.documents.0.document.id"] == "x" and "retrieval.documents.0.document.score" not in attrs
    assert attrs[names.RAG_UNREADABLE_ITEMS] == 2
    assert names.RAG_RETRIEVAL_TOP_SCORE not in attrs  # the top-ranked chunk has no score
    assert run.metrics["retrieved"] == 2


def test_stages_outside_a_pipeline_share_the_trace(spans):
    tracer = spans.provider.get_tracer("app")
    with tracer.start_as_current_span("request"):
        with ragtrace.retrieve("q") as r:
            r.record(DOCS[:2])
        with ragtrace.assemble() as ctx:
            ctx.add(DOCS[0])
        with ragtrace.generate() as g:
            g.record("See [1].")
    generate = spans.one("generate")
    assert generate.attributes["rag.metrics.retrieved"] == 2
    assert generate.attributes["rag.metrics.recall_proxy"] == 0.5
    assert generate.attributes["rag.metrics.context_precision"] == 0.5


def test_stages_outside_any_span_are_traces_of_their_own_and_the_answer_says_why(spans, caplog):
    """Issue 16 item 15: with no pipeline and no span of the app's, each stage is a trace of its
    own; the answer's "[1]" used to count as 1 invalid citation with no hint why."""
    caplog.set_level(logging.WARNING, logger="ragtrace")
    for _ in range(2):  # two requests: the hint is logged once per process
        with ragtrace.retrieve("q") as r:
            r.record(DOCS[:2])
        with ragtrace.assemble() as ctx:
            ctx.add(DOCS[0])
            ctx.render(question="q")
        with ragtrace.generate(model="m") as g:
            g.record("See [1].")
    with ragtrace.rag_pipeline("control"):  # the same stages inside a pipeline are scored
        with ragtrace.retrieve("q") as r:
            r.record(DOCS[:2])
        with ragtrace.assemble() as ctx:
            ctx.add(DOCS[0])
        with ragtrace.generate(model="m") as g:
            g.record("See [1].")
    *outside, inside = spans.by_stage("generate")
    assert len({s.context.trace_id for s in spans.all()}) == 7  # 6 stages alone, 1 pipeline
    for span in outside:
        attributes = span.attributes
        assert attributes[names.RAG_CITATION_STATUS] == "outside_pipeline"
        assert names.RAG_CITATION_INVALID_COUNT not in attributes
        assert attributes[names.RAG_METRICS_STATUS].split(",")[-1] == "outside_pipeline"
        assert span.status.status_code is StatusCode.UNSET  # the app's call did not fail
    assert inside.attributes[names.RAG_CITATION_INVALID_COUNT] == 0
    assert names.RAG_CITATION_STATUS not in inside.attributes
    hints = [r.getMessage() for r in caplog.records if r.name == "ragtrace" and "outside any rag_pipeline" in r.getMessage()]
    assert len(hints) == 1 and "rag_pipeline(" in hints[0] and "context=ctx" in hints[0]


def test_inside_a_pipeline_with_no_context_a_citation_is_not_counted_invalid_on_the_span(spans):
    """No assembly recorded: nothing a label could resolve against, so the span carries no invalid
    count (it said 1 while the figures said no_context)."""
    with ragtrace.rag_pipeline("no-assembly") as run:
        with ragtrace.retrieve() as r:
            r.record(DOCS[:1])
        with ragtrace.generate(model="m", prompt="[1] Paris.\nQ?") as g:
            g.record("Paris [1].")
    attributes = spans.one("generate").attributes
    assert attributes[names.RAG_METRICS_STATUS] == "no_context" and "no_context" in run.status
    assert names.RAG_CITATION_INVALID_COUNT not in attributes
    assert names.RAG_CITATION_INVALID_LABELS not in attributes
    assert attributes[names.RAG_CITATION_FORMAT] == "inline"  # what was parsed is still said


def test_non_answer_generations_are_left_out(spans):
    with ragtrace.rag_pipeline("grader") as run:
        with ragtrace.generate(role="rewrite") as rewrite:
            rewrite.record("rewritten query")
        with ragtrace.retrieve() as r:
            r.record(DOCS)
        with ragtrace.assemble() as answer_ctx:
            answer_ctx.add(DOCS[0])
        with ragtrace.assemble() as grader_ctx:
            for d in DOCS:
                grader_ctx.add(d)
        with ragtrace.generate(context=answer_ctx) as g:
            g.record("[1]")
        with ragtrace.generate(role="grader", context=grader_ctx) as grader:
            grader.record("[1][2][3][4] all relevant")
    assert run.metrics["in_context"] == 1
    assert run.metrics["cited"] == 1
    assert run.metrics["recall_proxy"] == 0.25
    roles = sorted(s.attributes[names.RAG_GENERATION_ROLE] for s in spans.by_stage("generate"))
    assert roles == ["answer", "grader", "rewrite"]
    grader_span = next(s for s in spans.by_stage("generate") if s.attributes[names.RAG_GENERATION_ROLE] == "grader")
    assert "rag.metrics.recall_proxy" not in grader_span.attributes


def test_stream_chunks_keep_usage_model_and_finish_reason(spans):
    chunks = [
        {"id": "c1", "model": "m-1", "choices": [{"delta": {"content": "Hi "}}]},
        {"id": "c1", "model": "m-1", "choices": [{"delta": {"content": "[1]"}, "finish_reason": "stop"}]},
        {"id": "c1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
    ]
    with ragtrace.rag_pipeline("streamed") as run:
        with ragtrace.retrieve() as r:
            r.record(DOCS[:2])
        with ragtrace.assemble() as ctx:
            ctx.add(DOCS[0])
        with ragtrace.generate(model="m", prompt=ctx.prompt) as g:
            assert list(g.stream(chunks)) == chunks
    assert run.metrics["cited"] == 1
    attrs = spans.one("generate").attributes
    assert attrs[names.GEN_AI_REQUEST_STREAM] is True
    assert attrs[names.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert attrs[names.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert attrs[names.GEN_AI_RESPONSE_MODEL] == "m-1"
    assert attrs[names.GEN_AI_RESPONSE_ID] == "c1"
    assert list(attrs[names.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert attrs[names.OI_OUTPUT_VALUE] == "Hi [1]"


def test_generation_points_at_the_assemble_span_it_was_scored_against(spans):
    run_pipeline()
    assemble = spans.one("assemble")
    generate = spans.one("generate")
    assert generate.attributes[names.RAG_GENERATION_CONTEXT_SPAN_ID] == format(assemble.context.span_id, "016x")


def test_run_keeps_its_span_and_trace_id_after_exit(spans):
    run = run_pipeline()
    root = spans.one("pipeline")
    assert run.span.get_span_context().span_id == root.context.span_id
    assert run.trace_id == format(root.context.trace_id, "032x")
