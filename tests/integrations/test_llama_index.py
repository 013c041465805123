"""The LlamaIndex integration on query engines (``as_query_engine()``: plain, streamed, async,
reranked, repacked) with the real llama-index-core, turned on by one line."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index_apps import QUESTION, BreakingLLM, CitingLLM, check_one_call, index, metrics
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace._internal.integrations.llama_index import LlamaIndexInstrumentor


class FailingLLM(CitingLLM):
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise TimeoutError("the model is down")


class KeepFirst(BaseNodePostprocessor):
    """A node postprocessor (a reranker's place in the pipeline) keeping the best node only."""

    def _postprocess_nodes(self, nodes: list, query_bundle: Any = None) -> list:
        return nodes[:1]


def test_a_query_engine_is_one_trace_with_declared_placements_and_figures(llama_index_on):
    llm = CitingLLM(prompts=[])
    response = index().as_query_engine(llm=llm, similarity_top_k=2).query(QUESTION)
    assert type(response).__name__ == "Response" and str(response).startswith("It takes 5 business days [")
    check_one_call(llama_index_on, response, llm)
    assert llama_index_on.one("pipeline").attributes["rag.query.hash"]


def test_inside_the_users_pipeline_the_stages_nest_under_it(llama_index_on):
    llm = CitingLLM(prompts=[])
    with ragtrace.rag_pipeline("support", query=QUESTION) as run:
        response = index().as_query_engine(llm=llm, similarity_top_k=2).query(QUESTION)
    check_one_call(llama_index_on, response, llm, root_name="invoke_workflow support")
    assert run.metrics["cited"] == 1


def test_a_streamed_answer_reaches_the_app_unread_and_the_root_ends_with_it(llama_index_on):
    llm = CitingLLM(prompts=[])
    response = index().as_query_engine(llm=llm, similarity_top_k=2, streaming=True).query(QUESTION)
    assert type(response).__name__ == "StreamingResponse"
    assert llm.prompts == [] and not llama_index_on.by_stage("generate") and not llama_index_on.by_stage("pipeline")
    tokens = list(response.response_gen)
    assert "".join(tokens).startswith("It takes 5 business days [")
    check_one_call(llama_index_on, response, llm)
    assert llama_index_on.one("generate").attributes["gen_ai.output.messages"].count("It takes 5 business days") == 1
    assert llama_index_on.one("generate").attributes["gen_ai.response.time_to_first_chunk"] >= 0


class OpenAIStyleLLM(CitingLLM):
    """Streams as llama-index-llms-openai does: each response's ``raw`` is the provider's own
    chunk (the openai SDK's ``ChatCompletionChunk``), the last one with a ``finish_reason``.
    ``cut_after`` drops the connection after that many words: no final chunk, no error."""

    cut_after: int | None = None

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        from openai.types.chat import ChatCompletionChunk

        words = re.findall(r"\S+\s*", self.answer(prompt))

        def chunk(delta: dict, finish: str | None) -> ChatCompletionChunk:
            return ChatCompletionChunk.model_validate(
                {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            )

        def pieces() -> Any:
            so_far = ""
            for word in words[: self.cut_after]:
                so_far += word
                yield CompletionResponse(text=so_far, delta=word, raw=chunk({"content": word}, None))
            if self.cut_after is None:
                yield CompletionResponse(text=so_far, delta="", raw=chunk({}, "stop"))

        return pieces()


@pytest.mark.parametrize("cut_after", [None, 5])
def test_a_stream_whose_provider_chunks_stop_before_the_finish_reason_is_not_scored(llama_index_on, cut_after):
    """A dropped connection: "It takes 5 business days " with no citation and no final chunk.
    Scored as it stands that would be cited 0, recall 0.0 where the whole answer gives 1/2: not
    measurable (answer_incomplete). The whole stream scores as usual."""
    llm = OpenAIStyleLLM(prompts=[], cut_after=cut_after)
    response = index().as_query_engine(llm=llm, similarity_top_k=2, streaming=True).query(QUESTION)
    text = "".join(response.response_gen)
    got = metrics(llama_index_on.one("pipeline"))
    if cut_after is None:
        assert text.endswith("].") and got["cited"] == 1 and "status" not in got
        return
    assert text == "It takes 5 business days "
    assert llama_index_on.one("generate").attributes["rag.citation.status"] == "answer_incomplete"
    assert got["status"] == "answer_incomplete" and "recall_proxy" not in got and got["retrieved"] == 2


def test_an_async_query(llama_index_on):
    llm = CitingLLM(prompts=[])
    response = asyncio.run(index().as_query_engine(llm=llm, similarity_top_k=2).aquery(QUESTION))
    check_one_call(llama_index_on, response, llm)


def test_a_postprocessor_is_a_rerank_span_and_only_its_nodes_are_assembled(llama_index_on):
    llm = CitingLLM(prompts=[])
    response = index().as_query_engine(llm=llm, similarity_top_k=2, node_postprocessors=[KeepFirst()]).query(QUESTION)
    retrieved = llama_index_on.one("retrieve").attributes["rag.retrieval.chunk_ids"]
    rerank = llama_index_on.one("rerank").attributes
    inputs = [rerank[f"reranker.input_documents.{i}.document.id"] for i in range(2)]
    assert (inputs, list(rerank["rag.rerank.output_ids"])) == (list(retrieved), [retrieved[0]])
    assembled = llama_index_on.one("assemble").attributes
    assert list(assembled["rag.context.chunk_ids"]) == [retrieved[0]] == [n.node_id for n in response.source_nodes]
    assert dict(zip(assembled["rag.context.dropped_ids"], assembled["rag.context.dropped_reasons"])) == {retrieved[1]: "reranked_out"}
    got = metrics(llama_index_on.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"], got["context_precision"]) == (2, 1, 1, 0.5, 0.5)


def test_a_small_context_window_repacks_the_nodes_so_they_are_located_and_refined(llama_index_on):
    """CompactAndRefine cuts node text across several calls: placements are located, not declared;
    the first call answers, the others refine, and only the final answer is scored."""
    llm = CitingLLM(prompts=[], context_window=700)
    response = index(scale=6).as_query_engine(llm=llm, similarity_top_k=3).query(QUESTION)
    calls = llama_index_on.by_stage("generate")
    assert len(calls) == len(llm.prompts) > 1
    assert [c.attributes["rag.generation.role"] for c in calls] == ["answer"] + ["refine"] * (len(calls) - 1)
    assert {a.attributes["rag.context.inclusion_method"] for a in llama_index_on.by_stage("assemble")} == {"located"}
    final = str(response)
    cited = re.findall(r"\[(kb-[a-z]+)\]", final)
    got = metrics(llama_index_on.one("pipeline"))
    assert got["retrieved"] == got["in_context"] == 3
    assert got["cited"] == len(set(cited))  # the final answer's citations, not the drafts'


def test_mock_llm_echo_is_traced_and_cites_nothing(llama_index_on):
    response = index().as_query_engine(llm=MockLLM(), similarity_top_k=2).query(QUESTION)
    generated = llama_index_on.one("generate").attributes
    assert generated["rag.generation.role"] == "answer"
    assert str(response) in generated["gen_ai.output.messages"].replace("\\n", "\n")  # MockLLM echoes its prompt
    got = metrics(llama_index_on.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"]) == (2, 2, 0, 0.0)


def test_the_models_error_passes_through_and_is_recorded(llama_index_on):
    with pytest.raises(TimeoutError, match="the model is down"):
        index().as_query_engine(llm=FailingLLM(prompts=[]), similarity_top_k=2).query(QUESTION)
    for stage in ("generate", "pipeline"):
        assert llama_index_on.one(stage).status.status_code is StatusCode.ERROR, stage
    assert llama_index_on.one("assemble").end_time is not None


def test_uninstrument_removes_the_handlers(spans):
    root = get_dispatcher()
    before = (list(root.span_handlers), list(root.event_handlers))
    LlamaIndexInstrumentor().instrument()
    LlamaIndexInstrumentor().uninstrument()
    assert (root.span_handlers, root.event_handlers) == before
    index().as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2).query(QUESTION)
    assert spans.all() == []


@pytest.mark.usefixtures("context_put_back")
def test_beside_openinference_nothing_breaks_and_the_figures_hold(llama_index_on):
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor as OpenInferenceLlamaIndex

    engine = index().as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2)
    OpenInferenceLlamaIndex().instrument(tracer_provider=llama_index_on.provider)
    try:
        response = engine.query(QUESTION)
    finally:
        OpenInferenceLlamaIndex().uninstrument()
    assert not trace.get_current_span().get_span_context().is_valid, "no span of the query is left current"
    ours = [s for s in llama_index_on.all() if "rag.stage" in s.attributes]
    theirs = [s for s in llama_index_on.all() if "rag.stage" not in s.attributes]
    assert {s.context.trace_id for s in llama_index_on.all()} == {ours[0].context.trace_id}  # one trace
    assert {"RetrieverQueryEngine.query", "VectorIndexRetriever.retrieve", "CitingLLM.complete"} <= {s.name for s in theirs}
    assert len(ours) == 5  # root, embed, retrieve, assemble, generate: ragtrace adds no span for theirs
    got = metrics(llama_index_on.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert [n.node_id for n in response.source_nodes] == list(llama_index_on.one("assemble").attributes["rag.context.chunk_ids"])


class OpenAIBackedLLM(CitingLLM):
    """A LlamaIndex LLM calling the OpenAI SDK, as llama-index-llms-openai does."""

    base_url: str = ""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        import openai

        client = openai.OpenAI(base_url=f"{self.base_url}/v1", api_key="sk-test", max_retries=0)
        completion = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
        return CompletionResponse(text=completion.choices[0].message.content, raw=completion)


def test_an_llm_calling_the_openai_sdk_is_one_generation_with_both_integrations_on(llama_index_on, chat_server):
    url, received = chat_server
    ragtrace.instrument("openai")
    try:
        index().as_query_engine(llm=OpenAIBackedLLM(prompts=[], base_url=url), similarity_top_k=2).query(QUESTION)
    finally:
        ragtrace.uninstrument("openai")
    assert len(received) == 1
    generated = llama_index_on.one("generate")  # the OpenAI integration left the call to LlamaIndex's span
    assert generated.name == "chat citing-llm"
    assert (generated.attributes["gen_ai.usage.input_tokens"], generated.attributes["gen_ai.usage.output_tokens"]) == (42, 9)  # from raw


def _proxy_hops() -> int:
    """How many of ragtrace's current-span proxies stand between the app and its current span."""
    from ragtrace._internal.integrations._common import _CurrentSpan

    span, hops = trace.get_current_span(), 0
    while type(span) is _CurrentSpan and hops < 1000:
        span, hops = span.__wrapped__, hops + 1
    return hops


def _live_proxies() -> int:
    import gc

    from ragtrace._internal.integrations._common import _CurrentSpan

    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is _CurrentSpan)


def _openinference_proxies() -> int:
    import gc

    from openinference.instrumentation.llama_index._handler import _CurrentSpan as OpenInferenceCurrentSpan

    return sum(1 for o in gc.get_objects() if type(o) is OpenInferenceCurrentSpan)


@pytest.mark.usefixtures("context_put_back")
@pytest.mark.parametrize("openinference_first", [False, True, None], ids=["ragtrace-first", "openinference-first", "alone"])
def test_instrument_cycles_leave_no_handlers_and_no_growing_state(spans, openinference_first):
    """Switching ragtrace (and OpenInference) on and off around plain, streamed and abandoned
    queries keeps the dispatcher's handlers, the open bookkeeping, the app's current context and
    the objects ragtrace keeps alive bounded. (Both handlers attach a context per dispatcher span
    and detach in registration order: each query used to leave one more stale proxy current,
    chained to the last, until a query took seconds.)"""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor as OpenInferenceLlamaIndex

    root = get_dispatcher()
    before = (len(root.span_handlers), len(root.event_handlers))
    built = index()
    engine = built.as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2)
    streaming = built.as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2, streaming=True)
    alive = []
    for _ in range(8):
        if openinference_first:
            OpenInferenceLlamaIndex().instrument(tracer_provider=spans.provider)
        ragtrace.instrument("llama_index")
        if openinference_first is False:
            OpenInferenceLlamaIndex().instrument(tracer_provider=spans.provider)
        try:
            tracker = LlamaIndexInstrumentor()._handlers[0]._tracker
            for _ in range(3):
                engine.query(QUESTION)
                assert "".join(streaming.query(QUESTION).response_gen).startswith("It takes")
                abandoned = streaming.query(QUESTION)
                next(abandoned.response_gen)
                del abandoned
                assert not trace.get_current_span().get_span_context().is_valid, "no span of the query is left current"
                assert _proxy_hops() <= 1
            assert (tracker.open, tracker.llm.calls) == ({}, {})
        finally:
            OpenInferenceLlamaIndex().uninstrument()
            ragtrace.uninstrument("llama_index")
        assert (len(root.span_handlers), len(root.event_handlers)) == before
        alive.append(_live_proxies())
    assert _proxy_hops() <= 1
    if openinference_first is None:
        assert alive[-1] <= alive[0], alive  # none kept per query (older tests' may linger in OpenInference)
    else:  # OpenInference keeps a streamed query's spans for 60 s; they hold what was current then
        assert alive[-1] <= 3 * _openinference_proxies(), alive


