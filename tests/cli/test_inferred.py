"""Traces from other instrumentations: figures inferred by locating chunk text, or "not measurable".

The spans are built with the plain OpenTelemetry SDK, attribute by attribute, the way
OpenInference, OpenLLMetry and GenAI-semconv instrumentations write them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry.trace import Tracer

from ragtrace._internal import names

from .helpers import DOCS, docs, provider_to, tokens

QUESTION = "What is BM25?"


def _sources(*ids: str) -> str:
    return "Use only these sources and cite them as [n].\n\n" + "\n\n".join(f"[{n}] {DOCS[i]['content']}" for n, i in enumerate(ids, start=1))


def openinference(
    path: Path,
    *,
    content: bool = True,
    prompt: bool = True,
    answer: str = "BM25 ranks lexically [1].",
    prompt_text: str | None = None,
    judge_prompt: str | None = None,
    retrieved: tuple[str, ...] = ("d1", "d2", "d3", "d4"),
) -> None:
    """One RetrievalQA run (d1-d4 retrieved, the answer shown d1, d2); ``judge_prompt``: a judge's
    model call after the answer, shown that prompt; ``retrieved``: the documents the retriever returns."""
    with _retrieval_qa(path, retrieved, content) as tracer:
        with tracer.start_as_current_span("ChatOpenAI") as llm:
            llm.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_LLM)
            if prompt:
                system = prompt_text if prompt_text is not None else _sources("d1", "d2")
                for index, (role, text) in enumerate((("system", system), ("user", QUESTION))):
                    llm.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_ROLE), role)
                    llm.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_CONTENT), text)
            llm.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_ROLE), "assistant")
            llm.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), answer)
        if judge_prompt is not None:
            with tracer.start_as_current_span("ChatOpenAI") as judge:
                judge.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_LLM)
                judge.set_attribute(names.OI_INPUT_VALUE, judge_prompt)
                judge.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), "Score: 4")


@contextmanager
def _retrieval_qa(path: Path, retrieved: tuple[str, ...] = ("d1", "d2", "d3", "d4"), content: bool = True) -> Iterator[Tracer]:
    """A RetrievalQA root and its retriever's documents in OpenInference spans; the model calls
    are the caller's, made with the tracer yielded, inside the root."""
    provider = provider_to(path, service="oi-app")
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    with tracer.start_as_current_span("RetrievalQA") as root:
        root.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_CHAIN)
        root.set_attribute(names.OI_INPUT_VALUE, QUESTION)
        with tracer.start_as_current_span("VectorStoreRetriever") as retriever:
            retriever.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_RETRIEVER)
            retriever.set_attribute(names.OI_INPUT_VALUE, QUESTION)
            for index, doc in enumerate(docs(*retrieved)):
                retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_ID), doc["id"])
                retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_SCORE), doc["score"])
                if content:
                    retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_CONTENT), doc["content"])
        yield tracer
    provider.shutdown()


def genai(path: Path) -> None:
    provider = provider_to(path, service="genai-app")
    tracer = provider.get_tracer("my.app")
    with tracer.start_as_current_span("answer-question"):
        with tracer.start_as_current_span("retrieval kb") as retrieval:
            retrieval.set_attribute(names.GEN_AI_OPERATION_NAME, names.OP_RETRIEVAL)
            retrieval.set_attribute(names.GEN_AI_RETRIEVAL_TOP_K, 2)
            retrieval.set_attribute(names.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps(docs("d5", "d6")))
        with tracer.start_as_current_span("chat gpt-4o") as chat:
            chat.set_attribute(names.GEN_AI_OPERATION_NAME, names.OP_CHAT)
            user = _sources("d5", "d6") + "\n\nQuestion: How do rerankers work?"
            chat.set_attribute(names.GEN_AI_INPUT_MESSAGES, json.dumps([{"role": "user", "parts": [{"type": "text", "content": user}]}]))
            chat.set_attribute(names.GEN_AI_OUTPUT_MESSAGES, json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "They score pairs [2]."}]}]))
    provider.shutdown()


