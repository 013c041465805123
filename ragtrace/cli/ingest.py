"""Decoded export lines -> spans -> the joiner -> the traces they finish: one function per decoding.

``parsed`` takes a value parsed by ``json``; ``structs`` and ``pieces`` take what ``otlp_msgspec``
decoded (a whole line's span structs, or a long line's heads, read a few dozen spans at a time).
``reader`` reads the files and lines and chooses among them; all three give the same spans,
traces and warnings for the same line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .joiner import TraceJoiner
from .otlp_spans import hex_id, json_span, raw_spans, struct_span
from .spans import Source, Trace

try:  # the optional fast decoder (pip install 'ragtrace[cli]')
    from . import otlp_msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None  # type: ignore[assignment]
_MSGSPEC_ERRORS: tuple[type[Exception], ...] = (_msgspec.DecodeError, _msgspec.ValidationError) if _msgspec is not None else ()

PIECE_SPANS = 64  # spans of a long line whose attributes are decoded together (see ``pieces``)


def parsed(joiner: TraceJoiner, document: Any, source: Source, line: int) -> Iterator[Trace]:
    """The spans of one value parsed by ``json``, then the traces they finish."""
    append = joiner.append
    try:
        for raw in raw_spans(document, source, line):
            span = json_span(raw, source, line)
            if span is not None:
                append(span)
    except (AttributeError, TypeError, KeyError) as error:
        source.diagnostics.warn(
            "malformed export",
            f"{source.name}:{line}",
            f"unexpected structure in an export request ({type(error).__name__}: {error}); the rest of it is skipped",
        )
    yield from joiner.flush()


def structs(joiner: TraceJoiner, spans: list[Any], source: Source, line: int) -> Iterator[Trace]:
    """The span structs of one line decoded by ``otlp_msgspec``, then the traces they finish.

    Attribute values stay ``msgspec.Raw`` slices of the line; spans whose trace is still open
    once the line is done are copied out of it (``Span.detach``), so memory stays flat.
    """
    append = joiner.append
    sliced = []
    for raw in spans:
        span = struct_span(raw, raw.attributes, source, line)
        if span is not None and append(span):
            sliced.append(span)
    yield from joiner.flush()
    pending = joiner.pending
    if pending:
        for span in sliced:
            if span.trace_id in pending:
                span.detach()


def pieces(joiner: TraceJoiner, heads: list[Any], source: Source, line: int) -> Iterator[Trace]:
    """A long line decoded by ``otlp_msgspec.decode_heads``: its spans' attributes are decoded and
    the spans read ``PIECE_SPANS`` at a time.

    The same traces, spans and warnings as ``structs`` on the whole line, in the same order,
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
    last = {hex_id(head.traceId, 32): index for index, head in enumerate(heads)}
    diagnostics = source.diagnostics
    append, pending = joiner.append, joiner.pending
    plain = _msgspec.decode_attributes  # type: ignore[union-attr]
    decode = _msgspec.decode_known_attributes  # type: ignore[union-attr]  # until a key the SDK does not write
    touched: set[str] = set()
    typed = True  # False from the first span whose attributes the typed decode rejects
    count = len(heads)
    try:
        for start in range(0, count, PIECE_SPANS):
            stop = min(start + PIECE_SPANS, count)
            for index in range(start, stop):
                head = heads[index]
                if typed:
                    try:
                        try:
                            attributes = decode(head.attributes) if head.attributes is not None else None
                        except _msgspec.ValidationError:  # type: ignore[union-attr]
                            if decode is plain:
                                raise
                            decode = plain  # another instrumentation's keys: plain strings for the rest of the line
                            attributes = plain(head.attributes)
                    except _MSGSPEC_ERRORS:
                        typed = False
                if typed:
                    span = struct_span(head, attributes, source, line)
                    if span is not None and append(span):
                        touched.add(span.trace_id)
                else:  # the head passed msgspec, which is stricter than json: json reads it
                    span = json_span(_msgspec.parsed_span(head), source, line)  # type: ignore[union-attr]
                    if span is not None:
                        append(span)
            for trace in joiner.due_before(last, stop):
                diagnostics.holding = True
                yield trace
                diagnostics.holding = False
    finally:
        diagnostics.holding = False
        diagnostics.release()
    yield from joiner.flush()
    for trace_id in touched:
        waiting = pending.get(trace_id)
        if waiting is not None:
            for span in waiting.spans:
                if span.line == line and span.source is source:
                    span.detach()
