"""The LlamaIndex integration on chat engines (``as_chat_engine()`` in its retrieving modes, one
pipeline per turn) with the real llama-index-core, turned on by one line."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from llama_index_apps import QUESTION, TEXTS, BreakingLLM, CitingLLM, index, metrics
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace._internal.integrations.llama_index import LlamaIndexInstrumentor


def check_two_in_context_first_cited(root) -> None:
    """The figures hand-computed for a turn that retrieved 2 nodes, showed both, cited the first."""
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert (got["recall_proxy"], got["context_precision"], got["context_utilization"]) == (0.5, 1.0, 0.5)


def check_nothing_left_open() -> None:
    """No call, model call, turn or writer of the engine is still held by ragtrace's tracker."""
    tracker = LlamaIndexInstrumentor()._handlers[0]._tracker
    assert (tracker.open, tracker.llm.calls, tracker.turns.turns, tracker.turns.writers) == ({}, {}, {}, {})


def test_a_condense_plus_context_chat_is_one_pipeline_per_turn_and_the_condense_call_is_no_answer(llama_index_on):
    """``as_chat_engine(chat_mode="condense_plus_context")``: the second turn condenses the history
    into a question (an LLM call of its own, role ``rewrite``), retrieves with it and answers from
    the context the engine's synthesizer built, declared."""
    llm = CitingLLM(prompts=[])
    engine = index().as_chat_engine(chat_mode="condense_plus_context", llm=llm, similarity_top_k=2)
    first = engine.chat(QUESTION)
    assert str(first).startswith("It takes 5 business days [")
    assert len(llama_index_on.by_stage("pipeline")) == 1
    llama_index_on.clear()
    llm.prompts.clear()
    second = engine.chat("And for store credit?")
    check_condensed_turn(llama_index_on, llm, "CondensePlusContextChatEngine", [n.node_id for n in second.source_nodes])


def check_condensed_turn(spans, llm, engine: str, retrieved: list[str]) -> None:
    """A second turn that condensed the history first: one pipeline over all its spans, the condense
    call a ``rewrite`` (no citations, out of the figures), the answer declared from the retrieved
    nodes; figures hand-computed (2 retrieved, both in the context, the answer cites the first)."""
    root = spans.one("pipeline")
    assert root.name == f"invoke_workflow {engine}"
    assert {s.context.trace_id for s in spans.all()} == {root.context.trace_id}
    condense, answer = sorted(spans.by_stage("generate"), key=lambda s: s.start_time)
    assert (condense.attributes["rag.generation.role"], answer.attributes["rag.generation.role"]) == ("rewrite", "answer")
    assert len(llm.prompts) == 2 and "And for store credit?" in llm.prompts[0]
    assert "rag.citation.ids" not in condense.attributes
    assert list(spans.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == retrieved
    assembled = spans.one("assemble").attributes
    assert (assembled["rag.context.inclusion_method"], list(assembled["rag.context.chunk_ids"])) == ("declared", retrieved)
    assert list(answer.attributes["rag.citation.ids"]) == [retrieved[0]]
    check_two_in_context_first_cited(root)


@pytest.mark.parametrize("turn", ["chat", "achat"])
def test_a_context_chat_engine_turn_is_one_pipeline_with_declared_placements(llama_index_on, turn):
    engine = index().as_chat_engine(chat_mode="context", llm=CitingLLM(prompts=[]), similarity_top_k=2)
    reply = engine.chat(QUESTION) if turn == "chat" else asyncio.run(engine.achat(QUESTION))
    retrieved = [n.node_id for n in reply.source_nodes]
    root = llama_index_on.one("pipeline")
    assert root.name == "invoke_workflow ContextChatEngine"
    assert llama_index_on.one("generate").attributes["rag.generation.role"] == "answer"
    assembled = llama_index_on.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == retrieved
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["recall_proxy"]) == (2, 2, 1, 0.5)


def test_a_chat_engine_without_retrieval_is_no_pipeline_and_its_reply_stays_an_answer(llama_index_on):
    from llama_index.core.chat_engine import SimpleChatEngine

    SimpleChatEngine.from_defaults(llm=CitingLLM(prompts=[])).chat(QUESTION)
    assert llama_index_on.by_stage("pipeline") == []
    assert llama_index_on.one("generate").attributes["rag.generation.role"] == "answer"


STREAMED_ROLES = {"context": ["answer"], "condense_plus_context": ["rewrite", "answer"]}


