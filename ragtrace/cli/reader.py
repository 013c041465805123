"""Streaming OTLP/JSON input: files -> spans -> finished traces, in bounded memory.

Three input shapes, detected per file, each optionally gzipped (detected by magic bytes):

* JSON lines of ``ExportTraceServiceRequest`` objects: ragtrace's ``JsonLinesExporter`` and the
  OpenTelemetry Collector's file exporter (``{"resourceSpans": [...]}`` per line);
* a single OTLP/JSON document, one line or pretty-printed: an export request, a list of them, or
  Phoenix's ``/v1/projects/{p}/spans/otlpv1`` page (``{"data": [span, ...]}`` with snake_case keys,
  ``null`` for unused value kinds and ints as numbers);
* any mix of those across files.

This module reads lines and documents and decodes them; ``inputs`` finds and opens the files,
``ingest`` hands each decoded line's spans (built by ``otlp_spans``) to ``joiner``, which joins spans by trace id across lines
and files and decides when a trace is finished (once the line or document holding its root span
has been read, or ``grace_spans`` spans later when asked, or at the end of input), in bounded
memory. Attribute values are kept as raw OTLP ``AnyValue`` objects and decoded only when asked
for (``Span.get``, in ``spans``).

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

import io
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from . import ingest
from .diagnostics import Diagnostics, Progress
from .inputs import InputError, open_input, resolve_inputs, total_bytes
from .notdata import JunkRun, binary
from .joiner import DEFAULT_GRACE_SPANS, DEFAULT_MAX_PENDING_SPANS, ReadStats, TraceJoiner
from .spans import Source, Trace

try:  # the optional fast decoder (pip install 'ragtrace[cli]')
    from . import otlp_msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None  # type: ignore[assignment]

__all__ = [
    "DECODERS", "DEFAULT_GRACE_SPANS", "DEFAULT_MAX_PENDING_SPANS", "InputError", "ReadStats", "TraceReader",
    "fast_decoder_available", "resolve_decoder",
]

DECODER_AUTO = "auto"
DECODER_MSGSPEC = "msgspec"
DECODER_JSON = "json"
DECODERS = (DECODER_AUTO, DECODER_MSGSPEC, DECODER_JSON)
AUTO_DECODER = DECODER_MSGSPEC if _msgspec is not None else DECODER_JSON  # what "auto" means here

# What one line or document may hold, so memory stays flat whatever the input: bytes, and JSON
# values (a line of millions of tiny objects costs some 25 times its size once parsed). Values are
# counted, as "{", "[" and "," bytes, only in lines from _COUNT_VALUES_FROM bytes on: below that,
# the worst case is small. A 64 MiB line of real spans holds about 3 million.
MAX_LINE_BYTES = 64 * 1024 * 1024  # longer lines are skipped with a warning
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # a single (non-lines) JSON document is parsed whole
MAX_JSON_VALUES = 4_000_000
_COUNT_VALUES_FROM = 4 * 1024 * 1024
MAX_SKIPPED_BYTES = 1 << 30  # a line that goes on longer than this is not trace data
PIECEWISE_BYTES = 256 * 1024  # fast-decoder lines at least this long are read a few spans at a time (ingest.pieces)

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



_MALFORMED = object()  # a line json can't parse


def _values(text: bytes) -> int:
    """An upper bound on the JSON values (objects, arrays, and items after the first) in ``text``."""
    return text.count(b"{") + text.count(b"[") + text.count(b",")


def _json_error(error: ValueError | RecursionError) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8"
    message = getattr(error, "msg", None) or str(error)
    column = getattr(error, "colno", None)
    return f"column {column}: {message}" if column else message


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
        self.decoder = resolve_decoder(decoder)
        self.stats = ReadStats()
        self.joiner = TraceJoiner(diagnostics, self.stats, grace_spans=grace_spans, max_pending_spans=max_pending_spans)

    total_bytes = staticmethod(total_bytes)

    # -- traces ------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Trace]:
        for path in self.files:
            yield from self._read_file(path)
        yield from self.joiner.rest()

    # -- files -------------------------------------------------------------------------------------
    def _read_file(self, path: Path) -> Iterator[Trace]:
        stream, raw = open_input(path)
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
        junk = JunkRun()
        spans_before = self.stats.spans  # to tell whether this file has given any span yet
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
            if line.isspace():
                if (reason := junk.blank(line_number)) is not None:
                    return self._not_trace_data(source, line_number, reason, spans_before)
                continue
            if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
                if (reason := binary(line, line_number) or junk.bad(line_number)) is not None:
                    return self._not_trace_data(source, line_number, reason, spans_before)
                self.diagnostics.warn("huge line", f"{source.name}:{line_number}", f"line longer than {MAX_LINE_BYTES >> 20} MiB; skipped")
                ended = self._skip_rest_of_line(stream)
                if ended is None:
                    reason = f"line {line_number} goes on for more than {MAX_SKIPPED_BYTES >> 20:,} MiB"
                    return self._not_trace_data(source, line_number, reason, spans_before)
                if not ended:
                    return
                continue
            if len(line) >= _COUNT_VALUES_FROM and (values := _values(line)) > MAX_JSON_VALUES:
                junk.bad(line_number)
                self._too_many_values(source, line_number, f"line of {len(line) >> 20} MiB", values)
                continue
            try:
                if fast is not None:
                    traces = None
                    if len(line) >= PIECEWISE_BYTES and (heads := _msgspec.decode_heads(line)) is not None:  # type: ignore[union-attr]
                        traces = ingest.pieces(self.joiner, heads, source, line_number)
                    elif (spans := fast(line)) is not None:
                        if spans and type(spans[0]) is _msgspec.PlainSpan:  # type: ignore[union-attr]
                            fast = _msgspec.decode_plain_request  # type: ignore[union-attr]  # another instrumentation's keys
                        traces = ingest.structs(self.joiner, spans, source, line_number)
                    if traces is not None:
                        first = False
                        junk.good()
                        yield from traces
                        if progress is not None:
                            progress.update(raw.tell(), self.stats.spans)
                        continue
                try:
                    document = loads(line)
                except RecursionError:
                    document = _MALFORMED
                except ValueError:
                    if first and line.lstrip()[:1] in (b"{", b"["):  # the start of one document over many lines
                        yield from self._read_document(line, stream, source)
                        return
                    document = _MALFORMED
                first = False
                if document is _MALFORMED:
                    if (reason := junk.bad(line_number)) is not None:
                        return self._not_trace_data(source, line_number, reason, spans_before)
                    self._malformed(source, line_number, line)
                    continue
                junk.good()
                yield from ingest.parsed(self.joiner, document, source, line_number)
            except RecursionError:  # a safety net: nesting right at the limit, accepted by one decode and not the next
                self._malformed(source, line_number, line, "the rest of the line is skipped")
                continue
            if progress is not None:
                progress.update(raw.tell(), self.stats.spans)

    def _not_trace_data(self, source: Source, line_number: int, reason: str, spans_before: int) -> None:
        """Stop reading a file that is plainly not trace data: an error when it gave no span, else
        the rest of it is skipped with a warning (the zeros a crash leaves at the end of a log)."""
        if self.stats.spans == spans_before:
            raise InputError(f"{source.name}: not trace data: {reason}")
        self.diagnostics.warn("not trace data", f"{source.name}:{line_number}", f"not trace data: {reason}; the rest of the file is skipped")

    def _too_many_values(self, source: Source, line_number: int, what: str, values: int) -> None:
        self.diagnostics.warn(
            "huge line",
            f"{source.name}:{line_number}",
            f"{what} holds more than {MAX_JSON_VALUES:,} JSON values ({values:,}); skipped",
        )

    @staticmethod
    def _skip_rest_of_line(stream: IO[bytes]) -> bool | None:
        """Read past the end of an overlong line: True when the next line can be read, False at the
        end of input, None when the line goes on for more than ``MAX_SKIPPED_BYTES``."""
        skipped = 0
        while skipped < MAX_SKIPPED_BYTES:
            try:
                piece = stream.readline(MAX_LINE_BYTES)
            except (EOFError, OSError, zlib.error):
                return False
            if not piece:
                return False
            if piece.endswith(b"\n"):
                return True
            skipped += len(piece)
        return None

    def _malformed(self, source: Source, line_number: int, line: bytes, outcome: str = "line skipped") -> None:
        try:
            json.loads(line)
        except (ValueError, RecursionError) as error:
            reason = _json_error(error)
        else:
            reason = "nested too deeply"  # the line parses here, one call shallower than where it failed
        self.diagnostics.warn("malformed line", f"{source.name}:{line_number}", f"not valid JSON ({reason}); {outcome}")

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
                f"a single JSON document larger than {MAX_DOCUMENT_BYTES >> 20} MiB; file skipped (use JSON lines)",
            )
            return
        self.stats.lines += text.count(b"\n")
        if len(text) >= _COUNT_VALUES_FROM and (values := _values(text)) > MAX_JSON_VALUES:
            self._too_many_values(source, 1, f"a JSON document of {len(text) >> 20} MiB", values)
            return
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as error:
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
                except (ValueError, RecursionError):
                    self._malformed(source, number, line)
                    continue
                yield from ingest.parsed(self.joiner, parsed, source, number)
            return
        yield from ingest.parsed(self.joiner, document, source, 1)
