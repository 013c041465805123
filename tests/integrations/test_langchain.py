"""The LangChain integration with the real packages and the fakes they ship: each app is built the
way LangChain's docs build it and turned on with one line (the ``langchain_on`` fixture runs
``ragtrace.instrument("langchain")``)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import uuid

import pytest
from langchain_classic.chains import create_history_aware_retriever, create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, PromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

import ragtrace
from ragtrace._internal.core import guard

pytestmark = pytest.mark.usefixtures("langchain_on")

TEXTS = {
    "kb-refunds": "Refunds reach the original card within 5 business days.",
    "kb-credit": "Store credit is issued immediately instead of a refund.",
    "kb-shipping": "Shipping is free for orders over 50 euros.",
    "kb-returns": "Returns are accepted for 30 days after delivery.",
}
QUESTION = "How long does a refund take?"


@pytest.fixture
def store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=text, id=id_, metadata={"source": id_}) for id_, text in TEXTS.items()])
    return store


def expected_ids(store: InMemoryVectorStore, query: str = QUESTION, k: int = 3) -> list[str]:
    """What the app's own vector store returns for the query (a search, not a traced retriever run)."""
    return [d.id for d in store.similarity_search(query, k=k)]


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(f"[{i}] {doc.page_content}" for i, doc in enumerate(docs, 1))


def lcel_chain(store: InMemoryVectorStore, answer: str):
    """LangChain's RAG tutorial chain: retriever | format_docs into a chat prompt, a chat model, a parser."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context, citing [n].\n\n{context}"), ("human", "{question}")]
    )
    llm = FakeListChatModel(responses=[answer])
    retriever = store.as_retriever(search_kwargs={"k": 3})
    return {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()


def figures(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def tree(spans) -> dict[str, list[str]]:
    """Root span name -> its children's names, per trace."""
    found = spans.all()
    by_id = {s.context.span_id: s for s in found}
    roots = [s for s in found if s.parent is None or s.parent.span_id not in by_id]
    return {r.name: sorted(s.name for s in found if s.parent is not None and s.parent.span_id == r.context.span_id) for r in roots}


# --- an LCEL chain: the prompt is built by the app's format_docs, so inclusion is located --------
def test_lcel_chain_gets_a_root_stage_spans_and_figures(spans, store):
    ids = expected_ids(store)
    answer = f"Refunds take 5 business days [{ids.index('kb-refunds') + 1 if 'kb-refunds' in ids else 1}]."
    result = lcel_chain(store, answer).invoke(QUESTION)
    assert result == answer

    assert tree(spans) == {"invoke_workflow RunnableSequence": ["assemble_context", "chat", "retrieval InMemoryVectorStore"]}
    root = spans.one("pipeline")
    assert root.attributes["rag.query.hash"]
    retrieved = spans.one("retrieve").attributes
    assert list(retrieved["rag.retrieval.chunk_ids"]) == ids and "rag.retrieval.ranks" not in retrieved  # 1..3
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "located"
    assert list(assembled["rag.context.chunk_ids"]) == ids and list(assembled["rag.context.positions"]) == [1, 2, 3]
    generated = spans.one("generate").attributes
    assert generated["rag.generation.role"] == "answer"
    cited = ids[int(answer.rsplit("[", 1)[1][0]) - 1]
    assert list(generated["rag.citation.ids"]) == [cited]
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 1)
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_precision"] == 1.0
    assert math.isclose(got["context_utilization"], 1 / 3)


def test_the_automatic_root_is_a_pipeline_its_invalid_citation_counts_and_gets_no_hint(spans, store, caplog):
    """Issue 16 item 15's hint is for stages outside any pipeline; a chain run with no
    rag_pipeline of the user's runs inside the automatic root, so a made-up label is invalid."""
    caplog.set_level(logging.WARNING, logger="ragtrace")
    lcel_chain(store, "Refunds take 5 business days [9].").invoke(QUESTION)
    generated = spans.one("generate").attributes
    assert generated["rag.citation.invalid_count"] == 1 and "rag.citation.status" not in generated
    root = spans.one("pipeline").attributes
    assert root["rag.metrics.invalid_citations"] == 1 and "outside_pipeline" not in root.get("rag.metrics.status", "")
    assert not [r for r in caplog.records if "outside any rag_pipeline" in r.getMessage()]


