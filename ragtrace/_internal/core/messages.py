"""Chat messages of any shape an app passes -> plain ``{"role", "content"}`` dicts with text content.

Prompts arrive as dicts (OpenAI, Anthropic: content a string or a list of content blocks),
LangChain ``BaseMessage`` objects (``.type`` is ``human``/``ai``/``system``/``tool``), LlamaIndex
``ChatMessage`` objects (``.role`` an enum, ``.content``/``.blocks``) or a LangChain prompt value.
They are read by shape (attribute names), so no framework is ever imported here. Character offsets
of chat placements index the ``content`` text produced here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "function"}


def as_prompt(prompt: Any) -> str | list[dict[str, Any]] | None:
    """A prompt as a string or chat messages (a LangChain ``StringPromptValue`` is its string)."""
    if isinstance(prompt, str):
        return prompt
    messages = as_messages(prompt)
    if messages is not None:
        return messages
    to_string = getattr(prompt, "to_string", None)
    if callable(to_string):
        text = to_string()
        return text if isinstance(text, str) else None
    return None


def as_messages(prompt: Any) -> list[dict[str, Any]] | None:
    """The prompt as chat messages, or None when it is a string or no sequence of messages."""
    if isinstance(prompt, (str, bytes)) or prompt is None:
        return None
    held = getattr(prompt, "messages", None)  # a LangChain ChatPromptValue
    if held is not None and not isinstance(prompt, Sequence):
        prompt = held
    if not isinstance(prompt, Sequence) or isinstance(prompt, (str, bytes)):
        return None
    messages = []
    for message in prompt:
        read = as_message(message)
        if read is None:
            return None
        messages.append(read)
    return messages


def as_message(message: Any) -> dict[str, Any] | None:
    """One message as ``{"role", "content"}`` (content: its text), or None if it is no message."""
    if isinstance(message, Mapping):
        if "content" not in message and "role" not in message:
            return None
        role = message.get("role")
        return {"role": str(role) if role is not None else "user", "content": content_text(message.get("content"))}
    if isinstance(message, (str, bytes)) or not hasattr(message, "content") and not hasattr(message, "blocks"):
        return None
    role = _role(message)
    content = getattr(message, "content", None)
    if content is None:  # LlamaIndex ChatMessage with blocks only
        content = getattr(message, "blocks", None)
    return {"role": role, "content": content_text(content)}


def _role(message: Any) -> str:
    role = getattr(message, "role", None)
    if role is not None and not callable(role):
        value = getattr(role, "value", role)  # LlamaIndex MessageRole is a str enum
        return str(value)
    kind = getattr(message, "type", None)
    if isinstance(kind, str):
        return _LANGCHAIN_ROLES.get(kind, kind)
    return "user"


def content_text(content: Any) -> str:
    """The text of a message content: a string, or a list of strings and text blocks (dicts with
    ``type: text`` or objects with ``.text``); other blocks (images, tool calls) add nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, bytes):
        return content.decode("utf-8", "replace")
    if isinstance(content, Sequence):
        return "".join(block_text(part) or "" for part in content)
    return ""


def block_text(part: Any) -> str | None:
    """The text of one content block (Anthropic/OpenAI/LangChain dict or object), else None."""
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping):
        kind = part.get("type", "text")
        if kind not in ("text", "output_text", "input_text", "text_delta"):
            return None
        value = part.get("text", part.get("content"))
        return value if isinstance(value, str) else None
    kind = getattr(part, "type", "text")
    if kind not in ("text", "output_text", "input_text", "text_delta") and getattr(part, "block_type", "text") != "text":
        return None
    value = getattr(part, "text", None)
    return value if isinstance(value, str) else None
