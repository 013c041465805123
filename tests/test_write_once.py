"""Each fact goes out once per reader: the prompt, each chunk's text and the answer are not copied
across attributes that the same reader would read twice (issue #17). And whatever ragtrace does to
get there, every span processor the app configured sees the finished attributes, and ``run.metrics``
holds the figures after the block."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

import ragtrace
from ragtrace._internal import names

DOCS = [{"id": f"d{i}", "score": 0.9 - i / 10, "content": f"Passage {i}: chunk text number {i} about ranking."} for i in range(4)]
QUERY = "How are passages ranked?"
ANSWER = "Passages are ranked lexically [1] and reranked [2]."


def pipeline() -> ragtrace.RagPipeline:
    with ragtrace.rag_pipeline("once", query=QUERY) as run:
        with ragtrace.retrieve(QUERY, data_source="kb") as r:
            r.record(DOCS)
        with ragtrace.rerank(model="m", top_n=3) as rr:
            rr.record([DOCS[2], DOCS[0], DOCS[1]])
        with ragtrace.assemble() as ctx:
            ctx.add(rr.chunks)
            prompt = ctx.render(question=QUERY)
        with ragtrace.generate(model="g", prompt=prompt) as g:
            g.record(ANSWER)
    return run


def holders(spans: list[ReadableSpan], text: str) -> list[str]:
    """``stage/key`` of every attribute whose value contains ``text`` (JSON values included)."""
    found = []
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]  # as it appears inside a JSON value
    for span in spans:
        for key, value in span.attributes.items():
            values = value if isinstance(value, tuple) else (value,)
            if any(isinstance(v, str) and (text in v or escaped in v) for v in values):
                found.append(f"{span.attributes[names.RAG_STAGE]}/{key}")
    return sorted(found)


def test_the_prompt_each_chunk_and_the_answer_go_out_once_per_reader(spans):
    ragtrace.configure(tracer_provider=spans.provider)
    pipeline()
    exported = spans.all()
    generate = spans.one("generate").attributes
    prompt = json.loads(generate[names.GEN_AI_INPUT_MESSAGES])[0]["parts"][0]["content"]
    # the prompt: the PROMPT span's output (Phoenix) and the chat span's messages (GenAI; Phoenix
    # derives llm.input_messages from them)
    assert holders(exported, prompt) == ["assemble/output.value", "generate/gen_ai.input.messages"]
    # a chunk's own text: its retrieved document, and the prompt (above) when it is in context
    assert holders(exported, DOCS[0]["content"]) == [
        "assemble/output.value", "generate/gen_ai.input.messages", "retrieve/retrieval.documents.0.document.content"
    ]
    assert holders(exported, DOCS[3]["content"]) == ["retrieve/retrieval.documents.3.document.content"]
    # the answer: the chat span's messages (GenAI) and output (Phoenix's LLM output), and the root's output
    assert holders(exported, ANSWER) == ["generate/gen_ai.output.messages", "generate/output.value", "pipeline/output.value"]
    # the query: the root's input and the retriever's query text (Phoenix maps it to input.value)
    assert holders(exported, QUERY) == [
        "assemble/llm.prompt_template.variables", "assemble/output.value", "generate/gen_ai.input.messages",
        "pipeline/input.value", "retrieve/gen_ai.retrieval.query.text",
    ]


def test_the_figures_are_not_copied_into_openinference_evaluations(spans):
    ragtrace.configure(tracer_provider=spans.provider)
    run = pipeline()
    root = spans.one("pipeline")
    assert not [k for k in root.attributes if k.startswith("trace.evaluations.")]
    assert {k: root.attributes[names.metric_attribute(k)] for k in run.metrics} == {
        k: tuple(v) if isinstance(v, list) else v for k, v in run.metrics.items()
    }
    events = [e for e in root.events if e.name == names.GEN_AI_EVALUATION_RESULT]
    assert [e.attributes[names.GEN_AI_EVALUATION_NAME] for e in events] == [names.EVALUATION_NAME_PREFIX + m for m in names.PROXY_METRICS]


def test_a_reranked_chunk_the_trace_has_not_shown_keeps_its_text(spans):
    """Only text a retrieve span already carries is left off the reranker's documents."""
    ragtrace.configure(tracer_provider=spans.provider)
    other = {"id": "x9", "score": 0.4, "content": "A passage the retriever never returned."}
    changed = dict(DOCS[1], content="Passage 1, as the reranker rewrote it.")
    with ragtrace.rag_pipeline("once", query=QUERY):
        with ragtrace.retrieve(QUERY) as r:
            r.record(DOCS)
        with ragtrace.rerank(model="m") as rr:
            rr.record([DOCS[0], other, changed])
    rerank = spans.one("rerank").attributes
    content = [rerank.get(names.document_keys(names.OI_RERANKER_OUTPUT_DOCUMENTS, i)[2]) for i in range(3)]
    assert content == [None, other["content"], changed["content"]]


def test_a_rerank_without_a_retrieval_keeps_every_text(spans):
    ragtrace.configure(tracer_provider=spans.provider)
    with ragtrace.rerank(model="m") as rr:
        rr.record(DOCS[:2])
    rerank = spans.one("rerank").attributes
    assert [rerank[names.document_keys(names.OI_RERANKER_OUTPUT_DOCUMENTS, i)[2]] for i in range(2)] == [d["content"] for d in DOCS[:2]]


class Recorder(SpanProcessor):
    """An app's own processor: what it sees when each span ends."""

    def __init__(self) -> None:
        self.ended: dict[str, dict[str, Any]] = {}

    def on_end(self, span: ReadableSpan) -> None:
        self.ended[str(span.attributes.get(names.RAG_STAGE))] = dict(span.attributes)


