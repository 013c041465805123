"""OTel metrics through the SDK's in-memory reader, including pipelines whose traces are sampled out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import ragtrace
from ragtrace._internal import names, otel_metrics

DOCS = [{"id": f"d{i}", "score": 1.0 - i / 10, "content": f"text {i}"} for i in range(4)]


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    yield found
    found.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    found: dict[str, list] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def pipeline(empty: bool = False) -> ragtrace.RagPipeline:
    with ragtrace.rag_pipeline("qa", version="v3") as run:
        with ragtrace.retrieve(data_source="kb") as r:
            r.record([] if empty else DOCS)
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks[:2]:
                ctx.add(chunk)
        with ragtrace.generate(model="m", provider="local") as g:
            g.record("see [1]")
    return run


def test_stage_durations_and_figures(reader):
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    pipeline()
    pipeline(empty=True)
    found = points(reader)

    durations = found[names.METRIC_OPERATION_DURATION]
    by_stage = {p.attributes[names.RAG_STAGE]: p for p in durations}
    assert set(by_stage) == {"pipeline", "retrieve", "assemble", "generate"}
    assert by_stage["retrieve"].count == 2
    assert by_stage["retrieve"].attributes[names.GEN_AI_DATA_SOURCE_ID] == "kb"
    assert by_stage["generate"].attributes[names.GEN_AI_REQUEST_MODEL] == "m"
    assert by_stage["pipeline"].attributes[names.GEN_AI_WORKFLOW_NAME] == "qa"
    assert by_stage["pipeline"].attributes[names.RAG_PIPELINE_VERSION] == "v3"
    assert tuple(by_stage["retrieve"].explicit_bounds) == otel_metrics.DURATION_BUCKETS
    for point in durations:  # labels stay bounded: never ids or text
        assert set(point.attributes) <= {
            names.GEN_AI_OPERATION_NAME, names.RAG_STAGE, names.GEN_AI_WORKFLOW_NAME, names.RAG_PIPELINE_VERSION,
            names.GEN_AI_DATA_SOURCE_ID, names.GEN_AI_REQUEST_MODEL, names.GEN_AI_PROVIDER_NAME, names.ERROR_TYPE,
        }

    (top,) = found[names.METRIC_RETRIEVAL_TOP_SCORE]
    assert top.count == 1 and top.sum == pytest.approx(1.0)
    (empty,) = found[names.METRIC_EMPTY_RETRIEVALS]
    assert empty.value == 1
    (recall,) = found[names.METRIC_RECALL_PROXY_HISTOGRAM]
    assert recall.count == 1 and recall.sum == pytest.approx(0.25)  # the empty pipeline isn't measurable
    (precision,) = found[names.METRIC_CONTEXT_PRECISION_HISTOGRAM]
    assert precision.sum == pytest.approx(0.5)
    tokens = found[names.METRIC_CONTEXT_TOKENS]
    assert sum(p.count for p in tokens) == 2
    assert isinstance(tokens[0], HistogramDataPoint)


def test_error_type_label(reader):
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    with pytest.raises(LookupError):
        with ragtrace.retrieve(data_source="kb"):
            raise LookupError("down")
    (point,) = points(reader)[names.METRIC_OPERATION_DURATION]
    assert point.attributes[names.ERROR_TYPE] == "LookupError"


def test_metrics_see_pipelines_whose_traces_are_sampled_out(reader):
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(sampler=ALWAYS_OFF)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    ragtrace.configure(tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader]))
    runs = [pipeline() for _ in range(5)]
    assert exporter.get_finished_spans() == ()
    assert all(run.metrics["recall_proxy"] == 0.25 for run in runs)
    (recall,) = points(reader)[names.METRIC_RECALL_PROXY_HISTOGRAM]
    assert recall.count == 5


def test_global_meter_provider_only_enables_decorators(reader, monkeypatch):
    from opentelemetry import metrics

    provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(metrics._internal, "_METER_PROVIDER", provider)

    @ragtrace.retriever(data_source="kb")
    def search(query: str):
        return DOCS

    assert search("q") == DOCS
    (point,) = points(reader)[names.METRIC_OPERATION_DURATION]
    assert point.attributes[names.RAG_STAGE] == "retrieve"


def test_no_meter_provider_records_nothing():
    ragtrace.configure(tracer_provider=TracerProvider())
    assert otel_metrics.instruments(ragtrace._internal.config.current()) is None
    assert pipeline().metrics["recall_proxy"] == 0.25


def test_a_meter_provider_alone_keeps_the_figures(reader):
    """No TracerProvider, only a MeterProvider: the pipeline is not inert, its figures are computed."""
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]))
    run = pipeline()
    assert run.status != "telemetry_off" and 0 < run.metrics[names.METRIC_RECALL_PROXY] <= 1
    assert points(reader)[names.METRIC_RECALL_PROXY_HISTOGRAM]
