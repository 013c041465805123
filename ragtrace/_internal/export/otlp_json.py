"""OTLP/JSON encoding of SDK spans, without protobuf.

ragtrace's runtime dependencies stop at the OpenTelemetry API/SDK, so the JSON Lines exporter
cannot lean on ``opentelemetry-proto``. This module writes the ``ExportTraceServiceRequest``
message by hand, following the OTLP/JSON mapping as the Collector's file exporter writes it:

* field names in lowerCamelCase, fields at their proto3 default (0, "", empty list) left out;
* ``traceId``/``spanId``/``parentSpanId`` as lowercase hex (OTLP's exception to proto3 JSON);
* 64-bit integers (times, ``intValue``) as decimal strings, enums (``kind``, ``code``) as integers;
* ``doubleValue`` NaN/±inf as the strings ``"NaN"``/``"Infinity"``/``"-Infinity"``;
* ``bytesValue`` in standard base64.

The message is the one ``opentelemetry-exporter-otlp-proto-common``'s ``encode_spans`` builds from
the same spans (the test suite proves it field for field), including its ``flags`` (the
has-is-remote and is-remote bits) and its grouping by resource, then instrumentation scope.

``decode_any_value`` and ``attributes_to_dict`` go the other way, for reading traces back.
"""

from __future__ import annotations

import base64
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind

__all__ = ["encode_spans", "encode_any_value", "encode_attributes", "decode_any_value", "attributes_to_dict"]

_logger = logging.getLogger("ragtrace")

# opentelemetry.proto.trace.v1.Span.SpanKind
_SPAN_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
# opentelemetry.proto.trace.v1.SpanFlags
_FLAG_CONTEXT_HAS_IS_REMOTE = 0x100
_FLAG_CONTEXT_IS_REMOTE = 0x200

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


# --- values -----------------------------------------------------------------------------------
def _double(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def encode_any_value(value: Any) -> dict[str, Any]:
    """One attribute value as an OTLP/JSON ``AnyValue``. ``None`` is the empty ``AnyValue`` ``{}``.

    Raises ``ValueError`` for what OTLP cannot carry (an int outside int64, an unknown type).
    """
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"int {value} does not fit in int64")
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": _double(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Sequence):
        values = [encode_any_value(item) for item in value]
        return {"arrayValue": {"values": values} if values else {}}
    if isinstance(value, Mapping):
        pairs = [{"key": str(key), "value": encode_any_value(item)} for key, item in value.items()]
        return {"kvlistValue": {"values": pairs} if pairs else {}}
    raise ValueError(f"unsupported attribute value type {type(value).__name__}")


