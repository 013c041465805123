"""A vector-database client or a reranker model called *inside* a retrieval or rerank that is
already recorded (the app's own ``ragtrace.retrieve`` block, a LangChain retriever, a LlamaIndex
retriever and its ``SentenceTransformerRerank`` postprocessor) is that stage's work: with every
integration on, each retrieval and each rerank is one span, never two, and the figures are the
framework's. The Qdrant client runs in its local mode; the CrossEncoder is the stand-in package
(test_sentence_transformers.py)."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

import ragtrace

from .test_qdrant import QUERY, qdrant
from .test_sentence_transformers import standin  # noqa: F401 - the fixture

QUESTION = "How long does a refund take?"


def test_inside_the_apps_own_retrieve_block_the_query_is_not_recorded_again(spans):
    db = qdrant()
    assert ragtrace.instrument("qdrant") == ["qdrant"]
    try:
        with ragtrace.rag_pipeline("mine", query=QUESTION) as run:
            with ragtrace.retrieve(QUESTION, data_source="kb") as found:
                points = db.query_points("kb", query=QUERY, limit=2).points
                found.record([{"id": f"kb-{p.id}", "content": p.payload["text"]} for p in points])
    finally:
        ragtrace.uninstrument("qdrant")
    (retrieved,) = spans.by_stage("retrieve")
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["kb-1", "kb-2"]
    assert run.metrics["retrieved"] == 2


class QdrantRetriever(BaseRetriever):
    """A LangChain retriever over the Qdrant client, as apps write one."""

    client: object
    k: int = 3

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        points = self.client.query_points("kb", query=QUERY, limit=self.k).points
        return [Document(id=str(p.id), page_content=p.payload["text"], metadata={"score": p.score}) for p in points]


def test_inside_a_langchain_retriever_the_query_is_the_retrievers(spans):
    retriever = QdrantRetriever(client=qdrant())
    off = [d.id for d in retriever.invoke(QUESTION)]
    assert ragtrace.instrument("langchain", "qdrant") == ["langchain", "qdrant"]
    try:
        on = [d.id for d in retriever.invoke(QUESTION)]
    finally:
        ragtrace.uninstrument("langchain", "qdrant")
    assert on == off == ["1", "2", "3"]
    (retrieved,) = spans.by_stage("retrieve")  # LangChain's, not a second one for query_points
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["1", "2", "3"]
    assert "rag.retrieval.score_kind" not in retrieved.attributes


def test_inside_llama_index_the_query_and_the_cross_encoder_are_its_retriever_and_postprocessor(spans, standin):  # noqa: F811
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    from llama_index_apps import CitingLLM

    db = qdrant()

    class Retriever(LlamaRetriever):
        def _retrieve(self, query_bundle):
            points = db.query_points("kb", query=QUERY, limit=3).points
            return [NodeWithScore(node=TextNode(id_=str(p.id), text=p.payload["text"], metadata={"source": str(p.id)}), score=p.score) for p in points]

    def ask() -> list[str]:
        reranker = SentenceTransformerRerank(model="cross-encoder/ms-marco-MiniLM-L6-v2", top_n=2, device="cpu")
        engine = RetrieverQueryEngine.from_args(Retriever(), llm=CitingLLM(), node_postprocessors=[reranker])
        return [n.node.node_id for n in engine.query("refund card days").source_nodes]

    off = ask()
    assert off == ["1", "2"]  # the stand-in scores 1 for card and days (2), 2 for refund (1), 3 for nothing
    spans.clear()
    assert ragtrace.instrument("llama_index", "qdrant", "sentence_transformers") == ["llama_index", "qdrant", "sentence_transformers"]
    try:
        on = ask()
    finally:
        ragtrace.uninstrument("llama_index", "qdrant", "sentence_transformers")
    assert on == off
    (retrieved,) = spans.by_stage("retrieve")
    (reranked,) = spans.by_stage("rerank")
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["1", "2", "3"]
    assert list(reranked.attributes["rag.rerank.output_ids"]) == ["1", "2"]
    assert reranked.attributes.get("gen_ai.provider.name") != "sentence_transformers"  # LlamaIndex's span, not ours
    assert spans.one("pipeline").attributes["rag.metrics.retrieved"] == 3
