"""record_score: the evaluation span and event in the run's trace, and the rag.eval.score histogram."""

from __future__ import annotations

import dataclasses

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace
from ragtrace._internal.setup import config, otel_metrics, redaction
from ragtrace._internal import names

from test_otel_metrics import points


def scored(reader: InMemoryMetricReader, name: str) -> list:
    """The rag.eval.score points of one score name (its rag.eval.name label checked, then left out
    of ``attributes`` so the other labels compare as before)."""
    found = [p for p in points(reader)[names.METRIC_EVAL_SCORE] if p.attributes.get(names.RAG_EVAL_NAME) == name]
    return [dataclasses.replace(p, attributes={k: v for k, v in p.attributes.items() if k != names.RAG_EVAL_NAME}) for p in found]


def answered(**options) -> ragtrace.RagPipeline:
    with ragtrace.rag_pipeline("qa", version="v2", route="faq", **options) as run:
        with ragtrace.retrieve("q") as r:
            r.record([{"id": "a", "content": "alpha"}])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks[0])
        with ragtrace.generate(model="m") as g:
            g.record("alpha [1]")
    return run


def evaluation(spans, name: str):
    (span,) = [s for s in spans.all() if s.name == f"evaluation {name}"]
    (event,) = span.events
    assert event.name == names.GEN_AI_EVALUATION_RESULT
    return span, dict(event.attributes)


def test_a_score_after_the_run_is_a_child_of_its_root_with_one_event(spans, metric_reader):
    run = answered()
    ragtrace.record_score(run, name="groundedness", value=0.25, label="fail", explanation="claims more than [1] says", scorer="llm")
    root = spans.one("pipeline")
    span, event = evaluation(spans, "groundedness")
    assert span.context.trace_id == root.context.trace_id
    assert span.parent.span_id == root.context.span_id
    assert span.attributes[names.RAG_STAGE] == names.STAGE_EVALUATION
    assert span.attributes[names.OI_SPAN_KIND] == names.OI_KIND_EVALUATOR
    assert span.start_time >= root.end_time  # a short span of its own: the root had ended
    assert event == {
        names.GEN_AI_EVALUATION_NAME: "groundedness",
        names.GEN_AI_EVALUATION_SCORE_VALUE: 0.25,
        names.GEN_AI_EVALUATION_SCORE_LABEL: "fail",
        names.GEN_AI_EVALUATION_EXPLANATION: "claims more than [1] says",
        names.RAG_EVALUATION_SCORER: "llm",
    }
    (point,) = scored(metric_reader, "groundedness")
    assert point.count == 1 and point.sum == pytest.approx(0.25)
    assert tuple(point.explicit_bounds) == otel_metrics.SCORE_BUCKETS
    # the bounded labels of ragtrace's other metrics, never ids or text
    assert dict(point.attributes) == {
        names.GEN_AI_WORKFLOW_NAME: "qa",
        names.RAG_PIPELINE_VERSION: "v2",
        names.RAG_PIPELINE_ROUTE: "faq",
    }


