"""ragtrace beside OpenLLMetry's (Traceloop's) instrumentors, on the apps the framework tests build.

Each test turns on OpenLLMetry's instrumentor and ``ragtrace.instrument()`` in both orders and
checks that the app gets what it gets with neither, that ragtrace's figures are the hand-computed
ones of the ragtrace-alone tests, which spans are duplicated and what nests inside what
(docs/integrations.md, "Beside other instrumentors"), and that uninstrumenting either one leaves
the other working.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import openai
import pytest

import ragtrace
from loopback import ANSWER

ORDERS = ["openllmetry-first", "ragtrace-first"]


def _wrapper_module(value: object) -> str:
    """The module of the function a wrapt function wrapper calls, or '' for anything else."""
    wrapper = getattr(value, "_self_wrapper", None)
    return (getattr(wrapper, "__module__", None) or "") if hasattr(value, "__wrapped__") else ""


def wrapper_modules(value: object) -> list[str]:
    """The modules of the wrappers stacked on a patched method, outermost first."""
    found = []
    while _wrapper_module(value):
        found.append(_wrapper_module(value))
        value = value.__wrapped__
    return found


def parent_of(spans, span):
    (found,) = [s for s in spans.all() if span.parent is not None and s.context.span_id == span.parent.span_id]
    return found


# --- the OpenAI SDK: OpenLLMetry wraps the same chat.completions.create as ragtrace ---------------
from integrations.test_openai import QUESTION as OPENAI_QUESTION  # noqa: E402
from integrations.test_openai import assembled_messages, check_trace, client  # noqa: E402

OPENLLMETRY_OPENAI = "opentelemetry.instrumentation.openai"


def strip_wrappers(modules: str, wrappers: str) -> None:
    """OpenLLMetry 0.62.4's ``uninstrument()`` leaves its wrappers on (it hands OpenTelemetry's
    ``unwrap`` "Completions.create" as one attribute name, which it never finds): take the ones
    from ``wrappers`` (a module prefix) off every class of the ``modules`` loaded, so that later
    tests get the library as it was."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(modules):
            continue
        for owner in [v for v in vars(module).values() if isinstance(v, type)]:
            for attribute, value in list(vars(owner).items()):
                while _wrapper_module(value).startswith(wrappers):
                    value = value.__wrapped__
                    setattr(owner, attribute, value)


