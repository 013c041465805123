"""Model outputs read by shape: the real LangChain and LlamaIndex objects, Anthropic-style messages and
streams; the text and usage they carry; an unreadable output is never scored."""

from __future__ import annotations

import json
import logging

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult, Generation, LLMResult
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse, MessageRole
from google.genai import types as genai_types
from llama_index.core.base.response.schema import Response, StreamingResponse

import ragtrace
from ragtrace._internal import names
from ragtrace._internal.core.outputs import langchain_output

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


# --- through the generate stage: every shape read natively, an unreadable one never scored 0 ------
DOCS = [{"id": "d1", "content": "Refunds take five days."}, {"id": "d2", "content": "Invites expire in a week."}]


def _answer(output=None, *, prompt=None, stream=None):
    with ragtrace.rag_pipeline("outputs") as run:
        with ragtrace.retrieve("q") as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            for doc in DOCS:
                ctx.add(doc)
            ctx.render(question="q")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            if stream is not None:
                consumed = "".join(str(piece) if isinstance(piece, str) else "" for piece in g.stream(stream))
                assert consumed is not None
            else:
                g.record(output)
    return run


ANTHROPIC = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "Five days "}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}, {"type": "text", "text": "[1]."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 40, "output_tokens": 6},
}


@pytest.mark.parametrize(
    "output",
    [
        AIMessage("Five days [1]."),
        ChatResult(generations=[ChatGeneration(message=AIMessage("Five days [1]."))]),
        LLMResult(generations=[[Generation(text="Five days [1].")]]),
        CompletionResponse(text="Five days [1]."),
        ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="Five days [1].")),
        Response(response="Five days [1]."),
        ANTHROPIC,
    ],
    ids=["AIMessage", "ChatResult", "LLMResult", "CompletionResponse", "ChatResponse", "Response", "anthropic"],
)
def test_framework_results_are_answers(spans, output):
    run = _answer(output)
    assert (run.metrics["cited"], run.metrics["recall_proxy"]) == (1, 0.5)
    generate = spans.one("generate").attributes
    assert list(generate[names.RAG_CITATION_IDS]) == ["d1"]
    assert names.RAG_CITATION_STATUS not in generate

# a google-genai response: a thought part is not the answer, the text parts are joined
GEMINI = genai_types.GenerateContentResponse.model_validate(
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Thinking [2].", "thought": True}, {"text": "Five days "}, {"text": "[1]."}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 6},
        "modelVersion": "gemini-x",
        "responseId": "resp_01",
    }
)


def test_a_gemini_response_is_an_answer_with_its_usage(spans):
    run = _answer(GEMINI)
    assert (run.metrics["cited"], run.metrics["invalid_citations"]) == (1, 0)  # the thought's [2] is not read
    generate = spans.one("generate").attributes
    assert (generate[names.GEN_AI_USAGE_INPUT_TOKENS], generate[names.GEN_AI_USAGE_OUTPUT_TOKENS]) == (40, 6)
    assert (generate[names.GEN_AI_RESPONSE_MODEL], generate[names.GEN_AI_RESPONSE_ID]) == ("gemini-x", "resp_01")
    assert list(generate[names.GEN_AI_RESPONSE_FINISH_REASONS]) == ["STOP"]


def test_anthropic_usage_model_and_stop_reason(spans):
    _answer(ANTHROPIC)
    generate = spans.one("generate").attributes
    assert (generate[names.GEN_AI_USAGE_INPUT_TOKENS], generate[names.GEN_AI_USAGE_OUTPUT_TOKENS]) == (40, 6)
    assert (generate[names.GEN_AI_RESPONSE_MODEL], generate[names.GEN_AI_RESPONSE_ID]) == ("claude-x", "msg_01")
    assert list(generate[names.GEN_AI_RESPONSE_FINISH_REASONS]) == ["end_turn"]


