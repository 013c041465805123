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
import math
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.semconv.attributes.exception_attributes import EXCEPTION_TYPE
from opentelemetry.trace import StatusCode

from .._internal import names

__all__ = ["ConsoleTreeExporter"]

_logger = logging.getLogger("ragtrace")

WIDTH = 100
_MAX_BUFFERED_SPANS = 10_000

_BRANCH, _LAST = "├─ ", "└─ "
_PIPE, _BLANK = "│  ", "   "

# The figures shown under a pipeline root, in this order, and their labels.
_FIGURES: tuple[tuple[str, str], ...] = (
    *(
        (names.metric_attribute(metric), metric)
        for metric in (
            names.METRIC_RETRIEVED,
            names.METRIC_IN_CONTEXT,
            names.METRIC_CITED,
            names.METRIC_INVALID_CITATIONS,
            names.METRIC_OUT_OF_CONTEXT_CITATIONS,
            names.METRIC_UNKNOWN_CITATIONS,
            names.METRIC_RECALL_PROXY,
            names.METRIC_RECALL_PROXY_WEIGHTED,
            names.METRIC_CONTEXT_PRECISION,
            names.METRIC_CONTEXT_UTILIZATION,
            names.METRIC_WASTED_CONTEXT_TOKENS,
            names.METRIC_DUPLICATE_CHUNKS,
            names.METRIC_CITED_POSITIONS,
        )
    ),
    (names.RAG_METRICS_STATUS, "status"),
)


# --- small formatters -------------------------------------------------------------------------
def _clean(text: object) -> str:
    """One line of printable text: control characters (newlines...) become spaces."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any) -> str:
    if _is_int(value):
        return str(value)
    if isinstance(value, float):
        return f"{value:.2f}" if math.isfinite(value) else "n/a"
    return _clean(value)


def _value(value: Any) -> str:
    """A figure's value: numbers to 2 decimals, arrays as ``[1, 3]``."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_number(item) for item in value) + "]"
    return _number(value)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _sequence(value: Any) -> Sequence[Any] | None:
    return value if isinstance(value, (list, tuple)) else None


def _count(attributes: Mapping[str, Any], count_key: str, list_key: str) -> int | None:
    value = attributes.get(count_key)
    if _is_int(value):
        return value
    items = _sequence(attributes.get(list_key))
    return len(items) if items is not None else None


def _duration(span: ReadableSpan) -> str:
    if span.start_time is None or span.end_time is None:
        return "? ms"
    return f"{(span.end_time - span.start_time) / 1e6:.1f} ms"


def _error(span: ReadableSpan) -> str | None:
    """``ERROR <error.type>`` for a span whose status is ERROR, else None."""
    status = span.status
    if status is None or status.status_code is not StatusCode.ERROR:
        return None
    error_type = (span.attributes or {}).get(names.ERROR_TYPE)
    if not error_type:
        for event in span.events:
            error_type = (event.attributes or {}).get(EXCEPTION_TYPE)
            if error_type:
                break
    return f"ERROR {_clean(error_type)}" if error_type else "ERROR"


# --- per-stage summaries ----------------------------------------------------------------------
def _pipeline(attributes: Mapping[str, Any]) -> list[str]:
    query_id = attributes.get(names.RAG_QUERY_ID)
    return [f"query={_clean(query_id)}"] if query_id else []


def _embed(attributes: Mapping[str, Any]) -> list[str]:
    parts = []
    dimensions = attributes.get(names.GEN_AI_EMBEDDINGS_DIMENSION_COUNT)
    if _is_int(dimensions):
        parts.append(f"{dimensions} dims")
    tokens = attributes.get(names.GEN_AI_USAGE_INPUT_TOKENS)
    if _is_int(tokens):
        parts.append(_plural(tokens, "token"))
    return parts


def _unreadable(attributes: Mapping[str, Any]) -> list[str]:
    count = attributes.get(names.RAG_UNREADABLE_ITEMS)
    return [f"{count} unreadable"] if _is_int(count) and count > 0 else []


def _retrieve(attributes: Mapping[str, Any]) -> list[str]:
    parts = []
    count = _count(attributes, names.RAG_RETRIEVAL_RESULT_COUNT, names.RAG_RETRIEVAL_CHUNK_IDS)
    if count is not None:
        text = _plural(count, "chunk")
        top = attributes.get(names.RAG_RETRIEVAL_TOP_SCORE)
        if _is_number(top) and math.isfinite(top):
            text += f" top={top:.2f}"
        parts.append(text)
    return parts + _unreadable(attributes)


def _rerank(attributes: Mapping[str, Any]) -> list[str]:
    parts = []
    before = _count(attributes, names.RAG_RERANK_INPUT_COUNT, names.RAG_RERANK_INPUT_IDS)
    after = _count(attributes, names.RAG_RERANK_OUTPUT_COUNT, names.RAG_RERANK_OUTPUT_IDS)
    if before is not None and after is not None:
        parts.append(f"{before}→{after}")
    elif after is not None:
        parts.append(f"→{after}")
    return parts + _unreadable(attributes)


