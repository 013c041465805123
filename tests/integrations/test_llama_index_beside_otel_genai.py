"""LlamaIndex beside the OpenTelemetry project's own LlamaIndex instrumentor
(``opentelemetry-instrumentation-genai-llama-index`` 1.3b0, module
``opentelemetry.instrumentation.genai.llama_index``), a second span handler on the same dispatcher,
in both orders, with test_llama_index.py's ``as_query_engine()`` app (``query``, ``streaming=True``,
``aquery``): the app gets the same answer, every ``rag.*`` attribute is what ragtrace alone writes
(the hand-worked figures of ``check_one_call``), one trace with ragtrace's root outermost, and their
``retrieval`` span the one duplicate, inside ragtrace's (their handler makes its span current, so
ragtrace's embedding span goes inside theirs). Their handler makes a ``chat`` span only for an LLM
class it knows; the test's ``CitingLLM`` isn't one. Uninstrumenting either leaves the other as it
is alone, and both off leave the dispatcher's handlers as they were.

Their 1.3b0 declares ``llama-index-instrumentation`` and ``llama-index-workflows`` beside
``llama-index-core``; the tests pass ``skip_dep_check=True`` so that a version the resolver picked
for llama-index-core doesn't silently turn theirs off here.
"""

from __future__ import annotations

import asyncio

import pytest
from llama_index_apps import QUESTION, CitingLLM, check_one_call, index

import ragtrace
from integrations import openllmetry
from integrations.openllmetry import parent_of, ragtraces

THEIRS = "opentelemetry.instrumentation.genai.llama_index"
ORDERS = ["theirs-first", "ragtrace-first"]


def both_on(spans, order: str):
    from opentelemetry.instrumentation.genai.llama_index import LlamaIndexInstrumentor

    return openllmetry.both_on(spans, order, "llama_index", LlamaIndexInstrumentor(), lambda: None, skip_dep_check=True)


def handlers() -> tuple[list, list]:
    from llama_index.core.instrumentation import get_dispatcher

    dispatcher = get_dispatcher()
    return list(dispatcher.span_handlers), list(dispatcher.event_handlers)


def ask(engine, how: str):
    """The app's answer, and the response object (its source nodes are the truth's ids)."""
    response = asyncio.run(engine.aquery(QUESTION)) if how == "aquery" else engine.query(QUESTION)
    return ("".join(response.response_gen) if how == "stream" else str(response)), response


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("how", ["query", "stream", "aquery"])
def test_llama_index_beside_the_official_instrumentor_the_app_and_the_figures_are_unchanged(spans, order, how):
    from opentelemetry import trace

    llm = CitingLLM(prompts=[])
    engine = index().as_query_engine(llm=llm, similarity_top_k=2, streaming=how == "stream")
    answer, _ = ask(engine, how)  # neither on
    before = handlers()
    ragtrace.instrument("llama_index")
    try:
        spans.clear()
        assert ask(engine, how)[0] == answer
        alone = ragtraces(spans)
    finally:
        ragtrace.uninstrument("llama_index")
    spans.clear()
    with both_on(spans, order):
        llm.prompts.clear()
        got, response = ask(engine, how)
        assert got == answer
        assert not trace.get_current_span().get_span_context().is_valid, "no span of the query is left current"
    assert handlers() == before
    assert ragtraces(spans) == alone  # every rag.* attribute as with ragtrace alone
    check_one_call(spans, response, llm, nested=False)
    root = spans.one("pipeline")
    assert len({s.context.trace_id for s in spans.all()}) == 1 and root.parent is None
    (theirs,) = [s for s in spans.all() if s.instrumentation_scope.name == THEIRS]
    assert (theirs.name, theirs.attributes["gen_ai.operation.name"]) == ("retrieval", "retrieval")
    assert parent_of(spans, theirs) is spans.one("retrieve") and parent_of(spans, spans.one("embed")) is theirs
    assert {parent_of(spans, spans.one(s)) for s in ("retrieve", "assemble", "generate")} == {root}


@pytest.mark.parametrize("order", ORDERS)
def test_llama_index_uninstrumenting_either_leaves_the_other_as_it_is_alone(spans, order):
    llm = CitingLLM(prompts=[])
    engine = index().as_query_engine(llm=llm, similarity_top_k=2)
    ragtrace.instrument("llama_index")
    try:
        ask(engine, "query")
    finally:
        ragtrace.uninstrument("llama_index")
    alone = ragtraces(spans)
    before = handlers()
    with both_on(spans, order) as theirs:
        ragtrace.uninstrument("llama_index")
        spans.clear()
        ask(engine, "query")
        assert [s.name for s in spans.all()] == ["retrieval"]  # theirs alone
        assert ragtrace.instrument("llama_index") == ["llama_index"]
        theirs.uninstrument()
        spans.clear()
        llm.prompts.clear()
        _, response = ask(engine, "query")
        assert ragtraces(spans) == alone and all(s.instrumentation_scope.name != THEIRS for s in spans.all())
        check_one_call(spans, response, llm)  # nested as ragtrace alone makes it
    assert handlers() == before
