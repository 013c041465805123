"""One pipeline run as a record: the ``traces`` entries of ``report --json``, also spooled while the
report reads its input, and the values every output shows the same way (times, queries kept off
by redaction, whether the answers cite)."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from .._internal import names
from .traces import Row
from .verdicts import Verdict

REDACTED = "(redacted)"


_ROW_FIGURES = (
    names.METRIC_RETRIEVED,
    names.METRIC_IN_CONTEXT,
    names.METRIC_CITED,
    names.METRIC_CONTEXT_PRECISION,
    names.METRIC_RECALL_PROXY,
    names.METRIC_RECALL_PROXY_WEIGHTED,
    names.METRIC_CONTEXT_UTILIZATION,
    names.METRIC_WASTED_CONTEXT_TOKENS,
    names.METRIC_DUPLICATE_CHUNKS,
    names.METRIC_INVALID_CITATIONS,
    names.METRIC_OUT_OF_CONTEXT_CITATIONS,
    names.METRIC_UNKNOWN_CITATIONS,
    names.METRIC_CITED_POSITIONS,
)


def iso_time(time_ns: int) -> str | None:
    if not time_ns:
        return None
    try:
        moment = _dt.datetime.fromtimestamp(time_ns / 1e9, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    return value


def shown_query(row: Row) -> str | None:
    if row.query is not None:
        return row.query
    if row.content_mode in ("redact", "hash"):
        return REDACTED
    return None


def citation_text(row: Row) -> str:
    if not row.answers:
        return "-"
    if row.nonconformant == 0:
        return "yes"
    if row.nonconformant == row.answers:
        return "none"
    return f"{row.answers - row.nonconformant}/{row.answers}"


def row_record(row: Row, row_verdict: Verdict) -> dict[str, Any]:
    """One run as a JSON object (the ``traces`` entries of ``report --json``)."""
    record: dict[str, Any] = {
        "trace_id": row.trace_id,
        "span_id": row.span_id,
        "time": iso_time(row.time),
        "pipeline": row.pipeline,
        "labels": row.labels,
        "query": shown_query(row),
        "query_id": row.query_id,
        "source": row.source,
        "inferred": row.inferred,
        "inclusion": row.inclusion,
        "top_k": row.top_k,
    }
    for metric in _ROW_FIGURES:
        record[metric] = row.figures.get(metric)
    record.update((m, row.figures[m]) for m in names.FILE_METRICS if m in row.figures)  # where citations name files
    record.update(
        {
            "answers": row.answers,
            "answers_without_citations": row.nonconformant,
            "citations": citation_text(row),
            "verdict": row_verdict.label,
            "reasons": list(row_verdict.reasons),
            "status": row.status,
            "recorded_mismatch": row.mismatches,
            "where": row.where,
        }
    )
    return clean(record)
