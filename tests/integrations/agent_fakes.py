"""A fake chat model that calls tools, for the agent tests (LangChain ships none that does).

``GenericFakeChatModel`` answers from a list of messages but can't be bound to tools, and its stream
drops tool calls. This subclass binds tools the way real chat models do (``bind``, so the tools and
``ls_structured_output_format`` reach the callbacks as they would with ChatOpenAI) and streams a
message's tool calls as ``tool_call_chunks`` after its text, so an agent streamed with
``stream_mode="messages"`` still calls its tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk


class ToolCallingFakeChatModel(GenericFakeChatModel):
    """Answers with the next of ``messages`` (AIMessages, tool calls included), bound or not."""

    prompts: list[list[BaseMessage]] = []  # what each call was shown, for the tests' hand-worked truth

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        bound: dict[str, Any] = {"tools": [convert_to_openai_tool(t) for t in tools], **kwargs}
        if tool_choice is not None:
            bound["tool_choice"] = tool_choice
        return self.bind(**bound)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.prompts.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        message = self._generate(messages, stop=stop, run_manager=run_manager, **kwargs).generations[0].message
        assert isinstance(message, AIMessage)
        tokens = [t for t in re.split(r"(\s)", message.content) if t] if isinstance(message.content, str) else []
        calls = [
            {"name": c["name"], "args": __import__("json").dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(message.tool_calls)
        ]
        for index, token in enumerate(tokens):
            last = index == len(tokens) - 1 and not calls
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token, id=message.id, chunk_position="last" if last else None))
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        if calls or not tokens:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content="", id=message.id, tool_call_chunks=calls, chunk_position="last"))
            if run_manager:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk
