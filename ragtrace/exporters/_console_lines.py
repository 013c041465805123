"""What the console tree prints for one span: its line (name, duration, error, the summary of its
RAG stage) and, under a pipeline root, the figures (``console`` draws the tree around them)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.semconv.attributes.exception_attributes import EXCEPTION_TYPE
from opentelemetry.trace import StatusCode

from .._internal import names

WIDTH = 100

# The figures shown under a pipeline root, in this order, and their labels.
FIGURES: tuple[tuple[str, str], ...] = (
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
            *names.FILE_METRICS,  # where citations name files
        )
    ),
    (names.RAG_METRICS_STATUS, "status"),
)


# --- small formatters -------------------------------------------------------------------------
def _clean(text: object) -> str:
    """One line of printable text: control characters (newlines...) become spaces."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))


def fit(line: str) -> str:
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
        if _is_number(top) and math.isfinite(top):  # a vector database's distance says so (lower is better)
            text += f" {'distance' if attributes.get(names.RAG_RETRIEVAL_SCORE_KIND) == 'distance' else 'top'}={top:.2f}"
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


def figure_rows(attributes: Mapping[str, Any]) -> list[str]:
    rows = [(label, _value(attributes[key])) for key, label in FIGURES if key in attributes]
    if not rows:
        return []
    width = max(len(label) for label, _ in rows)
    return [f"{label.ljust(width)}  {value}" for label, value in rows]


# --- one span ---------------------------------------------------------------------------------
def span_line(span: ReadableSpan) -> str:
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
