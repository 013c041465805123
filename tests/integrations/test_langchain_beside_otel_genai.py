"""LangChain beside the OpenTelemetry project's own LangChain instrumentor
(``opentelemetry-instrumentation-genai-langchain`` 1.3b0, module
``opentelemetry.instrumentation.genai.langchain``; not OpenLLMetry's ``opentelemetry-instrumentation-langchain``),
in both orders, with the apps of test_langchain.py: the LCEL chain and ``create_retrieval_chain``
on the shipped ``FakeListChatModel``, and the LCEL chain on ``ChatOpenAI`` against the loopback
server (their handler makes a ``chat`` span only for a model with a name, which the fake lacks).

Each test checks that the app gets what it gets with neither, that every ``rag.*`` attribute is
what ragtrace alone writes (the hand-worked figures of test_langchain.py: retrieved 3, in context
3, cited 1), that one request is one trace with ragtrace's automatic root inside their outermost
span and ragtrace's stages under its root, which of their spans are there (the duplicates
docs/integrations.md lists), and that uninstrumenting either leaves the other as it is alone and
both off leaves LangChain unwrapped.

Their 1.3b0 declares ``langchain >= 0.3.22, < 2`` (the ``langchain`` distribution, not
langchain-core) and instruments nothing without it; the 3.10 unit run has langchain-core and
langchain-classic but not ``langchain`` (1.x needs 3.11), so the tests pass ``skip_dep_check=True``:
their code only imports langchain-core (and langchain's or langchain-classic's chains, either).
"""

from __future__ import annotations

import asyncio

import pytest

import ragtrace
from integrations import openllmetry
from integrations.openllmetry import parent_of, ragtraces, wrapper_modules
from integrations.test_langchain import QUESTION, expected_ids, format_docs, lcel_chain, retrieval_chain, store  # noqa: F401
from integrations.test_langchain_beside_openllmetry import called, check_langchain_figures

THEIRS = "opentelemetry.instrumentation.genai.langchain"


ORDERS = ["theirs-first", "ragtrace-first"]
KINDS = ["lcel", "retrieval_chain", "chat_openai"]
HOWS = ("invoke", "stream", "ainvoke", "astream")


def both_on(spans, order: str):
    """Their ``LangChainInstrumentor`` and ``ragtrace.instrument("langchain")`` in ``order``, both off
    afterwards (their ``uninstrument()`` takes everything of theirs off: nothing left to clean)."""
    from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor

    return openllmetry.both_on(spans, order, "langchain", LangChainInstrumentor(), lambda: None, skip_dep_check=True)


