"""The LlamaIndex integration with the real llama-index-core: ``VectorStoreIndex.as_query_engine()``
over ``MockEmbedding``, answered by ``MockLLM`` or by a small ``CustomLLM`` that cites the first
source it is shown, turned on by one line.

``MockEmbedding`` gives every node the same score, so which nodes are retrieved (and in which
order) is arbitrary: every expected figure is computed from what the query actually retrieved.
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, TextNode
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace._internal.integrations.llama_index import LlamaIndexInstrumentor

QUESTION = "How long does a refund take?"
TEXTS = {
    "kb-refunds": "Refunds reach the original card within 5 business days.",
    "kb-credit": "Store credit is issued immediately instead of a refund.",
    "kb-shipping": "Shipping is free for orders over 50 euros.",
    "kb-returns": "Returns are accepted within 30 days of delivery.",
}


class CitingLLM(CustomLLM):
    """Answers by citing the first ``source:`` line of its prompt, as ``[id]``; streams word by word."""

    context_window: int = 3900
    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="citing-llm", context_window=self.context_window, num_output=20)

    def answer(self, prompt: str) -> str:
        self.prompts.append(prompt)
        sources = re.findall(r"source: (\S+)", prompt)
        return f"It takes 5 business days [{sources[0]}]." if sources else "I don't know."

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.answer(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        text = self.answer(prompt)

        def pieces() -> Any:
            so_far = ""
            for piece in re.findall(r"\S+\s*", text):
                so_far += piece
                yield CompletionResponse(text=so_far, delta=piece)

        return pieces()


class FailingLLM(CitingLLM):
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise TimeoutError("the model is down")


class KeepFirst(BaseNodePostprocessor):
    """A node postprocessor (a reranker's place in the pipeline) keeping the best node only."""

    def _postprocess_nodes(self, nodes: list, query_bundle: Any = None) -> list:
        return nodes[:1]


@pytest.fixture
def instrumented(spans):
    ragtrace.instrument("llama_index")
    yield spans
    ragtrace.uninstrument("llama_index")


def index(scale: int = 1) -> VectorStoreIndex:
    nodes = [TextNode(id_=key, text=(text + " ") * scale, metadata={"source": key}) for key, text in TEXTS.items()]
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))


def metrics(span) -> dict[str, Any]:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def check_one_call(spans, response, llm: CitingLLM, *, root_name: str = "invoke_workflow RetrieverQueryEngine") -> None:
    """The default path: one LLM call whose context is the stuffed nodes, declared exactly."""
    retrieved = [n.node_id for n in response.source_nodes]
    root = spans.one("pipeline")
    assert root.name == root_name
    by_id = {s.context.span_id: s for s in spans.all()}
    for stage in ("retrieve", "assemble", "generate"):
        assert spans.one(stage).parent.span_id == root.context.span_id, stage
    assert by_id[spans.one("embed").parent.span_id] is spans.one("retrieve")

    retrieval = spans.one("retrieve").attributes
    assert list(retrieval["rag.retrieval.chunk_ids"]) == retrieved
    assert list(retrieval["rag.retrieval.ranks"]) == [1, 2]
    assert all(math.isclose(s, n.score) for s, n in zip(retrieval["rag.retrieval.scores"], response.source_nodes))

    (prompt,) = llm.prompts
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == retrieved
    renderings = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in response.source_nodes]
    starts = [prompt.index(text) for text in renderings]  # the test's own oracle: each rendering is in the prompt once
    assert list(assembled["rag.context.char_starts"]) == starts
    assert list(assembled["rag.context.char_ends"]) == [s + len(t) for s, t in zip(starts, renderings)]

    generated = spans.one("generate")
    assert generated.name == "chat citing-llm"
    assert generated.attributes["rag.generation.role"] == "answer"
    assert list(generated.attributes["rag.citation.ids"]) == [retrieved[0]]  # the first source it was shown
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert (got["recall_proxy"], got["context_precision"], got["context_utilization"]) == (0.5, 1.0, 0.5)
    assert list(got["cited_positions"]) == [1]