@contextmanager
def openai_both_on(spans, order: str) -> Iterator[object]:
    """OpenLLMetry's OpenAIInstrumentor and ragtrace's, in ``order``; both off afterwards."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAI

    theirs = OpenLLMetryOpenAI()
    try:
        if order == "openllmetry-first":
            theirs.instrument(tracer_provider=spans.provider)
        assert ragtrace.instrument("openai") == ["openai"]
        if order == "ragtrace-first":
            theirs.instrument(tracer_provider=spans.provider)
        yield theirs
    finally:
        ragtrace.uninstrument("openai")
        theirs.uninstrument()
        strip_wrappers("openai.resources", OPENLLMETRY_OPENAI)


async def _openai_app(url: str, stream: bool, asynchronous: bool) -> tuple[str, list[dict], type]:
    """The SDK app of test_openai.py: its answer, the chunks it read (as dicts) and the type it got."""
    options = {"model": "gpt-4o-mini", "temperature": 0}
    if stream:
        options.update(stream=True, stream_options={"include_usage": True})
    with ragtrace.rag_pipeline("openai-app", query=OPENAI_QUESTION):
        messages = assembled_messages()
        create = client(url, openai.AsyncOpenAI if asynchronous else openai.OpenAI).chat.completions.create
        result = create(messages=messages, **options)
        result = await result if asynchronous else result
        if not stream:
            return result.choices[0].message.content, [result.model_dump()], type(result)
        assert isinstance(result, openai.AsyncStream if asynchronous else openai.Stream)
        if asynchronous:
            async with result:
                chunks = [c async for c in result]
        else:
            with result:
                chunks = list(result)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, [c.model_dump() for c in chunks], None  # a stream reaches the app behind proxies


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_openai_beside_openllmetry_the_app_and_the_figures_are_unchanged(spans, chat_server, order, stream, asynchronous):
    url, received = chat_server
    alone = asyncio.run(_openai_app(url, stream, asynchronous))  # neither instrumentor on
    spans.clear()
    with openai_both_on(spans, order):
        got = asyncio.run(_openai_app(url, stream, asynchronous))
    assert got[0] == ANSWER
    assert got[1:] == alone[1:], "the same completion or chunks, of the same type"
    assert received[-1]["body"] == received[0]["body"], "the same request"

    (theirs,) = [s for s in spans.all() if s.instrumentation_scope.name.startswith(OPENLLMETRY_OPENAI)]
    assert theirs.name == "openai.chat"  # the one duplicated span: the same call as ragtrace's generate span
    generated, root = spans.one("generate"), spans.one("pipeline")
    assert len(spans.all()) == 5  # root, retrieve, assemble, generate, and OpenLLMetry's
    if order == "ragtrace-first":  # the wrapper added last runs outermost: OpenLLMetry's span holds ragtrace's
        assert parent_of(spans, generated) is theirs and parent_of(spans, theirs) is root
    else:
        assert parent_of(spans, theirs) is generated
    check_trace(spans, stream=stream, parent=theirs if order == "ragtrace-first" else root)


@pytest.mark.parametrize("order", ORDERS)
def test_openai_uninstrumenting_ragtrace_leaves_openllmetry_on_alone(spans, chat_server, order):
    url, _ = chat_server
    completions = openai.resources.chat.completions.Completions
    with openai_both_on(spans, order):
        ragtrace.uninstrument("openai")
        assert [m.split(".")[0] for m in wrapper_modules(vars(completions)["create"])] == ["opentelemetry"]
        text, _, _ = asyncio.run(_openai_app(url, stream=False, asynchronous=False))
        assert text == ANSWER
        assert [s.name for s in spans.all() if "rag.stage" not in s.attributes] == ["openai.chat"]
        assert spans.by_stage("generate") == []  # ragtrace's retrieve/assemble are the app's own handles
        spans.clear()
        assert ragtrace.instrument("openai") == ["openai"]  # on again: wrapped once, outermost
        assert [m.split(".")[0] for m in wrapper_modules(vars(completions)["create"])] == ["ragtrace", "opentelemetry"]
        asyncio.run(_openai_app(url, stream=False, asynchronous=False))
        assert len(spans.by_stage("generate")) == 1


@pytest.mark.parametrize("order", ORDERS)
def test_openai_uninstrumenting_openllmetry_leaves_ragtrace_working(spans, chat_server, order):
    """OpenLLMetry 0.62.4's ``uninstrument()`` leaves its wrapper on and recording (see
    ``strip_wrappers``): ragtrace's figures are unchanged either way."""
    url, _ = chat_server
    with openai_both_on(spans, order) as theirs:
        theirs.uninstrument()
        for stream in (False, True):
            spans.clear()
            text, _, _ = asyncio.run(_openai_app(url, stream=stream, asynchronous=False))
            assert text == ANSWER
            generated = spans.one("generate")
            theirs_left = [s for s in spans.all() if "rag.stage" not in s.attributes]
            assert [s.name for s in theirs_left] == ["openai.chat"]  # still there: OpenLLMetry's, not ragtrace's, doing
            check_trace(spans, stream=stream, parent=theirs_left[0] if order == "ragtrace-first" else spans.one("pipeline"))
            assert generated.attributes["rag.citation.ids"]


