"""``rag_pipeline``: the root span, the owner of per-pipeline state, and where figures are made.

Just before the root span ends, the figures are computed from the state and set on it, so they
travel in the same export as the spans themselves, with no backend post-processing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from opentelemetry import trace

from ..setup import config as config_module
from .. import names
from ..setup import otel_metrics
from . import state as state_module
from ..core.guard import guard, warn_once
from ..core.keyed import warn_if_random
from ..setup.redaction import Redactor
from .spans import gated_json_object
from ..core.outputs import as_text
from .stage import Stage, content_limit, query_hash, set_figures
from .wrapping import decorate
from ..core.invocation import QUERY_KEYS, first_argument, is_text

_F = TypeVar("_F", bound=Callable[..., Any])


class RagPipeline(Stage):
    """The handle ``with rag_pipeline(...) as run`` yields; ``run.metrics`` is filled on exit."""

    stage = names.STAGE_PIPELINE
    release_span = False
    joins_auto_root = False  # a pipeline is a root of its own
    oi_kind = names.OI_KIND_CHAIN
    operation = names.OP_WORKFLOW

    def __init__(
        self,
        name: str,
        *,
        query: str | None = None,
        query_id: str | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        capture_content: str | None = None,
        redactor: Redactor | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        **attributes: Any,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("rag_pipeline needs a non-empty name")
        _check_context(session_id, user_id, metadata, tags)
        config = config_module.with_content(config_module.current(), capture_content, redactor)
        if tracer_provider is not None:  # the pipeline's stages use its provider too
            config = replace(config, tracer_provider=tracer_provider)
            config_module.provider_given()
        super().__init__(tracer_provider=tracer_provider, config=config)
        self.name = name
        self.query = query
        self.query_id = query_id
        self.attributes = attributes
        self.session_id, self.user_id, self.metadata = session_id, user_id, metadata
        self.tags = list(tags) if tags is not None else None
        self.metrics: dict[str, Any] = {}
        self.status: str | None = None
        self.inclusion_method: str | None = None  # recorded, declared, provider, located (comma-joined if mixed)
        self._state_token: object | None = None
        self._decorator_options = {
            "query": query,
            "query_id": query_id,
            "tracer_provider": tracer_provider,
            "capture_content": capture_content,
            "redactor": redactor,
            "session_id": session_id,
            "user_id": user_id,
            "metadata": metadata,
            "tags": tags,
            **attributes,
        }

    def span_target(self) -> str | None:
        return self.name

    def start_attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            names.GEN_AI_WORKFLOW_NAME: self.name,
            names.RAG_QUERY_ID: as_text(self.query_id),
            # with a content sample in force the mode is decided once the trace id exists (find_state)
            names.RAG_CONTENT_MODE: None if self.config.full_content_sample else self.config.content.mode,
            # ids and the app's own labels, not content: every mode exports them (docs/redaction.md)
            names.OI_SESSION_ID: self.session_id,
            names.GEN_AI_CONVERSATION_ID: self.session_id,  # the GenAI semconv's key (invoke_workflow) for it
            names.OI_USER_ID: self.user_id,
            names.OI_TAG_TAGS: self.tags or None,
        }
        for key, value in self.attributes.items():
            if isinstance(value, (str, bool, float)) or (isinstance(value, int) and -(2**63) <= value < 2**63):  # OTLP ints are int64
                attributes[names.RAG_PIPELINE_ATTRIBUTE_PREFIX + key] = value
        return attributes

    def open(self) -> None:
        super().open()
        if self.inert:
            self.status = names.STATUS_TELEMETRY_OFF

    def find_state(self) -> state_module.PipelineState:
        if self.config.full_content_sample:
            self._decide_content()
        state = state_module.PipelineState(self.config, digests={})
        version = self.attributes.get("version")
        state.labels = {names.GEN_AI_WORKFLOW_NAME: self.name}
        if isinstance(version, (str, int)):
            state.labels[names.RAG_PIPELINE_VERSION] = version
        route = self.attributes.get("route")
        if isinstance(route, str):
            state.labels[names.RAG_PIPELINE_ROUTE] = route
        return state

    def on_open(self) -> None:
        super().on_open()
        self._set_metadata()

    def _set_metadata(self) -> None:
        """``metadata`` as one JSON object; its values may be content (full mode only)."""
        if not self.metadata or self.attrs is None or not self.attrs.recording:
            return
        encoded = gated_json_object(self.metadata, self.config.content, content_limit(self))
        if encoded is None and self.config.content.captures:
            warn_once("metadata-size", "rag_pipeline metadata is longer than the content size limit; not recorded")
        self.attrs.set(names.OI_METADATA, encoded)

    def _decide_content(self) -> None:
        """The sampled content mode, decided once for the whole pipeline and recorded on its root.

        An untraced pipeline (no valid trace id) keeps the configured mode: fail closed.
        """
        share = self.config.full_content_sample
        context = self.span.get_span_context()
        self.config = config_module.content_decided(self.config, context.trace_id if context.is_valid else None)
        policy = self.config.content
        if self.attrs is not None:
            self.attrs.policy = policy
            self.attrs.essential(names.RAG_CONTENT_MODE, policy.mode)
            self.attrs.essential(names.RAG_CONTENT_SAMPLED, policy.captures)  # the configured mode is never full
            self.attrs.essential(names.RAG_CONTENT_SAMPLE_SHARE, share)

    def record_stage_metrics(self, found: otel_metrics.Instruments, labels: dict[str, Any]) -> None:
        figures = self.metrics
        if names.METRIC_RECALL_PROXY in figures:
            found.recall_proxy.record(figures[names.METRIC_RECALL_PROXY], labels)
        if names.METRIC_CONTEXT_PRECISION in figures:
            found.context_precision.record(figures[names.METRIC_CONTEXT_PRECISION], labels)
        if names.METRIC_FILE_RECALL_PROXY in figures:  # citations that name files (file_search)
            found.file_recall_proxy.record(figures[names.METRIC_FILE_RECALL_PROXY], labels)
        # no state means ragtrace failed to set the run up: nothing was measured, and that is ours
        status = otel_metrics.status_label(self.status if self.state is not None else names.STATUS_INTERNAL_ERROR)
        found.pipeline_runs.add(1, {**labels, names.RAG_METRICS_STATUS: status})
        if names.METRIC_WASTED_CONTEXT_TOKENS in figures:
            found.wasted_tokens.record(figures[names.METRIC_WASTED_CONTEXT_TOKENS], labels)
        if names.METRIC_CITED in figures:  # the citations were scored
            # every kind once at 0 first (a series Prometheus first sees at a non-zero count loses
            # that count to rate()), then only the kinds this run has: one add in the common case
            first = otel_metrics.first_seen(found, labels)
            for kind, figure in _CITATION_FIGURES:
                if figures[figure] or first:
                    found.citations.add(figures[figure], {**labels, names.RAG_CITATION_KIND: kind})

    def set_query(self, query: Any) -> None:
        """The user's question (also settable after start, e.g. by the decorator), and its hash,
        which joins traces to a golden set when the text itself is not exported."""
        text = as_text(query)
        super().set_query(text)
        if text is not None and self.attrs is not None:
            self.attrs.essential(names.RAG_QUERY_HASH, query_hash(text))
            if not self.config.content.captures:  # the hash is then the only way to join by query
                warn_if_random("rag.query.hash, which joins redacted traces by query, differs between processes")

    def attach(self) -> None:
        super().attach()
        if self.state is not None:
            self._state_token = state_module.activate(self.state)

    def detach(self) -> None:
        if self._state_token is not None:
            token, self._state_token = self._state_token, None
            with guard("context detach"):
                state_module.deactivate(token)
        super().detach()

    def close(self, error: BaseException | None = None) -> None:
        """End the root, with its figures; while stages of it are still to be recorded by an
        integration that records after the call returned (``PipelineState.hold``: LiteLLM's
        callbacks), the end waits for them and keeps this moment as the span's end time."""
        state = self.state
        if state is not None and state.holds and not self.closed:  # one read of an int when nothing is held
            end_time = self.end_time if self.end_time is not None else time.time_ns()
            if state.close_when_released(lambda: self._close_at(end_time, error)):
                return
        super().close(error)

    def _close_at(self, end_time: int, error: BaseException | None) -> None:
        with guard("deferred pipeline close"):
            self.end_time = end_time
            super().close(error)

    def on_close(self) -> None:
        state = self.state
        if state is None:
            return
        state.digests = None  # the texts it holds are read no more
        if state.delegated:  # another process's pipeline_segment carries the figures: counted once
            self.status = state_module.STATUS_DELEGATED
            if self.attrs is not None:
                self.attrs.essential(names.RAG_PIPELINE_DELEGATED, True)
                self.attrs.essential(names.RAG_METRICS_STATUS, self.status)
            return
        result = state.figures_for_trace()
        self.metrics = dict(result.values)
        self.status = result.status_text
        self.inclusion_method = ",".join(sorted({c.method for c in state.contexts})) or None
        if state.answer_text is not None:
            self._oi_value(names.OI_OUTPUT_VALUE, state.answer_text)
        set_figures(self, result, events=True, inclusion_method=self.inclusion_method)

    @property
    def trace_id(self) -> str | None:
        """The pipeline's trace id (32 hex digits), to find it in a backend; None when not traced."""
        context = self.span.get_span_context()
        return format(context.trace_id, "032x") if context.is_valid else None

    @property
    def span_id(self) -> str | None:
        """The root span's id (16 hex digits): with ``trace_id``, what ``record_score`` needs elsewhere."""
        context = self.span.get_span_context()
        return format(context.span_id, "016x") if context.is_valid else None

    def record(self, output: Any) -> None:
        """The pipeline's final output, when it isn't a recorded answer generation."""
        text = as_text(output)
        if text is not None and self.state is not None and self.state.answer_text is None:
            self.state.answer_text = text

    def __call__(self, func: _F) -> _F:
        """``@rag_pipeline("name")``: a fresh pipeline per call of ``func``."""
        return _pipeline_decorator(func, self.name, self._decorator_options)