def openllmetry(path: Path) -> None:
    provider = provider_to(path, service="traceloop-app")
    tracer = provider.get_tracer("opentelemetry.instrumentation.chromadb")
    with tracer.start_as_current_span("rag.workflow") as root:
        root.set_attribute(names.TRACELOOP_SPAN_KIND, "workflow")
        root.set_attribute(names.TRACELOOP_WORKFLOW_NAME, "traceloop-rag")
        with tracer.start_as_current_span("chroma.query") as query:
            query.set_attribute(names.DB_SYSTEM, "chroma")
            for distance, doc in enumerate(docs("d7", "d8", "d9")):
                query.add_event(names.DB_QUERY_RESULT_EVENT, {names.DB_QUERY_RESULT_ID: doc["id"], names.DB_QUERY_RESULT_DOCUMENT: doc["content"], names.DB_QUERY_RESULT_DISTANCE: float(distance)})
        with tracer.start_as_current_span("openai.chat") as chat:
            chat.set_attribute(names.LLM_REQUEST_TYPE, "chat")
            chat.set_attribute(f"{names.GEN_AI_PROMPT}.0.{names.LEGACY_MESSAGE_ROLE}", "user")
            chat.set_attribute(f"{names.GEN_AI_PROMPT}.0.{names.LEGACY_MESSAGE_CONTENT}", _sources("d7", "d8") + "\nQuestion: what about ColBERT?")
            chat.set_attribute(f"{names.GEN_AI_COMPLETION}.0.{names.LEGACY_MESSAGE_CONTENT}", "Cross-encoders [1] and ColBERT [2] differ [5].")
    provider.shutdown()


def _row(cli, path: Path, *extra) -> tuple[dict, str]:
    result = cli("report", "--json", path, *extra)
    assert result.code == 0
    (row,) = result.json()["traces"]
    return row, result.err


def test_openinference_figures_are_inferred_and_exact(cli, tmp_path):
    path = tmp_path / "oi.jsonl"
    openinference(path)
    row, err = _row(cli, path)
    assert err == ""
    assert row["source"] == "openinference" and row["inferred"] is True
    assert row["pipeline"] == "RetrievalQA" and row["query"] == QUESTION
    # R = d1..d4 (ranks 1-4), C = {d1, d2} found after their labels, K = {d1}
    assert (row["retrieved"], row["in_context"], row["cited"]) == (4, 2, 1)
    assert row["context_precision"] == 0.5
    assert row["recall_proxy"] == 0.25
    assert row["recall_proxy_weighted"] == pytest.approx(1 / (1 + 1 / 2 + 1 / 3 + 1 / 4))
    assert row["context_utilization"] == 0.5
    assert row["wasted_context_tokens"] == tokens("d2")
    assert row["cited_positions"] == [1]
    assert row["verdict"] == "ok"


def test_inferred_figures_are_marked_in_the_table(cli, tmp_path):
    path = tmp_path / "oi.jsonl"
    openinference(path)
    out = cli("report", "--plain", path).out
    assert "1 measured, 0 not measurable; inclusion: inferred 1 (~ marks figures resting on located or inferred inclusion)" in out
    run_line = next(line for line in out.splitlines() if "RetrievalQA" in line and "What is BM25?" in line)
    assert "~0.50" in run_line and "~0.25" in run_line and "~4" in run_line


def test_genai_semconv_documents_and_messages(cli, tmp_path):
    path = tmp_path / "genai.jsonl"
    genai(path)
    row, _ = _row(cli, path)
    assert row["source"] == "gen_ai" and row["inferred"] is True
    assert row["top_k"] == 2
    assert (row["retrieved"], row["in_context"], row["cited"]) == (2, 2, 1)
    assert row["context_precision"] == 1.0 and row["recall_proxy"] == 0.5
    assert row["cited_positions"] == [2]


def test_openllmetry_result_events_and_flattened_prompts(cli, tmp_path):
    path = tmp_path / "traceloop.jsonl"
    openllmetry(path)
    row, _ = _row(cli, path)
    assert row["source"] == "openllmetry" and row["pipeline"] == "traceloop-rag"
    # R = d7 d8 d9, C = {d7, d8}, K = {d7, d8}, [5] points at nothing
    assert (row["retrieved"], row["in_context"], row["cited"], row["invalid_citations"]) == (3, 2, 2, 1)
    assert row["context_precision"] == pytest.approx(2 / 3)
    assert row["recall_proxy"] == pytest.approx(2 / 3)
    assert row["verdict"] == "check" and "1 invalid citation (0 out of context, 1 unknown)" in row["reasons"]


