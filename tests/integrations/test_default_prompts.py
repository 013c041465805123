"""Citations on the frameworks' default paths (issue 27), on the real packages and their fakes.

Both big frameworks put the documents in the prompt without labels by default. An answer citing
``[1]`` there can't be tied to a document, so its citation figures are not measurable
(``citations_unresolved``), on every inclusion path alike: declared (LangChain's
``create_stuff_documents_chain``, LlamaIndex's query engine) and located (an LCEL chain).
"""

from __future__ import annotations

import re

import pytest
from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

import ragtrace
from ragtrace._internal import names
from tests.citation_paths import measured

TEXTS = {
    "kb-refunds": "Refunds reach the original card within 5 business days.",
    "kb-credit": "Store credit is issued immediately instead of a refund.",
    "kb-shipping": "Shipping is free for orders over 50 euros.",
    "kb-returns": "Returns are accepted for 30 days after delivery.",
}
QUESTION = "How long does a refund take?"
ANSWER = "Five business days [1], or store credit at once [3]."
CITATION_FIGURES = ("cited", "invalid_citations", "unknown_citations", "recall_proxy", "context_utilization", "wasted_context_tokens")


@pytest.fixture
def store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=text, id=id_) for id_, text in TEXTS.items()])
    return store


def _unresolved(spans) -> dict:
    root = spans.one("pipeline").attributes
    got = {k.removeprefix("rag.metrics."): v for k, v in root.items() if k.startswith("rag.metrics.")}
    assert spans.one("generate").attributes[names.RAG_CITATION_STATUS] == "citations_unresolved"
    assert "citations_unresolved" in root[names.RAG_METRICS_STATUS]
    assert not any(figure in got for figure in CITATION_FIGURES), got
    assert (got["retrieved"], got["in_context"], got["context_precision"]) == (3, 3, 1.0)
    return got


@pytest.mark.usefixtures("langchain_on")
def test_stuff_documents_chain_with_its_default_document_prompt_leaves_bare_citations_unresolved(spans, store):
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context, citing [n].\n\n{context}"), ("human", "{input}")])
    combine = create_stuff_documents_chain(FakeListChatModel(responses=[ANSWER]), prompt)
    chain = create_retrieval_chain(store.as_retriever(search_kwargs={"k": 3}), combine)
    assert chain.invoke({"input": QUESTION})["answer"] == ANSWER
    assert spans.one("assemble").attributes["rag.context.inclusion_method"] == "declared"
    _unresolved(spans)


@pytest.mark.usefixtures("langchain_on")
def test_an_lcel_chain_joining_documents_bare_gets_the_same_verdict(spans, store):
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the context, citing [n].\n\n{context}"), ("human", "{question}")])
    retriever = store.as_retriever(search_kwargs={"k": 3})

    def format_docs(docs):
        return "\n\n".join(d.page_content for d in docs)

    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | FakeListChatModel(responses=[ANSWER]) | StrOutputParser()
    assert chain.invoke(QUESTION) == ANSWER
    assert spans.one("assemble").attributes["rag.context.inclusion_method"] == "located"
    _unresolved(spans)


def _citing_llm(answer):
    """A LlamaIndex ``CustomLLM`` that answers ``answer(prompt)``."""
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback

    class Citing(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="citing", context_window=3900, num_output=20)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs):
            return CompletionResponse(text=answer(prompt))

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs):
            raise NotImplementedError

    return Citing()


def test_llama_index_default_query_engine_leaves_bare_citations_unresolved(llama_index_on):
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.schema import TextNode

    nodes = [TextNode(id_=key, text=text) for key, text in TEXTS.items()]
    engine = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8)).as_query_engine(llm=_citing_llm(lambda prompt: ANSWER), similarity_top_k=3)
    assert str(engine.query(QUESTION)) == ANSWER
    _unresolved(llama_index_on)


@pytest.mark.parametrize("overlap", [0, 6])
def test_citation_query_engine_pieces_map_back_to_the_retrieved_nodes(llama_index_on, overlap):
    """Case 2: ``CitationQueryEngine`` re-splits each node into ``Source n:`` pieces under new ids.
    The context is the retrieved nodes; a label on any piece resolves to the node it was cut from."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.query_engine import CitationQueryEngine
    from llama_index.core.schema import TextNode

    prompts: list[str] = []

    def answer(prompt: str) -> str:
        prompts.append(prompt)
        sources = re.findall(r"Source (\d+):\n(.*)", prompt)[2:]  # after the template's two examples
        # cite the first piece, and the piece of the long node that is not its first
        chosen = [n for n, text in sources if text.startswith(("Store credit", "Refunds to a bank"))]
        return " ".join(f"[{n}]" for n in chosen)

    texts = {
        "kb-refunds": "Refunds reach the original card within five business days. Refunds to a bank account take up to "
        "ten business days because banks batch their transfers overnight.",
        "kb-credit": "Store credit is issued immediately instead of a refund.",
        "kb-shipping": "Shipping is free for orders over fifty euros.",
    }
    index = VectorStoreIndex([TextNode(id_=k, text=t) for k, t in texts.items()], embed_model=MockEmbedding(embed_dim=8))
    engine = CitationQueryEngine.from_args(index, llm=_citing_llm(answer), similarity_top_k=3, citation_chunk_size=20, citation_chunk_overlap=overlap)
    response = engine.query(QUESTION)
    assert len(response.source_nodes) == 4 and not {n.node.node_id for n in response.source_nodes} & set(texts)  # new ids
    assembled = llama_index_on.one("assemble").attributes
    assert sorted(assembled["rag.context.chunk_ids"]) == sorted(texts)
    got = {k.removeprefix("rag.metrics."): v for k, v in llama_index_on.one("pipeline").attributes.items() if k.startswith("rag.metrics.")}
    assert (got["retrieved"], got["in_context"], got["cited"], got["invalid_citations"]) == (3, 3, 2, 0)
    assert got["context_precision"] == 1.0 and got["recall_proxy"] == pytest.approx(2 / 3)
    assert sorted(llama_index_on.one("generate").attributes["rag.citation.ids"]) == ["kb-credit", "kb-refunds"]
    # the uncited node's tokens are wasted; its "Source n:" label is not part of them
    assert got["wasted_context_tokens"] == ragtrace.SimpleTokenizer().count(texts["kb-shipping"])
    # the same prompt searched (an app's @assembler, a plain trace read by ragtrace report): the
    # pieces map back by the same shared mapping, so every figure agrees (issue 36)
    ranked = llama_index_on.one("retrieve").attributes["rag.retrieval.chunk_ids"]
    docs = [{"id": k, "content": texts[k]} for k in ranked]
    (prompt,) = prompts
    declared = {k: list(v) if isinstance(v, tuple) else v for k, v in got.items() if k != "inclusion_method"}
    for method in ("located", "inferred"):
        searched, status = measured(method, docs, prompt, str(response))
        assert status is None or "citations_unresolved" not in status, (method, status)
        assert list(searched.get("cited_positions", ())) == declared["cited_positions"], (method, searched)
        assert {k: searched.get(k) for k in declared if k != "cited_positions"} == pytest.approx(
            {k: v for k, v in declared.items() if k != "cited_positions"}
        ), (method, searched)
