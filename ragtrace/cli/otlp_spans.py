"""Parsed OTLP/JSON -> ``Span`` objects: the export shapes walked, ids and times normalised.

Two inputs, one result: span objects parsed by ``json`` (camelCase, or Phoenix's snake_case) and
span structs decoded by ``otlp_msgspec``. Base64 ids (protobuf's JSON mapping) become hex. What
is malformed is a warning (through the source's diagnostics) and is skipped.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from .spans import Source, Span

# opentelemetry.proto.trace.v1.SpanFlags: the parent is known to be remote (span is a local root)
_REMOTE_PARENT = 0x100 | 0x200


def hex_id(value: Any, hex_length: int) -> str:
    """Hex ids as they are; base64 ids (protobuf's JSON mapping) converted to hex."""
    if type(value) is str:
        if len(value) == hex_length:
            return value
        if value and len(value) == 4 * ((hex_length // 2 + 2) // 3):
            try:
                return base64.b64decode(value, validate=True).hex()
            except (binascii.Error, ValueError):
                return value
        return value
    return "" if value is None else str(value)


def _nanos(value: Any) -> int:
    if not value:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a time of 1e400 (inf)
        return 0


def raw_spans(document: Any, source: Source, line: int) -> Iterator[Any]:
    """Every span object of one parsed JSON value (an export request, a Phoenix page, a list...).

    May raise AttributeError, TypeError or KeyError on a structure that is not an export.
    """
    warn = source.diagnostics.warn
    if type(document) is list:
        for item in document:
            if type(item) is dict and ("traceId" in item or "trace_id" in item):
                yield item
            else:
                yield from raw_spans(item, source, line)
        return
    if type(document) is not dict:
        warn("not a trace export", f"{source.name}:{line}", "a JSON value that is not an OTLP trace export; skipped")
        return
    resource_spans = document.get("resourceSpans")
    if resource_spans is None:
        resource_spans = document.get("resource_spans")
    if resource_spans is not None:
        for resource in resource_spans or ():
            scopes = resource.get("scopeSpans")
            if scopes is None:
                scopes = resource.get("scope_spans") or resource.get("instrumentationLibrarySpans") or ()
            for scope in scopes:
                yield from scope.get("spans") or ()
        return
    data = document.get("data")
    if type(data) is list:  # Phoenix's /spans/otlpv1 page
        yield from raw_spans(data, source, line)
        return
    if "traceId" in document or "trace_id" in document:
        yield document
        return
    if document:
        warn("not a trace export", f"{source.name}:{line}", "a JSON object without resourceSpans (metrics or logs?); skipped")


def json_span(raw: Any, source: Source, line: int) -> Span | None:
    """One span object parsed by ``json``, or None (with a warning) when it is malformed."""
    warn = source.diagnostics.warn
    if type(raw) is not dict:
        warn("malformed span", f"{source.name}:{line}", "a span is not a JSON object; skipped")
        return None
    get = raw.get
    trace_id = get("traceId")
    if trace_id is None:
        trace_id = get("trace_id")
        span_id = get("span_id")
        parent_id = get("parent_span_id")
        start = get("start_time_unix_nano")
        end = get("end_time_unix_nano")
    else:
        span_id = get("spanId")
        parent_id = get("parentSpanId")
        start = get("startTimeUnixNano")
        end = get("endTimeUnixNano")
    trace_id = hex_id(trace_id, 32)
    span_id = hex_id(span_id, 16)
    if not trace_id or not span_id:
        warn("malformed span", f"{source.name}:{line}", "a span has no traceId or spanId; skipped")
        return None
    parent_id = hex_id(parent_id, 16) if parent_id else ""
    try:
        attrs = {kv["key"]: kv.get("value") for kv in get("attributes") or ()}
        well_formed = all(type(key) is str for key in attrs)
    except (KeyError, TypeError, AttributeError):
        well_formed = False
    if not well_formed:
        attrs = {}
        for kv in get("attributes") or ():
            if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                attrs[kv["key"]] = kv.get("value")
        warn("malformed span", f"{source.name}:{line}", f"span {span_id}: malformed attribute entries skipped")
    flags = get("flags")
    name = get("name")
    return Span(
        trace_id,
        span_id,
        parent_id,
        name if type(name) is str else "",
        _nanos(start),
        _nanos(end),
        attrs,
        get("events") or None,
        not parent_id or (type(flags) is int and flags & _REMOTE_PARENT == _REMOTE_PARENT),
        source,
        line,
    )


def struct_span(raw: Any, attributes: list[Any] | None, source: Source, line: int) -> Span | None:
    """One span struct decoded by ``otlp_msgspec`` and its attribute list, as ``json_span`` reads
    the same span parsed by ``json``; None (with a warning) when it is malformed."""
    trace_id = raw.traceId
    if type(trace_id) is not str or len(trace_id) != 32:
        trace_id = hex_id(trace_id, 32)
    span_id = raw.spanId
    if type(span_id) is not str or len(span_id) != 16:
        span_id = hex_id(span_id, 16)
    if not trace_id or not span_id:
        source.diagnostics.warn("malformed span", f"{source.name}:{line}", "a span has no traceId or spanId; skipped")
        return None
    parent_id = raw.parentSpanId
    if parent_id:
        if type(parent_id) is not str or len(parent_id) != 16:
            parent_id = hex_id(parent_id, 16)
    else:
        parent_id = ""
    flags = raw.flags
    name = raw.name
    try:  # _nanos, inline
        start = int(raw.startTimeUnixNano)
    except (TypeError, ValueError, OverflowError):
        start = 0
    try:
        end = int(raw.endTimeUnixNano)
    except (TypeError, ValueError, OverflowError):
        end = 0
    return Span(
        trace_id,
        span_id,
        parent_id,
        name if type(name) is str else "",
        start,
        end,
        {kv.key: kv.value for kv in attributes} if attributes else {},
        raw.events,
        not parent_id or (type(flags) is int and flags & _REMOTE_PARENT == _REMOTE_PARENT),
        source,
        line,
    )