def test_answer_without_citations_is_measured_not_perfect(cli, tmp_path):
    path = tmp_path / "oi.jsonl"
    openinference(path, answer="BM25 is a ranking function.")
    row, _ = _row(cli, path)
    assert row["recall_proxy"] == 0.0 and row["citations"] == "none"
    assert row["verdict"] == "check"


def test_ids_without_text_are_not_measurable(cli, tmp_path):
    path = tmp_path / "oi.jsonl"
    openinference(path, content=False)
    row, _ = _row(cli, path)
    assert row["verdict"] == "not measurable"
    assert row["status"][0] == "chunk_text_unavailable"
    assert row["retrieved"] == 4  # sizes stay
    for figure in ("context_precision", "recall_proxy", "recall_proxy_weighted", "context_utilization", "in_context"):
        assert row[figure] is None, figure


@pytest.mark.parametrize("answer, invalid", [("BM25 is a ranking function.", 0), ("BM25 ranks lexically [1].", 1)])
def test_a_retrieval_of_no_chunks_still_scores_the_answer(cli, tmp_path, answer, invalid):
    """0 chunks retrieved: nothing can be in the prompt, and the trace has an answer (issue 36: it
    was reported as ``no_answer``). As the SDK scores it: an empty context, no chunk cited, and a
    [1] that names nothing retrieved is an unknown citation."""
    path = tmp_path / "oi.jsonl"
    openinference(path, retrieved=(), answer=answer, prompt_text="Use only these sources and cite them as [n].\n\n(no results)")
    row, _ = _row(cli, path)
    assert "no_answer" not in row["status"]
    assert row["status"][:2] == ["empty_retrieval", "empty_context"]
    assert (row["retrieved"], row["in_context"], row["cited"], row["invalid_citations"]) == (0, 0, 0, invalid)
    assert row["unknown_citations"] == invalid and row["out_of_context_citations"] == 0


def test_prompt_not_captured_is_not_measurable(cli, tmp_path):
    path = tmp_path / "oi.jsonl"
    openinference(path, prompt=False)
    row, _ = _row(cli, path)
    assert row["verdict"] == "not measurable" and row["status"][0] == "prompt_unavailable"
    assert row["recall_proxy"] is None


def test_huge_prompt_is_skipped_with_a_warning(cli, tmp_path, monkeypatch):
    from ragtrace.cli import foreign

    monkeypatch.setattr(foreign, "MAX_PROMPT_CHARS", 1000)
    path = tmp_path / "oi.jsonl"
    openinference(path, prompt_text=_sources("d1", "d2") + "x" * 2000)
    row, err = _row(cli, path)
    assert row["verdict"] == "not measurable" and row["status"][0] == "prompt_too_large"
    assert f"{path}:" in err and "too large to search for chunks" in err


def test_mixed_file_ragtrace_and_inferred_rows(cli, tmp_path, known):
    path = tmp_path / "oi.jsonl"
    openinference(path)
    document = cli("report", "--json", known[0], path).json()
    summary = document["summary"]
    assert summary["traces"] == 6 and summary["inferred"] == 1 and summary["measurable"] == 4
    assert summary["figures"]["recall_proxy"]["n"] == 4
    assert document["groups"]["pipeline"]["RetrievalQA"]["inferred"] == 1


# --- issue 14, item 4: four traces other instrumentations write that were miscounted --------------
def _genai_retrieval(tracer, ids: tuple[str, ...]) -> None:
    with tracer.start_as_current_span("retrieval kb") as retrieval:
        retrieval.set_attribute(names.GEN_AI_OPERATION_NAME, names.OP_RETRIEVAL)
        retrieval.set_attribute(names.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps(docs(*ids)))


