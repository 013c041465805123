"""The Prometheus names of ragtrace's metrics and labels, derived from ``names.METRICS``.

The shipped dashboard and rules (``ragtrace dashboard``) and docs/attributes.md spell Prometheus
names through these functions only, so a renamed instrument renames every query with it. The rule
is the OpenTelemetry-to-Prometheus translation of the specification (compatibility,
prometheus_and_openmetrics.md), which ``opentelemetry-exporter-prometheus``, the Collector's
``prometheus`` and ``prometheusremotewrite`` exporters and Prometheus's own OTLP receiver (default
``UnderscoreEscapingWithSuffixes``) all apply: invalid characters become ``_``, the unit becomes a
suffix (``s`` -> ``_seconds``; ``1`` and ``{annotations}`` add nothing), a counter gets ``_total``.
Only the units ragtrace uses are mapped; a new one raises here until it is added.
"""

from __future__ import annotations

import re

from .. import names

_INVALID = re.compile(r"[^a-zA-Z0-9_:]")
_ANNOTATION = re.compile(r"\{[^}]*\}")
_UNIT_SUFFIXES = {"s": "seconds", "1": ""}
_INFO = {m.name: m for m in names.METRICS}


def label(attribute: str) -> str:
    """``rag.pipeline.version`` -> ``rag_pipeline_version``."""
    return _INVALID.sub("_", attribute)


def metric(name: str) -> str:
    """The series name of a counter (with ``_total``) or the base name of a histogram (add
    ``_bucket``, ``_sum``, ``_count``)."""
    info = _INFO[name]
    unit = _ANNOTATION.sub("", info.unit)
    if unit not in _UNIT_SUFFIXES and unit:
        raise ValueError(f"no Prometheus suffix known for unit {info.unit!r} of {name}")
    base = _INVALID.sub("_", name)
    suffix = _UNIT_SUFFIXES.get(unit, "")
    if suffix and not base.endswith("_" + suffix):
        base += "_" + suffix
    return base + "_total" if info.instrument == "counter" else base
