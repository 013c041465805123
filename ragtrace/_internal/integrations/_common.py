"""What the integrations share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from contextvars import ContextVar, Token
from typing import Any, TypeVar

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace

from .. import names
from ..stages import state as state_module
from ..core.guard import call_guarded, guard
from ..stages.stage import STAGE_KEY, Stage


# a framework model call in progress in this context (LangChain's callbacks can't make its span
# current: the model runs between two callbacks). Reset when the call ends; where the end callback
# runs in another context (``ainvoke``), the value left behind is a closed stage, which counts as none.
_framework_generation: ContextVar[Stage | None] = ContextVar("ragtrace_framework_generation", default=None)


def inside_generation() -> bool:
    """Is a ragtrace generate stage open for the call being made? The current span is one (the
    user's ``with ragtrace.generate()``, a LlamaIndex LLM call), or a framework model call is in
    progress in this context (a LangChain chat model such as ``ChatOpenAI``). Then an LLM call made
    inside it is already recorded there, also under another instrumentor's span made current in
    between (OpenLLMetry's wrapper of the same SDK call). A span that is not recording (sampled
    out, tracing off) can't tell, and says no."""
    framework = _framework_generation.get()
    if framework is not None and not framework.closed:
        return True
    attached = otel_context.get_value(STAGE_KEY)  # under another instrumentor's span made current inside it
    if isinstance(attached, Stage) and attached.stage == names.STAGE_GENERATE and not attached.closed:
        return True
    attributes = getattr(trace.get_current_span(), "attributes", None)
    return isinstance(attributes, Mapping) and attributes.get(names.RAG_STAGE) == names.STAGE_GENERATE


# framework retrievers in progress in this context whose callbacks can't make a span current
# (LangChain's): each a one-item list, True until its run ends (a marker left behind in another
# context by an async end callback is False, which counts as none)
_framework_retrieval: ContextVar[list[bool] | None] = ContextVar("ragtrace_framework_retrieval", default=None)


def retrieving() -> tuple[Token[list[bool] | None], list[bool]]:
    """Mark a framework retriever in progress in this context (``inside_stage``); undo with ``retrieval_over``."""
    marker = [True]
    return _framework_retrieval.set(marker), marker


def retrieval_over(found: tuple[Token[list[bool] | None], list[bool]]) -> None:
    token, marker = found
    marker[0] = False
    with suppress(ValueError):
        _framework_retrieval.reset(token)


def inside_stage(*stages: str) -> bool:
    """Is one of ragtrace's ``stages`` (retrieve, rerank) open for the call being made: the user's
    ``with ragtrace.retrieve()`` or ``@ragtrace.retriever``, a LlamaIndex retriever or
    postprocessor, a LangChain retriever (which covers its compressors)? Then a client or model
    call made inside it (a vector store's ``query_points``, a reranker's ``predict``) is that
    stage's work, recorded there: recording it again would count one retrieval twice."""
    marker = _framework_retrieval.get()
    if marker is not None and marker[0]:
        return True
    attached = otel_context.get_value(STAGE_KEY)
    if isinstance(attached, Stage) and attached.stage in stages and not attached.closed:
        return True
    attributes = getattr(trace.get_current_span(), "attributes", None)
    return isinstance(attributes, Mapping) and attributes.get(names.RAG_STAGE) in stages


def generating(stage: Stage | None) -> Token[Stage | None]:
    """Mark ``stage`` as the framework model call in progress in this context (``inside_generation``)."""
    return _framework_generation.set(stage)


def generating_stage() -> Stage | None:
    """The model call marked in progress in this context (``generating``), if any."""
    return _framework_generation.get()


def generated(token: Token[Stage | None]) -> None:
    """Undo ``generating``; from another context (LangChain's async end callbacks) there is
    nothing to undo: the stage left there is closed."""
    with suppress(ValueError):
        _framework_generation.reset(token)


def unwrap(owner: type, name: str) -> None:
    """Take ragtrace's wrapper off ``owner.name`` wherever it sits among other instrumentors'
    wrappers (OpenLLMetry's OpenAI instrumentor wraps the same ``create``). OpenTelemetry's
    ``unwrap`` takes off the outermost one, which is the other's when it was instrumented after
    ragtrace: that turned the other off and left ragtrace on."""
    outer, current = None, vars(owner).get(name)
    while hasattr(current, "_self_wrapper") and hasattr(current, "__wrapped__"):  # a wrapt function wrapper
        if (getattr(current._self_wrapper, "__module__", None) or "").startswith("ragtrace."):
            if outer is None:
                setattr(owner, name, current.__wrapped__)
            else:  # the wrapper around ours now calls what ours called
                outer.__wrapped__ = current.__wrapped__
            return
        outer, current = current, current.__wrapped__


class _CurrentSpan(wrapt.ObjectProxy):  # type: ignore[misc]
    """A stage's span as the current span, until released: then the span that was current before.

    Two dispatcher handlers that each attach a context per framework span (OpenInference's and
    ours) detach in the order they were registered, not in reverse, so the second one's detach
    restores a context holding the first one's span. Once released, that stale context parents
    new spans where they would have gone without us. A released proxy is never wrapped again
    (``_settled``): stale contexts left by one query after another don't chain proxies.
    """

    def __init__(self, span: trace.Span) -> None:
        super().__init__(span)
        self._self_previous = _settled(trace.get_current_span())
        self._self_released = False

    def release(self) -> None:
        self.__wrapped__, self._self_previous = _settled(self._self_previous), None
        self._self_released = True


def _settled(span: trace.Span) -> trace.Span:
    """``span`` past any released proxies (each stands for the span it now wraps)."""
    while type(span) is _CurrentSpan and span._self_released:
        span = span.__wrapped__
    return span


class Attached:
    """``stage``'s span made current (and a pipeline's state active) for a framework call."""

    def __init__(self, stage: Stage, state: state_module.PipelineState | None = None) -> None:
        self._span = _CurrentSpan(stage.span)
        self._token = otel_context.attach(stage.in_context(self._span))
        self._state_token = state_module.activate(state) if state is not None else None

    def detach(self) -> None:
        self._span.release()
        with guard("context detach"):
            if self._state_token is not None:
                state_module.deactivate(self._state_token)
        with guard("context detach"):
            otel_context.detach(self._token)


_S = TypeVar("_S", bound=Stage)


def started(stage: _S) -> _S:
    """``stage`` opened and made current for the SDK call it wraps."""
    stage.open()
    stage.attach()
    return stage


def closed_with(stage: Stage, error: BaseException) -> None:
    """A wrapped call that raised: its stage ends with the app's error, which passes through."""
    stage.detach()
    stage.close(error)


def call_wrappers(
    open_: Callable[[tuple[Any, ...], dict[str, Any]], Stage | None],
    record: Callable[[Any, dict[str, Any], Any], Any],
    label: str = "openai instrumentation",
) -> tuple[Any, Any]:
    """wrapt wrappers (sync, async) for an SDK method whose call is one stage: ``open_`` starts it
    from the call's arguments (None: another span covers the call), ``record`` reads the result
    (untouched) and returns what the app gets: the result itself, or a proxy that records a stream
    as the app reads it. ragtrace's own failures are logged once and the call goes on untraced."""

    def sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stage = call_guarded(label, open_, args, kwargs)
        if stage is None:
            return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            call_guarded(label, closed_with, stage, error)
            raise
        return call_guarded(label, record, stage, kwargs, result, default=result)

    async def asynchronous(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stage = call_guarded(label, open_, args, kwargs)
        if stage is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            call_guarded(label, closed_with, stage, error)
            raise
        return call_guarded(label, record, stage, kwargs, result, default=result)

    return sync, asynchronous


def add_usage(stage: Any, **values: Any) -> None:
    """What a provider's response says of the call (``input_tokens``, ``output_tokens``,
    ``finish_reasons``...) where ``Generate.record`` can't read it from the output itself (the
    integration read the SDK's own shapes); None values are left out."""
    stage._usage.update({key: value for key, value in values.items() if value is not None})