def test_genai_rerank_span_is_a_rerank_not_a_second_retrieval(cli, tmp_path):
    """Retrieve a, b, c; rerank to c, a; cite c: no duplicates, weighted recall (1/3) / (1 + 1/2 + 1/3)."""
    path = tmp_path / "rerank.jsonl"
    provider = provider_to(path, service="genai-app")
    tracer = provider.get_tracer("my.app")
    with tracer.start_as_current_span("answer-question"):
        _genai_retrieval(tracer, ("d1", "d2", "d3"))
        with tracer.start_as_current_span("rerank cross-encoder") as rerank:
            rerank.set_attribute(names.GEN_AI_OPERATION_NAME, names.OP_RERANK)
            rerank.set_attribute(names.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps(docs("d3", "d1")))
        with tracer.start_as_current_span("chat gpt-4o") as chat:
            chat.set_attribute(names.GEN_AI_OPERATION_NAME, names.OP_CHAT)
            chat.set_attribute(names.GEN_AI_INPUT_MESSAGES, json.dumps([{"role": "user", "parts": [{"type": "text", "content": _sources("d3", "d1")}]}]))
            chat.set_attribute(names.GEN_AI_OUTPUT_MESSAGES, json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Rerankers reorder [1]."}]}]))
    provider.shutdown()
    row, _ = _row(cli, path)
    assert row["duplicate_chunks"] == 0
    assert (row["retrieved"], row["in_context"], row["cited"]) == (3, 2, 1)
    assert row["recall_proxy_weighted"] == pytest.approx((1 / 3) / (1 + 1 / 2 + 1 / 3))  # 0.1818
    assert round(row["recall_proxy_weighted"], 4) == 0.1818
    assert row["context_precision"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("inner_answer", [True, False])
def test_nested_llm_spans_are_one_answer(cli, tmp_path, inner_answer):
    """LlamaIndex under OpenInference: an LLM span (predict) around another (complete), both with
    the prompt (and the answer, or only the outer one). One answer: its [9] is one invalid
    citation, not two."""
    path = tmp_path / "nested.jsonl"
    provider = provider_to(path, service="llama-app")
    tracer = provider.get_tracer("openinference.instrumentation.llama_index")

    def llm(span, answer: bool = True) -> None:
        span.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_LLM)
        span.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, 0, names.OI_MESSAGE_ROLE), "user")
        span.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), _sources("d1", "d2"))
        if answer:
            span.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), "BM25 ranks lexically [1]; see also [9].")

    with tracer.start_as_current_span("RetrieverQueryEngine.query") as root:
        root.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_CHAIN)
        with tracer.start_as_current_span("VectorIndexRetriever.retrieve") as retriever:
            retriever.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_RETRIEVER)
            for index, doc in enumerate(docs("d1", "d2", "d3")):
                retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_ID), doc["id"])
                retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_CONTENT), doc["content"])
        with tracer.start_as_current_span("LLM.predict") as predict:
            llm(predict)
            with tracer.start_as_current_span("OpenAI.complete") as complete:
                llm(complete, inner_answer)
    provider.shutdown()
    row, _ = _row(cli, path)
    assert row["answers"] == 1
    assert (row["retrieved"], row["in_context"], row["cited"], row["invalid_citations"]) == (3, 2, 1, 1)
    assert row["recall_proxy"] == pytest.approx(1 / 3)


def test_index_building_traces_are_not_pipeline_runs(cli, tmp_path):
    path = tmp_path / "indexing.jsonl"
    openinference(path)  # one query trace
    provider = provider_to(tmp_path / "build.jsonl", service="llama-app")
    tracer = provider.get_tracer("openinference.instrumentation.llama_index")
    with tracer.start_as_current_span("VectorStoreIndex.from_documents") as build:
        build.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_CHAIN)
        for batch in range(3):
            with tracer.start_as_current_span("OpenAIEmbedding.get_text_embedding_batch") as embed:
                embed.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_EMBEDDING)
                embed.set_attribute("embedding.model_name", "text-embedding-3-small")
    with provider.get_tracer("web").start_as_current_span("GET /health"):  # no RAG vocabulary at all: not a run either
        pass
    provider.shutdown()
    document = cli("report", "--json", path, tmp_path / "build.jsonl").json()
    assert document["inputs"]["traces"] == 3
    assert document["inputs"]["runs"] == 1 and document["summary"]["traces"] == 1
    assert document["inputs"]["traces_without_runs"] == 2
    (row,) = document["traces"]
    assert row["pipeline"] == "RetrievalQA" and row["verdict"] == "ok"
    text = cli("report", "--plain", path, tmp_path / "build.jsonl").out
    assert "2 trace(s) with no retrieval or model call (index building, other work) are not pipeline runs" in text


