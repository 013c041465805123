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
from ragtrace._internal import names
from ragtrace._internal.setup import otel_metrics

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
    retrieve = by_stage["retrieve"]
    assert tuple(retrieve.explicit_bounds) == otel_metrics.STAGE_DURATION_BUCKETS
    # an in-memory retrieval takes microseconds: it lands under 5 ms, not in a first bucket of
    # 10 ms that every fast stage shares (a p95 of 9.5 ms for all of them)
    under_5ms = sum(n for bound, n in zip(retrieve.explicit_bounds, retrieve.bucket_counts) if bound <= 0.005)
    assert under_5ms == retrieve.count == 2 and retrieve.explicit_bounds[0] <= 0.0005
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
    assert otel_metrics.instruments(ragtrace._internal.setup.config.current()) is None
    assert pipeline().metrics["recall_proxy"] == 0.25


def test_a_meter_provider_alone_keeps_the_figures(reader):
    """No TracerProvider, only a MeterProvider: the pipeline is not inert, its figures are computed."""
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]))
    run = pipeline()
    assert run.status != "telemetry_off" and 0 < run.metrics[names.METRIC_RECALL_PROXY] <= 1
    assert points(reader)[names.METRIC_RECALL_PROXY_HISTOGRAM]


# --- the fleet view's metrics (docs/fleet.md) ---------------------------------------------------
def cited(answer: str, *, version: str = "v1", docs=DOCS, shown: int = 2, capture_content: str | None = None) -> ragtrace.RagPipeline:
    """A pipeline that retrieves ``docs``, shows the first ``shown`` as [1].. and answers ``answer``."""
    with ragtrace.rag_pipeline("qa", version=version, capture_content=capture_content) as run:
        with ragtrace.retrieve(data_source="kb") as r:
            r.record(docs)
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks[:shown]:
                ctx.add(chunk)
        with ragtrace.generate(model="m") as g:
            g.record(answer)
    return run


def by(points_: list, key: str) -> dict:
    return {p.attributes[key]: p for p in points_}


def test_pipeline_runs_count_measured_and_each_first_reason(reader):
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    cited("see [1]")
    cited("see [2]")
    pipeline(empty=True)  # retrieved nothing: "empty_retrieval", the first of its reasons
    with ragtrace.rag_pipeline("qa", version="v1") as bare:
        pass  # nothing at all: no_retrieval,no_context,no_answer
    assert bare.status == "no_retrieval,no_context,no_answer"
    runs = points(reader)[names.METRIC_PIPELINE_RUNS]
    counted = {(p.attributes[names.RAG_PIPELINE_VERSION], p.attributes[names.RAG_METRICS_STATUS]): p.value for p in runs}
    assert counted == {("v1", "measured"): 2, ("v3", "empty_retrieval"): 1, ("v1", "no_retrieval"): 1}
    for point in runs:
        assert point.attributes[names.RAG_STAGE] == names.STAGE_PIPELINE


def test_citations_by_kind_and_wasted_tokens(reader):
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    # [1] valid, d3 is retrieved but not shown (out of context), [7] names nothing retrieved
    first = cited("see [1] and [d3] and [7]")
    assert (first.metrics["cited"], first.metrics["out_of_context_citations"], first.metrics["unknown_citations"]) == (1, 1, 1)
    cited("see [1] and [2]")
    found = points(reader)
    kinds = {kind: p.value for kind, p in by(found[names.METRIC_CITATIONS], names.RAG_CITATION_KIND).items()}
    assert kinds == {"valid": 3, "out_of_context": 1, "unknown": 1}
    (wasted,) = found[names.METRIC_CONTEXT_WASTED_TOKENS]
    chunk_tokens = first.metrics["wasted_context_tokens"]  # [2] of the first answer, never cited
    assert chunk_tokens > 0 and wasted.count == 2 and wasted.sum == chunk_tokens
    assert tuple(wasted.explicit_bounds) == otel_metrics.TOKEN_BUCKETS


def test_an_unscored_answer_adds_no_citations_but_counts_its_run(reader):
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    with ragtrace.rag_pipeline("qa", version="v1") as run:
        with ragtrace.generate(model="m") as g:
            g.record("see [1]")  # no context: the citation can't be judged
    assert "cited" not in run.metrics
    found = points(reader)
    assert names.METRIC_CITATIONS not in found
    (runs,) = found[names.METRIC_PIPELINE_RUNS]
    assert runs.attributes[names.RAG_METRICS_STATUS] == "no_retrieval" and runs.value == 1


