"""LangChain's ``create_agent`` and LangGraph's custom RAG agent under ``ragtrace.instrument("langchain")``,
with the real ``langchain``/``langgraph`` packages, a fake chat model that calls tools and the real
``InMemoryVectorStore``: the tutorial shapes, one round, two rounds, a round the grader rejected,
invoked and streamed, every figure worked by hand (``langchain_agent_apps`` has the corpus)."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest

pytest.importorskip("langchain.agents", reason="langchain 1.x (create_agent) needs Python >= 3.11")
pytest.importorskip("langgraph", reason="langgraph comes with langchain 1.x, which needs Python >= 3.11")

from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.prompts import PromptTemplate  # noqa: E402

import ragtrace  # noqa: E402
from ragtrace._internal.core.tokens import SimpleTokenizer  # noqa: E402

from integrations.langchain_agent_apps import (  # noqa: E402
    QUESTION,
    SEARCHES,
    TEXTS,
    call,
    custom_rag_graph,
    grade,
    make_store,
    rag_agent,
    serialised,
    two_step_agent,
)

pytestmark = pytest.mark.usefixtures("langchain_on")

MODES = ["invoke", "stream", "ainvoke", "astream"]


def run(app, mode: str) -> str:
    """Run the agent as the app would and return its final message's text."""
    inputs = {"messages": [{"role": "user", "content": QUESTION}]}
    if mode == "invoke":
        return app.invoke(inputs)["messages"][-1].content
    if mode == "ainvoke":
        return asyncio.run(app.ainvoke(inputs))["messages"][-1].content
    if mode == "stream":  # token by token, as a chat UI streams an agent
        pieces = [chunk.content for chunk, meta in app.stream(inputs, stream_mode="messages") if isinstance(chunk, AIMessage) and chunk.content]
        return pieces

    async def updates() -> list:
        return [update async for update in app.astream(inputs, stream_mode="updates")]

    return asyncio.run(updates())


def attrs(span) -> dict:
    return dict(span.attributes)