def test_flat_gen_ai_prompt_string_is_searched(cli, tmp_path):
    """What RAGScope exports: the prompt and completion as flat gen_ai.prompt / gen_ai.completion strings."""
    path = tmp_path / "flat.jsonl"
    provider = provider_to(path, service="ragscope-app")
    tracer = provider.get_tracer("ragscope")
    with tracer.start_as_current_span("rag.query"):
        _genai_retrieval(tracer, ("d1", "d2", "d3"))
        with tracer.start_as_current_span("llm.generate") as llm:
            llm.set_attribute(names.GEN_AI_PROMPT, _sources("d1", "d2") + "\n\nQuestion: " + QUESTION)
            llm.set_attribute(names.GEN_AI_COMPLETION, "BM25 ranks lexically [1].")
    provider.shutdown()
    row, _ = _row(cli, path)
    assert row["inferred"] is True and row["verdict"] == "ok", row["status"]
    assert (row["retrieved"], row["in_context"], row["cited"]) == (3, 2, 1)
    assert row["cited_positions"] == [1]


def test_vercel_ai_sdk_prompt_is_searched(cli, tmp_path):
    """The Vercel AI SDK: ``ai.prompt`` (JSON: system, prompt) on ai.generateText, around
    ai.generateText.doGenerate with ``ai.prompt.messages``; the answer in ``ai.response.text``."""
    path = tmp_path / "vercel.jsonl"
    provider = provider_to(path, service="next-app")
    tracer = provider.get_tracer("ai")
    with tracer.start_as_current_span("answer"):
        _genai_retrieval(tracer, ("d1", "d2", "d3"))
        with tracer.start_as_current_span("ai.generateText") as outer:
            outer.set_attribute("operation.name", "ai.generateText")
            outer.set_attribute(names.AI_PROMPT, json.dumps({"system": _sources("d2", "d3"), "prompt": QUESTION}))
            outer.set_attribute(names.AI_RESPONSE_TEXT, "Dense retrieval embeds [1].")
            with tracer.start_as_current_span("ai.generateText.doGenerate") as inner:
                inner.set_attribute("operation.name", "ai.generateText.doGenerate")
                messages = [{"role": "system", "content": _sources("d2", "d3")}, {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
                inner.set_attribute(names.AI_PROMPT_MESSAGES, json.dumps(messages))
                inner.set_attribute(names.AI_RESPONSE_TEXT, "Dense retrieval embeds [1].")
    provider.shutdown()
    row, _ = _row(cli, path)
    assert row["inferred"] is True and row["status"] == [], row["status"]
    assert row["reasons"] == ["recall_w<0.3"]  # d2, cited, is ranked 2nd of 3
    assert row["answers"] == 1
    assert (row["retrieved"], row["in_context"], row["cited"]) == (3, 2, 1)
    assert row["recall_proxy_weighted"] == pytest.approx((1 / 2) / (1 + 1 / 2 + 1 / 3))


def test_a_citation_to_chunks_found_under_no_readable_label_is_not_measurable(cli, tmp_path):
    """The chunks are in the prompt, but under labels the search can't read: "[1]" may be d1, so
    the answer's citations are not scored (it was invalid_citations 1 and recall_proxy 0.0)."""
    path = tmp_path / "oi.jsonl"
    unlabelled = "Use these passages.\n\n" + "\n\n".join(f"({word}) {DOCS[i]['content']}" for word, i in (("one", "d1"), ("two", "d2")))
    openinference(path, prompt_text=unlabelled)
    row, _ = _row(cli, path)
    assert (row["retrieved"], row["in_context"]) == (4, 2)
    assert row["recall_proxy"] is None and row["invalid_citations"] is None
    assert "citations_unresolved" in row["status"]


def test_an_llm_grader_shown_every_chunk_unlabelled_is_not_the_answer(cli, tmp_path):
    """After the answer (sources labelled), a judge call is shown every retrieved chunk with no
    labels. Its chunks were never the answer's context: C = {d1, d2}, not all four."""
    path = tmp_path / "graded.jsonl"
    every_chunk = "\n\n".join(d["content"] for d in docs("d1", "d2", "d3", "d4"))
    openinference(path, judge_prompt="Rate 1-5 how well the answer is supported by these passages.\n\n" + every_chunk)
    row, _ = _row(cli, path)
    assert (row["retrieved"], row["in_context"], row["cited"]) == (4, 2, 1)
    assert row["context_precision"] == 0.5 and row["recall_proxy"] == 0.25 and row["answers"] == 1


def _agent_trace(path: Path, last_only: bool, answer: str) -> None:
    """An agent in OpenInference spans: a tool-choice call, round 1 (d1, d2), a tool-choice call
    shown round 1, round 2 (d3, d4), the answer. Each tool message numbers its documents from [1];
    a tool-choice call writes no text. ``last_only``: the answer is shown round 2 alone
    (LangGraph's custom RAG agent), else every message so far."""
    provider = provider_to(path, service="agent-app")
    tracer = provider.get_tracer("openinference.instrumentation.langchain")

    def tool_message(*ids: str) -> str:
        return "\n\n".join(f"[{n}] {d['content']}" for n, d in enumerate(docs(*ids), start=1))

    def llm(messages: list[tuple[str, str]], output: str | None) -> None:
        with tracer.start_as_current_span("ChatOpenAI") as span:
            span.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_LLM)
            for index, (role, text) in enumerate(messages):
                span.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_ROLE), role)
                span.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_CONTENT), text)
            span.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_ROLE), "assistant")
            if output is not None:
                span.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), output)

    def retrieve(*ids: str) -> None:
        with tracer.start_as_current_span("retrieve_blog_posts") as span:
            span.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_RETRIEVER)
            for index, doc in enumerate(docs(*ids)):
                span.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_ID), doc["id"])
                span.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_CONTENT), doc["content"])

    with tracer.start_as_current_span("LangGraph") as root:
        root.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_CHAIN)
        root.set_attribute(names.OI_INPUT_VALUE, QUESTION)
        system = ("system", "Answer from the retrieved documents and cite them as [n].")
        llm([system, ("user", QUESTION)], None)
        retrieve("d1", "d2")
        first = [system, ("user", QUESTION), ("assistant", ""), ("tool", tool_message("d1", "d2"))]
        llm(first, None)
        retrieve("d3", "d4")
        if last_only:
            llm([("user", f"Question: {QUESTION}\nContext: {tool_message('d3', 'd4')}")], answer)
        else:
            llm([*first, ("assistant", ""), ("tool", tool_message("d3", "d4"))], answer)
    provider.shutdown()


