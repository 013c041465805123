"""Request data in a metric label (``route=request.path``) can't grow ragtrace's memory or a scrape
without bound: app-supplied labels fold past ``max_label_values`` into "other", and ragtrace's own
MeterProvider caps each instrument's label sets. Measured on a real scrape of configure(metrics=)."""

from __future__ import annotations

import logging
import re
import tracemalloc

import pytest
from opentelemetry.sdk.trace import TracerProvider

import ragtrace
from ragtrace._internal.setup import config, otel_metrics, prometheus_endpoint
from ragtrace._internal import names
from test_prometheus_endpoint import free_port, scrape


def request(route: str, model: str = "m") -> None:
    with ragtrace.rag_pipeline("qa", version="v1", route=route):
        with ragtrace.retrieve(data_source="kb") as r:
            r.record([{"id": "a", "score": 0.8, "content": "x"}])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks[0])
        with ragtrace.generate(model=model) as g:
            g.record("see [1]")


def label_values(text: str, label: str) -> set[str]:
    """The values of ``label`` on the scrape (a family's points without it carry "": left out)."""
    return set(re.findall(label + r'="([^"]*)"', text)) - {""}


@pytest.mark.heavy
def test_20000_requests_with_a_unique_route_keep_memory_and_the_scrape_bounded(caplog):
    """main: +13 MB of ragtrace's own label sets per 20k requests and a 52 MB scrape of 202k lines,
    most of them in the SDK's overflow series."""
    port = free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{port}", tracer_provider=TracerProvider())
    limit = config.current().max_label_values
    caplog.set_level(logging.WARNING, logger="ragtrace")
    for i in range(18_000):
        request(f"/item/{i}")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(18_000, 20_000):
            request(f"/item/{i}")
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown  # main: about 1.3 MB per 2,000 requests, still growing
    found = otel_metrics.instruments(config.current())
    assert len(found.kept[names.RAG_PIPELINE_ROUTE]) == limit and len(found.seen) <= limit + 1
    text = scrape(port)
    assert len(text) < 3_000_000, len(text)  # a few MB at most (main: 52 MB)
    routes = label_values(text, "rag_pipeline_route")
    assert len(routes) == limit + 1 and "other" in routes and {f"/item/{i}" for i in range(limit)} <= routes
    runs = [ln for ln in text.splitlines() if ln.startswith("rag_pipeline_runs_total{")]
    assert sum(float(ln.rsplit(" ", 1)[1]) for ln in runs) == 20_000  # folded, never dropped
    (other,) = [ln for ln in runs if 'rag_pipeline_route="other"' in ln]
    assert other.endswith(f" {20_000 - limit}.0")
    assert "otel_metric_overflow" not in text
    warned = [r.getMessage() for r in caplog.records if "distinct values" in r.getMessage()]
    assert len(warned) == 1 and "rag.pipeline.route" in warned[0] and "max_label_values" in warned[0], warned


def test_each_app_label_folds_on_its_own_and_the_limit_is_configurable(caplog):
    port = free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{port}", max_label_values=3)
    caplog.set_level(logging.WARNING, logger="ragtrace")
    for i in range(5):
        request(f"/r{i}", model=f"model-{i}")
    text = scrape(port)
    assert label_values(text, "rag_pipeline_route") == {"/r0", "/r1", "/r2", "other"}
    assert label_values(text, "gen_ai_request_model") == {"model-0", "model-1", "model-2", "other"}
    assert label_values(text, "gen_ai_workflow_name") == {"qa"}  # one value: never folded
    warned = sorted(r.getMessage().split()[3] for r in caplog.records if "distinct values" in r.getMessage())
    assert warned == ["gen_ai.request.model", "rag.pipeline.route"]
    for bad in (0, -1, True, "3"):
        with pytest.raises(ValueError, match="max_label_values"):
            ragtrace.configure(max_label_values=bad)


def test_ragtraces_own_provider_caps_each_instruments_label_sets():
    """Past the fold (a high max_label_values) the SDK's cardinality limit on ragtrace's own
    provider holds: CARDINALITY_LIMIT label sets per instrument, then one overflow series."""
    port = free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{port}", max_label_values=10_000)
    for i in range(prometheus_endpoint.CARDINALITY_LIMIT + 100):
        request(f"/item/{i}")
    text = scrape(port)
    runs = [ln for ln in text.splitlines() if ln.startswith("rag_pipeline_runs_total{")]
    assert len(runs) == prometheus_endpoint.CARDINALITY_LIMIT + 1
    assert sum('otel_metric_overflow="true"' in ln for ln in runs) == 1
    assert sum(float(ln.rsplit(" ", 1)[1]) for ln in runs) == prometheus_endpoint.CARDINALITY_LIMIT + 100
