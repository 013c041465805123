"""Model outputs of every supported shape -> the answer text and its usage, read by shape (no
framework is ever imported here).

``read_output`` takes what ``Generate.record`` is given, ``read_piece`` one streamed chunk:
strings; OpenAI chat completions and their chunks; Anthropic messages (content blocks, ``usage``,
``stop_reason``) and stream events; LangChain and LlamaIndex results (below); LlamaIndex's
``StreamingResponse`` once its stream was consumed. Anything else is *unreadable* (text None): the
caller warns and leaves the answer unscored, never scores ``""``.

``LLMResult`` (``on_llm_end``: ``generations`` a list per prompt, ``llm_output``), ``ChatResult``,
a ``ChatGeneration``/``Generation`` and ``AIMessage``/``AIMessageChunk`` (``content``,
``usage_metadata``, ``response_metadata``) all come down to the first generation's message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .messages import block_text, content_text

Usage = dict[str, Any]

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


# --- every shape ---------------------------------------------------------------------------------
def get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None


def is_streaming_response(output: Any) -> bool:
    """A LlamaIndex ``StreamingResponse``: its text exists only once the app consumed ``response_gen``."""
    return not isinstance(output, Mapping) and hasattr(output, "response_gen") and hasattr(output, "response_txt")


def read_output(output: Any) -> tuple[str | None, Usage]:
    """Text (None: unreadable) and usage of a recorded model output; ``output`` is not None."""
    if isinstance(output, str):
        return output, {}
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace"), {}
    found = langchain_output(output)
    if found is not None:
        return found
    if get(output, "type") == "message" and isinstance(get(output, "content"), list):  # Anthropic
        return content_text(get(output, "content")), anthropic_metadata(output)
    if is_streaming_response(output):
        return as_text(output.response_txt), {}
    llama_index = llama_index_output(output)
    if llama_index is not None:
        text, raw = llama_index
        return text, openai_metadata(raw) if raw is not None and get(raw, "usage") is not None else {}
    if get(output, "object") == "response" and isinstance(get(output, "output"), list):  # OpenAI Responses API
        return responses_text(output), responses_metadata(output)
    choices = get(output, "choices")
    if choices is not None:
        first = choices[0] if isinstance(choices, Sequence) and choices else None
        message = get(first, "message") if first is not None else None
        text = get(message, "content") if message is not None else get(first, "text")
        return content_text(text) if isinstance(text, list) else as_text(text), openai_metadata(output)
    if isinstance(get(output, "candidates"), list):  # google-genai's GenerateContentResponse
        return gemini_text(output), gemini_metadata(output)
    if isinstance(output, (list, tuple)):  # pieces already collected (never a one-shot iterator)
        texts, usage = [], {}
        for piece in output:
            text, more = read_piece(piece)
            texts.append(text or "")
            usage.update(more)
        return "".join(texts), usage
    return None, {}


def read_piece(piece: Any) -> tuple[str | None, Usage]:
    """Text and usage of one streamed chunk: a string, an OpenAI chunk, an Anthropic stream event,
    a LangChain ``AIMessageChunk``/``ChatGenerationChunk`` or a LlamaIndex response (its ``delta``)."""
    if isinstance(piece, str):
        return piece, {}
    choices = get(piece, "choices")
    if isinstance(choices, Sequence) and not isinstance(choices, str):
        if not choices:  # the usage-only last chunk of an OpenAI stream
            return None, openai_metadata(piece)
        delta = get(choices[0], "delta")
        text = get(delta, "content") if delta is not None else get(choices[0], "text")
        return as_text(text), openai_metadata(piece)
    kind = get(piece, "type")
    if isinstance(kind, str) and kind.startswith(("message_", "content_block_")):
        return _anthropic_event(kind, piece)
    if isinstance(kind, str) and kind.startswith("response."):  # Responses API stream events
        if kind == "response.output_text.delta":
            return as_text(get(piece, "delta")), {}
        if kind == "response.completed":
            return None, responses_metadata(get(piece, "response"))
        return None, {}
    delta = get(piece, "delta")
    if isinstance(delta, str) and not isinstance(piece, Mapping):  # LlamaIndex: text is cumulative
        return delta, {}
    found = langchain_output(piece)
    if found is not None:
        return found
    if isinstance(get(piece, "candidates"), list):  # a google-genai stream chunk
        return gemini_text(piece), gemini_metadata(piece)
    return None, {}


def openai_metadata(chunk: Any) -> Usage:
    """Usage, model, id and finish reason of an OpenAI-style completion or stream chunk."""
    usage = get(chunk, "usage")
    choices = get(chunk, "choices")
    reasons = [r for r in (get(c, "finish_reason") for c in choices) if isinstance(r, str)] if isinstance(choices, Sequence) else []
    found = {
        "input_tokens": get(usage, "prompt_tokens") if usage is not None else None,
        "output_tokens": get(usage, "completion_tokens") if usage is not None else None,
        "response_model": get(chunk, "model"),
        "response_id": get(chunk, "id"),
        "finish_reasons": reasons or None,
    }
    return {k: v for k, v in found.items() if v is not None}


def responses_text(response: Any) -> str | None:
    """The text of a Responses API response: its message items' ``output_text`` parts, joined."""
    texts = [
        get(part, "text")
        for item in get(response, "output") or ()
        if get(item, "type") == "message"
        for part in get(item, "content") or ()
        if get(part, "type") == "output_text"
    ]
    return "".join(t for t in texts if isinstance(t, str)) if texts else None


