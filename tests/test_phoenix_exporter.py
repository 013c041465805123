"""PhoenixExporter when Phoenix is down: the app is unaffected, the failure is logged once, and the
annotations wait in the bounded queue (oldest dropped first). The round trip through a running
Phoenix is in tests/backend/test_phoenix_annotations.py."""

from __future__ import annotations

import json
import logging
import socket
import sys
import time

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

import ragtrace
from loopback import QuietHandler, serve
from ragtrace._internal import names
from ragtrace.exporters import PhoenixExporter


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_pipeline(n: int) -> str:
    with ragtrace.rag_pipeline("down", query="q") as run:
        with ragtrace.retrieve("q") as r:
            r.record([{"id": f"c{n}", "score": 0.5, "content": "text"}])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks)
            prompt = ctx.render("{context}\nQ: {question}", question="q")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            answer = "An answer [1]."  # what the app's model returned, handed back to the app
            g.record(answer)
    assert run.metrics["cited"] == 1
    return answer


FIGURE_COUNT = 2 * len(names.ALL_METRICS) + len(names.PROXY_METRICS)  # root and answer, the proxies on the trace
PER_PIPELINE = FIGURE_COUNT + 2  # and one document's two marks


@pytest.fixture
def down(caplog: pytest.LogCaptureFixture):
    exporter = PhoenixExporter(f"http://127.0.0.1:{closed_port()}", project="p", timeout=0.5, max_queued=3 * PER_PIPELINE)
    provider = TracerProvider(resource=Resource.create(exporter.resource_attributes))
    processor = BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
    provider.add_span_processor(processor)
    ragtrace.configure(tracer_provider=provider)
    caplog.set_level(logging.WARNING, logger="ragtrace")
    yield exporter, provider
    provider.shutdown()


def test_a_phoenix_that_is_down_never_reaches_the_app(down, caplog: pytest.LogCaptureFixture) -> None:
    exporter, provider = down
    started = time.perf_counter()
    answers = [one_pipeline(n) for n in range(2)]
    took = time.perf_counter() - started
    assert answers == ["An answer [1]."] * 2
    assert took < 5.0  # the app's thread never waits on Phoenix (exports run on the processor's thread)
    for _ in range(3):  # three exports, all failing
        one_pipeline(9)
        assert provider.force_flush(30_000) in (True, False)
    warnings = [r.getMessage() for r in caplog.records if r.name == "ragtrace" and "Phoenix" in r.getMessage()]
    assert len([w for w in warnings if "can't take annotations" in w]) == 1, warnings
    assert len([w for w in warnings if "OTLP export to Phoenix" in w]) == 1, warnings
    # kept for a later export, within the bound: 5 pipelines' worth offered, 3 kept, the oldest gone
    assert exporter.queued_annotations == 3 * PER_PIPELINE
    assert exporter.dropped_annotations == 2 * PER_PIPELINE
    assert [r for r in caplog.records if "annotation queue is full" in r.getMessage()].__len__() == 1
    assert exporter.sent_annotations == 0


def test_dropped_annotations_are_an_otel_counter_on_the_apps_meter_provider(down) -> None:
    exporter, provider = down
    reader = InMemoryMetricReader()
    ragtrace.configure(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    for n in range(5):  # 5 pipelines' worth offered to a queue of 3, on one failing export each
        one_pipeline(n)
        provider.force_flush(30_000)
    data = reader.get_metrics_data()
    points = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == names.METRIC_PHOENIX_DROPPED_ANNOTATIONS
        for point in metric.data.data_points
    ]
    assert exporter.dropped_annotations == 2 * PER_PIPELINE
    assert [p.value for p in points] == [exporter.dropped_annotations]
    reader.shutdown()


def test_export_returns_failure_and_never_raises(down) -> None:
    exporter, provider = down
    one_pipeline(0)
    provider.force_flush(30_000)
    assert exporter.export([]) in (SpanExportResult.SUCCESS, SpanExportResult.FAILURE)
    exporter.shutdown()
    assert exporter.export([]) is SpanExportResult.FAILURE


@pytest.mark.parametrize("bad", ["phoenix:localhost:6006", "phoenix:ftp://x"])
def test_a_bad_phoenix_url_is_refused_at_configure(bad: str) -> None:
    with pytest.raises(ValueError, match="http"):
        ragtrace.configure(exporter=bad)


def test_the_project_goes_into_the_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHOENIX_PROJECT_NAME", "from-env")
    assert PhoenixExporter(f"http://127.0.0.1:{closed_port()}").resource_attributes == {"openinference.project.name": "from-env"}
    assert PhoenixExporter(f"http://127.0.0.1:{closed_port()}", project="given").resource_attributes == {"openinference.project.name": "given"}
    monkeypatch.delenv("PHOENIX_PROJECT_NAME")
    assert PhoenixExporter(f"http://127.0.0.1:{closed_port()}").resource_attributes == {}


def test_without_the_extra_configure_says_which_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "phoenix.client", None)  # as if arize-phoenix-client were not installed
    with pytest.raises(ValueError, match=r"pip install 'ragtrace\[phoenix\]'"):
        ragtrace.configure(exporter="phoenix:http://127.0.0.1:6006")


def test_configure_puts_the_exporters_project_in_its_resource(global_provider_slot) -> None:
    exporter = PhoenixExporter(f"http://127.0.0.1:{closed_port()}", project="support-bot", timeout=0.5)
    provider = ragtrace.configure(service_name="svc", exporter=exporter)
    assert provider is not None
    assert provider.resource.attributes["openinference.project.name"] == "support-bot"
    assert provider.resource.attributes["service.name"] == "svc"


class FlakyPhoenix(QuietHandler):
    """Phoenix's OTLP and annotation endpoints on loopback: annotation writes answer 503 while
    ``down`` is set, then 202 and are kept in ``received`` (path, annotation names)."""

    down = True
    received: list[tuple[str, list[str]]] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.body()
        if self.path == "/v1/traces":
            self.reply(b"", "application/x-protobuf")
            return
        if self.down:
            self.send_error(503)
            return
        self.received.append((self.path, [a["name"] for a in json.loads(body)["data"]]))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_annotations_kept_while_phoenix_refuses_go_out_when_it_is_back(caplog: pytest.LogCaptureFixture) -> None:
    FlakyPhoenix.down, FlakyPhoenix.received = True, []
    for url in serve(FlakyPhoenix):
        exporter = PhoenixExporter(url, project="p", timeout=5)
        provider = TracerProvider(resource=Resource.create(exporter.resource_attributes))
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
        ragtrace.configure(tracer_provider=provider)
        caplog.set_level(logging.WARNING, logger="ragtrace")
        one_pipeline(1)
        provider.force_flush(30_000)
        assert exporter.queued_annotations == PER_PIPELINE and FlakyPhoenix.received == []
        FlakyPhoenix.down = False
        one_pipeline(2)
        provider.force_flush(30_000)
        assert exporter.queued_annotations == 0 and exporter.sent_annotations == 2 * PER_PIPELINE
        sent = [name for _path, batch in FlakyPhoenix.received for name in batch]
        assert len(sent) == 2 * PER_PIPELINE
        paths = {path for path, _batch in FlakyPhoenix.received}
        assert paths == {"/v1/span_annotations", "/v1/document_annotations", "/v1/trace_annotations"}
        provider.shutdown()
    assert len([r for r in caplog.records if "can't take annotations (HTTPStatusError)" in r.getMessage()]) == 1
