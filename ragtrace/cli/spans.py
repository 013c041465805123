"""One span of the input and its attribute values, decoded only when the report reads them.

A span's attributes map keys to raw OTLP ``AnyValue`` objects: parsed JSON objects (the ``json``
decoder) or unparsed ``msgspec.Raw`` slices of the line (the ``msgspec`` decoder, see
``otlp_msgspec``). ``Span.get`` and the typed reads (``get_str``, ``get_int``, ``get_bool``,
``get_number``, ``get_list``, ``get_aligned``) give the same values for both, and the same
warnings for values that are not valid AnyValues. ``TraceReader`` (``reader``) builds the spans
and groups them into ``Trace`` objects.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._internal.export.otlp_json import decode_any_value
from .diagnostics import Diagnostics

try:  # the optional fast decoder (pip install 'ragtrace[cli]')
    from . import otlp_msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None  # type: ignore[assignment]
_Raw: Any = _msgspec.Raw if _msgspec is not None else ()

# Phoenix's snake_case AnyValue keys -> OTLP/JSON's camelCase ones
_SNAKE = {
    "string_value": "stringValue",
    "bool_value": "boolValue",
    "int_value": "intValue",
    "double_value": "doubleValue",
    "array_value": "arrayValue",
    "kvlist_value": "kvlistValue",
    "bytes_value": "bytesValue",
}
_CAMEL = frozenset(_SNAKE.values())


class BadValue(ValueError):
    """An attribute value that isn't a valid OTLP/JSON AnyValue."""


def _camel(value: Any) -> dict[str, Any]:
    """A snake_case (Phoenix) AnyValue as the camelCase one ``decode_any_value`` reads."""
    if not isinstance(value, dict):
        return {}
    for key, item in value.items():
        if item is None:
            continue
        if key in _CAMEL:
            return {key: item}
        camel = _SNAKE.get(key)
        if camel is None:
            continue
        if camel == "arrayValue":
            return {camel: {"values": [_camel(v) for v in (item or {}).get("values") or ()]}}
        if camel == "kvlistValue":
            pairs = [{"key": kv.get("key"), "value": _camel(kv.get("value"))} for kv in (item or {}).get("values") or ()]
            return {camel: {"values": pairs}}
        return {camel: item}
    return {}


def _fast(raw: dict[str, Any]) -> Any:
    """The hottest shapes (a one-key scalar; an array of strings, ints or bools), or _SLOW.

    Exactly what ``decode_any_value`` gives for them; anything unusual (extra keys, mixed or
    malformed items) is _SLOW, and ``decode_any_value`` decides, warnings included.
    """
    value = raw.get("stringValue")
    if value is not None:
        return value if len(raw) == 1 else _SLOW
    if len(raw) != 1:
        return _SLOW
    array = raw.get("arrayValue")
    if array is not None:
        if type(array) is not dict:
            return _SLOW
        items = array.get("values")
        if not items:
            return [] if len(array) <= 1 else _SLOW
        try:
            first = items[0]
            if "stringValue" in first:
                out = [item["stringValue"] for item in items]
                for item in out:
                    if type(item) is not str:
                        return _SLOW
                return out
            if "intValue" in first:
                out = [int(item["intValue"]) for item in items if len(item) == 1]
            elif "boolValue" in first:
                out = [bool(item["boolValue"]) for item in items if len(item) == 1]
            else:
                return _SLOW
            return out if len(out) == len(items) else _SLOW
        except (KeyError, TypeError, ValueError):
            return _SLOW
    value = raw.get("intValue")
    if value is not None:
        try:
            return int(value)
        except (TypeError, ValueError):
            return _SLOW
    value = raw.get("doubleValue")
    if value is not None:
        try:
            return float(value)
        except (TypeError, ValueError):
            return _SLOW
    value = raw.get("boolValue")
    if value is not None:
        return bool(value)
    return _SLOW


_SLOW = object()
if _msgspec is not None:
    _raw_decode = _msgspec.raw_decoder
    _string_value, _int_value = _msgspec.string_value, _msgspec.int_value
    _bool_value, _number_value, _UNSET = _msgspec.bool_value, _msgspec.number_value, _msgspec.UNSET
    _string_array, _int_array, _bool_array = _msgspec.string_array, _msgspec.int_array, _msgspec.bool_array
    _RAW_ERRORS: tuple[type[Exception], ...] = (_msgspec.DecodeError, _msgspec.ValidationError, RecursionError)
