"""configure(metrics="prometheus:HOST:PORT"): a real scrape endpoint on loopback, read over HTTP."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from opentelemetry.sdk.metrics import MeterProvider

import ragtrace
from ragtrace._internal.setup import config, prometheus_endpoint


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
    assert prometheus_endpoint.ports("prometheus:[::1]:9464") == ("::1", 9464, 9464)
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


def runs_total(port: int) -> float:
    """rag_pipeline_runs_total summed over its series on the endpoint at ``port`` (0 when absent)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in scrape(port).splitlines() if line.startswith("rag_pipeline_runs_total{"))


def test_a_taken_port_leaves_the_live_endpoint_serving_and_the_config_unchanged():
    """Bind first, then swap, then close: a failed move keeps the old endpoint and its provider."""
    live = free_port()
    ragtrace.configure(service_name="support", metrics=f"prometheus:127.0.0.1:{live}")
    one_run()
    before = config.current()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ValueError, match="cannot listen"):
            ragtrace.configure(service_name="support", metrics=f"prometheus:127.0.0.1:{taken.getsockname()[1]}")
    assert config.current() is before
    assert runs_total(live) == 1.0
    one_run()  # the provider it still points at records, and the old port serves it
    assert runs_total(live) == 2.0


def test_a_missing_exporter_extra_fails_before_the_endpoint_moves(monkeypatch):
    live, other = free_port(), free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{live}")
    before = config.current()
    with pytest.raises(ValueError):
        ragtrace.configure(exporter="jsonl:", metrics=f"prometheus:127.0.0.1:{other}")
    assert config.current() is before and prometheus_endpoint._current.port == live
    with pytest.raises(urllib.error.URLError):
        scrape(other)


def test_a_new_resource_on_the_same_port_keeps_the_socket():
    port = free_port()
    ragtrace.configure(service_name="first", metrics=f"prometheus:127.0.0.1:{port}")
    server = prometheus_endpoint._current.server
    ragtrace.configure(service_name="second", metrics=f"prometheus:127.0.0.1:{port}")
    assert prometheus_endpoint._current.server is server
    one_run()
    text = scrape(port)
    assert 'service_name="second"' in text and 'service_name="first"' not in text and runs_total(port) == 1.0


def test_a_range_serves_on_its_first_free_port():
    base = free_range(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base))
        taken.listen()
        ragtrace.configure(metrics=f"prometheus:127.0.0.1:{base}-{base + 2}")
        assert prometheus_endpoint._current.port == base + 1
    one_run()
    assert runs_total(base + 1) == 1.0
    with pytest.raises(ValueError, match="FIRST-LAST"):
        ragtrace.configure(metrics=f"prometheus:127.0.0.1:{base + 2}-{base}")


def free_range(size: int) -> int:
    """The first of ``size`` consecutive free loopback ports."""
    for _ in range(200):
        base = free_port()
        if base + size >= 65536:
            continue
        probes = [socket.socket() for _ in range(size)]
        try:
            for offset, probe in enumerate(probes):
                probe.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise AssertionError("no free port range")
