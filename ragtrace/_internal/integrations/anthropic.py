"""The Anthropic SDK: every ``messages.create`` (sync, async, ``stream=True``) and every
``messages.stream()`` is a generate span; a request that gives the model ``search_result`` or
``document`` blocks (in a user message or a ``tool_result``) is a RAG call with exact figures:

- a retrieve span of those blocks (ids: ``_anthropic_blocks``; a block whose text the app's own
  recorded retrieval returned keeps that id and is not retrieved twice);
- an assemble span whose context the provider states (``inclusion_method = "provider"``), each
  block once, positions in block order;
- the generate span, whose citations are the response's citation objects
  (``search_result_location``, ``char_location``, ``page_location``, ``content_block_location``),
  each resolved to exactly the block it names (``provided``): no text is parsed.

Outside any ``rag_pipeline`` such a call is one pipeline (the automatic root, ``_provider``);
inside one, its stages are the pipeline's. A call without sources is a plain generate span.

The SDK has no callback system, so ``Messages.create`` / ``AsyncMessages.create`` and
``.stream`` are wrapped with wrapt at class level (clients built before ``instrument()`` are
covered). The app gets the SDK's own objects: a ``Message``; a ``Stream`` behind the transparent
recording proxy every traced stream gets (``passthrough``); and from ``.stream()`` the SDK's own
``MessageStreamManager``, whose request, once made, hands the SDK's ``MessageStream`` the raw
event stream behind that proxy, so ``text_stream``, ``get_final_message()`` and the context
manager are the SDK's. Text and citations are read from the events the app consumed, the first
event timing the time to first chunk. ``client.beta.messages`` and ``messages.parse`` are not
covered.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import wrapt
from opentelemetry import trace

from ..stages.generation import Generate
from ..core.guard import call_guarded, guard, warn_once
from ..stages.passthrough import record_as_consumed
from . import _provider
from ._anthropic_blocks import event_refs, message_refs, read_request
from ._common import call_wrappers, closed_with, inside_generation, started, unwrap
from .base import RagtraceInstrumentor

_MODULE = "anthropic.resources.messages.messages"
_PROVIDER = "anthropic"
_LABEL = "anthropic instrumentation"
ROOT_NAME = "anthropic"  # the automatic root's name (gen_ai.workflow.name)
# where the SDK's stream managers keep the request they make on entry (name-mangled)
_REQUEST_ATTRIBUTES = {"MessageStreamManager": "_MessageStreamManager__api_request", "AsyncMessageStreamManager": "_AsyncMessageStreamManager__api_request"}


class AnthropicInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("anthropic")``, or ``AnthropicInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "anthropic"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        sync, asynchronous = call_wrappers(lambda args, kwargs: _open(kwargs, provider), _returned, _LABEL)
        wrapt.wrap_function_wrapper(_MODULE, "Messages.create", sync)
        wrapt.wrap_function_wrapper(_MODULE, "AsyncMessages.create", asynchronous)
        wrapt.wrap_function_wrapper(_MODULE, "Messages.stream", _stream_wrapper(provider, asynchronous=False))
        wrapt.wrap_function_wrapper(_MODULE, "AsyncMessages.stream", _stream_wrapper(provider, asynchronous=True))

    def _uninstrument(self, **kwargs: Any) -> None:
        module = importlib.import_module(_MODULE)
        for cls in (module.Messages, module.AsyncMessages):
            unwrap(cls, "create")
            unwrap(cls, "stream")


# --- one call -----------------------------------------------------------------------------------
def _open(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    """The call's generate span, after its retrieve and assemble spans when it has sources;
    None when another generate span already covers the call."""
    if inside_generation():
        return None
    messages = kwargs.get("messages")
    request = read_request(messages)
    root = None
    if request.sources:
        root = _provider.root_for(ROOT_NAME, request.query, provider)
        request = _provider.record_sources(request, root, provider)
    system = kwargs.get("system")
    prompt = list(messages) if isinstance(messages, (list, tuple)) else None
    if prompt is not None and isinstance(system, str):
        prompt = [{"role": "system", "content": system}, *prompt]
    model = kwargs.get("model")
    stage = Generate(
        model if isinstance(model, str) else None,
        _PROVIDER,
        prompt=prompt,
        temperature=kwargs.get("temperature"),
        max_tokens=kwargs.get("max_tokens"),
        tracer_provider=provider,
    )
    stage.auto_root = root
    stage.provider_request = request if request.sources else None  # type: ignore[attr-defined]
    return started(stage)


def _returned(stage: Generate, kwargs: Mapping[str, Any], result: Any) -> Any:
    """Record a message and end the span, or hand back the stream behind a recording proxy."""
    stage.detach()
    if kwargs.get("stream"):
        proxy = record_as_consumed(result, stage, lambda events, error: _streamed(stage, events, error))
        if proxy is not None:
            return proxy
    if getattr(result, "type", None) == "message":
        request = getattr(stage, "provider_request", None)
        if request is not None:
            stage.provided = _provider.provided_by_index(request, message_refs(getattr(result, "content", None)))
        stage.record(result)
    else:  # with_raw_response: an HTTP response, not read here
        warn_once("anthropic-raw", "an Anthropic call returned %s, not a message: its answer is not measured", type(result).__name__)
    stage.close()
    return result


def _streamed(stage: Generate, events: list[Any] | None, error: BaseException | None) -> None:
    with guard("anthropic stream"):
        request = getattr(stage, "provider_request", None)
        if request is not None and events is not None:
            stage.provided = _provider.provided_by_index(request, event_refs(events))
        stage.stream_done(events or ())
        stage.close(error)


# --- messages.stream() --------------------------------------------------------------------------
def _stream_wrapper(provider: trace.TracerProvider | None, *, asynchronous: bool) -> Any:
    """``.stream()`` returns the SDK's manager, whose request is made on entry: that request is
    replaced by one that opens the generate span and returns the raw stream behind the proxy."""

    def stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        manager = wrapped(*args, **kwargs)
        call_guarded(_LABEL, _instrument_manager, manager, kwargs, provider, asynchronous)
        return manager

    return stream


def _instrument_manager(found: Any, kwargs: dict[str, Any], provider: trace.TracerProvider | None, asynchronous: bool) -> None:
    manager = found
    for _ in range(8):  # the SDK's own, under another instrumentor's wrapper of it
        if type(manager).__name__ in _REQUEST_ATTRIBUTES:
            break
        inner = getattr(manager, "__wrapped__", None) or getattr(manager, "__dict__", {}).get("_stream_manager")  # OpenInference's, OpenLLMetry's
        if inner is None:
            break
        manager = inner
    attribute = _REQUEST_ATTRIBUTES.get(type(manager).__name__)
    request = getattr(manager, attribute, None) if attribute else None
    if request is None:
        warn_once("anthropic-stream-manager", "messages.stream() returned %s, which ragtrace does not know: not traced", type(found).__name__)
        return
    streamed = dict(kwargs, stream=True)
    setattr(manager, attribute, _async_request(request, streamed, provider) if asynchronous else _sync_request(request, streamed, provider))


def _sync_request(request: Any, kwargs: dict[str, Any], provider: trace.TracerProvider | None) -> Any:
    def recorded() -> Any:
        stage = call_guarded(_LABEL, _open, kwargs, provider)
        if stage is None:
            return request()
        try:
            raw = request()
        except BaseException as error:
            call_guarded(_LABEL, closed_with, stage, error)
            raise
        return call_guarded(_LABEL, _returned, stage, kwargs, raw, default=raw)

    return recorded


async def _async_request(request: Any, kwargs: dict[str, Any], provider: trace.TracerProvider | None) -> Any:
    stage = call_guarded(_LABEL, _open, kwargs, provider)
    if stage is None:
        return await request
    try:
        raw = await request
    except BaseException as error:
        call_guarded(_LABEL, closed_with, stage, error)
        raise
    return call_guarded(_LABEL, _returned, stage, kwargs, raw, default=raw)