else:  # pragma: no cover - depends on the environment
    _RAW_ERRORS = ()
_RAW_OR_VALUE_ERRORS = (*_RAW_ERRORS, ValueError)  # a tuple, not a starred except clause: Cython compiles this module


def decode_value(raw: Any) -> Any:
    """An OTLP/JSON AnyValue (camelCase, or Phoenix's snake_case) as a Python value.

    ``raw`` is a parsed JSON object, or an unparsed ``msgspec.Raw`` slice (the fast decoder).
    Common shapes take a fast path; everything else goes through ``otlp_json.decode_any_value``.
    """
    if type(raw) is _Raw:
        try:
            raw = _raw_decode(raw)
        except _RAW_ERRORS:
            try:
                raw = _msgspec.load(raw)  # type: ignore[union-attr]  # what msgspec rejects and json accepts
            except (ValueError, RecursionError) as error:
                raise BadValue(f"{type(error).__name__}: {error}") from None
    if not raw:
        return None
    if type(raw) is dict:
        value = _fast(raw)
        if value is not _SLOW:
            return value
    try:
        value = decode_any_value(raw)
        if value is None:
            value = decode_any_value(_camel(raw))
        return value
    except (ValueError, TypeError, AttributeError, KeyError, binascii.Error, RecursionError) as error:
        raise BadValue(f"{type(error).__name__}: {error}") from None


@dataclass(slots=True, eq=False)
class Source:
    """One input file, as named in warnings."""

    name: str
    diagnostics: Diagnostics


