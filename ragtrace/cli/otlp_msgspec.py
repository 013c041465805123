"""The optional fast decoder: OTLP/JSON export requests through ``msgspec`` typed structs.

Importing this module raises ``ImportError`` when ``msgspec`` is not installed
(``pip install 'ragtrace[cli]'``); the reader then uses the standard library's ``json``.

Only the canonical shape is decoded here: one ``{"resourceSpans": [{"scopeSpans": [{"spans":
[...]}]}]}`` object per line, camelCase keys, as ragtrace's ``JsonLinesExporter`` and the
Collector's file exporter write it. Unknown fields (``resource``, ``scope``, ``kind``, ``status``,
``links``...) are skipped without being built, and every attribute value and the events are kept
as ``msgspec.Raw``: a slice of the line, parsed only when ``Span.get`` asks for it. A content-heavy
value (a prompt, a completion, document text) that the report never reads is never decoded. Any
other shape, or anything the structs don't fit (a wrong type, a missing ``traceId``), makes
``decode_request`` return ``None`` and the reader decodes that line with ``json`` instead, so
both decoders give the same spans, the same values and the same warnings.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Literal

import msgspec

from .._internal.names import ATTRIBUTES, RAG_PIPELINE_ATTRIBUTE_PREFIX

Raw = msgspec.Raw
DecodeError = msgspec.DecodeError
ValidationError = msgspec.ValidationError

# Attribute keys: those ragtrace's SDK writes decode as members of a ``Literal``, which gives the
# very string object of ``names`` (nothing allocated per attribute, its hash already cached, and
# the report's lookups with the ``names`` constants match by identity). Any other key makes that
# decode fail and the attributes are decoded again with plain string keys: the same result, so
# this list only decides speed. Indexed keys (``retrieval.documents.{i}...``) up to _INDEXES;
# ``rag.pipeline.<key>`` labels for the ones the docs and the report's default grouping name.
_INDEXES = 64
_LABELS = ("version", "route")


def _sdk_keys() -> tuple[str, ...]:
    """Every key of ``names.ATTRIBUTES``, patterns spelled out (``{i}``: an index, ``{a,b}``: a or b)."""
    keys: dict[str, None] = {}
    for info in ATTRIBUTES:
        if info.key == RAG_PIPELINE_ATTRIBUTE_PREFIX + "<key>":
            keys.update(dict.fromkeys(RAG_PIPELINE_ATTRIBUTE_PREFIX + label for label in _LABELS))
            continue
        parts = re.split(r"(\{[^}]*\})", info.key)
        choices = [
            [str(i) for i in range(_INDEXES)] if part == "{i}" else part[1:-1].split(",") if part.startswith("{") else [part]
            for part in parts
        ]
        keys.update(dict.fromkeys("".join(choice) for choice in itertools.product(*choices)))
    return tuple(keys)


class _KeyValue(msgspec.Struct, gc=False):
    key: str
    value: msgspec.Raw = None  # type: ignore[assignment]  # absent "value": None, as kv.get("value")


class _KnownKeyValue(msgspec.Struct, gc=False):
    key: Literal[_sdk_keys()]  # type: ignore[valid-type]
    value: msgspec.Raw = None  # type: ignore[assignment]


class _SpanHead(msgspec.Struct, gc=False):
    """A span without its attributes decoded: they stay one unparsed slice (see ``decode_heads``)."""

    traceId: Any = None
    spanId: Any = None
    parentSpanId: Any = None
    flags: Any = None
    name: Any = None
    startTimeUnixNano: Any = None
    endTimeUnixNano: Any = None
    attributes: msgspec.Raw = None  # type: ignore[assignment]
    events: msgspec.Raw = None  # type: ignore[assignment]


class _Span(_SpanHead, gc=False):
    attributes: list[_KeyValue] | None = None  # type: ignore[assignment]


class _KnownSpan(_SpanHead, gc=False):
    attributes: list[_KnownKeyValue] | None = None  # type: ignore[assignment]


def _request_decoder(span: type) -> Any:
    """A decoder of ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}`` whose spans are ``span`` structs."""
    scope = msgspec.defstruct("ScopeSpans", [("spans", list[span] | None, None)], gc=False)  # type: ignore[valid-type]
    resource = msgspec.defstruct("ResourceSpans", [("scopeSpans", list[scope] | None, None)], gc=False)  # type: ignore[valid-type]
    request = msgspec.defstruct("Request", [("resourceSpans", list[resource] | None, None)], gc=False)  # type: ignore[valid-type]
    return msgspec.json.Decoder(request).decode


_request = _request_decoder(_Span)
_known_request = _request_decoder(_KnownSpan)


# Typed decoders for the exact canonical shapes of the values ragtrace reads most: a string, an int
# (a decimal string, as OTLP/JSON writes int64), arrays of strings, of ints and of bools. Anything
# else (another kind, an extra key, a JSON number where OTLP writes a string) fails validation, and
# the caller falls back to the general decoding, so the result never depends on this shortcut.
class _String(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    stringValue: str


class _Int(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    intValue: str


class _Bool(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    boolValue: bool


class _Number(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    intValue: str | msgspec.UnsetType = msgspec.UNSET
    doubleValue: float | msgspec.UnsetType = msgspec.UNSET  # a JSON number ("NaN" etc. take the general road)


class _Strings(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    values: list[_String] = []


class _Ints(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    values: list[_Int] = []


class _Bools(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    values: list[_Bool] = []


class _StringArray(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    arrayValue: _Strings


class _IntArray(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    arrayValue: _Ints


class _BoolArray(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    arrayValue: _Bools


string_value = msgspec.json.Decoder(_String).decode  # -> .stringValue
int_value = msgspec.json.Decoder(_Int).decode  # -> int(.intValue)
bool_value = msgspec.json.Decoder(_Bool).decode  # -> .boolValue
number_value = msgspec.json.Decoder(_Number).decode  # -> int(.intValue) or .doubleValue, when exactly one is set
UNSET = msgspec.UNSET
string_array = msgspec.json.Decoder(_StringArray).decode  # -> [v.stringValue for v in .arrayValue.values]
int_array = msgspec.json.Decoder(_IntArray).decode
bool_array = msgspec.json.Decoder(_BoolArray).decode
raw_decoder = _any = msgspec.json.Decoder().decode  # a Raw slice -> Python objects (may raise)


def decode_request(line: bytes) -> list[_Span] | None:
    """The spans of one canonical export request, or ``None`` when ``json`` must read the line.

    ``None`` for malformed JSON, other shapes (Phoenix pages, lists, snake_case keys, metrics),
    structures the typed decode rejects, spans without a ``traceId``, and lines that are not UTF-8
    (``msgspec`` does not check the bytes inside values it skips; ``json`` rejects the line).
    """
    return _decode(line, _known_request, _request)


def decode_plain_request(line: bytes) -> list[_Span] | None:
    """``decode_request`` with plain string keys only: for the lines after one whose spans carry
    keys the SDK does not write (``decode_request`` gave ``_Span`` structs), not to try twice."""
    return _decode(line, _request)


PlainSpan = _Span  # what ``decode_request`` gives when a key was not one the SDK writes


# A long line, read a few dozen spans at a time (see ``ingest.pieces``): decoded
# first without the spans' attributes, which stay unparsed slices and are most of the line, then
# the attributes of a few spans at a time with ``decode_attributes``.
_head_request = _request_decoder(_SpanHead)
# A head's attributes (``key`` and raw ``value`` of each); both may raise. The first rejects keys the
# SDK does not write (ValidationError); the second takes any key.
decode_known_attributes = msgspec.json.Decoder(list[_KnownKeyValue] | None).decode
decode_attributes = msgspec.json.Decoder(list[_KeyValue] | None).decode


def decode_heads(line: bytes) -> list[_SpanHead] | None:
    """``decode_request`` without the attributes: each span's are an unparsed slice of the line,
    for ``decode_attributes``. ``None`` for the same lines as ``decode_request``, but for what
    only decoding the attributes can show."""
    return _decode(line, _head_request)


def parsed_span(head: _SpanHead) -> dict[str, Any]:
    """A head as ``json`` parses its span, for ``ingest.pieces`` (when the typed decode rejects
    the span's attributes). ``load`` can't fail here: the line passed msgspec, stricter than json."""
    span = {field: getattr(head, field) for field in head.__struct_fields__}
    span["attributes"] = None if head.attributes is None else load(head.attributes)
    span["events"] = None if head.events is None else load(head.events)
    return span


def _decode(line: bytes, decode: Any, fallback: Any = None) -> list[Any] | None:
    """The spans of ``line`` decoded with ``decode`` (one of the request decoders), else with
    ``fallback`` when ``decode`` rejects the structure, or ``None``."""
    if not line.isascii():
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        try:
            request = decode(line)
        except ValidationError:
            if fallback is None:
                raise
            request = fallback(line)
    except (DecodeError, ValidationError, RecursionError):  # RecursionError: nested too deeply
        return None
    resources = request.resourceSpans
    if resources is None:
        return None
    spans: list[Any] = []
    for resource in resources:
        scopes = resource.scopeSpans
        if scopes is None:
            return None
        for scope in scopes:
            if scope.spans:
                spans.extend(scope.spans)
    for span in spans:
        if span.traceId is None:
            return None
    return spans


def load(raw: Raw) -> Any:
    """A raw JSON value as Python objects, exactly as ``json.loads`` gives them.

    ``msgspec`` rejects a few things ``json`` accepts (lone surrogate escapes, numbers beyond a
    double's range): those go through ``json``. Raises ``ValueError`` for invalid JSON.
    """
    try:
        return _any(raw)
    except (DecodeError, ValidationError):
        return json.loads(bytes(raw))


def detach(raw: Any) -> Any:
    """A copy of a ``Raw`` that no longer keeps the whole line it was sliced from alive."""
    return raw.copy() if type(raw) is Raw else raw
