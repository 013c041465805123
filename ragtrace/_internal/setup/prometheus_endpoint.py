"""``configure(metrics="prometheus:HOST:PORT")``: ragtrace's own MeterProvider behind a scrape endpoint.

The provider reads through ``opentelemetry-exporter-prometheus``'s ``PrometheusMetricReader`` into a
registry of its own (never ``prometheus_client``'s global one, which the app may serve itself), and
``prometheus_client`` serves that registry on HOST:PORT. It stays private to ragtrace, like a
TracerProvider ragtrace makes beside the app's: it carries ragtrace's metrics, nothing else. An app
that wants its own metrics on the same endpoint builds the MeterProvider itself and passes
``meter_provider=`` (docs/fleet.md). One endpoint per process: configuring the same address again
keeps it; another address, or no ``metrics=``, closes it, and a new one is bound before the old
one closes, so a port already taken raises with the old endpoint still serving.

Pre-fork servers: ``PORT`` may be a range, ``FIRST-LAST``. A process serves on the first free port
of it, and so does every worker forked from a process that serves one (``after_fork``): each worker
is its own scrape target, on a port the rule gives. A forked worker never touches what it inherited
beyond closing its copy of the listening socket: the server's thread did not survive the fork, so
``shutdown()`` would wait forever for a loop that never runs.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.view import View
from opentelemetry.sdk.resources import Resource

from ..core import guard

PREFIX = "prometheus:"
# label sets per ragtrace instrument on its own provider: past it the SDK folds later ones into one
# series labelled otel_metric_overflow="true" (the shipped rules warn when that series exists)
CARDINALITY_LIMIT = 500


@dataclass(frozen=True)
class _Endpoint:
    ports: tuple[str, int, int]  # host, first and last port of the configured range
    port: int  # the one it serves on
    resource: Resource
    meter_name: str  # ragtrace's meter, whose instruments the cardinality limit applies to
    provider: MeterProvider
    registry: Any
    server: Any


_current: _Endpoint | None = None
_lock = threading.Lock()


def ports(spec: Any) -> tuple[str, int, int]:
    """``"prometheus:127.0.0.1:9464"`` -> ``("127.0.0.1", 9464, 9464)``; ``...:9464-9471`` for a
    range; ``[::1]`` for IPv6. Raises on anything else, at ``configure()``."""
    if not isinstance(spec, str):
        raise TypeError(f"metrics must be a str like 'prometheus:127.0.0.1:9464', got {type(spec).__name__}")
    host, _, port = spec.removeprefix(PREFIX).rpartition(":")
    first, _, last = port.partition("-")
    last = last or first
    if (
        not spec.startswith(PREFIX) or not host or not first.isdigit() or not last.isdigit()
        or not 0 < int(first) <= int(last) < 65536
    ):
        raise ValueError(
            f"metrics must be 'prometheus:HOST:PORT' or 'prometheus:HOST:FIRST-LAST' (e.g. 'prometheus:0.0.0.0:9464-9479'), got {spec!r}"
        )
    return host.removeprefix("[").removesuffix("]"), int(first), int(last)


def meter_provider(spec: str, resource: Resource, meter_name: str) -> MeterProvider:
    """The MeterProvider serving ``spec``'s endpoint, started on first use. A port range already
    taken raises ``ValueError`` and leaves the current endpoint as it was."""
    global _current
    wanted = ports(spec)
    host, first, last = wanted
    _exporter()
    with _lock:
        current = _current
        if current is not None and current.ports[0] == host and first <= current.port <= last:
            if current.ports == wanted and current.resource == resource:
                return current.provider
            # the same socket stays (nothing to bind, so nothing can fail): a new provider on it
            with guard.guard("prometheus endpoint shutdown"):
                current.provider.shutdown()  # unregisters its reader from the registry
            provider = _provider(current.registry, resource, meter_name)
            _current = _Endpoint(wanted, current.port, resource, meter_name, provider, current.registry, current.server)
            return provider
        endpoint, error = _serve(wanted, resource, meter_name)
        if endpoint is None:
            raise ValueError(f"metrics={spec!r}: cannot listen on {host}:{_span(first, last)}: {error}")
        _current = endpoint
    if current is not None:
        _close(current)
    return endpoint.provider


def retire() -> None:
    """Close the endpoint (``configure()`` without ``metrics=``, ``reset()``)."""
    global _current
    with _lock:
        endpoint, _current = _current, None
    if endpoint is not None:
        _close(endpoint)


def after_fork(provider: Any) -> Any:
    """In a forked child: the MeterProvider that replaces ``provider`` (the configured one).

    The child forgets the endpoint it inherited, closing only its copy of the socket. When
    ``provider`` is that endpoint's, the child serves its own endpoint on the first free port of
    the same range and records there; when no port is free, it records nothing and says so once,
    when it first records. Any other provider is returned unchanged."""
    global _current, _lock
    _lock = threading.Lock()  # another thread may have held it at fork()
    inherited, _current = _current, None
    if inherited is None:
        return provider
    with guard.guard("forked child: inherited prometheus endpoint"):
        inherited.server.socket.close()  # never shutdown(): its serving thread is not in this process
    if provider is not inherited.provider:
        return provider
    endpoint = None
    with guard.guard("forked child: prometheus endpoint"):
        endpoint, _error = _serve(inherited.ports, inherited.resource, inherited.meter_name)
    if endpoint is None:
        return _Unserved(inherited.ports)
    _current = endpoint
    return endpoint.provider


class _Unserved(NoOpMeterProvider):
    """A forked worker's provider when every port of the range is taken: it records nothing and
    warns once, the first time ragtrace records (a worker that never records stays quiet)."""

    def __init__(self, wanted: tuple[str, int, int]) -> None:
        self.wanted = wanted

    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> Any:
        host, first, last = self.wanted
        guard.warn_once(
            "prometheus-unserved",
            "this forked worker (pid %d) can't serve its metrics: every port of %s:%s is taken (the "
            "parent's endpoint holds one), so its metrics are dropped. Give each worker a port with a "
            "range: configure(metrics='prometheus:HOST:FIRST-LAST'), one port per worker and one for "
            "the parent (docs/fleet.md)",
            os.getpid(), host, _span(first, last),
        )
        return super().get_meter(name, *args, **kwargs)


def _serve(wanted: tuple[str, int, int], resource: Resource, meter_name: str) -> tuple[_Endpoint | None, OSError | None]:
    """An endpoint on the first free port of the range, else None and the last bind error."""
    from prometheus_client import CollectorRegistry, start_http_server

    host, first, last = wanted
    error = None
    for port in range(first, last + 1):
        registry = CollectorRegistry(auto_describe=True)
        try:
            server, _thread = start_http_server(port, addr=host, registry=registry)
        except OSError as failed:
            error = failed
            continue
        return _Endpoint(wanted, port, resource, meter_name, _provider(registry, resource, meter_name), registry, server), None
    return None, error


def _provider(registry: Any, resource: Resource, meter_name: str) -> MeterProvider:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    view = View(meter_name=meter_name, aggregation_cardinality_limit=CARDINALITY_LIMIT)
    return MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)], resource=resource, views=[view])


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _exporter() -> None:
    try:
        import opentelemetry.exporter.prometheus  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError as error:
        raise ValueError("metrics='prometheus:...' needs the prometheus extra: pip install 'ragtrace[prometheus]'") from error


def _close(endpoint: _Endpoint) -> None:
    with guard.guard("prometheus endpoint shutdown"):
        endpoint.server.shutdown()
        endpoint.server.server_close()
        endpoint.provider.shutdown()

