"""ragtrace's own TracerProvider, for ``configure(exporter=...)``: the SpanExporter an exporter
string names, the one provider it exports through, and how that provider is replaced or retired.

``config`` decides when (each ``configure()``); this module keeps reconfiguring from piling up
providers and export threads, and never replaces a global provider the application installed.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from ..core import guard


def span_exporter(exporter: str | SpanExporter) -> tuple[SpanExporter, bool]:
    """The SpanExporter for ``configure(exporter=...)`` and whether to batch it by default."""
    if isinstance(exporter, SpanExporter):
        return exporter, True
    if not isinstance(exporter, str):
        raise TypeError(f"exporter must be 'console', 'otlp', 'jsonl:PATH', 'phoenix:URL' or a SpanExporter, got {type(exporter).__name__}")
    if exporter == "console":
        from ...exporters.console import ConsoleTreeExporter

        return ConsoleTreeExporter(), False
    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as error:
            raise ValueError("exporter='otlp' needs the otlp extra: pip install 'ragtrace[otlp]'") from error
        return OTLPSpanExporter(), True
    if exporter.startswith("jsonl:"):
        path = exporter[len("jsonl:") :]
        if not path:
            raise ValueError("exporter='jsonl:PATH' needs a file path")
        from ...exporters.jsonl import JsonLinesExporter

        return JsonLinesExporter(path), True
    if exporter.startswith("phoenix:"):
        url = exporter[len("phoenix:") :] or os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or "http://127.0.0.1:6006"
        from ...exporters.phoenix import PhoenixExporter

        return PhoenixExporter(url), True
    raise ValueError(f"unknown exporter {exporter!r}: use 'console', 'otlp', 'jsonl:PATH', 'phoenix:URL' or a SpanExporter")


class _Exporting(SpanProcessor):
    """The one span processor of ragtrace's own provider. Reconfiguring swaps the processor it
    forwards to and shuts the old one down, so 50 configure() calls leave one provider and one
    export thread, not 50."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: Any) -> None:
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


@dataclass
class _Own:
    provider: TracerProvider
    exporting: _Exporting


_own: _Own | None = None
_own_lock = threading.Lock()
_made: weakref.WeakSet[TracerProvider] = weakref.WeakSet()  # every provider ragtrace created


def provider_for(resource: Resource, processor: SpanProcessor) -> TracerProvider:
    """ragtrace's provider for a new exporter: the current one with its processor swapped when
    the resource is unchanged, else a new one (the old one shut down unless it is the global)."""
    global _own
    with _own_lock:
        own = _own
        if own is not None and own.provider.resource == resource:
            old, own.exporting.inner = own.exporting.inner, processor
            old.shutdown()  # flushes what it holds
        else:
            provider = TracerProvider(resource=resource)
            exporting = _Exporting(processor)
            provider.add_span_processor(exporting)
            _made.add(provider)
            _own, previous = _Own(provider, exporting), own
            if previous is not None:
                _shut_down_unless_global(previous.provider)
        _install_globally(_own.provider)
        return _own.provider


def retire(*, even_global: bool = False) -> None:
    """ragtrace no longer exports through its own provider: shut it down (a global one the app may
    use stays, unless ``reset()`` for tests)."""
    global _own
    with _own_lock:
        own, _own = _own, None
    if own is not None:
        if even_global:
            own.provider.shutdown()
        else:
            _shut_down_unless_global(own.provider)


def _shut_down_unless_global(provider: TracerProvider) -> None:
    if trace.get_tracer_provider() is not provider:
        provider.shutdown()


def _install_globally(provider: TracerProvider) -> None:
    current = trace.get_tracer_provider()
    if current is provider:
        return
    if isinstance(current, trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    elif current in _made:
        guard.warn_once(
            "own-global-resource",
            "service_name changed after ragtrace installed its TracerProvider globally; the global "
            "provider keeps the old resource (OpenTelemetry allows one global provider) and ragtrace's "
            "spans use the new one",
        )
    else:
        guard.warn_once(  # once per provider of the app's, however often configure() runs
            f"app-provider:{id(current)}",
            "the application already has a TracerProvider; ragtrace's exporter is used for "
            "ragtrace's spans only and the application's provider is left untouched",
        )


guard.new_locks_after_fork(__name__, "_own_lock")