def responses_metadata(response: Any) -> Usage:
    usage = get(response, "usage") if response is not None else None
    status = get(response, "status") if response is not None else None
    found = {
        "input_tokens": get(usage, "input_tokens") if usage is not None else None,
        "output_tokens": get(usage, "output_tokens") if usage is not None else None,
        "response_model": get(response, "model") if response is not None else None,
        "response_id": get(response, "id") if response is not None else None,
        "finish_reasons": [status] if isinstance(status, str) else None,
    }
    return {k: v for k, v in found.items() if v is not None}


def anthropic_metadata(message: Any) -> Usage:
    usage = get(message, "usage")
    reason = get(message, "stop_reason")
    found = {
        "input_tokens": get(usage, "input_tokens") if usage is not None else None,
        "output_tokens": get(usage, "output_tokens") if usage is not None else None,
        "response_model": get(message, "model"),
        "response_id": get(message, "id"),
        "finish_reasons": [reason] if isinstance(reason, str) else None,
    }
    return {k: v for k, v in found.items() if v is not None}


def gemini_text(response: Any) -> str | None:
    """The answer of a google-genai response (or stream chunk): candidate 0's text parts that are
    not thoughts, joined, as ``response.text`` reads it; None when it has no text part."""
    candidates = get(response, "candidates")
    content = get(candidates[0], "content") if candidates else None
    texts = [get(p, "text") for p in get(content, "parts") or () if not get(p, "thought")]
    texts = [t for t in texts if isinstance(t, str)]
    return "".join(texts) if texts else None


def gemini_metadata(response: Any) -> Usage:
    usage = get(response, "usage_metadata")
    reasons = [get(c, "finish_reason") for c in get(response, "candidates") or ()]
    reasons = [getattr(r, "value", r) for r in reasons if r is not None]  # an enum, or the JSON's string
    found = {
        "input_tokens": get(usage, "prompt_token_count") if usage is not None else None,
        "output_tokens": get(usage, "candidates_token_count") if usage is not None else None,
        "response_model": get(response, "model_version"),
        "response_id": get(response, "response_id"),
        "finish_reasons": [r for r in reasons if isinstance(r, str)] or None,
    }
    return {k: v for k, v in found.items() if v is not None}


