"""``ConsoleTreeExporter``: one readable span tree per trace, with the RAG facts of each stage.

::

    trace 0af7651916cd43dd8448eb211c80319c
    invoke_workflow answer  182.0 ms  query=q-7
    │  recall_proxy           0.40
    │  context_utilization    0.50
    ├─ retrieval docs  35.0 ms  5 chunks top=0.83
    ├─ rerank bge  20.0 ms  5→4
    ├─ assemble_context  1.0 ms  4 in context, 812/1000 tokens, 1 dropped (over_budget)
    └─ chat gpt-4o  110.0 ms  ERROR RateLimitError

Spans of a trace end child-first, so the exporter buffers them by trace id and prints a trace when
its local root arrives (a span without a parent, or with a remote parent). Whatever is still
buffered (a root that never ended, children that ended after their root) is printed, marked
incomplete, on ``force_flush()`` and ``shutdown()``. Plain text, lines of at most 100 columns.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import TextIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._internal import names
from ._console_lines import figure_rows, fit, span_line

__all__ = ["ConsoleTreeExporter"]

_logger = logging.getLogger("ragtrace")

_MAX_BUFFERED_SPANS = 10_000

_BRANCH, _LAST = "├─ ", "└─ "
_PIPE, _BLANK = "│  ", "   "


# --- the tree ---------------------------------------------------------------------------------
def _start(span: ReadableSpan) -> int:
    return span.start_time or 0


def render(spans: Iterable[ReadableSpan], *, complete: bool = True) -> str:
    """The text for the spans of one trace: a header, then a tree per local root."""
    spans = list(spans)
    if not spans:
        return ""
    by_id = {span.get_span_context().span_id: span for span in spans}
    children: dict[int, list[ReadableSpan]] = {}
    roots = []
    for span in spans:
        parent = span.parent
        if parent is not None and parent.span_id in by_id and parent.span_id != span.get_span_context().span_id:
            children.setdefault(parent.span_id, []).append(span)
        else:
            roots.append(span)
    for siblings in children.values():
        siblings.sort(key=_start)
    roots.sort(key=_start)

    trace_id = spans[0].get_span_context().trace_id
    lines = [f"trace {trace_id:032x}" + ("" if complete else "  (incomplete)")]
    seen: set[int] = set()
    # (span, prefix of its own line, prefix of its children's lines)
    stack: list[tuple[ReadableSpan, str, str]] = [(root, "", "") for root in reversed(roots)]
    while stack:
        span, own, inner = stack.pop()
        span_id = span.get_span_context().span_id
        if span_id in seen:  # duplicate ids: print once, never loop
            continue
        seen.add(span_id)
        lines.append(fit(own + span_line(span)))
        kids = children.get(span_id, [])
        if (span.attributes or {}).get(names.RAG_STAGE) == names.STAGE_PIPELINE:
            lead = inner + (_PIPE if kids else _BLANK)
            lines.extend(fit(lead + row) for row in figure_rows(span.attributes or {}))
        for index in range(len(kids) - 1, -1, -1):
            last = index == len(kids) - 1
            stack.append((kids[index], inner + (_LAST if last else _BRANCH), inner + (_BLANK if last else _PIPE)))
    return "\n".join(lines) + "\n"


class ConsoleTreeExporter(SpanExporter):
    """Print a readable span tree per trace to ``out`` (default: ``sys.stdout`` at print time).

    Never raises: an internal error is logged once (``logging.getLogger("ragtrace")``) and the
    export returns ``FAILURE``.
    """

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._buffer: dict[int, list[ReadableSpan]] = {}
        self._buffered = 0
        self._closed = False
        self._logged = False

    # -- SpanExporter ----------------------------------------------------------------------------
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            with self._lock:
                if self._closed:
                    return SpanExportResult.FAILURE
                texts = []
                for span in spans:
                    trace_id = span.get_span_context().trace_id
                    self._buffer.setdefault(trace_id, []).append(span)
                    self._buffered += 1
                    parent = span.parent
                    if parent is None or parent.is_remote:
                        texts.append(render(self._take_subtree(trace_id, span)))
                while self._buffered > _MAX_BUFFERED_SPANS and self._buffer:
                    oldest = next(iter(self._buffer))
                    texts.append(render(self._take_trace(oldest), complete=False))
                self._write(texts)
            return SpanExportResult.SUCCESS
        except Exception as error:  # noqa: BLE001 - an exporter never raises
            self._log_failure(error)
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            with self._lock:
                self._flush_leftovers()
            return True
        except Exception as error:  # noqa: BLE001
            self._log_failure(error)
            return False

    def shutdown(self) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                self._flush_leftovers()
        except Exception as error:  # noqa: BLE001
            self._log_failure(error)

    # -- internals -------------------------------------------------------------------------------
    def _log_failure(self, error: BaseException) -> None:
        if not self._logged:
            self._logged = True
            _logger.warning(
                "ragtrace: the console exporter failed (%s); spans are not printed. "
                "Further failures of this exporter are not logged.",
                type(error).__name__,
                exc_info=error,
            )

    def _take_trace(self, trace_id: int) -> list[ReadableSpan]:
        spans = self._buffer.pop(trace_id, [])
        self._buffered -= len(spans)
        return spans

    def _take_subtree(self, trace_id: int, root: ReadableSpan) -> list[ReadableSpan]:
        """Remove and return ``root`` and its buffered descendants; siblings under other roots stay."""
        spans = self._buffer.get(trace_id, [])
        children: dict[int, list[ReadableSpan]] = {}
        for span in spans:
            if span.parent is not None and span is not root:
                children.setdefault(span.parent.span_id, []).append(span)
        taken: dict[int, ReadableSpan] = {id(root): root}
        frontier = [root]
        while frontier:
            span = frontier.pop()
            for child in children.get(span.get_span_context().span_id, ()):
                if id(child) not in taken:
                    taken[id(child)] = child
                    frontier.append(child)
        rest = [span for span in spans if id(span) not in taken]
        if rest:
            self._buffer[trace_id] = rest
        else:
            self._buffer.pop(trace_id, None)
        self._buffered -= len(spans) - len(rest)
        return list(taken.values())

    def _flush_leftovers(self) -> None:
        texts = [render(self._take_trace(trace_id), complete=False) for trace_id in list(self._buffer)]
        self._write(texts)

    def _write(self, texts: list[str]) -> None:
        text = "".join(texts)
        if not text:
            return
        out = self._out if self._out is not None else sys.stdout
        out.write(text)
        flush = getattr(out, "flush", None)
        if flush is not None:
            flush()
