"""LangChain- and LlamaIndex-style document objects, recorded as they are.

Retrievers can return LangChain ``Document`` objects (alone or as ``(document, score)`` pairs from
``similarity_search_with_score``) and LlamaIndex ``NodeWithScore(node, score)`` objects; ragtrace
reads their ids, text and scores without adapters. To avoid a framework install, the classes below
are plain stand-ins with the same shape as ``langchain_core.documents.Document`` and
``llama_index.core.schema.TextNode`` / ``NodeWithScore``. Here both feed one hybrid pipeline: a
chunk found by both retrievers counts once in ``retrieved`` and once in ``duplicate_chunks``.

    python examples/framework_documents.py [EXPORTER]   # console (default), jsonl:PATH or otlp
"""

from __future__ import annotations

import sys

import ragtrace


class Document:  # langchain_core.documents.Document
    def __init__(self, page_content: str, metadata: dict | None = None, id: str | None = None) -> None:
        self.page_content, self.metadata, self.id = page_content, metadata or {}, id


class TextNode:  # llama_index.core.schema.TextNode
    def __init__(self, text: str, id_: str, metadata: dict | None = None) -> None:
        self.text, self.id_, self.metadata = text, id_, metadata or {}

    def get_content(self) -> str:
        return self.text


class NodeWithScore:  # llama_index.core.schema.NodeWithScore
    def __init__(self, node: TextNode, score: float | None = None) -> None:
        self.node, self.score = node, score


TEXTS = {
    "guide-install": "Install the agent with pip install acme-agent.",
    "guide-config": "The agent reads its settings from acme.toml in the working directory.",
    "guide-proxy": "Behind a proxy, set HTTPS_PROXY before starting the agent.",
}


def vector_store_search(query: str) -> list[tuple[Document, float]]:  # a LangChain vector store
    return [(Document(TEXTS[i], {"source": f"{i}.md"}, id=i), s) for i, s in (("guide-config", 0.82), ("guide-install", 0.61))]


def keyword_retrieve(query: str) -> list[NodeWithScore]:  # a LlamaIndex BM25 retriever
    return [NodeWithScore(TextNode(TEXTS[i], id_=i), s) for i, s in (("guide-proxy", 7.1), ("guide-config", 5.4))]


def answer(question: str) -> ragtrace.RagPipeline:
    with ragtrace.rag_pipeline("hybrid-docs", query=question) as run:
        with ragtrace.retrieve(question, data_source="chroma", top_k=2) as dense:
            dense.record(vector_store_search(question))
        with ragtrace.retrieve(question, data_source="bm25", top_k=2) as sparse:
            sparse.record(keyword_retrieve(question))
        with ragtrace.assemble(max_tokens=200) as ctx:
            for doc, _ in vector_store_search(question):
                ctx.add(doc)  # a Document as is
            for hit in keyword_retrieve(question):
                ctx.add(hit)  # a NodeWithScore as is; guide-config is already in: "duplicate"
            prompt = ctx.render(question=question)
        with ragtrace.generate(model="llama-3.1-8b", provider="vllm", prompt=prompt) as g:
            g.record("Put the settings in acme.toml [1] and set HTTPS_PROXY [3].")
    return run


if __name__ == "__main__":
    provider = ragtrace.configure(service_name="framework-docs-example", exporter=(sys.argv[1:] or ["console"])[0])
    run = answer("Where does the agent read its settings behind a proxy?")
    provider.force_flush()
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in run.metrics.items()})
