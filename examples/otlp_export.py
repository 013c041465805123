"""Sending ragtrace's spans over OTLP/HTTP to a Collector or a backend (Jaeger, Tempo, Phoenix...).

``configure(exporter="otlp")`` uses OpenTelemetry's own OTLP/HTTP exporter, so the standard
variables apply: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default http://localhost:4318; spans go to
``{endpoint}/v1/traces``), ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``...
The figures travel on the root span as ``rag.metrics.*`` attributes, so any backend can chart them.

    pip install 'ragtrace[otlp]'
    docker run -p 4318:4318 otel/opentelemetry-collector   # or: phoenix serve (port 6006)
    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 python examples/otlp_export.py
"""

from __future__ import annotations

import os

import ragtrace

HITS = [
    {"id": "runbook-restart", "score": 0.87, "content": "Restart the worker with systemctl restart acme-worker."},
    {"id": "runbook-logs", "score": 0.74, "content": "Worker logs are in /var/log/acme/worker.log."},
    {"id": "runbook-disk", "score": 0.41, "content": "Free disk space with acme-cli cleanup."},
]


def answer(question: str) -> dict:
    with ragtrace.rag_pipeline("ops-assistant", query=question, version="2024-06") as run:
        with ragtrace.retrieve(question, data_source="runbooks", top_k=3) as r:
            r.record(HITS)
        with ragtrace.assemble(max_tokens=300) as ctx:
            for hit in HITS[:2]:
                ctx.add(hit)
            prompt = ctx.render(question=question)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record("Run systemctl restart acme-worker [1], then check the log [2].", input_tokens=61, output_tokens=15)
    return run.metrics


if __name__ == "__main__":
    provider = ragtrace.configure(service_name="ops-assistant", exporter="otlp")
    metrics = answer("How do I restart a stuck worker?")
    provider.force_flush(timeout_millis=10_000)  # the batch processor sends in the background
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318").rstrip("/")
    target = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{base}/v1/traces")
    print(f"spans flushed to {target} (export errors are logged by the exporter)")
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in metrics.items()})
