"""The OpenAI SDK: every ``chat.completions.create`` and ``responses.create`` call (sync, async,
``stream=True``) becomes a generate span, scored against the pipeline's latest assembly; so does
each ``.parse()`` (it posts its request itself) and each ``.stream()`` (it calls ``create``).
``embeddings.create`` is an embed span (``openai_embeddings``), and
``vector_stores.search`` a retrieve span (``openai_vector_stores``): outside any pipeline it
opens an automatic root that the answer's call joins and ends (``auto_root``), where the retrieved
chunks are located in the answer's messages when no assembly was recorded.

The SDK has no callback system, so ``create`` and ``parse`` are wrapped with wrapt at class level
(``Completions``/``AsyncCompletions``, ``Responses``/``AsyncResponses``): clients built before ``instrument()``
are covered too. The app gets the SDK's own return value: a completion, or its ``Stream`` /
``AsyncStream`` behind the transparent proxy every traced stream gets (``passthrough``), which
times each chunk as the app reads it (never reading ahead) and ends the span with the chunks read
when the stream ends, is closed or is dropped. A call made inside a ragtrace
generate span that is already open (the user's ``with ragtrace.generate()``, or a framework
integration's LLM call) is left to that span, so nothing is recorded twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import wrapt
from opentelemetry import trace

from ..stages.generation import Generate
from ..core.guard import guard, warn_once
from ..stages.passthrough import record_as_consumed
from . import openai_embeddings, openai_file_search, openai_vector_stores
from ._common import call_wrappers, inside_generation, started, unwrap
from .base import RagtraceInstrumentor

_PROVIDER = "openai"


class OpenAIInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("openai")``, or ``OpenAIInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "openai"

    def _instrument(self, **kwargs: Any) -> None:
        import importlib

        provider = self.tracer_provider(kwargs)
        for module, sync, asynchronous, prompt in _APIS:
            found = importlib.import_module(module)
            for method in _METHODS:  # ``parse`` posts its request itself; older SDKs have none
                sync_wrapper, async_wrapper = _wrappers(provider, prompt)
                if hasattr(getattr(found, sync), method):
                    wrapt.wrap_function_wrapper(module, f"{sync}.{method}", sync_wrapper)
                if hasattr(getattr(found, asynchronous), method):
                    wrapt.wrap_function_wrapper(module, f"{asynchronous}.{method}", async_wrapper)
        openai_vector_stores.instrument(provider)  # the SDK's retriever: it opens the automatic root
        openai_embeddings.instrument(provider)

    def _uninstrument(self, **kwargs: Any) -> None:
        import importlib

        for module, sync, asynchronous, _ in _APIS:
            found = importlib.import_module(module)
            for method in _METHODS:
                unwrap(getattr(found, sync), method)
                unwrap(getattr(found, asynchronous), method)
        openai_vector_stores.uninstrument()
        openai_embeddings.uninstrument()


# --- one call -----------------------------------------------------------------------------------
def _wrappers(provider: trace.TracerProvider | None, prompt: Any) -> tuple[Any, Any]:
    """The (sync, async) wrappers of one API's ``create``/``parse``: a generate span per call."""
    return call_wrappers(
        lambda args, kwargs: _open(kwargs, provider, prompt),
        lambda stage, kwargs, result: _returned(stage, result, bool(kwargs.get("stream"))),
    )


def _open(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None, prompt: Any) -> Generate | None:
    """A started generate span for this call, or None when another one already covers it."""
    if inside_generation():
        return None
    kwargs = _given(kwargs)
    max_tokens = kwargs.get("max_completion_tokens", kwargs.get("max_tokens", kwargs.get("max_output_tokens")))
    stage = Generate(
        _text(kwargs.get("model")),
        _PROVIDER,
        prompt=prompt(kwargs),
        temperature=kwargs.get("temperature"),
        max_tokens=max_tokens,
        tracer_provider=provider,
    )
    if prompt is _responses_input and openai_file_search.tool(kwargs) is not None:  # the model searches: a RAG call
        stage.auto_root = openai_file_search.begin(_text(kwargs.get("input")), provider)
        stage.file_search = kwargs  # type: ignore[attr-defined]
    return started(stage)


def _chat_messages(kwargs: Mapping[str, Any]) -> Any:
    """A chat completion's messages as given (a list of dicts); anything else is not a prompt we read."""
    messages = kwargs.get("messages")
    return list(messages) if isinstance(messages, (list, tuple)) else None


def _responses_input(kwargs: Mapping[str, Any]) -> Any:
    """A Responses API request as chat messages: ``instructions`` as the system message, then
    ``input`` (a string is the user's message; a list of messages is taken as given)."""
    instructions, given = kwargs.get("instructions"), kwargs.get("input")
    messages = [{"role": "system", "content": instructions}] if isinstance(instructions, str) else []
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    return [*messages, *given] if isinstance(given, (list, tuple)) else None


def _given(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the caller gave: ``responses.stream()`` and ``chat.completions.stream()`` pass
    every one to ``create``, an absent one as the SDK's ``omit``/``NOT_GIVEN``, which is no value."""
    from openai import _types

    absent = tuple(t for t in (getattr(_types, "Omit", None), getattr(_types, "NotGiven", None)) if isinstance(t, type))
    return {key: value for key, value in kwargs.items() if not isinstance(value, absent)}


# (module, sync class, async class, the request's prompt): each ``create`` and ``parse`` is a
# generate span (``stream()`` calls ``create``)
_METHODS = ("create", "parse")
_APIS = (
    ("openai.resources.chat.completions", "Completions", "AsyncCompletions", _chat_messages),
    ("openai.resources.responses", "Responses", "AsyncResponses", _responses_input),
)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _returned(stage: Generate, result: Any, stream: bool) -> Any:
    """Record a completion and end the span, or hand back the stream behind a recording proxy
    (``passthrough``: the chunks the app reads are the answer; the span ends with the stream)."""
    stage.detach()
    if stream:
        proxy = record_as_consumed(result, stage, lambda chunks, error: _streamed(stage, chunks, error))
        if proxy is not None:
            return proxy
    if getattr(result, "choices", None) is not None or getattr(result, "object", None) == "response":
        if getattr(stage, "file_search", None) is not None:
            openai_file_search.record(stage, stage.file_search, [result])
        stage.record(result)
    else:  # with_raw_response / with_streaming_response: an HTTP response, not read here
        warn_once("openai-raw", "an OpenAI call returned %s, not a completion: its answer is not measured", type(result).__name__)
    stage.close()
    return result


def _streamed(stage: Generate, chunks: list[Any] | None, error: BaseException | None) -> None:
    with guard("openai stream"):
        if getattr(stage, "file_search", None) is not None and chunks is not None:
            openai_file_search.record(stage, stage.file_search, chunks)
        stage.stream_done(chunks or ())
        stage.close(error)
