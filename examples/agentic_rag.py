"""An agentic RAG app (LangChain's "Build a RAG agent"), traced with one line.

``create_agent`` with the tutorial's ``content_and_artifact`` retrieval tool over LangChain's
in-memory vector store. The agent decides to search twice, then answers citing a document of each
round. ``ragtrace.instrument()`` makes the run one pipeline: a ``tool`` span per tool call with its
retrieval round under it, the model calls that chose tools marked ``tool_choice``, and the answer
scored against both rounds' documents as its prompt shows them (``rag.retrieval.rounds`` = 2). The
lines ending in ``# ragtrace`` are the only ones the uninstrumented app lacks (tests/test_examples.py
runs it without them too). The scripted model stands in for a real one (no network, no key).
Needs ``pip install 'ragtrace[langchain]' langchain langgraph numpy`` (Python 3.11+).
Run: ``python examples/agentic_rag.py [console|jsonl:PATH]``.
"""

from __future__ import annotations

import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore

import ragtrace  # ragtrace

POLICIES = {
    "kb-refunds": "Refunds reach the original card within 5 business days.",
    "kb-credit": "Store credit is issued immediately instead of a refund.",
    "kb-shipping": "Shipping is free for orders over 50 euros.",
    "kb-returns": "Returns are accepted for 30 days after delivery.",
}
QUESTION = "Should I take a refund or store credit?"


class ScriptedModel(GenericFakeChatModel):
    """Answers with its next scripted message, tool calls included (a real chat model decides)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def search_call(query: str, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "retrieve_context", "args": {"query": query}, "id": call_id}])


def main() -> int:
    ragtrace.configure(service_name="agentic-rag", exporter=sys.argv[1] if len(sys.argv) > 1 else "console")  # ragtrace
    ragtrace.instrument()  # ragtrace

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=text, id=key, metadata={"source": key}) for key, text in POLICIES.items()])

    @tool(response_format="content_and_artifact")
    def retrieve_context(query: str):
        """Retrieve information to help answer a query."""
        retrieved_docs = store.similarity_search(query, k=2)
        serialized = "\n\n".join(f"Source: {doc.metadata}\nContent: {doc.page_content}" for doc in retrieved_docs)
        return serialized, retrieved_docs

    first, second = (store.similarity_search(q, k=2)[0].id for q in ("refunds", "delivery"))
    answer = f"A refund takes 5 business days [{first}]; returns are open for 30 days [{second}]."
    model = ScriptedModel(messages=iter([search_call("refunds", "call-1"), search_call("delivery", "call-2"), AIMessage(content=answer)]))
    prompt = "You have access to a tool that retrieves context from the policies. Use the tool to help answer user queries."
    agent = create_agent(model, tools=[retrieve_context], system_prompt=prompt)

    result = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    print(f"Q: {QUESTION}\nA: {result['messages'][-1].content}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
