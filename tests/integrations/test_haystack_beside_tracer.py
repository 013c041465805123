"""ragtrace beside the app's own Haystack tracer: opentelemetry-haystack's ``OpenTelemetryTracer``
in Haystack's ``actual_tracer`` slot (``enable_tracing``), as Haystack's docs set it up, and a
tracer of the app's own that checks what Haystack hands it.

The app's tracer keeps the slot and gets every span and tag it got without ragtrace (content tags
only when the app turned content tracing on, as before); ragtrace's stages sit inside the app's
component spans, and its figures are the same as without the app's tracer.
"""

from __future__ import annotations

import contextlib
import os

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

pytest.importorskip("haystack", reason="haystack-ai 3.x needs Python >= 3.11; installed for the 3.11 run")
pytest.importorskip("haystack_integrations.tracing.opentelemetry", reason="opentelemetry-haystack comes with haystack-ai (3.11 run)")

from haystack import tracing
from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace

from .test_haystack import inputs, metrics, rag

pytestmark = pytest.mark.heavy


@pytest.fixture
def apps_tracer():
    """The app's OpenTelemetry provider and Haystack tracer (``enable_tracing``), undone after."""
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("app")))
    content = tracing.tracer.is_content_tracing_enabled
    yield exporter
    tracing.tracer.is_content_tracing_enabled = content
    tracing.disable_tracing()
    provider.shutdown()


def _apps_spans(exporter) -> list[tuple[str, dict]]:
    """The app's spans as it sees them: names and attributes, in order."""
    return [(s.name, dict(s.attributes)) for s in exporter.get_finished_spans()]


@pytest.mark.parametrize("content_tracing", [False, True])
def test_the_apps_tracer_gets_what_it_got_without_ragtrace(spans, apps_tracer, content_tracing):
    tracing.tracer.is_content_tracing_enabled = content_tracing
    off_output = rag().run(inputs())
    off = _apps_spans(apps_tracer)
    apps_tracer.clear()
    ragtrace.instrument("haystack")
    try:
        on_output = rag().run(inputs())
    finally:
        ragtrace.uninstrument("haystack")
    on = _apps_spans(apps_tracer)
    assert on_output == off_output
    assert on == off
    assert [name for name, _ in on] == ["haystack.component.run"] * 3 + ["haystack.pipeline.run"]
    assert all(("haystack.component.input" in attributes) is content_tracing for name, attributes in on if name == "haystack.component.run")
    assert tracing.tracer.actual_tracer.__class__ is OpenTelemetryTracer  # the slot is still the app's


def test_ragtraces_stages_sit_in_the_apps_component_spans(spans, apps_tracer):
    ragtrace.instrument("haystack")
    try:
        rag().run(inputs())
    finally:
        ragtrace.uninstrument("haystack")
    apps = {s.attributes.get("haystack.component.name", s.name): s for s in apps_tracer.get_finished_spans()}
    root = spans.one("pipeline")
    assert root.parent.span_id == apps["haystack.pipeline.run"].context.span_id
    for stage, component in (("retrieve", "retriever"), ("assemble", "prompt_builder"), ("generate", "llm")):
        ours = spans.one(stage)
        assert ours.parent.span_id == apps[component].context.span_id
        assert apps[component].parent.span_id == root.context.span_id
    m = metrics(root)
    assert (m["retrieved"], m["in_context"], m["cited"], m["inclusion_method"]) == (3, 3, 1, "recorded")


def test_the_apps_tracer_gets_its_own_span_as_parent(spans):
    """Haystack passes the span ``trace`` yielded as the next one's ``parent_span``: the app's
    tracer gets its own span back, never ragtrace's."""
    seen: list[object] = []

    class Mine(tracing.Span):
        def set_tag(self, key, value):
            pass

    class MyTracer(tracing.Tracer):
        @contextlib.contextmanager
        def trace(self, operation_name, tags=None, parent_span=None):
            seen.append(parent_span)
            yield Mine()

        def current_span(self):
            return None

    tracing.enable_tracing(MyTracer())
    ragtrace.instrument("haystack")
    try:
        rag().run(inputs())
    finally:
        ragtrace.uninstrument("haystack")
        tracing.disable_tracing()
    assert len(seen) == 4 and seen[0] is None
    assert all(type(parent) is Mine for parent in seen[1:])
    assert metrics(spans.one("pipeline"))["cited"] == 1
