"""The OpenTelemetry API's global provider slots, read without side effects, and ragtrace's
instrumentation scope.

``configure()`` (``config``) decides which providers ragtrace uses; the metric instruments
(``otel_metrics``) and the exporters only need to know whether the app installed a provider
globally. They read it here, so nothing below ``config`` imports it.
"""

from __future__ import annotations

import os

from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as _metrics_api

INSTRUMENTATION_NAME = "ragtrace"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ragtrace")
    except Exception:  # noqa: BLE001 - running from a source tree
        return "0.0.0"


VERSION = _version()


def global_tracer_provider_set() -> bool:
    if ENVIRONMENT_PROVIDERS or not hasattr(trace, "_TRACER_PROVIDER"):
        provider = trace.get_tracer_provider()
        return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
    provider = trace._TRACER_PROVIDER
    return provider is not None and not isinstance(provider, trace.NoOpTracerProvider)


def global_meter_provider() -> metrics.MeterProvider:
    """The global MeterProvider, read from the API's slot when no environment variable names one."""
    if ENVIRONMENT_PROVIDERS or not hasattr(_metrics_api, "_METER_PROVIDER"):
        return metrics.get_meter_provider()
    provider = _metrics_api._METER_PROVIDER
    return provider if provider is not None else NO_METER_PROVIDER


def meter_provider_unset(provider: metrics.MeterProvider) -> bool:
    """True for the API's placeholder provider: no SDK installed, so there is nothing to record."""
    return type(provider).__name__ in UNSET_METER_PROVIDERS


UNSET_METER_PROVIDERS = ("_ProxyMeterProvider", "NoOpMeterProvider")


NO_METER_PROVIDER = metrics.NoOpMeterProvider()
# Providers named in the environment are created lazily by the API's getters: use those then.
ENVIRONMENT_PROVIDERS = bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER") or os.environ.get("OTEL_PYTHON_METER_PROVIDER"))
READ_SLOTS = not ENVIRONMENT_PROVIDERS and hasattr(trace, "_TRACER_PROVIDER") and hasattr(_metrics_api, "_METER_PROVIDER")
