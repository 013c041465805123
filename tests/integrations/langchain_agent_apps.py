"""The agent RAG apps of LangChain's and LangGraph's tutorials, built as their docs build them, with
``ToolCallingFakeChatModel`` answering from a script and the real ``InMemoryVectorStore``.

The corpus and queries are chosen so every figure can be worked by hand: with
``DeterministicFakeEmbedding(size=32)`` and k=2 the store returns (checked by ``test_the_store``)
``SEARCHES[query]``. Needs langchain 1.x and langgraph (Python >= 3.11): import it after
``importorskip``.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import create_retriever_tool, tool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel, Field

from integrations.agent_fakes import ToolCallingFakeChatModel

TEXTS = {
    "kb-refunds": "Refunds reach the original card within 5 business days.",
    "kb-credit": "Store credit is issued immediately instead of a refund.",
    "kb-shipping": "Shipping is free for orders over 50 euros.",
    "kb-returns": "Returns are accepted for 30 days after delivery.",
}
SEARCHES = {
    "refunds": ["kb-refunds", "kb-credit"],
    "delivery": ["kb-returns", "kb-refunds"],
    "credit": ["kb-credit", "kb-returns"],
}
QUESTION = "How long does a refund take?"


def make_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=text, id=id_, metadata={"source": id_}) for id_, text in TEXTS.items()])
    return store


def serialised(doc_id: str) -> str:
    """What the tutorial's tool message shows for one document."""
    return f"Source: {{'source': '{doc_id}'}}\nContent: {TEXTS[doc_id]}"


def call(tool_name: str, query: str, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": tool_name, "args": {"query": query}, "id": call_id}])


# --- LangChain's "Build a RAG agent": create_agent with a content_and_artifact tool ------------------
def rag_agent(store: InMemoryVectorStore, replies: list[AIMessage], middleware: tuple = ()):
    from langchain.agents import create_agent

    @tool(response_format="content_and_artifact")
    def retrieve_context(query: str):
        """Retrieve information to help answer a query."""
        retrieved_docs = store.similarity_search(query, k=2)
        serialized = "\n\n".join(f"Source: {doc.metadata}\nContent: {doc.page_content}" for doc in retrieved_docs)
        return serialized, retrieved_docs

    model = ToolCallingFakeChatModel(messages=iter(replies))
    prompt = "You have access to a tool that retrieves context from a blog post. Use the tool to help answer user queries."
    return create_agent(model, tools=[retrieve_context], system_prompt=prompt, middleware=list(middleware)), model


def two_step_agent(store: InMemoryVectorStore, reply: str):
    """The tutorial's 2-step variant: a ``@dynamic_prompt`` middleware retrieves before the one
    model call (through a retriever, so LangChain reports the search)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelRequest, dynamic_prompt

    retriever = store.as_retriever(search_kwargs={"k": 2})

    @dynamic_prompt
    def prompt_with_context(request: ModelRequest) -> str:
        last_query = request.state["messages"][-1].text
        retrieved_docs = retriever.invoke(last_query)
        docs_content = "\n\n".join(doc.page_content for doc in retrieved_docs)
        return f"You are a helpful assistant. Use the following context in your response:\n\n{docs_content}"

    model = ToolCallingFakeChatModel(messages=iter([AIMessage(content=reply)]))
    return create_agent(model, tools=[], middleware=[prompt_with_context]), model


# --- LangGraph's "Build a custom RAG agent": retriever tool, ToolNode, grader, rewriter ---------------
GRADE_PROMPT = "You are a grader assessing relevance of a retrieved document to a user question.\nHere is the retrieved document:\n\n{context}\n\nHere is the user question: {question}"
REWRITE_PROMPT = "Look at the input and try to reason about the underlying semantic intent / meaning.\nHere is the initial question:\n-------\n{question}\n-------\nFormulate an improved question:"
GENERATE_PROMPT = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to answer the question. "
    "If you don't know the answer, just say that you don't know.\nQuestion: {question}\nContext: {context}"
)


class GradeDocuments(BaseModel):
    """Grade documents using a binary score for relevance check."""

    binary_score: str = Field(description="Relevance score: 'yes' if relevant, or 'no' if not relevant")


def grade(score: str, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "GradeDocuments", "args": {"binary_score": score}, "id": call_id}])


def custom_rag_graph(
    store: InMemoryVectorStore, replies: list[AIMessage], grades: list[AIMessage], document_prompt: Any = None, retriever_tool: Any = None, **compile: Any
):
    """``document_prompt``: the retriever tool's rendering of each document (default ``{page_content}``,
    unlabelled); ``retriever_tool``: another tool named ``retrieve_blog_posts`` in its place."""
    retriever_tool = retriever_tool or create_retriever_tool(
        store.as_retriever(search_kwargs={"k": 2}), "retrieve_blog_posts", "Search and return information about refunds.", document_prompt=document_prompt
    )
    response_model = ToolCallingFakeChatModel(messages=iter(replies))
    grader_model = ToolCallingFakeChatModel(messages=iter(grades))

    def generate_query_or_respond(state: MessagesState):
        response = response_model.bind_tools([retriever_tool]).invoke(state["messages"])
        return {"messages": [response]}

    def grade_documents(state: MessagesState) -> Literal["generate_answer", "rewrite_question"]:
        question = state["messages"][0].content
        context = state["messages"][-1].content
        prompt = GRADE_PROMPT.format(question=question, context=context)
        response = grader_model.with_structured_output(GradeDocuments).invoke([{"role": "user", "content": prompt}])
        return "generate_answer" if response.binary_score == "yes" else "rewrite_question"

    def rewrite_question(state: MessagesState):
        question = state["messages"][0].content
        response = response_model.invoke([{"role": "user", "content": REWRITE_PROMPT.format(question=question)}])
        return {"messages": [HumanMessage(content=response.content)]}

    def generate_answer(state: MessagesState):
        question = state["messages"][0].content
        context = state["messages"][-1].content
        response = response_model.invoke([{"role": "user", "content": GENERATE_PROMPT.format(question=question, context=context)}])
        return {"messages": [response]}

    workflow = StateGraph(MessagesState)
    workflow.add_node(generate_query_or_respond)
    workflow.add_node("retrieve", ToolNode([retriever_tool]))
    workflow.add_node(rewrite_question)
    workflow.add_node(generate_answer)
    workflow.add_edge(START, "generate_query_or_respond")
    workflow.add_conditional_edges("generate_query_or_respond", tools_condition, {"tools": "retrieve", END: END})
    workflow.add_conditional_edges("retrieve", grade_documents)
    workflow.add_edge("generate_answer", END)
    workflow.add_edge("rewrite_question", "generate_query_or_respond")
    return workflow.compile(**compile), response_model