def check_streamed_turn(spans, reply, tokens: list[str], mode: str) -> None:
    """A streamed second turn: one pipeline, the engine's roles, declared placements, the figures
    hand-computed from what it retrieved (2 nodes, both in the context, the first cited)."""
    retrieved = [n.node_id for n in reply.source_nodes]
    assert len(tokens) == 6 and "".join(tokens).startswith("It takes 5 business days [")  # one token per word, all of them
    root = spans.one("pipeline")
    assert root.name == f"invoke_workflow {'ContextChatEngine' if mode == 'context' else 'CondensePlusContextChatEngine'}"
    assert {s.context.trace_id for s in spans.all()} == {root.context.trace_id}
    calls = sorted(spans.by_stage("generate"), key=lambda s: s.start_time)
    assert [c.attributes["rag.generation.role"] for c in calls] == STREAMED_ROLES[mode]
    for stage in ("retrieve", "assemble", "generate"):
        assert all(s.parent.span_id == root.context.span_id for s in spans.by_stage(stage)), stage
    assert list(spans.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == retrieved
    assembled = spans.one("assemble").attributes
    assert (assembled["rag.context.inclusion_method"], list(assembled["rag.context.chunk_ids"])) == ("declared", retrieved)
    answer = calls[-1].attributes
    assert answer["gen_ai.output.messages"].count("".join(tokens).strip()) == 1
    assert list(answer["rag.citation.ids"]) == [retrieved[0]]
    assert answer["gen_ai.response.time_to_first_chunk"] >= 0
    assert root.end_time >= calls[-1].end_time
    check_nothing_left_open()
    check_two_in_context_first_cited(root)


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
def test_a_stream_chat_turn_is_one_pipeline_and_the_app_reads_the_engines_own_stream(llama_index_on, mode):
    """``stream_chat``: the engine's background thread drains the model's stream into the
    response's queue (and writes memory); ragtrace records the model call there and ends the root
    when that writer is done, reading nothing of the response the app gets."""
    from llama_index.core.chat_engine.types import StreamingAgentChatResponse

    engine = index().as_chat_engine(chat_mode=mode, llm=CitingLLM(prompts=[]), similarity_top_k=2)
    "".join(engine.stream_chat(QUESTION).response_gen)
    assert len(llama_index_on.by_stage("pipeline")) == 1
    llama_index_on.clear()
    reply = engine.stream_chat("And for store credit?")
    assert type(reply) is StreamingAgentChatResponse
    reply.write_response_to_history_thread.join()  # the engine's writer is done; the app has read nothing yet
    assert reply.queue.qsize() == 6 and reply.unformatted_response == "", "ragtrace read the app's stream"
    tokens = list(reply.response_gen)
    assert "".join(tokens).strip() == str(reply) == engine.chat_history[-1].content  # the engine's memory as without ragtrace
    check_streamed_turn(llama_index_on, reply, tokens, mode)


@pytest.mark.parametrize("mode", ["context", "condense_plus_context"])
def test_an_astream_chat_turn_is_one_pipeline(llama_index_on, mode):
    engine = index().as_chat_engine(chat_mode=mode, llm=CitingLLM(prompts=[]), similarity_top_k=2)

    async def turn(message: str) -> tuple[Any, list[str]]:
        reply = await engine.astream_chat(message)
        return reply, [token async for token in reply.async_response_gen()]

    asyncio.run(turn(QUESTION))
    assert len(llama_index_on.by_stage("pipeline")) == 1
    llama_index_on.clear()
    reply, tokens = asyncio.run(turn("And for store credit?"))
    assert type(reply).__name__ == "StreamingAgentChatResponse"
    assert "".join(tokens).strip() == str(reply)
    check_streamed_turn(llama_index_on, reply, tokens, mode)


@pytest.mark.parametrize("mode", ["condense_plus_context", "condense_question"])
def test_a_stream_chat_in_redact_mode_exports_no_text(spans, mode):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    ragtrace.instrument("llama_index")
    try:
        engine = index().as_chat_engine(chat_mode=mode, llm=CitingLLM(prompts=[]), similarity_top_k=2)
        for message in (QUESTION, "And for store credit?"):
            tokens = list(engine.stream_chat(message).response_gen)
    finally:
        ragtrace.uninstrument("llama_index")
    assert "".join(tokens).startswith("It takes 5 business days [")
    exported = repr([dict(s.attributes) for s in spans.all()]) + repr([e.attributes for s in spans.all() for e in s.events])
    for text in [*TEXTS.values(), QUESTION, "store credit", "business days"]:
        assert text not in exported
    assert {a.attributes["rag.context.inclusion_method"] for a in spans.by_stage("assemble")} == {"declared"}
    assert metrics(spans.by_stage("pipeline")[-1])["cited"] == 1


def test_a_stream_chat_whose_model_fails_mid_stream_passes_the_error_and_ends_the_root(llama_index_on, monkeypatch):
    """llama-index's writer thread hands the model's error to the response and then re-raises it
    (``StreamingAgentChatResponse.write_response_to_history``), so that thread ends with the error
    whether ragtrace is on or not: the framework's behaviour, caught here and asserted."""
    thread_errors: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    engine = index().as_chat_engine(chat_mode="context", llm=BreakingLLM(prompts=[]), similarity_top_k=2)
    reply = engine.stream_chat(QUESTION)
    writer = reply.write_response_to_history_thread
    with pytest.raises(ConnectionError, match="the stream broke"):  # the engine hands the writer's error to the app
        list(reply.response_gen)
    writer.join(5)
    assert [(type(e.exc_value), e.thread) for e in thread_errors] == [(ConnectionError, writer)]
    for stage in ("generate", "pipeline"):
        assert llama_index_on.one(stage).status.status_code is StatusCode.ERROR, stage
    check_nothing_left_open()


def take_turn(engine: Any, message: str, kind: str) -> tuple[Any, str]:
    """One chat turn the way the app takes it: the reply and the text it read."""
    if kind == "chat":
        reply = engine.chat(message)
        return reply, str(reply)
    if kind == "stream_chat":
        reply = engine.stream_chat(message)
        return reply, "".join(reply.response_gen)

    async def turn() -> tuple[Any, str]:
        if kind == "achat":
            reply = await engine.achat(message)
            return reply, str(reply)
        reply = await engine.astream_chat(message)
        return reply, "".join([token async for token in reply.async_response_gen()])

    return asyncio.run(turn())


@pytest.mark.parametrize("kind", ["chat", "achat", "stream_chat", "astream_chat"])
def test_a_condense_question_turn_is_one_pipeline_whose_condense_call_is_a_rewrite(llama_index_on, kind):
    """``as_chat_engine(chat_mode="condense_question")``: from the second turn the engine condenses
    the history into a standalone question (an LLM call of its own: ``rewrite``, out of the
    figures) and asks its query engine, whose retrieval and synthesis are the turn's answer."""
    llm = CitingLLM(prompts=[])
    engine = index().as_chat_engine(chat_mode="condense_question", llm=llm, similarity_top_k=2)
    first, text = take_turn(engine, QUESTION, kind)
    assert text.strip().startswith("It takes 5 business days [")
    assert llama_index_on.one("pipeline").name == "invoke_workflow CondenseQuestionChatEngine"
    llama_index_on.clear()
    llm.prompts.clear()
    second, text = take_turn(engine, "And for store credit?", kind)
    assert text.strip() == str(second).strip() and text.strip().startswith("It takes 5 business days [")
    (query_output,) = second.sources
    nodes = query_output.raw_output.source_nodes
    check_condensed_turn(llama_index_on, llm, "CondenseQuestionChatEngine", [n.node_id for n in nodes])
    check_nothing_left_open()


@pytest.mark.parametrize("kind", ["stream_chat", "astream_chat"])
def test_a_streamed_turn_the_app_never_reads_still_ends_its_pipeline(llama_index_on, kind):
    """The engine's writer drains the model whether the app reads or not: the root ends with it
    and nothing of the turn stays open in ragtrace."""
    import gc

    engine = index().as_chat_engine(chat_mode="context", llm=CitingLLM(prompts=[]), similarity_top_k=2)

    async def dropped() -> None:
        await engine.astream_chat(QUESTION)

    if kind == "stream_chat":
        reply = engine.stream_chat(QUESTION)
        writer = reply.write_response_to_history_thread
        del reply
        writer.join(5)  # the root ends inside the writer, before its thread does
    else:
        asyncio.run(dropped())  # asyncio.run lets the engine's writer task finish before it returns
    gc.collect()
    assert metrics(llama_index_on.one("pipeline"))["cited"] == 1
    check_nothing_left_open()

