"""One pipeline run as the report sees it (``Row``), and what both ways of building rows share.

``traces`` builds rows from ragtrace's own spans, ``foreign`` from other instrumentations' spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._internal.core.figures import Answer, Figures, Placed, Retrieved
from .._internal.names import (
    INCLUSION_INFERRED,
    INCLUSION_LOCATED,
    EMITTED_PROXY_METRICS,
    METRIC_CITED_POSITIONS,
    METRIC_RECALL_PROXY,
    METRIC_WASTED_CONTEXT_TOKENS,
)
from .spans import Span

# the inclusion methods whose figures the report marks with "~"
APPROXIMATE_INCLUSION = frozenset({INCLUSION_LOCATED, INCLUSION_INFERRED})

SOURCE_RAGTRACE = "ragtrace"
SOURCE_OPENINFERENCE = "openinference"
SOURCE_OPENLLMETRY = "openllmetry"
SOURCE_GEN_AI = "gen_ai"
SOURCE_UNKNOWN = "unknown"

# reasons a row is not (fully) measurable, besides the statuses of figures.compute
STATUS_INCOMPLETE = "incomplete_trace"
STATUS_ATTRIBUTES_LOST = "attributes_missing"
STATUS_SPANS_MISSING = "spans_missing"
# a delegated root (ragtrace.inject) whose answering process's pipeline_segment is not in the input
STATUS_SEGMENT_MISSING = "pipeline_segment_missing"
STATUS_NO_CHUNK_TEXT = "chunk_text_unavailable"
STATUS_NO_PROMPT = "prompt_unavailable"
STATUS_PROMPT_TOO_LARGE = "prompt_too_large"


@dataclass(slots=True)
class Row:
    """One pipeline run: the figures and what the report groups and recommends on."""

    trace_id: str
    span_id: str
    where: str
    time: int = 0  # start of the run, unix nanoseconds (0: unknown)
    pipeline: str | None = None
    labels: dict[str, Any] = field(default_factory=dict)  # rag.pipeline.<key> -> value, by key
    query: str | None = None
    query_id: str | None = None
    query_hash: str | None = None
    content_mode: str | None = None
    source: str = SOURCE_RAGTRACE
    inferred: bool = False  # from another instrumentation's spans (see foreign)
    inclusion: str | None = None  # how the context was known: recorded, declared, provider, located, inferred (comma-joined if mixed)
    figures: dict[str, Any] = field(default_factory=dict)
    status: list[str] = field(default_factory=list)
    answers: int = 0
    nonconformant: int = 0  # answers with no parseable citation
    retrievals: int = 0
    empty_retrievals: int = 0
    retrieved_items: int = 0  # chunks returned, duplicates included
    top_k: int | None = None
    retrieved_ids: list[str] = field(default_factory=list)  # best rank first
    placed_depth: int | None = None  # deepest retrieval rank that reached the prompt
    mismatches: list[str] = field(default_factory=list)  # figures that differ from the recorded ones
    # what the HTML drill-down (runs.chunk_lines) reads, for the runs it shows: the rebuilt
    # retrievals, answers, unanswered contexts and (assemble span, placements, tokens known)
    # triples (None: rows from other instrumentations). References only: nothing is built for the
    # runs that are not shown.
    sources: tuple[Any, ...] | None = None

    @property
    def measurable(self) -> bool:
        return METRIC_RECALL_PROXY in self.figures

    @property
    def approximate(self) -> bool:
        """Whether the figures rest on chunk text searched for in the prompt (located, inferred),
        not on placements recorded or declared when the prompt was built."""
        return self.inclusion is not None and any(m in APPROXIMATE_INCLUSION for m in self.inclusion.split(","))


def end_order(span: Span) -> tuple[int, int]:
    return (span.end or span.start, span.start)


def retrieval_facts(
    row: Row,
    retrievals: Sequence[Sequence[Retrieved]],
    result: Figures,
    answers: Sequence[Answer],
    unanswered: Sequence[Sequence[Placed]],
) -> None:
    row.retrievals = len(retrievals)
    row.empty_retrievals = sum(1 for r in retrievals if not r)
    row.retrieved_items = sum(len(r) for r in retrievals)
    best: dict[str, int] = {}
    for retrieval in retrievals:
        for chunk in retrieval:
            known = best.get(chunk.id)
            if known is None or chunk.rank < known:
                best[chunk.id] = chunk.rank
    row.retrieved_ids = sorted(best, key=best.__getitem__)  # stable: equal ranks stay in first-seen order
    placed = {p.chunk_id for a in answers if a.placements is not None for p in a.placements}
    placed.update(p.chunk_id for placements in unanswered for p in placements)
    depths = [best[c] for c in placed if c in best]
    row.placed_depth = max(depths) if depths else None


def not_measurable(row: Row, reason: str) -> None:
    """Keep the sizes, drop every ratio: a partial trace must not look like a measurement."""
    for metric in EMITTED_PROXY_METRICS + (METRIC_WASTED_CONTEXT_TOKENS, METRIC_CITED_POSITIONS):
        row.figures.pop(metric, None)
    if reason not in row.status:
        row.status.insert(0, reason)
