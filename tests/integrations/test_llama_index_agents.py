"""LlamaIndex agents (``FunctionAgent`` of ``llama_index.core.agent.workflow``) under
``ragtrace.instrument("llama_index")``: a ``RetrieverTool`` over a ``VectorStoreIndex`` (one and two
rounds) and a ``QueryEngineTool``, with ``MockFunctionCallingLLM`` answering from a script, run
and streamed, every figure worked by hand."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.schema import TextNode
from llama_index.core.tools import QueryEngineTool, RetrieverTool

from llama_index_apps import TEXTS, CitingLLM
from ragtrace._internal.core.tokens import SimpleTokenizer

pytestmark = pytest.mark.usefixtures("llama_index_on")
KEYWORDS = ("refund", "credit", "shipping", "return")


class KeywordEmbedding(BaseEmbedding):
    """One dimension per keyword the text holds: which nodes a query finds is worked by hand.
    "refund" -> kb-refunds (cosine 1), kb-credit (1/sqrt 2: it says "refund" too); "return credit"
    -> kb-returns (1/sqrt 2), kb-credit (1/2)."""

    def _vector(self, text: str) -> list[float]:
        lowered = text.lower()
        return [1.0 if word in lowered else 0.0 for word in KEYWORDS]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def make_index() -> VectorStoreIndex:
    return VectorStoreIndex([TextNode(id_=i, text=t) for i, t in TEXTS.items()], embed_model=KeywordEmbedding(model_name="keywords"))


def scripted(replies: list[ChatMessage]) -> MockFunctionCallingLLM:
    script = iter(replies)
    return MockFunctionCallingLLM(response_generator=lambda messages, **kw: next(script))


def tool_call(tool: str, query: str, call_id: str, argument: str = "input") -> ChatMessage:
    return ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id=call_id, tool_name=tool, tool_kwargs={argument: query})])


def run(agent: FunctionAgent, mode: str) -> str:
    async def main() -> str:
        handler = agent.run(user_msg="How long does a refund take?")
        if mode == "stream":
            async for _ in handler.stream_events():
                pass
        return str(await handler)

    return asyncio.run(main())


def figures(span) -> dict[str, Any]:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.") and k not in ("rag.metrics.status", "rag.metrics.inclusion_method")}


def roles(spans) -> list[str]:
    return [s.attributes["rag.generation.role"] for s in sorted(spans.by_stage("generate"), key=lambda s: s.start_time)]


def same(found: dict, truth: dict) -> bool:
    return found.keys() == truth.keys() and all(math.isclose(found[k], v) if isinstance(v, float) else found[k] == v for k, v in truth.items())


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_function_agent_with_a_retriever_tool_two_rounds(llama_index_on, mode):
    spans = llama_index_on
    answer = "Five business days [kb-refunds]; returns within 30 days [kb-returns]."
    tool = RetrieverTool.from_defaults(make_index().as_retriever(similarity_top_k=2), name="search_kb", description="Search the knowledge base.")
    llm = scripted([tool_call("search_kb", "refund", "c1"), tool_call("search_kb", "return credit", "c2"), ChatMessage(role="assistant", content=answer)])
    agent = FunctionAgent(tools=[tool], llm=llm, system_prompt="Answer from the knowledge base, citing [id].")
    assert run(agent, mode) == answer

    (root,) = [s for s in spans.all() if s.parent is None]
    assert root.name == "invoke_workflow FunctionAgent"
    assert roles(spans) == ["tool_choice", "tool_choice", "answer"]
    tools = spans.by_stage("tool")
    assert sorted(t.name for t in tools) == ["execute_tool search_kb"] * 2
    first, second = sorted(spans.by_stage("retrieve"), key=lambda s: s.start_time)
    assert list(first.attributes["rag.retrieval.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert list(second.attributes["rag.retrieval.chunk_ids"]) == ["kb-returns", "kb-credit"]
    assert [(s.attributes["rag.retrieval.round"], s.attributes["rag.retrieval.new_chunks"]) for s in (first, second)] == [(1, 2), (2, 1)]
    assert {s.parent.span_id for s in (first, second)} <= {t.context.span_id for t in tools}
    (assemble,) = [s for s in spans.by_stage("assemble")]
    assert assemble.attributes["rag.context.inclusion_method"] == "declared"
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit", "kb-returns"]
    # system, user, the two tool calls, each followed by its tool message
    assert list(assemble.attributes["rag.context.message_indexes"]) == [3, 3, 5]
    # R = {refunds, credit, returns} (credit twice), C = R, K = {refunds (round 1), returns}
    truth = {
        "retrieved": 3, "duplicate_chunks": 1, "in_context": 3, "context_precision": 1.0, "cited": 2,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 2 / 3,
        "recall_proxy_weighted": (1 + 1) / (1 + 1 + 1 / 2), "context_utilization": 2 / 3,
        "wasted_context_tokens": SimpleTokenizer().count(TEXTS["kb-credit"]), "cited_positions": [1, 3],
    }
    assert same(figures(root), {**truth, "cited_positions": tuple(truth["cited_positions"])}), figures(root)
    assert root.attributes["rag.retrieval.rounds"] == 2


def test_function_agent_with_a_query_engine_tool(llama_index_on):
    """The engine answers inside the tool (its own assembly and answer, declared); the agent's final
    model call sees only that answer, where the nodes are not: they are retrieved, not in its context."""
    spans = llama_index_on
    engine = make_index().as_query_engine(llm=CitingLLM(), similarity_top_k=2)
    tool = QueryEngineTool.from_defaults(engine, name="kb", description="Answer questions about refunds.")
    llm = scripted([tool_call("kb", "refund", "c1"), ChatMessage(role="assistant", content="It takes five business days.")])
    agent = FunctionAgent(tools=[tool], llm=llm)
    assert run(agent, "run") == "It takes five business days."

    roots = [s for s in spans.all() if s.parent is None]
    assert [s.name for s in roots] == ["invoke_workflow FunctionAgent"]
    (tool_span,) = spans.by_stage("tool")
    (retrieve,) = spans.by_stage("retrieve")
    assert list(retrieve.attributes["rag.retrieval.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert roles(spans) == ["tool_choice", "answer", "answer"]  # the engine's answer, then the agent's
    engine_context, agent_context = sorted(spans.by_stage("assemble"), key=lambda s: s.start_time)
    assert engine_context.attributes["rag.context.inclusion_method"] == "declared"
    assert list(engine_context.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert agent_context.attributes["rag.context.inclusion_method"] == "located"
    assert list(agent_context.attributes["rag.context.chunk_ids"]) == []
    assert roots[0].attributes["rag.retrieval.rounds"] == 1
    assert figures(roots[0])["retrieved"] == 2 and figures(roots[0])["in_context"] == 2  # the engine's context


def test_agent_workflow_is_one_pipeline_and_a_tool_call_is_no_unreadable_answer(llama_index_on, caplog):
    from llama_index.core.agent.workflow import AgentWorkflow

    spans = llama_index_on
    answer = "Five business days [kb-refunds]."
    tool = RetrieverTool.from_defaults(make_index().as_retriever(similarity_top_k=2), name="search_kb", description="Search the knowledge base.")
    llm = scripted([tool_call("search_kb", "refund", "c1"), ChatMessage(role="assistant", content=answer)])
    workflow = AgentWorkflow(agents=[FunctionAgent(name="kb_agent", description="Answers from the knowledge base.", tools=[tool], llm=llm)], root_agent="kb_agent")
    with caplog.at_level("WARNING", logger="ragtrace"):
        assert run(workflow, "run") == answer
    assert not [r for r in caplog.records if "could not be read" in r.getMessage()]  # the tool-choosing call has no text
    (root,) = [s for s in spans.all() if s.parent is None]
    assert root.name == "invoke_workflow AgentWorkflow"
    assert roles(spans) == ["tool_choice", "answer"]
    # R = C = {refunds, credit}, K = {refunds} at position 1
    truth = {
        "retrieved": 2, "duplicate_chunks": 0, "in_context": 2, "context_precision": 1.0, "cited": 1,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 0.5,
        "recall_proxy_weighted": 1 / (1 + 1 / 2), "context_utilization": 0.5,
        "wasted_context_tokens": SimpleTokenizer().count(TEXTS["kb-credit"]), "cited_positions": (1,),
    }
    assert same(figures(root), truth), figures(root)
    assert root.attributes["rag.retrieval.rounds"] == 1


@pytest.mark.parametrize("asynchronous", [False, True], ids=["def", "async-def"])
def test_a_ragtrace_retriever_inside_a_function_tool_leaves_the_answer_unmeasured_not_wrong(llama_index_on, asynchronous):
    """Not covered yet: its chunks can't be placed in the agent's prompt, so the answer's figures
    say so (context_unknown) instead of counting them retrieved and never shown."""
    import ragtrace
    from llama_index.core.tools import FunctionTool

    spans = llama_index_on

    @ragtrace.retriever(data_source="policies")
    def search(query: str) -> list[dict]:
        return [{"id": "kb-refunds", "content": TEXTS["kb-refunds"]}]

    def lookup(query: str) -> str:
        """Look up the policies."""
        return "\n\n".join(d["content"] for d in search(query))

    async def alookup(query: str) -> str:
        """Look up the policies."""
        return lookup(query)

    llm = scripted([tool_call("lookup", "refund", "c1", "query"), ChatMessage(role="assistant", content="Five business days [kb-refunds].")])
    tool = FunctionTool.from_defaults(async_fn=alookup, name="lookup") if asynchronous else FunctionTool.from_defaults(lookup)
    agent = FunctionAgent(tools=[tool], llm=llm)
    run(agent, "run")
    (root,) = [s for s in spans.all() if s.parent is None]
    answer = [s for s in spans.by_stage("generate") if s.attributes["rag.generation.role"] == "answer"][0]
    status = set(root.attributes["rag.metrics.status"].split(","))
    # the search is recorded in the pipeline, but is no round: the answer's context is unknown
    assert answer.attributes["rag.citation.status"] == "context_unknown" and "no_context" in status, status
    assert root.attributes["rag.metrics.retrieved"] == 1
    (retrieve,) = spans.by_stage("retrieve")
    assert retrieve.parent.span_id == spans.one("tool").context.span_id
    for span in (root, answer):
        assert "rag.metrics.cited" not in span.attributes and "rag.metrics.in_context" not in span.attributes
        assert "rag.metrics.context_precision" not in span.attributes
