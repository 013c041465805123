"""Streaming OTLP/JSON input: files -> spans -> finished traces, in bounded memory.

Three input shapes, detected per file, each optionally gzipped (detected by magic bytes):

* JSON lines of ``ExportTraceServiceRequest`` objects: ragtrace's ``JsonLinesExporter`` and the
  OpenTelemetry Collector's file exporter (``{"resourceSpans": [...]}`` per line);
* a single OTLP/JSON document, one line or pretty-printed: an export request, a list of them, or
  Phoenix's ``/v1/projects/{p}/spans/otlpv1`` page (``{"data": [span, ...]}`` with snake_case keys,
  ``null`` for unused value kinds and ints as numbers);
* any mix of those across files.

Spans are joined by trace id across lines and files. A trace is finished once the line (or
document) holding its root span (no parent, or a remote parent) has been read, or ``grace_spans``
spans later when asked (for inputs where children may come after their root: files given newest
first, paged Phoenix exports), or at the end of input. Pending traces are capped at
``max_pending_spans`` spans: the oldest are finished early, with a warning, so memory stays flat
whatever the input size. Attribute values are kept as raw OTLP ``AnyValue`` objects and decoded
only when asked for (``Span.get``).

Two JSON decoders give the same spans, values and warnings (the tests run every CLI test with
both): the standard library's ``json``, and, when ``msgspec`` is installed (in the ``cli`` extra),
``otlp_msgspec``, which decodes canonical export-request lines into typed structs and keeps every
attribute value as an unparsed slice of the line until it is asked for. Lines of any other shape
go through ``json`` either way. ``decoder="auto"`` (the default) uses ``msgspec`` when it can be
imported.

Nothing here raises on bad input except for files that can't be opened at all (``InputError``);
everything else is a warning with ``file:line``.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import os
import zlib
from array import array
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .._internal.otlp_json import decode_any_value
from .diagnostics import Diagnostics, Progress

try:  # the optional fast decoder (pip install 'ragtrace[cli]')
    from . import otlp_msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None  # type: ignore[assignment]
_Raw: Any = _msgspec.Raw if _msgspec is not None else ()

DECODER_AUTO = "auto"
DECODER_MSGSPEC = "msgspec"
DECODER_JSON = "json"
DECODERS = (DECODER_AUTO, DECODER_MSGSPEC, DECODER_JSON)
AUTO_DECODER = DECODER_MSGSPEC if _msgspec is not None else DECODER_JSON  # what "auto" means here

MAX_LINE_BYTES = 64 * 1024 * 1024  # longer lines are skipped with a warning
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024  # a single (non-lines) JSON document is parsed whole
DEFAULT_GRACE_SPANS = 0  # finish a trace right after the line (or document) holding its root
DEFAULT_MAX_PENDING_SPANS = 100_000
_FINISHED_MEMORY = 20_000  # finished trace ids remembered, to recognise late spans (bounded)
_READ_BUFFER = 1 << 20  # export lines are often MBs long; readline copies far less with a large buffer
_READ_CHUNK = 4 << 20  # plain files are read in chunks this large and split into lines with bytes.find

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# opentelemetry.proto.trace.v1.SpanFlags: the parent is known to be remote (span is a local root)
_REMOTE_PARENT = 0x100 | 0x200

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


class InputError(Exception):
    """An input file that can't be opened or read at all; the message is one line."""


class BadValue(ValueError):
    """An attribute value that isn't a valid OTLP/JSON AnyValue."""


def fast_decoder_available() -> bool:
    """Whether ``msgspec`` is installed, so ``decoder="msgspec"`` (and "auto") can use it."""
    return _msgspec is not None


def resolve_decoder(decoder: str) -> str:
    """"auto" -> "msgspec" when available, else "json"; raises ValueError for an unusable choice."""
    if decoder == DECODER_AUTO:
        decoder = AUTO_DECODER
    if decoder == DECODER_MSGSPEC and _msgspec is None:
        raise ValueError("the msgspec decoder needs msgspec: pip install 'ragtrace[cli]'")
    if decoder not in DECODERS:
        raise ValueError(f"unknown JSON decoder {decoder!r}: expected one of {', '.join(DECODERS)}")
    return decoder


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
    _RAW_ERRORS: tuple[type[Exception], ...] = (_msgspec.DecodeError, _msgspec.ValidationError)