def test_top_score_buckets_resolve_scores_in_zero_one(reader):
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    for top in (0.93, 0.42):
        cited("see [1]", docs=[{"id": "a", "score": top, "content": "x"}], shown=1)
    (point,) = points(reader)[names.METRIC_RETRIEVAL_TOP_SCORE]
    assert tuple(point.explicit_bounds) == otel_metrics.SCORE_BUCKETS
    counts = dict(zip(point.explicit_bounds, point.bucket_counts))
    assert counts[0.5] == 1 and counts[1.0] == 1 and sum(point.bucket_counts) == 2  # (0.4, 0.5] and (0.9, 1]


def test_every_reason_ragtrace_sets_is_in_the_one_list():
    """A STATUS_* constant anywhere in ragtrace._internal that the metric label would count as
    "other": new reasons must be added to names.METRICS_STATUS_REASONS (and then flow through)."""
    import importlib
    import pkgutil

    import ragtrace._internal as internal

    found = {}
    for module in pkgutil.walk_packages(internal.__path__, internal.__name__ + "."):
        loaded = importlib.import_module(module.name)
        for key, value in vars(loaded).items():
            if key.startswith("STATUS_") and isinstance(value, str):
                found[f"{module.name}.{key}"] = value
    assert len(found) >= 13
    assert {k: v for k, v in found.items() if v not in names.METRICS_STATUS_REASONS} == {}
    assert otel_metrics.status_label("citations_unresolved,no_answer") == "citations_unresolved"
    assert otel_metrics.status_label("not_a_reason") == names.METRICS_STATUS_OTHER
    assert otel_metrics.status_label(None) == names.METRICS_STATUS_MEASURED


def test_redact_mode_puts_no_content_in_any_metric(reader):
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider(), capture_content="redact")
    secret = [{"id": "d0", "score": 0.9, "content": "SECRET-CHUNK"}, {"content": "SECRET-IDLESS"}]
    with ragtrace.rag_pipeline("qa", query="SECRET-QUERY", version="v1", route="faq") as run:
        with ragtrace.retrieve(query="SECRET-QUERY", data_source="kb") as r:
            r.record(secret)
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks:
                ctx.add(chunk)
        with ragtrace.generate(model="m") as g:
            g.record("SECRET-ANSWER [1] [SECRET-LABEL]")
    ragtrace.record_score(run, name="groundedness", value=0.5, scorer="llm", explanation="SECRET-WHY", label="fail")
    values = set()
    for metric_points in points(reader).values():
        for point in metric_points:
            values.update(map(str, point.attributes.values()))
    assert {"qa", "v1", "faq", "kb", "m", "groundedness", "measured", "valid", "unknown"} <= values
    assert not [v for v in values if "SECRET" in v]
    allowed = {"qa", "v1", "faq", "kb", "m", "groundedness", "pipeline", "retrieve", "assemble", "generate", *names.CITATION_KINDS,
               names.METRICS_STATUS_MEASURED, *names.METRICS_STATUS_REASONS, names.OP_WORKFLOW, names.OP_RETRIEVAL, names.OP_CHAT}
    assert values <= allowed


def test_each_citation_kind_starts_at_zero_once_per_label_set(reader):
    """Prometheus 2.x's rate() loses a series' first count, so every kind is added at 0 on a label
    set's first scored run; later runs add only the kinds they have."""
    ragtrace.configure(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=TracerProvider())
    cited("see [1] and [2]")
    kinds = by(points(reader)[names.METRIC_CITATIONS], names.RAG_CITATION_KIND)
    assert {k: p.value for k, p in kinds.items()} == {"valid": 2, "out_of_context": 0, "unknown": 0}
    cited("see [1] and [7]")
    cited("see [1] and [7]", version="v2")  # a new label set: its own zeros
    kinds = {(p.attributes[names.RAG_PIPELINE_VERSION], p.attributes[names.RAG_CITATION_KIND]): p.value for p in points(reader)[names.METRIC_CITATIONS]}
    assert kinds == {("v1", "valid"): 3, ("v1", "out_of_context"): 0, ("v1", "unknown"): 1,
                     ("v2", "valid"): 1, ("v2", "out_of_context"): 0, ("v2", "unknown"): 1}
