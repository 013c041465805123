"""The OpenAI SDK: every ``chat.completions.create`` call (sync, async, ``stream=True``) becomes a
generate span, scored against the pipeline's latest assembly.

The SDK has no callback system, so ``create`` is wrapped with wrapt at class level
(``Completions.create`` and ``AsyncCompletions.create``): clients built before ``instrument()``
are covered too. The app gets the SDK's own return value: a completion, or its ``Stream`` /
``AsyncStream`` behind a transparent proxy that records each chunk as the app reads it (never
reading ahead) and ends the span when the stream ends or is closed. A call made inside a ragtrace
generate span that is already open (the user's ``with ragtrace.generate()``, or a framework
integration's LLM call) is left to that span, so nothing is recorded twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import wrapt
from opentelemetry import trace
from opentelemetry.instrumentation.utils import unwrap

from ..generation import Generate
from ..guard import call_guarded, guard, warn_once
from ._common import inside_generation
from .base import RagtraceInstrumentor

_MODULE = "openai.resources.chat.completions"
_PROVIDER = "openai"


class OpenAIInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("openai")``, or ``OpenAIInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "openai"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        wrapt.wrap_function_wrapper(_MODULE, "Completions.create", _sync_wrapper(provider))
        wrapt.wrap_function_wrapper(_MODULE, "AsyncCompletions.create", _async_wrapper(provider))

    def _uninstrument(self, **kwargs: Any) -> None:
        from openai.resources.chat import completions

        unwrap(completions.Completions, "create")
        unwrap(completions.AsyncCompletions, "create")


# --- one call -----------------------------------------------------------------------------------
def _open(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    """A started generate span for this call, or None when another one already covers it."""
    if inside_generation():
        return None
    max_tokens = kwargs.get("max_completion_tokens", kwargs.get("max_tokens"))
    stage = Generate(
        _text(kwargs.get("model")),
        _PROVIDER,
        prompt=_messages(kwargs.get("messages")),
        temperature=kwargs.get("temperature"),
        max_tokens=max_tokens,
        tracer_provider=provider,
    )
    stage.open()
    stage.attach()
    return stage


def _messages(messages: Any) -> Any:
    """The request's messages as given (a list of dicts); anything else is not a prompt we read."""
    return list(messages) if isinstance(messages, (list, tuple)) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _returned(stage: Generate, result: Any, stream: bool) -> Any:
    """Record a completion and end the span, or hand back the stream behind a recording proxy."""
    stage.detach()
    if stream and hasattr(result, "__next__"):
        stage.stream_done(())  # marks the request as streamed; pieces arrive through the proxy
        return _Stream(result, stage)
    if stream and hasattr(result, "__anext__"):
        stage.stream_done(())
        return _AsyncStream(result, stage)
    if getattr(result, "choices", None) is not None:
        stage.record(result)
    else:  # with_raw_response / with_streaming_response: an HTTP response, not read here
        warn_once("openai-raw", "an OpenAI call returned %s, not a completion: its answer is not measured", type(result).__name__)
    stage.close()
    return result


def _failed(stage: Generate, error: BaseException) -> None:
    stage.detach()
    stage.close(error)


def _sync_wrapper(provider: trace.TracerProvider | None) -> Any:
    def create(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stage = call_guarded("openai instrumentation", _open, kwargs, provider)
        if stage is None:
            return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            call_guarded("openai instrumentation", _failed, stage, error)
            raise
        return call_guarded("openai instrumentation", _returned, stage, result, bool(kwargs.get("stream")), default=result)

    return create


def _async_wrapper(provider: trace.TracerProvider | None) -> Any:
    async def create(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stage = call_guarded("openai instrumentation", _open, kwargs, provider)
        if stage is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            call_guarded("openai instrumentation", _failed, stage, error)
            raise
        return call_guarded("openai instrumentation", _returned, stage, result, bool(kwargs.get("stream")), default=result)

    return create


# --- streams ------------------------------------------------------------------------------------
class _Stream(wrapt.ObjectProxy):  # type: ignore[misc]
    """The SDK's ``Stream``, unchanged (``isinstance`` still holds), recording chunks as they are read."""

    def __init__(self, stream: Any, stage: Generate) -> None:
        super().__init__(stream)
        self._self_stage = stage

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        try:
            chunk = self.__wrapped__.__next__()
        except StopIteration:
            self._self_end(None)
            raise
        except BaseException as error:
            self._self_end(error)
            raise
        with guard("openai stream"):
            self._self_stage.add_piece(chunk)
        return chunk

    def __enter__(self) -> Any:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_end(None)

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_end(None)

    def _self_end(self, error: BaseException | None) -> None:
        """End the span once: at the stream's end, on its error, or when the app closes it early."""
        with guard("openai stream"):
            self._self_stage.close(error)


class _AsyncStream(wrapt.ObjectProxy):  # type: ignore[misc]
    """The SDK's ``AsyncStream``, unchanged, recording chunks as they are read."""

    def __init__(self, stream: Any, stage: Generate) -> None:
        super().__init__(stream)
        self._self_stage = stage

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_end(None)
            raise
        except BaseException as error:
            self._self_end(error)
            raise
        with guard("openai stream"):
            self._self_stage.add_piece(chunk)
        return chunk

    async def __aenter__(self) -> Any:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_end(None)

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_end(None)

    def _self_end(self, error: BaseException | None) -> None:
        with guard("openai stream"):
            self._self_stage.close(error)
