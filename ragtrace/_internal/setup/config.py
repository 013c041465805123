"""``configure()``, the frozen active configuration, and tracer/meter resolution.

Precedence is argument > environment > default. ``configure()`` is optional: without it ragtrace
uses the application's global providers. It never replaces a TracerProvider the application
already installed; it keeps its own provider private instead and says so.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as _metrics_api
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from ..core import guard, keyed
from . import otel_metrics, own_provider, prometheus_endpoint
from .slots import (
    INSTRUMENTATION_NAME,
    READ_SLOTS,
    UNSET_METER_PROVIDERS,
    VERSION,
    global_meter_provider,
    global_tracer_provider_set,
    meter_provider_unset,
)
from .redaction import (
    ContentPolicy,
    Redactor,
    check_mode,
    check_sample,
    mode_from_environment,
    sample_from_environment,
    sampled_for_content,
)
from ..core.tokens import DEFAULT_TOKENIZER, Tokenizer

_MeterProvider = metrics.MeterProvider  # configure()'s ``metrics=`` argument shadows the module


@dataclass(frozen=True)
class Config:
    """The active configuration. Replaced as a whole by ``configure()``, never mutated."""

    tracer_provider: trace.TracerProvider | None = None
    meter_provider: metrics.MeterProvider | None = None
    content: ContentPolicy = field(default_factory=ContentPolicy)
    full_content_sample: float = 0.0  # share of pipelines that get full content instead (at the root)
    openinference: bool = True
    max_documents: int = 10
    max_content_chars: int = 4000
    tokenizer: Tokenizer = DEFAULT_TOKENIZER
    # results of one retrieval (or rerank) that are recorded; the rest are counted only, so a
    # streamed cursor of a million rows costs ragtrace this many items, never every row
    max_retrieved: int = 10_000
    max_open_roots: int = 256  # automatic roots open at once (``auto_root``); beyond, the oldest ends
    # distinct values kept per app-supplied metric label (route, pipeline, version, model, data
    # source, provider, error type, score name); later values are recorded as "other" (otel_metrics)
    max_label_values: int = 50


MAX_OPEN_ROOTS_ENV = "RAGTRACE_MAX_OPEN_ROOTS"


def max_open_roots_from_environment() -> int:
    """``RAGTRACE_MAX_OPEN_ROOTS`` (a positive int), else 256; anything else is a clear error."""
    text = os.environ.get(MAX_OPEN_ROOTS_ENV, "").strip()
    if not text:
        return Config.max_open_roots
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{MAX_OPEN_ROOTS_ENV} must be a positive int, got {text!r}")
    return value


def _initial() -> Config:
    mode = mode_from_environment() or "full"
    return Config(content=ContentPolicy(mode), full_content_sample=sample_from_environment(mode), max_open_roots=max_open_roots_from_environment())


_config = _initial()
_config_lock = threading.Lock()


def current() -> Config:
    return _config


def configure(
    service_name: str | None = None,
    exporter: str | SpanExporter | None = None,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    metrics: str | None = None,
    capture_content: str | None = None,
    redactor: Redactor | None = None,
    full_content_sample: float | None = None,
    hash_key: str | bytes | None = None,
    openinference: bool = True,
    max_documents: int = 10,
    max_content_chars: int = 4000,
    tokenizer: Tokenizer | None = None,
    batch: bool | None = None,
    max_retrieved: int = 10_000,
    max_open_roots: int | None = None,
    max_label_values: int = 50,
) -> trace.TracerProvider | None:
    """Configure ragtrace. Optional: without it ragtrace uses the app's global providers.

    ``exporter`` is ``"console"``, ``"otlp"``, ``"jsonl:PATH"``, ``"phoenix:URL"`` (spans and
    annotations to Arize Phoenix, ``ragtrace.exporters.phoenix``) or a ``SpanExporter``; ragtrace then
    creates a TracerProvider for it (``service_name`` names its resource) and installs it globally
    unless the application already has one, in which case it stays private to ragtrace.
    ``tracer_provider=`` uses a provider you built instead (never combined with ``exporter``).
    ``metrics="prometheus:HOST:PORT"`` serves ragtrace's metrics on a Prometheus scrape endpoint
    (``pip install 'ragtrace[prometheus]'``; never combined with ``meter_provider``; docs/fleet.md).
    ``capture_content`` is ``"full"``, ``"redact"`` or ``"hash"`` (default: environment, then full).
    ``full_content_sample`` (0 to 1): that share of pipelines records full content instead, decided
    once per pipeline at its root from its trace id (e.g. ``capture_content="redact",
    full_content_sample=0.05``); a pipeline's own ``capture_content=`` wins.
    ``hash_key`` keys every value derived from content that is exported (ids of id-less chunks,
    content hashes, ``rag.query.hash``); default ``RAGTRACE_HASH_KEY``, else a random key per process.
    ``batch`` picks the span processor (default: batch, except for the console exporter).
    ``max_retrieved`` (at least 1): results of one retrieval or rerank that are recorded; beyond it
    they reach the app as before and are counted (``rag.omitted_items``), and the figures that need
    every retrieved id say ``retrieval_truncated`` instead of a value.
    ``max_open_roots`` bounds the automatic roots (searches outside any ``rag_pipeline`` waiting
    for their answer) open at once; beyond it the oldest ends, ``rag.root.abandoned=capacity``
    (default ``RAGTRACE_MAX_OPEN_ROOTS``, else 256).
    ``max_label_values`` (at least 1): distinct values each app-supplied metric label keeps
    (route, pipeline, version, model, data source, provider, error type, score name); later ones
    are recorded as ``"other"``, with one warning naming the label, so request data in a label
    (``route=request.path``) can't grow memory or a scrape without bound.

    Returns the TracerProvider ragtrace will use (``None`` means the global one). Invalid arguments
    raise ``ValueError``/``TypeError`` here, at set-up time.
    """
    global _config
    if exporter is not None and tracer_provider is not None:
        raise ValueError("pass either exporter= or tracer_provider=, not both")
    if service_name is not None and not isinstance(service_name, str):
        raise TypeError(f"service_name must be a str, got {type(service_name).__name__}")
    if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
        raise TypeError(f"tracer_provider must be an opentelemetry TracerProvider, got {type(tracer_provider).__name__}")
    if meter_provider is not None and not isinstance(meter_provider, _MeterProvider):
        raise TypeError(f"meter_provider must be an opentelemetry MeterProvider, got {type(meter_provider).__name__}")
    if metrics is not None:
        if meter_provider is not None:
            raise ValueError("pass either metrics= or meter_provider=, not both")
        prometheus_endpoint.ports(metrics)  # raises on a bad spec before anything changes
    if redactor is not None and not callable(redactor):
        raise TypeError("redactor must be a callable taking and returning a str")
    if not isinstance(openinference, bool):
        raise TypeError("openinference must be a bool")
    for name, value in (("max_documents", max_documents), ("max_content_chars", max_content_chars)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if not isinstance(max_retrieved, int) or isinstance(max_retrieved, bool) or max_retrieved < 1:
        raise ValueError(f"max_retrieved must be a positive int, got {max_retrieved!r}")
    if not isinstance(max_label_values, int) or isinstance(max_label_values, bool) or max_label_values < 1:
        raise ValueError(f"max_label_values must be a positive int, got {max_label_values!r}")
    if max_open_roots is None:
        max_open_roots = max_open_roots_from_environment()
    elif not isinstance(max_open_roots, int) or isinstance(max_open_roots, bool) or max_open_roots < 1:
        raise ValueError(f"max_open_roots must be a positive int, got {max_open_roots!r}")
    if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
        raise TypeError("tokenizer must have count(text) and truncate(text, max_tokens) methods")
    mode = check_mode(capture_content) if capture_content is not None else (mode_from_environment() or "full")
    sample = check_sample(full_content_sample, mode) if full_content_sample is not None else sample_from_environment(mode)
    key = keyed.check_key(hash_key)

    # what can raise comes first: a missing extra, then a port already taken (the endpoint binds
    # its new port before it closes the old one), so a failed configure() changes nothing
    span_exporter, default_batch = own_provider.span_exporter(exporter) if exporter is not None else (None, False)
    if metrics is not None:
        served = Resource.create({SERVICE_NAME: service_name} if service_name else {})
        meter_provider = prometheus_endpoint.meter_provider(metrics, served, INSTRUMENTATION_NAME)
    else:
        prometheus_endpoint.retire()
    provider = tracer_provider
    if span_exporter is not None:
        use_batch = default_batch if batch is None else batch
        processor = BatchSpanProcessor(span_exporter) if use_batch else SimpleSpanProcessor(span_exporter)
        # an exporter may name resource attributes its backend routes by (Phoenix: the project)
        resource = {**getattr(span_exporter, "resource_attributes", {}), **({SERVICE_NAME: service_name} if service_name else {})}
        provider = own_provider.provider_for(Resource.create(resource), processor)
    else:
        own_provider.retire()

    keyed.set_key(key)
    if provider is not None or meter_provider is not None:
        provider_given()
    with _config_lock:
        _config = Config(
            tracer_provider=provider,
            meter_provider=meter_provider,
            content=ContentPolicy(mode, redactor),
            full_content_sample=sample,
            openinference=openinference,
            max_documents=max_documents,
            max_content_chars=max_content_chars,
            tokenizer=tokenizer or DEFAULT_TOKENIZER,
            max_retrieved=max_retrieved,
            max_open_roots=max_open_roots,
            max_label_values=max_label_values,
        )
        otel_metrics.use_meter_provider(meter_provider)
    return provider


def restore(previous: Config) -> None:
    """Put back a configuration taken earlier with ``current()`` (testing helpers use this)."""
    global _config
    if not isinstance(previous, Config):
        raise TypeError("restore() takes a Config returned by current()")
    if previous.tracer_provider is not None or previous.meter_provider is not None:
        provider_given()
    with _config_lock:
        _config = previous
        otel_metrics.use_meter_provider(previous.meter_provider)


def reset() -> None:
    """Back to the unconfigured state (environment and defaults). For tests."""
    global _config
    keyed.set_key(None)
    own_provider.retire(even_global=True)
    prometheus_endpoint.retire()
    with _config_lock:
        _config = _initial()
        otel_metrics.use_meter_provider(None)


def with_content(config: Config, mode: str | None, redactor: Redactor | None) -> Config:
    """A per-pipeline override of the content policy; a mode given here ends any sampling."""
    if mode is None and redactor is None:
        return config
    policy = ContentPolicy(check_mode(mode) if mode is not None else config.content.mode, redactor or config.content.redactor)
    return replace(config, content=policy, full_content_sample=0.0 if mode is not None else config.full_content_sample)


def content_decided(config: Config, trace_id: int | None) -> Config:
    """The content sample decided for one pipeline from its trace id (None: untraced, not drawn).

    Deterministic, so a judge in another process takes the same decision from the same id.
    """
    share = config.full_content_sample
    if not share:
        return config
    drawn = trace_id is not None and sampled_for_content(trace_id, share)
    return replace(config, content=ContentPolicy("full", config.content.redactor) if drawn else config.content, full_content_sample=0.0)


# --- resolution on the hot path ---------------------------------------------------------------
_tracers: weakref.WeakKeyDictionary[Any, trace.Tracer] = weakref.WeakKeyDictionary()


def tracer(explicit: trace.TracerProvider | None = None) -> trace.Tracer:
    """The tracer for a stage: explicit provider > configured > global. Cached per provider."""
    provider = explicit or _config.tracer_provider or trace.get_tracer_provider()
    try:
        return _tracers[provider]
    except (KeyError, TypeError):
        pass
    found = provider.get_tracer(INSTRUMENTATION_NAME, VERSION)
    try:
        _tracers[provider] = found
    except TypeError:  # provider that can't be weakly referenced
        pass
    return found


def telemetry_on(explicit: trace.TracerProvider | None = None) -> bool:
    """False when no provider is configured anywhere: decorators then call straight through.

    This runs on every decorated call, so it reads the API's provider slots directly instead of
    calling ``get_tracer_provider()``, which consults the environment each time it finds none,
    and does it inline (no helper calls) on that path.
    """
    config = _config
    if explicit is not None or config.tracer_provider is not None or config.meter_provider is not None:
        return True
    if not READ_SLOTS:
        return global_tracer_provider_set() or not meter_provider_unset(global_meter_provider())
    provider = trace._TRACER_PROVIDER
    if provider is not None and not isinstance(provider, trace.NoOpTracerProvider):
        return True
    meter = _metrics_api._METER_PROVIDER
    return meter is not None and type(meter).__name__ not in UNSET_METER_PROVIDERS

# The decorators' off test: while this is False and both API slots are empty, no provider is on
# anywhere (no pipeline can have a state either), so a decorated call goes straight through on
# three slot reads and no call. It turns True, for good, once ragtrace is handed a provider
# itself (``configure``, ``rag_pipeline(tracer_provider=)``, a decorator's ``tracer_provider=``);
# decorated calls then take the full check (``telemetry_on`` and the pipeline's state).
PROVIDERS_GIVEN = not READ_SLOTS


def provider_given() -> None:
    global PROVIDERS_GIVEN
    PROVIDERS_GIVEN = True


def _after_fork_in_child() -> None:
    """A forked worker forgets the Prometheus endpoint it inherited (never waiting on it) and
    records into its own, on the next free port of the configured range (docs/fleet.md)."""
    global _config, _config_lock
    _config_lock = threading.Lock()
    with guard.guard("forked child: metrics"):
        provider = prometheus_endpoint.after_fork(_config.meter_provider)
        if provider is not _config.meter_provider:
            _config = replace(_config, meter_provider=provider)
            otel_metrics.use_meter_provider(provider)


if hasattr(os, "register_at_fork"):  # Windows: no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
