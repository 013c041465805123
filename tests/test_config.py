"""configure(): exporters, providers, precedence, and clear errors at set-up time."""

from __future__ import annotations

import json
import logging
import threading

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace
from ragtrace._internal.setup import config
from ragtrace._internal import names


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"exporter": "zipkin"}, ValueError),
        ({"exporter": "jsonl:"}, ValueError),
        ({"exporter": 42}, TypeError),
        ({"capture_content": "everything"}, ValueError),
        ({"capture_content": True}, TypeError),
        ({"service_name": 3}, TypeError),
        ({"tracer_provider": "provider"}, TypeError),
        ({"meter_provider": object()}, TypeError),
        ({"redactor": "not callable"}, TypeError),
        ({"openinference": "yes"}, TypeError),
        ({"max_documents": -1}, ValueError),
        ({"tokenizer": object()}, TypeError),
        ({"exporter": "console", "tracer_provider": TracerProvider()}, ValueError),
    ],
)
def test_bad_arguments_raise_at_the_call_site(kwargs, error):
    with pytest.raises(error):
        ragtrace.configure(**kwargs)
    assert config.current() == config.Config()  # nothing half-applied


def test_exporter_object_gets_a_provider_installed_globally(global_provider_slot):
    exporter = InMemorySpanExporter()
    provider = ragtrace.configure(service_name="svc", exporter=exporter, batch=False)
    assert trace.get_tracer_provider() is provider
    with ragtrace.retrieve("q") as r:
        r.record(["a"])
    (span,) = exporter.get_finished_spans()
    assert span.resource.attributes["service.name"] == "svc"


def test_existing_global_provider_is_never_replaced(global_provider_slot, caplog):
    app_exporter = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(app_exporter))
    trace.set_tracer_provider(app_provider)
    ours = InMemorySpanExporter()
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        provider = ragtrace.configure(exporter=ours, batch=False)
    assert trace.get_tracer_provider() is app_provider
    assert provider is not app_provider
    assert "already has a TracerProvider" in caplog.text
    with app_provider.get_tracer("app").start_as_current_span("request"):
        with ragtrace.retrieve("q") as r:
            r.record(["a"])
    (span,) = ours.get_finished_spans()
    (app_span,) = app_exporter.get_finished_spans()
    assert span.parent.span_id == app_span.context.span_id  # still one trace


def test_without_configure_the_global_provider_is_used(global_provider_slot):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with ragtrace.rag_pipeline("global"):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["invoke_workflow global"]


def test_explicit_tracer_provider_wins(spans):
    other = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(other))
    with ragtrace.retrieve("q", tracer_provider=provider) as r:
        r.record(["x"])
    assert len(other.get_finished_spans()) == 1
    assert spans.all() == []


def test_jsonl_exporter_string(tmp_path, global_provider_slot):
    path = tmp_path / "traces.jsonl"
    provider = ragtrace.configure(exporter=f"jsonl:{path}")
    with ragtrace.rag_pipeline("file"):
        pass
    provider.force_flush()
    request = json.loads(path.read_text().splitlines()[0])
    (span,) = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert span["name"] == "invoke_workflow file"


def test_otlp_exporter_string(global_provider_slot, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    provider = ragtrace.configure(exporter="otlp")
    processor = provider._active_span_processor._span_processors[0].inner  # ragtrace's swappable processor
    exporter = processor._batch_processor._exporter
    assert type(exporter).__name__ == "OTLPSpanExporter"
    assert exporter._endpoint == "http://127.0.0.1:9/v1/traces"
    provider.shutdown()


def test_console_exporter_prints_a_tree(global_provider_slot, capsys):
    ragtrace.configure(exporter="console")
    with ragtrace.rag_pipeline("console-demo"):
        with ragtrace.retrieve("q", data_source="kb") as r:
            r.record(["one", "two"])
    out = capsys.readouterr().out
    assert "invoke_workflow console-demo" in out
    assert "└─ retrieval kb" in out
    assert "2 chunks" in out


def test_capture_content_precedence(monkeypatch):
    monkeypatch.setenv("RAGTRACE_CAPTURE_CONTENT", "redact")
    config.reset()
    assert config.current().content.mode == "redact"
    ragtrace.configure(capture_content="full")
    assert config.current().content.mode == "full"
    ragtrace.configure()
    assert config.current().content.mode == "redact"


def test_pipeline_override_of_content_mode(spans):
    with ragtrace.rag_pipeline("p", query="secret question", capture_content="redact"):
        with ragtrace.retrieve("secret question") as r:
            r.record(["secret chunk"])
    for span in spans.all():
        assert not any("secret" in str(v) for v in span.attributes.values())
    assert spans.one("pipeline").attributes["rag.content_mode"] == "redact"


def test_custom_exporter_subclass_is_accepted(global_provider_slot):
    class Dropping(SpanExporter):
        def export(self, spans):
            from opentelemetry.sdk.trace.export import SpanExportResult

            return SpanExportResult.SUCCESS

    provider = ragtrace.configure(exporter=Dropping(), batch=False)
    assert isinstance(provider, TracerProvider)


def test_stages_inherit_the_pipeline_tracer_provider(spans):
    own = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(own))
    with ragtrace.rag_pipeline("own", tracer_provider=provider):
        with ragtrace.retrieve("q") as r:  # no provider of its own: the pipeline's
            r.record(["a", "b"])
    with ragtrace.retrieve("q") as r:  # outside the pipeline: the configured one again
        r.record(["c"])
    assert sorted(s.attributes[names.RAG_STAGE] for s in own.get_finished_spans()) == ["pipeline", "retrieve"]
    assert [s.attributes[names.RAG_STAGE] for s in spans.all()] == ["retrieve"]


