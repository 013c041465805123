"""``record_score``: a judge's score of a pipeline run, recorded the OpenTelemetry way.

A score often arrives after the run ended, from another process. An ended span can't take new
events, so each score is a short ``evaluation {name}`` span in the run's trace, parented to the
pipeline's root, carrying one ``gen_ai.evaluation.result`` event; and one value of the histogram
``rag.eval.score``, labelled with ``rag.eval.name`` and like ragtrace's other metrics (pipeline,
version, route). The
explanation is content and passes the content policy of the run (or, from ids, the configured one,
with the run's own sampling decision re-taken from its trace id).
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from ..setup import config as config_module
from .. import names
from ..setup import otel_metrics
from ..core.guard import guard
from .pipeline import RagPipeline
from .spans import trim_text

SCORERS: Final = (names.SCORER_LLM, names.SCORER_HUMAN, names.SCORER_CODE)
# the name is a metric label (rag.eval.name), so it must be an identifier the app chose, never text:
# OTel's instrument-name syntax (a name was once part of an instrument name, rag.eval.<name>)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,200}")
_HEX = re.compile(r"[0-9a-fA-F]+")


def record_score(
    run: RagPipeline | None = None,
    *,
    name: str,
    value: float,
    scorer: str,
    label: str | None = None,
    explanation: str | None = None,
    trace_id: str | None = None,
    span_id: str | None = None,
    pipeline: str | None = None,
    version: str | int | None = None,
    route: str | None = None,
    capture_content: str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> None:
    """Record a score of a pipeline run: ``run`` itself, or its ``trace_id`` and root ``span_id``
    (hex, as exported) when the judge runs elsewhere; then ``pipeline``/``version``/``route``
    label the metric. Bad arguments raise here; nothing after that ever does.
    """
    _check(run, name, value, scorer, label, explanation, trace_id, span_id)
    with guard("score recording"):
        if run is not None:
            parent = run.span.get_span_context()
            config = run.config
            pipeline_labels = dict(run.state.labels) if run.state is not None else {names.GEN_AI_WORKFLOW_NAME: run.name}
        else:
            assert trace_id is not None and span_id is not None
            parent = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
            config = _config_for(parent.trace_id, capture_content)
            given = {names.GEN_AI_WORKFLOW_NAME: pipeline, names.RAG_PIPELINE_VERSION: version, names.RAG_PIPELINE_ROUTE: route}
            pipeline_labels = {k: v for k, v in given.items() if v is not None}
        if parent.is_valid:
            _emit(parent, config, tracer_provider, name, float(value), scorer, label, explanation)
        found = otel_metrics.instruments(config)
        if found is not None:
            labels = otel_metrics.labels(found, config.max_label_values, pipeline_labels, **{names.RAG_EVAL_NAME: name})
            found.eval_score.record(float(value), labels)


def _check(
    run: Any, name: Any, value: Any, scorer: Any, label: Any, explanation: Any, trace_id: Any, span_id: Any
) -> None:
    if run is not None and not isinstance(run, RagPipeline):
        raise TypeError(f"record_score takes the run a rag_pipeline yielded, got {type(run).__name__}")
    if (run is None) == (trace_id is None or span_id is None) or (run is not None and (trace_id or span_id)):
        raise ValueError("record_score needs either the run or both trace_id= and span_id=")
    if run is None:
        for what, text, digits in (("trace_id", trace_id, 32), ("span_id", span_id, 16)):
            if not isinstance(text, str) or len(text) != digits or not _HEX.fullmatch(text) or not int(text, 16):
                raise ValueError(f"{what} must be {digits} hex digits (not all zero), got {text!r}")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"score name must start with a letter and hold only letters, digits, '_', '.', '-', got {name!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"score value must be a finite number, got {value!r}")
    if scorer not in SCORERS:
        raise ValueError(f"scorer must be one of {SCORERS}, got {scorer!r}")
    for what, text in (("label", label), ("explanation", explanation)):
        if text is not None and not isinstance(text, str):
            raise TypeError(f"{what} must be a str, got {type(text).__name__}")


def _config_for(trace_id: int, capture_content: str | None) -> config_module.Config:
    """The configuration for a score given by ids: the run's own sampling decision, re-taken."""
    return config_module.content_decided(config_module.with_content(config_module.current(), capture_content, None), trace_id)


def _emit(
    parent: SpanContext,
    config: config_module.Config,
    provider: trace.TracerProvider | None,
    name: str,
    value: float,
    scorer: str,
    label: str | None,
    explanation: str | None,
) -> None:
    start = {names.RAG_STAGE: names.STAGE_EVALUATION}
    if config.openinference:
        start[names.OI_SPAN_KIND] = names.OI_KIND_EVALUATOR
    tracer = config_module.tracer(provider or config.tracer_provider)
    span = tracer.start_span(
        f"{names.EVALUATION_SPAN_NAME} {name}", context=trace.set_span_in_context(NonRecordingSpan(parent)), attributes=start
    )
    event: dict[str, Any] = {
        names.GEN_AI_EVALUATION_NAME: name,
        names.GEN_AI_EVALUATION_SCORE_VALUE: value,
        names.RAG_EVALUATION_SCORER: scorer,
    }
    if label is not None:
        event[names.GEN_AI_EVALUATION_SCORE_LABEL] = label
    text = config.content.text(explanation)
    if text is not None:
        event[names.GEN_AI_EVALUATION_EXPLANATION] = trim_text(text, config.max_content_chars)
    span.add_event(names.GEN_AI_EVALUATION_RESULT, event)
    span.end()