def encode_attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Attributes as OTLP/JSON ``KeyValue``s, in insertion order.

    A value OTLP cannot carry drops its key (logged), as the protobuf encoder does.
    """
    if not attributes:
        return []
    encoded = []
    for key, value in attributes.items():
        try:
            encoded.append({"key": key, "value": encode_any_value(value)})
        except (ValueError, TypeError, RecursionError) as error:
            _logger.debug("ragtrace: attribute %s left out of the OTLP/JSON export: %s", key, error)
    return encoded


def decode_any_value(value: Mapping[str, Any] | None) -> Any:
    """An OTLP/JSON ``AnyValue`` back to Python: str, bool, int, float, bytes, list, dict or None.

    Lenient on input: ``intValue`` may be a string or a number, ``doubleValue`` a number or a
    string (``"NaN"``, ``"Infinity"``, ``"-Infinity"``, ``"1.5"``).
    """
    if not value:
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [decode_any_value(item) for item in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes_to_dict((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])
    return None


def attributes_to_dict(attributes: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """A list of OTLP/JSON ``KeyValue``s as a plain dict (arrays become lists)."""
    return {item["key"]: decode_any_value(item.get("value")) for item in attributes or ()}


# --- spans ------------------------------------------------------------------------------------
def _span_id(span_id: int) -> str:
    return f"{span_id:016x}"


def _trace_id(trace_id: int) -> str:
    return f"{trace_id:032x}"


def _flags(parent: SpanContext | None) -> int:
    flags = _FLAG_CONTEXT_HAS_IS_REMOTE
    if parent is not None and parent.is_remote:
        flags |= _FLAG_CONTEXT_IS_REMOTE
    return flags


def _trace_state(context: SpanContext | None) -> str:
    state = getattr(context, "trace_state", None)
    if not state:
        return ""
    return ",".join(f"{key}={value}" for key, value in state.items())


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    """Set a field unless it is at its proto3 default (OTLP/JSON leaves those out)."""
    if value:
        target[key] = value


def _nanos(value: int | None) -> str | None:
    return str(value) if value else None


def _encode_span(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    parent = span.parent
    encoded: dict[str, Any] = {"traceId": _trace_id(context.trace_id), "spanId": _span_id(context.span_id)}
    _put(encoded, "traceState", _trace_state(context))
    if parent is not None:
        encoded["parentSpanId"] = _span_id(parent.span_id)
    encoded["flags"] = _flags(parent)
    _put(encoded, "name", span.name)
    encoded["kind"] = _SPAN_KIND.get(span.kind, 0)
    _put(encoded, "startTimeUnixNano", _nanos(span.start_time))
    _put(encoded, "endTimeUnixNano", _nanos(span.end_time))
    _put(encoded, "attributes", encode_attributes(span.attributes))
    _put(encoded, "droppedAttributesCount", span.dropped_attributes)
    events = []
    for event in span.events:
        encoded_event: dict[str, Any] = {}
        _put(encoded_event, "timeUnixNano", _nanos(event.timestamp))
        _put(encoded_event, "name", event.name)
        _put(encoded_event, "attributes", encode_attributes(event.attributes))
        _put(encoded_event, "droppedAttributesCount", getattr(event, "dropped_attributes", 0))
        events.append(encoded_event)
    _put(encoded, "events", events)
    _put(encoded, "droppedEventsCount", span.dropped_events)
    links = []
    for link in span.links:
        encoded_link: dict[str, Any] = {
            "traceId": _trace_id(link.context.trace_id),
            "spanId": _span_id(link.context.span_id),
        }
        _put(encoded_link, "traceState", _trace_state(link.context))
        _put(encoded_link, "attributes", encode_attributes(link.attributes))
        _put(encoded_link, "droppedAttributesCount", getattr(link, "dropped_attributes", 0))
        encoded_link["flags"] = _flags(link.context)
        links.append(encoded_link)
    _put(encoded, "links", links)
    _put(encoded, "droppedLinksCount", span.dropped_links)
    status: dict[str, Any] = {}
    if span.status is not None:
        _put(status, "message", span.status.description)
        _put(status, "code", span.status.status_code.value)
    encoded["status"] = status
    return encoded


def _encode_scope(scope: Any) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    if scope is None:
        return encoded
    _put(encoded, "name", scope.name)
    _put(encoded, "version", scope.version)
    _put(encoded, "attributes", encode_attributes(getattr(scope, "attributes", None)))
    return encoded


class _Groups:
    """An insertion-ordered map that groups equal keys, and falls back to identity when unhashable."""

    def __init__(self) -> None:
        self._by_key: dict[Any, list[Any]] = {}
        self._unhashable: list[tuple[Any, list[Any]]] = []

    def get(self, key: Any, default: Any) -> Any:
        try:
            return self._by_key.setdefault(key, default)
        except TypeError:
            for known, value in self._unhashable:
                if known is key:
                    return value
            self._unhashable.append((key, default))
            # Keep first-seen order across both kinds of key.
            self._by_key[_Identity(key)] = default
            return default

    def items(self) -> list[tuple[Any, Any]]:
        return [(key.value if isinstance(key, _Identity) else key, value) for key, value in self._by_key.items()]


class _Identity:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def encode_spans(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One OTLP/JSON ``ExportTraceServiceRequest`` for ``spans``, grouped by resource then scope."""
    resources = _Groups()
    for span in spans:
        scopes = resources.get(span.resource, _Groups())
        scopes.get(span.instrumentation_scope or None, []).append(_encode_span(span))
    resource_spans = []
    for resource, scopes in resources.items():
        scope_spans = []
        for scope, encoded_spans in scopes.items():
            entry: dict[str, Any] = {"scope": _encode_scope(scope), "spans": encoded_spans}
            _put(entry, "schemaUrl", getattr(scope, "schema_url", None))
            scope_spans.append(entry)
        encoded_resource: dict[str, Any] = {}
        if resource is not None:
            _put(encoded_resource, "attributes", encode_attributes(resource.attributes))
        entry = {"resource": encoded_resource, "scopeSpans": scope_spans}
        _put(entry, "schemaUrl", getattr(resource, "schema_url", None))
        resource_spans.append(entry)
    return {"resourceSpans": resource_spans}