def app(kind: str, store, chat_url: str):
    """The chain and its input; each answers "... [1]" (the first retrieved document cited)."""
    ids = expected_ids(store)
    if kind == "lcel":
        return lcel_chain(store, "Refunds take 5 business days [1]."), QUESTION
    if kind == "retrieval_chain":
        return retrieval_chain(store, f"See [{ids[0]}]."), {"input": QUESTION}
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="gpt-4o-mini", base_url=f"{chat_url}/v1", api_key="sk-test", max_retries=0)
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context, citing [n].\n\n{context}"), ("human", "{question}")])
    chain = {"context": store.as_retriever(search_kwargs={"k": 3}) | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    return chain, QUESTION


def run(kind: str, store, chat_url: str, how: str):
    return called(kind, *app(kind, store, chat_url), how)


def theirs_of(spans) -> list:
    return [s for s in spans.all() if s.instrumentation_scope.name == THEIRS]


def check_trace(spans, kind: str, ids: list[str]) -> None:
    """One request with both on: one trace; their outermost span (``invoke_workflow``) is the root,
    ragtrace's automatic root is inside it, ragtrace's stages are under ragtrace's root, their
    ``retrieval`` (and ``chat`` for a named model) under theirs; the figures of ragtrace alone."""
    everything = spans.all()
    assert len({s.context.trace_id for s in everything}) == 1, "one trace"
    theirs = theirs_of(spans)
    ours = [s for s in everything if "rag.stage" in s.attributes]
    assert len(everything) == len(theirs) + len(ours)
    assert sorted(s.attributes["rag.stage"] for s in ours) == ["assemble", "generate", "pipeline", "retrieve"]
    (their_root,) = [s for s in theirs if s.parent is None]
    assert their_root.name == "invoke_workflow " + ("retrieval_chain" if kind == "retrieval_chain" else "RunnableSequence")
    root = spans.one("pipeline")
    assert root.name == their_root.name  # the same name: both are the GenAI semconv's invoke_workflow span
    assert parent_of(spans, root) is their_root
    assert {parent_of(spans, s) for s in ours if s is not root} == {root}
    # the duplicates: the retrieval always, the model call where their handler knows the model's name
    expected = {"retrieval": "retrieval"} | ({"chat gpt-4o-mini": "chat"} if kind == "chat_openai" else {})
    assert {s.name: s.attributes["gen_ai.operation.name"] for s in theirs if s is not their_root} == expected
    assert all(parent_of(spans, s) is their_root for s in theirs if s is not their_root)
    check_langchain_figures(spans, "retrieval_chain" if kind == "retrieval_chain" else "lcel", ids)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("kind", KINDS)
def test_beside_the_official_instrumentor_the_app_and_the_figures_are_unchanged(spans, store, chat_server, order, kind):
    url, received = chat_server
    ids = expected_ids(store)
    returned = {how: run(kind, store, url, how) for how in HOWS}  # neither on
    assert spans.all() == []
    alone = {}
    ragtrace.instrument("langchain")
    try:
        for how in HOWS:
            spans.clear()
            assert run(kind, store, url, how) == returned[how]
            alone[how] = ragtraces(spans)
    finally:
        ragtrace.uninstrument("langchain")
    with both_on(spans, order) as theirs:
        assert theirs.is_instrumented_by_opentelemetry
        for how in HOWS:
            spans.clear()
            assert run(kind, store, url, how) == returned[how]
            check_trace(spans, kind, ids)
            assert ragtraces(spans) == alone[how]  # every rag.* attribute as with ragtrace alone
    assert len(received) == (3 * len(HOWS) if kind == "chat_openai" else 0)


LANGCHAIN_PATCHED = (
    ("langchain_core.callbacks.base", "BaseCallbackManager", "__init__"),
    ("langchain_core.callbacks.manager", "CallbackManager", "on_chain_start"),
    ("langchain_core.callbacks.manager", "AsyncCallbackManager", "on_retriever_start"),
    ("langchain_core.runnables.base", "Runnable", "_call_with_config"),
    ("langchain_core.runnables.base", "Runnable", "batch"),
    ("langchain_core.retrievers", "BaseRetriever", "invoke"),
    ("langchain_core.language_models.chat_models", "BaseChatModel", "_generate_with_cache"),
    ("langchain_core.language_models.chat_models", "BaseChatModel", "stream"),
    ("langchain_classic.chains.combine_documents.stuff", None, "format_document"),  # ragtrace's
)


def wrappers_on_langchain() -> dict[str, list[str]]:
    """The wrappers on a sample of what either tool patches (theirs wraps these with wrapt, ragtrace
    wraps the stuff chain's ``format_document``): method -> wrapper modules, outermost first."""
    import importlib

    found = {}
    for module, owner, name in LANGCHAIN_PATCHED:
        target = importlib.import_module(module)
        if owner is not None:
            target = vars(target)[owner]
        found[f"{owner or module}.{name}"] = wrapper_modules(vars(target)[name])
    return found


@pytest.mark.parametrize("order", ORDERS)
def test_uninstrumenting_either_leaves_the_other_as_it_is_alone(spans, store, chat_server, order):
    url, _ = chat_server
    ids = expected_ids(store)
    untouched = wrappers_on_langchain()
    assert not any(untouched.values())
    ragtrace.instrument("langchain")
    try:
        run("chat_openai", store, url, "invoke")
    finally:
        ragtrace.uninstrument("langchain")
    alone = ragtraces(spans)
    spans.clear()
    with both_on(spans, order) as theirs:
        assert wrappers_on_langchain()["BaseCallbackManager.__init__"] == [THEIRS]
        run("chat_openai", store, url, "invoke")
        their_names = sorted(s.name for s in theirs_of(spans))
        spans.clear()
        ragtrace.uninstrument("langchain")
        run("chat_openai", store, url, "invoke")
        assert sorted(s.name for s in spans.all()) == their_names  # their spans, none of ragtrace's
        assert their_names == ["chat gpt-4o-mini", "invoke_workflow RunnableSequence", "retrieval"]
        spans.clear()
        assert ragtrace.instrument("langchain") == ["langchain"]
        theirs.uninstrument()
        run("chat_openai", store, url, "invoke")
        assert theirs_of(spans) == [] and ragtraces(spans) == alone
        assert spans.one("pipeline").parent is None  # ragtrace's root is the trace's root again
        check_langchain_figures(spans, "lcel", ids)
    assert wrappers_on_langchain() == untouched  # both off: LangChain as it was
    spans.clear()
    run("chat_openai", store, url, "invoke")
    assert spans.all() == []


def test_create_agent_beside_the_official_instrumentor(spans):
    """LangChain's RAG agent (test_langchain_agents.py's one-round case): their ``invoke_agent`` span
    is the trace's root, ragtrace's automatic root inside it, their ``execute_tool`` duplicates
    ragtrace's, and ragtrace's record is the one it makes alone."""
    pytest.importorskip("langchain.agents", reason="langchain 1.x (create_agent) needs Python >= 3.11")
    from langchain_core.messages import AIMessage

    from integrations.langchain_agent_apps import QUESTION as ASKED
    from integrations.langchain_agent_apps import call, make_store, rag_agent

    answer = "A refund takes 5 business days [kb-refunds]."
    inputs = {"messages": [{"role": "user", "content": ASKED}]}

    def ask(how: str) -> str:
        agent, _ = rag_agent(make_store(), [call("retrieve_context", "refunds", "call-1"), AIMessage(content=answer)])
        done = agent.invoke(inputs) if how == "invoke" else asyncio.run(agent.ainvoke(inputs))
        return done["messages"][-1].content

    ragtrace.instrument("langchain")
    try:
        alone = {}
        for how in ("invoke", "ainvoke"):
            spans.clear()
            assert ask(how) == answer
            alone[how] = ragtraces(spans)
    finally:
        ragtrace.uninstrument("langchain")
    with both_on(spans, "theirs-first"):
        for how in ("invoke", "ainvoke"):
            spans.clear()
            assert ask(how) == answer
            everything = spans.all()
            assert len({s.context.trace_id for s in everything}) == 1
            ids = {s.context.span_id for s in everything}  # (OpenLLMetry's leftover handler, if on, parents theirs)
            (their_root,) = [s for s in theirs_of(spans) if s.parent is None or s.parent.span_id not in ids]
            assert their_root.attributes["gen_ai.operation.name"] == "invoke_agent"
            root = spans.one("pipeline")
            assert parent_of(spans, root) is their_root
            assert sorted(s.name for s in theirs_of(spans) if s is not their_root) == ["execute_tool retrieve_context"]
            assert spans.one("tool").name == "execute_tool retrieve_context"
            assert ragtraces(spans) == alone[how]
            got = {k.removeprefix("rag.metrics."): v for k, v in root.attributes.items() if k.startswith("rag.metrics.")}
            assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"]) == (2, 2, 1, 0.5)


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke"])
def test_chat_openai_with_ragtraces_openai_integration_on_too_is_still_one_generation(spans, store, chat_server, how):
    """Their execution context makes their ``chat`` span current around the model's own code, so the
    OpenAI SDK call runs under it; ragtrace's OpenAI wrapper still defers to LangChain's generation."""
    url, received = chat_server
    with both_on(spans, "theirs-first"):
        assert ragtrace.instrument("openai") == ["openai"]
        try:
            assert run("chat_openai", store, url, how) == run("chat_openai", store, url, how)
        finally:
            ragtrace.uninstrument("openai")
    assert len(received) == 2
    generated = spans.by_stage("generate")
    assert len(generated) == 2 and {s.attributes["gen_ai.provider.name"] for s in generated} == {"openai"}
    assert len({s.context.trace_id for s in spans.all()}) == 2  # one trace per request
    assert sorted(s.context.trace_id for s in generated) == sorted(s.context.trace_id for s in spans.by_stage("pipeline"))
    assert all(parent_of(spans, s).attributes.get("rag.stage") == "pipeline" for s in generated)
    assert len([s for s in theirs_of(spans) if s.name == "chat gpt-4o-mini"]) == 2  # and theirs, once each
