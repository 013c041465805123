"""prometheus_names: the series names the shipped dashboard and rules query are the ones the real
OpenTelemetry Prometheus exporter writes, for every instrument ragtrace makes."""

from __future__ import annotations

import dataclasses

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest

from ragtrace._internal.setup import config, otel_metrics
from ragtrace._internal import names
from ragtrace._internal.names import prometheus_names


def test_every_instrument_is_scraped_under_the_name_the_dashboard_uses():
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    found = otel_metrics.instruments(dataclasses.replace(config.current(), meter_provider=provider))
    assert found is not None
    labels = {names.GEN_AI_WORKFLOW_NAME: "qa", names.RAG_PIPELINE_VERSION: "v1"}
    made = 0
    for field in dataclasses.fields(found):
        instrument = getattr(found, field.name)
        if field.name in ("seen", "kept"):  # the label sets given their zeros and the label values kept: no instruments
            continue
        (instrument.add if hasattr(instrument, "add") else instrument.record)(1, labels)
        made += 1
    scraped = generate_latest(registry).decode()
    series = {line.split("{", 1)[0].split(" ", 1)[0] for line in scraped.splitlines() if line and not line.startswith("#")}
    assert made == len(names.METRICS)
    for info in names.METRICS:
        name = prometheus_names.metric(info.name)
        expected = {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if info.instrument == "histogram" else {name}
        assert expected <= series, info.name
    assert 'gen_ai_workflow_name="qa"' in scraped and 'rag_pipeline_version="v1"' in scraped
    assert prometheus_names.label(names.RAG_METRICS_STATUS) == "rag_metrics_status"
    provider.shutdown()


def test_an_unmapped_unit_raises_instead_of_guessing(monkeypatch):
    monkeypatch.setitem(prometheus_names._INFO, "x.bytes", names.MetricInfo("x.bytes", "counter", "By", ""))
    with pytest.raises(ValueError, match="By"):
        prometheus_names.metric("x.bytes")