def _reasons(reasons: Sequence[Any]) -> str:
    counts: dict[str, int] = {}
    for reason in reasons:
        key = _clean(reason)
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(reason if n == 1 else f"{reason}×{n}" for reason, n in counts.items())


def _assemble(attributes: Mapping[str, Any]) -> list[str]:
    parts = []
    placed = _sequence(attributes.get(names.RAG_CONTEXT_CHUNK_IDS))
    if placed is not None:
        parts.append(f"{len(placed)} in context")
    tokens = attributes.get(names.RAG_CONTEXT_TOTAL_TOKENS)
    budget = attributes.get(names.RAG_CONTEXT_MAX_TOKENS)
    if _is_int(tokens):
        parts.append(f"{tokens}/{budget} tokens" if _is_int(budget) else _plural(tokens, "token"))
    dropped = _sequence(attributes.get(names.RAG_CONTEXT_DROPPED_IDS))
    if dropped:
        reasons = _sequence(attributes.get(names.RAG_CONTEXT_DROPPED_REASONS)) or ()
        parts.append(f"{len(dropped)} dropped ({_reasons(reasons)})" if reasons else f"{len(dropped)} dropped")
    truncated = attributes.get(names.RAG_CONTEXT_TRUNCATED_COUNT)
    if _is_int(truncated) and truncated > 0:
        parts.append(f"{truncated} truncated")
    return parts + _unreadable(attributes)


def _generate(attributes: Mapping[str, Any]) -> list[str]:
    parts = []
    role = attributes.get(names.RAG_GENERATION_ROLE)
    if role and role != names.ROLE_ANSWER:
        parts.append(f"role={_clean(role)}")
    positions = _sequence(attributes.get(names.metric_attribute(names.METRIC_CITED_POSITIONS)))
    cited_ids = _sequence(attributes.get(names.RAG_CITATION_IDS))
    conformant = attributes.get(names.RAG_CITATION_CONFORMANT)
    citations = ""
    unscored = attributes.get(names.RAG_CITATION_STATUS)
    if unscored:  # "cites none" would misstate an answer whose citations could not be checked
        citations = f"citations not scored ({_clean(unscored)})"
    elif positions is not None:
        citations = "cites [" + ",".join(_number(p) for p in positions) + "]"
    elif cited_ids:
        citations = "cites [" + ",".join(_clean(c) for c in cited_ids) + "]"
    elif isinstance(conformant, bool):
        citations = "cites none"
    if isinstance(conformant, bool) and not unscored:
        citations += " conformant" if conformant else " non-conformant"
    if citations:
        parts.append(citations)
    invalid = attributes.get(names.RAG_CITATION_INVALID_COUNT)
    if _is_int(invalid) and invalid > 0:
        parts.append(f"{invalid} invalid")
    tokens_in = attributes.get(names.GEN_AI_USAGE_INPUT_TOKENS)
    tokens_out = attributes.get(names.GEN_AI_USAGE_OUTPUT_TOKENS)
    if _is_int(tokens_in) and _is_int(tokens_out):
        parts.append(f"{tokens_in} in / {tokens_out} out tokens")
    elif _is_int(tokens_in):
        parts.append(f"{tokens_in} in tokens")
    elif _is_int(tokens_out):
        parts.append(f"{tokens_out} out tokens")
    return parts


_SUMMARIES: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    names.STAGE_PIPELINE: _pipeline,
    names.STAGE_EMBED: _embed,
    names.STAGE_RETRIEVE: _retrieve,
    names.STAGE_RERANK: _rerank,
    names.STAGE_ASSEMBLE: _assemble,
    names.STAGE_GENERATE: _generate,
}


def _figures(attributes: Mapping[str, Any]) -> list[str]:
    rows = [(label, _value(attributes[key])) for key, label in _FIGURES if key in attributes]
    if not rows:
        return []
    width = max(len(label) for label, _ in rows)
    return [f"{label.ljust(width)}  {value}" for label, value in rows]


# --- the tree ---------------------------------------------------------------------------------
def _line(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    parts = [_clean(span.name), _duration(span)]
    error = _error(span)
    if error:
        parts.append(error)
    summarise = _SUMMARIES.get(attributes.get(names.RAG_STAGE))  # type: ignore[arg-type]
    if summarise is not None:
        summary = summarise(attributes)
        if summary:
            parts.append(", ".join(summary))
    return "  ".join(parts)


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
        lines.append(_fit(own + _line(span)))
        kids = children.get(span_id, [])
        if (span.attributes or {}).get(names.RAG_STAGE) == names.STAGE_PIPELINE:
            lead = inner + (_PIPE if kids else _BLANK)
            lines.extend(_fit(lead + row) for row in _figures(span.attributes or {}))
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
