"""LangChain beside OpenLLMetry's LangchainInstrumentor, whose callback handler runs beside
ragtrace's (tests/integrations/openllmetry.py says what each test checks)."""

from __future__ import annotations

import asyncio
import math

import pytest

import ragtrace
from integrations.openllmetry import OPENLLMETRY_LANGCHAIN, ORDERS, langchain_both_on, openai_both_on, parent_of, ragtraces
from integrations.test_langchain import QUESTION, expected_ids, figures, format_docs, lcel_chain, retrieval_chain, store  # noqa: F401
from loopback import ANSWER


def langchain_app(kind: str, store, answer: str):
    """The LCEL chain or the create_retrieval_chain app of test_langchain.py, and its input."""
    if kind == "lcel":
        return lcel_chain(store, answer), QUESTION
    return retrieval_chain(store, answer), {"input": QUESTION}


def check_langchain_figures(spans, kind: str, ids: list[str]) -> None:
    """The ragtrace-alone tests' figures: 3 retrieved, all 3 placed, the answer cites one."""
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == ("located" if kind == "lcel" else "declared")
    assert list(assembled["rag.context.chunk_ids"]) == ids
    assert list(spans.one("generate").attributes["rag.citation.ids"]) == [ids[0]]
    got = figures(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 1)
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_precision"] == 1.0
    assert math.isclose(got["context_utilization"], 1 / 3)



def _answer(kind: str, ids: list[str]) -> str:
    return "Refunds take 5 business days [1]." if kind == "lcel" else f"See [{ids[0]}]."


def _returned(kind: str, out):
    """What the app got, comparable across runs (the retrieval chain returns Documents)."""
    if kind == "lcel" or "context" not in out:
        return out
    return {**out, "context": [(d.id, d.page_content) for d in out["context"]]}


def called(kind: str, chain, given, how: str):
    """What the app gets from one call of ``chain``, made ``how`` (invoke, stream, ainvoke, astream)."""
    if how == "invoke":
        return _returned(kind, chain.invoke(given))
    if how == "ainvoke":
        return _returned(kind, asyncio.run(chain.ainvoke(given)))
    if how == "stream":
        return [_returned(kind, piece) for piece in chain.stream(given)]

    async def pieces() -> list:
        return [_returned(kind, piece) async for piece in chain.astream(given)]

    return asyncio.run(pieces())


def check_langchain_trace(spans, kind: str, ids: list[str]) -> None:
    """One chain call with both on: one trace, ragtrace's root inside OpenLLMetry's outermost span,
    ragtrace's stages under its root, the retriever and the model call duplicated; the figures."""
    everything = spans.all()
    assert len({s.context.trace_id for s in everything}) == 1
    theirs = [s for s in everything if s.instrumentation_scope.name == OPENLLMETRY_LANGCHAIN]
    ours = [s for s in everything if "rag.stage" in s.attributes]
    assert len(everything) == len(theirs) + len(ours)
    assert sorted(s.attributes["rag.stage"] for s in ours) == ["assemble", "generate", "pipeline", "retrieve"]
    (their_root,) = [s for s in theirs if s.parent is None]
    assert their_root.name == ("RunnableSequence" if kind == "lcel" else "retrieval_chain") + ".workflow"
    root = spans.one("pipeline")
    assert parent_of(spans, root) is their_root
    assert {parent_of(spans, s) for s in ours if s is not root} == {root}
    assert sorted(s.name for s in theirs if s.name.startswith(("vector_db_retrieve", "FakeListChatModel"))) == [
        "FakeListChatModel.chat",
        "vector_db_retrieve VectorStoreRetriever",
    ]
    check_langchain_figures(spans, kind, ids)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("kind", ["lcel", "retrieval_chain"])
def test_langchain_beside_openllmetry_the_app_and_the_figures_are_unchanged(spans, store, order, kind):
    ids = expected_ids(store)

    def run(how: str):
        return called(kind, *langchain_app(kind, store, _answer(kind, ids)), how)

    hows = ("invoke", "stream", "ainvoke")
    returned = {how: run(how) for how in hows}  # neither instrumentor on
    assert spans.all() == []
    recorded = {}
    ragtrace.instrument("langchain")
    try:
        for how in hows:
            spans.clear()
            run(how)
            recorded[how] = ragtraces(spans)
    finally:
        ragtrace.uninstrument("langchain")
    with langchain_both_on(spans, order):
        for how in hows:
            spans.clear()
            assert run(how) == returned[how]
            check_langchain_trace(spans, kind, ids)
            assert ragtraces(spans) == recorded[how]  # every rag.* attribute as with ragtrace alone


@pytest.mark.parametrize("order", ORDERS)
def test_langchain_uninstrumenting_either_leaves_the_other_working(spans, store, order):
    ids = expected_ids(store)
    ragtrace.instrument("langchain")
    try:
        lcel_chain(store, _answer("lcel", ids)).invoke(QUESTION)
    finally:
        ragtrace.uninstrument("langchain")
    alone = ragtraces(spans)
    spans.clear()
    with langchain_both_on(spans, order) as theirs:
        lcel_chain(store, _answer("lcel", ids)).invoke(QUESTION)
        theirs_both = sorted(s.name for s in spans.all() if "rag.stage" not in s.attributes)
        spans.clear()
        ragtrace.uninstrument("langchain")
        assert lcel_chain(store, _answer("lcel", ids)).invoke(QUESTION) == _answer("lcel", ids)
        assert sorted(s.name for s in spans.all()) == theirs_both  # OpenLLMetry's spans, none of ragtrace's
        spans.clear()
        assert ragtrace.instrument("langchain") == ["langchain"]
        theirs.uninstrument()  # 0.62.4 leaves its handler on (see strip_wrappers): its spans keep coming
        lcel_chain(store, _answer("lcel", ids)).invoke(QUESTION)
        assert ragtraces(spans) == alone
        check_langchain_trace(spans, "lcel", ids)


@pytest.mark.parametrize("order", ORDERS)
def test_chat_openai_with_everything_of_both_on_is_one_generation(spans, store, chat_server, order):
    """``Traceloop.init()`` turns on all of OpenLLMetry's instrumentors: LangChain's ``ChatOpenAI``
    with both tools' LangChain and OpenAI instrumentors is still one ragtrace generation (and
    OpenLLMetry's LangChain handler keeps its own OpenAI span out), with the figures of the
    ragtrace-alone test."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI

    url, received = chat_server
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context, citing [n].\n\n{context}"), ("human", "{question}")])
    chain = {"context": store.as_retriever(search_kwargs={"k": 3}) | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    with openai_both_on(spans, order), langchain_both_on(spans, order):
        for how in ("invoke", "stream"):
            answer = chain.invoke(QUESTION) if how == "invoke" else "".join(chain.stream(QUESTION))
            assert answer == ANSWER
            (generated,) = spans.by_stage("generate")
            assert generated.attributes["gen_ai.provider.name"] == "openai"
            assert figures(spans.one("pipeline"))["cited"] == 1
            assert "openai.chat" not in {s.name for s in spans.all()}
            spans.clear()
    assert len(received) == 2
