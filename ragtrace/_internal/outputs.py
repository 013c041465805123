"""LangChain and LlamaIndex model outputs -> the answer text and its usage, read by shape (no
import of either framework).

``LLMResult`` (``on_llm_end``: ``generations`` a list per prompt, ``llm_output``), ``ChatResult``,
a ``ChatGeneration``/``Generation`` and ``AIMessage``/``AIMessageChunk`` (``content``,
``usage_metadata``, ``response_metadata``) all come down to the first generation's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .messages import content_text

_OWN_ID_PREFIX = "lc_run-"  # LangChain's run-derived message id, not the provider's response id


def langchain_output(output: Any) -> tuple[str | None, dict[str, Any]] | None:
    """Text and usage of a LangChain model output, or None when ``output`` is none of them."""
    generations = getattr(output, "generations", None)
    if isinstance(generations, list):
        first: Any = generations[0] if generations else None
        if isinstance(first, list):  # LLMResult: one list per prompt
            first = first[0] if first else None
        text, usage = _generation(first) if first is not None else (None, {})
        _fill(usage, getattr(output, "llm_output", None))
        return text, usage
    if _is_message(output):
        return _message(output)
    if isinstance(getattr(output, "text", None), str) and hasattr(output, "generation_info"):
        return _generation(output)
    return None


def _is_message(value: Any) -> bool:
    return hasattr(value, "content") and hasattr(value, "response_metadata") and hasattr(value, "usage_metadata")


def _generation(generation: Any) -> tuple[str | None, dict[str, Any]]:
    message = getattr(generation, "message", None)
    if _is_message(message):
        text, usage = _message(message)
    else:
        text = getattr(generation, "text", None)
        text, usage = (text if isinstance(text, str) else None), {}
    info = getattr(generation, "generation_info", None)
    if isinstance(info, Mapping) and isinstance(info.get("finish_reason"), str) and "finish_reasons" not in usage:
        usage["finish_reasons"] = [info["finish_reason"]]
    return text, usage


def _message(message: Any) -> tuple[str | None, dict[str, Any]]:
    usage: dict[str, Any] = {}
    counts = getattr(message, "usage_metadata", None)
    if isinstance(counts, Mapping):
        usage["input_tokens"] = counts.get("input_tokens")
        usage["output_tokens"] = counts.get("output_tokens")
    metadata = getattr(message, "response_metadata", None)
    if isinstance(metadata, Mapping):
        reason = metadata.get("finish_reason", metadata.get("stop_reason"))
        if isinstance(reason, str):
            usage["finish_reasons"] = [reason]
        usage["response_model"] = metadata.get("model_name", metadata.get("model"))
    message_id = getattr(message, "id", None)
    if isinstance(message_id, str) and not message_id.startswith(_OWN_ID_PREFIX):
        usage["response_id"] = message_id
    return content_text(getattr(message, "content", None)), {k: v for k, v in usage.items() if v is not None}


def _fill(usage: dict[str, Any], llm_output: Any) -> None:
    """What an LLM's ``llm_output`` adds (OpenAI-style ``token_usage``, ``model_name``) where the
    message said nothing."""
    if not isinstance(llm_output, Mapping):
        return
    counts = llm_output.get("token_usage") or llm_output.get("usage")
    if isinstance(counts, Mapping):
        usage.setdefault("input_tokens", counts.get("prompt_tokens", counts.get("input_tokens")))
        usage.setdefault("output_tokens", counts.get("completion_tokens", counts.get("output_tokens")))
    model = llm_output.get("model_name", llm_output.get("model"))
    if isinstance(model, str):
        usage.setdefault("response_model", model)
    for key in [k for k, v in usage.items() if v is None]:
        del usage[key]


def llama_index_output(output: Any) -> tuple[str, Any] | None:
    """The text of LlamaIndex's ``CompletionResponse`` (``.text``), ``ChatResponse``
    (``.message.content``) or ``Response`` (``.response``), with the provider's ``raw`` completion
    (it may carry the usage); None for any other object. These are pydantic models: iterating one
    yields its fields, never text."""
    if isinstance(output, Mapping) or getattr(output, "choices", None) is not None:
        return None
    if hasattr(output, "source_nodes"):  # a query engine's Response
        text = getattr(output, "response", None)
        return (text, None) if isinstance(text, str) else None
    if not hasattr(output, "additional_kwargs"):  # not a model response (an HTTP response has .text too)
        return None
    text = getattr(output, "text", None)
    message = getattr(output, "message", None)
    if not isinstance(text, str) and message is not None and hasattr(message, "role"):
        text = getattr(message, "content", None)
    return (text, getattr(output, "raw", None)) if isinstance(text, str) else None