@pytest.mark.parametrize(
    "pieces",
    [
        lambda: iter([AIMessageChunk(content="Five "), AIMessageChunk(content="days [1]."), AIMessageChunk(content="", usage_metadata=USAGE)]),
        lambda: iter([ChatGenerationChunk(message=AIMessageChunk(content="Five ")), ChatGenerationChunk(message=AIMessageChunk(content="days [1]."))]),
        lambda: iter([CompletionResponse(text="Five ", delta="Five "), CompletionResponse(text="Five days [1].", delta="days [1].")]),
        lambda: iter(
            [
                {"type": "message_start", "message": {"id": "msg_2", "model": "claude-x", "usage": {"input_tokens": 40, "output_tokens": 1}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Five days "}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "[1]."}},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 6}},
                {"type": "message_stop"},
            ]
        ),
        lambda: StreamingResponse(response_gen=iter(["Five ", "days [1]."])),
        lambda: iter(genai_types.GenerateContentResponse.model_validate({"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]}) for t in ("Five ", "days [1].")),
    ],
    ids=["AIMessageChunk", "ChatGenerationChunk", "llama-index deltas", "anthropic events", "StreamingResponse", "gemini chunks"],
)
def test_framework_streams_are_read_as_they_pass(spans, pieces):
    run = _answer(stream=pieces())
    assert run.metrics["cited"] == 1
    assert spans.one("generate").attributes[names.GEN_AI_REQUEST_STREAM] is True


def test_a_streaming_response_recorded_then_consumed_by_the_app_is_read_at_close(spans):
    response = StreamingResponse(response_gen=iter(["Five ", "days [1]."]))
    with ragtrace.rag_pipeline("p") as run:
        with ragtrace.retrieve("q") as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            ctx.add(DOCS[0])
            ctx.render()
        with ragtrace.generate(model="m") as g:
            g.record(response)  # nothing is read here: the app's stream stays whole
            assert str(response) == "Five days [1]."  # the app consumes it
    assert run.metrics["cited"] == 1


@pytest.mark.parametrize(
    "prompt",
    [
        [SystemMessage("Cite sources."), HumanMessage("How long do refunds take?")],
        [ChatMessage(role=MessageRole.SYSTEM, content="Cite sources."), ChatMessage(role=MessageRole.USER, content="How long do refunds take?")],
    ],
    ids=["langchain", "llama-index"],
)
def test_a_list_of_framework_messages_is_the_prompt(spans, prompt):
    _answer(AIMessage("Five days [1]."), prompt=prompt)
    generate = spans.one("generate").attributes
    messages = json.loads(generate[names.GEN_AI_INPUT_MESSAGES])
    assert [(m["role"], m["parts"][0]["content"]) for m in messages] == [("system", "Cite sources."), ("user", "How long do refunds take?")]


def test_an_unreadable_output_is_warned_once_and_not_scored(spans, caplog):
    class Opaque:
        pass

    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        run = _answer(Opaque())
        again = _answer(Opaque())
    for result in (run, again):
        assert "recall_proxy" not in result.metrics and "cited" not in result.metrics
        assert "answer_unreadable" in result.status
        assert result.metrics["in_context"] == 2
    assert [r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()] == [
        "ragtrace: a model output of type test_an_unreadable_output_is_warned_once_and_not_scored.<locals>.Opaque could not be read as text; the answer is not scored (rag.citation.status=answer_unreadable)"
    ]
    assert spans.by_stage("generate")[0].attributes[names.RAG_CITATION_STATUS] == "answer_unreadable"


def test_a_one_shot_iterator_given_to_record_is_never_consumed(spans):
    pieces = iter(["Five ", "days [1]."])
    run = _answer(pieces)
    assert list(pieces) == ["Five ", "days [1]."]  # still whole for the app
    assert "answer_unreadable" in run.status


def test_reading_outputs_imports_no_framework_the_app_did_not_import():
    """Shapes are recognised without importing LangChain, LlamaIndex, OpenAI or Anthropic (all
    installed here): an app that never imported them doesn't get them loaded by ragtrace."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import sys
        from opentelemetry.sdk.trace import TracerProvider
        import ragtrace

        class Unknown:
            pass

        ragtrace.configure(tracer_provider=TracerProvider(), hash_key="k")
        for output in ("Five days [1].", {"content": [{"type": "text", "text": "[1]"}]}, Unknown()):
            with ragtrace.rag_pipeline("p") as run:
                with ragtrace.retrieve("q") as r:
                    r.record([{"id": "d1", "content": "Refunds take five days."}])
                with ragtrace.assemble() as ctx:
                    ctx.add({"id": "d1", "content": "Refunds take five days."})
                    ctx.render()
                with ragtrace.generate(model="m", prompt=[{"role": "user", "content": "q"}]) as g:
                    g.record(output)
        print(sorted(m for m in ("langchain_core", "langchain", "llama_index", "openai", "anthropic", "google.genai") if m in sys.modules))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