def _holders_of(marker: str) -> list[str]:
    """Objects gc tracks that still refer to a string holding ``marker`` (see test_no_leak.py)."""
    gc.collect()
    found = []
    for holder in gc.get_objects():
        if any(type(r) is str and marker in r and r is not marker for r in gc.get_referents(holder)):
            found.append(type(holder).__qualname__)
    return found


def _redacted_chain_run(marker: str, inside_a_pipeline: bool) -> None:
    """A retrieval chain over documents, a question and an answer that carry ``marker``; the
    store and the chain are dropped on return."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=f"{marker} passage {i}", id=f"kb-{i}") for i in range(4)])
    chain = retrieval_chain(store, f"{marker} says [kb-1].")
    if inside_a_pipeline:
        with ragtrace.rag_pipeline("users", query="q") as run:
            chain.invoke({"input": f"{marker} asks"})
        assert run.metrics["retrieved"] == 3
    else:
        chain.invoke({"input": f"{marker} asks"})


@pytest.mark.parametrize("inside_a_pipeline", [False, True], ids=["automatic root", "user pipeline"])
def test_nothing_of_a_chain_run_is_kept_once_its_pipeline_is_over(spans, inside_a_pipeline):
    """Issue 16 item 9 for the integration: the scope a user's pipeline shares across framework
    calls (documents, rendered texts, the answer) was kept for the last 64 pipelines."""
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "mk" + uuid.uuid4().hex
    _redacted_chain_run(marker, inside_a_pipeline)
    assert spans.by_stage("assemble")  # the chain was traced
    assert _holders_of(marker) == []


def test_a_formatter_that_raises_part_way_leaves_no_rendered_text_behind(spans):
    """Issue 16 item 9: what ``format_document`` rendered for the documents before the one that
    raised was kept in a module-level map after the (failed) run was over."""
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "mk" + uuid.uuid4().hex
    prompt = ChatPromptTemplate.from_messages([("system", "Context:\n{context}"), ("human", "{input}")])
    chain = create_stuff_documents_chain(FakeListChatModel(responses=["A."]), prompt, document_prompt=PromptTemplate.from_template("[{source}] {page_content}"))
    documents = [Document(page_content=f"{marker} first", metadata={"source": "a"}), Document(page_content=f"{marker} second")]
    with pytest.raises(ValueError, match="source"):  # the app's own error passes through
        chain.invoke({"input": "q", "context": documents})
    del documents, chain
    assert _holders_of(marker) == []


# --- create_stuff_documents_chain / create_retrieval_chain: each document's rendering is declared --
def retrieval_chain(store: InMemoryVectorStore, answer: str, **stuff_options):
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context, citing [source].\n\n{context}"), ("human", "{input}")])
    llm = FakeListChatModel(responses=[answer])
    combine = create_stuff_documents_chain(llm, prompt, **stuff_options)
    return create_retrieval_chain(store.as_retriever(search_kwargs={"k": 3}), combine)


def test_stuff_documents_chain_declares_each_documents_rendering(spans, store):
    ids = expected_ids(store)
    cited = ids[1]
    answer = f"See [{cited}]."
    chain = retrieval_chain(store, answer, document_prompt=PromptTemplate.from_template("[{source}] {page_content}"))
    out = chain.invoke({"input": QUESTION})
    assert out["answer"] == answer and [d.id for d in out["context"]] == ids and out["input"] == QUESTION

    assert tree(spans) == {"invoke_workflow retrieval_chain": ["assemble_context", "chat", "retrieval InMemoryVectorStore"]}
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == ids
    assert list(assembled["rag.context.labels"]) == ids  # the label each rendering opens with
    generated = spans.one("generate").attributes
    assert list(generated["rag.citation.ids"]) == [cited]
    got = figures(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 1)
    assert math.isclose(got["recall_proxy"], 1 / 3) and math.isclose(got["context_utilization"], 1 / 3)


def test_a_streamed_stuff_documents_chain_is_declared_too(spans, store):
    """``stream()``: LangChain starts a streamed run before its input is known and hands the
    input to the end callback, so the documents a formatter rendered are found there."""
    ids = expected_ids(store)
    answer = f"See [{ids[1]}]."
    chain = retrieval_chain(store, answer, document_prompt=PromptTemplate.from_template("[{source}] {page_content}"))
    pieces = list(chain.stream({"input": QUESTION}))
    assert "".join(p.get("answer", "") for p in pieces) == answer
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == ids
    assert list(spans.one("generate").attributes["rag.citation.ids"]) == [ids[1]]
    got = figures(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 1) and got["cited_positions"] == (2,)


def test_declared_offsets_are_where_the_prompt_shows_each_document(spans, store):
    ids = expected_ids(store)
    chain = retrieval_chain(store, "ok", document_prompt=PromptTemplate.from_template("[{source}] {page_content}"))
    chain.invoke({"input": QUESTION})
    assembled = spans.one("assemble").attributes
    system = "Answer from the context, citing [source].\n\n" + "\n\n".join(f"[{i}] {TEXTS[i]}" for i in ids)
    starts, ends = assembled["rag.context.char_starts"], assembled["rag.context.char_ends"]
    assert [system[s:e] for s, e in zip(starts, ends)] == [f"[{i}] {TEXTS[i]}" for i in ids]


def test_default_document_prompt_is_declared_too(spans, store):
    retrieval_chain(store, "Five days.").invoke({"input": QUESTION})
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == expected_ids(store)
    got = figures(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 0)


# --- the app's behaviour is unchanged --------------------------------------------------------------
def test_stream_gives_the_same_pieces_and_the_figures(spans, store):
    ids = expected_ids(store)
    answer = "Five days [1]."
    pieces = list(lcel_chain(store, answer).stream(QUESTION))
    assert pieces == list(answer)  # FakeListChatModel streams per character, untouched
    generated = spans.one("generate").attributes
    assert generated["gen_ai.request.stream"] is True and list(generated["rag.citation.ids"]) == [ids[0]]
    assert figures(spans.one("pipeline"))["cited"] == 1


def test_ainvoke_and_batch_link_runs_by_id(spans, store):
    chain = lcel_chain(store, "Five days [1].")
    assert asyncio.run(chain.ainvoke(QUESTION)) == "Five days [1]."
    assert chain.batch([QUESTION, "Is shipping free?"]) == ["Five days [1].", "Five days [1]."]
    roots = spans.by_stage("pipeline")
    assert len(roots) == 3 and len({r.context.trace_id for r in roots}) == 3
    for root in roots:
        trace = [s for s in spans.all() if s.context.trace_id == root.context.trace_id]
        assert sorted(s.attributes["rag.stage"] for s in trace) == ["assemble", "generate", "pipeline", "retrieve"]
        assert all(s.parent.span_id == root.context.span_id for s in trace if s is not root)
        assert figures(root)["cited"] == 1


def test_inside_a_users_pipeline_spans_nest_under_it(spans, store):
    with ragtrace.rag_pipeline("support", query=QUESTION) as run:
        lcel_chain(store, "Five days [1].").invoke(QUESTION)
    assert tree(spans) == {"invoke_workflow support": ["assemble_context", "chat", "retrieval InMemoryVectorStore"]}
    assert run.metrics["cited"] == 1 and run.metrics["retrieved"] == 3


def test_the_apps_exception_passes_through_and_marks_the_root(spans, store):
    def broken(docs):
        raise KeyError("no such template")

    chain = {"context": store.as_retriever() | broken, "question": RunnablePassthrough()} | ChatPromptTemplate.from_template("{context}")
    with pytest.raises(KeyError, match="no such template"):
        chain.invoke(QUESTION)
    root = spans.one("pipeline")
    assert root.status.status_code.name == "ERROR"
    assert root.events[0].attributes["exception.type"] == "KeyError"


def test_an_internal_error_is_logged_once_and_swallowed(spans, store, monkeypatch, caplog):
    from ragtrace._internal.stages.retrieval import Retrieve

    def fail(self, output):
        raise RuntimeError("ragtrace bug")

    guard.set_strict(False)
    monkeypatch.setattr(Retrieve, "record", fail)
    chain = lcel_chain(store, "Five days [1].")
    with caplog.at_level(logging.WARNING):
        assert [chain.invoke(QUESTION) for _ in range(2)] == ["Five days [1]."] * 2
    logged = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(logged) == 1 and "RuntimeError" in logged[0].getMessage()


def test_redact_mode_exports_no_document_or_prompt_text(spans, store):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    retrieval_chain(store, "Refunds take five days [kb-refunds].", document_prompt=PromptTemplate.from_template("[{source}] {page_content}")).invoke({"input": QUESTION})
    exported = repr([dict(s.attributes) for s in spans.all()]) + repr([e.attributes for s in spans.all() for e in s.events])
    for text in [*TEXTS.values(), QUESTION, "five days"]:
        assert text not in exported
    assert spans.one("assemble").attributes["rag.context.inclusion_method"] == "declared"


# --- calls that are not the answer, and rerankers ----------------------------------------------------
def test_condense_question_is_a_rewrite_and_stays_out_of_the_figures(spans, store):
    condense = ChatPromptTemplate.from_messages([MessagesPlaceholder("chat_history"), ("human", "{input}"), ("human", "Rephrase as one question.")])
    rewriter = FakeListChatModel(responses=[QUESTION])
    history_aware = create_history_aware_retriever(rewriter, store.as_retriever(search_kwargs={"k": 3}), condense)
    prompt = ChatPromptTemplate.from_messages([("system", "{context}"), MessagesPlaceholder("chat_history"), ("human", "{input}")])
    chain = create_retrieval_chain(history_aware, create_stuff_documents_chain(FakeListChatModel(responses=["Five days [kb-refunds]."]), prompt))
    history = [HumanMessage("I want my money back."), AIMessage("I can help with refunds.")]
    chain.invoke({"input": "How long?", "chat_history": history})

    roles = sorted(s.attributes["rag.generation.role"] for s in spans.by_stage("generate"))
    assert roles == ["answer", "rewrite"]
    answer = next(s for s in spans.by_stage("generate") if s.attributes["rag.generation.role"] == "answer")
    rewrite = next(s for s in spans.by_stage("generate") if s.attributes["rag.generation.role"] == "rewrite")
    assert "rag.metrics.cited" not in rewrite.attributes
    ids = expected_ids(store)
    got = figures(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, int("kb-refunds" in ids))
    assert answer.start_time > spans.one("retrieve").end_time > rewrite.end_time


class TopTwo(BaseDocumentCompressor):
    """A compressor that keeps the two documents whose text shares most words with the query."""

    def compress_documents(self, documents, query, callbacks=None):
        words = set(query.lower().split())
        return sorted(documents, key=lambda d: -len(words & set(d.page_content.lower().split())))[:2]


def test_a_compression_retriever_is_a_rerank_of_the_inner_retrieval(spans, store):
    ids = expected_ids(store, "refund", k=4)
    retriever = ContextualCompressionRetriever(base_compressor=TopTwo(), base_retriever=store.as_retriever(search_kwargs={"k": 4}))
    prompt = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{question}")])
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | FakeListChatModel(responses=["[1]"]) | StrOutputParser()
    chain.invoke("refund")
    kept = TopTwo().compress_documents([Document(page_content=TEXTS[i], id=i) for i in ids], "refund")

    retrieved = spans.one("retrieve").attributes
    assert list(retrieved["rag.retrieval.chunk_ids"]) == ids
    reranked = spans.one("rerank")
    assert list(reranked.attributes["rag.rerank.output_ids"]) == [d.id for d in kept]
    assert reranked.start_time >= spans.one("retrieve").end_time
    assembled = spans.one("assemble").attributes
    assert list(assembled["rag.context.chunk_ids"]) == [d.id for d in kept]
    got = figures(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (4, 2, 1)


def test_uninstrumented_chains_are_not_traced(spans, store):
    ragtrace.uninstrument("langchain")
    assert lcel_chain(store, "x").invoke(QUESTION) == "x"
    assert spans.all() == []


# --- beside OpenInference's LangChainInstrumentor ----------------------------------------------------
@pytest.fixture
def openinference_on(spans):
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=spans.provider)
    yield
    LangChainInstrumentor().uninstrument()


@pytest.mark.usefixtures("openinference_on")
def test_beside_openinference_one_trace_and_the_same_figures(spans, store):
    ids = expected_ids(store)
    answer = f"See [{ids[0]}]."
    chain = retrieval_chain(store, answer, document_prompt=PromptTemplate.from_template("[{source}] {page_content}"))
    assert chain.invoke({"input": QUESTION})["answer"] == answer

    everything = spans.all()
    assert len({s.context.trace_id for s in everything}) == 1
    ours = [s for s in everything if "rag.stage" in s.attributes]
    theirs = [s for s in everything if "rag.stage" not in s.attributes]
    assert sorted(s.attributes["rag.stage"] for s in ours) == ["assemble", "generate", "pipeline", "retrieve"]
    (their_root,) = [s for s in theirs if s.parent is None]
    assert their_root.name == "retrieval_chain"
    root = spans.one("pipeline")
    assert root.parent.span_id == their_root.context.span_id  # ragtrace's root inside OpenInference's
    kinds = sorted(s.attributes.get("openinference.span.kind") for s in theirs)
    assert "RETRIEVER" in kinds and "LLM" in kinds  # what is duplicated (docs/integrations.md)
    assert spans.one("assemble").attributes["rag.context.inclusion_method"] == "declared"
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 1)


def test_a_chat_models_usage_model_and_messages_are_recorded(spans, store):
    from langchain_core.language_models import GenericFakeChatModel

    reply = AIMessage(
        content="Five days [1].",
        usage_metadata={"input_tokens": 57, "output_tokens": 6, "total_tokens": 63},
        response_metadata={"finish_reason": "stop", "model_name": "gpt-4o-mini-2024-07-18"},
    )
    llm = GenericFakeChatModel(messages=iter([reply]))
    prompt = ChatPromptTemplate.from_messages([("system", "Sources:\n{context}"), ("human", "{question}")])
    chain = {"context": store.as_retriever(search_kwargs={"k": 3}) | format_docs, "question": RunnablePassthrough()} | prompt | llm
    returned = chain.invoke(QUESTION)
    assert returned.content == reply.content and returned.usage_metadata == reply.usage_metadata  # the app's object, as the model made it

    generated = spans.one("generate").attributes
    assert (generated["gen_ai.usage.input_tokens"], generated["gen_ai.usage.output_tokens"]) == (57, 6)
    assert generated["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert list(generated["gen_ai.response.finish_reasons"]) == ["stop"]
    assert generated["gen_ai.provider.name"] == "genericfakechatmodel"
    messages = json.loads(generated["gen_ai.input.messages"])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["parts"][0]["content"] == QUESTION
    assert figures(spans.one("pipeline"))["cited"] == 1


def test_separate_calls_inside_a_users_pipeline_share_it(spans, store):
    """retriever.invoke, the app's own prompt, llm.invoke: one pipeline, the documents located."""
    llm = FakeListChatModel(responses=["Five days [2]."])
    with ragtrace.rag_pipeline("manual", query=QUESTION) as run:
        docs = store.as_retriever(search_kwargs={"k": 3}).invoke(QUESTION)
        reply = llm.invoke([("system", "Sources:\n" + format_docs(docs)), ("human", QUESTION)])
    assert reply.content == "Five days [2]."
    assert tree(spans) == {"invoke_workflow manual": ["assemble_context", "chat", "retrieval InMemoryVectorStore"]}
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "located"
    assert list(assembled["rag.context.chunk_ids"]) == [d.id for d in docs]
    assert list(spans.one("generate").attributes["rag.citation.ids"]) == [docs[1].id]
    assert (run.metrics["retrieved"], run.metrics["in_context"], run.metrics["cited"]) == (3, 3, 1)