def test_a_query_engine_is_one_trace_with_declared_placements_and_figures(instrumented):
    llm = CitingLLM(prompts=[])
    response = index().as_query_engine(llm=llm, similarity_top_k=2).query(QUESTION)
    assert type(response).__name__ == "Response" and str(response).startswith("It takes 5 business days [")
    check_one_call(instrumented, response, llm)
    assert instrumented.one("pipeline").attributes["rag.query.hash"]


def test_inside_the_users_pipeline_the_stages_nest_under_it(instrumented):
    llm = CitingLLM(prompts=[])
    with ragtrace.rag_pipeline("support", query=QUESTION) as run:
        response = index().as_query_engine(llm=llm, similarity_top_k=2).query(QUESTION)
    check_one_call(instrumented, response, llm, root_name="invoke_workflow support")
    assert run.metrics["cited"] == 1


def test_a_streamed_answer_reaches_the_app_unread_and_the_root_ends_with_it(instrumented):
    llm = CitingLLM(prompts=[])
    response = index().as_query_engine(llm=llm, similarity_top_k=2, streaming=True).query(QUESTION)
    assert type(response).__name__ == "StreamingResponse"
    assert llm.prompts == [] and not instrumented.by_stage("generate") and not instrumented.by_stage("pipeline")
    tokens = list(response.response_gen)
    assert "".join(tokens).startswith("It takes 5 business days [")
    check_one_call(instrumented, response, llm)
    assert instrumented.one("generate").attributes["gen_ai.output.messages"].count("It takes 5 business days") == 1
    assert instrumented.one("generate").attributes["gen_ai.response.time_to_first_chunk"] >= 0


def test_an_async_query(instrumented):
    llm = CitingLLM(prompts=[])
    response = asyncio.run(index().as_query_engine(llm=llm, similarity_top_k=2).aquery(QUESTION))
    check_one_call(instrumented, response, llm)


def test_a_postprocessor_is_a_rerank_span_and_only_its_nodes_are_assembled(instrumented):
    llm = CitingLLM(prompts=[])
    response = index().as_query_engine(llm=llm, similarity_top_k=2, node_postprocessors=[KeepFirst()]).query(QUESTION)
    retrieved = instrumented.one("retrieve").attributes["rag.retrieval.chunk_ids"]
    rerank = instrumented.one("rerank").attributes
    assert (list(rerank["rag.rerank.input_ids"]), list(rerank["rag.rerank.output_ids"])) == (list(retrieved), [retrieved[0]])
    assembled = instrumented.one("assemble").attributes
    assert list(assembled["rag.context.chunk_ids"]) == [retrieved[0]] == [n.node_id for n in response.source_nodes]
    assert dict(zip(assembled["rag.context.dropped_ids"], assembled["rag.context.dropped_reasons"])) == {retrieved[1]: "reranked_out"}
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"], got["context_precision"]) == (2, 1, 1, 0.5, 0.5)


def test_a_small_context_window_repacks_the_nodes_so_they_are_located_and_refined(instrumented):
    """CompactAndRefine cuts node text across several calls: placements are located, not declared;
    the first call answers, the others refine, and only the final answer is scored."""
    llm = CitingLLM(prompts=[], context_window=700)
    response = index(scale=6).as_query_engine(llm=llm, similarity_top_k=3).query(QUESTION)
    calls = instrumented.by_stage("generate")
    assert len(calls) == len(llm.prompts) > 1
    assert [c.attributes["rag.generation.role"] for c in calls] == ["answer"] + ["refine"] * (len(calls) - 1)
    assert {a.attributes["rag.context.inclusion_method"] for a in instrumented.by_stage("assemble")} == {"located"}
    final = str(response)
    cited = re.findall(r"\[(kb-[a-z]+)\]", final)
    got = metrics(instrumented.one("pipeline"))
    assert got["retrieved"] == got["in_context"] == 3
    assert got["cited"] == len(set(cited))  # the final answer's citations, not the drafts'


