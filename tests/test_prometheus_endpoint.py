"""configure(metrics="prometheus:HOST:PORT"): a real scrape endpoint on loopback, read over HTTP."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from opentelemetry.sdk.metrics import MeterProvider

import ragtrace
from ragtrace._internal import config, prometheus_endpoint


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def one_run(version: str = "v1") -> None:
    with ragtrace.rag_pipeline("qa", version=version):
        with ragtrace.retrieve(data_source="kb") as r:
            r.record([{"id": "a", "score": 0.8, "content": "x"}])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks[0])
        with ragtrace.generate(model="m") as g:
            g.record("see [1]")


def test_the_endpoint_serves_ragtrace_metrics_and_closes_when_configured_away():
    port = free_port()
    ragtrace.configure(service_name="support", metrics=f"prometheus:127.0.0.1:{port}")
    provider = config.current().meter_provider
    one_run()
    text = scrape(port)
    assert 'rag_pipeline_runs_total{' in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("rag_pipeline_runs_total{")]
    assert 'rag_metrics_status="measured"' in line and 'rag_pipeline_version="v1"' in line and line.endswith(" 1.0")
    assert 'rag_recall_proxy_bucket{' in text and 'service_name="support"' in text  # the resource: target_info only
    ragtrace.configure(service_name="support", metrics=f"prometheus:127.0.0.1:{port}")  # same address: kept
    assert config.current().meter_provider is provider
    one_run()
    assert [ln for ln in scrape(port).splitlines() if ln.startswith("rag_pipeline_runs_total{")][0].endswith(" 2.0")
    ragtrace.configure()  # no metrics=: the port closes
    with pytest.raises(urllib.error.URLError):
        scrape(port)


def test_a_new_address_moves_the_endpoint():
    first, second = free_port(), free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{first}")
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{second}")
    one_run("v9")
    assert 'rag_pipeline_version="v9"' in scrape(second)
    with pytest.raises(urllib.error.URLError):
        scrape(first)


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("prometheus:9464", ValueError),
        ("prometheus:127.0.0.1:", ValueError),
        ("prometheus:127.0.0.1:70000", ValueError),
        ("otlp:127.0.0.1:9464", ValueError),
        (9464, TypeError),
    ],
)
def test_a_bad_spec_raises_at_configure(spec, error):
    with pytest.raises(error):
        ragtrace.configure(metrics=spec)
    assert prometheus_endpoint._current is None


def test_ipv6_brackets_and_exclusive_with_meter_provider():
    assert prometheus_endpoint.address("prometheus:[::1]:9464") == ("::1", 9464)
    with pytest.raises(ValueError, match="not both"):
        ragtrace.configure(metrics="prometheus:127.0.0.1:9464", meter_provider=MeterProvider())


def test_a_taken_port_raises_and_changes_nothing():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = config.current()
        with pytest.raises(ValueError, match="cannot listen"):
            ragtrace.configure(capture_content="redact", metrics=f"prometheus:127.0.0.1:{port}")
        assert config.current() is before
