"""``configure(metrics="prometheus:HOST:PORT")``: ragtrace's own MeterProvider behind a scrape endpoint.

The provider reads through ``opentelemetry-exporter-prometheus``'s ``PrometheusMetricReader`` into a
registry of its own (never ``prometheus_client``'s global one, which the app may serve itself), and
``prometheus_client`` serves that registry on HOST:PORT. It stays private to ragtrace, like a
TracerProvider ragtrace makes beside the app's: it carries ragtrace's metrics, nothing else. An app
that wants its own metrics on the same endpoint builds the MeterProvider itself and passes
``meter_provider=`` (docs/fleet.md). One endpoint at a time: configuring the same address again
keeps it; another address, or no ``metrics=``, closes it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource

from . import guard

PREFIX = "prometheus:"


@dataclass(frozen=True)
class _Endpoint:
    address: tuple[str, int]
    resource: Resource
    provider: MeterProvider
    server: Any


_current: _Endpoint | None = None
_lock = threading.Lock()


def address(spec: Any) -> tuple[str, int]:
    """``"prometheus:127.0.0.1:9464"`` -> ``("127.0.0.1", 9464)``; ``[::1]`` for IPv6. Raises on
    anything else, at ``configure()``."""
    if not isinstance(spec, str):
        raise TypeError(f"metrics must be a str like 'prometheus:127.0.0.1:9464', got {type(spec).__name__}")
    host, _, port = spec.removeprefix(PREFIX).rpartition(":")
    if not spec.startswith(PREFIX) or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"metrics must be 'prometheus:HOST:PORT' (e.g. 'prometheus:0.0.0.0:9464'), got {spec!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def meter_provider(spec: str, resource: Resource) -> MeterProvider:
    """The MeterProvider serving ``spec``'s endpoint, started on first use."""
    global _current
    host, port = address(spec)
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as error:
        raise ValueError("metrics='prometheus:...' needs the prometheus extra: pip install 'ragtrace[prometheus]'") from error
    with _lock:
        if _current is not None and _current.address == (host, port) and _current.resource == resource:
            return _current.provider
        _close()
        registry = CollectorRegistry(auto_describe=True)
        reader = PrometheusMetricReader(registry=registry)
        try:
            server, _thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            reader.shutdown()
            raise ValueError(f"metrics={spec!r}: cannot listen on {host}:{port}: {error}") from error
        provider = MeterProvider(metric_readers=[reader], resource=resource)
        _current = _Endpoint((host, port), resource, provider, server)
        return provider


def retire() -> None:
    """Close the endpoint (``configure()`` without ``metrics=``, ``reset()``)."""
    with _lock:
        _close()


def _close() -> None:
    global _current
    endpoint, _current = _current, None
    if endpoint is None:
        return
    with guard.guard("prometheus endpoint shutdown"):
        endpoint.server.shutdown()
        endpoint.server.server_close()
        endpoint.provider.shutdown()


guard.new_locks_after_fork(__name__, "_lock")
