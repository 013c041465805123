"""``ragtrace report`` on what a real Phoenix returns: SDK -> OTLP/HTTP -> Phoenix -> /spans/otlpv1 -> report.

tests/cli/data/phoenix_otlpv1.json is a saved page of the same endpoint; this test proves the shape
still holds against the pinned Phoenix release (see tests/backend/phoenix.py).
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from backend.phoenix import PROJECT_NAME_ATTRIBUTE, PhoenixServer

from .helpers import pipeline

pytestmark = pytest.mark.heavy


def test_report_on_a_live_phoenix_page(phoenix_server: PhoenixServer, cli, tmp_path, json_decoder):
    phoenix = phoenix_server
    project = f"ragtrace-cli-live-{json_decoder}"  # one project per decoder: the server is shared
    provider = TracerProvider(resource=Resource.create({PROJECT_NAME_ATTRIBUTE: project, "service.name": "cli-live"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix.otlp_http_endpoint)))
    online = [
        pipeline(provider, "support-qa", "What is BM25?", ["d1", "d2", "d3", "d4"], ["d1", "d2", "d3"], "BM25 [1], dense [3].", top_k=4, version="v2"),
        pipeline(provider, "support-qa", "How do rerankers work?", ["d5", "d6"], ["d5"], "No idea.", top_k=2, version="v2"),
    ]
    provider.force_flush()
    provider.shutdown()
    phoenix.wait_for_spans(project, 8, otlp=True)
    page = phoenix.client.request("GET", phoenix.client._project_path(project) + "/spans/otlpv1", [("limit", 100)])
    path = tmp_path / "page.json"
    path.write_text(json.dumps(page, indent=1))

    result = cli("report", "--json", path)
    assert result.code == 0 and result.err == ""
    rows = {row["query"]: row for row in result.json()["traces"]}
    for query, metrics in zip(("What is BM25?", "How do rerankers work?"), online):
        row = rows[query]
        assert row["recorded_mismatch"] == []
        for figure, value in metrics.items():
            assert row[figure] == value, (query, figure)
    assert rows["How do rerankers work?"]["citations"] == "none"
