"""A LangChain app traced by ``ragtrace.instrument()`` alone, as a real Phoenix stores it: the span
kinds Phoenix shows, the documents and messages it reads, and the figures on the root."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.vectorstores import InMemoryVectorStore

import ragtrace

from .phoenix import PhoenixServer
from .test_phoenix_roundtrip import Export

pytestmark = pytest.mark.heavy

TEXTS = {"kb-bm25": "BM25 is a lexical ranking function.", "kb-dense": "Dense retrieval embeds queries.", "kb-rerank": "Rerankers reorder candidates."}
QUERY = "What is BM25?"


@pytest.fixture
def export(phoenix_server: PhoenixServer, phoenix_project: str) -> Iterator[Export]:
    exporting = Export(phoenix_server, phoenix_project)
    exporting.configure()
    ragtrace.instrument("langchain")
    yield exporting
    ragtrace.uninstrument("langchain")
    exporting.close()


def test_a_retrieval_chain_as_phoenix_sees_it(export: Export) -> None:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents([Document(page_content=t, id=i, metadata={"source": i}) for i, t in TEXTS.items()])
    ids = [d.id for d in store.similarity_search(QUERY, k=3)]
    prompt = ChatPromptTemplate.from_messages([("system", "Cite [source].\n\n{context}"), ("human", "{input}")])
    llm = FakeListChatModel(responses=[f"It ranks lexically [{ids[0]}]."])
    combine = create_stuff_documents_chain(llm, prompt, document_prompt=PromptTemplate.from_template("[{source}] {page_content}"))
    create_retrieval_chain(store.as_retriever(search_kwargs={"k": 3}), combine).invoke({"input": QUERY})

    export.flush()
    (root,) = [s for s in export.sdk_spans() if s.parent is None]
    names = {"invoke_workflow retrieval_chain", "retrieval InMemoryVectorStore", "assemble_context", "chat"}
    spans = export.server.wait_for_spans(
        export.project, lambda found: {s["name"] for s in found} >= names, trace_id=format(root.context.trace_id, "032x")
    )
    by_name = {s["name"]: s for s in spans}
    assert sorted(by_name) == sorted(names) and len(spans) == 4
    assert {n: by_name[n]["span_kind"] for n in names} == {
        "invoke_workflow retrieval_chain": "CHAIN",
        "retrieval InMemoryVectorStore": "RETRIEVER",
        "assemble_context": "PROMPT",
        "chat": "LLM",
    }
    retrieval = by_name["retrieval InMemoryVectorStore"]["attributes"]
    assert [retrieval[f"retrieval.documents.{i}.document.id"] for i in range(3)] == ids
    chat = by_name["chat"]["attributes"]
    assert [chat[f"llm.input_messages.{i}.message.role"] for i in range(2)] == ["system", "user"]
    assert chat["llm.output_messages.0.message.content"] == f"It ranks lexically [{ids[0]}]."
    assert by_name["assemble_context"]["attributes"]["rag.context.inclusion_method"] == "declared"
    figures = by_name["invoke_workflow retrieval_chain"]["attributes"]
    assert (figures["rag.metrics.retrieved"], figures["rag.metrics.in_context"], figures["rag.metrics.cited"]) == (3, 3, 1)
    assert figures["input.value"] == QUERY
