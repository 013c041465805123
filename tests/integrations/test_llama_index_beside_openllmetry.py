"""LlamaIndex beside OpenLLMetry's LlamaIndexInstrumentor, a second span handler on the same
dispatcher (tests/integrations/openllmetry.py says what each test checks)."""

from __future__ import annotations

import asyncio

import pytest
from llama_index_apps import QUESTION, CitingLLM, check_one_call, index

import ragtrace
from integrations.openllmetry import OPENLLMETRY_LLAMA_INDEX, ORDERS, llama_index_both_on, openai_both_on, parent_of, ragtraces
from integrations.test_llama_index import OpenAIBackedLLM, _proxy_hops


def _query(engine, how: str) -> str:
    """The app's answer: ``query``, ``query`` with ``streaming=True`` read to the end, or ``aquery``."""
    if how == "aquery":
        return str(asyncio.run(engine.aquery(QUESTION)))
    response = engine.query(QUESTION)
    return "".join(response.response_gen) if how == "stream" else str(response)


def _theirs(spans) -> list:
    return [s for s in spans.all() if s.instrumentation_scope.name.startswith(OPENLLMETRY_LLAMA_INDEX)]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("how", ["query", "stream", "aquery"])
def test_llama_index_beside_openllmetry_the_app_and_the_figures_are_unchanged(spans, order, how):
    from opentelemetry import trace

    built = index()
    llm = CitingLLM(prompts=[])
    engine = built.as_query_engine(llm=llm, similarity_top_k=2, streaming=how == "stream")
    answer = _query(engine, how)  # neither instrumentor on
    ragtrace.instrument("llama_index")
    try:
        spans.clear()
        assert _query(engine, how) == answer
        alone = ragtraces(spans)
    finally:
        ragtrace.uninstrument("llama_index")
    spans.clear()
    with llama_index_both_on(spans, order):
        llm.prompts.clear()
        response = engine.query(QUESTION) if how != "aquery" else asyncio.run(engine.aquery(QUESTION))
        assert ("".join(response.response_gen) if how == "stream" else str(response)) == answer
        assert not trace.get_current_span().get_span_context().is_valid, "no span of the query is left current"
    assert ragtraces(spans) == alone  # every rag.* attribute as with ragtrace alone
    check_one_call(spans, response, llm, nested=False)  # the hand-computed figures of the ragtrace-alone test

    root, theirs = spans.one("pipeline"), _theirs(spans)
    assert len({s.context.trace_id for s in spans.all()}) == 1
    assert root.parent is None  # ragtrace's span handler is the dispatcher's first: its root is outermost
    names = {s.name for s in theirs}
    # what is duplicated: the retrieval, the embedding and the LLM call (OpenLLMetry: a span per method)
    assert {"VectorIndexRetriever.task", "MockEmbedding.task", "CitingLLM.task"} <= names
    by_id = {s.context.span_id: s for s in spans.all()}
    for stage in ("retrieve", "assemble", "generate"):  # ragtrace's stages inside the root, at some depth
        span = spans.one(stage)
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
        assert span is root or how == "stream", stage
    if how == "stream":  # OpenLLMetry 0.62.4 never ends a streamed query engine's spans (alone too)
        assert "RetrieverQueryEngine.workflow" not in names
        assert spans.one("retrieve").parent.span_id not in by_id
    else:
        assert parent_of(spans, next(s for s in theirs if s.name == "RetrieverQueryEngine.workflow")) is root


@pytest.mark.parametrize("order", ORDERS)
def test_llama_index_uninstrumenting_either_leaves_the_other_working(spans, order):
    from llama_index.core.instrumentation import get_dispatcher

    built = index()
    engine = built.as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2)
    streaming = built.as_query_engine(llm=CitingLLM(prompts=[]), similarity_top_k=2, streaming=True)
    dispatcher = get_dispatcher()
    with llama_index_both_on(spans, order) as theirs:
        spans.clear()
        engine.query(QUESTION)
        theirs_both = sorted(s.name for s in _theirs(spans))
        figures_both = ragtraces(spans)
        spans.clear()
        ragtrace.uninstrument("llama_index")
        assert not [h for h in dispatcher.span_handlers if type(h).__module__.startswith("ragtrace")]
        assert str(engine.query(QUESTION)).startswith("It takes 5 business days [")
        assert sorted(s.name for s in spans.all()) == theirs_both  # OpenLLMetry's spans, none of ragtrace's
        assert ragtrace.instrument("llama_index") == ["llama_index"]
        theirs.uninstrument()  # 0.62.4: a no-op, its handlers stay on the dispatcher
        for _ in range(3):
            spans.clear()
            engine.query(QUESTION)
            assert ragtraces(spans) == figures_both
            assert sorted(s.name for s in _theirs(spans)) == theirs_both
            assert "".join(streaming.query(QUESTION).response_gen).startswith("It takes")
            assert _proxy_hops() <= 1  # no stale stand-ins chained up query after query


@pytest.mark.parametrize("order", ORDERS)
def test_a_llama_index_llm_calling_the_sdk_is_one_generation_beside_openllmetrys_openai(spans, chat_server, order):
    """ragtrace's LlamaIndex ``chat`` span is open around the SDK call; OpenLLMetry's span, current
    in between when ragtrace's OpenAI wrapper runs inside it, must not make it a second one."""
    url, received = chat_server
    engine = index().as_query_engine(llm=OpenAIBackedLLM(prompts=[], base_url=url), similarity_top_k=2)
    with openai_both_on(spans, order):
        assert ragtrace.instrument("llama_index") == ["llama_index"]
        try:
            engine.query(QUESTION)
        finally:
            ragtrace.uninstrument("llama_index")
    assert len(received) == 1
    (generated,) = spans.by_stage("generate")
    assert generated.name == "chat citing-llm"
    assert (generated.attributes["gen_ai.usage.input_tokens"], generated.attributes["gen_ai.usage.output_tokens"]) == (42, 9)
    (theirs,) = [s for s in spans.all() if s.name == "openai.chat"]
    assert parent_of(spans, theirs) is generated  # OpenLLMetry's span of the SDK call inside ragtrace's LlamaIndex call