def test_a_score_during_the_run_is_a_child_of_its_root(spans, metric_reader):
    with ragtrace.rag_pipeline("qa") as run:
        with ragtrace.generate(model="m") as g:
            g.record("x")
        ragtrace.record_score(run, name="relevance", value=1, scorer="code")
    root = spans.one("pipeline")
    span, event = evaluation(spans, "relevance")
    assert span.parent.span_id == root.context.span_id
    assert names.GEN_AI_EVALUATION_SCORE_LABEL not in event and names.GEN_AI_EVALUATION_EXPLANATION not in event
    assert event[names.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0


def test_a_judge_elsewhere_scores_from_the_ids_the_pipeline_wrote_out(spans, metric_reader):
    run = answered()
    ids = (run.trace_id, run.span_id)
    root = spans.one("pipeline")
    assert ids == (format(root.context.trace_id, "032x"), format(root.context.span_id, "016x"))
    # another process: its own providers, nothing of the run but the ids
    exporter, judge_reader = InMemorySpanExporter(), InMemoryMetricReader()
    judge_provider = TracerProvider()
    judge_provider.add_span_processor(SimpleSpanProcessor(exporter))
    config.reset()
    ragtrace.configure(tracer_provider=judge_provider, meter_provider=MeterProvider(metric_readers=[judge_reader]))
    ragtrace.record_score(trace_id=ids[0], span_id=ids[1], name="groundedness", value=0.9, scorer="human", pipeline="qa", version="v2")
    (span,) = exporter.get_finished_spans()
    assert span.context.trace_id == root.context.trace_id and span.parent.span_id == root.context.span_id
    assert span.parent.is_remote
    (point,) = scored(judge_reader, "groundedness")
    assert dict(point.attributes) == {names.GEN_AI_WORKFLOW_NAME: "qa", names.RAG_PIPELINE_VERSION: "v2"}
    judge_reader.shutdown()


def test_the_explanation_is_content(spans, metric_reader):
    run = answered(capture_content="redact")
    ragtrace.record_score(run, name="groundedness", value=0.5, explanation="SECRET-EXPLANATION", scorer="llm")
    ragtrace.record_score(trace_id=run.trace_id, span_id=run.span_id, name="g2", value=0.5, explanation="SECRET-2", scorer="llm", capture_content="hash")
    for name in ("groundedness", "g2"):
        _, event = evaluation(spans, name)
        assert names.GEN_AI_EVALUATION_EXPLANATION not in event
        assert event[names.GEN_AI_EVALUATION_SCORE_VALUE] == 0.5


def test_from_ids_a_sampled_content_mode_takes_the_runs_own_decision(spans, metric_reader):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact", full_content_sample=0.5)
    seen = set()
    for index in range(30):
        run = answered()
        drawn = run.config.content.captures
        seen.add(drawn)
        ragtrace.record_score(trace_id=run.trace_id, span_id=run.span_id, name=f"s{index}", value=1.0, explanation="why", scorer="llm")
        _, event = evaluation(spans, f"s{index}")
        assert (names.GEN_AI_EVALUATION_EXPLANATION in event) is drawn
        assert drawn is redaction.sampled_for_content(int(run.trace_id, 16), 0.5)
    assert seen == {True, False}


def test_an_untraced_run_still_records_the_metric():
    found = InMemoryMetricReader()
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[found]))
    with ragtrace.rag_pipeline("qa") as run:
        pass
    assert run.trace_id is None and run.span_id is None
    ragtrace.record_score(run, name="groundedness", value=0.5, scorer="code")
    (point,) = scored(found, "groundedness")
    assert point.count == 1
    found.shutdown()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({}, ValueError),  # neither the run nor ids
        ({"trace_id": "ab" * 16}, ValueError),  # no span id
        ({"trace_id": "0" * 32, "span_id": "1" * 16}, ValueError),
        ({"trace_id": "xy" * 16, "span_id": "1" * 16}, ValueError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 15}, ValueError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "name": "has space"}, ValueError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "name": ""}, ValueError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "value": float("nan")}, TypeError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "value": True}, TypeError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "value": "0.5"}, TypeError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "scorer": "robot"}, ValueError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "label": 3}, TypeError),
        ({"trace_id": "ab" * 16, "span_id": "1" * 16, "explanation": b"x"}, TypeError),
    ],
)
def test_bad_arguments_raise_at_the_call(arguments, error):
    given = {"name": "groundedness", "value": 0.5, "scorer": "llm", **arguments}
    with pytest.raises(error):
        ragtrace.record_score(**given)


def test_the_run_or_ids_not_both(spans):
    run = answered()
    with pytest.raises(ValueError):
        ragtrace.record_score(run, trace_id=run.trace_id, span_id=run.span_id, name="g", value=1.0, scorer="llm")
    with pytest.raises(TypeError):
        ragtrace.record_score("not a run", name="g", value=1.0, scorer="llm")  # type: ignore[arg-type]