def _anthropic_event(kind: str, event: Any) -> tuple[str | None, Usage]:
    """``content_block_delta`` carries text; ``message_start`` the model, id and input tokens;
    ``message_delta`` the output tokens and stop reason."""
    if kind == "content_block_delta":
        return block_text(get(event, "delta")), {}
    if kind == "message_start":
        return None, anthropic_metadata(get(event, "message"))
    if kind == "message_delta":
        usage, delta = get(event, "usage"), get(event, "delta")
        reason = get(delta, "stop_reason") if delta is not None else None
        found = {"output_tokens": get(usage, "output_tokens") if usage is not None else None, "finish_reasons": [reason] if isinstance(reason, str) else None}
        return None, {k: v for k, v in found.items() if v is not None}
    return None, {}


# the events that end a Responses API stream (``response.incomplete``: a token limit, still an end)
_RESPONSES_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_COHERE_EVENTS = ("message-", "content-", "citation-", "tool-plan-", "tool-call-")  # Cohere v2 chat_stream; ends with message-end
# Bedrock converse_stream events, one key each; the answer ends with messageStop (metadata follows it)
_CONVERSE_EVENTS = frozenset({"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"})


def cut_off(pieces: Iterable[Any]) -> bool:
    """Whether a stream that ran out is missing the final event its protocol sends: OpenAI chunks
    end with a ``finish_reason``, Anthropic events with ``message_stop``, Responses API events with
    ``response.completed`` (or ``.incomplete``/``.failed``), Cohere's with ``message-end``, Bedrock
    Converse's with ``messageStop``. A dropped connection ends the SDK's
    iterator without an error, so this is the only sign. False for pieces of no known protocol
    (strings, a framework's chunks): nothing says they were cut off."""
    known = False
    for piece in pieces:
        mark = end_mark(piece)
        if mark:
            return False
        known = known or mark is not None
    return known


def end_mark(piece: Any) -> bool | None:
    """True for a stream's final event (``cut_off``), False for another piece of a protocol that
    has one, None for a piece of no known protocol."""
    choices = get(piece, "choices")
    if isinstance(choices, Sequence) and not isinstance(choices, str):
        return any(isinstance(get(c, "finish_reason"), str) for c in choices)
    kind = get(piece, "type")
    if isinstance(kind, str) and kind.startswith(("message_", "content_block_", "response.")):
        return kind == "message_stop" or kind in _RESPONSES_ENDS
    if isinstance(kind, str) and kind.startswith(_COHERE_EVENTS):
        return kind == "message-end"
    if isinstance(piece, Mapping) and len(piece) == 1 and next(iter(piece)) in _CONVERSE_EVENTS:
        return "messageStop" in piece
    return None


# LangChain's provider packages name themselves (``response_metadata["model_provider"]``); these
# put their protocol's end marker there on a stream's last chunk, so a streamed message without it
# was cut off. Other providers may not report one: nothing is said of them.
_LANGCHAIN_END_KEYS = {"openai": "finish_reason", "anthropic": "stop_reason"}


def langchain_cut_off(result: Any) -> bool:
    """Whether a streamed LangChain ``LLMResult`` comes from a provider that always ends with a
    finish reason, and has none (``cut_off``'s rule, on what LangChain merged of the chunks)."""
    generations = get(result, "generations")
    if not isinstance(generations, Sequence) or not generations or not isinstance(generations[0], Sequence) or not generations[0]:
        return False
    metadata = get(get(generations[0][0], "message"), "response_metadata")
    if not isinstance(metadata, Mapping):
        return False
    key = _LANGCHAIN_END_KEYS.get(metadata.get("model_provider"))  # type: ignore[arg-type]
    return key is not None and not isinstance(metadata.get(key), str)


def stream_pieces(pieces: Any) -> Iterable[Any]:
    """What ``Generate.stream`` iterates: a LlamaIndex ``StreamingResponse`` streams its ``response_gen``."""
    return pieces.response_gen if is_streaming_response(pieces) else pieces