def test_a_users_own_assembly_is_not_doubled(spans, store):
    llm = FakeListChatModel(responses=["Five days [1]."])
    with ragtrace.rag_pipeline("own-assembly", query=QUESTION) as run:
        docs = store.as_retriever(search_kwargs={"k": 3}).invoke(QUESTION)
        with ragtrace.assemble() as ctx:
            ctx.add(docs[0])
            prompt = ctx.render("Sources:\n{context}\n\nQuestion: {question}", question=QUESTION)
        llm.invoke(prompt)
    (assembled,) = spans.by_stage("assemble")
    assert assembled.attributes["rag.context.inclusion_method"] == "recorded"
    assert (run.metrics["retrieved"], run.metrics["in_context"], run.metrics["cited"]) == (3, 1, 1)


def test_a_run_in_flight_when_uninstrumented_still_ends(spans, store):
    stream = lcel_chain(store, "Five days [1].").stream(QUESTION)
    first = next(stream)
    ragtrace.uninstrument("langchain")
    assert first + "".join(stream) == "Five days [1]."
    root = spans.one("pipeline")  # ended with the stream, figures on it
    assert figures(root)["cited"] == 1
    spans.clear()
    assert lcel_chain(store, "x").invoke(QUESTION) == "x"
    assert spans.all() == []  # nothing new starts