def test_mock_llm_echo_is_traced_and_cites_nothing(instrumented):
    response = index().as_query_engine(llm=MockLLM(), similarity_top_k=2).query(QUESTION)
    generated = instrumented.one("generate").attributes
    assert generated["rag.generation.role"] == "answer"
    assert str(response) in generated["gen_ai.output.messages"].replace("\\n", "\n")  # MockLLM echoes its prompt
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"]) == (2, 2, 0, 0.0)


def test_the_models_error_passes_through_and_is_recorded(instrumented):
    with pytest.raises(TimeoutError, match="the model is down"):
        index().as_query_engine(llm=FailingLLM(prompts=[]), similarity_top_k=2).query(QUESTION)
    for stage in ("generate", "pipeline"):
        assert instrumented.one(stage).status.status_code is StatusCode.ERROR, stage
    assert instrumented.one("assemble").end_time is not None


def test_uninstrument_removes_the_handlers(spans):
    root = get_dispatcher()
    before = (list(root.span_handlers), list(root.event_handlers))
    LlamaIndexInstrumentor().instrument()
    LlamaIndexInstrumentor().uninstrument()
    assert (root.span_handlers, root.event_handlers) == before
    index().as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2).query(QUESTION)
    assert spans.all() == []


def test_beside_openinference_nothing_breaks_and_the_figures_hold(instrumented):
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor as OpenInferenceLlamaIndex

    engine = index().as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2)
    OpenInferenceLlamaIndex().instrument(tracer_provider=instrumented.provider)
    try:
        response = engine.query(QUESTION)
    finally:
        OpenInferenceLlamaIndex().uninstrument()
    assert not trace.get_current_span().get_span_context().is_valid, "no span of the query is left current"
    ours = [s for s in instrumented.all() if "rag.stage" in s.attributes]
    theirs = [s for s in instrumented.all() if "rag.stage" not in s.attributes]
    assert {s.context.trace_id for s in instrumented.all()} == {ours[0].context.trace_id}  # one trace
    assert {"RetrieverQueryEngine.query", "VectorIndexRetriever.retrieve", "CitingLLM.complete"} <= {s.name for s in theirs}
    assert len(ours) == 5  # root, embed, retrieve, assemble, generate: ragtrace adds no span for theirs
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert [n.node_id for n in response.source_nodes] == list(instrumented.one("assemble").attributes["rag.context.chunk_ids"])


class OpenAIBackedLLM(CitingLLM):
    """A LlamaIndex LLM calling the OpenAI SDK, as llama-index-llms-openai does."""

    base_url: str = ""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        import openai

        client = openai.OpenAI(base_url=f"{self.base_url}/v1", api_key="sk-test", max_retries=0)
        completion = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
        return CompletionResponse(text=completion.choices[0].message.content, raw=completion)


def test_an_llm_calling_the_openai_sdk_is_one_generation_with_both_integrations_on(instrumented, chat_server):
    url, received = chat_server
    ragtrace.instrument("openai")
    try:
        index().as_query_engine(llm=OpenAIBackedLLM(prompts=[], base_url=url), similarity_top_k=2).query(QUESTION)
    finally:
        ragtrace.uninstrument("openai")
    assert len(received) == 1
    generated = instrumented.one("generate")  # the OpenAI integration left the call to LlamaIndex's span
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


