"""Per-run verdicts: ok, check (with the bars missed) or not measurable (with why)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .._internal.core.figures import (
    STATUS_CITATIONS_FILE_LEVEL,
    STATUS_FILES_UNKNOWN,
    STATUS_EMPTY_CONTEXT,
    STATUS_EMPTY_RETRIEVAL,
    STATUS_NO_ANSWER,
    STATUS_NO_CONTEXT,
    STATUS_NO_RETRIEVAL,
    STATUS_CITED_REFERENCES_ONLY,
    STATUS_RESULTS_NOT_INCLUDED,
    STATUS_RETRIEVAL_TRUNCATED,
    STATUS_SOURCE_UNREADABLE,
    STATUS_UNREADABLE_RETRIEVAL,
)
from .._internal.names import (
    STATUS_ANSWER_CALL_AMBIGUOUS,
    METRIC_CONTEXT_PRECISION,
    METRIC_CONTEXT_UTILIZATION,
    METRIC_INVALID_CITATIONS,
    METRIC_OUT_OF_CONTEXT_CITATIONS,
    METRIC_RECALL_PROXY,
    METRIC_RECALL_PROXY_WEIGHTED,
    METRIC_UNKNOWN_CITATIONS,
)
from .row import (
    STATUS_ATTRIBUTES_LOST,
    STATUS_INCOMPLETE,
    STATUS_NO_CHUNK_TEXT,
    STATUS_NO_PROMPT,
    STATUS_PROMPT_TOO_LARGE,
    STATUS_SPANS_MISSING,
    Row,
)
from .settings import below

VERDICT_OK = "ok"
VERDICT_CHECK = "check"
VERDICT_NOT_MEASURABLE = "not measurable"
SEVERITY = {VERDICT_CHECK: 0, VERDICT_NOT_MEASURABLE: 1, VERDICT_OK: 2}

REASON_TEXT = {
    STATUS_NO_RETRIEVAL: "no retrieval",
    STATUS_EMPTY_RETRIEVAL: "empty retrieval",
    STATUS_UNREADABLE_RETRIEVAL: "retrieved chunks unreadable",
    STATUS_RETRIEVAL_TRUNCATED: "retrieval over max_retrieved (only the first recorded)",
    STATUS_NO_CONTEXT: "no context recorded",
    STATUS_EMPTY_CONTEXT: "empty context",
    STATUS_NO_ANSWER: "no answer",
    STATUS_INCOMPLETE: "incomplete trace (root span missing)",
    STATUS_ATTRIBUTES_LOST: "ragtrace attributes missing",
    STATUS_SPANS_MISSING: "spans missing (recorded figures differ)",
    STATUS_NO_CHUNK_TEXT: "no chunk text to locate",
    STATUS_NO_PROMPT: "no prompt to search",
    STATUS_PROMPT_TOO_LARGE: "prompt too large to search",
    STATUS_ANSWER_CALL_AMBIGUOUS: "several model calls show some of the same chunks; which one answered can't be told",
    STATUS_CITATIONS_FILE_LEVEL: "citations name files, not chunks (a cited file has several results; the file_* figures are measured)",
    STATUS_FILES_UNKNOWN: "the file of a retrieved or in-context chunk is not known (no file-level figures)",
    STATUS_RESULTS_NOT_INCLUDED: 'file_search results not included (include=["file_search_call.results"])',
    STATUS_SOURCE_UNREADABLE: "a source's text is unreadable (PDF)",
    STATUS_CITED_REFERENCES_ONLY: "only the cited references were returned (retrieve_and_generate)",
}

SHORT = {
    METRIC_CONTEXT_PRECISION: "precision",
    METRIC_RECALL_PROXY: "recall",
    METRIC_RECALL_PROXY_WEIGHTED: "recall_w",
    METRIC_CONTEXT_UTILIZATION: "utilization",
}


def reason_text(status: str) -> str:
    return REASON_TEXT.get(status, status.replace("_", " "))


@dataclass(frozen=True, slots=True)
class Verdict:
    label: str
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return self.label + (": " + "; ".join(self.reasons) if self.reasons else "")


def verdict(row: Row, thresholds: Mapping[str, float]) -> Verdict:
    """ok, check (with the bars missed) or not measurable (with why)."""
    if not row.measurable:
        return Verdict(VERDICT_NOT_MEASURABLE, tuple(reason_text(s) for s in row.status[:2]) or ("no figures",))
    reasons = []
    for metric, bar in thresholds.items():
        value = row.figures.get(metric)
        if isinstance(value, (int, float)) and below(value, bar):
            reasons.append(f"{SHORT.get(metric, metric)}<{bar:g}")
    if row.nonconformant:
        reasons.append("no citations")
    invalid = row.figures.get(METRIC_INVALID_CITATIONS)
    if invalid:
        reason = f"{invalid} invalid citation{'s' if invalid != 1 else ''}"
        out_of_context, unknown = row.figures.get(METRIC_OUT_OF_CONTEXT_CITATIONS), row.figures.get(METRIC_UNKNOWN_CITATIONS)
        if isinstance(out_of_context, int) and isinstance(unknown, int):
            reason += f" ({out_of_context} out of context, {unknown} unknown)"
        reasons.append(reason)
    return Verdict(VERDICT_CHECK if reasons else VERDICT_OK, tuple(reasons))
