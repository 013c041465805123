"""The LlamaIndex integration on chat engines (``as_chat_engine()`` in its retrieving modes, one
pipeline per turn) with the real llama-index-core, turned on by one line."""

from __future__ import annotations

import asyncio

import pytest
from llama_index_apps import QUESTION, CitingLLM, index, metrics


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
    retrieved = [n.node_id for n in second.source_nodes]

    root = llama_index_on.one("pipeline")
    assert root.name == "invoke_workflow CondensePlusContextChatEngine"
    assert {s.context.trace_id for s in llama_index_on.all()} == {root.context.trace_id}
    condense, answer = sorted(llama_index_on.by_stage("generate"), key=lambda s: s.start_time)
    assert (condense.attributes["rag.generation.role"], answer.attributes["rag.generation.role"]) == ("rewrite", "answer")
    assert len(llm.prompts) == 2 and "And for store credit?" in llm.prompts[0]
    assert list(llama_index_on.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == retrieved
    assembled = llama_index_on.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == retrieved
    assert list(answer.attributes["rag.citation.ids"]) == [retrieved[0]]
    assert "rag.citation.ids" not in condense.attributes
    got = metrics(root)  # 2 retrieved, both in the context, the answer cites the first
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert (got["recall_proxy"], got["context_precision"], got["context_utilization"]) == (0.5, 1.0, 0.5)


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