def _export_threads() -> int:
    return sum(1 for t in threading.enumerate() if "BatchSpan" in t.name or "OtelBatch" in t.name)


def test_configure_called_fifty_times_leaves_one_provider_and_one_export_thread(global_provider_slot, caplog):
    before = _export_threads()
    exporters = [InMemorySpanExporter() for _ in range(50)]
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        providers = {id(ragtrace.configure(service_name="svc", exporter=e)) for e in exporters}
    assert len(providers) == 1
    assert _export_threads() - before == 1
    assert "already has a TracerProvider" not in caplog.text  # that provider is ragtrace's own
    assert all(e._stopped for e in exporters[:-1]) and not exporters[-1]._stopped  # the old ones were shut down
    with ragtrace.retrieve("q") as r:
        r.record(["a"])
    trace.get_tracer_provider().force_flush()
    assert len(exporters[-1].get_finished_spans()) == 1
    assert not any(e.get_finished_spans() for e in exporters[:-1])


def test_reconfiguring_flushes_what_the_old_exporter_held(global_provider_slot):
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    ragtrace.configure(exporter=first)  # batched: the span waits in the processor
    with ragtrace.retrieve("q") as r:
        r.record(["a"])
    ragtrace.configure(exporter=second)
    assert len(first.get_finished_spans()) == 1


def test_a_new_service_name_gets_a_new_provider_and_no_app_warning(global_provider_slot, caplog):
    first = ragtrace.configure(service_name="one", exporter=InMemorySpanExporter(), batch=False)
    exporter = InMemorySpanExporter()
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        second = ragtrace.configure(service_name="two", exporter=exporter, batch=False)
    assert second is not first and trace.get_tracer_provider() is first  # the global stays: OTel allows one
    assert "already has a TracerProvider" not in caplog.text
    with ragtrace.retrieve("q") as r:
        r.record(["a"])
    (span,) = exporter.get_finished_spans()
    assert span.resource.attributes["service.name"] == "two"


def test_a_private_own_provider_is_shut_down_when_replaced(global_provider_slot, caplog):
    trace.set_tracer_provider(TracerProvider())  # the app's
    exporters = [InMemorySpanExporter() for _ in range(3)]
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        for exporter in exporters:
            ragtrace.configure(exporter=exporter, batch=False)
        ragtrace.configure(tracer_provider=TracerProvider())
    assert all(e._stopped for e in exporters)
    assert caplog.text.count("already has a TracerProvider") == 1  # the app's provider, said once


def test_max_open_roots_precedence_and_errors(monkeypatch):
    """``max_open_roots``: argument > ``RAGTRACE_MAX_OPEN_ROOTS`` > 256; anything but a positive int
    raises at the call site."""
    assert config.current().max_open_roots == 256
    monkeypatch.setenv("RAGTRACE_MAX_OPEN_ROOTS", "12")
    ragtrace.configure()
    assert config.current().max_open_roots == 12
    ragtrace.configure(max_open_roots=3)
    assert config.current().max_open_roots == 3
    for bad in (0, -1, True, 2.5, "4"):
        with pytest.raises(ValueError, match="max_open_roots"):
            ragtrace.configure(max_open_roots=bad)
    monkeypatch.setenv("RAGTRACE_MAX_OPEN_ROOTS", "many")
    with pytest.raises(ValueError, match="RAGTRACE_MAX_OPEN_ROOTS"):
        ragtrace.configure()