# --- ChatOpenAI with the OpenAI integration on too -----------------------------------------------
@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke"])
def test_chat_openai_beside_the_openai_integration_is_one_generation(spans, store, chat_server, how):
    """langchain-openai's ``ChatOpenAI`` calls ``chat.completions.create``: with both integrations
    on, the call is LangChain's generation only (the OpenAI wrapper defers to it), not two."""
    from langchain_openai import ChatOpenAI

    url, received = chat_server
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context, citing [n].\n\n{context}"), ("human", "{question}")])
    chain = {"context": store.as_retriever(search_kwargs={"k": 3}) | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    assert ragtrace.instrument("openai") == ["openai"]
    try:
        if how == "invoke":
            answer = chain.invoke(QUESTION)
        elif how == "stream":
            answer = "".join(chain.stream(QUESTION))
        else:
            answer = asyncio.run(chain.ainvoke(QUESTION))
        plain = chain.invoke(QUESTION.upper())  # afterwards, outside any stale marker: still one each
    finally:
        ragtrace.uninstrument("openai")
    assert answer == plain == "Refunds take 5 business days [1]."
    assert len(received) == 2
    generated = spans.by_stage("generate")
    assert len(generated) == 2, [s.name for s in generated]
    assert {s.attributes["gen_ai.provider.name"] for s in generated} == {"openai"}
    assert all(s.attributes["rag.citation.ids"] for s in generated)
    assert len(spans.by_stage("pipeline")) == 2
    assert all(figures(root)["cited"] == 1 for root in spans.by_stage("pipeline"))


@pytest.mark.parametrize("cut_after", [None, 6])
def test_a_chat_openai_stream_cut_off_before_its_finish_reason_is_not_scored(spans, store, chat_server, cut_after):
    """The connection drops before the chunk with the finish_reason: ChatOpenAI's stream just ends
    with "Refunds take 5 business days " and no citation. Scored as it stands that would be
    cited 0, recall 0.0 where the whole answer gives 1/3: not measurable (answer_incomplete).
    The same chain with the whole stream scores as usual."""
    from langchain_openai import ChatOpenAI

    from loopback import ChatCompletions

    url, _ = chat_server
    ChatCompletions.cut_after = cut_after
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context, citing [n].\n\n{context}"), ("human", "{question}")])
    chain = {"context": store.as_retriever(search_kwargs={"k": 3}) | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    answer = "".join(chain.stream(QUESTION))
    got = figures(spans.one("pipeline"))
    if cut_after is None:
        assert answer == "Refunds take 5 business days [1]." and got["cited"] == 1 and "status" not in got
        return
    assert answer == "Refunds take 5 business days "
    assert spans.one("generate").attributes["rag.citation.status"] == "answer_incomplete"
    assert got["status"] == "answer_incomplete" and "recall_proxy" not in got and got["retrieved"] == 3