@dataclass(slots=True, eq=False)
class Span:
    """One span; ``attrs`` maps keys to raw AnyValues (decode with ``get``).

    A raw value is a parsed JSON object (``json`` decoder) or an unparsed ``msgspec.Raw`` slice
    (fast decoder); so are ``raw_events``. Read both through ``get`` (or the typed ``get_str``,
    ``get_int``, ``get_bool``, ``get_number``, ``get_list``), ``has``, ``events`` and
    ``event_attributes``, never directly, and the decoder makes no difference.
    """

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    raw_events: Any
    local_root: bool
    source: Source
    line: int

    @property
    def where(self) -> str:
        return f"{self.source.name}:{self.line}"

    @property
    def events(self) -> Any:
        """The span's events as parsed JSON (normally a list of objects), or None."""
        events = self.raw_events
        if type(events) is _Raw:
            try:
                events = _msgspec.load(events)  # type: ignore[union-attr]
            except (ValueError, RecursionError):
                events = None
            self.raw_events = events = events or None
        return events

    def detach(self) -> None:
        """Copy raw slices so the span no longer keeps the line it was read from in memory."""
        detach = _msgspec.detach  # type: ignore[union-attr]
        self.attrs = {key: detach(value) for key, value in self.attrs.items()}
        self.raw_events = detach(self.raw_events)

    def get(self, key: str, default: Any = None) -> Any:
        """The decoded value of attribute ``key``; a bad value is a warning and ``default``."""
        raw = self.attrs.get(key)
        if raw is None:
            return default
        # the common shapes inline (this is the report's hottest call); decode_value has the rest
        if type(raw) is _Raw:
            try:
                raw = _raw_decode(raw)
            except _RAW_ERRORS:
                pass  # decode_value retries it with json, and says why when that fails too
        if type(raw) is dict and raw:
            value = raw.get("stringValue")
            if value is not None and len(raw) == 1:
                return value
            value = _fast(raw)
            if value is not _SLOW:
                return value  # never None
        try:
            value = decode_value(raw)
        except BadValue as error:
            self.source.diagnostics.warn("bad attribute", self.where, f"span {self.span_id}: attribute {key} is not a valid value ({error}); ignored")
            return default
        return default if value is None else value

    def has(self, key: str) -> bool:
        return key in self.attrs

    # Typed reads: the same results as ``get`` followed by a type check, faster for msgspec.Raw
    # values of the canonical shape (see otlp_msgspec); every other value takes ``get``.
    def get_str(self, key: str) -> str | None:
        """The value of ``key`` if it is a string, else None."""
        raw = self.attrs.get(key)
        if raw is None:
            return None
        if type(raw) is _Raw:
            try:
                return _string_value(raw).stringValue
            except _RAW_ERRORS:
                pass
        value = self.get(key)
        return value if type(value) is str else None

    def get_int(self, key: str) -> int | None:
        """The value of ``key`` if it is an int (or an integral float), else None."""
        raw = self.attrs.get(key)
        if raw is None:
            return None
        if type(raw) is _Raw:
            try:
                return int(_int_value(raw).intValue)
            except _RAW_OR_VALUE_ERRORS:
                pass
        value = self.get(key)
        if type(value) is int:
            return value
        if type(value) is float and value.is_integer():
            return int(value)
        return None

    def get_bool(self, key: str) -> bool | None:
        """The value of ``key`` if it is a bool, else None."""
        raw = self.attrs.get(key)
        if raw is None:
            return None
        if type(raw) is _Raw:
            try:
                return _bool_value(raw).boolValue
            except _RAW_ERRORS:
                pass
        value = self.get(key)
        return value if type(value) is bool else None

    def get_number(self, key: str) -> Any:
        """``get(key)``, faster for an int or a double (the recorded figures)."""
        raw = self.attrs.get(key)
        if raw is None:
            return None
        if type(raw) is _Raw:
            try:
                number = _number_value(raw)
            except _RAW_ERRORS:
                pass
            else:
                whole, double = number.intValue, number.doubleValue
                if double is _UNSET:
                    if whole is not _UNSET:
                        try:
                            return int(whole)
                        except ValueError:
                            pass
                elif whole is _UNSET:
                    return double
        return self.get(key)

    def get_list(self, key: str, kind: type = str) -> list[Any] | None:
        """The value of ``key`` if it is a list (of any items), else None.

        ``kind`` (str, int or bool) is the item type expected, which is tried first.
        """
        raw = self.attrs.get(key)
        if raw is None:
            return None
        if type(raw) is _Raw:
            try:
                if kind is str:
                    return [item.stringValue for item in _string_array(raw).arrayValue.values]
                if kind is int:
                    return [int(item.intValue) for item in _int_array(raw).arrayValue.values]
                if kind is bool:
                    return [item.boolValue for item in _bool_array(raw).arrayValue.values]
            except _RAW_OR_VALUE_ERRORS:
                pass
        value = self.get(key)
        return value if type(value) is list else None

    def get_aligned(self, key: str, kind: type, length: int) -> list[Any] | None:
        """The value of ``key`` if it is a list of ``length`` items all of exactly type ``kind``
        (str, int or bool; so no bools for int), else None: ``get_list`` and a check, in one."""
        raw = self.attrs.get(key)
        if raw is None:
            return None
        if type(raw) is _Raw:
            try:
                if kind is str:
                    values = [item.stringValue for item in _string_array(raw).arrayValue.values]
                elif kind is int:
                    values = [int(item.intValue) for item in _int_array(raw).arrayValue.values]
                else:
                    values = [item.boolValue for item in _bool_array(raw).arrayValue.values]
            except _RAW_OR_VALUE_ERRORS:
                pass
            else:  # the typed decoders give exactly str, int and bool items
                return values if len(values) == length else None
        values = self.get(key)
        if type(values) is not list or len(values) != length:
            return None
        for value in values:
            if type(value) is not kind:
                return None
        return values

    def event_attributes(self, name: str) -> Iterator[dict[str, Any]]:
        """The decoded attributes of every event called ``name``."""
        for event in self.events or ():
            if isinstance(event, dict) and event.get("name") == name:
                out = {}
                for kv in event.get("attributes") or ():
                    try:
                        out[kv["key"]] = decode_value(kv.get("value"))
                    except (BadValue, KeyError, TypeError):
                        continue
                yield out


@dataclass(slots=True, eq=False)
class Trace:
    """The spans of one trace id, in arrival order. ``has_root``: a root span arrived."""

    trace_id: str
    spans: list[Span]
    has_root: bool
    evicted: bool = False