def test_an_agent_answering_from_the_last_round_resolves_its_labels(cli, tmp_path):
    """Issue 36: each round numbers from [1]; the answer's prompt shows round 2 only, so [1] is d3.
    The tool-choice calls wrote no text: they are not answers, and round 1 is not in context."""
    path = tmp_path / "agent.jsonl"
    _agent_trace(path, last_only=True, answer="Rerankers use cross-encoders [1].")
    row, _ = _row(cli, path)
    # R = d1..d4 (ranks 1, 2, 1, 2), C = {d3, d4}, K = {d3}
    assert (row["retrieved"], row["in_context"], row["cited"], row["invalid_citations"]) == (4, 2, 1, 0)
    assert row["context_precision"] == 0.5 and row["recall_proxy"] == 0.25
    assert row["cited_positions"] == [1] and row["wasted_context_tokens"] == tokens("d4")
    assert "citations_unresolved" not in row["status"]


def test_an_agent_shown_two_rounds_that_share_labels_is_unresolved(cli, tmp_path):
    path = tmp_path / "agent.jsonl"
    _agent_trace(path, last_only=False, answer="Rerankers use cross-encoders [1].")
    row, _ = _row(cli, path)
    assert (row["retrieved"], row["in_context"]) == (4, 4)
    assert "citations_unresolved" in row["status"] and row["cited"] is None


def _calls(path: Path, calls: list[tuple[str, str]]) -> None:
    """A RetrievalQA run in OpenInference spans: d1-d4 retrieved, then one model call per
    (prompt, output), the prompt a string (``input.value``), nothing saying which call answered."""
    with _retrieval_qa(path) as tracer:
        for prompt, output in calls:
            with tracer.start_as_current_span("ChatOpenAI") as llm:
                llm.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_LLM)
                llm.set_attribute(names.OI_INPUT_VALUE, prompt)
                llm.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), output)


