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
only when asked for (``Span.get``, in ``spans``).

Two JSON decoders give the same spans, values and warnings (the tests run every CLI test with
both): the standard library's ``json``, and, when ``msgspec`` is installed (in the ``cli`` extra),
``otlp_msgspec``, which decodes canonical export-request lines into typed structs and keeps every
attribute value as an unparsed slice of the line until it is asked for. Lines of any other shape
go through ``json`` either way. ``decoder="auto"`` (the default) uses ``msgspec`` when it can be
imported. With ``msgspec``, long lines (``PIECEWISE_BYTES``) are read a few dozen spans at a time
and each trace is finished as soon as the line holds no more of its spans, while its objects are
still in the CPU's cache; the traces, their order and the warnings are the same.

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
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .._internal.names import EVALUATION_SPAN_NAME
from .diagnostics import Diagnostics, Progress
from .finished import FinishedTraces
from .linefile import READ_CHUNK, Lines
from .spans import Source, Span, Trace

try:  # the optional fast decoder (pip install 'ragtrace[cli]')
    from . import otlp_msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None  # type: ignore[assignment]
_MSGSPEC_ERRORS: tuple[type[Exception], ...] = (_msgspec.DecodeError, _msgspec.ValidationError) if _msgspec is not None else ()

DECODER_AUTO = "auto"
DECODER_MSGSPEC = "msgspec"
DECODER_JSON = "json"
DECODERS = (DECODER_AUTO, DECODER_MSGSPEC, DECODER_JSON)
AUTO_DECODER = DECODER_MSGSPEC if _msgspec is not None else DECODER_JSON  # what "auto" means here

MAX_LINE_BYTES = 64 * 1024 * 1024  # longer lines are skipped with a warning
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024  # a single (non-lines) JSON document is parsed whole
DEFAULT_GRACE_SPANS = 0  # finish a trace right after the line (or document) holding its root
DEFAULT_MAX_PENDING_SPANS = 100_000
_SCORE_SPAN = EVALUATION_SPAN_NAME + " "  # record_score's spans: joined to their runs by ScoreJoin
_FINISHED_MEMORY = 20_000  # finished trace ids remembered, to recognise late spans (bounded)
PIECEWISE_BYTES = 256 * 1024  # fast-decoder lines at least this long are read a few spans at a time
_PIECE_SPANS = 64  # ...this many (see TraceReader._ingest_pieces)
_READ_BUFFER = 1 << 20  # the raw file's buffer: gzip inputs are read through it (plain files by linefile.Lines)

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# opentelemetry.proto.trace.v1.SpanFlags: the parent is known to be remote (span is a local root)
_REMOTE_PARENT = 0x100 | 0x200

class InputError(Exception):
    """An input file that can't be opened or read at all; the message is one line."""


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
        self._finished = FinishedTraces(_FINISHED_MEMORY)

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
            well_formed = all(type(key) is str for key in attrs)
        except (KeyError, TypeError, AttributeError):
            well_formed = False
        if not well_formed:
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
        # a score (record_score) may come before or after its run, from a judge whose span has a
        # remote parent: it is never late and never finishes a trace (ScoreJoin joins it)
        score = local_root and span.name.startswith(_SCORE_SPAN)
        if score:
            local_root = False
        if pending is None:
            if trace_id in self._finished and not (score or span.name.startswith(_SCORE_SPAN)):
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
        add = self._add_fast
        sliced: list[Span] = []
        for raw in spans:
            span = add(raw, raw.attributes, source, line)
            if span is not None:
                sliced.append(span)
        yield from self._flush()
        pending = self._pending
        if pending:
            for span in sliced:
                if span.trace_id in pending:
                    span.detach()

    def _ingest_pieces(self, heads: list[Any], source: Source, line: int) -> Iterator[Trace]:
        """A long line decoded by ``otlp_msgspec.decode_heads``: its spans' attributes are decoded and
        the spans read ``_PIECE_SPANS`` at a time.

        The same traces, spans and warnings as ``_ingest_fast`` on the whole line, in the same order,
        but each trace is finished as soon as the line holds no more of its spans. Decoded whole, a
        line of 512 spans is megabytes of objects before its first trace is finished, more than the
        CPU's cache holds; on a host whose cache and memory other processes share, fetching them
        back nearly halved the throughput (docs/cli.md, "Speed").

        Warnings raised while a trace is out (by whoever reads its rows) are held until the line is
        read, so they still come after the line's own. When the typed decode rejects a span's
        attributes, that span and the rest of the line go through ``json``, as ``decode_request``
        would have sent the whole line there, and the spans before it are what ``json`` would have
        made of them too.
        """
        last = {_hex_id(head.traceId, 32): index for index, head in enumerate(heads)}
        ready, pending, diagnostics = self._ready, self._pending, self.diagnostics
        decode, add_fast = _msgspec.decode_attributes, self._add_fast  # type: ignore[union-attr]
        touched: set[str] = set()
        typed = True  # False from the first span whose attributes the typed decode rejects
        count = len(heads)
        try:
            for start in range(0, count, _PIECE_SPANS):
                stop = min(start + _PIECE_SPANS, count)
                for index in range(start, stop):
                    head = heads[index]
                    if typed:
                        try:
                            attributes = decode(head.attributes) if head.attributes is not None else None
                        except _MSGSPEC_ERRORS:
                            typed = False
                    if typed:
                        span = add_fast(head, attributes, source, line)
                        if span is not None:
                            touched.add(span.trace_id)
                    else:  # the head passed msgspec, which is stricter than json: json reads it
                        self._add(_msgspec.parsed_span(head), source, line)  # type: ignore[union-attr]
                while ready and ready[0][0] <= self.stats.spans and last.get(ready[0][1], -1) < stop:
                    trace_id = ready.popleft()[1]
                    if trace_id in pending:
                        diagnostics.holding = True
                        yield self._finish(trace_id)
                        diagnostics.holding = False
        finally:
            diagnostics.holding = False
            diagnostics.release()
        yield from self._flush()
        for trace_id in touched:
            waiting = pending.get(trace_id)
            if waiting is not None:
                for span in waiting.spans:
                    if span.line == line and span.source is source:
                        span.detach()

    def _add_fast(self, raw: Any, attributes: list[Any] | None, source: Source, line: int) -> Span | None:
        """One span struct decoded by ``otlp_msgspec`` and its attribute list, as ``_add`` reads a
        parsed span: the span, if it joined a trace (None when it was malformed or late)."""
        trace_id = raw.traceId
        if type(trace_id) is not str or len(trace_id) != 32:
            trace_id = _hex_id(trace_id, 32)
        span_id = raw.spanId
        if type(span_id) is not str or len(span_id) != 16:
            span_id = _hex_id(span_id, 16)
        if not trace_id or not span_id:
            self.diagnostics.warn("malformed span", f"{source.name}:{line}", "a span has no traceId or spanId; skipped")
            return None
        parent_id = raw.parentSpanId
        if parent_id:
            if type(parent_id) is not str or len(parent_id) != 16:
                parent_id = _hex_id(parent_id, 16)
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
        return span if self._append(span) else None

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
            size = READ_CHUNK
        return Lines(raw, size), raw  # type: ignore[return-value]

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
                traces = None
                if len(line) >= PIECEWISE_BYTES and (heads := _msgspec.decode_heads(line)) is not None:  # type: ignore[union-attr]
                    traces = self._ingest_pieces(heads, source, line_number)
                elif (spans := fast(line)) is not None:
                    traces = self._ingest_fast(spans, source, line_number)
                if traces is not None:
                    first = False
                    yield from traces
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