def test_the_apps_own_processor_sees_the_finished_attributes_and_run_metrics_hold_after_the_block():
    provider = TracerProvider()
    recorder = Recorder()
    provider.add_span_processor(recorder)
    ragtrace.configure(tracer_provider=provider)
    run = pipeline()
    assert run.metrics[names.METRIC_RETRIEVED] == 4 and run.metrics[names.METRIC_IN_CONTEXT] == 3
    assert run.metrics[names.METRIC_CITED] == 2
    root, answer = recorder.ended["pipeline"], recorder.ended["generate"]
    for key, value in run.metrics.items():
        stored = root[names.metric_attribute(key)]
        assert (list(stored) if isinstance(stored, tuple) else stored) == value, key
        assert (list(answer[names.metric_attribute(key)]) if isinstance(value, list) else answer[names.metric_attribute(key)]) == value, key
    assert recorder.ended["assemble"][names.RAG_CONTEXT_CHUNK_IDS] == ("d2", "d0", "d1")
    assert recorder.ended["retrieve"][names.RAG_RETRIEVAL_CHUNK_IDS] == ("d0", "d1", "d2", "d3")
    assert answer[names.RAG_CITATION_IDS] == ("d2", "d0")


def test_the_roots_figures_are_the_answers_when_nothing_changed_since(spans, monkeypatch):
    """One answer and no retrieval after it: the root's figures are computed once, not twice."""
    from ragtrace._internal.core import figures

    calls = []
    real = figures.compute
    monkeypatch.setattr(figures, "compute", lambda *a, **k: calls.append(1) or real(*a, **k))
    ragtrace.configure(tracer_provider=spans.provider)
    run = pipeline()
    assert len(calls) == 1
    assert {k: spans.one("pipeline").attributes[names.metric_attribute(k)] for k in run.metrics} == {
        k: spans.one("generate").attributes[names.metric_attribute(k)] for k in run.metrics
    }
    # a retrieval after the answer changes the trace's figures: they are computed again
    calls.clear()
    with ragtrace.rag_pipeline("again", query=QUERY) as run:
        with ragtrace.retrieve(QUERY) as r:
            r.record(DOCS[:2])
        with ragtrace.generate(model="g", prompt="p") as g:
            g.record("no citations")
        with ragtrace.retrieve(QUERY) as r:
            r.record(DOCS[2:])
    assert len(calls) == 2 and run.metrics[names.METRIC_RETRIEVED] == 4


def test_ids_scores_ranks_and_names_go_out_once(spans):
    """Document ids and scores: gen_ai.retrieval.documents (Phoenix fills OpenInference's keys from
    it), the reranker's documents; ranks 1..n and all-false truncation flags are not written; model
    and provider names are the gen_ai ones (Phoenix derives llm.model_name / embedding.model_name)."""
    ragtrace.configure(tracer_provider=spans.provider)
    with ragtrace.rag_pipeline("once", query=QUERY):
        with ragtrace.embed(model="e", provider="p") as e:
            e.record([0.1, 0.2])
        with ragtrace.retrieve(QUERY, data_source="kb") as r:
            r.record(DOCS)
        with ragtrace.rerank(model="m", top_n=2) as rr:
            rr.record([DOCS[2], DOCS[0]])
        with ragtrace.assemble() as ctx:
            ctx.add(rr.chunks)
            prompt = ctx.render(question=QUERY)
        with ragtrace.generate(model="g", provider="p", prompt=prompt) as g:
            g.record(ANSWER)
    retrieve, rerank = spans.one("retrieve").attributes, spans.one("rerank").attributes
    assert json.loads(retrieve[names.GEN_AI_RETRIEVAL_DOCUMENTS]) == [{"id": d["id"], "score": d["score"]} for d in DOCS]
    assert not [k for k in retrieve if k.endswith((".document.id", ".document.score"))]
    assert names.RAG_RETRIEVAL_SCORES not in retrieve and names.RAG_RETRIEVAL_RANKS not in retrieve
    assert [rerank[f"reranker.input_documents.{i}.document.id"] for i in range(4)] == [d["id"] for d in DOCS]
    assert names.RAG_RERANK_INPUT_IDS not in rerank and names.RAG_RERANK_OUTPUT_SCORES not in rerank
    assert list(rerank[names.RAG_RERANK_OUTPUT_IDS]) == ["d2", "d0"]  # the Phoenix annotations read it
    assemble = spans.one("assemble").attributes
    assert names.RAG_CONTEXT_TRUNCATED not in assemble and assemble[names.RAG_CONTEXT_TRUNCATED_COUNT] == 0
    assert "embedding.model_name" not in spans.one("embed").attributes
    generate = spans.one("generate").attributes
    assert "llm.model_name" not in generate and "llm.provider" not in generate and generate[names.GEN_AI_REQUEST_MODEL] == "g"


def test_with_openinference_off_the_rag_arrays_keep_what_no_document_list_carries(spans):
    ragtrace.configure(tracer_provider=spans.provider, openinference=False)
    with ragtrace.rag_pipeline("once", query=QUERY):
        with ragtrace.retrieve(QUERY) as r:
            r.record(DOCS)
        with ragtrace.rerank(model="m") as rr:
            rr.record([DOCS[2], DOCS[0]])
    rerank = spans.one("rerank").attributes
    assert list(rerank[names.RAG_RERANK_INPUT_IDS]) == [d["id"] for d in DOCS]
    assert list(rerank[names.RAG_RERANK_OUTPUT_SCORES]) == [DOCS[2]["score"], DOCS[0]["score"]]