def figures(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.") and k not in ("rag.metrics.status", "rag.metrics.inclusion_method")}


def roles(spans) -> list[str]:
    return [s.attributes["rag.generation.role"] for s in sorted(spans.by_stage("generate"), key=lambda s: s.start_time)]


def retrieve_spans(spans) -> list:
    return sorted(spans.by_stage("retrieve"), key=lambda s: s.start_time)


def same(found: dict, truth: dict) -> bool:
    """Equal figures, floats to rounding."""
    assert found.keys() == truth.keys(), (found, truth)
    wrong = {k: (found[k], v) for k, v in truth.items() if not (found[k] == pytest.approx(v) if isinstance(v, float) else found[k] == v)}
    assert not wrong, wrong  # figure: (found, truth)
    return True


def tokens(text: str) -> int:
    return SimpleTokenizer().count(text)


def test_the_store():
    """The searches the hand-worked figures rest on."""
    store = make_store()
    for query, ids in SEARCHES.items():
        assert [d.id for d in store.similarity_search(query, k=2)] == ids


# --- create_agent with the tutorial's content_and_artifact tool -------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_one_round_create_agent(spans, mode):
    answer = "A refund takes 5 business days [kb-refunds]."
    agent, _ = rag_agent(make_store(), [call("retrieve_context", "refunds", "call-1"), AIMessage(content=answer)])
    result = run(agent, mode)
    if mode in ("invoke", "ainvoke"):
        assert result == answer  # the agent's own answer, untouched
    elif mode == "stream":
        assert "".join(result) == answer

    (root,) = [s for s in spans.all() if s.parent is None]
    assert root.name == "invoke_workflow LangGraph"
    assert all(s.context.trace_id == root.context.trace_id for s in spans.all())
    assert roles(spans) == ["tool_choice", "answer"]
    (tool,) = spans.by_stage("tool")
    assert (tool.name, tool.attributes["gen_ai.tool.call.id"]) == ("execute_tool retrieve_context", "call-1")
    (retrieve,) = retrieve_spans(spans)
    assert retrieve.parent.span_id == tool.context.span_id
    assert list(retrieve.attributes["rag.retrieval.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert (retrieve.attributes["rag.retrieval.round"], retrieve.attributes["rag.retrieval.new_chunks"]) == (1, 2)
    assemble = spans.one("assemble")
    assert assemble.attributes["rag.context.inclusion_method"] == "declared"
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    # system, user, the tool-choosing AI message, then the tool message with both documents
    assert list(assemble.attributes["rag.context.message_indexes"]) == [3, 3]
    assert list(assemble.attributes["rag.context.char_starts"]) == [0, len(serialised("kb-refunds")) + 2]
    # R = {refunds, credit}, C = R, K = {refunds} at position 1
    truth = {
        "retrieved": 2, "duplicate_chunks": 0, "in_context": 2, "context_precision": 1.0, "cited": 1,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 0.5,
        "recall_proxy_weighted": 1 / (1 + 1 / 2), "context_utilization": 0.5,
        "wasted_context_tokens": tokens(serialised("kb-credit")), "cited_positions": (1,),
    }
    assert same(figures(root), truth), figures(root)
    assert root.attributes["rag.retrieval.rounds"] == 1
    assert root.attributes["rag.metrics.inclusion_method"] == "declared"


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_two_rounds_create_agent_a_chunk_of_the_first_round_is_cited(spans, mode):
    answer = "Store credit is immediate [kb-credit]; returns take 30 days [kb-returns]."
    replies = [call("retrieve_context", "refunds", "call-1"), call("retrieve_context", "delivery", "call-2"), AIMessage(content=answer)]
    agent, model = rag_agent(make_store(), replies)
    run(agent, mode)

    root = [s for s in spans.all() if s.parent is None][0]
    assert roles(spans) == ["tool_choice", "tool_choice", "answer"]
    first, second = retrieve_spans(spans)
    assert list(first.attributes["rag.retrieval.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert list(second.attributes["rag.retrieval.chunk_ids"]) == ["kb-returns", "kb-refunds"]
    assert [(s.attributes["rag.retrieval.round"], s.attributes["rag.retrieval.new_chunks"]) for s in (first, second)] == [(1, 2), (2, 1)]
    assemble = spans.one("assemble")
    # both tool messages are in the answer's prompt: kb-refunds once (its second showing is a duplicate)
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit", "kb-returns"]
    assert list(assemble.attributes["rag.context.message_indexes"]) == [3, 3, 5]
    assert list(assemble.attributes["rag.context.dropped_reasons"]) == ["duplicate"]
    # R = {refunds, credit, returns} (refunds twice: 1 duplicate), C = R, K = {credit (round 1), returns}
    truth = {
        "retrieved": 3, "duplicate_chunks": 1, "in_context": 3, "context_precision": 1.0, "cited": 2,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 2 / 3,
        "recall_proxy_weighted": (1 / 2 + 1 / 1) / (1 + 1 / 2 + 1 / 1), "context_utilization": 2 / 3,
        "wasted_context_tokens": tokens(serialised("kb-refunds")), "cited_positions": (2, 3),
    }
    assert same(figures(root), truth), figures(root)
    assert root.attributes["rag.retrieval.rounds"] == 2
    answer_span = [s for s in spans.by_stage("generate") if s.attributes["rag.generation.role"] == "answer"][0]
    assert same(figures(answer_span), truth), figures(answer_span)
    assert answer_span.attributes["rag.generation.context_span_id"] == format(assemble.context.span_id, "016x")


def test_a_direct_answer_without_retrieval_is_not_measured(spans):
    agent, _ = rag_agent(make_store(), [AIMessage(content="Hello!")])
    assert run(agent, "invoke") == "Hello!"
    root = [s for s in spans.all() if s.parent is None][0]
    assert roles(spans) == ["answer"]
    assert root.attributes["rag.retrieval.rounds"] == 0
    assert "no_retrieval" in root.attributes["rag.metrics.status"]
    assert "rag.metrics.retrieved" not in root.attributes
    assert not spans.by_stage("assemble")


def test_a_failing_tool_passes_through_and_no_answer_is_made_up(spans):
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from integrations.agent_fakes import ToolCallingFakeChatModel

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        raise RuntimeError("backend down")

    model = ToolCallingFakeChatModel(messages=iter([call("lookup", "refunds", "call-1"), AIMessage(content="unused")]))
    agent = create_agent(model, tools=[lookup])
    with pytest.raises(RuntimeError, match="backend down"):
        agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    (tool_span,) = spans.by_stage("tool")
    assert tool_span.attributes["error.type"] == "RuntimeError"
    root = [s for s in spans.all() if s.parent is None][0]
    assert root.attributes["error.type"] == "RuntimeError"
    assert roles(spans) == ["tool_choice"]
    assert "rag.metrics.cited" not in root.attributes


def test_inside_the_apps_pipeline_the_agent_nests_and_counts_rounds(spans):
    answer = "Five business days [kb-refunds]."
    agent, _ = rag_agent(make_store(), [call("retrieve_context", "refunds", "call-1"), AIMessage(content=answer)])
    with ragtrace.rag_pipeline("support", tracer_provider=spans.provider) as pipeline:
        agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    root = [s for s in spans.all() if s.parent is None]
    assert [s.name for s in root] == ["invoke_workflow support"]
    assert root[0].attributes["rag.retrieval.rounds"] == 1
    assert pipeline.metrics["cited"] == 1 and pipeline.metrics["retrieved"] == 2


# --- the 2-step variant: @dynamic_prompt retrieves, one model call ----------------------------------
def test_two_step_dynamic_prompt_is_an_ordinary_located_assembly(spans):
    answer = "Five business days [kb-refunds]."
    agent, _ = two_step_agent(make_store(), answer)
    assert agent.invoke({"messages": [{"role": "user", "content": "refunds"}]})["messages"][-1].content == answer
    root = [s for s in spans.all() if s.parent is None][0]
    assert roles(spans) == ["answer"]
    (retrieve,) = retrieve_spans(spans)
    assert list(retrieve.attributes["rag.retrieval.chunk_ids"]) == SEARCHES["refunds"]
    assemble = spans.one("assemble")
    assert assemble.attributes["rag.context.inclusion_method"] == "located"
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert list(assemble.attributes["rag.context.message_indexes"]) == [0, 0]  # the system prompt
    assert figures(root)["in_context"] == 2 and figures(root)["cited"] == 1
    assert figures(root)["recall_proxy"] == 0.5 and root.attributes["rag.metrics.inclusion_method"] == "located"
    assert root.attributes["rag.retrieval.rounds"] == 1


# --- LangGraph's custom RAG agent: retriever tool, ToolNode, grader, rewriter -----------------------
@pytest.mark.parametrize("mode", MODES)
def test_custom_rag_graph_a_rejected_round_is_retrieved_not_in_context(spans, mode):
    answer = "A refund takes 5 business days [kb-refunds], not 30 days [kb-returns]."
    replies = [
        call("retrieve_blog_posts", "credit", "call-1"),  # round 1: graded "no"
        AIMessage(content="How many days until a refund reaches my card?"),  # the rewritten question
        call("retrieve_blog_posts", "refunds", "call-2"),  # round 2: graded "yes"
        AIMessage(content=answer),
    ]
    labelled = PromptTemplate.from_template("[{source}] {page_content}")  # so the answer's citations resolve by label
    graph, model = custom_rag_graph(make_store(), replies, [grade("no", "g-1"), grade("yes", "g-2")], labelled)
    run(graph, mode)

    root = [s for s in spans.all() if s.parent is None][0]
    assert roles(spans) == ["tool_choice", "grader", "rewrite", "tool_choice", "grader", "answer"]
    first, second = retrieve_spans(spans)
    assert list(first.attributes["rag.retrieval.chunk_ids"]) == ["kb-credit", "kb-returns"]
    assert list(second.attributes["rag.retrieval.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert [s.attributes["rag.retrieval.new_chunks"] for s in (first, second)] == [2, 1]
    assert all(s.parent.span_id in {t.context.span_id for t in spans.by_stage("tool")} for s in (first, second))
    assemble = spans.one("assemble")
    # the answer's prompt holds only the last tool message's text (GENERATE_PROMPT's {context}), as
    # create_retriever_tool rendered it: the pieces are declared
    assert assemble.attributes["rag.context.inclusion_method"] == "declared"
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert list(assemble.attributes["rag.context.labels"]) == ["kb-refunds", "kb-credit"]
    dropped = dict(zip(assemble.attributes["rag.context.dropped_ids"], assemble.attributes["rag.context.dropped_reasons"]))
    assert dropped == {"kb-returns": "not_in_prompt"}  # kb-credit is placed (round 2), said once
    # R = {credit, returns, refunds} (credit twice), C = {refunds, credit}; the answer cites refunds
    # (in context) and returns (retrieved in the rejected round, never shown to the answer)
    truth = {
        "retrieved": 3, "duplicate_chunks": 1, "in_context": 2, "context_precision": 2 / 3, "cited": 1,
        "invalid_citations": 1, "out_of_context_citations": 1, "unknown_citations": 0, "recall_proxy": 1 / 3,
        "recall_proxy_weighted": 1 / (1 + 1 + 1 / 2), "context_utilization": 0.5, "cited_positions": (1,),
    }
    # wasted_context_tokens: whether a declared piece's label ("[kb-credit] ") counts is issue 27's
    # (item 8); the unlabelled shapes above check the figure
    found = figures(root)
    assert found.pop("wasted_context_tokens") > 0
    assert same(found, truth), found
    assert root.attributes["rag.retrieval.rounds"] == 2


def test_custom_rag_graph_one_round_accepted(spans):
    answer = "Five business days [kb-refunds]."
    replies = [call("retrieve_blog_posts", "refunds", "call-1"), AIMessage(content=answer)]
    graph, _ = custom_rag_graph(make_store(), replies, [grade("yes", "g-1")])
    assert run(graph, "invoke") == answer
    root = [s for s in spans.all() if s.parent is None][0]
    assert roles(spans) == ["tool_choice", "grader", "answer"]
    assert list(spans.one("assemble").attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    truth = {
        "retrieved": 2, "duplicate_chunks": 0, "in_context": 2, "context_precision": 1.0, "cited": 1,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 0.5,
        "recall_proxy_weighted": 1 / (1 + 1 / 2), "context_utilization": 0.5,
        "wasted_context_tokens": tokens(TEXTS["kb-credit"]), "cited_positions": (1,),
    }
    assert same(figures(root), truth), figures(root)


def test_a_label_two_rounds_give_two_documents_is_unresolved_not_guessed(spans):
    """Each round numbers its documents [1], [2]: the answer's [1] may be either round's first."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from integrations.agent_fakes import ToolCallingFakeChatModel

    store = make_store()

    @tool(response_format="content_and_artifact")
    def search(query: str):
        """Search the knowledge base."""
        docs = store.similarity_search(query, k=2)
        return "\n\n".join(f"[{i}] {d.page_content}" for i, d in enumerate(docs, 1)), docs

    replies = [call("search", "refunds", "call-1"), call("search", "credit", "call-2"), AIMessage(content="Five days [1].")]
    agent = create_agent(ToolCallingFakeChatModel(messages=iter(replies)), tools=[search])
    agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    root = [s for s in spans.all() if s.parent is None][0]
    assemble = spans.one("assemble")
    # round 1: [1] refunds, [2] credit; round 2: [1] credit, [2] returns: [1] and [2] are ambiguous
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit", "kb-returns"]
    assert list(assemble.attributes["rag.context.labels"]) == ["", "", ""]
    assert "citations_unresolved" in root.attributes["rag.metrics.status"]
    assert "rag.metrics.cited" not in root.attributes and root.attributes["rag.metrics.in_context"] == 3


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_rounds_numbered_from_one_resolve_when_the_answer_shows_only_the_last(spans, mode):
    """LangGraph's custom RAG agent answers from the last tool message only (``GENERATE_PROMPT``'s
    ``{context}``): when each round numbers its documents from [1], the answer's [1] names exactly
    one document, the last round's first (issue 36)."""
    from langchain_core.tools import tool

    store = make_store()

    @tool("retrieve_blog_posts", response_format="content_and_artifact")
    def numbered(query: str):
        """Search and return information about refunds."""
        docs = store.similarity_search(query, k=2)
        return "\n\n".join(f"[{i}] {d.page_content}" for i, d in enumerate(docs, 1)), docs

    replies = [
        call("retrieve_blog_posts", "credit", "call-1"),  # round 1: [1] credit, [2] returns, graded "no"
        AIMessage(content="How many days until a refund reaches my card?"),
        call("retrieve_blog_posts", "refunds", "call-2"),  # round 2: [1] refunds, [2] credit, graded "yes"
        AIMessage(content="Five business days [1]."),
    ]
    graph, _ = custom_rag_graph(store, replies, [grade("no", "g-1"), grade("yes", "g-2")], retriever_tool=numbered)
    run(graph, mode)

    root = [s for s in spans.all() if s.parent is None][0]
    assemble = spans.one("assemble")
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit"]
    assert list(assemble.attributes["rag.context.labels"]) == ["1", "2"]
    # round 1's tool message never reached the answer: its returns is not in the prompt, and its
    # credit is the one placed from round 2, said once (issue 36: not also a "duplicate" drop)
    dropped = dict(zip(assemble.attributes["rag.context.dropped_ids"], assemble.attributes["rag.context.dropped_reasons"]))
    assert dropped == {"kb-returns": "not_in_prompt"}
    # R = credit:1 returns:2 refunds:1 (credit twice), C = {refunds, credit}, K = {refunds}
    truth = {
        "retrieved": 3, "duplicate_chunks": 1, "in_context": 2, "context_precision": 2 / 3, "cited": 1,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 1 / 3,
        "recall_proxy_weighted": 1 / (1 + 1 / 2 + 1), "context_utilization": 0.5, "cited_positions": (1,),
        "wasted_context_tokens": tokens(TEXTS["kb-credit"]),  # its text, the label not counted
    }
    assert same(figures(root), truth), figures(root)
    assert "rag.metrics.status" not in root.attributes or "citations_unresolved" not in root.attributes["rag.metrics.status"]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("inside", [False, True], ids=["automatic-root", "in-rag_pipeline"])
def test_a_tool_whose_function_is_a_ragtrace_retriever_is_a_round(spans, mode, inside):
    """A tool that searches by itself and returns text: ``@ragtrace.retriever`` on its search is
    the one line that makes it a round (its span under the tool's, its chunks declared)."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from integrations.agent_fakes import ToolCallingFakeChatModel

    @ragtrace.retriever(data_source="policies")
    def search(query: str) -> list[dict]:
        return [{"id": key, "content": TEXTS[key]} for key in SEARCHES[query]]

    @tool
    def lookup(query: str) -> str:
        """Look up the policies."""
        return "\n\n".join(f"[{d['id']}] {d['content']}" for d in search(query))

    answer = "Five business days [kb-refunds]."
    model = ToolCallingFakeChatModel(messages=iter([call("lookup", "refunds", "call-1"), AIMessage(content=answer)]))
    agent = create_agent(model, tools=[lookup])
    if inside:
        with ragtrace.rag_pipeline("support", tracer_provider=spans.provider):
            assert run(agent, mode) == answer
    else:
        assert run(agent, mode) == answer

    (root,) = [s for s in spans.all() if s.parent is None]
    assert all(s.context.trace_id == root.context.trace_id for s in spans.all())
    (tool_span,) = spans.by_stage("tool")
    (retrieve,) = retrieve_spans(spans)
    assert retrieve.parent.span_id == tool_span.context.span_id
    assert (retrieve.attributes["rag.retrieval.round"], retrieve.attributes["rag.retrieval.new_chunks"]) == (1, 2)
    assemble = spans.one("assemble")
    assert assemble.attributes["rag.context.inclusion_method"] == "declared"
    assert list(assemble.attributes["rag.context.labels"]) == ["kb-refunds", "kb-credit"]
    truth = {
        "retrieved": 2, "duplicate_chunks": 0, "in_context": 2, "context_precision": 1.0, "cited": 1,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 0.5,
        "recall_proxy_weighted": 1 / (1 + 1 / 2), "context_utilization": 0.5, "cited_positions": (1,),
    }
    found = figures(root)
    assert found.pop("wasted_context_tokens") > 0  # the labelled piece: issue 27 item 8 decides the label's tokens
    assert same(found, truth)
    assert root.attributes["rag.retrieval.rounds"] == 1


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_two_tool_calls_in_one_step_are_two_rounds_each_placed_where_its_message_is(spans, mode):
    """ToolNode runs both calls at once (threads, or tasks under ainvoke): each round keeps its own
    documents, and they are placed in the order the tool messages sit in the answer's prompt."""
    answer = "Store credit is immediate [kb-credit]; returns take 30 days [kb-returns]."
    both = AIMessage(content="", tool_calls=[
        {"name": "retrieve_context", "args": {"query": "refunds"}, "id": "call-1"},
        {"name": "retrieve_context", "args": {"query": "delivery"}, "id": "call-2"},
    ])
    agent, _ = rag_agent(make_store(), [both, AIMessage(content=answer)])
    assert run(agent, mode) == answer
    root = [s for s in spans.all() if s.parent is None][0]
    assert roles(spans) == ["tool_choice", "answer"]
    tools = {t.attributes["gen_ai.tool.call.id"]: t for t in spans.by_stage("tool")}
    by_tool = {r.parent.span_id: list(r.attributes["rag.retrieval.chunk_ids"]) for r in spans.by_stage("retrieve")}
    assert by_tool == {tools["call-1"].context.span_id: SEARCHES["refunds"], tools["call-2"].context.span_id: SEARCHES["delivery"]}
    assemble = spans.one("assemble")
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-refunds", "kb-credit", "kb-returns"]
    assert list(assemble.attributes["rag.context.message_indexes"]) == [3, 3, 4]  # system, user, AI (two calls), tool, tool
    truth = {
        "retrieved": 3, "duplicate_chunks": 1, "in_context": 3, "context_precision": 1.0, "cited": 2,
        "invalid_citations": 0, "out_of_context_citations": 0, "unknown_citations": 0, "recall_proxy": 2 / 3,
        "recall_proxy_weighted": (1 / 2 + 1 / 1) / (1 + 1 / 2 + 1 / 1), "context_utilization": 2 / 3,
        "wasted_context_tokens": tokens(serialised("kb-refunds")), "cited_positions": (2, 3),
    }
    assert same(figures(root), truth)
    assert root.attributes["rag.retrieval.rounds"] == 2


def test_an_interrupted_and_resumed_graph_is_two_pipelines_and_behaves_as_without_ragtrace(spans):
    """A checkpointer and ``interrupt_before``: the first run stops before the answer (no answer:
    not scored), the resumed run answers; the retrieval belongs to the first run, so the resumed
    one has no round of its own and its figures say so instead of borrowing the other's."""
    from langgraph.checkpoint.memory import InMemorySaver

    answer = "Five business days [kb-refunds]."
    replies = [call("retrieve_blog_posts", "refunds", "call-1"), AIMessage(content=answer)]
    graph, _ = custom_rag_graph(make_store(), replies, [grade("yes", "g-1")], checkpointer=InMemorySaver(), interrupt_before=["generate_answer"])
    config = {"configurable": {"thread_id": "t-1"}}
    first = graph.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config)
    assert first["messages"][-1].type == "tool" and graph.get_state(config).next == ("generate_answer",)
    assert graph.invoke(None, config)["messages"][-1].content == answer

    stopped, resumed = sorted([s for s in spans.all() if s.parent is None], key=lambda s: s.start_time)
    assert stopped.attributes["rag.retrieval.rounds"] == 1 and "no_answer" in stopped.attributes["rag.metrics.status"]
    assert stopped.attributes["rag.metrics.retrieved"] == 2
    assert resumed.attributes["rag.retrieval.rounds"] == 0
    assert "no_retrieval" in resumed.attributes["rag.metrics.status"] and "rag.metrics.cited" not in resumed.attributes
    assert roles(spans) == ["tool_choice", "grader", "answer"]


def test_a_round_trimmed_from_the_answers_prompt_is_retrieved_not_in_context(spans):
    """A middleware that sends the model only the last round (its tool call and tool message):
    the first round's documents that no later round returned are retrieved, never shown."""
    from langchain.agents.middleware import wrap_model_call

    @wrap_model_call
    def last_round_only(request, handler):
        messages = request.messages
        calls = [i for i, m in enumerate(messages) if m.type == "ai" and m.tool_calls]
        kept = messages[:1] + messages[calls[-1]:] if len(calls) > 1 else messages
        return handler(request.override(messages=kept))

    answer = "Store credit is immediate [kb-credit]; returns take 30 days [kb-returns]."
    replies = [call("retrieve_context", "refunds", "call-1"), call("retrieve_context", "delivery", "call-2"), AIMessage(content=answer)]
    agent, _ = rag_agent(make_store(), replies, middleware=(last_round_only,))
    assert run(agent, "invoke") == answer

    root = [s for s in spans.all() if s.parent is None][0]
    assemble = spans.one("assemble")
    # prompt: system, user, AI(call-2), tool(call-2) = [returns, refunds]; round 1 = [refunds, credit]
    assert list(assemble.attributes["rag.context.chunk_ids"]) == ["kb-returns", "kb-refunds"]
    dropped = dict(zip(assemble.attributes["rag.context.dropped_ids"], assemble.attributes["rag.context.dropped_reasons"]))
    assert dropped == {"kb-credit": "not_in_prompt"}  # kb-refunds is placed (round 2), said once
    # R = {refunds, credit, returns}, C = {returns, refunds}. The cited kb-credit was trimmed away,
    # and the tutorial's "Source: ...\nContent: ..." pieces carry no label: under the one citation
    # rule a citation that resolves to nothing among unlabelled sources is unresolved, so the
    # citation figures are not measured (the context figures are)
    assert same(figures(root), {"retrieved": 3, "duplicate_chunks": 1, "in_context": 2, "context_precision": 2 / 3})
    assert "citations_unresolved" in root.attributes["rag.metrics.status"]
    assert root.attributes["rag.retrieval.rounds"] == 2


class QAState(TypedDict):
    question: str
    answer: str


def test_a_graph_node_running_a_plain_chain_keeps_the_chains_declared_assembly(spans):
    """No tools anywhere: a node that runs create_retrieval_chain is that chain, inside the graph's
    pipeline (its documents declared as the stuff chain renders them, its model call the answer)."""
    from langchain_classic.chains import create_retrieval_chain
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate
    from langgraph.graph import END, START, StateGraph

    store = make_store()
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the sources, citing [source].\n\n{context}"), ("human", "{input}")])
    llm = FakeListChatModel(responses=["Five business days [kb-refunds]."])
    combine = create_stuff_documents_chain(llm, prompt, document_prompt=PromptTemplate.from_template("[{source}] {page_content}"))
    qa = create_retrieval_chain(store.as_retriever(search_kwargs={"k": 2}), combine)

    def answer(state: QAState):
        return {"answer": qa.invoke({"input": state["question"]})["answer"]}

    graph = StateGraph(QAState)
    graph.add_node(answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    assert graph.compile().invoke({"question": "refunds"})["answer"] == "Five business days [kb-refunds]."

    (root,) = [s for s in spans.all() if s.parent is None]
    assert roles(spans) == ["answer"]
    assemble = spans.one("assemble")
    assert assemble.attributes["rag.context.inclusion_method"] == "declared"
    assert list(assemble.attributes["rag.context.chunk_ids"]) == SEARCHES["refunds"]
    assert list(assemble.attributes["rag.context.labels"]) == SEARCHES["refunds"]
    found = figures(root)
    assert (found["retrieved"], found["in_context"], found["cited"], found["cited_positions"]) == (2, 2, 1, (1,))


def test_a_stream_the_app_leaves_early_ends_its_pipeline_and_scores_nothing(spans):
    agent, _ = rag_agent(make_store(), [call("retrieve_context", "refunds", "call-1"), AIMessage(content="Five days [kb-refunds].")])
    stream = agent.stream({"messages": [{"role": "user", "content": QUESTION}]}, stream_mode="updates")
    next(stream)  # the first update (the tool-choosing model call), then the app stops reading
    stream.close()
    (root,) = [s for s in spans.all() if s.parent is None]
    assert root.status.status_code.name == "ERROR"  # LangGraph ends the run with GeneratorExit
    assert roles(spans) == ["tool_choice"] and not spans.by_stage("retrieve")
    assert "rag.metrics.cited" not in root.attributes