def test_an_async_stream_reaches_the_app_unread_and_the_root_ends_with_it(llama_index_on):
    """``aquery`` with ``streaming=True``: an ``AsyncStreamingResponse`` the app reads with
    ``async_response_gen()``; ragtrace reads none of it and ends the generate span with the answer."""
    llm = CitingLLM(prompts=[])
    engine = index().as_query_engine(llm=llm, similarity_top_k=2, streaming=True)

    async def run() -> tuple[Any, list[str], bool]:
        response = await engine.aquery(QUESTION)
        untouched = llm.prompts == [] and not llama_index_on.by_stage("generate")
        return response, [token async for token in response.async_response_gen()], untouched

    response, tokens, untouched = asyncio.run(run())
    assert type(response).__name__ == "AsyncStreamingResponse"
    assert untouched, "ragtrace drained the stream before the app read it"
    assert len(tokens) == 6 and "".join(tokens).startswith("It takes 5 business days [")  # one token per word, all of them
    check_one_call(llama_index_on, response, llm)
    generated = llama_index_on.one("generate").attributes
    assert generated["gen_ai.output.messages"].count("".join(tokens)) == 1
    assert 0 <= generated["gen_ai.response.time_to_first_chunk"] < (llama_index_on.one("generate").end_time - llama_index_on.one("generate").start_time) / 1e9


@pytest.mark.parametrize("asynchronous", [False, True], ids=["query", "aquery"])
def test_a_stream_that_breaks_mid_answer_passes_the_error_and_ends_its_spans_with_it(llama_index_on, asynchronous):
    engine = index().as_query_engine(llm=BreakingLLM(prompts=[]), similarity_top_k=2, streaming=True)

    async def read() -> list[str]:
        response = await engine.aquery(QUESTION)
        return [token async for token in response.async_response_gen()]

    with pytest.raises(ConnectionError, match="the stream broke"):
        asyncio.run(read()) if asynchronous else list(engine.query(QUESTION).response_gen)
    for stage in ("generate", "pipeline"):
        assert llama_index_on.one(stage).status.status_code is StatusCode.ERROR, stage