def test_an_async_stream_reaches_the_app_unread_and_the_root_ends_with_it(instrumented):
    """``aquery`` with ``streaming=True``: an ``AsyncStreamingResponse`` the app reads with
    ``async_response_gen()``; ragtrace reads none of it and ends the generate span with the answer."""
    llm = CitingLLM(prompts=[])
    engine = index().as_query_engine(llm=llm, similarity_top_k=2, streaming=True)

    async def run() -> tuple[Any, list[str], bool]:
        response = await engine.aquery(QUESTION)
        untouched = llm.prompts == [] and not instrumented.by_stage("generate")
        return response, [token async for token in response.async_response_gen()], untouched

    response, tokens, untouched = asyncio.run(run())
    assert type(response).__name__ == "AsyncStreamingResponse"
    assert untouched, "ragtrace drained the stream before the app read it"
    assert len(tokens) == 6 and "".join(tokens).startswith("It takes 5 business days [")  # one token per word, all of them
    check_one_call(instrumented, response, llm)
    generated = instrumented.one("generate").attributes
    assert generated["gen_ai.output.messages"].count("".join(tokens)) == 1
    assert 0 <= generated["gen_ai.response.time_to_first_chunk"] < (instrumented.one("generate").end_time - instrumented.one("generate").start_time) / 1e9


def test_a_condense_plus_context_chat_is_one_pipeline_per_turn_and_the_condense_call_is_no_answer(instrumented):
    """``as_chat_engine(chat_mode="condense_plus_context")``: the second turn condenses the history
    into a question (an LLM call of its own, role ``rewrite``), retrieves with it and answers from
    the context the engine's synthesizer built, declared."""
    llm = CitingLLM(prompts=[])
    engine = index().as_chat_engine(chat_mode="condense_plus_context", llm=llm, similarity_top_k=2)
    first = engine.chat(QUESTION)
    assert str(first).startswith("It takes 5 business days [")
    assert len(instrumented.by_stage("pipeline")) == 1
    instrumented.clear()
    llm.prompts.clear()
    second = engine.chat("And for store credit?")
    retrieved = [n.node_id for n in second.source_nodes]

    root = instrumented.one("pipeline")
    assert root.name == "invoke_workflow CondensePlusContextChatEngine"
    assert {s.context.trace_id for s in instrumented.all()} == {root.context.trace_id}
    condense, answer = sorted(instrumented.by_stage("generate"), key=lambda s: s.start_time)
    assert (condense.attributes["rag.generation.role"], answer.attributes["rag.generation.role"]) == ("rewrite", "answer")
    assert len(llm.prompts) == 2 and "And for store credit?" in llm.prompts[0]
    assert list(instrumented.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == retrieved
    assembled = instrumented.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == retrieved
    assert list(answer.attributes["rag.citation.ids"]) == [retrieved[0]]
    assert "rag.citation.ids" not in condense.attributes
    got = metrics(root)  # 2 retrieved, both in the context, the answer cites the first
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert (got["recall_proxy"], got["context_precision"], got["context_utilization"]) == (0.5, 1.0, 0.5)


@pytest.mark.parametrize("turn", ["chat", "achat"])
def test_a_context_chat_engine_turn_is_one_pipeline_with_declared_placements(instrumented, turn):
    engine = index().as_chat_engine(chat_mode="context", llm=CitingLLM(prompts=[]), similarity_top_k=2)
    reply = engine.chat(QUESTION) if turn == "chat" else asyncio.run(engine.achat(QUESTION))
    retrieved = [n.node_id for n in reply.source_nodes]
    root = instrumented.one("pipeline")
    assert root.name == "invoke_workflow ContextChatEngine"
    assert instrumented.one("generate").attributes["rag.generation.role"] == "answer"
    assembled = instrumented.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == retrieved
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"]) == (2, 2, 1, 0.5)


def test_a_chat_engine_without_retrieval_is_no_pipeline_and_its_reply_stays_an_answer(instrumented):
    from llama_index.core.chat_engine import SimpleChatEngine

    SimpleChatEngine.from_defaults(llm=CitingLLM(prompts=[])).chat(QUESTION)
    assert instrumented.by_stage("pipeline") == []
    assert instrumented.one("generate").attributes["rag.generation.role"] == "answer"
