"""Two LangChain RAG apps, built the way LangChain's docs build them, traced with one line.

An LCEL chain (retriever | format_docs | prompt | chat model | parser) and a
``create_retrieval_chain`` over ``create_stuff_documents_chain``, on LangChain's in-memory vector
store and fake models (no network, no downloads). ``ragtrace.instrument()`` turns ragtrace on: each
chain call becomes a pipeline with retrieve, assemble and generate spans and its figures. The lines
ending in ``# ragtrace`` are the only ones the uninstrumented app lacks (tests/test_examples.py runs
it without them too). Needs ``pip install 'ragtrace[langchain]' langchain-core langchain-classic numpy``.
Run: ``python examples/langchain_rag.py [console|jsonl:PATH]``.
"""

from __future__ import annotations

import sys

from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

import ragtrace  # ragtrace

POLICIES = {
    "refunds": "Refunds reach the original card within 5 business days.",
    "credit": "Store credit is issued immediately instead of a refund.",
    "shipping": "Shipping is free for orders over 50 euros.",
    "returns": "Returns are accepted for 30 days after delivery.",
}
QUESTION = "How long does a refund take?"


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(f"[{i}] {doc.page_content}" for i, doc in enumerate(docs, 1))


def main() -> int:
    ragtrace.configure(service_name="langchain-rag", exporter=sys.argv[1] if len(sys.argv) > 1 else "console")  # ragtrace
    ragtrace.instrument()  # ragtrace

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=text, id=key, metadata={"source": key}) for key, text in POLICIES.items()])
    retriever = store.as_retriever(search_kwargs={"k": 3})
    ranked = [doc.id for doc in store.similarity_search(QUESTION, k=3)]

    # 1. LCEL: the app's own format_docs numbers the documents; the model cites the first one
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the sources, citing [n].\n\n{context}"), ("human", "{question}")])
    llm = FakeListChatModel(responses=[f"{POLICIES[ranked[0]]} [1]"])
    lcel = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    print(f"Q: {QUESTION}\nA: {lcel.invoke(QUESTION)}\n")

    # 2. create_retrieval_chain: each document rendered by the chain as "[source] text"
    qa_prompt = ChatPromptTemplate.from_messages([("system", "Answer from the sources, citing [source].\n\n{context}"), ("human", "{input}")])
    qa_llm = FakeListChatModel(responses=[f"{POLICIES[ranked[1]]} [{ranked[1]}]"])
    document_prompt = PromptTemplate.from_template("[{source}] {page_content}")
    qa = create_retrieval_chain(retriever, create_stuff_documents_chain(qa_llm, qa_prompt, document_prompt=document_prompt))
    result = qa.invoke({"input": QUESTION})
    print(f"Q: {result['input']}\nA: {result['answer']}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
