"""What the integrations share."""

from __future__ import annotations

from collections.abc import Mapping

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace

from .. import names, state as state_module
from ..guard import guard
from ..stage import Stage


def inside_generation() -> bool:
    """Is the current span a ragtrace generate span? Then an LLM call made inside it (the user's
    ``with ragtrace.generate()``, or a framework LLM calling the OpenAI SDK) is already recorded
    there. A span that is not recording (sampled out, tracing off) can't tell, and says no."""
    attributes = getattr(trace.get_current_span(), "attributes", None)
    return isinstance(attributes, Mapping) and attributes.get(names.RAG_STAGE) == names.STAGE_GENERATE


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
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        self._state_token = state_module.activate(state) if state is not None else None

    def detach(self) -> None:
        self._span.release()
        with guard("context detach"):
            if self._state_token is not None:
                state_module.deactivate(self._state_token)
        with guard("context detach"):
            otel_context.detach(self._token)