@pytest.mark.parametrize("order", ORDERS)
def test_openai_a_call_inside_the_users_generate_span_is_recorded_once(spans, chat_server, order):
    """OpenLLMetry's span, current between the user's ``ragtrace.generate()`` and ragtrace's
    wrapper (ragtrace-first), must not hide the open generate stage: one generation, not two."""
    url, _ = chat_server
    with openai_both_on(spans, order):
        with ragtrace.rag_pipeline("openai-app", query=OPENAI_QUESTION) as run:
            messages = assembled_messages()
            with ragtrace.generate("gpt-4o-mini", "openai", prompt=messages) as g:
                g.record(client(url).chat.completions.create(model="gpt-4o-mini", messages=messages))
    generated = spans.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    (theirs,) = [s for s in spans.all() if "rag.stage" not in s.attributes]
    assert parent_of(spans, theirs) is generated  # OpenLLMetry's span inside the user's generate span
    assert (run.metrics["retrieved"], run.metrics["in_context"], run.metrics["cited"]) == (3, 2, 1)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("call", ["responses.create", "responses.create stream", "chat.completions.parse"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_openai_responses_and_parse_beside_openllmetry(spans, chat_server, order, call, asynchronous):
    """The Responses API and ``parse`` (OpenLLMetry wraps both too): the same answer, one
    generate span, the figures of the ragtrace-alone tests."""
    url, _ = chat_server

    async def app() -> str:
        with ragtrace.rag_pipeline("openai-app", query=OPENAI_QUESTION):
            (message,) = assembled_messages()
            sdk = client(url, openai.AsyncOpenAI if asynchronous else openai.OpenAI)
            if call == "chat.completions.parse":
                result = sdk.chat.completions.parse(model="gpt-4o-mini", messages=[message])
                return (await result if asynchronous else result).choices[0].message.content
            stream = call.endswith("stream")
            result = sdk.responses.create(model="gpt-4o-mini", instructions="Cite.", input=message["content"], stream=stream)
            result = await result if asynchronous else result
            if not stream:
                return result.output_text
            if asynchronous:
                return "".join([e.delta async for e in result if e.type == "response.output_text.delta"])
            return "".join(e.delta for e in result if e.type == "response.output_text.delta")

    with openai_both_on(spans, order):
        assert asyncio.run(app()) == ANSWER
    generated, root = spans.one("generate"), spans.one("pipeline")
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    assert (generated.attributes["gen_ai.usage.input_tokens"], generated.attributes["gen_ai.usage.output_tokens"]) == (42, 9)
    got = {k.removeprefix("rag.metrics."): v for k, v in root.attributes.items() if k.startswith("rag.metrics.")}
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 2, 1)
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_utilization"] == 0.5
    assert len({s.context.trace_id for s in spans.all()}) == 1


# --- LangChain: OpenLLMetry's callback handler beside ragtrace's ----------------------------------
from integrations.test_langchain import QUESTION as LANGCHAIN_QUESTION  # noqa: E402
from integrations.test_langchain import expected_ids, figures, lcel_chain, retrieval_chain, store  # noqa: E402, F401

OPENLLMETRY_LANGCHAIN = "opentelemetry.instrumentation.langchain"


@contextmanager
def langchain_both_on(spans, order: str) -> Iterator[object]:
    """OpenLLMetry's LangchainInstrumentor and ``ragtrace.instrument("langchain")``, in ``order``."""
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor as OpenLLMetryLangChain

    theirs = OpenLLMetryLangChain()
    try:
        if order == "openllmetry-first":
            theirs.instrument(tracer_provider=spans.provider)
        assert ragtrace.instrument("langchain") == ["langchain"]
        if order == "ragtrace-first":
            theirs.instrument(tracer_provider=spans.provider)
        yield theirs
    finally:
        ragtrace.uninstrument("langchain")
        theirs.uninstrument()
        strip_wrappers("langchain_core.callbacks", OPENLLMETRY_LANGCHAIN)


def langchain_app(kind: str, store, answer: str):
    """The LCEL chain or the create_retrieval_chain app of test_langchain.py, and its input."""
    if kind == "lcel":
        return lcel_chain(store, answer), LANGCHAIN_QUESTION
    return retrieval_chain(store, answer), {"input": LANGCHAIN_QUESTION}


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


def ragtraces(spans) -> dict[str, dict]:
    """ragtrace's record of a run, stage by stage: every rag.* attribute but span ids."""
    return {
        s.attributes["rag.stage"]: {k: v for k, v in s.attributes.items() if k.startswith("rag.") and not k.endswith("span_id")}
        for s in spans.all()
        if "rag.stage" in s.attributes
    }


def _answer(kind: str, ids: list[str]) -> str:
    return "Refunds take 5 business days [1]." if kind == "lcel" else f"See [{ids[0]}]."


def _returned(kind: str, out):
    """What the app got, comparable across runs (the retrieval chain returns Documents)."""
    if kind == "lcel" or "context" not in out:
        return out
    return {**out, "context": [(d.id, d.page_content) for d in out["context"]]}


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
    if kind == "lcel" or spans.one("assemble").attributes["rag.context.inclusion_method"] == "declared":
        check_langchain_figures(spans, kind, ids)  # (a streamed retrieval chain is located, alone too)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("kind", ["lcel", "retrieval_chain"])
def test_langchain_beside_openllmetry_the_app_and_the_figures_are_unchanged(spans, store, order, kind):
    ids = expected_ids(store)

    def run(how: str):
        chain, given = langchain_app(kind, store, _answer(kind, ids))
        if how == "invoke":
            return _returned(kind, chain.invoke(given))
        return [_returned(kind, piece) for piece in chain.stream(given)]

    returned = {how: run(how) for how in ("invoke", "stream")}  # neither instrumentor on
    assert spans.all() == []
    recorded = {}
    ragtrace.instrument("langchain")
    try:
        for how in ("invoke", "stream"):
            spans.clear()
            run(how)
            recorded[how] = ragtraces(spans)
    finally:
        ragtrace.uninstrument("langchain")
    with langchain_both_on(spans, order):
        for how in ("invoke", "stream"):
            spans.clear()
            assert run(how) == returned[how]
            check_langchain_trace(spans, kind, ids)
            assert ragtraces(spans) == recorded[how]  # every rag.* attribute as with ragtrace alone


@pytest.mark.parametrize("order", ORDERS)
def test_langchain_uninstrumenting_either_leaves_the_other_working(spans, store, order):
    ids = expected_ids(store)
    ragtrace.instrument("langchain")
    try:
        lcel_chain(store, _answer("lcel", ids)).invoke(LANGCHAIN_QUESTION)
    finally:
        ragtrace.uninstrument("langchain")
    alone = ragtraces(spans)
    spans.clear()
    with langchain_both_on(spans, order) as theirs:
        lcel_chain(store, _answer("lcel", ids)).invoke(LANGCHAIN_QUESTION)
        theirs_both = sorted(s.name for s in spans.all() if "rag.stage" not in s.attributes)
        spans.clear()
        ragtrace.uninstrument("langchain")
        assert lcel_chain(store, _answer("lcel", ids)).invoke(LANGCHAIN_QUESTION) == _answer("lcel", ids)
        assert sorted(s.name for s in spans.all()) == theirs_both  # OpenLLMetry's spans, none of ragtrace's
        spans.clear()
        assert ragtrace.instrument("langchain") == ["langchain"]
        theirs.uninstrument()  # 0.62.4 leaves its handler on (see strip_wrappers): its spans keep coming
        lcel_chain(store, _answer("lcel", ids)).invoke(LANGCHAIN_QUESTION)
        assert ragtraces(spans) == alone
        check_langchain_trace(spans, "lcel", ids)


# --- LlamaIndex: OpenLLMetry's dispatcher span handler beside ragtrace's --------------------------
from llama_index_apps import QUESTION as LLAMA_INDEX_QUESTION  # noqa: E402
from llama_index_apps import CitingLLM, check_one_call, index  # noqa: E402
from integrations.test_llama_index import _proxy_hops  # noqa: E402

OPENLLMETRY_LLAMA_INDEX = "opentelemetry.instrumentation.llamaindex"


def _openllmetry_handlers_off() -> None:
    """OpenLLMetry 0.62.4's LlamaIndex ``uninstrument()`` does nothing (its core instrumentor's
    ``_uninstrument`` is empty): take its handlers off the dispatcher for the tests after this one."""
    from llama_index.core.instrumentation import get_dispatcher

    dispatcher = get_dispatcher()
    for found in (dispatcher.span_handlers, dispatcher.event_handlers):
        found[:] = [h for h in found if not type(h).__module__.startswith(OPENLLMETRY_LLAMA_INDEX)]


@contextmanager
def llama_index_both_on(spans, order: str) -> Iterator[object]:
    """OpenLLMetry's LlamaIndexInstrumentor and ``ragtrace.instrument("llama_index")``, in ``order``."""
    from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor as OpenLLMetryLlamaIndex

    theirs = OpenLLMetryLlamaIndex()
    try:
        if order == "openllmetry-first":
            theirs.instrument(tracer_provider=spans.provider)
        assert ragtrace.instrument("llama_index") == ["llama_index"]
        if order == "ragtrace-first":
            theirs.instrument(tracer_provider=spans.provider)
        yield theirs
    finally:
        ragtrace.uninstrument("llama_index")
        theirs.uninstrument()
        _openllmetry_handlers_off()


def _query(engine, how: str) -> str:
    """The app's answer: ``query``, ``query`` with ``streaming=True`` read to the end, or ``aquery``."""
    if how == "aquery":
        return str(asyncio.run(engine.aquery(LLAMA_INDEX_QUESTION)))
    response = engine.query(LLAMA_INDEX_QUESTION)
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
        response = engine.query(LLAMA_INDEX_QUESTION) if how != "aquery" else asyncio.run(engine.aquery(LLAMA_INDEX_QUESTION))
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
        engine.query(LLAMA_INDEX_QUESTION)
        theirs_both = sorted(s.name for s in _theirs(spans))
        figures_both = ragtraces(spans)
        spans.clear()
        ragtrace.uninstrument("llama_index")
        assert not [h for h in dispatcher.span_handlers if type(h).__module__.startswith("ragtrace")]
        assert str(engine.query(LLAMA_INDEX_QUESTION)).startswith("It takes 5 business days [")
        assert sorted(s.name for s in spans.all()) == theirs_both  # OpenLLMetry's spans, none of ragtrace's
        assert ragtrace.instrument("llama_index") == ["llama_index"]
        theirs.uninstrument()  # 0.62.4: a no-op, its handlers stay on the dispatcher
        for _ in range(3):
            spans.clear()
            engine.query(LLAMA_INDEX_QUESTION)
            assert ragtraces(spans) == figures_both
            assert sorted(s.name for s in _theirs(spans)) == theirs_both
            assert "".join(streaming.query(LLAMA_INDEX_QUESTION).response_gen).startswith("It takes")
            assert _proxy_hops() <= 1  # no stale stand-ins chained up query after query