# rag.citations{rag.citation.kind} from the run's figures
_CITATION_FIGURES = (
    (names.CITATION_KIND_VALID, names.METRIC_CITED),
    (names.CITATION_KIND_OUT_OF_CONTEXT, names.METRIC_OUT_OF_CONTEXT_CITATIONS),
    (names.CITATION_KIND_UNKNOWN, names.METRIC_UNKNOWN_CITATIONS),
)


def _check_context(session_id: Any, user_id: Any, metadata: Any, tags: Any) -> None:
    """Misconfiguration raises here, at the call site, not at export."""
    for what, value in (("session_id", session_id), ("user_id", user_id)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"rag_pipeline {what} must be a str, got {type(value).__name__}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"rag_pipeline metadata must be a mapping, got {type(metadata).__name__}")
    if tags is not None and (isinstance(tags, str) or not isinstance(tags, Sequence) or not all(isinstance(t, str) for t in tags)):
        raise TypeError("rag_pipeline tags must be a sequence of str")


def _pipeline_decorator(func: _F, name: str, options: dict[str, Any]) -> _F:
    """``@rag_pipeline(name)`` on a function: one root span and one state per call."""
    provider = options.get("tracer_provider")

    def make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage:
        query = options.get("query") or first_argument(args, kwargs, QUERY_KEYS, is_text)
        return RagPipeline(name, **{**options, "query": query})

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        stage.record(value if not streamed else None)

    return decorate(func, make, result, provider)  # type: ignore[no-any-return]