else:  # pragma: no cover - depends on the environment
    _RAW_ERRORS = ()


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
            except ValueError as error:
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
            except ValueError:
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
            except (*_RAW_ERRORS, ValueError):
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
            except (*_RAW_ERRORS, ValueError):
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
            except (*_RAW_ERRORS, ValueError):
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


@dataclass(slots=True, eq=False)
class _Pending:
    spans: list[Span] = field(default_factory=list)
    root_seen: bool = False


@dataclass(slots=True)
class ReadStats:
    files: int = 0
    bytes: int = 0
    lines: int = 0
    spans: int = 0
    traces: int = 0
    late_spans: int = 0
    evicted_traces: int = 0


def resolve_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files to read, in order: files as given, directories as their sorted visible files.

    Raises ``InputError`` for a path that doesn't exist or can't be read.
    """
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        try:
            if path.is_dir():
                entries = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
                if not entries:
                    raise InputError(f"cannot read {path}: the directory holds no files")
                files.extend(entries)
                continue
            with open(path, "rb"):
                pass
        except InputError:
            raise
        except OSError as error:
            raise InputError(f"cannot read {path}: {error.strerror or error}") from None
        files.append(path)
    return files


class _Lines:
    """``readline(limit)``, ``read(size)`` and ``close()`` over a plain file, in large reads.

    ``BufferedReader.readline`` scans for the line end byte by byte and regrows its result for
    lines longer than its buffer; export lines are often megabytes long. Here the file is read
    into one reusable buffer and lines are found with ``bytearray.find`` (memchr), so each line is
    copied once, into the ``bytes`` returned.
    """

    __slots__ = ("_file", "_buffer", "_start", "_end", "_scanned", "_eof")

    def __init__(self, file: IO[bytes], size: int = _READ_CHUNK) -> None:
        self._file = file
        self._buffer = bytearray(min(_READ_CHUNK, max(4096, size + 1)))  # small files, small buffer
        self._start = 0  # the unread bytes are _buffer[_start:_end]
        self._end = 0
        self._scanned = 0  # _buffer[_start:_scanned] holds no newline
        self._eof = False

    def readline(self, limit: int) -> bytes:
        while True:
            buffer, start, end = self._buffer, self._start, self._end
            stop = min(end, start + limit)
            found = buffer.find(b"\n", max(start, self._scanned), stop)
            if found >= 0:
                stop = found + 1
            elif stop - start < limit and not self._eof:
                self._scanned = end
                self._fill()
                continue
            self._start = self._scanned = stop
            with memoryview(buffer) as view:
                return bytes(view[start:stop])

    def _fill(self) -> None:
        """Read more: move the partial line to the front (growing the buffer if it is full)."""
        buffer, start, end = self._buffer, self._start, self._end
        if start:
            buffer[: end - start] = buffer[start:end]
            end -= start
            self._scanned -= start
            self._start = 0
        if end == len(buffer):
            buffer.extend(bytes(len(buffer)))
        with memoryview(buffer) as view:
            got = self._file.readinto(view[end:])
        if got:
            self._end = end + got
        else:
            self._end = end
            self._eof = True

    def read(self, size: int) -> bytes:
        start, end = self._start, self._end
        with memoryview(self._buffer) as view:
            head = bytes(view[start : min(end, start + size)])
        self._start = self._scanned = start + len(head)
        if len(head) >= size or self._eof:
            return head
        self._start = self._end = self._scanned = 0
        return head + self._file.read(size - len(head))

    def close(self) -> None:
        self._file.close()


class _FinishedTraces:
    """The ids of the last ``capacity`` finished traces, to recognise late spans.

    Kept in flat arrays (an open-addressing table of positions in a ring of 32-byte ids) instead
    of a set of strings: tens of thousands of long-lived small objects, scattered among the
    millions of short-lived ones the reader allocates, slowed the whole report down by a fifth as
    it went on (memory locality). Slots are found by the id string's own (cached) hash; exact: a
    candidate is confirmed by comparing the id bytes. Ids
    that are not 32 ASCII characters (hex trace ids are) go to a small ordered dict instead.
    """

    __slots__ = ("_capacity", "_mask", "_table", "_hashes", "_ids", "_next", "_full", "_other")
    _WIDTH = 32

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity = max(1, capacity)
        size = 1 << max(4, (capacity * 3).bit_length())  # load factor under 1/3
        self._mask = size - 1
        self._table = array("q", [-1]) * size  # ring position of the id in each slot; -1: empty
        self._hashes = array("q", [0]) * capacity  # hash(id string) at each ring position
        self._ids = bytearray(self._WIDTH * capacity)
        self._next = 0
        self._full = False
        self._other: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, trace_id: str) -> bool:
        if len(trace_id) != self._WIDTH or not trace_id.isascii():
            return trace_id in self._other
        return self._find(hash(trace_id), trace_id) >= 0

    def _find(self, h: int, trace_id: str) -> int:
        """The table slot holding ``trace_id`` (whose hash is ``h``), or -1.

        The str's own hash is used (cached on the string: the reader has already hashed it as a
        dict key); the id is encoded only to confirm a candidate.
        """
        table, hashes, ids, mask, width = self._table, self._hashes, self._ids, self._mask, self._WIDTH
        i = h & mask
        key = None
        while True:
            position = table[i]
            if position < 0:
                return -1
            if hashes[position] == h:
                if key is None:
                    key = trace_id.encode("ascii")
                if ids[position * width : position * width + width] == key:
                    return i
            i = (i + 1) & mask

    def add(self, trace_id: str) -> None:
        if len(trace_id) != self._WIDTH or not trace_id.isascii():
            self._other[trace_id] = None
            if len(self._other) > self._capacity:
                self._other.popitem(last=False)
            return
        h = hash(trace_id)
        if self._find(h, trace_id) >= 0:
            return
        key = trace_id.encode("ascii")
        position, width = self._next, self._WIDTH
        if self._full:
            self._remove(position)
        self._ids[position * width : position * width + width] = key
        self._hashes[position] = h
        table, mask = self._table, self._mask
        i = h & mask
        while table[i] >= 0:
            i = (i + 1) & mask
        table[i] = position
        self._next = position + 1
        if self._next == self._capacity:
            self._next, self._full = 0, True

    def _remove(self, position: int) -> None:
        """Drop the id at ring ``position`` from the table (linear probing, backward-shift deletion)."""
        table, hashes, mask = self._table, self._hashes, self._mask
        i = hashes[position] & mask
        while table[i] != position:
            i = (i + 1) & mask
        j = i
        while True:
            j = (j + 1) & mask
            moved = table[j]
            if moved < 0:
                break
            home = hashes[moved] & mask
            # move the entry back into the hole unless its home lies cyclically in (i, j]
            if (i < j and (home <= i or home > j)) or (i > j and home <= i and home > j):
                table[i] = moved
                i = j
        table[i] = -1


def _hex_id(value: Any, hex_length: int) -> str:
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


def _json_error(error: ValueError) -> str:
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8"
    message = getattr(error, "msg", None) or str(error)
    column = getattr(error, "colno", None)
    return f"column {column}: {message}" if column else message


def _nanos(value: Any) -> int:
    if not value:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a time of 1e400 (inf)
        return 0


class TraceReader:
    """Iterate finished traces from OTLP/JSON files (see the module docstring)."""

    def __init__(
        self,
        paths: Iterable[str | os.PathLike[str]],
        diagnostics: Diagnostics,
        *,
        progress: Progress | None = None,
        grace_spans: int = DEFAULT_GRACE_SPANS,
        max_pending_spans: int = DEFAULT_MAX_PENDING_SPANS,
        decoder: str = DECODER_AUTO,
    ) -> None:
        self.files = resolve_inputs(paths)
        self.diagnostics = diagnostics
        self.progress = progress
        self.grace_spans = max(0, grace_spans)
        self.max_pending_spans = max(1, max_pending_spans)
        self.decoder = resolve_decoder(decoder)
        self.stats = ReadStats()
        self._pending: dict[str, _Pending] = {}
        self._pending_spans = 0
        self._ready: deque[tuple[int, str]] = deque()
        self._finished = _FinishedTraces(_FINISHED_MEMORY)

    @staticmethod
    def total_bytes(files: Iterable[Path]) -> int:
        total = 0
        for path in files:
            try:
                total += path.stat().st_size
            except OSError:
                pass
        return total

    # -- traces ------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Trace]:
        for path in self.files:
            yield from self._read_file(path)
        for trace_id in list(self._pending):
            yield self._finish(trace_id)

    def _add(self, raw: Any, source: Source, line: int) -> None:
        if type(raw) is not dict:
            self.diagnostics.warn("malformed span", f"{source.name}:{line}", "a span is not a JSON object; skipped")
            return
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
        trace_id = _hex_id(trace_id, 32)
        span_id = _hex_id(span_id, 16)
        if not trace_id or not span_id:
            self.diagnostics.warn("malformed span", f"{source.name}:{line}", "a span has no traceId or spanId; skipped")
            return
        parent_id = _hex_id(parent_id, 16) if parent_id else ""
        try:
            attrs = {kv["key"]: kv.get("value") for kv in get("attributes") or ()}
        except (KeyError, TypeError, AttributeError):
            attrs = {}
            for kv in get("attributes") or ():
                if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                    attrs[kv["key"]] = kv.get("value")
            self.diagnostics.warn("malformed span", f"{source.name}:{line}", f"span {span_id}: malformed attribute entries skipped")
        flags = get("flags")
        local_root = not parent_id or (type(flags) is int and flags & _REMOTE_PARENT == _REMOTE_PARENT)
        name = get("name")
        self._append(
            Span(
                trace_id,
                span_id,
                parent_id,
                name if type(name) is str else "",
                _nanos(start),
                _nanos(end),
                attrs,
                get("events") or None,
                local_root,
                source,
                line,
            )
        )

    def _append(self, span: Span) -> bool:
        """Join ``span`` to its pending trace; False when it arrived after its trace was finished."""
        trace_id, span_id, local_root = span.trace_id, span.span_id, span.local_root
        self.stats.spans += 1
        pending = self._pending.get(trace_id)
        if pending is None:
            if trace_id in self._finished:
                self.stats.late_spans += 1
                self.diagnostics.warn(
                    "late span",
                    span.where,
                    f"span {span_id} of trace {trace_id} arrived after its trace was finished and reported; "
                    "it is left out (pass files oldest first, or raise --grace-spans)",
                )
                return False
            pending = self._pending[trace_id] = _Pending()
        pending.spans.append(span)
        self._pending_spans += 1
        if local_root and not pending.root_seen:
            pending.root_seen = True
            self._ready.append((self.stats.spans + self.grace_spans, trace_id))
        return True

    def _flush(self) -> Iterator[Trace]:
        """Traces whose root arrived long enough ago, then the oldest ones if too many are pending."""
        ready, seen = self._ready, self.stats.spans
        while ready and ready[0][0] <= seen:
            _, trace_id = ready.popleft()
            if trace_id in self._pending:
                yield self._finish(trace_id)
        while self._pending_spans > self.max_pending_spans and self._pending:
            trace_id = next(iter(self._pending))
            pending = self._pending[trace_id]
            if not pending.root_seen:
                first = pending.spans[0]
                self.stats.evicted_traces += 1
                self.diagnostics.warn(
                    "trace finished early",
                    first.where,
                    f"trace {trace_id}: no root span after {self.max_pending_spans:,} pending spans; "
                    "reported without it (raise --max-pending-spans if its root comes much later)",
                )
            yield self._finish(trace_id, evicted=not pending.root_seen)

    def _finish(self, trace_id: str, *, evicted: bool = False) -> Trace:
        pending = self._pending.pop(trace_id)
        self._pending_spans -= len(pending.spans)
        self._finished.add(trace_id)
        self.stats.traces += 1
        return Trace(trace_id, pending.spans, pending.root_seen, evicted)

    # -- documents ---------------------------------------------------------------------------------
    def _walk(self, document: Any, source: Source, line: int) -> None:
        """Every span of one parsed JSON value (an export request, a Phoenix page, a list...)."""
        if type(document) is list:
            for item in document:
                if type(item) is dict and ("traceId" in item or "trace_id" in item):
                    self._add(item, source, line)
                else:
                    self._walk(item, source, line)
            return
        if type(document) is not dict:
            self.diagnostics.warn("not a trace export", f"{source.name}:{line}", "a JSON value that is not an OTLP trace export; skipped")
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
                    for raw in scope.get("spans") or ():
                        self._add(raw, source, line)
            return
        data = document.get("data")
        if type(data) is list:  # Phoenix's /spans/otlpv1 page
            self._walk(data, source, line)
            return
        if "traceId" in document or "trace_id" in document:
            self._add(document, source, line)
            return
        if document:
            self.diagnostics.warn(
                "not a trace export",
                f"{source.name}:{line}",
                "a JSON object without resourceSpans (metrics or logs?); skipped",
            )

    def _ingest(self, document: Any, source: Source, line: int) -> Iterator[Trace]:
        try:
            self._walk(document, source, line)
        except (AttributeError, TypeError, KeyError) as error:
            self.diagnostics.warn(
                "malformed export",
                f"{source.name}:{line}",
                f"unexpected structure in an export request ({type(error).__name__}: {error}); the rest of it is skipped",
            )
        yield from self._flush()

    def _ingest_fast(self, spans: list[Any], source: Source, line: int) -> Iterator[Trace]:
        """The span structs of one line decoded by ``otlp_msgspec``: ``_add`` and ``_ingest`` in one loop.

        Attribute values stay ``msgspec.Raw`` slices of the line; spans whose trace is still open
        once the line is done are copied out of it (``Span.detach``), so memory stays flat.
        """
        append = self._append
        sliced: list[Span] = []
        for raw in spans:
            trace_id = raw.traceId
            if type(trace_id) is not str or len(trace_id) != 32:
                trace_id = _hex_id(trace_id, 32)
            span_id = raw.spanId
            if type(span_id) is not str or len(span_id) != 16:
                span_id = _hex_id(span_id, 16)
            if not trace_id or not span_id:
                self.diagnostics.warn("malformed span", f"{source.name}:{line}", "a span has no traceId or spanId; skipped")
                continue
            parent_id = raw.parentSpanId
            if parent_id:
                if type(parent_id) is not str or len(parent_id) != 16:
                    parent_id = _hex_id(parent_id, 16)
            else:
                parent_id = ""
            attributes = raw.attributes
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
            span = Span(
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
            if append(span):
                sliced.append(span)
        yield from self._flush()
        pending = self._pending
        if pending:
            for span in sliced:
                if span.trace_id in pending:
                    span.detach()

    # -- files -------------------------------------------------------------------------------------
    def _open(self, path: Path) -> tuple[IO[bytes], IO[bytes]]:
        """(stream to read lines from, raw file for the progress position)."""
        try:
            raw = open(path, "rb", buffering=_READ_BUFFER)  # noqa: SIM115 - closed by _read_file
        except OSError as error:
            raise InputError(f"cannot read {path}: {error.strerror or error}") from None
        try:
            magic = raw.peek(4)[:4] if hasattr(raw, "peek") else b""
        except OSError as error:
            raw.close()
            raise InputError(f"cannot read {path}: {error.strerror or error}") from None
        if magic.startswith(_GZIP_MAGIC):
            return gzip.GzipFile(fileobj=raw, mode="rb"), raw  # type: ignore[return-value]
        if magic.startswith(_ZSTD_MAGIC):
            raw.close()
            raise InputError(f"cannot read {path}: zstd-compressed; decompress it first (zstd -d)")
        try:
            size = os.fstat(raw.fileno()).st_size
        except (OSError, ValueError):
            size = _READ_CHUNK
        return _Lines(raw, size), raw  # type: ignore[return-value]

    def _read_file(self, path: Path) -> Iterator[Trace]:
        stream, raw = self._open(path)
        source = Source(str(path), self.diagnostics)
        self.stats.files += 1
        try:
            yield from self._read_stream(stream, raw, source)
        finally:
            stream.close()
            raw.close()
            try:
                size = path.stat().st_size
            except OSError:
                size = 0
            self.stats.bytes += size
            if self.progress is not None:
                self.progress.file_done(size)

    def _read_stream(self, stream: IO[bytes], raw: IO[bytes], source: Source) -> Iterator[Trace]:
        line_number = 0
        first = True
        progress = self.progress
        loads = json.loads
        fast = _msgspec.decode_request if self.decoder == DECODER_MSGSPEC else None  # type: ignore[union-attr]
        while True:
            try:
                line = stream.readline(MAX_LINE_BYTES)
            except (EOFError, OSError, zlib.error) as error:
                self.diagnostics.warn(
                    "truncated file",
                    f"{source.name}:{line_number + 1}",
                    f"truncated or corrupt compressed data ({error}); the rest of the file is skipped",
                )
                return
            if not line:
                return
            line_number += 1
            self.stats.lines += 1
            if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
                self.diagnostics.warn(
                    "huge line",
                    f"{source.name}:{line_number}",
                    f"line longer than {MAX_LINE_BYTES // 1_048_576} MiB; skipped",
                )
                if not self._skip_rest_of_line(stream, source, line_number):
                    return
                continue
            if fast is not None:
                spans = fast(line)
                if spans is not None:
                    first = False
                    yield from self._ingest_fast(spans, source, line_number)
                    if progress is not None:
                        progress.update(raw.tell(), self.stats.spans)
                    continue
            if first:
                if not line.strip():
                    continue
                first = False
                try:
                    document = loads(line)
                except ValueError:
                    if line.lstrip()[:1] in (b"{", b"["):
                        yield from self._read_document(line, stream, source)
                        return
                    document = None
                    self._malformed(source, line_number, line)
                if document is not None:
                    yield from self._ingest(document, source, line_number)
                continue
            try:
                document = loads(line)
            except ValueError:
                if line.strip():
                    self._malformed(source, line_number, line)
                continue
            yield from self._ingest(document, source, line_number)
            if progress is not None:
                progress.update(raw.tell(), self.stats.spans)

    def _skip_rest_of_line(self, stream: IO[bytes], source: Source, line_number: int) -> bool:
        while True:
            try:
                piece = stream.readline(MAX_LINE_BYTES)
            except (EOFError, OSError, zlib.error):
                return False
            if not piece:
                return False
            if piece.endswith(b"\n"):
                return True

    def _malformed(self, source: Source, line_number: int, line: bytes) -> None:
        try:
            json.loads(line)
        except ValueError as error:
            reason = _json_error(error)
        else:  # pragma: no cover - only called for lines that failed to parse
            return
        self.diagnostics.warn("malformed line", f"{source.name}:{line_number}", f"not valid JSON ({reason}); line skipped")

    def _read_document(self, first_line: bytes, stream: IO[bytes], source: Source) -> Iterator[Trace]:
        """The file is one JSON document spread over several lines (e.g. pretty-printed)."""
        try:
            rest = stream.read(MAX_DOCUMENT_BYTES)
        except (EOFError, OSError, zlib.error) as error:
            self.diagnostics.warn("truncated file", f"{source.name}:1", f"truncated or corrupt compressed data ({error}); file skipped")
            return
        text = first_line + rest
        if len(text) > MAX_DOCUMENT_BYTES:
            self.diagnostics.warn(
                "huge document",
                f"{source.name}:1",
                f"a single JSON document larger than {MAX_DOCUMENT_BYTES // 1_048_576} MiB; file skipped (use JSON lines)",
            )
            return
        self.stats.lines += text.count(b"\n")
        try:
            document = json.loads(text)
        except ValueError as error:
            where = f"{source.name}:{getattr(error, 'lineno', 1)}"
            self.diagnostics.warn(
                "malformed document",
                where,
                f"neither JSON lines nor one JSON document ({_json_error(error)}); reading it line by line",
            )
            for number, line in enumerate(io.BytesIO(text), start=1):
                if not line.strip():
                    continue
                try:
                    parsed = json.loads(line)
                except ValueError:
                    self._malformed(source, number, line)
                    continue
                yield from self._ingest(parsed, source, number)
            return
        yield from self._ingest(document, source, 1)
