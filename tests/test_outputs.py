"""LangChain model outputs read by shape: the real objects, the text and usage they carry."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatResult, Generation, LLMResult

from ragtrace._internal.outputs import langchain_output

USAGE = {"input_tokens": 42, "output_tokens": 9, "total_tokens": 51}


def answer(**extra) -> AIMessage:
    return AIMessage(content="Five days [1].", usage_metadata=USAGE, response_metadata={"finish_reason": "stop", "model_name": "gpt-4o-mini-2024-07-18"}, id="chatcmpl-7", **extra)


def test_a_chat_models_result_gives_text_usage_model_finish_reason_and_id():
    expected = ("Five days [1].", {"input_tokens": 42, "output_tokens": 9, "finish_reasons": ["stop"], "response_model": "gpt-4o-mini-2024-07-18", "response_id": "chatcmpl-7"})
    assert langchain_output(answer()) == expected
    assert langchain_output(ChatResult(generations=[ChatGeneration(message=answer())])) == expected
    assert langchain_output(LLMResult(generations=[[ChatGeneration(message=answer())]])) == expected


def test_content_blocks_give_their_text_and_langchains_own_ids_are_not_response_ids():
    message = AIMessage(content=[{"type": "text", "text": "Five "}, {"type": "image_url", "image_url": {"url": "x"}}, "days."], id="lc_run--0199-0")
    assert langchain_output(message) == ("Five days.", {})
    chunk = AIMessageChunk(content="Five", usage_metadata=USAGE)
    assert langchain_output(chunk) == ("Five", {"input_tokens": 42, "output_tokens": 9})


def test_a_text_llms_result_with_openai_style_llm_output():
    result = LLMResult(
        generations=[[Generation(text="Five days [1].", generation_info={"finish_reason": "length"})]],
        llm_output={"token_usage": {"prompt_tokens": 30, "completion_tokens": 4}, "model_name": "gpt-3.5-turbo-instruct"},
    )
    assert langchain_output(result) == ("Five days [1].", {"finish_reasons": ["length"], "input_tokens": 30, "output_tokens": 4, "response_model": "gpt-3.5-turbo-instruct"})


def test_anything_else_is_not_a_langchain_output():
    assert langchain_output({"choices": []}) is None
    assert langchain_output("text") is None
    assert langchain_output(LLMResult(generations=[])) == (None, {})