def _bare(*ids: str) -> str:
    """Chunks joined with no label, as LangChain's default ``format_docs`` joins them."""
    return "\n\n".join(d["content"] for d in docs(*ids))


def _bare_answer(*ids: str) -> tuple[str, str]:
    return f"Use the following context to answer.\n\n{_bare(*ids)}\n\nQuestion: {QUESTION}", "BM25 ranks terms lexically."


GRADE_ALL = "Rate 1-5 how well the answer is supported by these passages.\n\n"


@pytest.mark.parametrize(
    "calls",
    [
        # the answer shown d1, d2 unlabelled, then a judge shown all four unlabelled
        [_bare_answer("d1", "d2"), (GRADE_ALL + _bare("d1", "d2", "d3", "d4"), "Score: 4")],
        # the same, the judge first (a pre-answer check)
        [(GRADE_ALL + _bare("d1", "d2", "d3", "d4"), "Score: 4"), _bare_answer("d1", "d2")],
        # both labelled alike: the answer [1]-[2], the judge [1]-[4]
        [(_sources("d1", "d2") + f"\n\nQuestion: {QUESTION}", "BM25 ranks lexically [1]."), (GRADE_ALL + _sources("d1", "d2", "d3", "d4"), "Score: 4")],
        # a relevance grader shown one chunk per call (corrective RAG), then the answer shown the kept two
        [*((f"Is this document relevant to '{QUESTION}'? Answer yes or no.\n\n{_bare(i)}", "yes" if i < "d3" else "no") for i in ("d1", "d2", "d3", "d4")), _bare_answer("d1", "d2")],
    ],
    ids=["judge-after", "judge-first", "both-labelled", "per-chunk-grader"],
)
def test_calls_sharing_some_chunks_leave_the_answer_unknown(cli, tmp_path, calls):
    """Two calls that wrote text show some of the same chunks, but not the same ones, and nothing in
    the trace says which answered. The truth is C = {d1, d2}; counting every call's chunks gave
    in_context 4 and precision 1.0. Not measurable (answer_call_ambiguous); R's figures stay."""
    path = tmp_path / "two-calls.jsonl"
    _calls(path, calls)
    row, _ = _row(cli, path)
    assert row["verdict"] == "not measurable" and row["status"][0] == names.STATUS_ANSWER_CALL_AMBIGUOUS
    assert row["retrieved"] == 4 and row["duplicate_chunks"] == 0
    for figure in ("in_context", "context_precision", "cited", "invalid_citations", "recall_proxy", "wasted_context_tokens", "cited_positions"):
        assert row[figure] is None, figure
    assert "no_context" not in row["status"] and "no_answer" not in row["status"]


def test_a_grader_shown_the_answers_own_chunks_keeps_the_figures(cli, tmp_path):
    """A groundedness check shown exactly the answer's chunks: the context is C = {d1, d2}
    whichever call answered, so the figures stand (K = {} as neither cites)."""
    path = tmp_path / "same-chunks.jsonl"
    _calls(path, [_bare_answer("d1", "d2"), ("Is the answer grounded in these facts?\n\n" + _bare("d1", "d2"), "yes")])
    row, _ = _row(cli, path)
    assert (row["retrieved"], row["in_context"], row["cited"]) == (4, 2, 0)
    assert row["context_precision"] == 0.5 and row["recall_proxy"] == 0.0
    assert names.STATUS_ANSWER_CALL_AMBIGUOUS not in row["status"]


def test_refine_steps_over_disjoint_chunks_are_one_answer(cli, tmp_path):
    """A refine chain: the first call shown d1, d2, the second the draft and d3. No chunk is shown
    twice, so the calls are steps of one answer: C = {d1, d2, d3} (the SDK scores refine alike)."""
    path = tmp_path / "refine.jsonl"
    refine = f"The original query is: {QUESTION}\nExisting answer: BM25 ranks terms lexically.\nRefine it with this context:\n\n{_bare('d3')}"
    _calls(path, [_bare_answer("d1", "d2"), (refine, "BM25 ranks terms lexically; rerankers reorder them.")])
    row, _ = _row(cli, path)
    assert (row["retrieved"], row["in_context"], row["cited"]) == (4, 3, 0)
    assert row["context_precision"] == 0.75
    assert names.STATUS_ANSWER_CALL_AMBIGUOUS not in row["status"]
